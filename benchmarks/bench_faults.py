"""Crash and store-fault figures for the job lifecycle, against a real ``jupyter server`` process.

Clients submit (and now and then cancel) short GPU jobs while the server is SIGKILLed and restarted
``--kills`` times and its SQLite store's disk is made full ``--faults`` times (a real tmpfs with
``size=``, filled with a file, then freed; needs root, else that part is left out and said so). Every
task appends ``start``/``end`` lines (job, attempt, GPUs, time) to a file. At the end it prints:

- acknowledged: submits answered 201 (and cancels answered 200)
- lost: acknowledged jobs the server does not know, or acknowledged cancels whose job did not end cancelled
- run twice: jobs whose tasks started more often than their recorded retries allow, or an attempt twice
- stuck: acknowledged jobs not finished once the chaos is over and ``--settle`` seconds passed
- GPU overlaps: two jobs' tasks on one GPU at the same time
- 5xx: answers by status (503 with Retry-After is the documented "retry later"; 500 is a bug)

    .venv/bin/python benchmarks/bench_faults.py [--jobs 200] [--clients 8] [--kills 3] [--faults 2]

A measurement, not a test; rerun it after changing the lifecycle.
"""

from __future__ import annotations

import argparse
import collections
import os
import pathlib
import random
import subprocess
import sys
import tempfile
import threading
import time

import requests

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.live_server import LiveServer  # noqa: E402

TASK = ('line() { echo "$1 $HIVE_JOB_ID $HIVE_ATTEMPT $CUDA_VISIBLE_DEVICES $(date +%s.%N)" >> "$RUNS"; }; '
        "trap 'line end; exit 143' TERM; line start; sleep {sleep} & wait $!; line end")


def mount_small_disk(path: pathlib.Path) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m,mode=0700", "tmpfs", str(path)], check=True,
                       capture_output=True)
        return True
    except (OSError, subprocess.CalledProcessError):
        return False


def fill(disk: pathlib.Path) -> None:
    import sqlite3

    with sqlite3.connect(disk / "hive.sqlite") as conn:  # an empty WAL: the next commit needs new blocks
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    try:
        with open(disk / "filler", "wb") as f:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    except OSError:  # the disk is full
        pass


def all_jobs(srv: LiveServer) -> dict[str, dict]:
    out: dict[str, dict] = {}
    while True:
        page = requests.get(srv.api_url + "jobs", headers=srv.headers(), params={"limit": 200, "offset": len(out)},
                            timeout=30).json()
        out.update({j["id"]: j for j in page["jobs"]})
        if not page["jobs"] or len(out) >= page["total"]:
            return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--faults", type=int, default=2)
    ap.add_argument("--cancel", type=float, default=0.1, help="share of acknowledged jobs then cancelled")
    ap.add_argument("--sleep", type=float, default=0.3, help="how long each task runs (s)")
    ap.add_argument("--settle", type=float, default=90.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hive-faults-"))
    disk = tmp / "disk"
    faults_on = args.faults > 0 and mount_small_disk(disk)
    runs_file = tmp / "runs.txt"
    config = {"HiveLabApp": {"stop_grace_s": 1.0, "preemption_grace_s": 1.0, "cancel_wait_s": 0.2}}
    if faults_on:
        config["HiveLabApp"]["db_url"] = f"sqlite:///{disk / 'hive.sqlite'}"
    srv = LiveServer(tmp / "srv", cluster_config={"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4",
                                                  "vcs": {"default": 4}}, config=config)
    statuses: collections.Counter = collections.Counter()
    acked: list[str] = []
    cancels: list[str] = []
    lock = threading.Lock()
    todo = iter(range(args.jobs))
    body = {"command": TASK.replace("{sleep}", str(args.sleep)), "max_retries": 3, "tasks": [{"gpus": 1}],
            "env": {"RUNS": str(runs_file)}}
    try:
        srv.start()
        load_at_start = os.getloadavg()[0]

        def client() -> None:
            session = requests.Session()
            session.headers.update(srv.headers())
            for _ in todo:
                while True:
                    try:
                        r = session.post(srv.api_url + "jobs", json=body, timeout=30)
                    except requests.RequestException:
                        time.sleep(0.1)  # the server is down: not acknowledged, send again
                        continue
                    with lock:
                        statuses[r.status_code] += 1
                    if r.status_code == 201:
                        job_id = r.json()["id"]
                        with lock:
                            acked.append(job_id)
                        if rng.random() < args.cancel:
                            try:
                                c = session.delete(srv.api_url + f"jobs/{job_id}", timeout=30)
                                with lock:
                                    statuses[c.status_code] += 1
                                    if c.status_code == 200:
                                        cancels.append(job_id)
                            except requests.RequestException:
                                pass
                        break
                    time.sleep(0.05)  # 503: retry later

        threads = [threading.Thread(target=client, daemon=True) for _ in range(args.clients)]
        for t in threads:
            t.start()
        events = ["kill"] * args.kills + (["fault"] * args.faults if faults_on else [])
        rng.shuffle(events)
        for ev in events:
            target = len(acked) + max(1, args.jobs // (len(events) + 1))
            while len(acked) < target and any(t.is_alive() for t in threads):
                time.sleep(0.05)
            if ev == "kill":
                srv.kill()
                time.sleep(0.2)
                srv.start()
            else:
                fill(disk)
                time.sleep(1.0)
                (disk / "filler").unlink()
        for t in threads:
            t.join()

        deadline = time.monotonic() + args.settle
        final: dict[str, dict] = {}
        while time.monotonic() < deadline:
            jobs = all_jobs(srv)
            final = jobs
            if all(jobs.get(j, {}).get("state") in ("succeeded", "failed", "cancelled") for j in acked):
                break
            time.sleep(0.5)
        load_at_end = os.getloadavg()[0]
    finally:
        srv.close()
        if faults_on:
            subprocess.run(["umount", "-l", str(disk)], check=False)

    lost = [j for j in acked if j not in final]
    lost_cancels = [j for j in cancels if final.get(j, {}).get("state") != "cancelled"]
    stuck = [j for j in acked if j in final and final[j]["state"] not in ("succeeded", "failed", "cancelled")]
    starts: collections.Counter = collections.Counter()
    attempts: collections.Counter = collections.Counter()
    spans: dict[int, list[tuple[float, float, str]]] = collections.defaultdict(list)
    open_: dict[tuple[str, str], tuple[str, float]] = {}
    for line in runs_file.read_text().splitlines() if runs_file.exists() else []:
        parts = line.split(" ")
        if len(parts) != 5:
            continue
        kind, job, attempt, gpus, at = parts
        if kind == "start":
            starts[job] += 1
            attempts[(job, attempt)] += 1
            open_[(job, attempt)] = (gpus, float(at))
        elif (job, attempt) in open_:
            g, t0 = open_.pop((job, attempt))
            for gpu in g.split(","):
                spans[int(gpu)].append((t0, float(at), job))
    twice = sorted({j for j in starts if starts[j] > final.get(j, {}).get("retries", 0) + 1}
                   | {j for (j, _), n in attempts.items() if n > 1})
    overlaps = 0
    for intervals in spans.values():
        intervals.sort()
        for (s1, e1, j1), (s2, e2, j2) in zip(intervals, intervals[1:]):
            if s2 < e1 - 0.01 and j1 != j2:
                overlaps += 1
    fivexx = {s: n for s, n in sorted(statuses.items()) if s >= 500}
    print(f"machine: {os.cpu_count()} CPUs, load average {load_at_start:.1f} at start, {load_at_end:.1f} at end")
    print(f"chaos: {args.kills} SIGKILL+restart, "
          + (f"{args.faults} full-disk windows (tmpfs)" if faults_on else "no store faults (cannot mount a tmpfs; run as root)"))
    print(f"acknowledged    {len(acked)} submits, {len(cancels)} cancels")
    print(f"lost            {len(lost)} jobs, {len(lost_cancels)} cancels   {(lost + lost_cancels)[:5]}")
    print(f"run twice       {len(twice)}   {twice[:5]}")
    print(f"stuck           {len(stuck)}   {stuck[:5]}")
    print(f"GPU overlaps    {overlaps}")
    print(f"5xx             {fivexx or 0}   (all answers: {dict(sorted(statuses.items()))})")
    print(f"final states    {dict(collections.Counter(final[j]['state'] for j in acked if j in final))}")


if __name__ == "__main__":
    main()
