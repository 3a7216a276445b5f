"""An index of a join input by key, kept as sorted runs of (key code, row) merged like an LSM tree (digest-004
R-PLAN-06, one synopsis per join input), so that a batch costs work in proportion to the batch, not to the rows
held: a join over a one-hour window must not slow down as its window fills. Probes are binary searches in each
run, not hash lookups; the name says so.

A delete names a row by its values only. Most join inputs are windows over streams, whose deletes retract rows
in the order they were inserted (first in, first out; digest-002a section 2.15). The index has two forms:

- **First in, first out** (``RowLog``, ``synopses/row_log.py``, and ``_Run``): the rows in arrival order in a log, so
  that appending a batch and dropping the oldest rows move only those rows; and a few index runs, each holding
  (key code, sequence number) pairs sorted by code. A batch adds a run, when a probe first needs one: until
  then its rows are scanned by probes of a few codes, within about what sorting them would cost (``_lazy``; a
  window joined with its MAX of one row is then never sorted). A run is merged into the one before it
  while that one is less than twice its size, and entries of rows that have left are dropped when runs merge,
  so there are O(log n) runs and each entry is merged O(log n) times. A probe searches every run. A release's
  deletes are matched with the oldest live rows and checked value for value (``match``, which changes
  nothing, so a join can try both of its inputs before committing either); ``stage`` then appends and
  indexes its inserts while its victims stay in place, so that the release's probes find every row it saw,
  and ``adopt`` drops the victims.
- **Signed** (``_Signed``): when deletes do not match that way (a window whose size just changed, a relation
  updated at random), a table sorted by key code with a sign per row. A delete removes the oldest held row
  with its key and values (``_Signed.claim``); one that finds none is stored, joins with the opposite sign
  and cancels its insert; once such rows make up a quarter of the table it is compacted (each distinct
  row's signs netted), after which the index goes back to the first form (``_try_unsign``).

Either way the index holds exactly the input's multiset of rows.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from control_tables import Knob, Stat
from synopses.base import Synopsis, rows_bytes
from synopses.row_log import RowLog
from synopses.rowcodes import row_codes, segments
from synopses.sort_order import search, search_both, stable_argsort

_EMPTY = np.empty(0, dtype=np.int64)
OLD = np.iinfo(np.int64).min        # entered before the release at hand
LIVE = np.iinfo(np.int64).max       # has not left (as far as the released input tells)
SMALL = 2048                        # rows held up to which one index run is rebuilt by a sort per release
TINY = 4                            # entries up to which a run is probed by one comparison per entry
SCAN_CODES = 8                      # probe codes up to which rows not indexed yet are scanned, not sorted
SCAN_WORK = 16                      # ... while the scans so far stay within this many passes over them
UNSIGN_WAIT = 1024                  # releases the signed form waits at most before trying to leave it again
FEW_PROBES = 16                     # probes to a run of at least this many entries each: searched directly
CLAIM_WORK = 16                     # candidate rows per delete up to which deletes are netted as they come


class Release(NamedTuple):
    """One input's part of a release, matched first in, first out against the index before anything changes.

    The release's deletes retract the ``victims`` oldest live rows, then its own first ``dead`` inserts (only
    when every old row is a victim). ``ins`` holds the positions of its inserts in the batch (None: every row
    is one), ``ins_ts`` and ``del_ts`` the instants they enter and the deletes fall, in order; ``codes`` and
    ``cols`` are the batch's."""

    victims: int
    dead: int
    ins: np.ndarray | None
    ins_ts: np.ndarray
    del_ts: np.ndarray
    codes: np.ndarray
    cols: list[np.ndarray]


_NOTHING = Release(0, 0, None, _EMPTY, _EMPTY, _EMPTY, [])


class Staged(NamedTuple):
    """A matched release appended to the log, before its victims are dropped. In sequence numbers: ``s0`` is
    the oldest live row before the release, ``e0`` its first insert and ``e1`` the end of its inserts. The
    release touches its victims (``s0`` on) and its inserts (``e0`` on), numbered in that order; its deletes
    retract the touched rows in that order: the row ``s0 + d`` leaves at ``del_ts[d]``. (When some inserts also
    leave, every old row is a victim, so ``s0 + victims == e0`` and the numbering has no gap.)"""

    s0: int
    e0: int
    e1: int
    victims: int
    n_del: int
    ins_ts: np.ndarray
    del_ts: np.ndarray

    def touched(self) -> int:
        return self.victims + self.e1 - self.e0

    def touched_codes(self, log: RowLog) -> np.ndarray:
        """The key codes of the touched rows."""
        if not self.victims or self.s0 + self.victims == self.e0:
            return log.seq_codes(self.e0 if not self.victims else self.s0, self.e1)
        return np.concatenate([log.seq_codes(self.s0, self.s0 + self.victims), log.seq_codes(self.e0, self.e1)])

    def touched_seq(self, p: np.ndarray) -> np.ndarray:
        """Sequence numbers of the touched rows numbered ``p``."""
        if not self.victims or self.s0 + self.victims == self.e0:
            return p + (self.s0 if self.victims else self.e0)
        return p + np.where(p < self.victims, self.s0, self.e0 - self.victims)

    def entered(self, p: np.ndarray) -> np.ndarray:
        """For the touched rows numbered ``p``, the instant each entered (``OLD``: before the release); built
        for those rows only (a window's turnover touches every row, its MAX of one row pairs with few)."""
        if not self.victims:
            return self.ins_ts[p]
        k = p - self.victims
        if not len(self.ins_ts):
            return np.full(len(p), OLD, dtype=np.int64)
        return np.where(k >= 0, self.ins_ts[np.maximum(k, 0)], OLD)

    def left(self, p: np.ndarray) -> np.ndarray:
        """For the touched rows numbered ``p``, the instant each left (``LIVE``: it did not)."""
        if self.n_del == self.touched():
            return self.del_ts[p]
        if not self.n_del:
            return np.full(len(p), LIVE, dtype=np.int64)
        return np.where(p < self.n_del, self.del_ts[np.minimum(p, self.n_del - 1)], LIVE)

    def entered_of(self, seq: np.ndarray) -> np.ndarray | int:
        """The instants the rows with these sequence numbers (``s0`` or later) entered."""
        if self.e1 == self.e0:
            return OLD
        k = seq - self.e0
        return np.where(k >= 0, self.ins_ts[np.maximum(k, 0)], OLD)

    def left_of(self, seq: np.ndarray) -> np.ndarray | int:
        """The instants the rows with these sequence numbers (``s0`` or later) left."""
        if not self.n_del:
            return LIVE
        d = seq - self.s0
        return np.where(d < self.n_del, self.del_ts[np.minimum(d, self.n_del - 1)], LIVE)


class SortedRunIndexSynopsis(Synopsis):
    """One input of a join: every row of it (kind ``exact``), or a bounded sample of the window it comes
    from (kind ``reservoir``, ``synopses.window_sample``; the join applies the switch, ``on_kind``)."""

    kind = "sorted_run_index"
    state_kind = Knob(str, name="kind", default="exact", choices=("exact", "reservoir"),
                      doc="exact: every row of the input; reservoir: a uniform sample of at most reservoir_rows "
                          "rows of the RANGE window below (results approximate, COUNT and SUM above scaled); "
                          "takes effect at a future instant (in_effect)")
    reservoir_rows = Knob(int, default=10_000, ge=1, le=1 << 24, unit="rows",
                          doc="rows the sample holds at most; read when the side switches to reservoir")
    in_effect = Stat(str, default="exact", doc="the kind holding the state now: exact, reservoir, or draining "
                     "(back to exact: new rows kept, sampled ones leaving with the window)")
    sampled_fraction = Stat(float, default=1.0, doc="rows held over rows in the window (1 when exact)")

    def __init__(self) -> None:
        self.on_kind = None                   # set by the join: applies a ``kind`` write (raises to refuse)
        self.log: RowLog | None = None        # first-in-first-out form (None until a row is seen)
        self.runs: list[_Run] = []
        self.table: _Signed | None = None     # signed form, when deletes did not match first in, first out
        self.next_seq = 0                     # signed form: the sequence number of the next row
        self.unindexed: int | None = None     # rows from this sequence number on are in no run yet (``_lazy``)
        self.scanned = 0                      # rows compared by scans of them so far
        self.unsign_wait = 0                  # releases left before the signed form may be left again
        self.unsign_backoff = 1               # ... set to this, doubling, each time leaving it did not last
        self.fresh_log = False                # the log comes from the signed form, no release applied to it yet

    def __len__(self) -> int:
        if self.table is not None:
            return len(self.table.codes)
        return len(self.log) if self.log is not None else 0

    def rows(self) -> int:
        return len(self)

    def nbytes(self) -> int:
        if self.table is not None:
            t = self.table
            return rows_bytes(t.seq, t.sign, t.held_cols()) + t.codes.nbytes + t.slot.nbytes
        if self.log is None:
            return 0
        return self.log.nbytes() + sum(r.codes.nbytes + r.seqs.nbytes for r in self.runs)

    def on_set_state_kind(self, old: str, new: str) -> None:
        if self.on_kind is None:
            raise ValueError("this index belongs to no join that could sample it")
        self.on_kind(new)

    def signed(self) -> bool:
        """Whether the index is in its signed form (stored deletes may be present)."""
        return self.table is not None

    # ---------------------------------------------------------------- first in, first out

    def match(self, ts: np.ndarray | None = None, sign: np.ndarray | None = None,
              cols: list[np.ndarray] | None = None, codes: np.ndarray | None = None) -> Release | None:
        """The release's deletes matched with the oldest live rows (then with its own first inserts), checked
        value for value. Nothing changes. None when they do not match so, or the index is signed: the caller
        then applies the release as signed rows."""
        if self.table is not None and not self._try_unsign():
            return None
        if ts is None or not len(ts):
            return _NOTHING
        pos = sign > 0
        dels = (~pos).nonzero()[0]
        n_del = len(dels)
        if not n_del:
            return Release(0, 0, None, ts, _EMPTY, codes, cols)
        ins = pos.nonzero()[0]
        log = self.log
        n_old = len(log) if log is not None else 0
        if n_del > n_old + len(ins):
            return None
        victims = min(n_del, n_old)
        dead = n_del - victims
        old = log.live_cols(victims) if log is not None else [c[:0] for c in cols]
        for j, c_new in enumerate(cols):
            c_log = old[j]
            gone = np.concatenate([c_log, c_new[ins[:dead]]]) if dead else c_log
            if not _same(gone, c_new[dels]):
                return None
        del_ts = ts[dels]
        if dead and (del_ts[victims:] < ts[ins[:dead]]).any():       # a delete before its insert
            return None
        return Release(victims, dead, ins, ts[ins], del_ts, codes, cols)

    def match_ordered(self, dels: Any, ins: Any, codes: np.ndarray | None) -> Release | None:
        """A release given as its deletes and its inserts (batches with ``ts`` and ``cols``, or None), whose
        deletes are known to retract the oldest live rows in order, then its own first inserts (a RANGE
        window's, ``RangeWindowOp.retracts_in_order``): matched by counting, with no value check. ``codes``
        are the inserts' key codes. None when the index is signed (and stays so)."""
        if self.table is not None and not self._try_unsign():
            return None
        n_del = len(dels) if dels is not None else 0
        n_ins = len(ins) if ins is not None else 0
        victims = min(n_del, len(self.log) if self.log is not None else 0)
        if n_del - victims > n_ins:
            return None
        if not n_ins + n_del:
            return _NOTHING
        if not n_ins:
            return Release(victims, 0, None, _EMPTY, dels.ts, _EMPTY, [])
        return Release(victims, n_del - victims, None, ins.ts, dels.ts if n_del else _EMPTY, codes, ins.cols)

    def stage(self, rel: Release) -> Staged:
        """Append a matched release's inserts to the log and index them, leaving its victims in place: probes
        made during the release still find them (``adopt`` then drops them)."""
        n_ins = len(rel.ins_ts)
        if self.log is None:
            if not n_ins:
                return Staged(0, 0, 0, 0, 0, rel.ins_ts, rel.del_ts)
            self.log = RowLog(rel.cols)
        log = self.log
        s0, e0 = log.head, log.tail
        if n_ins:
            log.append(rel.codes, rel.cols, rel.ins)
            e1 = e0 + n_ins
            if e1 - s0 <= SMALL:            # one sort of the few rows held beats merging runs
                codes = log.seq_codes(s0, e1)
                order = stable_argsort(codes)
                self.runs = [_Run(codes[order], order + s0, s0)]
                self.unindexed = None
            elif self.unindexed is None:    # indexed when a probe needs it (``_lazy``)
                self.unindexed, self.scanned = e0, 0
        return Staged(s0, e0, e0 + n_ins, rel.victims, rel.victims + rel.dead, rel.ins_ts, rel.del_ts)

    def adopt(self, staged: Staged) -> None:
        """Finish a staged release: its victims, and its inserts that left within it, leave the log; then the
        runs are tidied (after the drop, so that merging leaves out the victims' entries: a tumbling window's
        turnover then merges nothing)."""
        if self.fresh_log:                    # a first-in-first-out release after leaving the signed form
            self.fresh_log, self.unsign_backoff = False, 1
        if staged.n_del:
            self.log.drop(staged.n_del)
        if len(self.runs) > 1:
            self._tidy()

    def find(self, codes: np.ndarray, lo: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(probe index, sequence number) of every indexed row with an equal key and a sequence number from
        ``lo`` on (default: the oldest live row), in the first-in-first-out form."""
        if self.log is None or not len(codes):
            return _EMPTY, _EMPTY
        if lo is None:
            lo = self.log.head
        newest = self._lazy(codes, lo)          # first: it may sort those rows into a run
        found = []
        # a run whose codes all lie outside the probes' range finds nothing (ids that grow with time: the
        # newest rows' keys miss the older runs, NEXMark q3)
        span = (int(codes.min()), int(codes.max())) if len(self.runs) > 1 else None
        for run in self.runs:
            if not len(run):
                continue
            if span is not None and (span[1] < int(run.codes[0]) or span[0] > int(run.codes[-1])):
                continue
            pidx, seq = run.matches(codes)
            if len(pidx):
                if run.low < lo:
                    keep = seq >= lo
                    if not keep.all():
                        pidx, seq = pidx[keep], seq[keep]
                found.append((pidx, seq))
        found += newest
        if not found:
            return _EMPTY, _EMPTY
        if len(found) == 1:
            return found[0]
        return np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found])

    def counts(self, codes: np.ndarray) -> np.ndarray:
        """Per probe code, how many rows the index holds with that key (in the first-in-first-out form, entries
        of rows that left and are not tidied away yet count too: an upper bound)."""
        if self.table is not None:
            return self.table.locate(codes)[1]
        cnt = np.zeros(len(codes), dtype=np.int64)
        if self.log is None:
            return cnt
        for pidx, _ in self._lazy(codes, self.log.head):
            cnt += np.bincount(pidx, minlength=len(codes))
        for r in self.runs:
            if len(r) > TINY:
                cnt += r.locate(codes)[1]
            elif len(r):
                for c in r.codes.tolist():          # a few entries: a comparison each, no probe tables
                    cnt += codes == c
        return cnt

    def total_matches(self, codes: np.ndarray) -> int:
        """``counts(codes).sum()``: against a few rows held (a MAX of one row), one count of equal codes per
        row, with no per-probe counts built."""
        if self.table is None and self.log is not None and self.unindexed is None and len(self.log) <= TINY:
            held = self.log.live_codes()
            return sum(int(np.count_nonzero(codes == c)) for c in held.tolist())
        return int(self.counts(codes).sum())

    def most_per_key(self) -> int:
        """An upper bound on what ``counts`` gives any one probe code, found without probing: each run's most
        frequent code's entries, plus the rows not indexed yet (in the signed form: every row held). A join
        whose released rows times this stays within its pair budget need not count their matches."""
        if self.table is not None:
            return len(self.table.codes)
        if self.log is None:
            return 0
        n = sum(r.most() for r in self.runs)
        if self.unindexed is not None:
            n += max(0, self.log.tail - max(self.unindexed, self.log.head))
        return n

    def _lazy(self, codes: np.ndarray, lo: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """The rows not indexed yet (appended since ``unindexed``) that match a probe, as [(probe index,
        sequence number)] (or []): scanned, one comparison per row and probe code, while the probe has at most
        ``SCAN_CODES`` codes and the scans since ``unindexed`` stay within ``SCAN_WORK`` comparisons per row
        appended since (so within about what sorting those rows would have cost); else they are sorted into a run first and the runs found them. A side that is
        probed by few keys (a window joined with its MAX of one row, NEXMark q7) is then never sorted."""
        u0 = self.unindexed
        if u0 is None:
            return []
        log = self.log
        a = max(u0, lo, log.head)
        n = log.tail - a
        if n <= 0:
            return []
        k = len(codes)
        if k > SCAN_CODES or self.scanned + k * n > SCAN_WORK * (log.tail - u0):
            self._index_lazy()
            return []
        self.scanned += k * n
        seg = log.seq_codes(a, log.tail)
        found = []
        for j, c in enumerate(codes.tolist()):
            hit = np.flatnonzero(seg == c)
            if len(hit):
                found.append((np.full(len(hit), j, dtype=np.int64), hit + a))
        if len(found) > 1:
            return [(np.concatenate([f[0] for f in found]), np.concatenate([f[1] for f in found]))]
        return found

    def _index_lazy(self) -> None:
        """Sort the rows not indexed yet into a run (the newest)."""
        u0, self.unindexed = self.unindexed, None
        log = self.log
        a = max(u0, log.head)
        if a < log.tail:
            codes = log.seq_codes(a, log.tail)
            order = stable_argsort(codes)
            self.runs.append(_Run(codes[order], order + a, a))
            if len(self.runs) > 1:
                self._tidy()

    def gather(self, seq: np.ndarray) -> list[np.ndarray]:
        """The columns of the rows with these sequence numbers (first-in-first-out form)."""
        return self.log.take(seq)

    def _tidy(self) -> None:
        """Merge runs geometrically, and rebuild them all once dead entries outnumber live rows."""
        runs, head = self.runs, self.log.head
        while len(runs) > 1 and len(runs[-2]) <= 2 * len(runs[-1]):
            b = runs.pop()
            runs[-1] = _Run.merge([runs[-1], b], head)
        if sum(len(r) for r in runs) > 2 * len(self.log) + 256:
            self.runs = [_Run.merge(runs, head)] if len(self.log) else []

    # ---------------------------------------------------------------- signed form

    def signed_table(self) -> _Signed:
        """The index in its signed form (converted from the first-in-first-out form if need be)."""
        if self.table is None:
            if self.fresh_log:                # left the signed form and back at the next release: wait longer
                self.fresh_log = False
                self.unsign_wait = self.unsign_backoff
                self.unsign_backoff = min(2 * self.unsign_backoff, UNSIGN_WAIT)
            log = self.log
            if log is None or not len(log):
                cols = log.empty_cols() if log is not None else []
                self.table = _Signed(_EMPTY, np.empty(0, np.int8), _EMPTY, cols, log is not None)
            else:
                seq = np.arange(log.head, log.tail, dtype=np.int64)
                codes = log.live_codes()
                order = stable_argsort(codes)
                self.table = _Signed(codes[order], np.ones(len(order), np.int8), seq[order],
                                     [c[order] for c in log.live_cols()], True)
            self.next_seq = log.tail if log is not None else 0
            self.log, self.runs, self.unindexed = None, [], None
        return self.table

    def lookup(self, codes: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], np.ndarray | None]:
        """Every held row with a key equal to a probe's, in either form: (probe index, the rows' columns, their
        signs, or None when all are +1)."""
        if self.table is None:
            pidx, seq = self.find(codes)
            return pidx, (self.gather(seq) if self.log is not None else []), None
        t = self.table
        pidx, tidx = expand(*t.locate(codes))
        slots = t.slot[tidx]
        return pidx, [c[slots] for c in t.store], (t.sign[tidx] if t.negatives else None)

    def insert(self, ts: np.ndarray, sign: np.ndarray, cols: list[np.ndarray], codes: np.ndarray) -> None:
        """Apply signed rows (inserts and deletes, in time order) with their key codes: matched first in, first
        out when they can be (``match``), else stored signed."""
        if not len(codes):
            return
        if (rel := self.match(ts, sign, cols, codes)) is not None:
            self.adopt(self.stage(rel))
            return
        t = self.signed_table()
        if not t.known:
            t.cols, t.known = [c[:0] for c in cols], True
        seq = self.next_seq + np.arange(len(codes), dtype=np.int64)
        self.next_seq += len(codes)
        neg = sign < 0
        if not neg.any():
            t.merge(sign, cols, codes, seq)
            return
        # the inserts first, then the deletes net against every held row, the release's own included (the
        # state is read only between releases, so netting over the whole batch is exact: a view's changes
        # insert a row and delete it again in one batch when its source changes twice)
        pos = np.flatnonzero(~neg)
        if len(pos):
            t.merge(sign[pos], [c[pos] for c in cols], codes[pos], seq[pos])
        d = np.flatnonzero(neg)
        if len(t.codes):
            d_at, t_at = t.claim(codes[d], [c[d] for c in cols])
            if len(d_at):                     # deletes of held rows: the rows leave, nothing is stored
                t.remove(t_at)
                if len(d_at) == len(d):
                    return
                d = np.delete(d, d_at)
        sign, cols, codes, seq = sign[d], [c[d] for c in cols], codes[d], seq[d]
        t.merge(sign, cols, codes, seq)
        n_del = len(d)
        if n_del:
            t.negatives += n_del
            if t.negatives > 64 and t.negatives * 4 > len(t.codes):
                t.compact()      # after which the index can go back to the first-in-first-out form

    def _try_unsign(self) -> bool:
        """``_unsign``, unless leaving the signed form has not lasted lately: a relation updated at random
        (a MAX per key, whose change deletes the old row) nets its deletes as they come (``_Signed.claim``),
        so its table rarely holds a stored delete, and going to a log and back at every release would cost two
        passes over every row held. After each such round trip the next ``unsign_wait`` releases stay signed
        (1, 2, 4, .. ``UNSIGN_WAIT``; back to 1 once a release applies first in, first out)."""
        if self.unsign_wait:
            self.unsign_wait -= 1
            return False
        return self._unsign()

    def _unsign(self) -> bool:
        """Back to the first-in-first-out form if the signed table holds no stored deletes: its rows go into a
        log oldest first (renumbered), indexed by one run."""
        t = self.table
        if t.negatives:
            return False
        self.table, self.log, self.runs, self.unindexed = None, None, [], None
        self.fresh_log = True
        if t.known:
            order = stable_argsort(t.seq)
            self.log = RowLog(t.cols)
            codes = t.codes[order]
            self.log.append(codes, [c[order] for c in t.cols])
            if len(codes):
                by_code = stable_argsort(codes)
                self.runs = [_Run(codes[by_code], self.log.head + by_code, self.log.head)]
        return True


class _Signed:
    """The signed form: rows sorted by key code, each with a sign (-1: a stored delete) and a sequence number.

    The rows' columns stay where they were appended (``store``, slots 0 .. ``used``; ``slot`` gives each
    sorted row's), so that a merge or a removal moves four arrays, not four plus one per column: a view's
    changes joined as a relation (8 columns, NEXMark q9) are merged into a table of every row at every
    release. Slots of rows that left are reclaimed once they are half the store (``_repack``)."""

    def __init__(self, codes: np.ndarray, sign: np.ndarray, seq: np.ndarray, cols: list[np.ndarray],
                 known: bool) -> None:
        self.codes, self.sign, self.seq = codes, sign, seq
        self.cols = cols
        self.known = known           # whether the columns' types are known (a row was seen)
        self.negatives = 0
        self._probe: _Run | None = None      # ``codes`` as a run, for its probe tables (rebuilt when they change)

    @property
    def cols(self) -> list[np.ndarray]:
        """The columns in table (key) order."""
        return [c[self.slot] for c in self.store]

    @cols.setter
    def cols(self, cols: list[np.ndarray]) -> None:
        """Columns in table order (as many rows as ``codes``) become the store."""
        self.store = list(cols)
        self.used = len(self.codes)
        self.slot = np.arange(self.used, dtype=np.int64)

    def held_cols(self) -> list[np.ndarray]:
        """The store's columns up to the last slot used (rows that left included: what is held)."""
        return [c[:self.used] for c in self.store]

    def _append(self, cols: list[np.ndarray], n: int) -> int:
        """Put ``n`` rows in the next slots (the store grows by doubling); returns the first slot."""
        used = self.used
        if used + n > (len(self.store[0]) if self.store else 0):
            cap = max(used + n, 2 * used, 64)
            grown = []
            for old in self.store:
                a = np.empty(cap, dtype=old.dtype)
                a[:used] = old[:used]
                grown.append(a)
            self.store = grown
        for a, c in zip(self.store, cols):
            a[used:used + n] = c
        self.used = used + n
        return used

    def _repack(self) -> None:
        """Drop the slots of rows that left, once they are half the store or more."""
        if self.used > 2 * len(self.codes) + 64:
            self.cols = self.cols

    def locate(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each probe code, the first position of an equal code in the table and how many there are."""
        if not len(self.codes) or not len(codes):
            return locate(self.codes, codes)
        if self._probe is None or self._probe.codes is not self.codes:
            self._probe = _Run(self.codes, self.seq, 0)
        return self._probe.locate(codes)

    def claim(self, codes: np.ndarray, cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Held rows that deletes retract: (delete index, table position) for each delete that finds a row
        (sign +1) with its key code and the very values it carries (floats by their bits, as ``_same``),
        the oldest such copy (rows of one code are in arrival order); two deletes never claim one row (the
        later finds none and is stored). Removing a held row is adding its delete, so the multiset is the
        same either way; the table just stays the size of the relation, with no compaction to pay (a MAX per
        auction deletes its old row at every change: NEXMark q9). Nothing when the deletes' codes would
        have more than ``CLAIM_WORK`` candidate rows each on average (then they are stored, as before)."""
        first, cnt = self.locate(codes)
        total = int(cnt.sum())
        if not total or total > CLAIM_WORK * len(codes):
            return _EMPTY, _EMPTY
        pidx, tidx = expand(first, cnt)
        ok = self.sign[tidx] > 0
        slots = self.slot[tidx]
        for held, gone in zip(self.store, cols):
            ok &= _equal(held[slots], gone[pidx])
        pidx, tidx = pidx[ok], tidx[ok]
        if not len(pidx):
            return _EMPTY, _EMPTY
        first_hit = np.ones(len(pidx), dtype=bool)      # each delete's oldest copy (``expand``: in order)
        first_hit[1:] = pidx[1:] != pidx[:-1]
        pidx, tidx = pidx[first_hit], tidx[first_hit]
        _, once = np.unique(tidx, return_index=True)      # a row claimed once: by the earliest delete
        return pidx[once], tidx[once]

    def remove(self, pos: np.ndarray) -> None:
        """Drop the rows at these table positions."""
        keep = np.ones(len(self.codes), dtype=bool)
        keep[pos] = False
        self.codes, self.sign, self.seq = self.codes[keep], self.sign[keep], self.seq[keep]
        self.slot = self.slot[keep]
        self._repack()

    def merge(self, sign: np.ndarray, cols: list[np.ndarray], codes: np.ndarray, seq: np.ndarray) -> None:
        """Merge rows into key order (after the equal keys already there)."""
        order = stable_argsort(codes)
        sign, codes, seq = sign[order], codes[order], seq[order]
        slot = self._append(cols, len(codes)) + order
        if not len(self.codes):
            self.sign, self.codes, self.seq, self.slot = sign, codes, seq, slot
            return
        m = _Merge(self.codes, codes)
        self.sign, self.codes, self.seq = m(self.sign, sign), m(self.codes, codes), m(self.seq, seq)
        self.slot = m(self.slot, slot)

    def compact(self) -> None:
        """Net each distinct row's inserts and deletes, keeping as many copies as its count: its newest
        inserts. Copies of one row are alike but for their age, which first-in-first-out matching reads, and
        a window's deletes retract the oldest copies, so the newest are the ones still in it (a sampled join
        side numbers its copies by that order, ``dsms/operators/join_kind.py``)."""
        code = row_codes(self.cols)
        if code is None:
            return
        _, starts, _ = segments(np.zeros(len(code), dtype=np.int64), code)
        order = np.lexsort((self.seq, code))
        net = np.add.reduceat(self.sign[order].astype(np.int64), starts) if len(starts) else starts
        lengths = np.diff(np.append(starts, len(order)))
        pos = self.sign[order] > 0
        cpos = np.cumsum(pos)
        after = np.repeat(cpos[starts + lengths - 1], lengths) - cpos      # inserts after each, in its row
        idx = order[pos & (after < np.repeat(net, lengths))]
        idx = idx[stable_argsort(self.codes[idx])]
        cols = [c[idx] for c in self.cols]
        self.codes, self.seq = self.codes[idx], self.seq[idx]
        self.cols = cols
        self.sign = np.ones(len(idx), dtype=np.int8)
        self.negatives = 0


class _Run:
    """An index run: (key code, sequence number) pairs sorted by code, with its distinct codes and where each
    begins, so that a probe costs one binary search (or one lookup when the codes span a small range). No
    sequence number in it is below ``low``, so a probe for rows from ``low`` on need not filter."""

    __slots__ = ("codes", "seqs", "low", "_keys", "_bounds", "_starts", "_most", "_last")

    def __init__(self, codes: np.ndarray, seqs: np.ndarray, low: int) -> None:
        self.codes, self.seqs, self.low = codes, seqs, low
        self._keys: np.ndarray | None = None
        self._starts: np.ndarray | None = None
        self._most: int | None = None
        self._last: tuple | None = None       # (probe codes, first, count) of the last ``locate``

    def most(self) -> int:
        """How many entries the most frequent code has (0 for an empty run): every probe code finds at most
        that many here. Read off the probe structure ``locate`` builds anyway (once: the run never changes),
        so a join can bound a release's pairs without probing (``JoinOp._bounded``)."""
        if self._most is None:
            table = self.codes
            if not len(table):
                self._most = 0
            elif len(table) <= TINY:
                self._most = int(np.unique(table, return_counts=True)[1].max())
            elif self._small_span():
                self._most = int(np.diff(self._span_starts()).max())
            else:
                self._most = int(np.diff(self._key_bounds()[1]).max())
        return self._most

    def _small_span(self) -> bool:
        """Whether the codes span a range small enough for a lookup table of where each code begins."""
        table = self.codes
        return int(table[-1]) - int(table[0]) + 1 <= 4 * len(table) + 256

    def _span_starts(self) -> np.ndarray:
        """Where each code of the span begins (built once), then an empty bucket that every probe outside the
        span looks up (its offset from the smallest code, read unsigned, is at least the span; see
        ``locate``)."""
        if self._starts is None:
            table = self.codes
            span = int(table[-1]) - int(table[0]) + 1
            counts = np.bincount(table - int(table[0]), minlength=span + 1)
            self._starts = np.concatenate([[0], counts.cumsum()])
        return self._starts

    def _key_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct codes and where each begins, then the end (built once)."""
        if self._keys is None:
            table = self.codes
            first = np.flatnonzero(table[1:] != table[:-1]) + 1
            self._keys = table[np.concatenate([[0], first])]
            self._bounds = np.concatenate([[0], first, [len(table)]]).astype(np.int64)
        return self._keys, self._bounds

    def __len__(self) -> int:
        return len(self.codes)

    def locate(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each probe code, the first position of an equal code and how many there are. A run is never
        changed once built, so what a probe needs besides the codes is built once, on first need: where each
        code of the span begins (codes spanning a small range), or the distinct codes and their bounds.
        The last probe's answer is kept: a join weighs a release by counting its matches (``counts``), then
        finds them (``lookup``, ``find``) with the same codes array, unchanged in between (the run never
        changes; callers write into neither the codes nor the answer)."""
        last = self._last
        if last is not None and last[0] is codes:
            return last[1], last[2]
        first, cnt = self._locate(codes)
        self._last = (codes, first, cnt)
        return first, cnt

    def _locate(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        table = self.codes
        if len(table) <= TINY and len(codes) > 4 * TINY:
            return self._few(codes)
        if self._starts is None and self._keys is None and FEW_PROBES * len(codes) < len(table):
            lo, hi = search_both(table, codes)      # a few probes: two searches, no pass over the run
            return lo, hi - lo
        if self._small_span():
            starts = self._span_starts()
            span = len(starts) - 2
            rel = np.minimum((codes - int(table[0])).view(np.uint64), span)
            first = starts[rel]
            return first, starts[rel + 1] - first
        keys, bounds = self._key_bounds()
        i = np.minimum(search(keys, codes), len(keys) - 1)
        lo = bounds[i]
        return lo, np.where(keys[i] == codes, bounds[i + 1] - lo, 0)

    def matches(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(probe index, sequence number) of every entry equal to a probe, ordered by probe and then as the
        entries are. Against a run of a few entries (a MAX of one row probed by a window's turnover, NEXMark
        q7) one comparison of the probes per entry finds them, with no per-probe first and count arrays to
        build and expand."""
        if len(self.codes) > TINY or len(codes) <= 4 * TINY:
            pidx, tidx = expand(*self.locate(codes))
            return pidx, self.seqs[tidx]
        hits = [(np.flatnonzero(codes == c), q) for c, q in zip(self.codes.tolist(), self.seqs.tolist())]
        hits = [(h, q) for h, q in hits if len(h)]
        if not hits:
            return _EMPTY, _EMPTY
        if len(hits) == 1:
            h, q = hits[0]
            return h, np.full(len(h), q, dtype=np.int64)
        pidx = np.concatenate([h for h, _ in hits])
        seq = np.concatenate([np.full(len(h), q, dtype=np.int64) for h, q in hits])
        order = stable_argsort(pidx)
        return pidx[order], seq[order]

    def _few(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``locate`` against a run of a few entries (a MAX of one row probed by a window's turnover): one
        comparison of the probes per distinct code, no binary search and no gathers."""
        table = self.codes
        first = np.zeros(len(codes), dtype=np.int64)
        cnt = np.zeros(len(codes), dtype=np.int64)
        at = 0
        for c, k in zip(*(a.tolist() for a in np.unique(table, return_counts=True))):
            hit = codes == c
            first[hit] = at
            cnt[hit] = k
            at += k
        return first, cnt

    @staticmethod
    def merge(runs: list[_Run], head: int) -> _Run:
        """One run from several (oldest first), without the entries of rows before ``head`` (gone). Two runs
        are merged by binary search of the newer one's codes in the older one (``_Merge``: O(n), not a sort);
        equal codes keep the older run's entries first either way."""
        if len(runs) == 2:
            old, new = runs
            oc, os_ = old.codes, old.seqs
            if old.low < head:
                live = os_ >= head
                if not live.all():
                    oc, os_ = oc[live], os_[live]
            nc, ns = new.codes, new.seqs
            if new.low < head:
                live = ns >= head
                if not live.all():
                    nc, ns = nc[live], ns[live]
            low = max(head, min(old.low, new.low))
            if not len(oc) or not len(nc):
                return _Run(nc, ns, low) if len(nc) else _Run(oc, os_, low)
            m = _Merge(oc, nc)
            return _Run(m(oc, nc), m(os_, ns), low)
        codes = np.concatenate([r.codes for r in runs])
        seqs = np.concatenate([r.seqs for r in runs])
        live = seqs >= head
        codes, seqs = codes[live], seqs[live]
        order = stable_argsort(codes)
        return _Run(codes[order], seqs[order], max(head, min(r.low for r in runs)))


def locate(table: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each probe code, the first position of an equal code in the sorted ``table`` and how many there
    are: by bincount and lookup when the table's codes span a small range, else by binary search.

    >>> locate(np.array([3, 3, 5]), np.array([5, 4, 3, -2**63]))
    (array([2, 2, 0, 3]), array([1, 0, 2, 0]))
    """
    if not len(table) or not len(codes):
        return np.zeros(len(codes), dtype=np.int64), np.zeros(len(codes), dtype=np.int64)
    lo_code, hi_code = int(table[0]), int(table[-1])
    span = hi_code - lo_code + 1
    if span <= 4 * (len(table) + len(codes)) + 256:
        # one bucket per code of the span and an empty one after it (``span``), which every probe outside
        # the span looks up: its offset from ``lo_code``, read unsigned, is at least ``span`` (exactly so,
        # even where the int64 subtraction wraps)
        counts = np.bincount(table - lo_code, minlength=span + 1)
        ends = counts.cumsum()
        rel = np.minimum((codes - lo_code).view(np.uint64), span)
        cnt = counts[rel]
        return ends[rel] - cnt, cnt
    lo, hi = search_both(table, codes)
    return lo, hi - lo


def expand(lo: np.ndarray, cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(probe index, table index) of every match, given each probe's first match and match count.

    >>> expand(np.array([4, 0, 1]), np.array([2, 0, 1]))
    (array([0, 0, 2]), array([4, 5, 1]))
    """
    total = int(cnt.sum())
    if not total:
        return _EMPTY, _EMPTY
    pidx = np.arange(len(lo)).repeat(cnt)
    tidx = np.arange(total) + (lo + cnt - cnt.cumsum()).repeat(cnt)
    return pidx, tidx


def _equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Equal value for value, per element, as ``_same``: floats by their bits."""
    if a.dtype.kind == "f" and a.dtype == b.dtype:
        bits = np.dtype(f"i{a.dtype.itemsize}")
        a, b = a.view(bits), b.view(bits)
    elif a.dtype != b.dtype:
        return np.zeros(len(a), dtype=bool)
    return np.asarray(a == b, dtype=bool)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal value for value; floats by their bits, so that NaN matches NaN and -0.0 does not match 0.0 (a
    delete carries the very value its insert did)."""
    if a.dtype != b.dtype or len(a) != len(b):
        return False
    if a.dtype.kind == "f":
        bits = np.dtype(f"i{a.dtype.itemsize}")
        a, b = a.view(bits), b.view(bits)
    return bool((a == b).all())


class _Merge:
    """Merges a sorted run of new rows into a sorted table, after the equal keys already there: the
    positions are computed once and then every column is filled with two gathers (np.insert would redo the
    work per column, and would unpack sequences held in object arrays)."""

    def __init__(self, table: np.ndarray, new: np.ndarray) -> None:
        n_old, n_new = len(table), len(new)
        self.n = n_old + n_new
        self.new_pos = np.searchsorted(table, new, side="right") + np.arange(n_new)
        mask = np.ones(self.n, dtype=bool)
        mask[self.new_pos] = False
        self.old_pos = np.flatnonzero(mask)

    def __call__(self, old: np.ndarray, new: np.ndarray) -> np.ndarray:
        out = np.empty(self.n, dtype=old.dtype)
        out[self.old_pos] = old
        out[self.new_pos] = new
        return out


class FastFormIndex(SortedRunIndexSynopsis):
    """The sorted-run index with a faster form in front of it (rows held by key: ``KeyedIndexSynopsis``; a hash
    multimap: ``HashMultiIndexSynopsis``). What only the base class's forms answer (the general release, its
    counts and tables) moves the rows there first, for good (``leave_form``)."""

    def leave_form(self) -> None:
        """Hold the rows in the base class's forms from now on (a no-op once they are)."""
        raise NotImplementedError

    def hold_in_runs(self, codes: np.ndarray, cols: list[np.ndarray]) -> None:
        """The rows a faster form held, inserted into the base class's forms as of now."""
        if len(codes):
            SortedRunIndexSynopsis.insert(self, np.zeros(len(codes), dtype=np.int64),
                                          np.ones(len(codes), dtype=np.int8), cols, codes)

    def match(self, ts=None, sign=None, cols=None, codes=None):
        self.leave_form()
        return super().match(ts, sign, cols, codes)

    def match_ordered(self, dels, ins, codes):
        self.leave_form()
        return super().match_ordered(dels, ins, codes)

    def counts(self, codes):
        self.leave_form()
        return super().counts(codes)

    def total_matches(self, codes):
        self.leave_form()
        return super().total_matches(codes)

    def most_per_key(self):
        self.leave_form()
        return super().most_per_key()

    def stage(self, rel):
        self.leave_form()
        return super().stage(rel)

    def find(self, codes, lo=None):
        self.leave_form()
        return super().find(codes, lo)

    def signed_table(self):
        self.leave_form()
        return super().signed_table()
