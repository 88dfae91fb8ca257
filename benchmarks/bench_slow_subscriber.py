"""What two events subscribers that never read cost the server: its RSS while jobs are submitted at
``--rate`` per second for ``--seconds``, with and without two such sockets, and when they were closed (4008).

    .venv/bin/python benchmarks/bench_slow_subscriber.py [--rate 30] [--seconds 60] [--base main]

With ``--base REV`` the same runs are made with REV's code too (``git archive`` into a temporary directory,
first on the server's PYTHONPATH, as benchmarks/compare.py does), alternating, so both see the same machine.
Each server runs with its own default ``events_buffer_bytes``. Target (issue 39): with the two sockets, RSS
stays within a few MiB of the run without them. A measurement, not a test.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import threading
import time

import psutil
import requests
import websocket

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.live_server import LiveServer  # noqa: E402

BODY = {"command": "true", "tasks": [{"gpus": 1}]}  # each job queues, runs and ends: ~10 events a submit
MIB = 1024 * 1024


def dropped(srv: LiveServer) -> float:
    for line in srv.request("GET", "metrics").text.splitlines():
        if line.startswith("hive_lab_event_subscribers_dropped_total "):
            return float(line.split()[1])
    return 0.0


def run(tmp: pathlib.Path, silent: int, rate: float, seconds: float, pythonpath: str | None) -> dict:
    env = {"PYTHONPATH": pythonpath} if pythonpath else {}
    srv = LiveServer(tmp, cluster_config={"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"default": 4}},
                     env=env, config={"ServerApp": {"log_level": "WARN"}}).start()
    sockets = []
    try:
        proc = psutil.Process(srv.proc.pid)
        for _ in range(3):  # warm up the paths a submit takes, then read the starting RSS
            srv.request("POST", "jobs", json=BODY)
        start_rss = proc.memory_info().rss
        sockets = [websocket.create_connection(srv.ws_url("events"), header=[f"Authorization: token {srv.token}"],
                                               sockopt=((socket.SOL_SOCKET, socket.SO_RCVBUF, 4096),))
                   for _ in range(silent)]
        reader = websocket.create_connection(srv.ws_url("events"), header=[f"Authorization: token {srv.token}"])
        volume = {"bytes": 0}

        def read() -> None:  # a subscriber that reads: how many bytes of events were published
            try:
                while True:
                    volume["bytes"] += len(reader.recv())
            except Exception:
                pass

        threading.Thread(target=read, daemon=True).start()
        sockets.append(reader)
        session = requests.Session()
        session.headers.update(srv.headers())
        t0 = time.monotonic()
        peak, closed_at, sent = start_rss, None, 0
        while (now := time.monotonic() - t0) < seconds:
            due = int(now * rate) + 1
            while sent < due:
                session.post(srv.api_url + "jobs", json=BODY, timeout=30).raise_for_status()
                sent += 1
            if sent % int(rate) == 0:
                peak = max(peak, proc.memory_info().rss)
                if silent and closed_at is None and dropped(srv) >= silent:
                    closed_at = now
            time.sleep(max(0.0, (sent / rate) - (time.monotonic() - t0)))
        end_rss = proc.memory_info().rss
        return {"start": start_rss, "end": end_rss, "peak": max(peak, end_rss), "closed_at": closed_at,
                "submits": sent, "dropped": dropped(srv), "event_bytes": volume["bytes"]}
    finally:
        for s in sockets:
            s.close()
        srv.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=30.0)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--base", help="also run this git revision's code (e.g. main)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; {args.rate:g} submits/s for "
          f"{args.seconds:g} s")
    with tempfile.TemporaryDirectory() as tmp:
        codes: list[tuple[str, str | None]] = [("this tree", None)]
        if args.base:
            base = pathlib.Path(tmp) / "base"
            base.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base], check=True, capture_output=True)
            subprocess.run(["tar", "-x", "-C", str(base)], input=archive.stdout, check=True)
            codes.append((args.base, os.pathsep.join(str(base / p) for p in ("scheduler", "server_ext", "."))))
        results = {}
        for i, (name, path) in enumerate(codes):
            for silent in (0, 2) if i % 2 == 0 else (2, 0):
                results[(name, silent)] = run(pathlib.Path(tmp) / f"{i}-{silent}", silent, args.rate, args.seconds, path)
        print(f"{'code':<10} {'silent sockets':>14} {'RSS start':>10} {'RSS end':>9} {'peak':>8} {'closed (4008) at':>17}"
              f" {'submits':>8} {'events published':>17}")
        for (name, silent), r in results.items():
            closed = "-" if not silent else (f"{r['closed_at']:.0f} s" if r["closed_at"] is not None else "never")
            print(f"{name:<10} {silent:>14} {r['start'] / MIB:>8.1f}Mi {r['end'] / MIB:>7.1f}Mi {r['peak'] / MIB:>6.1f}Mi "
                  f"{closed:>17} {r['submits']:>8} {r['event_bytes'] / MIB:>15.1f}Mi")
        for name, _ in codes:
            a, b = results[(name, 0)], results[(name, 2)]
            grow = lambda r: (r["peak"] - r["start"]) / MIB  # noqa: E731
            print(f"{name}: two never-reading sockets cost {grow(b) - grow(a):+.1f} MiB of peak RSS growth "
                  f"({grow(b):.1f} MiB with them, {grow(a):.1f} MiB without)")
        print(f"load average now {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
