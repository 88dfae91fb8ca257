"""Figures for the slurm launcher on the throw-away Slurm cluster (4 nodes x 4 fake GPUs, started and
stopped by this script with scripts/slurm-test-cluster.sh; needs root and Debian's Slurm packages).

1. submit-to-running: one 1-GPU job at a time, pinned like the core would pin it; time from
   ``SlurmLauncher.start()`` to the task's first instruction (a timestamp the task writes), median.
2. throughput: 200 one-GPU jobs (``true``) driven the way the service drives them: at most 16 run
   (one per GPU); when ``poll()`` reports an exit, the next job starts on the freed GPU. Jobs/s.
3. for reference, raw Slurm: 200 x ``sbatch --gres=gpu:1 --wrap true`` (Slurm picks the GPUs).

    .venv/bin/python benchmarks/bench_slurm.py [--jobs 200] [--latency-runs 10]

The virtual nodes share this machine's cores, so these are figures for the launcher's overhead on a
small box, not for a real cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fixtures.slurm_cluster import SlurmCluster, slurm_missing  # noqa: E402

from hive_lab_server.execution.launchers.base import LaunchRequest, TaskLaunch  # noqa: E402
from hive_lab_server.execution.launchers.slurm import SlurmLauncher  # noqa: E402


def task(root: pathlib.Path, job: str, node: str, gpu: int, command: str) -> TaskLaunch:
    return TaskLaunch(job_id=job, task="main-0", group="main", index=0, rank=0, node=node, gpu_indices=(gpu,),
                      gpu_uuids=None, command=command, env={}, working_dir=str(root),
                      log_path=str(root / job / "logs" / "main-0.log"))


async def latency(cluster: SlurmCluster, root: pathlib.Path, runs: int) -> list[float]:
    l = SlurmLauncher(slurm_conf=cluster.slurm_conf, jobs_root=str(root / "lat"), slurm_poll_s=0.1, sync_node_health=False)
    out = []
    for i in range(runs):
        stamp = root / f"stamp-{i}"
        t0 = time.time()
        await l.start(LaunchRequest(f"lat-{i}", "root", "batch",
                                    (task(root, f"lat-{i}", f"n{1 + i % 4}", i % 4, f"date +%s.%N > {stamp}"),)))
        exits = []
        while not exits:
            exits = await l.poll()
            await asyncio.sleep(0.02)
        out.append(float(stamp.read_text()) - t0)
    return out


async def throughput(cluster: SlurmCluster, root: pathlib.Path, n: int) -> tuple[float, float]:
    l = SlurmLauncher(slurm_conf=cluster.slurm_conf, jobs_root=str(root / "thr"), slurm_poll_s=0.2, sync_node_health=False)
    free = [(f"n{k}", g) for k in range(1, 5) for g in range(4)]
    where: dict[str, tuple[str, int]] = {}
    started = done = 0
    t0 = time.perf_counter()
    submit_s = 0.0
    while done < n:
        while free and started < n:
            node, gpu = free.pop(0)
            job = f"thr-{started}"
            ts = time.perf_counter()
            await l.start(LaunchRequest(job, "root", "batch", (task(root, job, node, gpu, "true"),)))
            submit_s += time.perf_counter() - ts
            where[job] = (node, gpu)
            started += 1
        for e in await l.poll():
            assert e.exit_code == 0, e
            free.append(where.pop(e.job_id))
            done += 1
        await asyncio.sleep(0.02)
    return time.perf_counter() - t0, submit_s / n


def raw_sbatch(cluster: SlurmCluster, root: pathlib.Path, n: int) -> tuple[float, float]:
    t0 = time.perf_counter()
    for _ in range(n):
        cluster.run("sbatch", "--parsable", "--gres=gpu:1", "-o", str(root / "raw-%j.out"), "--wrap", "true")
    submitted = time.perf_counter() - t0
    while any(j["job_state"] in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
              for j in json.loads(cluster.run("squeue", "--json"))["jobs"]):
        time.sleep(0.2)
    return submitted, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--latency-runs", type=int, default=10)
    args = ap.parse_args()
    why = slurm_missing()
    if why:
        sys.exit(f"bench_slurm: {why}")
    root = pathlib.Path(tempfile.mkdtemp(prefix="hive-bench-slurm-"))
    root.chmod(0o755)
    cluster = SlurmCluster(root / "cluster")
    (root / "cluster").mkdir()
    cluster.up()
    try:
        lat = asyncio.run(latency(cluster, root, args.latency_runs))
        print(f"submit-to-running (launcher.start -> task's first instruction), {len(lat)} runs: "
              f"median {statistics.median(lat) * 1000:.0f} ms, min {min(lat) * 1000:.0f} ms, max {max(lat) * 1000:.0f} ms")
        wall, per_submit = asyncio.run(throughput(cluster, root, args.jobs))
        print(f"throughput via SlurmLauncher, {args.jobs} one-GPU jobs on 16 GPUs (pinned, next starts when one ends): "
              f"{wall:.1f} s, {args.jobs / wall:.1f} jobs/s; start() (sbatch) mean cost {per_submit * 1000:.0f} ms")
        submitted, total = raw_sbatch(cluster, root, args.jobs)
        print(f"reference, raw Slurm: {args.jobs} x sbatch --gres=gpu:1 --wrap true: submitted in {submitted:.1f} s, "
              f"all done in {total:.1f} s ({args.jobs / total:.1f} jobs/s)")
    finally:
        cluster.down()
        subprocess.run(["rm", "-rf", str(root)], check=False)


if __name__ == "__main__":
    main()
