"""Property (SPEC section 9): any sequence of appends, syncs and reopens (with any segment size) reads back as
exactly those appends, in order, with their sequence numbers; range reads return exactly the rows in range."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import msgpack
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsms.archive import Archive, ArchiveCorrupt, Record
from dsms.archive.frames import encode_frame

INPUTS = ["A", "B", "c_1"]
I64 = st.integers(-(2**63), 2**63 - 1)
TS = st.integers(-(2**40), 2**40)
VALUES = {
    "int": (I64, np.int64),
    "float": (st.floats(allow_nan=True, allow_infinity=True, width=64), np.float64),
    "str": (st.text(max_size=12), object),
    "bool": (st.booleans(), np.bool_),
}


@st.composite
def batches(draw: st.DrawFn) -> tuple:
    n = draw(st.integers(0, 6))
    ts = draw(st.lists(TS, min_size=n, max_size=n))
    sign = draw(st.lists(st.sampled_from([1, -1]), min_size=n, max_size=n))
    cols: dict[str, tuple[str, list[Any], bool]] = {}
    for name in draw(st.lists(st.sampled_from(["a", "b", "col_c", "d"]), max_size=4, unique=True)):
        kind = draw(st.sampled_from(sorted(VALUES)))
        values = draw(st.lists(VALUES[kind][0], min_size=n, max_size=n))
        cols[name] = (kind, values, draw(st.booleans()))  # as numpy array or as a plain list
    return ("batch", draw(st.sampled_from(INPUTS)), ts, sign, cols, draw(st.booleans()))


ops = st.lists(st.one_of(
    batches(),
    st.tuples(st.just("hb"), st.sampled_from(INPUTS), TS),
    st.tuples(st.just("sync")),
    st.tuples(st.just("reopen"), st.sampled_from([64, 200, 1000, 1 << 20]), st.sampled_from(["never", "group"])),
), max_size=25)


def apply(ops_list: list[tuple], d: str) -> dict[str, list[tuple]]:
    """Run the ops against an archive in ``d``; return per input the frames expected, as (seq, kind, ...)."""
    expected: dict[str, list[tuple]] = {}
    a = Archive(d, segment_bytes=128, fsync="never")
    try:
        for op in ops_list:
            if op[0] == "batch":
                _, inp, ts, sign, cols, sign_given = op
                arg_cols = {name: (np.array(vals, dtype=VALUES[kind][1]) if as_np else list(vals))
                            for name, (kind, vals, as_np) in cols.items()}
                seq = a.append_batch(inp, ts, sign if sign_given else None, arg_cols)
                frames = expected.setdefault(inp, [])
                assert seq == len(frames)
                frames.append((seq, "batch", ts, sign if sign_given else [1] * len(ts), cols))
            elif op[0] == "hb":
                seq = a.append_heartbeat(op[1], op[2])
                frames = expected.setdefault(op[1], [])
                assert seq == len(frames)
                frames.append((seq, "hb", op[2]))
            elif op[0] == "sync":
                a.sync()
            else:
                a.close()
                a = Archive(d, segment_bytes=op[1], fsync=op[2])
                assert a.recovery == []
    finally:
        a.close()
    return expected


def same_column(got: np.ndarray, kind: str, values: list[Any]) -> bool:
    if len(got) != len(values):
        return False
    if not values:
        return True
    want = np.array(values, dtype=VALUES[kind][1])
    if got.dtype != want.dtype:
        return False
    if kind in ("int", "float", "bool"):
        return got.tobytes() == want.tobytes()  # bit-exact: NaN payloads, -0.0
    return got.tolist() == values


def check_record(r: Record, want: tuple, inp: str) -> None:
    assert r.input == inp and r.seq == want[0] and r.kind == want[1]
    if r.kind == "hb":
        assert r.ts == want[2] and r.sign is None and r.cols == {}
        return
    _, _, ts, sign, cols = want
    assert r.ts.dtype == np.int64 and r.ts.tolist() == ts
    assert r.sign.dtype == np.int8 and r.sign.tolist() == sign
    assert set(r.cols) == set(cols)
    for name, (kind, values, _) in cols.items():
        assert same_column(r.cols[name], kind, values), (name, kind, values, r.cols[name])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_appends_read_back_exactly(ops_list: list[tuple]) -> None:
    with tempfile.TemporaryDirectory() as d:
        expected = apply(ops_list, d)
        with Archive(d, read_only=True) as a:
            assert a.inputs() == sorted(expected)
            for inp, frames in expected.items():
                got = list(a.read(inp))
                assert len(got) == len(frames)
                for r, want in zip(got, frames):
                    check_record(r, want, inp)
                rng = a.ranges()[inp]
                all_ts = [t for f in frames for t in ([f[2]] if f[1] == "hb" else f[2])]
                assert rng.frames == len(frames) and rng.next_seq == len(frames)
                assert (rng.first_ts, rng.last_ts) == ((min(all_ts), max(all_ts)) if all_ts else (None, None))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.one_of(st.none(), TS), st.one_of(st.none(), TS))
def test_range_reads_return_exactly_the_rows_in_range(ops_list: list[tuple], lo: int | None,
                                                      hi: int | None) -> None:
    def inside(t: int) -> bool:
        return (lo is None or t >= lo) and (hi is None or t < hi)

    with tempfile.TemporaryDirectory() as d:
        expected = apply(ops_list, d)
        with Archive(d, read_only=True) as a:
            for inp, frames in expected.items():
                want: list[tuple] = []
                for f in frames:
                    if f[1] == "hb":
                        if inside(f[2]):
                            want.append(("hb", f[0], f[2]))
                    else:
                        want.extend(("row", f[0], t, s) for t, s in zip(f[2], f[3]) if inside(t))
                got: list[tuple] = []
                for r in a.read(inp, lo, hi):
                    if r.is_heartbeat:
                        got.append(("hb", r.seq, r.ts))
                    else:
                        assert len(r) > 0 or (lo is None and hi is None)
                        got.extend(("row", r.seq, t, s) for t, s in zip(r.ts.tolist(), r.sign.tolist()))
                assert got == want


msgpack_values = st.recursive(
    st.none() | st.booleans() | I64 | st.floats() | st.text(max_size=5) | st.binary(max_size=16),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)
almost_frames = st.fixed_dictionaries(
    {"k": st.sampled_from(["batch", "hb", "other"])},
    optional={"ts": msgpack_values | st.fixed_dictionaries({"dt": st.sampled_from(["<i8", "<f8", "|b1", "O", "zz"]),
                                                          "raw": st.binary(max_size=24)}),
              "sign": msgpack_values, "cols": st.dictionaries(st.text(max_size=3), msgpack_values, max_size=3)},
) | msgpack_values


@settings(max_examples=200, deadline=None)
@given(almost_frames)
def test_checksummed_nonsense_decodes_or_raises_archive_corrupt(obj: Any) -> None:
    """A frame with a valid CRC but any payload at all never crashes the reader with anything but
    ArchiveCorrupt (which names the file and offset)."""
    with tempfile.TemporaryDirectory() as d:
        seg_dir = f"{d}/archive/S"
        os.makedirs(seg_dir)
        with open(f"{seg_dir}/{0:020d}.seg", "wb") as f:
            f.write(encode_frame(msgpack.packb(obj, use_bin_type=True)))
        try:
            with Archive(d, read_only=True) as a:
                for r in a.read("S"):
                    assert r.kind in ("batch", "hb")
        except ArchiveCorrupt as e:
            assert "frame at offset 0" in str(e)
