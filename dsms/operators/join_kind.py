"""The kind of a join's state, exact or a bounded sample of each input's window, and the switch between them
at a future instant (issue 14 item 3: join synopses as a reservoir sample; SPEC section 8: a synopsis's
``kind`` knob). The same interface as DISTINCT's and the set operations' row state
(``dsms/operators/row_state_kind.py``): ``switch_kind``, ``kind_in_effect``, ``table_bytes``,
``approximation``, so that whoever governs memory can switch any operator alike.

A side of kind ``reservoir`` holds a ``WindowSample`` (``synopses/window_sample.py``) of the RANGE window it
reads (fused into the join or feeding it through projections and filters): the sample decides which of the
window's released deltas reach the join's index, and adds the deletes of sampled rows that new rows displace.
Those deltas are signed rows (a displaced row is no oldest row), applied by the join's signed path. A pair is
in the sampled join with probability p_L p_R (independent samples, one per side, also for a self-join), p =
rows held / rows in the window; COUNT and SUM above the join are scaled by 1 / (p_L p_R) where results are
delivered (``LoadShedder.scale_rate``), AVG is not.

Switching (``switch_kind(kind)``, or a side's ``kind`` knob) applies to the instants after the last one the
join has applied, so no instant is split:

* exact -> reservoir: the rows held (the window's, oldest first) are sampled as a reservoir would have, and
  the rest are deleted at the next instant through the signed path (their pairs are retracted then);
* reservoir -> exact: a sample cannot give back the rows it dropped, so it drains: rows entering from then on
  are all kept, sampled rows leave with the window, and deletes of rows that were not sampled are still
  dropped; once every row from before the switch has left, the side is exact again (``in_effect`` reads
  ``draining`` until then, and results stay marked approximate, scaled by the ratio of rows held).
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from dsms.approx import Approx
from dsms.batch import Batch
from synopses.window_sample import WindowSample

KINDS = ("exact", "reservoir")
Z95 = 1.96


class JoinStateKind:
    """Mixin of ``JoinOp``: ``self.sides`` are its two indexes, ``self.gates`` their samples (None: exact)."""

    def init_join_kind(self) -> None:
        self.gates: list[WindowSample | None] = [None, None]
        self.gated: list[list[Batch]] = [[], []]          # sampled deltas waiting to be applied (time order)
        self.copies = [[0, 0], [0, 0]]                      # per side, copies entered and left while exact
        self.pending_kinds: list[str | None] = [None, None]
        self.sampled_from: list[int | None] = [None, None]  # per side, the instant its sample took effect
        self.fifo_windows = [None, None]                    # the RANGE window each side reads (planner)
        self.seed_base = 0
        self.switches = 0
        self.applied_until: int | None = None               # the last instant fully applied
        for side, syn in enumerate(self.sides):
            syn.on_kind = (lambda kind, side=side: self._request(side, kind))

    # ---------------------------------------------------------------- the interface

    def kind_in_effect(self) -> str:
        kinds = [self._side_kind(s) for s in (0, 1)]
        for k in ("reservoir", "draining"):
            if k in kinds:
                return k
        return "exact"

    def _side_kind(self, side: int) -> str:
        g = self.gates[side]
        if g is None:
            return "exact"
        return "draining" if g.exact_from is not None else "reservoir"

    def switch_kind(self, kind: str) -> None:
        """Ask for state of ``kind`` (exact or reservoir) on both inputs from the next instant on; raises
        ValueError (and changes nothing) for an unknown kind or a switch that cannot happen."""
        for side in (0, 1):
            self._check(side, kind)
        for side in (0, 1):
            self._request(side, kind)
            syn = self.sides[side]
            object.__setattr__(syn, type(syn).state_kind.slot, kind)

    @property
    def pending_kind(self) -> str | None:
        """A kind asked for on either input and not in effect yet (what the memory governor reads so that it
        does not ask twice); None when nothing is pending."""
        return next((k for k in self.pending_kinds if k is not None), None)

    def projected_bytes(self, kind: str) -> int | None:
        """Bytes the join's indexes would hold in ``kind`` if switched now, for the memory governor to weigh
        a switch against what it frees: a sampled input keeps at most its ``reservoir_rows`` of the rows it
        holds, at their present bytes per row; None for exact from a sample (the rows dropped are known only
        once they are back). Raises ValueError for a kind a join does not take."""
        if kind not in KINDS:
            raise ValueError(f"unknown synopsis kind {kind!r} for a join; it takes one of {', '.join(KINDS)}")
        if kind == "reservoir" and self.kind_in_effect() == "exact":
            for side in (0, 1):
                self._check(side, kind)           # a switch that cannot happen has no projection either
        if kind == self.kind_in_effect():
            return sum(s.nbytes() for s in self.sides)
        if kind == "exact":
            return None
        total = 0
        for syn in self.sides:
            n, b = len(syn), syn.nbytes()
            total += b if n <= syn.reservoir_rows else b * syn.reservoir_rows // n
        return total

    def table_bytes(self) -> int:
        """Bytes of the join's state: both indexes and their samples."""
        return sum(s.nbytes() for s in self.sides) + sum(g.nbytes() for g in self.gates if g is not None)

    def side_fraction(self, side: int) -> float:
        g = self.gates[side]
        return 1.0 if g is None else g.fraction()

    def sampling_rate(self) -> float:
        """The probability that a pair of the exact join is in the sampled one: p_L p_R (1 when exact)."""
        return self.side_fraction(0) * self.side_fraction(1)

    def sampling_rates_at(self, ts: np.ndarray) -> np.ndarray:
        """p_L p_R for result rows at the instants ``ts``: a sampled side counts from the instant its sample
        took effect; rows before it were computed from its exact state."""
        out = np.ones(len(ts))
        for side in (0, 1):
            if self.gates[side] is None:
                continue
            f, since = self.side_fraction(side), self.sampled_from[side]
            out *= f if since is None else np.where(ts >= since, f, 1.0)
        return out

    def approximation(self) -> Approx | None:
        """None while both inputs are exact. Sampled: the sampling rate p_L p_R and a bound on the relative
        error of the scaled join size (COUNT over the join) at 95%: 1.96 standard deviations of the estimate.

        The estimate N_L N_R mean(h) over the m_L x m_R sampled pairs (h: 1 when the keys are equal) is a
        two-sample U-statistic of samples drawn without replacement; by Hoeffding's decomposition its variance
        is N_L^2 (1 - f_L) s_1 / m_L + N_R^2 (1 - f_R) s_2 / m_R + N_L^2 N_R^2 (1 - f_L)(1 - f_R) s_12 / (m_L m_R)
        (f = m / N), with s_1 the variance over left rows of how many right rows match one (b of its key),
        s_2 the same for right rows, and s_12 the rest of the variance of h. They are estimated from the rows
        held, a key's rows as held / p. With no sampled pair the bound is infinite."""
        if self.gates[0] is None and self.gates[1] is None:
            return None
        p = [max(self.side_fraction(s), 1e-12) for s in (0, 1)]
        n = [max(g.window_rows, 1) if g is not None else max(len(self.sides[s]), 1)
             for s, g in enumerate(self.gates)]
        keys, counts = [], []
        for side in (0, 1):
            k, c = _key_counts(self.sides[side])
            keys.append(k)
            counts.append(c)
        m = [max(float(c.sum()), 1.0) for c in counts]
        _, i0, i1 = np.intersect1d(keys[0], keys[1], assume_unique=True, return_indices=True)
        a, b = counts[0][i0] / p[0], counts[1][i1] / p[1]
        total = float((a * b).sum())
        rate = min(1.0, max(p[0] * p[1], 1e-12))
        if total <= 0:
            return Approx(math.inf, 0.95, rate)
        f = [min(1.0, p[0]), min(1.0, p[1])]
        s1 = max(0.0, float((a * b * b).sum()) / n[0] - (total / n[0]) ** 2)
        s2 = max(0.0, float((a * a * b).sum()) / n[1] - (total / n[1]) ** 2)
        theta = min(1.0, total / (n[0] * n[1]))
        s12 = max(0.0, theta * (1 - theta) - s1 / n[1] ** 2 - s2 / n[0] ** 2)
        var = (n[0] ** 2 * (1 - f[0]) * s1 / m[0] + n[1] ** 2 * (1 - f[1]) * s2 / m[1]
               + (n[0] * n[1]) ** 2 * (1 - f[0]) * (1 - f[1]) * s12 / (m[0] * m[1]))
        return Approx(Z95 * math.sqrt(var) / total, 0.95, rate)

    # ---------------------------------------------------------------- requests and switches

    def _check(self, side: int, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown synopsis kind {kind!r} for a join; it takes one of {', '.join(KINDS)} "
                             "(bloom is for DISTINCT and set operations)")
        now = self._side_kind(side)
        if kind == "reservoir" and now == "draining":
            raise ValueError("the sample is still draining into exact state; switch again once in_effect "
                             "reads exact")
        if kind == "reservoir" and now == "exact":
            w = self.windows[side] or self.fifo_windows[side]
            if w is None or not w.retracts_in_order():
                raise ValueError(f"input {side} of the join is not a RANGE window of fixed size, whose deletes "
                                 "retract its rows first in, first out: the sample could not tell which copy "
                                 "of a row leaves")

    def _request(self, side: int, kind: str) -> None:
        self._check(side, kind)
        now = self._side_kind(side)
        if kind == now or (kind == "exact" and now == "draining"):
            self.pending_kinds[side] = None
            return
        self.pending_kinds[side] = kind

    def apply_switches(self) -> None:
        """Apply the requested switches: called as a release begins, before any of its rows (all later than
        the last instant applied)."""
        tau = (self.applied_until + 1) if self.applied_until is not None else None
        for side in (0, 1):
            kind, self.pending_kinds[side] = self.pending_kinds[side], None
            if kind == "exact":
                self.gates[side].drain()
            elif kind == "reservoir":
                self._to_sample(side, tau)
            self._show(side)

    def _to_sample(self, side: int, tau: int | None) -> None:
        """Sample the rows the side holds (the window's, oldest first: copies numbered from the ones that
        left); the rest are deleted at ``tau``. An index in its signed form (stored deletes, after rows of
        another order) cannot say which row is which copy: the switch then waits for a later release."""
        index = self.sides[side]
        if index.table is not None and not index._unsign():
            self.pending_kinds[side] = "reservoir"
            return
        entered, left = self.copies[side]
        log = index.log
        live = log.live_cols() if log is not None else []
        n = len(log) if log is not None else 0
        if entered - left != n:
            raise RuntimeError(f"{self.id}: input {side} holds {n} rows but {entered - left} copies of its "
                               "window were counted")
        (self.windows[side] or self.fifo_windows[side]).sampled_by.add(self.id)
        self.switches += 1
        seed = zlib.crc32(f"{self.seed_base}:{self.id}:{side}:{self.switches}".encode())
        gate = WindowSample(index.reservoir_rows, seed=seed, first_copy=left)
        self.gates[side] = gate
        self.sampled_from[side] = tau
        if not n:
            return
        kept = gate.seed(live)
        gone = np.flatnonzero(~kept)
        if len(gone):
            self.gated[side].insert(0, Batch(np.full(len(gone), tau, dtype=np.int64),
                                             np.full(len(gone), -1, dtype=np.int8), [c[gone] for c in live]))

    def _show(self, side: int) -> None:
        syn = self.sides[side]
        syn.in_effect = self._side_kind(side)
        syn.sampled_fraction = self.side_fraction(side)

    # ---------------------------------------------------------------- the deltas

    def count_copies(self, side: int, part) -> None:
        """Count the copies an exact side applies (what a later switch numbers its rows from)."""
        if self.gates[side] is not None or part is None:
            return
        c = self.copies[side]
        if type(part) is tuple:
            dels, ins = part
            c[0] += len(ins) if ins is not None else 0
            c[1] += len(dels) if dels is not None else 0
        else:
            pos = int((part.sign > 0).sum())
            c[0] += pos
            c[1] += len(part) - pos

    def gate(self, side: int, part) -> None:
        """Pass a sampled side's released deltas (a fused window's (deletes, inserts), or signed rows in time
        order) through its sample; what the index is to apply waits in ``gated``."""
        g = self.gates[side]
        if type(part) is tuple:
            dels, ins = part
        else:
            neg = part.sign < 0
            dels, ins = part.take(np.flatnonzero(neg)), part.take(np.flatnonzero(~neg))
        d = (dels.ts, dels.cols) if dels is not None and len(dels) else None
        i = (ins.ts, ins.cols) if ins is not None and len(ins) else None
        ts, sign, cols = g.step(d, i)
        if len(ts):
            self.gated[side].append(Batch(ts, sign, cols))
        self._show(side)

    def end_drain(self, side: int) -> None:
        """Every row from before the switch to exact has left and the sample's deltas are applied: the side
        is exact again. Its index goes back to arrival order (the newest copies of each row are the live
        ones, ``_Signed.compact``), which a later switch numbers copies by."""
        g = self.gates[side]
        self.gates[side] = None
        self.copies[side] = [g.n_in, g.n_out]
        (self.windows[side] or self.fifo_windows[side]).sampled_by.discard(self.id)
        index = self.sides[side]
        if index.table is not None and index.table.negatives:
            index.table.compact()
            index._unsign()
        self._show(side)


def _key_counts(index) -> tuple[np.ndarray, np.ndarray]:
    """The distinct key codes an index holds and how many rows hold each (stored deletes subtracted)."""
    keyed = index.key_counts() if hasattr(index, "key_counts") else None
    if keyed is not None:               # held by key (``synopses/keyed_index.py``): one row each
        return keyed
    if index.table is not None:
        t = index.table
        if not len(t.codes):
            return np.empty(0, np.int64), np.empty(0)
        keys, inv = np.unique(t.codes, return_inverse=True)
        cnt = np.bincount(inv.reshape(-1), weights=t.sign.astype(np.float64), minlength=len(keys))
    elif index.log is not None and len(index.log):
        keys, cnt = np.unique(index.log.live_codes(), return_counts=True)
        cnt = cnt.astype(np.float64)
    else:
        return np.empty(0, np.int64), np.empty(0)
    keep = cnt > 0
    return keys[keep], cnt[keep]
