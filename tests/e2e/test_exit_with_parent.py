"""`jumpgate serve --exit-with-parent` (what LocalServer starts, for test suites and benchmarks):
a test run killed midway must not leave its server, or the NCA processes the server keeps
ready, running on the machine."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.unit.test_agent import alive

PARENT = """
import json, sys, time
from pathlib import Path
from jumpgate.client import Jumpgate
from jumpgate.local_server import LocalServer

srv = LocalServer(Path(sys.argv[1]), cache_dir=Path(sys.argv[2]))
with Jumpgate(srv.url) as jg:  # a job, so that the server keeps spare NCA processes afterwards
    table = jg.read("t.jsonl", schema={"a": "int64"}).collect()
print(json.dumps({"server": srv.proc.pid, "rows": table.num_rows}), flush=True)
time.sleep(600)
"""


def test_a_server_stops_with_its_nca_processes_when_the_run_that_started_it_is_killed(tmp_path):
    data, cache = tmp_path / "data", tmp_path / "cache"
    data.mkdir()
    (data / "t.jsonl").write_text('{"a": 1}\n{"a": 2}\n')
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(data), str(cache)], stdout=subprocess.PIPE,
                              text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        started = json.loads(parent.stdout.readline())
        server = started["server"]
        assert started["rows"] == 2 and alive(server)
        deadline = time.monotonic() + 10  # the spare is started after the job's end
        while time.monotonic() < deadline and not _children(server):
            time.sleep(0.1)
        spares = _children(server)
        assert spares, "the server keeps a spare NCA process after a job"
    finally:
        parent.kill()  # SIGKILL: nothing of the parent's own cleanup runs
        parent.wait()
        parent.stdout.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(alive(p) for p in (server, *spares)):
        time.sleep(0.1)
    assert not [p for p in (server, *spares) if alive(p)]


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True).stdout
    return [int(c) for c, pp in (line.split() for line in out.splitlines()) if int(pp) == pid]
