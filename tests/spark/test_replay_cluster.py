"""``dsms replay --master spark://...`` on a real standalone cluster, started here from PySpark's own distribution
(a master and two workers on 127.0.0.1, small memory) and stopped after: the results equal the live run's, so
executors in other JVMs and Python workers read the archive and run the engine exactly as local ones do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark
import pytest
from archived import archive_and_run, dense_workload
from oracle.generators import compare

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster(tmp_path):
    """spark://127.0.0.1:PORT with two one-core workers; every process is stopped at the end."""
    env = dict(os.environ, SPARK_HOME=str(SPARK_HOME), PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1",
               SPARK_DAEMON_MEMORY="256m", PYTHONPATH=str(ROOT))
    port, ui = _free_port(), _free_port()
    cls = str(SPARK_HOME / "bin" / "spark-class")
    logs = tmp_path / "spark-logs"
    logs.mkdir()
    procs = []

    def start(name, *args):
        out = open(logs / f"{name}.log", "wb")
        procs.append((subprocess.Popen([cls, *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                                       cwd=tmp_path), out))

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(ui))
        for i in range(2):
            start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                  "--host", "127.0.0.1", "--cores", "1", "--memory", "640m", "--webui-port", str(_free_port()),
                  "--work-dir", str(tmp_path / f"work{i}"))
        deadline = time.monotonic() + 90
        alive = 0
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as r:
                    alive = json.load(r).get("aliveworkers", 0)
                if alive == 2:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        assert alive == 2, "the cluster did not come up: " + "\n".join(
            p.read_text()[-1500:] for p in sorted(logs.glob("*.log")))
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p, _ in reversed(procs):
            p.terminate()
        for p, out in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
            out.close()


def test_replay_on_a_standalone_cluster_equals_live(cluster, tmp_path):
    w = dense_workload("SELECT X.a, COUNT(*) AS n, SUM(X.b) AS s FROM S [RANGE 17] X GROUP BY X.a", 5)
    live, qid = archive_and_run(tmp_path / "data", w)
    out = tmp_path / "r.ndjson"
    r = subprocess.run([sys.executable, "-m", "dsms.cli", "replay", "--data-dir", str(tmp_path / "data"),
                        "--query-id", qid, "--master", cluster, "--partitions", "4", "--out", str(out),
                        "--json-summary"], cwd=ROOT, capture_output=True, text=True, timeout=240,
                       env=dict(os.environ, PYSPARK_PYTHON=sys.executable))
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stderr.strip().splitlines()[-1])
    assert "rows in, " not in r.stderr           # no progress bar when stderr is not a terminal
    assert summary["master"] == cluster and summary["strategy"] == "key-partitioned"
    assert summary["partitions"] == 4 and summary["tasks"] == 4
    got = [(o["ts"], o["sign"], o["row"]) for o in map(json.loads, out.read_text().splitlines())]
    compare(live, got)
