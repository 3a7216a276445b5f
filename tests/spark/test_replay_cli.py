"""``dsms replay`` as a user runs it: outputs (NDJSON file, directory, Parquet, stdout), ``--explain``, the
summary, and bad input (a clear error naming what and where, exit status 1, nothing written to ``--out``).

The happy paths call ``dsms.cli.main`` in this process so that they reuse the shared ``local[2]`` session; the
bad-input cases run the real ``python -m dsms.cli`` (they fail before any Spark starts)."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import msgpack
import pytest
from archived import archive_and_run
from oracle.generators import CATALOG, Workload, compare

from dsms.archive import Archive
from dsms.cli import main

ROOT = Path(__file__).resolve().parents[2]
QUERY = "SELECT X.a, COUNT(*) AS n, SUM(X.b) AS s FROM S [RANGE 10] X GROUP BY X.a"
ACTIONS = tuple(("push", "S", [{"a": i % 3, "b": i, "c": "x"}, {"a": (i + 1) % 4, "b": -i, "c": "y"}], [2 * i, 2 * i])
                for i in range(30)) + (("update", "R", [{"a": 1, "e": "x"}], [], 7), ("heartbeat", 40))


@pytest.fixture
def data(tmp_path):
    """A data directory whose catalog holds the streams and QUERY (id returned) and whose archive holds ACTIONS."""
    d = tmp_path / "data"
    live, qid = archive_and_run(d, Workload(CATALOG, QUERY, ACTIONS, 70))
    return d, live, qid


def _ndjson(text: str) -> list:
    return [(o["ts"], o["sign"], o["row"]) for o in map(json.loads, text.splitlines()) if "ts" in o]


def test_replay_to_ndjson_file_equals_live(spark, data, tmp_path, capsys):
    d, live, qid = data
    out = tmp_path / "r.ndjson"
    rc = main(["replay", "--data-dir", str(d), "--query-id", qid, "--master", "local[2]", "--partitions", "2",
               "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 0, err
    compare(live, _ndjson(out.read_text()))
    assert "strategy: key-partitioned on 2 partition(s)" in err
    assert f"rows in: {sum(len(a[2]) for a in ACTIONS if a[0] == 'push'):,}" in err


def test_replay_query_text_to_stdout_and_json_summary(spark, data, capsys):
    d, live, _ = data
    rc = main(["replay", "--data-dir", str(d), "--query", QUERY, "--master", "local[2]", "--partitions", "7",
               "--strategy", "time-sliced", "--from", "10", "--to", "41", "--json-summary"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    compare([e for e in live if 10 <= e[0] < 41], _ndjson(cap.out))
    summary = json.loads(cap.err.strip().splitlines()[-1])
    assert summary["strategy"] == "time-sliced" and summary["partitions"] == 7 and summary["warmup"] == 12


def test_replay_to_directory_and_parquet(spark, data, tmp_path, capsys):
    d, live, qid = data
    out_dir = tmp_path / "out"
    assert main(["replay", "--data-dir", str(d), "--query-id", qid, "--master", "local[2]", "--strategy", "single",
                 "--out", str(out_dir)]) == 0
    compare(live, _ndjson((out_dir / "results.ndjson").read_text()))
    summary = json.loads((out_dir / "_summary.json").read_text())
    assert summary["strategy"] == "single" and summary["results"] == len(live)
    pq = tmp_path / "r.parquet"
    assert main(["replay", "--data-dir", str(d), "--query-id", qid, "--master", "local[2]", "--out", str(pq)]) == 0
    rows = spark.read.parquet(str(pq)).collect()
    compare(live, [(r["ts"], r["sign"], {"a": r["a"], "n": r["n"], "s": r["s"]}) for r in rows])


def test_explain_names_the_strategy_and_the_alternatives(data, capsys):
    d, _, qid = data
    assert main(["replay", "--data-dir", str(d), "--query-id", qid, "--master", "local[2]", "--partitions", "3",
                 "--explain"]) == 0
    out = capsys.readouterr().out
    assert "strategy: key-partitioned on 3 partition(s)" in out
    assert "partition key: s.a" in out and "time-sliced: possible" in out


# ---------------------------------------------------------------- bad input


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dsms.cli", "replay", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("args,message", [
    (["--query-id", "q99"], "no query 'q99' in the catalog of"),
    (["--query-id", "q{qid}", "--from", "1000", "--to", "2000"], "no archived input in the range [1000, 2000)"),
    (["--query-id", "q{qid}", "--from", "50", "--to", "50"], "empty time range: --from 50 is not below --to 50"),
    (["--query", "SELECT a FROM S [RANGE 10"], "the query does not compile: line 1, column"),
    (["--query", "SELECT zz FROM S"], "the query does not compile"),
    (["--query-id", "q{qid}", "--master", "spark://127.0.0.1:{port}"], "Spark master spark://127.0.0.1:"),
    (["--query-id", "q{qid}", "--master", "local[0]"], "bad master 'local[0]'"),
])
def test_bad_input_is_refused_and_writes_nothing(data, tmp_path, args, message):
    d, _, qid = data
    args = [a.replace("q{qid}", qid).replace("{port}", str(_free_port())) for a in args]
    out = tmp_path / "never.ndjson"
    r = _cli("--data-dir", str(d), *args, "--out", str(out))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert message in r.stderr, r.stderr
    assert not out.exists() and not list(tmp_path.glob(".never*"))


def test_missing_data_dir_and_forced_strategy_the_plan_refuses(tmp_path):
    r = _cli("--data-dir", str(tmp_path / "nope"), "--query-id", "q1", "--out", str(tmp_path / "o.ndjson"))
    assert r.returncode == 1 and f"data directory '{tmp_path / 'nope'}' does not exist" in r.stderr
    d = tmp_path / "d"
    _, qid = archive_and_run(d, Workload(CATALOG, "SELECT COUNT(*) AS n FROM S [ROWS 3]", ACTIONS, 70))
    r = _cli("--data-dir", str(d), "--query-id", qid, "--strategy", "key-partitioned", "--out",
             str(tmp_path / "o.ndjson"))
    assert r.returncode == 1
    assert "cannot be replayed key-partitioned: an aggregate without GROUP BY is one global group" in r.stderr
    r = _cli("--data-dir", str(d), "--query-id", qid, "--out", str(tmp_path / "missing" / "o.ndjson"))
    assert r.returncode == 1 and "directory" in r.stderr and "does not exist" in r.stderr
    assert not (tmp_path / "o.ndjson").exists()


# ---------------------------------------------------------------- damaged archives


def _frame(obj) -> bytes:
    payload = msgpack.packb(obj, use_bin_type=True)
    return struct.pack("<II", len(payload), zlib.crc32(payload)) + payload


def test_torn_tail_is_reported_and_the_rest_replayed(spark, data, tmp_path, capsys):
    d, live, qid = data
    seg = sorted((d / "archive" / "s").glob("*.seg"))[-1]
    with open(seg, "ab") as f:
        f.write(b"\x40\x00\x00\x00garbage")          # a header announcing 64 bytes, 7 of them written
    out = tmp_path / "r.ndjson"
    assert main(["replay", "--data-dir", str(d), "--query-id", qid, "--master", "local[2]", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"warning: torn tail ignored (never acknowledged): {seg}" in err and "short payload" in err
    compare(live, _ndjson(out.read_text()))


def test_corrupt_frame_and_damaged_earlier_segment_are_errors(tmp_path):
    d = tmp_path / "d"
    with Archive(d, fsync="never", segment_bytes=64) as a:        # every frame gets its own segment
        for t in range(4):
            a.append_batch("s", [t], None, {"a": [t], "b": [t], "c": ["x"]})
    (d / "catalog.json").write_text(json.dumps({"version": 1, "log": [
        {"op": "cql", "cql": c, "at": {}} for c in CATALOG] + [{"op": "cql", "cql": QUERY, "at": {}}]}))
    segs = sorted((d / "archive" / "s").glob("*.seg"))
    with open(segs[1], "ab") as f:                   # an earlier segment torn: frames after it are unreadable
        f.write(b"\x05\x00")
    r = _cli("--data-dir", str(d), "--query-id", "q1", "--out", str(tmp_path / "o.ndjson"))
    assert r.returncode == 1 and f"archive input 's' is damaged inside: {segs[1]}, offset" in r.stderr, r.stderr
    os.truncate(segs[1], segs[1].stat().st_size - 2)
    with open(segs[-1], "ab") as f:                  # checksum right, payload not a frame: corrupt, not torn
        f.write(_frame({"k": "batch", "ts": "not an array"}))
    r = _cli("--data-dir", str(d), "--query-id", "q1", "--out", str(tmp_path / "o.ndjson"))
    assert r.returncode == 1 and f"{segs[-1]}, frame at offset" in r.stderr, r.stderr
    assert not (tmp_path / "o.ndjson").exists()


def test_progress_bar_on_a_terminal_only(data, tmp_path):
    """On a terminal (a real pty) the rich progress bar is drawn while the job runs; through a pipe (every other
    test here) stderr holds the summary alone."""
    import pexpect

    d, live, qid = data
    out = tmp_path / "r.ndjson"
    child = pexpect.spawn(sys.executable, ["-m", "dsms.cli", "replay", "--data-dir", str(d), "--query-id", qid,
                                           "--master", "local[1]", "--out", str(out)],
                          cwd=str(ROOT), env=dict(os.environ, PYSPARK_PYTHON=sys.executable, COLUMNS="200"),
                          timeout=240, encoding="utf-8", dimensions=(40, 200))
    child.expect(pexpect.EOF)
    child.close()
    text = child.before
    assert child.exitstatus == 0, text[-2000:]
    assert "replay on local[1]" in text and "rows in, " in text and "rows/s" in text   # the bar's columns
    assert "rows in: " in text                                                          # then the summary
    compare(live, _ndjson(out.read_text()))
