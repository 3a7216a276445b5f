"""A release of a join whose inputs never delete (``append_join.py``) when one input holds each key at most once
and its new rows bring keys it has not held (NEXMark q3: people by their new ids), applied with a fixed,
small number of numpy calls and no Python per row (issue 15).

Source: digest-002a section 2.15 (Δ(L ⋈ R) = ΔL ⋈ R + L' ⋈ ΔR; inserts only) and digest-004 R-PLAN-06 (one
synopsis per input, hashed on the join key: here the key slots of ``synopses/key_slots.py``).

Call the input whose keys are unique U and the other M. A release adds exactly the pairs ΔU ⋈ M_old (at ΔU's
instants) and ΔM ⋈ U_new, U_new = U_old + ΔU (at the later of the two rows' instants: ΔM's for a pair with a
held row, which entered at or before any released one), the same pairs ``append_small.py`` finds. Because U
holds each key at most once, ``U.count[slot]`` says whether it holds a key and ``U.head[slot]`` is that row:
ΔM ⋈ U_new is two gathers and a ``nonzero``, whatever the number of rows held. ΔU ⋈ M_old needs M's rows by
key only when some held row of M has one of ΔU's keys, which ``M.count`` tells with one gather; so M's new
rows are counted per key but not placed under it (``SmallAppendIndexSynopsis.add_counted``) until a probe
needs them (then all at once, by the ``_index`` an append would have run). NEXMark's auctions name sellers
that exist already, so new people almost never find one (over q3's 1M events at 10,000 per push, no
release did: the counted auctions were never placed), and placing each release's auctions by seller (a sort
and block moves) was most of the array path's cost.

It applies when the join has no predicate on its pairs and no band input (``AppendJoin.lazy``), U holds no
counted rows and at most one row per key, and U's new key codes are strictly ascending (so distinct) and not
held yet (``count`` zero). Otherwise nothing changes but key slots handed out (and the dict form left, see
below), and ``AppendJoin.apply`` goes on as before: a key U held already makes its ``most`` 2 there, so U
stops qualifying. The pair count against the join's budget (``AppendJoin.fits``) reads ``count`` and
``most``, which counted rows keep exact.

While both inputs are in the dict form (``synopses/small_append_index.py``), a release of fewer than
``DENSE_ROWS`` rows is left to the dict path, which costs per row but has the smaller fixed cost (NEXMark q3 at
1,000 events per push: about 20 rows a release); the first larger one moves both into the arrays for good.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from dsms.batch import Batch
from dsms.operators.append_pairs import Pairs, emit_pairs

DENSE_ROWS = 64     # released rows from which this path beats the dict form's (``append_small.py``)

if TYPE_CHECKING:
    from dsms.operators.append_join import AppendJoin
    from dsms.operators.join import JoinOp


def dense_release(aj: AppendJoin, op: JoinOp, parts: dict) -> bool:
    """Apply the release ``parts`` (per input, a batch of inserts) and emit its pairs if one input holds its
    keys uniquely and gets fresh distinct keys (see the module); returns whether it did (else nothing was
    changed but the key slots handed out and the dict form left)."""
    if op.predicate is not None or aj.lazy is not None:
        return False
    batches = (parts.get(0), parts.get(1))
    if aj.sides[0].keys is not None and aj.sides[1].keys is not None:
        rows = sum(len(b.ts) for b in batches if b is not None)
        if rows < DENSE_ROWS:
            return False                  # the dict form's probes are cheaper (``append_small.py``)
    for side in (1, 0):
        u_ix = aj.sides[side]
        if u_ix.most > 1 or u_ix.counted or u_ix.pending:
            continue
        ub = batches[side]
        su = None
        if ub is not None and len(ub.ts):
            su = _fresh_slots(aj, op, side, ub)
            if su is None:
                continue
        break
    else:
        return False
    m_ix = aj.sides[1 - side]
    if m_ix.pending:
        return False
    mb = batches[1 - side]
    sm = _slots(aj, op, 1 - side, mb) if mb is not None and len(mb.ts) else None
    for ix in (u_ix, m_ix):
        if ix.keys is not None:
            ix.to_arrays()                # (may hand out slots)
    n_slots = aj.slots.n
    for ix in (u_ix, m_ix):
        if n_slots > len(ix.count):
            ix.cover(n_slots)
    found = []
    u0 = u_ix.n
    if su is not None:
        if u0 and u_ix.count[su].any():
            return False                              # a key U holds already: the general path
        if m_ix.n and m_ix.count[su].any():           # ΔU ⋈ M_old: M's rows placed, then found by key
            p, rows = m_ix.find(su)               # (by key, not in time order)
            found.append(Pairs(ub.ts[p], ub.cols, p, m_ix, rows, side == 0).in_time_order())
        u_ix.add_unique(ub.cols, su)
    if sm is not None:
        if u_ix.n:                                    # ΔM ⋈ U_new: a key's one row is its head
            hit = u_ix.count[sm].nonzero()[0]
            if len(hit):
                rows = u_ix.head[sm[hit]]
                ts = mb.ts[hit]
                if su is not None and _later(ts, rows, u0, ub):
                    found.append(Pairs(ts, mb.cols, hit, u_ix, rows, side == 1).in_time_order())
                else:                                 # in the batch's order: in time order already
                    found.append(Pairs(ts, mb.cols, hit, u_ix, rows, side == 1))
        m_ix.add_counted(mb.cols, sm)
    aj._memo.clear()
    aj._found.clear()
    if len(found) == 1:
        _emit(op, found[0], aj.sides[0].width)
    elif found:
        emit_pairs(op, found, aj.sides[0].width)
    return True


def _slots(aj: AppendJoin, op: JoinOp, side: int, batch: Batch) -> np.ndarray:
    """The key slots of a released batch's rows (a single INT key column: its values are the codes)."""
    keys = op.keys[side]
    if len(keys) == 1:
        c = batch.cols[keys[0]]
        if c.dtype == np.int64:
            return aj.slots.of(c)
    return aj.slots.of(op._codes(side, batch))


def _fresh_slots(aj: AppendJoin, op: JoinOp, side: int, batch: Batch) -> np.ndarray | None:
    """The key slots of the released rows of the input that would hold its keys uniquely, if their key codes
    are strictly ascending (so distinct: equal codes, equal slots), else None."""
    keys = op.keys[side]
    c = batch.cols[keys[0]] if len(keys) == 1 else None
    if c is None or c.dtype != np.int64:
        c = op._codes(side, batch)
    if len(c) > 1 and not (c[1:] > c[:-1]).all():
        return None
    return aj.slots.of(c, ascending=True)


def _emit(op: JoinOp, pairs, width: int) -> None:
    """Emit one set of pairs in time order, in the columns the join keeps."""
    op.emit(Batch(pairs.ts, np.ones(len(pairs.ts), dtype=np.int8), pairs.columns(width, op.keep)))


def _later(ts: np.ndarray, rows: np.ndarray, u0: int, ub: Batch) -> bool:
    """Stamp the pairs with a row of U new in this release (numbered from ``u0``) at the later of the two
    rows' instants (``ts``, a copy, is changed in place); returns whether any stamp changed."""
    new = (rows >= u0).nonzero()[0]
    if not len(new):
        return False
    t, u = ts[new], ub.ts[rows[new] - u0]
    later = u > t
    if not later.any():
        return False
    ts[new] = np.maximum(t, u)
    return True
