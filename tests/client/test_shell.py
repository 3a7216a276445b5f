"""``dsms shell`` through a pseudo-terminal against a real server (docs/shell.md): multi-line statements,
tables, tab completion of the server's names, history, errors with a caret, and live-following a query's
results until Ctrl-C, which leaves the query running."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from shellkit import PROMPT, ROOT, Server, Shell

BID = "REGISTER STREAM Bid (item INT, price FLOAT, bidder STRING);"


@pytest.fixture
def server(tmp_path: Path):
    """A real server of the test's own (the shell lists the whole catalog)."""
    srv = Server(tmp_path / "data").start()
    yield srv
    srv.stop()


@pytest.fixture
def shell(server: Server, tmp_path: Path):
    """The shell in a pseudo-terminal, started as a user starts it."""
    sh = Shell(server, tmp_path)
    yield sh
    sh.close()


def _caret(out: str) -> tuple[str, int]:
    """(the source line shown under the last error, the 0-based column its caret points at)."""
    found = re.findall(r"( *\d+ \| )([^\n]*)\n( *)\^", out)
    assert found, out[-2000:]
    gutter, code, pad = found[-1]
    return code, len(pad) - len(gutter)


def test_statements_tables_completion_history_and_errors(shell: Shell, server, tmp_path: Path) -> None:
    assert "stream Bid registered (item INT, price FLOAT, bidder STRING)" in shell.run(BID)
    # a statement goes on over lines until its ';'
    shell.run("SHOW", until=r"\.\.\.>")
    out = shell.run("STREAMS;")
    assert re.search(r"Bid +item INT, price FLOAT, bidder STRING", out) and "(1 stream)" in out
    # Tab completes a name the server knows (after DESCRIBE only names are offered)
    shell.child.send("DESCRIBE B\t")
    shell.expect(r"B(?:\x1b\[[0-9;?]*[a-zA-Z])*id")       # "id" is drawn after the typed "B"
    out = shell.run(";")
    assert "Bid (stream)" in out and re.search(r"bidder +STRING", out)
    # the error names the place, and the caret stands under it, also on a later line of the input
    out = shell.run("SELECT a FORM Bid;")
    assert "line 1, column 15: CQL error: unexpected identifier 'Bid'" in out
    code, col = _caret(out)
    assert code.startswith("SELECT a FORM Bid") and code[col:].startswith("Bid")
    shell.run("REGISTER QUERY bad AS", until=r"\.\.\.>")
    out = shell.run("  SELECT item FROM Bid WHERE price + bidder > 1;")
    assert "line 2, column 30: schema error: operator + does not apply to FLOAT and STRING" in out
    code, col = _caret(out)
    assert code == "  SELECT item FROM Bid WHERE price + bidder > 1;" and code[col:].startswith("price +")
    assert server.get("/queries/bad").status == 404
    # \help, and the history: Up brings back the last statement
    assert "\\follow name" in shell.run("\\help")
    shell.run("SHOW QUERIES;")
    shell.child.send("\x1b[A")
    shell.expect("SHOW QUERIES;")
    assert "(0 queries)" in shell.run("")
    history = (tmp_path / ".dsms_history").read_text()
    assert "SHOW\nSTREAMS;" in history.replace("+", "") and "SELECT a FORM Bid;" in history


def test_following_a_stream_and_ctrl_c_keeps_the_query(shell: Shell, server) -> None:
    shell.run(BID)
    shell.run("SELECT item, price FROM Bid WHERE price > 5;", until="Ctrl-C stops following")
    r = server.ndjson("Bid", [{"ts": 1000, "row": {"item": 1, "price": 10.5, "bidder": "ann"}},
                              {"ts": 1500, "row": {"item": 2, "price": 2.0, "bidder": "bob"}},
                              {"ts": 2000, "row": {"item": 3, "price": 99.0, "bidder": "cy"}}])
    assert r.status == 200
    shell.expect(r"2 elements; last element at ts 2000")
    shell.child.sendcontrol("c")
    out = shell.expect(PROMPT)
    assert "stopped following q1; it keeps running" in out
    rows = re.findall(r"^ *(\d+) +(-?1) +(\d+) +([\d.]+) *$", out, re.M)
    assert rows[-2:] == [("1000", "1", "1", "10.5"), ("2000", "1", "3", "99.0")]
    # the query still runs: new input reaches it after the shell stopped following
    assert server.get("/queries/q1").status == 200
    server.ndjson("Bid", [{"ts": 3000, "row": {"item": 4, "price": 7.0, "bidder": "dee"}}])
    server.wait_results("q1", lambda items: any(i.get("row", {}).get("item") == 4 for i in items))


def test_following_a_relation_shows_its_current_contents(shell: Shell, server) -> None:
    shell.run(BID)
    shell.run("REGISTER QUERY busy AS SELECT item, COUNT(*) AS bids, MAX(price) AS top FROM Bid [RANGE 10 SECONDS] "
              "GROUP BY item;")
    server.ndjson("Bid", [{"ts": 0, "row": {"item": 1, "price": 10.0, "bidder": "ann"}},
                          {"ts": 2000, "row": {"item": 1, "price": 12.5, "bidder": "bob"}},
                          {"ts": 2000, "row": {"item": 2, "price": 1.0, "bidder": "cy"}},
                          {"heartbeat": 5000}])
    shell.run("\\follow busy", until="Ctrl-C stops following")
    # below 5000 the window holds all three bids: item 1 has two (top 12.5), item 2 one; the row item 1 had
    # after the first bid (1, 1, 10.0) was retracted at 2000 and is not part of the contents
    shell.expect(r"busy \(relation\): 2 rows; as of ts 4999")
    shell.child.sendcontrol("c")
    out = shell.expect(PROMPT)
    final = out[out.rindex("item"):out.rindex("stopped following busy")]
    rows = re.findall(r"^ *(\d+) +(\d+) +([\d.]+) *$", final, re.M)
    assert sorted(rows) == [("1", "2", "12.5"), ("2", "1", "1.0")]
    assert server.get("/queries/busy").status == 200


def test_run_a_file(server, tmp_path: Path) -> None:
    good = tmp_path / "setup.cql"
    good.write_text(BID + "\n-- a comment; with a semicolon\nREGISTER RELATION Item (id INT, cat STRING);\n"
                    "SHOW RELATIONS;\nEXPLAIN SELECT item FROM Bid [RANGE 5] WHERE price > 1;\n")
    url = f"http://127.0.0.1:{server.port}"
    p = _dsms("run", str(good), "--url", url)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "relation Item registered (id INT, cat STRING)" in p.stdout and "select: price > 1" in p.stdout
    assert re.search(r"Item +id INT, cat STRING", p.stdout)
    bad = tmp_path / "bad.cql"
    bad.write_text("REGISTER STREAM Ok (a INT);\n\nREGISTER QUERY q AS SELECT a\n  FROM Ok [RANGE 5 WEEKZ];\n"
                   "REGISTER STREAM Never (a INT);\n")
    p = _dsms("run", str(bad), "--url", url)
    assert p.returncode == 1
    assert f"{bad}:4:20: CQL error: unknown time unit 'WEEKZ'" in p.stdout
    code, col = _caret(p.stdout)
    assert code == "  FROM Ok [RANGE 5 WEEKZ];" and code[col:].startswith("WEEKZ")
    assert server.get("/streams/Ok").status == 200 and server.get("/streams/Never").status == 404
    assert _dsms("run", str(tmp_path / "missing.cql"), "--url", url).returncode == 2


def test_version_and_an_unreachable_server(tmp_path: Path) -> None:
    p = _dsms("--version")
    import dsms
    assert p.returncode == 0 and p.stdout.strip() == f"dsms {dsms.__version__}"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'version = { attr = "dsms.__version__" }' in pyproject
    from httpkit import free_port
    p = _dsms("shell", "--url", f"http://127.0.0.1:{free_port()}")
    assert p.returncode == 2 and "cannot reach the server" in p.stdout


def _dsms(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dsms.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "160"})


