"""What refusing a write costs the server (issue 40): the server's CPU per write answered 503 + Retry-After
while its write budget is spent (two writes held: tests/fixtures/held_writes.py), over a keep-alive connection.

Every request waits for the one event loop, so under a flood of writes the cost of each refusal is what the
reads wait behind. The figure is the server process's CPU over ``--writes`` refused submits, less its CPU
while idle for as long (its timers and service loop), per write.

    .venv/bin/python benchmarks/bench_shed.py [--writes 1000]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import pathlib
import sys
import tempfile
import time

import psutil
import requests

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.held_writes import HELD_WRITES_CONFIG, end_tasks, hold_two_writes  # noqa: E402
from fixtures.live_server import LiveServer  # noqa: E402


def cpu_s(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return times.user + times.system


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=1000)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    config = {**HELD_WRITES_CONFIG, "ServerApp": {"log_level": "WARN"}}
    with tempfile.TemporaryDirectory() as tmp, concurrent.futures.ThreadPoolExecutor(2) as pool:
        srv = LiveServer(pathlib.Path(tmp), config=config).start()
        try:
            _, held = hold_two_writes(srv, pool)
            proc = psutil.Process(srv.proc.pid)
            c0, w0 = cpu_s(proc), time.perf_counter()
            time.sleep(5)
            idle = (cpu_s(proc) - c0) / (time.perf_counter() - w0)  # the server's own timers, per second
            body = {"command": "true", "tasks": [{"gpus": 0}]}
            with requests.Session() as session:
                c0, w0 = cpu_s(proc), time.perf_counter()
                for _ in range(args.writes):
                    r = session.post(srv.api_url + "jobs", json=body, headers=srv.headers())
                    if r.status_code != 503 or r.headers.get("Retry-After") != "1":
                        raise RuntimeError(f"a write was answered {r.status_code}, not shed: {r.text}")
                wall = time.perf_counter() - w0
                cpu = cpu_s(proc) - c0 - idle * wall
            end_tasks(srv)
            for f in held:
                f.result()
        finally:
            srv.close()
    print(f"shed write: server CPU {cpu / args.writes * 1000:.3f} ms per write, client wall {wall / args.writes * 1000:.2f} ms"
          f" ({args.writes} writes; idle CPU {idle * 100:.1f} % subtracted; load average now {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
