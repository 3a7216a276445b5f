"""SAMPLE(p): each stream element is kept independently with probability p/100 (a Bernoulli sample, not a
reservoir: digest-004 R-CQL-08 and P-9), before windowing. 100 keeps everything; the generator is seeded, so a
run is reproducible; frontiers pass even when every element of a batch is dropped. The rate is checked within
bounds worked out from the binomial distribution."""

import math

import pytest
from harness import Harness
from oracle.generators import CATALOG, Workload, compare, run_engine, run_reference

from dsms.operators.sample import SampleOp

N = 20_000


def sample(percent: float, seed: int = 1) -> Harness:
    return Harness(lambda inp, out: SampleOp(percent, seed, inp, out))


def kept(h: Harness) -> list[int]:
    h.push(list(range(N)), [(i,) for i in range(N)], ["INT"])
    return [row[0] for _, _, row in h.run()]


def test_100_percent_keeps_every_element():
    h = sample(100)
    h.push([1, 1, 2], [(1,), (1,), (2,)], ["INT"])
    assert h.run() == [(1, 1, (1,)), (1, 1, (1,)), (2, 1, (2,))]


@pytest.mark.parametrize("percent", [1, 12.5, 50, 90])
def test_each_element_is_kept_with_probability_p(percent):
    got = kept(sample(percent))
    p = percent / 100
    # the count is Binomial(N, p): 6 standard deviations either side fail once in 10^9 runs
    assert abs(len(got) - N * p) <= 6 * math.sqrt(N * p * (1 - p))
    # independently of position: the first and the second half keep about as many
    half = sum(v < N // 2 for v in got)
    assert abs(half - len(got) / 2) <= 6 * math.sqrt(len(got) / 4)
    assert got == sorted(got)                              # kept elements stay in order


def test_the_same_seed_draws_the_same_sample_and_another_seed_another():
    assert kept(sample(30, seed=7)) == kept(sample(30, seed=7))
    assert kept(sample(30, seed=7)) != kept(sample(30, seed=8))


def test_a_batch_dropped_whole_still_moves_the_frontier():
    h = sample(0.001)
    h.push([3, 9], [(1,), (2,)], ["INT"])
    assert h.run() == [] and h.frontier == 9


def test_sample_100_through_the_engine_is_the_reference_evaluators_query_without_it():
    actions = (("push", "S", [{"a": 1, "b": 1, "c": "x"}, {"a": 2, "b": 2, "c": "y"}], [1, 2]),
               ("push", "S", [{"a": 1, "b": 3, "c": "x"}], [4]))
    w = Workload(CATALOG, "SELECT a, COUNT(*) AS n FROM S [RANGE 3] SAMPLE(100) GROUP BY a", actions, until=9)
    expected = run_reference(w)
    assert expected
    compare(expected, run_engine(w))


def test_the_engine_samples_before_the_window():
    # [ROWS 1] SAMPLE(50): the window holds the latest *kept* element, so RSTREAM, which reports the window at
    # every instant S has an element, reports one row at each of them from the first kept element on (a
    # sample taken after the window would leave it empty at the instants whose element was dropped)
    from dsms import Engine
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT)")
    q = eng.execute("SELECT RSTREAM(a) FROM S [ROWS 1] SAMPLE(50)")
    eng.push("S", [{"a": i} for i in range(200)], ts=list(range(200)))
    eng.heartbeat(300)
    eng.run()
    out = [(e.ts, e.row["a"]) for e in q.drain()]
    first = out[0][1]
    assert [t for t, _ in out] == list(range(first, 200))
    assert all(a <= t for t, a in out) and [a for _, a in out] == sorted(a for _, a in out)
    assert 60 < len({a for _, a in out}) < 140         # about half of the 200 elements were kept
