"""A pushed projection below a window fused into a join runs inside the join too (``JoinOp.fuse_project``), and is
given back its queue when a later query shares it, with no element lost or repeated on either side. The
results of the windowed joins with fused projections are also checked against the reference evaluator by
tests/test_tumbling_join.py and tests/test_properties.py (join family), and fused against shared plans by
tests/operators/test_join_fusion.py."""

from dsms import Engine


def _engine() -> Engine:
    eng = Engine()
    eng.execute("REGISTER STREAM S (a INT, b INT, c STRING)")
    eng.execute("REGISTER STREAM T (a INT, d FLOAT)")
    return eng


def test_the_projection_runs_inside_the_join():
    eng = _engine()
    q = eng.execute("SELECT X.a, X.c FROM S [RANGE 10 SLIDE 10] X, T [RANGE 5] Y WHERE X.a = Y.a")
    join = next(op for op in eng.ops if op.kind == "join")
    projects = [op for op in eng.ops if op.kind == "project" and op.fused is join]
    assert len(projects) == 2 and join.projects == projects
    text = eng.explain(q.id)
    assert f"project: a, c [pushed]  (queue:0 -> {join.windows[0].id}, fused)" in text
    assert f"range_window: RANGE 10 SLIDE 10  ({projects[0].id} -> {join.id}, fused)" in text
    eng.push("S", [{"a": 1, "b": 0, "c": "x"}, {"a": 2, "b": 0, "c": "y"}], ts=[1, 2])
    eng.push("T", [{"a": 1, "d": 0.5}], ts=[8])
    eng.heartbeat(12)
    eng.run()
    assert [(e.ts, e.row) for e in q.drain()] == [(10, {"a": 1, "c": "x"})]
    assert projects[0].tuples_in == 2 and projects[1].tuples_in == 1      # its statistics still count


def test_a_later_query_sharing_the_projection_gets_it_back():
    eng = _engine()
    q = eng.execute("SELECT X.a, X.c FROM S [RANGE 10 SLIDE 10] X, T [RANGE 10 SLIDE 10] Y WHERE X.a = Y.a")
    eng.push("S", [{"a": 1, "b": 1, "c": "x"}], ts=[1])
    eng.push("T", [{"a": 1, "d": 1.0}], ts=[2])
    eng.run()
    q2 = eng.execute("SELECT a, c FROM S")           # the same projection of S: shared from now on
    project = next(op for op in eng.ops if op.kind == "project" and q2.id in op.owners)
    assert project.fused is None and q.id in project.owners
    eng.push("S", [{"a": 1, "b": 1, "c": "y"}], ts=[5])
    eng.push("T", [{"a": 1, "d": 2.0}], ts=[6])
    eng.heartbeat(25)
    eng.run()
    assert sorted((e.ts, e.row["c"]) for e in q.drain()) == [(10, "x"), (10, "x"), (10, "y"), (10, "y")]
    assert [(e.ts, e.row) for e in q2.drain()] == [(5, {"a": 1, "c": "y"})]
