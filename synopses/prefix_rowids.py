"""Row ids coded on a row's non-string columns first, its strings compared only against one row per prefix
(issue 15: NEXMark q8's DISTINCT of (id, name)).

``RowIds`` codes every column: a string column costs a dict lookup per row, and a new string a dict insert,
then the row's id is one more hash table probe over (prefix, string code). When the other columns nearly decide
the row (an id beside its name), most of that is wasted: ``PrefixRowIds`` gives the non-string columns their
persistent ids (a ``RowIds`` of those alone, hash tables probed a batch at a time), keeps per such prefix one
representative row and its strings, and compares each row's strings with its prefix's representative's, an
element-wise ``==`` over object arrays (a pointer comparison when they are the same objects, as rows a join
gathered from one input row are). The rows whose strings differ from their representative's (few when the
prefix nearly decides the row) are coded as ``RowIds`` would, by (prefix id, strings), so a table where the
prefix decides little costs about what ``RowIds`` costs, not a Python loop per row. Ids are dense and
persistent, equal exactly for equal rows, as ``RowIds``'s (same interface: ``ids``, ``n``, ``rows``,
``compact``, ``nbytes``).
"""

from __future__ import annotations

import numpy as np

from synopses.base import array_bytes
from synopses.rowcodes import RowIds, _renumber

_is = np.frompyfunc(lambda a, b: a is b, 2, 1)      # element-wise identity of two object arrays


class PrefixRowIds:
    """Dense persistent ids for rows of some non-string columns (at least one) and some string columns (at
    least one: ``fits``).

    >>> r = PrefixRowIds([np.dtype(np.int64), np.dtype(object)])
    >>> r.ids([np.array([5, 7, 5, 5]), np.array(["a", "b", "a", "c"], dtype=object)]).tolist()
    [0, 1, 0, 2]
    >>> r.ids([np.array([7, 5, 9]), np.array(["b", "c", "a"], dtype=object)]).tolist()
    [1, 2, 3]
    """

    def __init__(self, dtypes: list) -> None:
        kinds = [np.dtype(d).kind for d in dtypes]
        self.key_cols = [j for j, k in enumerate(kinds) if k != "O"]
        self.obj_cols = [j for j, k in enumerate(kinds) if k == "O"]
        self.prefix = RowIds([dtypes[j] for j in self.key_cols])
        self.n = 0                                          # ids handed out: 0 .. n-1
        self.rep = np.full(64, -1, dtype=np.int64)          # per prefix id: its representative row (-1: none)
        self.prefix_of = np.zeros(64, dtype=np.int64)       # per row id: its prefix id
        self.vals = [np.empty(64, dtype=object) for _ in self.obj_cols]    # per row id: its strings
        # the rows unlike their prefix's representative, coded by (prefix id, strings), and their ids here
        self.spill = RowIds([np.dtype(np.int64)] + [np.dtype(object)] * len(self.obj_cols))
        self.spill_to = np.full(64, -1, dtype=np.int64)

    @staticmethod
    def fits(dtypes: list) -> bool:
        """Whether rows of these columns have both kinds of column."""
        kinds = {np.dtype(d).kind == "O" for d in dtypes}
        return kinds == {True, False}

    def nbytes(self) -> int:
        n = self.n
        return (self.prefix.nbytes() + self.rep.nbytes + self.prefix_of.nbytes
                + sum(array_bytes(v[:n]) + v.nbytes - v[:n].nbytes for v in self.vals) + self.spill.nbytes()
                + self.spill_to.nbytes)

    def ids(self, cols: list[np.ndarray]) -> np.ndarray:
        """The id of every row of the columns ``cols``; rows never seen before get new ids."""
        n = len(cols[0])
        p = self.prefix.ids([cols[j] for j in self.key_cols])
        if self.prefix.n > len(self.rep):
            rep = np.full(max(self.prefix.n, 2 * len(self.rep)), -1, dtype=np.int64)
            rep[:len(self.rep)] = self.rep
            self.rep = rep
        objs = [cols[j] for j in self.obj_cols]
        r = self.rep[p]
        fresh = np.flatnonzero(r < 0)
        if len(fresh):                      # the first row of each new prefix becomes its representative
            pf = p[fresh]
            uniq, first = np.unique(pf, return_index=True)
            self.rep[uniq] = self._add(fresh[first], uniq, objs)
            r = self.rep[p]
            if len(uniq) == n:              # every row a new prefix, once: each row is its own representative
                return r                    # (q8's window of new persons: no strings to compare, issue 15)
        out = np.full(n, -1, dtype=np.int64)
        same = np.ones(n, dtype=bool)
        for c, v in zip(objs, self.vals):
            same &= (c == v[r]).astype(bool, copy=False)
        out[same] = r[same]
        if not same.all():
            self._others(np.flatnonzero(~same), p, r, objs, out)
        return out

    def _others(self, idx: np.ndarray, p: np.ndarray, r: np.ndarray, objs: list[np.ndarray],
                out: np.ndarray) -> None:
        """The ids of the rows ``idx``, whose strings differ by ``==`` from their representative's: the
        representative's after all where each string is the very object (equal as dict keys are: a NaN pushed
        as an object), else by (prefix, strings) through ``spill``, new ids for new rows."""
        alike = np.ones(len(idx), dtype=bool)
        for c, v in zip(objs, self.vals):
            a, b = c[idx], v[r[idx]]
            alike &= (a == b).astype(bool, copy=False) | _is(a, b).astype(bool)
        out[idx[alike]] = r[idx[alike]]
        idx = idx[~alike]
        if not len(idx):
            return
        sid = self.spill.ids([p[idx]] + [c[idx] for c in objs])
        if self.spill.n > len(self.spill_to):
            grown = np.full(max(self.spill.n, 2 * len(self.spill_to)), -1, dtype=np.int64)
            grown[:len(self.spill_to)] = self.spill_to
            self.spill_to = grown
        new = np.flatnonzero(self.spill_to[sid] < 0)
        if len(new):
            uniq, first = np.unique(sid[new], return_index=True)
            rows = idx[new[first]]
            self.spill_to[uniq] = self._add(rows, p[rows], objs)
        out[idx] = self.spill_to[sid]

    def _add(self, rows: np.ndarray, prefixes: np.ndarray, objs: list[np.ndarray]) -> np.ndarray:
        """New ids for the rows at ``rows`` of ``objs`` (of prefixes ``prefixes``), in order."""
        n, m = self.n, len(rows)
        if n + m > len(self.prefix_of):
            cap = max(n + m, 2 * len(self.prefix_of))
            grown = np.zeros(cap, dtype=np.int64)
            grown[:n] = self.prefix_of[:n]
            self.prefix_of = grown
            for k, v in enumerate(self.vals):
                g = np.empty(cap, dtype=object)
                g[:n] = v[:n]
                self.vals[k] = g
        self.prefix_of[n:n + m] = prefixes
        for c, v in zip(objs, self.vals):
            v[n:n + m] = c[rows]
        self.n = n + m
        return np.arange(n, n + m, dtype=np.int64)

    def rows(self, ids: np.ndarray, dtypes: list) -> list[np.ndarray]:
        """The column values of the rows ``ids`` (``RowIds.rows``).

        >>> r = PrefixRowIds([np.dtype(object), np.dtype(np.float64)])
        >>> ids = r.ids([np.array(["a", "b", "a"], dtype=object), np.array([1.5, -0.0, 2.0])])
        >>> [c.tolist() for c in r.rows(ids, [object, np.float64])]
        [['a', 'b', 'a'], [1.5, 0.0, 2.0]]
        """
        ids = np.asarray(ids, dtype=np.int64)
        out: list = [None] * (len(self.key_cols) + len(self.obj_cols))
        keys = self.prefix.rows(self.prefix_of[ids], [dtypes[j] for j in self.key_cols])
        for j, c in zip(self.key_cols, keys):
            out[j] = c
        for j, v in zip(self.obj_cols, self.vals):
            out[j] = v[ids]
        return out

    def compact(self, keep: np.ndarray) -> np.ndarray:
        """Forget the rows whose ids are not in the mask ``keep`` (length ``n``), and the prefixes only they had;
        renumber the others densely in the same order. Returns the new id of every old id (-1 if forgotten)."""
        new = _renumber(keep)
        kept = np.flatnonzero(keep)
        pk = self.prefix_of[kept]
        keep_prefix = np.zeros(self.prefix.n, dtype=bool)
        keep_prefix[pk] = True
        pk = self.prefix.compact(keep_prefix)[pk]
        m = len(kept)
        cap = max(64, 2 * m)
        self.prefix_of = np.zeros(cap, dtype=np.int64)
        self.prefix_of[:m] = pk
        vals = []
        for v in self.vals:
            g = np.empty(cap, dtype=object)
            g[:m] = v[kept]
            vals.append(g)
        self.vals = vals
        self.n = m
        self.rep = np.full(max(64, self.prefix.n), -1, dtype=np.int64)
        uniq, first = np.unique(pk, return_index=True)
        self.rep[uniq] = first                                          # each prefix's first row
        self.spill = RowIds([np.dtype(np.int64)] + [np.dtype(object)] * len(self.obj_cols))
        others = np.flatnonzero(self.rep[pk] != np.arange(m))
        self.spill_to = np.full(max(64, len(others)), -1, dtype=np.int64)
        if len(others):
            sid = self.spill.ids([pk[others]] + [v[others] for v in vals])
            self.spill_to[sid] = others
        return new
