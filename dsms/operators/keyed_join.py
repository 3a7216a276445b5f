"""A join release with an input held by key (``synopses/keyed_index.py``): probed first, counted exactly, then
applied, in one pass instead of a count of its pairs and a join that finds them again.

Source: digest-002a section 2.15 (Δ(L ⋈ R) = ΔL ⋈ R + L' ⋈ ΔR, the signed rows of ``JoinOp._join_signed``).

A keyed input finds at most one row per probe, so a release's pairs are known once its probes are made: each
side's deltas against the other side's rows held before the release, and the pairs of deltas of the two sides
(stamped with the later timestamp). Nothing changes while probing, so when the pairs pass ``PAIR_BUDGET`` the
release goes the general way instead (``JoinOp._bounded`` cuts it, and its probes are answered from the indexes'
caches); otherwise it is emitted and both sides' deltas applied. NEXMark q9 joins the bids with the MAX price per
auction and with the earliest time of that price this way; the general way weighed each release by counting
its pairs before joining it, which probed and sorted the same codes twice.
"""

from __future__ import annotations

from synopses.hash_multi_index import HashMultiIndexSynopsis
from synopses.keyed_index import KeyedIndexSynopsis
from synopses.sort_order import search_both, stable_argsort


def keyed_release(join, parts: dict, budget: int) -> bool:
    """Apply a release of ``join`` (a ``JoinOp``) whose inputs include one held by key, if it qualifies: both
    inputs exact (no sample), no window fused into the join, signed rows on each side that has some, and at
    most ``budget`` pairs. Returns whether it did (else nothing changed)."""
    if not (keyed(join.sides[0]) or keyed(join.sides[1])):
        return False
    if any(x is not None for x in (*join.gates, *join.windows)):
        return False
    if any(type(p) is tuple for p in parts.values()):
        return False
    codes = {side: join._codes(side, b) for side, b in parts.items()}
    found = []                    # (side of the deltas, their positions, the other side's columns, signs)
    pairs = 0
    for side, b in parts.items():
        other = join.sides[1 - side]
        if keyed(other):
            pidx, theirs, their_sign = other.lookup_keyed(codes[side], b)
        elif type(other) is HashMultiIndexSynopsis:        # probed by the keyed input's rows (its bucket column)
            pidx, theirs, their_sign = other.lookup_from(codes[side], b)
        else:
            pidx, theirs, their_sign = other.lookup(codes[side])
        pairs += len(pidx)
        if pairs > budget:
            return False
        if len(pidx):
            found.append((side, pidx, theirs, their_sign))
    cross = None
    if len(parts) == 2:
        o = stable_argsort(codes[1])
        lo, hi = search_both(codes[1][o], codes[0])
        cnt = hi - lo
        pairs += int(cnt.sum())
        if pairs > budget:
            return False
        if pairs:
            cross = (o, lo, cnt)
    for side in (0, 1):
        join.count_copies(side, parts.get(side))
    outs = [join._deltas_joined(side, parts[side], pidx, theirs, their_sign)
            for side, pidx, theirs, their_sign in found]
    if cross is not None:
        joined = join._delta_pairs(parts[0], parts[1], *cross)
        if joined is not None:
            outs.append(joined)
    join._emit_signed(outs, cross is not None)
    for side, b in parts.items():
        index = join.sides[side]
        if keyed(index):
            index.insert_keyed(b.ts, b.sign, b.cols, codes[side], b)
        else:
            index.insert(b.ts, b.sign, b.cols, codes[side])
    return True


def keyed(index) -> bool:
    """Whether a join index holds its rows by key now."""
    return type(index) is KeyedIndexSynopsis and index.keyed()

