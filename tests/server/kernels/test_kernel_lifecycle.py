"""GPU kernels started by a real Jupyter server (JupyterLab's path, with jupyter_server's restarter):
a kernel whose job someone else cancels stays cancelled, says who and why, and starts again only when
its user restarts it."""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from hive_lab.cli.kernelspec import kernel_json

ONE_GPU = {"nodes": 1, "gpus_per_node": 1, "gpu_type": "T4", "vcs": {"default": 1}}
FINAL = ("cancelled", "succeeded", "failed")


def gpu_kernelspec(root) -> dict[str, str]:
    args = argparse.Namespace(gpus=1, gpu_type=None, vc=None, image=None, idle_timeout=None, cpus=0,
                              memory_mb=0, display_name=None)
    (root / "kernels" / "hive-gpu").mkdir(parents=True)
    (root / "kernels" / "hive-gpu" / "kernel.json").write_text(json.dumps(kernel_json(args)))
    return {"JUPYTER_PATH": str(root)}


async def execute(srv, kernel_id: str, code: str) -> str:
    """Run ``code`` in the server's kernel as a frontend does (waits until some kernel answers there)."""
    from jupyter_client.asynchronous import AsyncKernelClient

    kc = AsyncKernelClient(connection_file=str(srv.runtime_dir / f"kernel-{kernel_id}.json"))
    kc.load_connection_file()
    kc.start_channels()
    out: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                await kc.wait_for_ready(timeout=60)
                break
            except RuntimeError:
                assert time.monotonic() < deadline, "the kernel never answered"
                await asyncio.sleep(0.3)

        def hook(msg):
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        await kc.execute_interactive(code, output_hook=hook, timeout=60)
    finally:
        kc.stop_channels()
    return "".join(out)


def kernel_jobs(srv) -> list[dict]:
    return [j for j in srv.request("GET", "jobs").json()["jobs"] if j["kind"] == "kernel"]


async def test_a_gpu_kernel_someone_cancels_stays_cancelled_until_its_user_restarts_it(live_server_factory, tmp_path):
    srv = live_server_factory(launcher="local", cluster_config=ONE_GPU, env=gpu_kernelspec(tmp_path / "specs"),
                              users={"ivy": {}}, admin_users=["ivy"])
    body = {"path": "train.ipynb", "name": "train.ipynb", "type": "notebook", "kernel": {"name": "hive-gpu"}}
    r = await asyncio.to_thread(srv.request, "POST", "/api/sessions", json=body)
    assert r.status_code == 201, r.text
    kernel_id = r.json()["kernel"]["id"]
    (job,) = await asyncio.to_thread(kernel_jobs, srv)
    assert "first" in await execute(srv, kernel_id, "print('first')")

    # the instructor cancels it (deadline week); jupyter_server's restarter sees the kernel die
    from hive_lab.cli import main

    rc = await asyncio.to_thread(main, ["cancel", job["id"], "--reason", "deadline week: the GPUs go to the exam",
                                        "--url", srv.url, "--token", srv.tokens["ivy"]])
    assert rc == 0
    await asyncio.to_thread(srv.wait_for_job, job["id"], "cancelled")
    out = await execute(srv, kernel_id, "print('second')")  # whatever answers in the kernel's place now
    assert "second" not in out, out  # no new GPU kernel behind the instructor's back ...
    assert f"job {job['id']}" in out and "cancelled by ivy (deadline week: the GPUs go to the exam)" in out, out
    assert "Restart" in out, out  # ... and the notebook says how to start again
    jobs = await asyncio.to_thread(kernel_jobs, srv)
    assert [j["id"] for j in jobs] == [job["id"]], jobs  # no other GPU request was made
    models = (await asyncio.to_thread(srv.request, "GET", "/api/kernels")).json()
    assert kernel_id in [k["id"] for k in models]  # the notebook keeps its kernel: it can be restarted

    # the user's own restart asks for GPUs again; the new kernel says what happened to the previous one
    r = await asyncio.to_thread(srv.request, "POST", f"/api/kernels/{kernel_id}/restart")
    assert r.status_code == 200, r.text
    out = await execute(srv, kernel_id, "print('again')")
    assert "again" in out and "the previous kernel of this notebook ended: cancelled by ivy" in out, out
    (new,) = [j for j in await asyncio.to_thread(kernel_jobs, srv) if j["state"] not in FINAL]
    assert new["id"] != job["id"] and new["state"] == "running"
    r = await asyncio.to_thread(srv.request, "DELETE", f"/api/kernels/{kernel_id}")
    assert r.status_code == 204
    await asyncio.to_thread(srv.wait_for_job, new["id"], *FINAL)
