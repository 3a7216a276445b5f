"""RowLog against a plain Python list of its rows: appends of every size (adopted releases and copies into the
open segment), drops from the head, and ``take``/``live_cols`` of any live rows."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from synopses.row_log import ADOPT_ROWS, RowLog

# Each step: append n rows (some large enough to be adopted as they came), or drop k of the oldest.
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.sampled_from([1, 3, 40, ADOPT_ROWS - 1, ADOPT_ROWS, ADOPT_ROWS + 5])),
        st.tuples(st.just("drop"), st.integers(0, 2 * ADOPT_ROWS)),
    ),
    min_size=1, max_size=14)


@settings(max_examples=40, deadline=None)
@given(_steps, st.randoms(use_true_random=False))
def test_take_and_live_cols_give_the_rows_a_list_holds(steps, rnd):
    log = RowLog([np.empty(0, dtype=np.int64), np.empty(0, dtype=object)])
    model: list[tuple[int, str]] = []       # the live rows, oldest first
    head = 0                                 # sequence number of model[0]
    counter = 0
    for op, n in steps:
        if op == "append":
            ints = np.arange(counter, counter + n, dtype=np.int64)
            strs = np.array([f"s{v}" for v in ints.tolist()], dtype=object)
            log.append(ints % 5, [ints, strs])
            model.extend(zip(ints.tolist(), strs.tolist()))
            counter += n
        else:
            k = min(n, len(model))
            log.drop(k)
            del model[:k]
            head += k
        assert (log.head, log.tail) == (head, head + len(model))
        assert [c.tolist() for c in log.live_cols()] == [[r[0] for r in model], [r[1] for r in model]]
        if model:
            seq = np.array([rnd.randrange(head, head + len(model)) for _ in range(rnd.randrange(1, 30))],
                           dtype=np.int64)
            got = log.take(seq)
            want = [model[s - head] for s in seq.tolist()]
            assert got[0].tolist() == [w[0] for w in want]
            assert got[1].tolist() == [w[1] for w in want]
            assert log.seq_codes(head, head + len(model)).tolist() == [r[0] % 5 for r in model]
