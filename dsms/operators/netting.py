"""Per-instant netting: the shared core of ISTREAM, DSTREAM, RSTREAM and relation changelogs.

Source: SPEC section 3 (relation-to-stream operators compare R(τ) with R(τ-1) as bags; changes inside one
instant that cancel emit nothing; results for τ are final once every input has passed τ) and digest-004 P-6
(atomic instants). Deltas are buffered until the input frontier passes their instant; the instant's net change
per row is then computed in the order rows first appeared.
"""

from __future__ import annotations

import numpy as np

from dsms.batch import Batch, concat, from_rows, take_until
from dsms.operators.base import Operator
from dsms.operators.group_fold import fold_by_group
from dsms.operators.keyed_fold import fold_keyed
from synopses.base import deep_bytes
from synopses.rowcodes import hash_runs, hashed_codes, row_codes, row_hashes, segments
from synopses.sort_order import stable_argsort
from synopses.state import StateSynopsis


def cancel_adjacent(batch: Batch) -> Batch:
    """Drop each delete immediately followed by an insert of the same row at the same instant.

    Above an aggregate every changed group emits its old row and then its new row; a projection that drops
    the columns that changed (``SELECT g, AVG(x) .. HAVING COUNT(*) > 1``) makes the two equal, and an equal
    pair is no change at all (SPEC section 3)."""
    n = len(batch)
    if n < 2:
        return batch
    pair = (batch.sign[:-1] < 0) & (batch.sign[1:] > 0) & (batch.ts[:-1] == batch.ts[1:])
    for c in batch.cols:
        if not pair.any():
            return batch
        same = c[:-1] == c[1:]
        if c.dtype.kind == "f":               # NaN stays NaN: an equal pair too (contract)
            same |= np.isnan(c[:-1]) & np.isnan(c[1:])
        pair &= same
    if not pair.any():
        return batch
    drop = np.zeros(n, dtype=bool)
    idx = np.nonzero(pair)[0]
    # pairs cannot overlap (a pair starts with a delete and ends with an insert)
    drop[idx] = True
    drop[idx + 1] = True
    return batch.take(~drop)


_MIX = np.uint64(0xC2B2AE3D27D4EB4F)      # spreads the timestamp over the row hash's bits
SET_MAX = 1024                            # rows up to which a Python set finds cancelling pairs


def _none_cancel_by_number(ready: Batch, pos: np.ndarray) -> bool:
    """Whether one integer column shows that no insert can cancel a delete: an insert cancels only a delete of
    the same instant and row, so of the same value in that column; when no (instant, value) of an insert is
    one of a delete, nothing cancels and no other column (no string) is read. False when it cannot tell (no
    such column, or some pair shares them).

    >>> b = Batch(np.array([5, 5, 5]), np.array([-1, 1, 1], dtype=np.int8), [np.array([1, 2, 3])])
    >>> _none_cancel_by_number(b, b.sign > 0), _none_cancel_by_number(b, np.array([False, True, False]))
    (True, True)
    >>> b.cols[0][1] = 1
    >>> _none_cancel_by_number(b, b.sign > 0)
    False
    """
    col = next((c for c in ready.cols if c.dtype.kind in "iu" and c.dtype.itemsize == 8), None)
    if col is None:
        return False
    ts = ready.ts
    n = len(col)
    if n > SET_MAX and ts[0] == ts[-1]:     # one instant: the values themselves, by a table if they span little
        lo, hi = col.item(col.argmin()), col.item(col.argmax())
        if hi - lo < 4 * n + 1024:          # (ids of two windows' rows: NEXMark q8's persons, issue 15)
            at = col - lo
            deleted = np.zeros(hi - lo + 1, dtype=bool)
            deleted[at[~pos]] = True
            return not deleted[at[pos]].any()
    key = col.view(np.uint64) if ts[0] == ts[-1] else col.view(np.uint64) ^ (ts.view(np.uint64) * _MIX)
    ins, dels = key[pos], key[~pos]
    if not len(ins) or not len(dels):
        return True
    if len(key) <= SET_MAX:
        return set(ins.tolist()).isdisjoint(dels.tolist())
    ins = np.sort(ins)
    at = np.minimum(ins.searchsorted(dels), len(ins) - 1)
    return not (ins[at] == dels).any()


class NettingOperator(Operator):
    """Buffers deltas per instant; ``emit_instant`` receives each final instant's net changes in order."""

    def __init__(self, inputs, output, dtypes: list, label: str = "") -> None:
        super().__init__(inputs, output, label)
        self.dtypes = dtypes
        self.buffer: list[Batch] = []
        self.tick_times: list[int] = []
        self.state: dict[tuple, int] = {}
        self.synopses = [StateSynopsis("pending instants and relation", self._held_rows, self._held_bytes)]

    def _held_rows(self) -> int:
        return sum(len(b) for b in self.buffer) + len(self.state)

    def _held_bytes(self) -> int:
        return sum(b.nbytes for b in self.buffer) + deep_bytes(self.state)

    def held_rows(self) -> int:
        return sum(len(b) for b in self.buffer)

    def held_stamps(self) -> list[tuple[int, int]]:
        """(timestamp, rows) per instant of the deltas buffered until their instant is final (read only); a
        pending tick of the second input (RSTREAM's instants to report) counts as an instant without rows."""
        out: list[tuple[int, int]] = []
        for b in self.buffer:
            if len(b):
                ts, rows = np.unique(b.ts, return_counts=True)
                out += zip(ts.tolist(), rows.tolist())
        return out + [(int(t), 0) for t in sorted(set(self.tick_times))]

    def on_batch(self, i: int, batch: Batch) -> None:
        if i == 0:
            if len(batch):
                self.buffer.append(batch)
        else:
            self.tick_times.extend(np.unique(batch.ts).tolist())

    def on_frontier(self, f: int) -> None:
        """Release every instant below the frontier. Only the released batches are touched (the pending ones
        stay as they came), so a frontier costs in proportion to the instants it makes final."""
        if not self.buffer and not self.tick_times:
            return                          # nothing pending (an eager ISTREAM's every run)
        ready = None
        if self.buffer and self.buffer[0].ts[0] < f:
            done = take_until(self.buffer, f - 1)
            ready = concat(done) if done else None
        ticks = []
        if self.tick_times:
            ticks = sorted(set(t for t in self.tick_times if t < f))
            self.tick_times = [t for t in self.tick_times if t >= f]
        if ready is None and not ticks:
            return
        if not self.needs_rows and ready is not None:
            out = self.net_vectorised(ready)
            if out is not None:
                self.emit(out)
                return
        self.net_rows(ready, ticks)

    # subclasses that keep the whole relation (RSTREAM, views) need Python rows
    needs_rows = False

    def net_vectorised(self, ready: Batch) -> Batch | None:
        """Each instant's net change per distinct row, with numpy; None if the rows cannot be coded.

        A row's insert and delete cancel only within one instant, so when no instant can hold both for an
        equal row each row is its own net change (equal rows stay separate rows: the same multiset), and the
        rows need no coding. Two cheap tests show that: rows come in timestamp order, so an instant with both
        signs has two adjacent rows that differ in sign; and an insert can only cancel a delete with the same
        (instant, row hash)."""
        ts, sign = ready.ts, ready.sign
        flip = (ts[1:] == ts[:-1]) & (sign[1:] != sign[:-1])
        if not flip.any():
            return self._net_uncancelled(ready, False)
        pos = sign > 0
        if _none_cancel_by_number(ready, pos):
            return self._net_uncancelled(ready, True)
        key = row_hashes(ready.cols) ^ (ts.view(np.uint64) * _MIX)
        # a set beats a sort on a few hundred rows when no pair can cancel; when some may, grouping by the hashes
        # (one sort) beats coding the rows column by column (q9's output at 1,000 events per push: 340 rows a
        # release, four in ten cancelling)
        if len(key) <= SET_MAX and set(key[pos].tolist()).isdisjoint(key[~pos].tolist()):
            return self._net_uncancelled(ready, True)
        return self._net_hashed(ready, key)

    def _net_hashed(self, ready: Batch, key: np.ndarray) -> Batch | None:
        """The net change with rows grouped by their (instant, row) hash: one sort of the hashes instead of
        coding every column (``row_codes`` sorts each wide column) and sorting the codes. Equal hashes are
        only candidates, so every run of equal hashes is checked to hold one instant and one row (SQL
        equality, as ``value_keys``); a collision, which is rare, hands the batch to ``_net_coded``."""
        found = hash_runs([ready.ts, *ready.cols], key)
        if found is None:
            return self._net_coded(ready)
        order, start = found
        runs = np.flatnonzero(start)
        s = ready.sign[order].astype(np.int64)
        net = np.add.reduceat(s, runs)
        size = np.diff(np.append(runs, len(key)))
        if (np.abs(net) == size).all():                    # no run holds both signs: nothing cancels
            return self._net_uncancelled(ready, True)
        first = np.minimum.reduceat(order, runs)           # each row's first position (the sort is unstable)
        return self._net_runs(ready, net, first)

    def _net_uncancelled(self, ready: Batch, mixed: bool) -> Batch:
        """The net change when nothing cancels; with ``mixed`` (instants holding both signs) the kept rows are
        put deletes first within each instant, as the coded path orders them."""
        net, first, seg_ts = self.select_net(ready.sign.astype(np.int64), np.arange(len(ready)), ready.ts)
        if mixed and len(net) and (net > 0).any() and (net < 0).any():
            rank = np.lexsort((first, net > 0, seg_ts))
            net, first = net[rank], first[rank]
        out = ready.take(first)
        out.sign = self.out_sign(net).astype(np.int8, copy=False)
        return out

    def _net_coded(self, ready: Batch) -> Batch | None:
        """Net changes by coding whole rows: per (instant, row) the sum of signs, deletes first."""
        code = row_codes(ready.cols)
        if code is None:
            return None
        order, starts, ends = segments(ready.ts, code)
        net = np.add.reduceat(ready.sign[order].astype(np.int64), starts) if len(starts) else starts
        return self._net_runs(ready, net, order[starts])

    def _net_runs(self, ready: Batch, net: np.ndarray, first: np.ndarray) -> Batch:
        """The output for runs of equal (instant, row): ``net`` the sum of their signs, ``first`` the position
        where each first appeared; per instant, deletes first, each in order of first appearance."""
        keep = net != 0
        net, first = net[keep], first[keep]
        seg_ts = ready.ts[first]
        net, first, seg_ts = self.select_net(net, first, seg_ts)
        if len(net) == 0:
            return Batch(ready.ts[:0], ready.sign[:0], [c[:0] for c in ready.cols])
        rank = np.lexsort((first, net > 0, seg_ts))
        net, first = net[rank], first[rank]
        reps = np.abs(net)
        idx = np.repeat(first, reps)
        out = ready.take(idx)
        out.sign = np.repeat(self.out_sign(net), reps).astype(np.int8)
        return out

    def select_net(self, net, first, seg_ts):
        return net, first, seg_ts

    def out_sign(self, net: np.ndarray) -> np.ndarray:
        return np.sign(net)

    def net_rows(self, ready: Batch | None, ticks: list[int]) -> None:
        out_ts: list[int] = []
        out_sign: list[int] = []
        out_rows: list[tuple] = []
        changes: dict[int, dict[tuple, int]] = {}
        if ready is not None:
            for t, s, row in zip(ready.ts.tolist(), ready.sign.tolist(), ready.rows()):
                d = changes.get(t)
                if d is None:
                    d = changes[t] = {}
                d[row] = d.get(row, 0) + s
        instants = sorted(set(changes) | set(ticks))
        tickset = set(ticks)
        for t in instants:
            self.emit_instant(t, changes.get(t, {}), t in tickset, out_ts, out_sign, out_rows)
        if out_rows:
            self.emit(from_rows(out_ts, out_sign, out_rows, self.dtypes))

    def emit_instant(self, t: int, net: dict[tuple, int], tick: bool, out_ts, out_sign, out_rows) -> None:
        raise NotImplementedError


class ToStreamOp(NettingOperator):
    """ISTREAM, DSTREAM or RSTREAM (SPEC section 3). Stream elements always carry sign +1.

    When the input can never delete (a monotone plan), ISTREAM is the identity and passes batches through at
    once; that is what lets ``SELECT * FROM S`` return S without waiting for a heartbeat.
    """

    kind = "to_stream"

    def __init__(self, op: str, inputs, output, dtypes: list, eager: bool = False,
                 final_net: bool = False) -> None:
        super().__init__(inputs, output, dtypes, op + (" (eager)" if eager else " (final input)" if final_net
                                                        and op != "RSTREAM" else ""))
        self.final_net = final_net and op != "RSTREAM"
        self.op = op
        self.needs_rows = op == "RSTREAM"
        self.eager = eager and op == "ISTREAM"
        self.drop_all = eager and op == "DSTREAM"     # a relation that never deletes has an empty DSTREAM
        if self.eager and len(inputs) == 1:
            self._frontier_noop = True    # nothing is ever buffered: ``run`` skips ``on_frontier`` (issue 15)


    def on_batch(self, i: int, batch: Batch) -> None:
        if self.final_net and i == 0:
            batch = cancel_adjacent(batch)
            keep = batch.sign > 0 if self.op == "ISTREAM" else batch.sign < 0
            out = batch.take(keep)
            out.sign = np.ones(len(out), dtype=np.int8)
            self.emit(out)
        elif self.eager and i == 0:
            self.output.put(batch)          # not ``emit``: a batch read from a queue has rows
        elif self.drop_all and i == 0:
            return
        else:
            super().on_batch(i, batch)

    def select_net(self, net, first, seg_ts):
        keep = net > 0 if self.op == "ISTREAM" else net < 0
        return net[keep], first[keep], seg_ts[keep]

    def _net_uncancelled(self, ready: Batch, mixed: bool) -> Batch:
        """Nothing cancels: ISTREAM's result is the inserts as they come, DSTREAM's the deletes (with one sign
        kept, the order of deletes before inserts within an instant does not arise)."""
        idx = np.flatnonzero(ready.sign > 0 if self.op == "ISTREAM" else ready.sign < 0)
        if len(idx) and idx[-1] - idx[0] + 1 == len(idx):
            out = ready.slice(int(idx[0]), int(idx[-1]) + 1)   # one run (a release's inserts after its deletes)
        else:
            out = ready.take(idx)
        out.sign = np.ones(len(out), dtype=np.int8)
        return out

    def out_sign(self, net: np.ndarray) -> np.ndarray:
        return np.ones(len(net), dtype=np.int8)

    def emit_instant(self, t, net, tick, out_ts, out_sign, out_rows) -> None:
        if self.op == "RSTREAM":
            st = self.state
            for row, d in net.items():
                c = st.get(row, 0) + d
                if c > 0:
                    st[row] = c
                else:
                    st.pop(row, None)
            if tick:
                for row, c in st.items():
                    for _ in range(c):
                        out_ts.append(t)
                        out_sign.append(1)
                        out_rows.append(row)
            return
        want = 1 if self.op == "ISTREAM" else -1
        for row, d in net.items():
            if d * want > 0:
                for _ in range(abs(d)):
                    out_ts.append(t)
                    out_sign.append(1)
                    out_rows.append(row)


class ChangelogOp(NettingOperator):
    """The sink of a relation-valued query: each final instant's net change, deletes before inserts. It keeps
    the current relation, each live copy with the instant it entered, so that a query registered later on a
    view starts from the view's contents stamped as a base relation's are (contract, "Registration time").

    The relation is kept as what was emitted: a log of the output batches, folded into the live copies (a
    batch of rows stamped with their entry instants) only when a snapshot is asked for or the log has grown
    to twice the relation it folds into. Folding is numpy over coded rows (``fold_changelog``), so a view pays
    no Python per row for its later readers."""

    kind = "changelog"

    def __init__(self, inputs, output, dtypes: list, eager: bool = False, keep_state: bool = True,
                 final_net: bool = False, key: tuple[int, ...] | None = None, cancel: bool = True,
                 group: int | None = None) -> None:
        label = "eager" if eager else "final input" if final_net else ""
        if final_net and group is not None and key is None:
            label += f" [log folded by group ${group}]"
        super().__init__(inputs, output, dtypes, label)
        self.eager = eager or final_net
        # False directly above an aggregate, which never emits a row's delete next to an equal insert
        self.cancel = cancel
        self.keep_state = keep_state
        # with a final input, the columns that identify a row (an aggregate's groups): the log is folded by
        # key (keyed_fold.py)
        self.key = key if final_net else None
        # above a lexicographic-extreme join (passed through), the column of its group: the log is folded by it
        # (group_fold.py)
        self.group = group if final_net else None
        self.live: Batch | None = None          # the live copies, ts = the instant each entered (views only)
        self.log: list[Batch] = []              # output batches not yet folded into ``live``
        self.log_rows = 0
        self.log_deletes = False                # whether a batch in ``log`` deletes

    def _held_rows(self) -> int:
        return super()._held_rows() + self.log_rows + (len(self.live) if self.live is not None else 0)

    def _held_bytes(self) -> int:
        return (super()._held_bytes() + sum(b.nbytes for b in self.log)
                + (self.live.nbytes if self.live is not None else 0))

    def emit(self, batch: Batch) -> None:
        if self.keep_state and len(batch):
            self.log.append(batch)
            self.log_rows += len(batch)
            self.log_deletes = self.log_deletes or bool((batch.sign < 0).any())
            if self.log_rows > 2 * (len(self.live) if self.live is not None else 0) + FOLD_MIN:
                self._fold()
        super().emit(batch)

    def _fold(self) -> None:
        if self.log:
            parts = ([self.live] if self.live is not None else []) + self.log
            if self.log_deletes:
                b = concat(parts)
                live = fold_keyed(b, self.key) if self.key is not None else \
                    fold_by_group(b, self.group) if self.group is not None else None
                self.live = live if live is not None else fold_changelog(b, self.dtypes)
            else:               # inserts only (a view over an unbounded join): every copy stays, as it came
                self.live = concat(parts)
            self.log, self.log_rows, self.log_deletes = [], 0, False

    def on_batch(self, i: int, batch: Batch) -> None:
        if self.eager:
            if self.cancel:
                batch = cancel_adjacent(batch)
            if len(batch):
                self.emit(batch)
        else:
            super().on_batch(i, batch)

    def emit_instant(self, t, net, tick, out_ts, out_sign, out_rows) -> None:
        ins = []
        for row, d in net.items():
            if d < 0:
                for _ in range(-d):
                    out_ts.append(t)
                    out_sign.append(-1)
                    out_rows.append(row)
            elif d > 0:
                ins.append((row, d))
        for row, d in ins:
            for _ in range(d):
                out_ts.append(t)
                out_sign.append(1)
                out_rows.append(row)

    def snapshot(self) -> Batch | None:
        """The current relation as inserts stamped with the instants the rows entered it, in time order (for
        late readers)."""
        self._fold()
        if self.live is None or not len(self.live):
            return None
        return self.live


FOLD_MIN = 4096      # a changelog's log is folded once it holds twice the live rows plus this many


def fold_changelog(b: Batch, dtypes: list) -> Batch:
    """The live copies left by a changelog (rows in time order, signed): per distinct row, the copies whose
    inserts are not undone later, a delete undoing the latest live copy (a base relation's rule), each stamped
    with the instant it entered.

    An insert at position p survives exactly when the row's running count never falls below its count just
    after p for the rest of the log: a suffix minimum per row, with numpy once rows are coded.

    >>> import numpy as np
    >>> b = Batch(np.array([1, 2, 3, 4]), np.array([1, 1, -1, 1], dtype=np.int8), [np.array([7, 7, 7, 8])])
    >>> out = fold_changelog(b, [np.dtype(np.int64)])
    >>> out.ts.tolist(), out.cols[0].tolist()
    ([1, 4], [7, 8])
    """
    n = len(b)
    code = hashed_codes(b.cols) if n else None
    if code is None:
        return _fold_rows(b, dtypes)
    order = stable_argsort(code)
    c = code[order]
    s = b.sign[order].astype(np.int64)
    start = np.ones(n, dtype=bool)
    start[1:] = c[1:] != c[:-1]
    gi = np.cumsum(start) - 1
    cs = np.cumsum(s)
    rc = cs - (cs - s)[start][gi]                       # the row's running count after each position
    big = 2 * n + 2
    r, gr = rc[::-1], gi[::-1]
    sm = (np.minimum.accumulate(r + gr * big) - gr * big)[::-1]     # min of rc from p to the row's end
    after = np.full(n, n + 1, dtype=np.int64)
    same = ~start[1:]                                   # p + 1 is the same row
    after[:-1] = np.where(same, sm[1:], n + 1)
    keep = np.sort(order[(s > 0) & (rc <= after)])
    out = b.take(keep)
    out.sign = np.ones(len(out), dtype=np.int8)
    return out


def _fold_rows(b: Batch, dtypes: list) -> Batch:
    """``fold_changelog`` with Python rows, for rows that cannot be coded."""
    born: dict[tuple, list[int]] = {}
    for t, s, row in zip(b.ts.tolist(), b.sign.tolist(), b.rows()):
        if s > 0:
            born.setdefault(row, []).append(t)
        else:
            times = born.get(row, [])
            if times:
                times.pop()
            if not times:
                born.pop(row, None)
    pairs = sorted(((t, r) for r, times in born.items() for t in times), key=lambda p: p[0])
    return from_rows([t for t, _ in pairs], [1] * len(pairs), [r for _, r in pairs], dtypes)
