"""The course setup with notebook kernels, live: a real Jupyter server on a fake-NVML machine with one
GPU and a kernelspec installed with ``hive-lab kernelspec install --gpus 0.25``. Five students start a
GPU kernel each (the ``hive`` provisioner, as Jupyter starts it): four run on the one GPU at once, each
seeing its share; the fifth waits and its start says why; a kernel whose process uses more GPU memory
than its budget (fake NVML's per-process memory) is warned in its job's history, then stopped, and the
fifth kernel gets the freed quarter."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys

from jupyter_client.manager import AsyncKernelManager
from traitlets.config import Config

from fixtures.fake_nvml import add_fault
from waiting import wait_until_async

STUDENTS = [f"student{i}" for i in range(5)]
PROBE = ("import os; print('SEES=' + os.environ['CUDA_VISIBLE_DEVICES'], 'BUDGET=' + os.environ['HIVE_GPU_MEMORY_MB'], "
         "'MODE=' + os.environ['HIVE_GPU_SHARE_MODE'], 'PID=' + str(os.getpid()))")


async def run_code(km: AsyncKernelManager, code: str, timeout: float = 120) -> str:
    kc = km.client()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=timeout)
        out: list[str] = []

        def hook(msg):
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        reply = await kc.execute_interactive(code, output_hook=hook, timeout=timeout)
        assert reply["content"]["status"] == "ok", "".join(out)
        return "".join(out)
    finally:
        kc.stop_channels()


def field(out: str, name: str) -> str:
    return [w.split("=", 1)[1] for w in out.split() if w.startswith(name + "=")][-1]


async def test_four_quarter_gpu_kernels_share_one_gpu_the_fifth_waits_and_a_memory_hog_is_stopped(
        live_server_factory, fake_hardware, tmp_path, monkeypatch, caplog):
    prefix = tmp_path / "kernelspecs"
    done = subprocess.run([sys.executable, "-m", "hive_lab.cli", "kernelspec", "install", "--name", "gpu-quarter",
                           "--gpus", "0.25", "--prefix", str(prefix)], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)
    assert done.returncode == 0, done.stderr
    monkeypatch.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))

    hw = fake_hardware("single")  # one RTX 4090, 24564 MB: a quarter's budget is 6141 MB
    srv = live_server_factory(
        cluster_config=None, users={s: {} for s in STUDENTS}, vc_access={s: ["default"] for s in STUDENTS},
        config={"HiveLabApp": {"nvml_backend": f"fake:{hw}", "gpu_sample_interval_s": 0.2, "stop_grace_s": 0.5,
                               "gpu_share_modes": {"*": "timeslice"}}},
    )

    def job(job_id: str, user: str) -> dict:
        r = srv.request("GET", f"jobs/{job_id}", user=user)
        r.raise_for_status()
        return r.json()

    kms = {s: AsyncKernelManager(kernel_name="gpu-quarter",
                                 config=Config({"HiveProvisioner": {"url": srv.url, "token": srv.tokens[s],
                                                                    "queue_log_interval_s": 3600, "placement_wait_s": 60}}))
           for s in STUDENTS}
    caplog.set_level(logging.WARNING, logger="hive_lab_server.kernels.provisioner")
    try:
        seen = {}
        for s in STUDENTS[:4]:
            await kms[s].start_kernel()
            seen[s] = await run_code(kms[s], PROBE)
        ids = {s: kms[s].provisioner.job_id for s in STUDENTS[:4]}
        (gpu,) = srv.request("GET", "cluster").json()["gpus"]
        for s in STUDENTS[:4]:  # time-slicing: each sees the one GPU and knows its budget
            j = job(ids[s], s)
            assert (j["kind"], j["state"], j["gpus"], j["placement"][0]["gpus"]) == ("kernel", "running", 0.25, [0])
            assert (field(seen[s], "SEES"), field(seen[s], "BUDGET"), field(seen[s], "MODE")) == (gpu["uuid"], "6141", "timeslice")
            assert "holding a 0.25 share of GPU 0." in seen[s]  # the first cell's notice
        assert [(x["job"], x["user"], x["share"]) for x in gpu["shares"]] == [(ids[s], s, 0.25) for s in STUDENTS[:4]]

        # the fifth student's kernel: its start returns while it waits, and says why
        fifth = kms[STUDENTS[4]]
        await fifth.start_kernel()
        ids[STUDENTS[4]] = fifth.provisioner.job_id
        waiting = job(ids[STUDENTS[4]], STUDENTS[4])
        reason = "no GPU of VC default has a free quarter; 0 of 1 GPUs hold whole-GPU jobs"
        assert waiting["state"] == "queued" and waiting["reason"].startswith(reason), waiting
        assert fifth.provisioner.waiting_for_gpus and fifth.provisioner.queue_reason.startswith(reason)
        said = [r.getMessage() for r in caplog.records if ids[STUDENTS[4]] in r.getMessage()]
        assert any("waits for a 0.25 share of a GPU" in m and reason in m for m in said), said
        assert await fifth.is_alive()  # waiting, not dead

        # per-share utilisation: NVML's per-process utilisation of each kernel's process, in the cluster
        # view's shares and a Prometheus series per share
        pids = {s: int(field(seen[s], "PID")) for s in STUDENTS[:4]}
        add_fault(hw, {"at": 0, "gpu": 0, "utilization": 55, "processes": [
            {"pid": pids[STUDENTS[0]], "used_memory_mb": 1000, "sm_util": 40},
            {"pid": pids[STUDENTS[1]], "used_memory_mb": 500, "sm_util": 15}]})

        def share_utils():
            (g,) = srv.request("GET", "cluster").json()["gpus"]
            got = {x["job"]: x["utilization"] for x in g["shares"]}
            return got if got[ids[STUDENTS[0]]] == 40 else None

        utils = await wait_until_async(share_utils, "the shares' utilisation in the cluster view", timeout=90, in_thread=True)
        assert utils == {ids[STUDENTS[0]]: 40, ids[STUDENTS[1]]: 15, ids[STUDENTS[2]]: None, ids[STUDENTS[3]]: None}
        metrics = srv.request("GET", "metrics").text
        series = [line for line in metrics.splitlines() if line.startswith("hive_lab_job_gpu_share_utilization_percent{")]
        assert len(series) == 2, series
        assert any(f'job="{ids[STUDENTS[0]]}"' in line and 'share="0.25"' in line and f'user="{STUDENTS[0]}"' in line
                   and line.endswith(" 40.0") for line in series), series

        # student0's kernel grows past its budget (NVML's per-process memory of the kernel's process)
        add_fault(hw, {"at": 0, "gpu": 0, "memory_used_mb": 9000,
                       "processes": [{"pid": pids[STUDENTS[0]], "used_memory_mb": 9000}]})
        hog = await wait_until_async(lambda: (lambda j: j if j["state"] == "cancelled" else None)(job(ids[STUDENTS[0]], STUDENTS[0])),
                          "the memory hog's kernel to be stopped", timeout=90, in_thread=True)
        history = [h["reason"] for h in hog["history"]]
        warned = [h for h in history if h.startswith("warning: its GPU share uses 9000 MB")]
        assert warned and "over its budget of 6141 MB" in warned[0], history
        assert history.index(warned[0]) < len(history) - 1  # told before it was stopped
        assert "stopped: its GPU share used 9000 MB of GPU memory, over its budget of 6141 MB" in hog["reason"]
        async def hog_kernel_gone():
            return not await kms[STUDENTS[0]].is_alive()

        await wait_until_async(hog_kernel_gone, "the stopped kernel to look dead", timeout=90)

        # the fifth kernel takes the freed quarter and runs; the well-behaved kernels were not disturbed
        await wait_until_async(lambda: job(ids[STUDENTS[4]], STUDENTS[4])["state"] == "running", "the fifth kernel to start", timeout=90, in_thread=True)
        out = await run_code(fifth, PROBE)
        assert (field(out, "SEES"), field(out, "BUDGET")) == (gpu["uuid"], "6141")
        assert "in the queue for its GPUs: " + reason in out  # its first cell says it waited, and why
        assert [job(ids[s], s)["state"] for s in STUDENTS[1:4]] == ["running"] * 3
        for s in STUDENTS[1:4]:
            assert "x" in await run_code(kms[s], "print('x')")
        (gpu,) = srv.request("GET", "cluster").json()["gpus"]
        assert sorted((x["job"], x["share"]) for x in gpu["shares"]) == sorted((ids[s], 0.25) for s in STUDENTS[1:])
    finally:
        for km in kms.values():
            if km.has_kernel:
                await km.shutdown_kernel(now=True)
