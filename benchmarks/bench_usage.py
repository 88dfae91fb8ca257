"""How long accounting takes on a semester of records: ``GET usage`` (store query + ``usage_table``) and the
fair-share ledger derived at start (``fair_share_snapshot``), on a SQLite store with N job attempts.

    python benchmarks/bench_usage.py [--attempts 50000]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time

from hive_lab_server.usage.accounting import fair_share_snapshot, usage_table
from hive_lab_server.store import Store

DAY = 86400.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--attempts", type=int, default=50_000)
    args = ap.parse_args()
    rng = random.Random(14)
    now = 1_790_000_000.0
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/usage.sqlite")
        users = [f"student{i:03d}" for i in range(200)]
        with store.begin() as batch:
            for i in range(args.attempts):
                job_id = f"j-{i + 1:06d}"
                start = now - rng.uniform(0, 120 * DAY)
                user = rng.choice(users)
                store.insert_job(batch, {"seq": i + 1, "id": job_id, "name": "n", "user": user, "vc": "course",
                                         "kind": "batch", "state": "succeeded", "reason": "", "priority": 0,
                                         "opportunistic": False, "gpus": 1, "gpu_type": None, "spec": {"tasks": []},
                                         "submitted_at": start, "started_at": start, "finished_at": start + 3600,
                                         "exit_code": 0, "retries": 0, "max_retries": 0, "attempt": 1,
                                         "working_dir": "/w", "output_dir": "/o", "updated_at": start})
                store.open_usage(batch, {"job_id": job_id, "attempt": 1, "user": user, "user_group": "students",
                                         "vc": "course", "gpus": rng.choice((1, 2, 4)), "share": 1.0,
                                         "gpu_types": {"T4": 1}, "started_at": start,
                                         "ended_at": start + rng.uniform(60, 8 * 3600), "cpu_seconds": 100.0,
                                         "peak_memory_mb": 512.0})
        for by, since in (("user", now - 7 * DAY), ("day", now - 7 * DAY), ("user", 0.0)):
            t0 = time.perf_counter()
            rows = usage_table(store.usage_rows(since=since), since, now, by)
            dt = time.perf_counter() - t0
            print(f"GET usage by={by} since={'7d' if since else 'all'}: {len(rows)} rows in {dt * 1000:.0f} ms "
                  f"({args.attempts} attempts stored)")
        t0 = time.perf_counter()
        snap = fair_share_snapshot(store.usage_rows(since=now - 50 * DAY), now, DAY)
        print(f"fair-share ledger derived at start: {len(snap['users'])} users in "
              f"{(time.perf_counter() - t0) * 1000:.0f} ms")
        t0 = time.perf_counter()
        store.gpu_seconds_by_user(now)
        print(f"metrics scrape (per-user GPU-seconds, summed in SQL): {(time.perf_counter() - t0) * 1000:.0f} ms")
        store.close()


if __name__ == "__main__":
    main()
