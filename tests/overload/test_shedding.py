"""The load shedder (issue 14 items 1, 2, 6): random drops at rates chosen as Babcock, Datar and Motwani
(ICDE 2004) choose them, COUNT and SUM scaled by 1/p and AVG not, a stated error bound that holds at its
stated confidence (and fails for a wrong scaling), results that say they are approximate, shedders as
entities with control tables, and nothing changed while the shedder is idle."""

from __future__ import annotations

import math

import numpy as np
import pytest

from control_tables import ControlTableError
from dsms import Engine
from dsms.batch import ApproxElement, Element
from dsms.load_shedder import error_bound, rate_for, solve_rates

Q = "SELECT g, SUM(v) AS s, COUNT(*) AS c, AVG(v) AS a FROM S [RANGE 1000000] GROUP BY g"


def data(seed: int, groups: int = 20, per: int = 400) -> tuple[list[int], list[float]]:
    rng = np.random.default_rng(1000 + seed)
    g = np.repeat(np.arange(groups), per)
    rng.shuffle(g)
    v = rng.uniform(1.0, 3.0, len(g))
    return g.tolist(), v.tolist()


def final_rows(elems) -> dict[int, Element]:
    """The relation's last contents per group (from its changelog)."""
    out: dict[int, Element] = {}
    for e in elems:
        if e.sign == 1:
            out[e.row["g"]] = e
        elif out.get(e.row["g"]) is not None and out[e.row["g"]].row == e.row:
            del out[e.row["g"]]
    return out


def run_shed(seed: int, rate: float) -> tuple[dict[int, Element], dict[int, tuple[float, int, float]]]:
    eng = Engine({"seed": seed})
    eng.execute("REGISTER STREAM S (g INT, v FLOAT)")
    q = eng.execute(Q)
    eng.shedder.shed({q.id: rate})
    g, v = data(seed)
    for lo in range(0, len(g), 500):
        eng.push("S", {"g": g[lo:lo + 500], "v": v[lo:lo + 500]}, ts=list(range(lo, min(len(g), lo + 500))))
        eng.run()
    eng.heartbeat(len(g) + 1)
    eng.run()
    got = final_rows(q.drain())
    exact: dict[int, tuple[float, int, float]] = {}
    for k in set(g):
        vals = [x for gg, x in zip(g, v) if gg == k]
        exact[k] = (math.fsum(vals), len(vals), math.fsum(vals) / len(vals))
    return got, exact


def test_the_stated_bound_holds_at_its_confidence_and_fails_for_a_wrong_scaling():
    within = wrong_within = total = 0
    for seed in range(25):
        got, exact = run_shed(seed, 0.5)
        assert set(got) == set(exact)
        for k, e in got.items():
            assert isinstance(e, ApproxElement) and e.approx.sampling_rate == 0.5
            bound = e.approx.rel_error
            assert 0 < bound < 1 and e.approx.confidence == 0.95
            s, c, a = exact[k]
            for est, true in ((e.row["s"], s), (e.row["c"], c), (e.row["a"], a)):
                total += 1
                within += abs(est - true) <= bound * abs(true)
            # the deliberately wrong scaling: SUM and COUNT of the sample as they are (not scaled by 1/p)
            for est, true in ((e.row["s"] * 0.5, s), (e.row["c"] * 0.5, c)):
                wrong_within += abs(est - true) <= bound * abs(true)
    assert within / total >= 0.95, (within, total)
    assert wrong_within / (total * 2 / 3) < 0.05, wrong_within


def test_avg_is_not_scaled_and_count_is():
    got, exact = run_shed(3, 0.25)
    c_ratio = np.mean([got[k].row["c"] / exact[k][1] for k in got])
    a_ratio = np.mean([got[k].row["a"] / exact[k][2] for k in got])
    assert abs(c_ratio - 1) < 0.1 and abs(a_ratio - 1) < 0.05


def test_exact_results_carry_nothing_and_an_idle_shedder_changes_nothing():
    eng = Engine()
    eng.execute("REGISTER STREAM S (g INT, v FLOAT)")
    q = eng.execute(Q)
    eng.shedder.step(capacity=1e9)
    eng.shedder.step(capacity=1e9)                 # measured load far below capacity: nothing placed
    g, v = data(0, groups=5, per=20)
    eng.push("S", {"g": g, "v": v}, ts=list(range(len(g))))
    eng.heartbeat(1000)
    eng.run()
    eng.shedder.step(capacity=1e9)
    out = q.drain()
    assert out and all(type(e) is Element and e.approx is None for e in out)
    assert not eng.registry.entities(kind="shedder") and q.approximation() is None
    got = final_rows(out)
    for k in set(g):
        assert got[k].row["c"] == g.count(k)


def test_bdm04_rates_equalise_the_weighted_error_within_the_capacity():
    profiles = {"small": (50, 0.1, ("SUM",)), "big": (5000, 0.1, ("SUM",)), "minmax": (100, 0.0, ("MAX",))}
    costs = {"small": 1.0, "big": 1.0, "minmax": 1.0}
    rates, lam = solve_rates(costs, profiles, {"small": 1.0, "big": 1.0, "minmax": 1.0}, 2.0)
    assert rates["minmax"] == 1.0                             # no bound for MAX: never shed
    assert abs(rates["small"] + rates["big"] - 1.0) < 1e-6     # the capacity left, used up
    e_small, e_big = (error_bound(rates[q], *profiles[q]) for q in ("small", "big"))
    assert abs(e_small - e_big) < 1e-6 * max(e_small, 1) and rates["small"] > rates["big"]
    # a weight of 4 on "big" takes its error down to a quarter of the other's
    rates, _ = solve_rates(costs, profiles, {"small": 1.0, "big": 4.0, "minmax": 1.0}, 2.0)
    e_small, e_big = (error_bound(rates[q], *profiles[q]) for q in ("small", "big"))
    assert abs(4 * e_big - e_small) < 1e-6 * e_small
    # the optimum beats one rate for both at the same load (the uniform baseline)
    assert max(e_small, 4 * e_big) <= max(error_bound(0.5, *profiles["small"]),
                                          4 * error_bound(0.5, *profiles["big"]))
    assert rate_for(error_bound(0.3, 100, 0.2, ("SUM",)), 100, 0.2, ("SUM",)) == pytest.approx(0.3)


def test_shedders_are_entities_placed_under_load_and_gone_when_it_falls():
    eng = Engine()
    eng.execute("REGISTER STREAM S (g INT, v FLOAT); REGISTER STREAM T (k INT)")
    q = eng.execute("SELECT g, COUNT(*) AS c FROM S [RANGE 1000] GROUP BY g")
    other = eng.execute("SELECT ISTREAM(k) FROM T")
    g, v = data(1, groups=10, per=200)
    eng.shedder.step()
    eng.push("S", {"g": g[:1000], "v": v[:1000]}, ts=list(range(1000)))
    eng.run()
    eng.shedder.step(capacity=1e-9)                # far over capacity: shed
    (s,) = eng.registry.entities(kind="shedder")
    t = s.get()
    assert 0 < t["sampling_rate"] < 1 and t["queries"] == [q.id] and t["rel_error"] > 0 and t["auto"]
    assert t["edge"].endswith(next(op.id for op in eng.ops if q.id in op.owners and op.input_queues[0]
                                   is eng.source_queue("S")))
    eng.push("S", {"g": g[1000:], "v": v[1000:]}, ts=list(range(1000, 2000)))
    eng.push("T", [{"k": 1}], ts=2000)
    eng.run()
    assert eng.entity(s.id).get("dropped") > 0
    assert isinstance(q.drain()[-1], ApproxElement) and q.approximation().sampling_rate == t["sampling_rate"]
    assert all(type(e) is Element for e in other.drain())      # the other query is not shed
    for bad in (0, 0.0, 1.5, -1, "half", None):
        with pytest.raises(ControlTableError):
            eng.set(s.id, "sampling_rate", bad)
    assert eng.entity(s.id).get("sampling_rate") == t["sampling_rate"]
    eng.set(s.id, "sampling_rate", 0.5)                # a write pins the rate
    assert eng.entity(s.id).get("auto") is False
    eng.shedder.step(capacity=1e9)
    eng.shedder.step(capacity=1e9)
    eng.shedder.step(capacity=1e9)                     # the load fell: drops go
    assert not eng.registry.entities(kind="shedder")
    eng.push("S", [{"g": 1, "v": 1.0}], ts=2100)
    eng.heartbeat(2200)
    eng.run()
    assert q.approximation() is not None               # the window still holds sampled rows
    eng.heartbeat(4000)
    eng.run()
    assert q.approximation() is None and q.approx_since == 4000


def test_a_query_weight_is_validated():
    eng = Engine()
    eng.execute("REGISTER STREAM S (g INT, v FLOAT)")
    q = eng.execute(Q)
    for bad in (0, -1, float("nan"), "2", True):
        with pytest.raises(Exception, match="weight"):
            eng.set_query_weight(q.id, bad)
    assert q.weight == 1.0
    eng.set_query_weight(q.id, 3)
    assert q.weight == 3.0


def test_sample_uses_the_shedders_random_drop():
    from dsms.operators.sample import SampleOp
    from dsms.operators.shed import RandomDrop, Shedder
    assert isinstance(SampleOp(50, 1, *(_q(), _q())).drop, RandomDrop)
    assert Shedder.__init__.__code__.co_names.count("RandomDrop") == 1


def _q():
    from dsms.queues import Queue
    return Queue()


def test_a_join_is_not_shed_and_a_shared_edge_spares_the_exact_query():
    eng = Engine()
    eng.execute("REGISTER STREAM S (g INT, v FLOAT); REGISTER STREAM T (g INT)")
    j = eng.execute("SELECT COUNT(*) AS c FROM S [RANGE 100] X, T [RANGE 100] Y WHERE X.g = Y.g")
    a = eng.execute("SELECT g, COUNT(*) AS c FROM S [RANGE 100] GROUP BY g")
    b = eng.execute("SELECT g, SUM(v) AS s FROM S [RANGE 100] GROUP BY g")
    eng.shedder.shed({j.id: 0.5, a.id: 0.25})
    sheds = {s.get("edge"): s.get() for s in eng.registry.entities(kind="shedder")}
    assert sheds and all(0 < s["sampling_rate"] < 1 for s in sheds.values())
    assert all(b.id not in s["queries"] for s in sheds.values())     # b needs no shedding: never thinned
    assert eng.shedder.effective(a.id) == pytest.approx(0.25)
    assert eng.shedder.effective(b.id) == 1.0 and eng.shedder.effective(j.id) == 1.0   # two inputs: exact
    eng.push("S", [{"g": k % 3, "v": 1.0} for k in range(300)], ts=list(range(300)))
    eng.push("T", [{"g": k % 3} for k in range(300)], ts=list(range(300)))
    eng.heartbeat(400)
    eng.run()
    assert all(type(e) is Element for e in b.drain())
    assert all(isinstance(e, ApproxElement) for e in a.drain())
    assert all(type(e) is Element for e in j.drain())


def test_wire_formats_mark_approximate_chunks_and_leave_exact_bytes_alone():
    import json
    import xml.etree.ElementTree as ET

    from dsms.approx import Approx
    from dsms.formats import ENCODERS
    from dsms.runtime.results import ResultChunk
    names = ["g", "s"]
    cols = [np.array([1, 2]), np.array(["a}\n<element ", "b"], dtype=object)]
    exact = ResultChunk(names, np.array([5, 6]), np.array([1, -1], np.int8), cols)
    approx = ResultChunk(names, np.array([5, 6]), np.array([1, -1], np.int8), cols, approx=Approx(0.03, 0.95, 0.5))
    for enc in ENCODERS.values():
        assert exact.encode(enc) == enc.elements(names, exact.ts, exact.sign, exact.cols)
    lines = [json.loads(x) for x in approx.encode(ENCODERS["ndjson"]).decode().splitlines()]
    assert [x["approx"] for x in lines] == [{"rel_error": 0.03, "confidence": 0.95, "sampling_rate": 0.5}] * 2
    assert lines[0]["row"]["s"] == "a}\n<element "
    sse = [json.loads(x[6:]) for x in approx.encode(ENCODERS["sse"]).decode().split("\n\n") if x]
    assert [x["approx"]["sampling_rate"] for x in sse] == [0.5, 0.5]
    doc = ET.fromstring("<r>" + approx.encode(ENCODERS["xml"]).decode() + "</r>")
    assert [e.get("rel_error") for e in doc] == ["0.03", "0.03"] and doc[0].get("sampling_rate") == "0.5"
    assert doc[0].find("s").text == "a}\n<element "


def test_any_upstream_synopsis_with_approximation_marks_the_results():
    # the contract with the synopsis kinds (reservoir, Bloom): define approximation(), return Approx or None
    from dsms.approx import Approx
    eng = Engine()
    eng.execute("REGISTER STREAM S (g INT, v FLOAT)")
    q = eng.execute("SELECT g, COUNT(*) AS c FROM S [RANGE 1000] GROUP BY g")
    syn = next(s for op in eng.ops if q.id in op.owners for s in op.synopses)
    state = {"a": None}
    syn.approximation = lambda: state["a"]
    eng.push("S", [{"g": 1, "v": 1.0}], ts=1)
    eng.heartbeat(2)
    eng.run()
    assert [type(e) for e in q.drain()] == [Element] and q.approx_since is None
    state["a"] = Approx(0.1, 0.9)
    eng.push("S", [{"g": 1, "v": 1.0}], ts=3)
    eng.heartbeat(4)
    eng.run()
    out = q.drain()
    assert out and all(isinstance(e, ApproxElement) and e.approx == Approx(0.1, 0.9) for e in out)
    assert q.approx_since == 4 and out[-1].row["c"] == 2            # no sampling rate: nothing scaled
