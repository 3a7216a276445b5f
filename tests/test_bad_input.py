"""Bad input at the engine's entry points: each is refused with the documented error naming the element or
position, nothing of a refused batch is applied, and the engine keeps working afterwards (issue 2)."""

import pytest

from dsms import CQLError, Engine, InputError, SchemaError


@pytest.fixture
def eng():
    e = Engine()
    e.execute("REGISTER STREAM S (a INT, b FLOAT, c STRING); REGISTER RELATION R (k INT, v STRING)")
    return e


def results(eng, q, until):
    eng.heartbeat(until)
    eng.run()
    return [(e.ts, e.sign, e.row) for e in q.drain()]


def test_unknown_stream_in_query_names_it_and_suggests(eng):
    with pytest.raises(SchemaError) as e:
        eng.execute("SELECT a FROM SS")
    assert "'SS'" in str(e.value) and "did you mean 'S'" in str(e.value)
    assert "line 1, column" in str(e.value)


def test_unknown_column_names_it_and_suggests(eng):
    with pytest.raises(SchemaError) as e:
        eng.execute("SELECT aa FROM S")
    assert "'aa'" in str(e.value) and "did you mean 'a'" in str(e.value)


def test_bind_errors_name_what_was_expected(eng):
    """SPEC 4: a parse or bind error names the line, the column, and what was expected: for an unknown column
    the columns in scope, for an unknown FROM name the registered names."""
    for q, pos, expected in [("SELECT zz FROM S", "column 8", "expected one of the columns a, b, c"),
                             ("SELECT X.zz FROM S X", "column 8", "expected one of the columns a, b, c"),
                             ("SELECT a FROM S [PARTITION BY zz ROWS 1]", "column 31",
                              "expected one of the columns a, b, c"),
                             ("SELECT a FROM Nope", "column 15", "expected one of S, R"),
                             # an enclosing query's column that is not there (it was "unknown alias 'S'")
                             ("SELECT a FROM S WHERE EXISTS (SELECT * FROM R WHERE R.k = S.q)", "column 59",
                              "'S' has no column 'q'; expected one of the columns a, b, c")]:
        with pytest.raises(SchemaError) as e:
            eng.execute(q)
        assert f"line 1, {pos}:" in str(e.value) and expected in str(e.value), str(e.value)


def test_wrong_type_in_expression_names_position(eng):
    with pytest.raises(SchemaError) as e:
        eng.execute("SELECT a FROM S WHERE c > 1")
    assert "line 1, column" in str(e.value) and "STRING" in str(e.value)


def test_malformed_statement_names_line_column_and_expectation(eng):
    with pytest.raises(CQLError) as e:
        eng.execute("SELECT a\nFROM S [RANGE 5 SECONDS\nWHERE a > 1")
    err = e.value
    assert err.line is not None and err.column is not None
    assert "expected" in str(err).lower() or err.expected


def test_push_unknown_stream(eng):
    with pytest.raises(SchemaError, match="no stream named 'T'"):
        eng.push("T", [{"a": 1}], ts=1)


def test_missing_column_refuses_whole_batch(eng):
    q = eng.execute("SELECT * FROM S")
    with pytest.raises(InputError) as e:
        eng.push("S", [{"a": 1, "b": 1.0, "c": "x"}, {"a": 2, "b": 2.0}], ts=[1, 2])
    assert e.value.index == 1 and "missing column 'c'" in str(e.value)
    assert results(eng, q, 10) == []            # the good first row was not applied either


def test_wrong_type_refuses_whole_batch(eng):
    q = eng.execute("SELECT * FROM S")
    with pytest.raises(InputError) as e:
        eng.push("S", [{"a": 1, "b": 1.0, "c": "x"}, {"a": "two", "b": 2.0, "c": "y"}], ts=[1, 2])
    assert e.value.index == 1 and "column 'a'" in str(e.value)
    with pytest.raises(InputError):
        eng.push("S", [{"a": True, "b": 1.0, "c": "x"}], ts=1)       # a bool is not an INT
    assert results(eng, q, 10) == []


def test_unknown_column_in_row(eng):
    with pytest.raises(InputError) as e:
        eng.push("S", [{"a": 1, "b": 1.0, "c": "x", "d": 0}], ts=1)
    assert e.value.index == 0 and "unknown column 'd'" in str(e.value)


def test_timestamp_backwards_within_batch_and_across_batches(eng):
    q = eng.execute("SELECT a FROM S")
    with pytest.raises(InputError) as e:
        eng.push("S", [{"a": i, "b": 0.0, "c": ""} for i in range(3)], ts=[5, 7, 6])
    assert e.value.index == 2 and "backwards" in str(e.value)
    eng.push("S", [{"a": 1, "b": 0.0, "c": ""}], ts=10)
    with pytest.raises(InputError) as e:
        eng.push("S", [{"a": 2, "b": 0.0, "c": ""}], ts=9)
    assert e.value.index == 0 and "already passed" in str(e.value)
    eng.heartbeat(20)
    with pytest.raises(InputError):
        eng.push("S", [{"a": 3, "b": 0.0, "c": ""}], ts=15)           # below the heartbeat
    # the engine keeps working: later good input is processed
    eng.push("S", [{"a": 4, "b": 0.0, "c": ""}], ts=21)
    assert results(eng, q, 30) == [(10, 1, {"a": 1}), (21, 1, {"a": 4})]


def test_delete_of_absent_row_refuses_update(eng):
    q = eng.execute("SELECT * FROM R")
    eng.update("R", insert=[{"k": 1, "v": "x"}], ts=1)
    with pytest.raises(InputError) as e:
        eng.update("R", insert=[{"k": 2, "v": "y"}], delete=[{"k": 9, "v": "z"}], ts=2)
    assert e.value.index == 1 and "not in 'R'" in str(e.value)
    assert results(eng, q, 5) == [(1, 1, {"k": 1, "v": "x"})]     # the insert of the refused update is not applied


def test_bad_heartbeat_and_ts_types(eng):
    with pytest.raises(InputError):
        eng.heartbeat("soon")
    with pytest.raises(InputError):
        eng.push("S", [{"a": 1, "b": 1.0, "c": "x"}], ts=[1.5])
    with pytest.raises(InputError):
        eng.push("S", [{"a": 1, "b": 1.0, "c": "x"}], ts=[1, 2])


def test_errors_leave_catalog_unchanged_and_engine_usable(eng):
    for bad in ("REGISTER STREAM S (x INT)", "SELECT FROM", "SELECT a FROM S [ROWS 0]",
                "DROP STREAM Nope", "SELECT COUNT(*) FROM S WHERE COUNT(*) > 1"):
        with pytest.raises((CQLError, SchemaError)):
            eng.execute(bad)
    assert eng.queries() == []
    q = eng.execute("SELECT COUNT(*) AS n FROM S [RANGE 10]")
    eng.push("S", [{"a": 1, "b": 1.0, "c": "x"}], ts=1)
    assert results(eng, q, 5) == [(1, 1, {"n": 1})]


def test_drop_refused_while_in_use(eng):
    eng.execute("REGISTER VIEW v AS SELECT a FROM S [ROWS 5]")
    with pytest.raises(SchemaError, match="used by v"):
        eng.execute("DROP STREAM S")
    eng.execute("DROP VIEW v")
    eng.execute("DROP STREAM S")
    with pytest.raises(SchemaError):
        eng.push("S", [{"a": 1, "b": 1.0, "c": "x"}], ts=1)


def test_timestamps_out_of_range_are_refused(eng):
    with pytest.raises(InputError) as e:
        eng.push("S", [{"a": 1, "b": 1.0, "c": "x"}, {"a": 1, "b": 1.0, "c": "x"}], ts=[1, 2**63 - 1])
    assert e.value.index == 1 and "out of range" in str(e.value)
    with pytest.raises(InputError):
        eng.heartbeat(2**63 - 1)


def test_timestamps_beyond_int64_are_input_errors_not_crashes(eng):
    """SPEC section 5: errors are dsms exceptions, never a crash. A timestamp beyond int64 (a scalar ts, an
    update's ts, one of a list, an unsigned numpy array) was an OverflowError, or a misleading "not an integer"."""
    import numpy as np

    q = eng.execute("SELECT a FROM S")
    row = {"a": 1, "b": 1.0, "c": "x"}
    for ts in (2**63, -(2**63) - 1, 2**64):
        with pytest.raises(InputError, match="out of range"):
            eng.push("S", [row], ts=ts)
        with pytest.raises(InputError, match="out of range"):
            eng.update("R", insert=[{"k": 1, "v": "x"}], ts=ts)
    with pytest.raises(InputError, match="out of range") as e:
        eng.push("S", [row, row], ts=[1, 2**63])
    assert e.value.index == 1
    with pytest.raises(InputError, match="9223372036854775808 is out of range"):
        eng.push("S", [row], ts=np.array([2**63], dtype=np.uint64))
    with pytest.raises(InputError, match="out of range"):
        eng.push("S", [row], ts=[1e300])
    eng.push("S", [row], ts=2)
    assert results(eng, q, 3) == [(2, 1, {"a": 1})]


def test_columnar_push_with_a_scalar_column_is_an_input_error(eng):
    """A columnar batch whose column is a scalar (not a list) was a TypeError from len(); SPEC section 5 wants
    a dsms error."""
    import numpy as np

    for cols in ({"a": 5, "b": [1.0], "c": ["x"]}, {"a": [1], "b": [1.0], "c": "x"},
                 {"a": np.array(1), "b": [1.0], "c": ["x"]}):
        with pytest.raises(InputError, match="must be a list of values"):
            eng.push("S", cols, ts=1)
    q = eng.execute("SELECT a FROM S")
    eng.push("S", {"a": [1], "b": [1.0], "c": ["x"]}, ts=1)
    assert results(eng, q, 2) == [(1, 1, {"a": 1})]


def test_whole_floats_are_integers_and_fractions_are_refused(eng):
    """JSON has one number type, so 2.0 for an INT column or a timestamp is the integer 2; 2.5 is refused
    with the element's index and nothing of its batch is applied."""
    q = eng.execute("SELECT a FROM S")
    eng.push("S", [{"a": 2.0, "b": 1.0, "c": "x"}], ts=1.0)
    eng.push("S", [{"a": 3, "b": 1.0, "c": "x"}, {"a": 4.0, "b": 1.0, "c": "x"}], ts=[2.0, 3])
    with pytest.raises(InputError) as e:
        eng.push("S", [{"a": 5, "b": 1.0, "c": "x"}, {"a": 2.5, "b": 1.0, "c": "x"}], ts=4)
    assert e.value.index == 1 and "expected INT, got float 2.5" in str(e.value)
    with pytest.raises(InputError) as e:
        eng.push("S", [{"a": 5, "b": 1.0, "c": "x"}, {"a": 6, "b": 1.0, "c": "x"}], ts=[4, 4.5])
    assert e.value.index == 1 and "4.5" in str(e.value)
    eng.heartbeat(5.0)
    got = results(eng, q, 6)
    assert got == [(1, 1, {"a": 2}), (2, 1, {"a": 3}), (3, 1, {"a": 4})]
    assert all(type(row["a"]) is int for _, _, row in got)
