"""A small release of a join whose inputs never delete (``append_join.py``), applied with Python dict probes:
NEXMark q3's dozen auctions and dozen people per push of 1,000 events (issue 15).

The array path (``AppendJoin.apply``) costs about a hundred numpy calls per release whatever its size: 115 us for
q3's twenty rows, most of the cycle of a push. While both inputs hold their keys in dicts
(``synopses/small_append_index.py``) and a release has at most ``SMALL_ROWS`` rows, it is applied here: the same
pairs (digest-002a section 2.15: ΔL ⋈ R_old, then L_new ⋈ ΔR; a pair enters at the later of its rows' instants),
found by one dict lookup per released row, and emitted in the same order (the first set, then the second, each
in time order; stable), gathered by row number from both inputs' columns once the release is added.

The probes are made before anything is added (the new right rows probe the held left rows, then the new left
rows whose key is among the new right rows', found through one dict of those), so a release that would make
more than ``SMALL_PAIRS`` pairs (a hot key: Python per pair would cost more than the arrays' fixed cost) is
refused with nothing changed. When one side's new keys are distinct and none is held yet (NEXMark's new people
by id: ``_fresh``), that side's keys go into its dict first, with one ``update``, and the other side's new rows
probe held and new rows in one lookup each (ΔS ⋈ O_old, then O_new ⋈ S_new: the same pairs); a refusal then
takes those keys out again. On a refused release, as on any release over ``SMALL_ROWS`` rows or once more
than ``HOLD_ROWS`` rows are held (a dict entry costs about three times an array entry), both inputs move their
keys into the arrays for good and the array path applies it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dsms.batch import Batch
from dsms.operators.base import colmap
from synopses.small_append_index import SmallAppendIndexSynopsis

if TYPE_CHECKING:
    from dsms.operators.append_join import AppendJoin
    from dsms.operators.join import JoinOp

SMALL_ROWS = 512        # rows per release (both inputs) up to which dict probes beat the arrays
SMALL_PAIRS = 2048      # pairs per release up to which building them in Python does
HOLD_ROWS = 1 << 17     # rows held (both inputs) up to which the keys stay in the dicts


def small_release(aj: AppendJoin, op: JoinOp, parts: dict) -> bool:
    """Apply the release ``parts`` (per input, a batch of inserts) with dict probes and emit its pairs, if both
    inputs are in the dict form and the release is small; returns whether it did (else nothing changed, and
    the inputs are in the array form unless they were already not in the dict form)."""
    L, R = aj.sides
    dl, dr = L.keys, R.keys
    if dl is None or dr is None:
        return False
    lb, rb = parts.get(0), parts.get(1)
    n0 = len(lb) if lb is not None else 0
    n1 = len(rb) if rb is not None else 0
    if n0 + n1 > SMALL_ROWS or L.n + R.n + n0 + n1 > HOLD_ROWS:
        return _leave(aj)
    l0, r0 = L.n, R.n                         # the row numbers the released rows will get
    lc = _codes(op, 0, lb) if n0 else []
    rc = _codes(op, 1, rb) if n1 else []
    pt: list[int] = []                        # per pair: its instant, left row, right row
    pl: list[int] = []
    pr: list[int] = []
    fresh = None
    if n0 and n1:                             # a side whose new keys are distinct and not held: added first
        fresh = _fresh(rc, dr, r0)
        side = 1
        if fresh is None:
            fresh, side = _fresh(lc, dl, l0), 0
    if fresh is not None:
        # ΔS ⋈ O_old, then O_new's rows probe S_new (held and new at once: a pair with a new row of S at the
        # later instant), S being that side; undone (the keys taken out again) if the pairs are too many
        if side:
            if dl:
                _probe_held(rc, dl, rb, r0, pt, pr, pl)
            dr.update(fresh)
            _probe_new(lc, dr, lb, rb, l0, r0, pt, pl, pr)
        else:
            if dr:
                _probe_held(lc, dr, lb, l0, pt, pl, pr)
            dl.update(fresh)
            _probe_new(rc, dl, rb, lb, r0, l0, pt, pr, pl)
        if len(pt) > SMALL_PAIRS:
            held = dr if side else dl
            for k in fresh:
                del held[k]
            return _leave(aj)
        if side:
            L.add_small(lb.cols, lc)
            R.add_fresh(rb.cols, len(fresh))
        else:
            L.add_fresh(lb.cols, len(fresh))
            R.add_small(rb.cols, rc)
    else:
        if n0 and dr:                         # new left rows x right rows held
            _probe_held(lc, dr, lb, l0, pt, pl, pr)
        if n1 and dl:                         # new right rows x left rows held
            _probe_held(rc, dl, rb, r0, pt, pr, pl)
        if n1 and n0:                         # ... and new left rows, at the later instant of the two
            _new_pairs(lc, rc, lb, rb, l0, r0, pt, pl, pr)
        if len(pt) > SMALL_PAIRS:
            return _leave(aj)
        if n0:
            L.add_small(lb.cols, lc)
        if n1:
            R.add_small(rb.cols, rc)
    if not pt:
        return True
    n = len(pt)
    ts, rl, rr = np.array(pt, dtype=np.int64), np.array(pl, dtype=np.int64), np.array(pr, dtype=np.int64)
    if n > 1 and (ts[1:] < ts[:-1]).any():
        # in time order, stably: the first set's pairs (each in time order) before the second's at an instant
        o = ts.argsort(kind="stable")
        ts, rl, rr = ts[o], rl[o], rr[o]
    keep = op.keep
    if keep is not None and op.predicate is None:     # a projection folded into the join: its columns only
        op.emit(Batch(ts, np.ones(n, dtype=np.int8), _kept(L, R, rl, rr, keep)))
        return True
    out = Batch(ts, np.ones(n, dtype=np.int8), L.gather(rl) + R.gather(rr))
    if op.predicate is not None:
        out = out.take(op.predicate(colmap(out), n))
    if keep is not None:                      # a selection fused into the join keeps these columns
        out = Batch(out.ts, out.sign, [out.cols[k] for k in keep])
    op.emit(out)
    return True


def _kept(L: SmallAppendIndexSynopsis, R: SmallAppendIndexSynopsis, rl: np.ndarray, rr: np.ndarray,
          keep: list[int]) -> list[np.ndarray]:
    """The columns numbered ``keep`` (left, then right) of the pairs of left rows ``rl`` and right rows ``rr``,
    each gathered once and only those."""
    wl = L.width
    lk = sorted({k for k in keep if k < wl})
    rk = sorted({k - wl for k in keep if k >= wl})
    got = dict(zip(lk, L.columns(lk, rl))) if lk else {}
    if rk:
        got.update(zip([k + wl for k in rk], R.columns(rk, rr)))
    return [got[k] for k in keep]


def _fresh(codes: list[int], held: dict, first: int) -> dict | None:
    """Key code -> row number (from ``first``) of a side's new rows when their keys are distinct and none is
    held already (new people by id), made without Python per row; else None."""
    if not held.keys().isdisjoint(codes):
        return None
    out = dict(zip(codes, range(first, first + len(codes))))
    return out if len(out) == len(codes) else None


def _probe_new(codes: list[int], held: dict, batch: Batch, other: Batch, first: int, other_first: int,
               pt: list[int], new: list[int], theirs: list[int]) -> None:
    """Append the pairs of a side's new rows (``codes``, numbered from ``first``, instants in ``batch``) with
    the other side's rows ``held``, new ones included (numbered from ``other_first``, instants in ``other``):
    each at the later of its two rows' instants."""
    if held.keys().isdisjoint(codes):
        return
    ts = batch.ts.tolist()
    ots = None
    for i, v in enumerate(map(held.get, codes)):
        if v is None:
            continue
        for w in ((v,) if type(v) is int else v):
            t = ts[i]
            if w >= other_first:
                if ots is None:
                    ots = other.ts.tolist()
                u = ots[w - other_first]
                if u > t:
                    t = u
            pt.append(t)
            new.append(first + i)
            theirs.append(w)


def _new_pairs(lc: list[int], rc: list[int], lb: Batch, rb: Batch, l0: int, r0: int, pt: list[int],
               pl: list[int], pr: list[int]) -> None:
    """Append the pairs of a new left row and a new right row (key codes ``lc``, ``rc``; numbered from ``l0``,
    ``r0``), each at the later of its two instants. New keys distinct on the right (new people by id) are
    looked up in one dict made without Python per row, and a release whose two sides share no key (most)
    costs one ``isdisjoint``."""
    at = dict(zip(rc, range(len(rc))))
    if at.keys().isdisjoint(lc):
        return
    lts, rts = lb.ts.tolist(), rb.ts.tolist()
    if len(at) == len(rc):                    # one new right row per key
        for i, j in enumerate(map(at.get, lc)):
            if j is not None:
                u, t = lts[i], rts[j]
                pt.append(u if u > t else t)
                pl.append(l0 + i)
                pr.append(r0 + j)
        return
    rows: dict[int, list[int]] = {}
    for j, k in enumerate(rc):
        rows.setdefault(k, []).append(j)
    for i, js in enumerate(map(rows.get, lc)):
        if js is not None:
            u = lts[i]
            for j in js:
                t = rts[j]
                pt.append(u if u > t else t)
                pl.append(l0 + i)
                pr.append(r0 + j)


def _probe_held(codes: list[int], held: dict, batch: Batch, first: int, pt: list[int], new: list[int],
                other: list[int]) -> None:
    """Append the pairs of a side's new rows (``codes``, numbered from ``first``) with the other side's rows
    ``held`` (key code -> a row number, or a list of them): each at its new row's instant, its row numbers to
    ``new`` and ``other``."""
    if held.keys().isdisjoint(codes):         # no match (most people are new sellers): no Python per row
        return
    ts = batch.ts.tolist()
    for i, v in enumerate(map(held.get, codes)):
        if v is None:
            continue
        if type(v) is int:
            pt.append(ts[i])
            new.append(first + i)
            other.append(v)
        else:
            pt.extend([ts[i]] * len(v))
            new.extend([first + i] * len(v))
            other.extend(v)


def _codes(op: JoinOp, side: int, batch: Batch) -> list[int]:
    """The join key code of each row as Python ints (a single INT key column: its values as they are)."""
    keys = op.keys[side]
    if len(keys) == 1:
        c = batch.cols[keys[0]]
        if c.dtype == np.int64:
            return c.tolist()
    return op._codes_of(side, batch).tolist()


def _leave(aj: AppendJoin) -> bool:
    """Both inputs' keys into the arrays, for good (the array path applies this release and every later one)."""
    for side in aj.sides:
        if isinstance(side, SmallAppendIndexSynopsis):
            side.to_arrays()
    return False
