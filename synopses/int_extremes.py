"""Grouped MIN or MAX of an INT (or TIMESTAMP) column under inserts and deletes, a batch at a time with numpy:
the vectorised aggregate's counterpart of ``ExtremeBag``.

Source: digest-004 R-PLAN-06 (MIN/MAX must keep their window: when the extreme leaves, look again). The
multiset of each group is kept as a log of (group, value, count) rows, netted (summed per (group, value), zeros
dropped) whenever it has grown to twice what it held at the last netting, so it stays within about twice the
live multiset (eight times while only inserts came since: every row is then a live row, and netting would
only merge repeats). A batch arrives sorted by (group, instant) in segments, one per (group, instant), as the
vectorised aggregate sorts it:

- a group that only receives inserts in the batch (every group of an insert-only input: a stream, an unbounded
  join) gets its extreme after every segment from one running maximum (of the values offset per group when
  their spans fit an int64, else of value ranks; of the values themselves for one group), no sort, no Python
  per row or per group;
- a segment whose deletes empty its group starts the group afresh there (an epoch): the group's log rows and
  the batch rows before are dropped instead of netted (they net to nothing), and the running maximum restarts
  at the segment over the later inserts. Two cases are recognised (``_resets``): in arrival order the count is
  zero right after the segment's last delete (a tumbling window's turnover: every old row deleted, then the
  new ones inserted at the same instant: NEXMark q7's MAX, no sort per window end), or the segment deletes as
  many rows as the group held and none of the values it inserts (a relation's row replaced by a new one that
  arrives first: NEXMark q9's MIN over the rows at each auction's maximum);
- a group with any other delete in the batch is walked segment by segment: a segment whose deletes do not remove the
  last copy of the current extreme only folds in its inserts; otherwise the extreme is recomputed from the
  group's netted log and the batch rows up to the segment (numpy over the group's values). A sliding window
  that expires its extreme once per slide pays one recomputation per slide.

Only INT values: they are exact, totally ordered and have no NaN or signed zero, so the extreme of a multiset is
one well-defined int64 (FLOAT and STRING arguments stay with ``ExtremeBag`` in the row-at-a-time aggregate).
"""

from __future__ import annotations

import numpy as np

from synopses.sort_order import stable_argsort, stable_lexsort2

I64 = np.int64
NET_MIN = 4096       # the log is netted once it holds twice its netted size plus this many rows
SMALL = 48           # a group with at most this many log and batch rows is walked in Python (``_small``)
SMALL_VEC = 16       # small groups from which they are walked with numpy all at once (``_small_all``)
SINGLE_MAX = 48      # ... but with one segment in the batch, netted by one sort of all such groups instead
                     # (``_single``); a larger group folds its inserts and recomputes only when its extreme
                     # leaves, which one sort per batch would cost more than (NEXMark q5's MAX of counts)


class IntExtremes:
    """MIN (``want_max=False``) or MAX of one INT argument per dense group id.

    >>> x = IntExtremes(want_max=True); x.grow(1)
    >>> g = np.zeros(3, dtype=np.int64)
    >>> new, old = x.step(np.array([5, 9, 7]), np.array([1, 1, 1]), g, np.array([2]),
    ...                   np.array([False]), np.array([3]))
    >>> new.tolist()
    [9]
    >>> new, old = x.step(np.array([9]), np.array([-1]), g[:1], np.array([0]), np.array([True]), np.array([2]))
    >>> new.tolist(), old.tolist()
    ([7], [9])
    """

    keep_log = True          # False over an input that never deletes: the multiset is never read, so not kept

    def __init__(self, want_max: bool) -> None:
        self.want_max = want_max
        self.ext = np.zeros(0, dtype=I64)           # extreme per group id, meaningful while the group has rows
        self.lg = np.empty(0, dtype=I64)            # the log: group, value, count
        self.lv = np.empty(0, dtype=I64)
        self.lc = np.empty(0, dtype=I64)
        self.netted = 0                              # log rows right after the last netting
        self.log_dels = 0                            # delete rows appended since (an upper bound)
        self.tail: list[tuple] = []                  # batches appended since, joined to the log when read
        self.tail_rows = 0
        # groups emptied by a reset: their log rows before position drop_at[g] (log, then tail) net to nothing
        # and are dropped when the log is next read or netted, not on every batch (a copy of the whole log)
        self.drop_at = np.zeros(0, dtype=I64)
        self.dropped: list[np.ndarray] = []

    def grow(self, size: int) -> None:
        if size > len(self.ext):
            ext = np.zeros(size, dtype=I64)
            ext[:len(self.ext)] = self.ext
            self.ext = ext
            drop_at = np.zeros(size, dtype=I64)
            drop_at[:len(self.drop_at)] = self.drop_at
            self.drop_at = drop_at

    def nbytes(self) -> int:
        return (self.ext.nbytes + self.lg.nbytes + self.lv.nbytes + self.lc.nbytes
                + sum((2 if c is None else 3) * g.nbytes for g, _, c in self.tail))

    def _join_tail(self) -> None:
        """The appended batches joined onto the log arrays (one copy of the log per read, not per batch)."""
        if self.tail:
            self.lg = np.concatenate([self.lg] + [g for g, _, _ in self.tail])
            self.lv = np.concatenate([self.lv] + [v for _, v, _ in self.tail])
            self.lc = np.concatenate([self.lc] + [np.ones(len(g), dtype=I64) if c is None else c
                                                  for g, _, c in self.tail])
            self.tail, self.tail_rows = [], 0
        if self.dropped:
            keep = np.arange(len(self.lg)) >= self.drop_at[self.lg]
            self.drop_at[np.concatenate(self.dropped)] = 0
            self.dropped = []
            if not keep.all():
                self.lg, self.lv, self.lc = self.lg[keep], self.lv[keep], self.lc[keep]
                self.netted = min(self.netted, len(self.lg))
                if not len(self.lg):
                    self.log_dels = 0

    def _best(self, a: np.ndarray) -> int:
        return int(a.max()) if self.want_max else int(a.min())

    def step(self, v: np.ndarray, sign: np.ndarray, g_s: np.ndarray, ends: np.ndarray, had: np.ndarray,
             new_cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fold in a batch sorted by (group, instant): ``v`` values, ``sign`` +1/-1, ``g_s`` group ids, ``ends``
        the last row of each segment, ``had`` per segment whether its group had rows before the segment,
        ``new_cnt`` per segment the group's row count after it. Returns the extreme after and before each
        segment (0 where the group is empty) and stores each group's final extreme."""
        v = v.astype(I64, copy=False)
        sign = sign.astype(I64, copy=False)
        n, nseg = len(v), len(ends)
        grp_start = np.ones(n, dtype=bool)
        grp_start[1:] = g_s[1:] != g_s[:-1]
        gi = np.cumsum(grp_start) - 1                    # group index within the batch, per row
        is_del = sign < 0
        seg_gi = gi[ends]
        seg_g = g_s[ends]
        first = np.ones(nseg, dtype=bool)
        first[1:] = seg_g[1:] != seg_g[:-1]
        base = self.ext[seg_g]
        if not is_del.any():               # inserts only (a stream, an unbounded join): one running extreme
            return self._inserts(v, g_s, gi, ends, seg_gi, seg_g, first, had, base)
        if not self.keep_log:
            raise RuntimeError("a delete reached a MIN/MAX kept without its multiset (an input that never deletes)")
        # segments whose deletes empty their group: the group starts afresh there (an epoch), its extremes
        # from then on those of the later inserts alone; rows cut by such a reset leave the running extreme
        reset, cut, seg_row = self._resets(v, sign, is_del, g_s, ends, new_cnt)
        left = is_del if reset is None else is_del & ~cut
        dirty = np.bincount(gi, weights=left) > 0          # per batch group: a delete no reset explains
        if reset is not None:                              # resets count only in groups with no other delete
            reset &= ~dirty[seg_gi]
            if reset.any():
                cut &= reset[seg_row]
            else:
                reset = cut = None
        if reset is None:
            ep, fresh = gi, None
        else:
            seg_start = np.concatenate([[0], ends[:-1] + 1])
            marks = grp_start.copy()
            marks[seg_start[reset]] = True
            ep = np.cumsum(marks) - 1                       # epoch index per row: groups split at resets
            rc = np.cumsum(reset)
            fresh = rc > (rc - reset)[first][seg_gi]        # the segment is at or past a reset of its group
        if dirty.all():                    # every group has deletes: all go segment by segment below
            sr = np.zeros(nseg, dtype=I64)
            ins_best = base
        else:
            sr, ins_best = self._running_best(v, is_del if cut is None else is_del | cut, ep, ends, base)
        had_first = np.zeros(len(dirty), dtype=bool)
        had_first[seg_gi[first]] = had[first]
        gh = had_first[seg_gi]                               # the group had rows before the batch
        if fresh is not None:
            gh = gh & ~fresh                                 # ... and no reset has emptied it since
        both = np.maximum(base, ins_best) if self.want_max else np.minimum(base, ins_best)
        new = np.where(sr > 0, np.where(gh, both, ins_best), base)
        # groups with deletes: segment by segment
        dgi = np.flatnonzero(dirty)
        if len(dgi):
            self._dirty(v, sign, is_del, g_s, gi, ends, seg_gi, new_cnt, dgi, new, had_first)
        new = np.where(new_cnt > 0, new, 0)
        prev = np.concatenate([[0], new[:-1]]) if nseg else new
        old = np.where(first, np.where(had, base, 0), prev)
        old = np.where(had | ~first, old, 0)
        last = np.ones(nseg, dtype=bool)
        last[:-1] = first[1:]
        self.ext[seg_g[last]] = new[last]
        if reset is None:
            self._append(g_s, v, sign)
        else:
            # a group with a reset: its log and its rows before the last reset net to nothing; what is left
            # is the last epoch's uncut rows (inserts only)
            has = np.zeros(len(dirty), dtype=bool)
            has[seg_gi[reset]] = True
            last_ep = ep[ends[last]]                         # per batch group, its last epoch
            keep = ~has[gi] | ((ep == last_ep[gi]) & ~cut)
            self._drop_groups(g_s[grp_start][has])
            self._append(g_s[keep], v[keep], sign[keep])
        return new, old

    def _inserts(self, v, g_s, gi, ends, seg_gi, seg_g, first, had, base):
        """``step`` for a batch without deletes: every segment has an insert, so each segment's extreme is
        the running extreme of its group's inserts so far, with the stored one where the group had rows."""
        _, ins_best = self._running_best(v, None, gi, ends, base)
        gh = had[first][seg_gi]                              # the group had rows before the batch
        new = np.where(gh, np.maximum(base, ins_best) if self.want_max else np.minimum(base, ins_best), ins_best)
        prev = np.empty_like(new)
        prev[0] = 0
        prev[1:] = new[:-1]
        old = np.where(first, np.where(had, base, 0), prev)
        last = np.ones(len(ends), dtype=bool)
        last[:-1] = first[1:]
        self.ext[seg_g[last]] = new[last]
        self._append(g_s, v, None)
        return new, old

    def _resets(self, v, sign, is_del, g_s, ends, new_cnt):
        """The segments whose deletes leave their group empty, and the rows they cut (per row). A segment
        resets its group when

        - in arrival order, the group's row count is zero right after the segment's last delete (a tumbling
          window's turnover: every old row deleted, then the new ones inserted), and no value deleted before
          it is inserted after it (else the zero count may hide a value deleted before its insert arrived);
          the rows up to that delete are cut; or
        - it deletes as many rows as the group held before it, and no value it deletes is one it inserts (a
          relation's row replaced, the new one arriving before the old one leaves: NEXMark q9's MIN over the
          maxima). The deletes then take exactly the rows held before (a value deleted beyond what was held
          would have to be inserted in the same instant), so the group holds the segment's inserts; the
          deletes are cut.

        Returns (reset per segment, cut per row, segment per row), or (None, None, None) when no segment
        resets."""
        n, nseg = len(sign), len(ends)
        seg_start = np.concatenate([[0], ends[:-1] + 1])
        before = np.zeros(n + 1, dtype=I64)                # before[i]: sum of sign[:i]
        np.cumsum(sign, out=before[1:])
        cnt0 = new_cnt - (before[ends + 1] - before[seg_start])       # the group's count before the segment
        dcs = np.zeros(n + 1, dtype=I64)
        np.cumsum(is_del, out=dcs[1:])
        d_cnt = dcs[ends + 1] - dcs[seg_start]
        rows = np.arange(n)
        dlast = np.maximum.reduceat(np.where(is_del, rows, -1), seg_start)
        at_a = (d_cnt > 0) & (cnt0 + before[dlast + 1] - before[seg_start] == 0)
        seg_row = np.repeat(np.arange(nseg), ends + 1 - seg_start) if at_a.any() else None
        if seg_row is not None:
            at_a = self._emptied(v, sign, is_del, g_s, ends, seg_row, dlast, at_a)
        cand_b = (d_cnt > 0) & (d_cnt == cnt0) & ~at_a
        if not (at_a.any() or cand_b.any()):
            return None, None, None
        if seg_row is None:
            seg_row = np.repeat(np.arange(nseg), ends + 1 - seg_start)
        at_b = cand_b
        if cand_b.any():
            rb = np.flatnonzero(cand_b[seg_row])
            sb, vb, db = seg_row[rb], v[rb], is_del[rb]
            o = _by_group_value(sb, vb)
            sb, vb, db = sb[o], vb[o], db[o]
            run = np.ones(len(sb), dtype=bool)
            run[1:] = (sb[1:] != sb[:-1]) | (vb[1:] != vb[:-1])
            at = np.flatnonzero(run)
            mixed = np.maximum.reduceat(db, at) & ~np.minimum.reduceat(db, at)    # a value deleted and inserted
            at_b = cand_b.copy()
            at_b[sb[at][mixed]] = False
        reset = at_a | at_b
        if not reset.any():
            return None, None, None
        cut = np.where(at_b[seg_row], is_del, at_a[seg_row] & (rows <= dlast[seg_row]))
        return reset, cut, seg_row

    def _emptied(self, v, sign, is_del, g_s, ends, seg_row, dlast, at_a):
        """``at_a`` (segments whose count is zero right after their last delete) kept only where that zero
        count is an empty group. Within one instant a delete may arrive before the insert it retracts (a join
        of a window with a relation updated at that instant), so a value can be below zero there while others
        are above: held {0, -1}, then +0 -0 +(-1) -(-1) -0 -0 +0 ends as {-1}, yet the count is zero after the
        last delete. Such a value is deleted before the last delete and inserted after it, and its rows held
        plus its net change up to the last delete are below zero. Those are checked against the log (rows
        held by the group before the batch) when the segment is its group's first in the batch; a later
        segment, or a value below zero, does not reset (the general path takes it)."""
        if self._deletes_what_is_held(v, is_del, g_s, ends, dlast, at_a):
            return at_a
        ra = np.flatnonzero(at_a[seg_row])
        sa = seg_row[ra]
        pre = ra <= dlast[sa]                              # up to the last delete; the rows after are inserts
        post = ~pre
        if not post.any() or _apart(v[ra], sa, pre & is_del[ra], post):
            return at_a
        o = _by_group_value(sa, v[ra])
        ra, sa, pre, post = ra[o], sa[o], pre[o], post[o]
        va = v[ra]
        run = np.ones(len(sa), dtype=bool)
        run[1:] = (sa[1:] != sa[:-1]) | (va[1:] != va[:-1])
        at = np.flatnonzero(run)
        net = np.add.reduceat(np.where(pre, sign[ra], 0), at)     # the value's net change up to the last delete
        suspect = (net < 0) & np.maximum.reduceat(post, at) & np.maximum.reduceat(pre & is_del[ra], at)
        if not suspect.any():
            return at_a
        seg_s, val_s, need = sa[at][suspect], va[at][suspect], -net[suspect]
        seg_start = np.concatenate([[0], ends[:-1] + 1])
        first = np.ones(len(ends), dtype=bool)
        first[1:] = g_s[ends[1:]] != g_s[ends[:-1]]
        ok = first[seg_s] & (self._held(g_s[seg_start[seg_s]], val_s) >= need)
        if ok.all():
            return at_a
        at_a = at_a.copy()
        at_a[seg_s[~ok]] = False
        return at_a

    def _deletes_what_is_held(self, v, is_del, g_s, ends, dlast, at_a) -> bool:
        """The common case of ``_emptied`` in O(rows), no sort: one group in the batch and in the log, whose
        first segment deletes, before any insert, the very rows the log holds in the order they came (a
        tumbling window's turnover, NEXMark q7's MAX: the window retracts its rows first in, first out), so
        its zero count is an empty group. False when that cannot be told so cheaply."""
        if g_s[0] != g_s[-1] or not at_a[0] or at_a[1:].any():
            return False
        k = int(dlast[0]) + 1
        if not is_del[:k].all():
            return False
        self._join_tail()
        return (len(self.lv) == k and bool((self.lg == g_s[0]).all()) and bool((self.lc == 1).all())
                and np.array_equal(self.lv, v[:k]))

    def _held(self, g: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Rows the log holds per (group, value) pair asked (its counts summed: inserts less deletes)."""
        self._join_tail()
        sel = np.flatnonzero(np.isin(self.lg, np.unique(g)))
        nl = len(sel)
        gg = np.concatenate([self.lg[sel], g])
        vv = np.concatenate([self.lv[sel], v])
        cc = np.concatenate([self.lc[sel], np.zeros(len(g), dtype=I64)])
        asked = np.arange(len(gg)) >= nl
        o = np.lexsort((asked, vv, gg))                    # per (group, value): the log's rows, then the asked
        gs, vs, cs = gg[o], vv[o], cc[o]
        start = np.ones(len(o), dtype=bool)
        start[1:] = (gs[1:] != gs[:-1]) | (vs[1:] != vs[:-1])
        acc = np.cumsum(cs)
        begin = (acc - cs)[start][np.cumsum(start) - 1]
        out = np.empty(len(g), dtype=I64)
        q = asked[o]
        out[o[q] - nl] = (acc - begin)[q]
        return out

    def _running_best(self, v, out, gi, ends, base):
        """Per segment, the best insert of its group in the batch up to the segment's end (``sr`` > 0 where
        there is one; rows marked ``out`` do not count) and that value: one running maximum over the values
        offset per group when the groups' value spans fit an int64 side by side, else over value ranks."""
        if out is None:                    # every row counts (``_inserts``)
            if not gi[-1]:
                acc = np.maximum if self.want_max else np.minimum
                return np.ones(len(ends), dtype=I64), acc.accumulate(v)[ends]
            out = np.zeros(len(v), dtype=bool)
            vk = v
        else:
            keep = ~out
            if not keep.any():
                return np.zeros(len(ends), dtype=I64), base
            if not gi[-1]:                 # one group: a running extreme of the values themselves
                big = np.iinfo(I64).min if self.want_max else np.iinfo(I64).max
                acc = np.maximum if self.want_max else np.minimum
                run = acc.accumulate(np.where(out, big, v))
                sr = (ends >= int(keep.argmax())).astype(I64)
                return sr, np.where(sr > 0, run[ends], base)
            vk = v[keep]
        lo, hi = int(vk.min()), int(vk.max())
        width = hi - lo + 2                               # 0: no insert yet; 1 .. hi - lo + 1: a value
        groups = int(gi[-1]) + 1
        if width < (1 << 62) // groups:
            r = (v - lo + 1) if self.want_max else (hi - v + 1)
            if out is not None and vk is not v:
                r = np.where(out, 0, r)
            off = gi * width
            sr = (np.maximum.accumulate(off + r) - off)[ends]
            # (sr - 1) first: lo - 1 or hi + 1 may lie outside int64 (a value at its end)
            with np.errstate(over="ignore"):
                best = ((sr - 1) + lo) if self.want_max else (hi - (sr - 1))
            return sr, np.where(sr > 0, best, base)
        uniq, inv = np.unique(np.where(out, vk[0], v), return_inverse=True)
        u = len(uniq)
        r = (inv.reshape(-1) + 1) if self.want_max else (u - inv.reshape(-1))
        r = np.where(out, 0, r).astype(I64)
        width = u + 1
        run = np.maximum.accumulate(gi * width + r) - gi * width
        sr = run[ends]
        return sr, uniq[(sr - 1 if self.want_max else u - sr) % u]

    def _drop_groups(self, gids: np.ndarray) -> None:
        """Drop these groups' rows from the log (they net to nothing): marked here, by the log's length now (rows
        appended later stay), and dropped by ``_join_tail`` when the log is next read; they count as deletes, so
        the log is netted (and they are dropped) once it has doubled."""
        if not len(self.lg) and not self.tail:
            return
        self.drop_at[gids] = len(self.lg) + self.tail_rows
        self.dropped.append(gids)
        self.log_dels += 1

    def _dirty(self, v, sign, is_del, g_s, gi, ends, seg_gi, new_cnt, dgi, new, had_first) -> None:
        """The extremes of the groups with deletes, segment by segment (written into ``new``). The log rows of
        all these groups are found with one pass over the log; small groups then go through one Python loop
        (``_small``), large ones segment by segment with numpy."""
        self._join_tail()
        seg_lo = np.searchsorted(seg_gi, dgi, side="left")
        seg_hi = np.searchsorted(seg_gi, dgi, side="right")
        row_lo = np.searchsorted(gi, dgi, side="left")
        gids = g_s[row_lo]                                   # ascending: the batch is sorted by group
        if len(self.lg):
            if len(gids) == 1:             # one group: its rows in log order are in (group) order already
                idx = np.flatnonzero(self.lg == gids[0])
            else:
                idx = np.flatnonzero(np.isin(self.lg, gids))
                idx = idx[stable_argsort(self.lg[idx])]
            lg = self.lg[idx]
            l_lo = np.searchsorted(lg, gids, side="left")
            l_hi = np.searchsorted(lg, gids, side="right")
        else:
            idx = np.empty(0, dtype=I64)
            l_lo = l_hi = np.zeros(len(gids), dtype=I64)
        row_hi = ends[seg_hi - 1] + 1
        size = (l_hi - l_lo) + (row_hi - row_lo)
        single = ((seg_hi - seg_lo) == 1) & (size <= SINGLE_MAX)
        if single.any():                 # one segment in the batch: its extreme from the group's net multiset
            self._single(v, sign, g_s, gi, idx, dgi, gids, single, seg_lo, new_cnt, new)
        small = (size <= SMALL) & ~single
        if small.sum() >= SMALL_VEC:       # many: all at once with numpy (``_small_all``)
            sm = np.flatnonzero(small)
            self._small_all(v, sign, ends, new_cnt, new, idx, l_lo[sm], l_hi[sm], row_lo[sm], seg_lo[sm],
                            seg_hi[sm])
        elif small.any():
            # only the rows of the small groups become Python lists: log rows and batch rows renumbered
            sm = np.flatnonzero(small)
            lsel = np.isin(lg, gids[sm]) if len(idx) else np.zeros(0, dtype=bool)
            lcs = np.concatenate([[0], np.cumsum(lsel)])
            mark = np.zeros(int(gi[-1]) + 1, dtype=bool)
            mark[dgi[sm]] = True
            bsel = mark[gi]
            bcs = np.concatenate([[0], np.cumsum(bsel)])
            rows = idx[lsel]
            self._small(self.lv[rows].tolist(), self.lc[rows].tolist(), v[bsel].tolist(), sign[bsel].tolist(),
                        (bcs[ends + 1] - 1).tolist(), new_cnt.tolist(), new,
                        zip(lcs[l_lo[sm]].tolist(), lcs[l_hi[sm]].tolist(), bcs[row_lo[sm]].tolist(),
                            seg_lo[sm].tolist(), seg_hi[sm].tolist()))
        for k in np.flatnonzero(~small & ~single).tolist():
            gid = int(gids[k])
            lv, lc = self.lv[idx[l_lo[k]:l_hi[k]]], self.lc[idx[l_lo[k]:l_hi[k]]]
            cur = int(self.ext[gid]) if had_first[dgi[k]] else None
            start = int(row_lo[k])
            lo = start
            for s in range(int(seg_lo[k]), int(seg_hi[k])):
                hi = int(ends[s]) + 1
                if new_cnt[s] <= 0:
                    cur = None
                else:
                    dels = is_del[lo:hi]
                    ins = v[lo:hi][~dels]
                    ib = self._best(ins) if len(ins) else None
                    if cur is not None and dels.any():
                        dv = v[lo:hi][dels]
                        if (dv == cur).any():           # maybe the last copy: count what is left of it
                            left = int(lc[lv == cur].sum()) + int(sign[start:hi][v[start:hi] == cur].sum())
                            if left <= 0:
                                cur = None
                        if ib is not None and (dv == ib).any():     # an insert cancelled in the same instant
                            cur = None
                    if cur is None:
                        cur = self._recompute(np.concatenate([lv, v[start:hi]]),
                                              np.concatenate([lc, sign[start:hi]]))
                    elif ib is not None:
                        cur = max(cur, ib) if self.want_max else min(cur, ib)
                new[s] = 0 if cur is None else cur
                lo = hi

    def _single(self, v, sign, g_s, gi, idx, dgi, gids, single, seg_lo, new_cnt, new) -> None:
        """The extremes of the groups with deletes that have one segment in the batch (the usual case: a
        relation's groups change at one instant per batch), all at once: the log rows and batch rows of these
        groups are netted per (group, value) by one sort, and each group's extreme is its best value left
        with a positive count (written into ``new``)."""
        k = np.flatnonzero(single)
        want = gids[k]
        in_log = np.isin(self.lg[idx], want) if len(idx) else np.zeros(0, dtype=bool)
        lrows = idx[in_log]
        mark = np.zeros(int(gi[-1]) + 1, dtype=bool)
        mark[dgi[k]] = True
        brows = np.flatnonzero(mark[gi])
        g = np.concatenate([self.lg[lrows], g_s[brows]])
        val = np.concatenate([self.lv[lrows], v[brows]])
        cnt = np.concatenate([self.lc[lrows], sign[brows]])
        order = _by_group_value(g, val)
        g, val, cnt = g[order], val[order], cnt[order]
        start = np.ones(len(g), dtype=bool)
        start[1:] = (g[1:] != g[:-1]) | (val[1:] != val[:-1])
        at = np.flatnonzero(start)
        net = np.add.reduceat(cnt, at)
        pos = net > 0
        pg, pv = g[at][pos], val[at][pos]                  # present values, by group then value ascending
        if self.want_max:
            pick = np.ones(len(pg), dtype=bool)
            pick[:-1] = pg[1:] != pg[:-1]                  # each group's last (largest) value
        else:
            pick = np.ones(len(pg), dtype=bool)
            pick[1:] = pg[1:] != pg[:-1]                   # each group's first (smallest) value
        best_g, best_v = pg[pick], pv[pick]
        segs = seg_lo[k]
        where = np.searchsorted(best_g, want)
        found = (where < len(best_g)) & (best_g[np.minimum(where, max(len(best_g) - 1, 0))] == want) \
            if len(best_g) else np.zeros(len(want), dtype=bool)
        out = np.zeros(len(want), dtype=I64)
        out[found] = best_v[where[found]]
        new[segs] = np.where(new_cnt[segs] > 0, out, 0)

    def _small_all(self, v, sign, ends, new_cnt, new, idx, l_lo, l_hi, row_lo, seg_lo, seg_hi) -> None:
        """The small groups' extremes after each of their segments, all groups at once (written into
        ``new``): every log row and batch row of these groups is an entry (group, value, count, segment; log
        rows count from the group's first segment); sorted by (group, value, segment), a running count per
        (group, value) says from which segment to which the value is present, and each segment's extreme is
        the best value present in it (``ufunc.at`` over the expanded (segment, value) pairs, at most rows
        times segments per group)."""
        k = len(seg_lo)
        # log entries
        l_len = l_hi - l_lo
        lpos = np.arange(int(l_len.sum())) + np.repeat(l_lo - np.cumsum(l_len) + l_len, l_len)
        lrows = idx[lpos]
        # batch entries: rows row_lo .. end of the group's last segment
        b_hi = ends[seg_hi - 1] + 1
        b_len = b_hi - row_lo
        bpos = np.arange(int(b_len.sum())) + np.repeat(row_lo - np.cumsum(b_len) + b_len, b_len)
        grp = np.concatenate([np.repeat(np.arange(k), l_len), np.repeat(np.arange(k), b_len)])
        val = np.concatenate([self.lv[lrows], v[bpos]])
        cnt = np.concatenate([self.lc[lrows], sign[bpos]])
        seg = np.concatenate([np.repeat(seg_lo, l_len), np.searchsorted(ends, bpos)])
        order = np.lexsort((seg, val, grp))
        grp, val, cnt, seg = grp[order], val[order], cnt[order], seg[order]
        run_start = np.ones(len(grp), dtype=bool)
        run_start[1:] = (grp[1:] != grp[:-1]) | (val[1:] != val[:-1])
        cs = np.cumsum(cnt)
        run = cs - (cs - cnt)[run_start][np.cumsum(run_start) - 1]      # count of (group, value) after it
        nxt = np.empty(len(seg), dtype=np.int64)
        nxt[:-1] = np.where(run_start[1:], seg_hi[grp[:-1]], seg[1:])
        if len(seg):
            nxt[-1] = seg_hi[grp[-1]]
        present = (run > 0) & (nxt > seg)                                  # in segments seg .. nxt - 1
        a, b, x = seg[present], nxt[present], val[present]
        span = b - a
        at = np.arange(int(span.sum())) + np.repeat(a - np.cumsum(span) + span, span)
        best = np.full(len(new), np.iinfo(I64).min if self.want_max else np.iinfo(I64).max, dtype=I64)
        (np.maximum if self.want_max else np.minimum).at(best, at, np.repeat(x, span))
        s_len = seg_hi - seg_lo
        segs = np.arange(int(s_len.sum())) + np.repeat(seg_lo - np.cumsum(s_len) + s_len, s_len)
        new[segs] = np.where(new_cnt[segs] > 0, best[segs], 0)

    def _small(self, lv: list, lc: list, v: list, sign: list, ends: list, new_cnt: list, new: np.ndarray,
               groups) -> None:
        """Small groups' segments with a count per value in a dict: for a group of a few rows, numpy calls
        cost more than the Python steps. ``groups``: (log from, log to, first row, first segment, segment
        end) per group, over the lists of the log rows found and of the batch."""
        best = max if self.want_max else min
        for l0, l1, lo, s0, s1 in groups:
            counts: dict = {}
            for x, c in zip(lv[l0:l1], lc[l0:l1]):
                counts[x] = counts.get(x, 0) + c
            for s in range(s0, s1):
                hi = ends[s] + 1
                for x, c in zip(v[lo:hi], sign[lo:hi]):
                    counts[x] = counts.get(x, 0) + c
                new[s] = best(x for x, c in counts.items() if c > 0) if new_cnt[s] > 0 else 0
                lo = hi

    def _recompute(self, vals: np.ndarray, cnts: np.ndarray) -> int:
        """The extreme of the multiset given as (value, count) entries (repeats allowed, counts summing to
        nonnegative nets): the best value whose entries sum to more than zero. Only the best ``k`` entries are
        netted (a partition, not a sort), ``k`` doubling until one of them is present: after a window's
        expiry, the expired values net to zero among them."""
        n = len(vals)
        k = 64
        key = ~vals if self.want_max else vals           # ~v = -v - 1: reversed, no overflow
        while True:
            if k >= n:
                sel = np.arange(n)
            else:
                kth = np.partition(key, k)[k]
                sel = np.flatnonzero(key <= kth)          # every entry of the k-th best value too
            uq, iv = np.unique(vals[sel], return_inverse=True)
            net = np.bincount(iv.reshape(-1), weights=cnts[sel], minlength=len(uq))
            if (net > 0).any():
                return self._best(uq[net > 0])
            if k >= n:
                raise ValueError("extreme of an empty multiset")
            k *= 4

    def _append(self, g: np.ndarray, v: np.ndarray, c: np.ndarray | None) -> None:
        """Add the batch to the log (``c`` None: inserts only, a count of one each); net the log once it has
        doubled since the last netting, or, while only inserts were added since (each log row then stands for
        live rows: netting would only merge repeats of a value), once it has grown eightfold (an insert-only
        input, NEXMark q4's MAX over a join: the log then stays within eight times its distinct values)."""
        if not len(g) or not self.keep_log:
            return
        fresh = not len(self.lg) and not self.tail
        self.tail.append((g.copy(), v.copy(), None if c is None else c.copy()))
        self.tail_rows += len(g)
        dels = 0 if c is None else int((c < 0).sum())
        self.log_dels += dels
        if fresh and not dels:          # the live multiset itself, no pair to net
            self.netted = len(g)
        grown = len(self.lg) + self.tail_rows
        if grown > 2 * self.netted + NET_MIN and (self.log_dels or grown > 8 * self.netted + NET_MIN):
            self._join_tail()
            g, v, c = _sorted_log(self.lg, self.lv, self.lc)
            start = np.ones(len(g), dtype=bool)
            start[1:] = (g[1:] != g[:-1]) | (v[1:] != v[:-1])
            at = np.flatnonzero(start)
            net = np.add.reduceat(c, at) if len(at) else c[:0]
            keep = net != 0
            self.lg, self.lv, self.lc = g[at][keep], v[at][keep], net[keep]
            self.netted, self.log_dels = len(self.lg), 0


def _apart(v: np.ndarray, seg: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether, in every segment (``seg`` ascending, one run each), the values of the rows marked ``a`` and
    those marked ``b`` lie in ranges that do not meet, so that no value is in both: NEXMark q9's MIN over
    bid times deletes the old maximum's earlier times and inserts the new bid's later one. Per-segment
    minima and maxima, no sort.

    >>> _apart(np.array([1, 5, 3, 3]), np.array([0, 0, 1, 1]), np.array([1, 0, 1, 0], bool), np.array([0, 1, 0, 1], bool))
    False
    """
    start = np.empty(len(seg), dtype=bool)
    start[0] = True
    np.not_equal(seg[1:], seg[:-1], out=start[1:])
    at = np.flatnonzero(start)
    hi, lo = np.iinfo(I64).max, np.iinfo(I64).min
    a_lo = np.minimum.reduceat(np.where(a, v, hi), at)
    a_hi = np.maximum.reduceat(np.where(a, v, lo), at)
    b_lo = np.minimum.reduceat(np.where(b, v, hi), at)
    b_hi = np.maximum.reduceat(np.where(b, v, lo), at)
    has_a = np.maximum.reduceat(a, at)
    has_b = np.maximum.reduceat(b, at)
    return bool((~has_a | ~has_b | (a_hi < b_lo) | (b_hi < a_lo)).all())


def _by_group_value(g: np.ndarray, v: np.ndarray) -> np.ndarray:
    """An order of the rows by (group, value) (not stable: equal pairs are summed). One sort of the pair
    packed into an int64 when their spans fit, else a lexsort."""
    if not len(g):
        return np.arange(0)
    glo, vlo = int(g.min()), int(v.min())
    gbits, vbits = (int(g.max()) - glo).bit_length(), (int(v.max()) - vlo).bit_length()
    if gbits + vbits <= 62:
        return np.argsort(((g - glo) << vbits) | (v - vlo))
    return np.lexsort((v, g))


def _sorted_log(g: np.ndarray, v: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The log rows in (group, value) order, for netting. When group, value and count fit one int64 side by
    side (their spans' bits), one ``np.sort`` of the packed rows does it (the vectorised sort; an argsort and
    three gathers cost about three times as much on a tumbling window's 276,000 rows); else a lexsort.

    >>> [a.tolist() for a in _sorted_log(np.array([1, 0, 1]), np.array([5, 9, 2]), np.array([1, -1, 1]))]
    [[0, 1, 1], [9, 2, 5], [-1, 1, 1]]
    """
    if not len(g):
        return g, v, c
    lo = [int(a.min()) for a in (g, v, c)]
    bits = [(int(a.max()) - m).bit_length() for a, m in zip((g, v, c), lo)]
    if sum(bits) > 63:
        order = stable_lexsort2(v, g)
        return g[order], v[order], c[order]
    key = (g - lo[0]).astype(I64) << (bits[1] + bits[2])
    key |= (v - lo[1]).astype(I64) << bits[2]
    key |= (c - lo[2]).astype(I64)
    key.sort()
    mask_v, mask_c = (1 << bits[1]) - 1, (1 << bits[2]) - 1
    return ((key >> (bits[1] + bits[2])) + lo[0], ((key >> bits[2]) & mask_v) + lo[1], (key & mask_c) + lo[2])
