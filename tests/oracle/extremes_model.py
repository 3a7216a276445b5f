"""A plain model of per-group MIN/MAX under inserts and deletes (a Counter per group), for the tests of
``synopses.int_extremes.IntExtremes``: one batch of segments applied to both, the extremes compared."""

from __future__ import annotations

from collections import Counter

import numpy as np


def check_step(x, bags: dict[int, Counter], segs: list, want_max: bool) -> None:
    """Apply ``segs`` ([(group id, [(value, sign), ...]), ...], one segment per group and instant) as one
    ``x.step`` and to ``bags``; assert that every segment's new and old extreme is the model's (0 for an empty
    group)."""
    best = max if want_max else min
    v, sign, g, ends, had, cnt, exp_new, exp_old = [], [], [], [], [], [], [], []
    for gid, ops in segs:
        bag = bags.setdefault(gid, Counter())
        before = +bag
        had.append(bool(before))
        exp_old.append(best(before) if before else 0)
        for val, s in ops:
            v.append(val)
            sign.append(s)
            g.append(gid)
            bag[val] += s
        ends.append(len(v) - 1)
        after = +bag
        cnt.append(sum(after.values()))
        exp_new.append(best(after) if after else 0)
    new, old = x.step(np.array(v, dtype=np.int64), np.array(sign), np.array(g, dtype=np.int64),
                      np.array(ends), np.array(had), np.array(cnt))
    assert new.tolist() == exp_new
    assert old.tolist() == exp_old
