"""Kernel start time through the ``hive`` provisioner vs a plain local kernel, and submit-to-running
time of a container job.

    .venv/bin/python benchmarks/bench_kernel.py [--runs 7] [--no-docker]

Starts a real hive-lab Jupyter server (simulated 4-GPU cluster, GPUs free) and measures, per kernel,
``start_kernel()`` until the first ``execute`` reply (what a user waits for), for:
- a plain ipykernel started by jupyter_client's LocalProvisioner;
- the same kernel command through the ``hive`` provisioner (local process inside a GPU grant);
- with a Docker engine (a private dockerd like the tests'), the kernel in a container of the test
  image, and the submit-to-running time of a container batch job.
Prints medians; the target is that the provisioner adds <= 0.5 s when GPUs are free.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from jupyter_client.manager import AsyncKernelManager  # noqa: E402

from fixtures.live_server import LiveServer  # noqa: E402
from hive_lab.cli.kernelspec import kernel_json  # noqa: E402


def write_specs(root: pathlib.Path, image: str | None) -> None:
    args = argparse.Namespace(gpus=1, gpu_type=None, vc=None, image=None, idle_timeout=None, cpus=0, memory_mb=0,
                              display_name=None)
    hive = kernel_json(args)
    plain = {k: v for k, v in hive.items() if k != "metadata"}
    specs = {"bench-plain": plain, "bench-hive": hive}
    if image:
        args.image = image
        specs["bench-hive-docker"] = kernel_json(args)
    for name, spec in specs.items():
        d = root / "kernels" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "kernel.json").write_text(json.dumps(spec))


async def kernel_start(name: str) -> float:
    km = AsyncKernelManager(kernel_name=name)
    t0 = time.perf_counter()
    await km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=120)
        reply = await kc.execute_interactive("pass", timeout=60, output_hook=lambda msg: None)
        assert reply["content"]["status"] == "ok"
        return time.perf_counter() - t0
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)


def submit_to_running(srv: LiveServer, image: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    r = srv.request("POST", "jobs", json={"image": image, "command": "sleep 30",
                                          "tasks": [{"name": "main", "count": 1, "gpus": 1}]})
    r.raise_for_status()
    job_id = r.json()["id"]
    while True:
        job = srv.request("GET", f"jobs/{job_id}").json()
        if job["state"] == "running":
            observed = time.perf_counter() - t0
            break
        if job["state"] in ("failed", "cancelled"):
            raise RuntimeError(job["reason"])
        time.sleep(0.01)
    from datetime import datetime

    def ts(s):
        return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()

    server_side = ts(job["started_at"]) - ts(job["submitted_at"])
    srv.request("DELETE", f"jobs/{job_id}")
    srv.wait_for_job(job_id, "cancelled", timeout=60)
    return observed, server_side


def start_engine():
    """A private dockerd and the test image, as the tests get them; None when unavailable."""
    import pytest

    from fixtures import docker_engine as de

    try:
        engine = de._private_engine()
    except BaseException as exc:  # pytest.skip outside pytest
        print(f"(no Docker engine: {exc})")
        return None, None
    out = subprocess.run([str(REPO / "scripts" / "build-test-images.sh")], env=engine.env(),
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(f"(test image unavailable: {out.stderr[-500:]})")
        engine.close()
        return None, None
    del pytest
    return engine, de.TEST_IMAGE


def median(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} s (min {min(xs):.3f}, n={len(xs)})"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--no-docker", action="store_true")
    args = parser.parse_args()

    engine, image = (None, None) if args.no_docker else start_engine()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="hive-bench-kernel-"))
    config = {}
    if engine is not None:
        config = {"DockerLauncher": {"base_url": engine.base_url, "pull_missing": False}}
    srv = LiveServer(tmp / "srv", launcher="docker" if engine else "local", config=config).start()
    os.environ["HIVE_LAB_URL"], os.environ["HIVE_LAB_TOKEN"] = srv.url, srv.token
    os.environ["JUPYTER_PATH"] = str(tmp / "jupyter")
    write_specs(tmp / "jupyter", image)
    try:
        names = ["bench-plain", "bench-hive"] + (["bench-hive-docker"] if image else [])
        results: dict[str, list[float]] = {n: [] for n in names}
        await kernel_start("bench-plain")  # warm caches (imports) before measuring
        for _ in range(args.runs):
            for n in names:  # interleaved, so machine load hits every variant alike
                results[n].append(await kernel_start(n))
        plain, hive = statistics.median(results["bench-plain"]), statistics.median(results["bench-hive"])
        print(f"kernel start -> first execute reply, plain local kernel:          {median(results['bench-plain'])}")
        print(f"kernel start -> first execute reply, hive provisioner (local):    {median(results['bench-hive'])}")
        print(f"provisioner overhead (median difference):                          {hive - plain:+.3f} s (target <= 0.5 s)")
        if image:
            print(f"kernel start -> first execute reply, hive provisioner (container): {median(results['bench-hive-docker'])}")
            observed, server = [], []
            for _ in range(args.runs):
                o, s = submit_to_running(srv, image)
                observed.append(o)
                server.append(s)
            print(f"container job submit -> running (client observed):                {median(observed)}")
            print(f"container job submit -> running (server timestamps):               {median(server)}")
    finally:
        srv.close()
        if engine is not None:
            engine.close()


if __name__ == "__main__":
    asyncio.run(main())
