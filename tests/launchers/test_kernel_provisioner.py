"""Notebook kernels as scheduled GPU jobs: the ``hive`` provisioner against a live hive-lab server.

The kernels are started the way Jupyter starts them (``AsyncKernelManager`` with a kernelspec whose
provisioner is ``hive``), and talk to a real server subprocess over REST.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import time

import pytest
from jupyter_client.manager import AsyncKernelManager
from traitlets.config import Config

from hive_lab.cli.kernelspec import kernel_json
from hive_lab_server.kernels import ports as kernel_ports
from hive_lab_server.kernels.refusal import KernelRefused

ONE_GPU = {"nodes": 1, "gpus_per_node": 1, "gpu_type": "T4", "vcs": {"default": 1}}


@pytest.fixture
def hive_kernelspec(tmp_path, monkeypatch):
    """``make(name, **config) -> name``: a hive kernelspec visible to jupyter_client in this test."""
    root = tmp_path / "jupyter-path"
    monkeypatch.setenv("JUPYTER_PATH", str(root))

    def make(name="hive-gpu", gpus=1, image=None, **extra):
        args = argparse.Namespace(gpus=gpus, gpu_type=None, vc=None, image=image, idle_timeout=None, cpus=0,
                                  memory_mb=0, display_name=None)
        spec = kernel_json(args)
        spec["metadata"]["kernel_provisioner"]["config"].update(extra)
        d = root / "kernels" / name
        d.mkdir(parents=True, exist_ok=True)
        (d / "kernel.json").write_text(json.dumps(spec))
        return name

    return make


def use_server(monkeypatch, srv):
    monkeypatch.setenv("HIVE_LAB_URL", srv.url)
    monkeypatch.setenv("HIVE_LAB_TOKEN", srv.token)


async def run_code(km: AsyncKernelManager, code: str, timeout: float = 60) -> str:
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


async def wait_job(srv, job_id: str, *states: str, timeout: float = 30) -> dict:
    """``srv.wait_for_job`` off the event loop (the provisioner's watcher and culler run on it)."""
    return await asyncio.to_thread(srv.wait_for_job, job_id, *states, timeout=timeout)


def job_of(km: AsyncKernelManager) -> str:
    return km.provisioner.job_id


PROBE = "import os, sys; print('GPUS=' + os.environ['CUDA_VISIBLE_DEVICES'], 'JOB=' + os.environ['HIVE_JOB_ID'], " \
        "'URL=' + os.environ.get('HIVE_LAB_URL', ''), 'TOKEN=' + os.environ.get('HIVE_LAB_TOKEN', ''), " \
        "'PREFIX=' + sys.prefix)"


async def test_kernel_runs_code_reports_gpus_restart_keeps_them_shutdown_releases(
    live_server_factory, hive_kernelspec, monkeypatch
):
    srv = live_server_factory(launcher="local")
    use_server(monkeypatch, srv)
    km = AsyncKernelManager(kernel_name=hive_kernelspec(gpus=2))
    await km.start_kernel()
    try:
        job_id = job_of(km)
        out = await run_code(km, PROBE)
        job = await wait_job(srv, job_id, "running")
        assert job["kind"] == "kernel"
        gpus = job["placement"][0]["gpus"]
        assert len(gpus) == 2
        assert f"GPUS={','.join(map(str, gpus))}" in out
        assert f"JOB={job_id}" in out and f"URL={srv.url}" in out and f"TOKEN={srv.token}" in out
        assert f"hive-lab: this kernel is job {job_id}" in out  # the first cell's notice
        # the connection key and the user's token are the owner's alone (created so, never widened)
        wd = pathlib.Path(job["working_dir"])
        private = {".hive-kernel": 0o700, ".hive-kernel/connection.json": 0o600, ".hive-kernel/token": 0o600,
                   ".hive-kernel/notice.py": 0o600, "": 0o700}
        assert {rel: (wd / rel).stat().st_mode & 0o777 for rel in private} == private
        assert km.connection_file and json.loads(open(km.connection_file).read())["ip"] == job["placement"][0]["address"]
        assert srv.request("GET", "cluster").json()["gpus_free"] == 2

        # the scheduler's client settings are in the kernel: %%submit works inside it
        await run_code(km, "%load_ext hive_lab")
        await run_code(km, "%%submit --gpus 1 --name from-kernel\nprint('inner')")
        inner = [j for j in srv.request("GET", "jobs").json()["jobs"] if j["name"] == "from-kernel"]
        assert len(inner) == 1 and inner[0]["kind"] == "batch"
        await wait_job(srv, inner[0]["id"], "succeeded")

        await run_code(km, "x = 41")
        await km.restart_kernel()
        assert job_of(km) == job_id
        out = await run_code(km, "print('x' in globals()); " + PROBE)
        assert "\nFalse\n" in out  # a fresh interpreter ...
        assert f"GPUS={','.join(map(str, gpus))}" in out  # ... on the same GPUs, same job
        assert (await wait_job(srv, job_id, "running"))["placement"][0]["gpus"] == gpus
        assert (wd / ".hive-kernel/connection.json").stat().st_mode & 0o777 == 0o600  # rewritten by the restart
    finally:
        await km.shutdown_kernel()
    job = await wait_job(srv, job_id, "cancelled", "succeeded")
    assert srv.request("GET", "cluster").json()["gpus_free"] == 4, job


async def test_second_gpu_kernel_queues_until_the_first_shuts_down(live_server_factory, hive_kernelspec, monkeypatch):
    srv = live_server_factory(launcher="local", cluster_config=ONE_GPU)
    use_server(monkeypatch, srv)
    name = hive_kernelspec(gpus=1)
    first = AsyncKernelManager(kernel_name=name)
    # the second kernel's manager starts out with another address (all interfaces) than its node's (127.0.0.1)
    second = AsyncKernelManager(kernel_name=name, ip="0.0.0.0")
    await first.start_kernel()
    try:
        await run_code(first, "print(1)")
        t0 = time.monotonic()
        await second.start_kernel()
        assert time.monotonic() - t0 < 10  # launching returns while the kernel waits
        queued = await wait_job(srv, job_of(second), "queued")
        assert queued["reason"]  # a sentence saying why it waits
        assert await second.is_alive()  # waiting, not dead
        await asyncio.sleep(1.5)
        assert (await wait_job(srv, job_of(second), "queued"))["state"] == "queued"

        await first.shutdown_kernel()
        deadline = time.monotonic() + 30
        while second.ip != "127.0.0.1":  # the grant arrives: Jupyter is pointed at the placed node
            assert time.monotonic() < deadline, second.ip
            await asyncio.sleep(0.1)
        placed = await wait_job(srv, job_of(second), "running")
        assert second.provisioner.connection_info["ip"] == placed["placement"][0]["address"] == "127.0.0.1"
        assert json.loads(open(second.connection_file).read())["ip"] == "127.0.0.1"
        out = await run_code(second, PROBE, timeout=60)
        assert "GPUS=0" in out
        assert "waited" in out and "in the queue for its GPUs" in out  # the user sees the wait and why
    finally:
        for km in (first, second):
            if km.has_kernel:
                await km.shutdown_kernel(now=True)


async def test_idle_kernel_is_culled_and_its_gpu_released(live_server_factory, hive_kernelspec, monkeypatch):
    srv = live_server_factory(launcher="local", cluster_config=ONE_GPU)
    use_server(monkeypatch, srv)
    # the instructor's per-VC limit caps the kernelspec's own (longer) idle timeout
    config = Config({"HiveProvisioner": {"idle_timeout_per_vc": {"default": 2.0}, "cull_interval_s": 0.3}})
    km = AsyncKernelManager(kernel_name=hive_kernelspec(gpus=1, idle_timeout=3600), config=config)
    await km.start_kernel()
    try:
        job_id = job_of(km)
        out = await run_code(km, "import time; time.sleep(3.5); print('done')")  # executing is not idle
        assert "done" in out and "shut down (and its GPUs released) after 2 s" in out
        assert (await wait_job(srv, job_id, "running"))["state"] == "running"
        job = await wait_job(srv, job_id, "cancelled", timeout=20)
        assert "idle kernel culled" in job["reason"] and "VC default" in job["reason"]
        assert srv.request("GET", "cluster").json()["gpus_free"] == 1
        deadline = time.monotonic() + 20
        while km.has_kernel and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert not await km.is_alive()
    finally:
        if km.has_kernel:
            await km.shutdown_kernel(now=True)


@pytest.mark.docker
@pytest.mark.timeout(900)  # may build the test image first
async def test_kernel_runs_in_a_container_inside_its_grant(
    live_server_factory, hive_kernelspec, monkeypatch, docker_engine, docker_test_image
):
    srv = live_server_factory(
        launcher="docker", config={"DockerLauncher": {"base_url": docker_engine.base_url, "pull_missing": False}}
    )
    use_server(monkeypatch, srv)
    km = AsyncKernelManager(kernel_name=hive_kernelspec(gpus=1, image=docker_test_image))
    await km.start_kernel()
    try:
        job_id = job_of(km)
        out = await run_code(km, PROBE)
        gpus = (await wait_job(srv, job_id, "running"))["placement"][0]["gpus"]
        assert f"GPUS={gpus[0]}" in out and "PREFIX=/usr\n" in out  # the image's python3, not our venv
        client = docker_engine.client()
        (container,) = client.containers.list(filters={"label": f"hive-lab.job={job_id}"})
        assert container.labels["hive-lab.kind"] == "kernel"
        # interrupting reaches the kernel in its container (interrupt_mode "message")
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=30)
            msg_id = kc.execute("import time; time.sleep(60)")
            await asyncio.sleep(1.0)
            t0 = time.monotonic()
            await km.interrupt_kernel()
            while True:
                reply = await kc.get_shell_msg(timeout=20)
                if reply["parent_header"].get("msg_id") == msg_id:
                    break
            assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
            assert time.monotonic() - t0 < 10
        finally:
            kc.stop_channels()
    finally:
        await km.shutdown_kernel()
    await wait_job(srv, job_id, "cancelled", "succeeded")
    deadline = time.monotonic() + 20
    while client.containers.list(all=True, filters={"label": f"hive-lab.job={job_id}"}):
        assert time.monotonic() < deadline, f"the kernel's container was not removed:\n{srv.log()[-4000:]}"
        await asyncio.sleep(0.2)


async def test_kernels_started_by_the_jupyter_server_itself(live_server_factory, tmp_path):
    """The provisioner inside the Jupyter server (JupyterLab's path): it finds its own server, and
    culling goes through the server's kernel manager, so the notebook's next kernel can tell."""
    from jupyter_client.asynchronous import AsyncKernelClient

    specs = tmp_path / "specs"
    args = argparse.Namespace(gpus=1, gpu_type=None, vc=None, image=None, idle_timeout=None, cpus=0,
                              memory_mb=0, display_name=None)
    (specs / "kernels" / "hive-gpu").mkdir(parents=True)
    (specs / "kernels" / "hive-gpu" / "kernel.json").write_text(json.dumps(kernel_json(args)))
    srv = live_server_factory(
        launcher="local", cluster_config=ONE_GPU, env={"JUPYTER_PATH": str(specs)},
        config={"HiveProvisioner": {"idle_timeout_per_vc": {"default": 3.0}, "cull_interval_s": 0.3}},
    )
    body = {"path": "nb.ipynb", "name": "nb.ipynb", "type": "notebook", "kernel": {"name": "hive-gpu"}}

    async def start_session() -> tuple[str, str]:
        r = await asyncio.to_thread(srv.request, "POST", "/api/sessions", json=body)
        assert r.status_code == 201, r.text
        kernel_id = r.json()["kernel"]["id"]
        jobs = (await asyncio.to_thread(srv.request, "GET", "jobs")).json()["jobs"]
        (job,) = [j for j in jobs if j["kind"] == "kernel" and j["state"] not in ("cancelled", "succeeded", "failed")]
        return kernel_id, job["id"]

    async def execute(kernel_id: str, code: str) -> str:
        kc = AsyncKernelClient(connection_file=str(srv.runtime_dir / f"kernel-{kernel_id}.json"))
        kc.load_connection_file()
        kc.start_channels()
        out: list[str] = []
        try:
            deadline = time.monotonic() + 60
            while True:  # a client without the kernel's manager reads "not beating yet" as dead
                try:
                    await kc.wait_for_ready(timeout=60)
                    break
                except RuntimeError:
                    assert time.monotonic() < deadline, "the kernel never answered"
                    await asyncio.sleep(0.3)
            hook = lambda m: out.append(m["content"].get("text", "")) if m["msg_type"] == "stream" else None  # noqa: E731
            await kc.execute_interactive(code, output_hook=hook, timeout=60)
        finally:
            kc.stop_channels()
        return "".join(out)

    kernel_id, job_id = await start_session()
    assert job_id == "j-000001" and "nb.ipynb" in (await wait_job(srv, job_id, "running"))["name"]
    out = await execute(kernel_id, "import os; print('GPUS=' + os.environ['CUDA_VISIBLE_DEVICES'])")
    assert "GPUS=0" in out and "after 3 s without execution" in out

    job = await wait_job(srv, job_id, "cancelled", timeout=30)
    assert "idle kernel culled" in job["reason"]
    deadline = time.monotonic() + 20
    while kernel_id in [k["id"] for k in (await asyncio.to_thread(srv.request, "GET", "/api/kernels")).json()]:
        assert time.monotonic() - deadline < 0, "the culled kernel is still listed by the Jupyter server"
        await asyncio.sleep(0.2)

    kernel_id, job_id = await start_session()  # the user comes back to the notebook
    out = await execute(kernel_id, "print('back')")
    assert "the previous kernel of this notebook was shut down" in out and "back" in out
    r = await asyncio.to_thread(srv.request, "DELETE", f"/api/kernels/{kernel_id}")
    assert r.status_code == 204
    await wait_job(srv, job_id, "cancelled", "succeeded")


async def test_a_request_the_cluster_cannot_grant_fails_with_the_reason(live_server_factory, hive_kernelspec, monkeypatch):
    srv = live_server_factory(launcher="local")
    use_server(monkeypatch, srv)
    km = AsyncKernelManager(kernel_name=hive_kernelspec(gpus=64))
    with pytest.raises(KernelRefused, match="refused the kernel's GPU request: .*") as err:
        await km.start_kernel()
    assert err.value.status_code == 400  # the service's status: jupyter_server answers it, not a 500
    assert "64" in str(err.value) or "gpus" in str(err.value), err.value  # says what to change
    assert srv.request("GET", "jobs").json()["total"] == 0  # nothing half-applied
    monkeypatch.setenv("HIVE_LAB_URL", "http://127.0.0.1:9/")  # nobody listens there
    km = AsyncKernelManager(kernel_name=hive_kernelspec(gpus=1))
    with pytest.raises(KernelRefused, match="cannot reach hive-lab at http://127.0.0.1:9/") as err:
        await km.start_kernel()
    assert err.value.status_code == 503


async def test_a_kernel_whose_jupyter_server_died_stops_and_frees_its_gpu(live_server_factory, tmp_path):
    specs = tmp_path / "specs"
    args = argparse.Namespace(gpus=1, gpu_type=None, vc=None, image=None, idle_timeout=None, cpus=0,
                              memory_mb=0, display_name=None)
    (specs / "kernels" / "hive-gpu").mkdir(parents=True)
    (specs / "kernels" / "hive-gpu" / "kernel.json").write_text(json.dumps(kernel_json(args)))
    # the kernel's own watchdog (the fallback, tests/launchers/test_kernel_bind.py) must not win the race the
    # restart below runs against it on a busy machine: it waits long past the lease here
    srv = live_server_factory(launcher="local", cluster_config=ONE_GPU, env={"JUPYTER_PATH": str(specs)},
                              config={"HiveProvisioner": {"heartbeat_lease_s": 4, "watchdog_slack_s": 600}})
    r = srv.request("POST", "/api/kernels", json={"name": "hive-gpu"})
    assert r.status_code == 201, r.text
    (job,) = srv.request("GET", "jobs").json()["jobs"]
    await wait_job(srv, job["id"], "running")
    await asyncio.sleep(6)  # heartbeats keep a held kernel alive past its lease
    assert (await wait_job(srv, job["id"], "running"))["state"] == "running"

    await asyncio.to_thread(srv.kill)  # the Jupyter server holding the kernel dies; nobody can reach it now
    await asyncio.to_thread(srv.start)
    job = await wait_job(srv, job["id"], "succeeded", "failed", "cancelled", timeout=40)
    assert srv.request("GET", "cluster").json()["gpus_free"] == 1, job
    # the service ends it at the lease, in words (the kernel's own watchdog is only the fallback)
    assert job["state"] == "cancelled" and "no heartbeat for" in job["reason"], job


async def test_a_queued_kernel_whose_server_died_never_holds_the_gpu(live_server_factory, tmp_path):
    """The Jupyter server dies while its kernel waits in the queue: once its heartbeat is older than the
    lease the service ends the job, which never holds the GPU for nobody."""
    specs = tmp_path / "specs"
    args = argparse.Namespace(gpus=1, gpu_type=None, vc=None, image=None, idle_timeout=None, cpus=0,
                              memory_mb=0, display_name=None)
    (specs / "kernels" / "hive-gpu").mkdir(parents=True)
    (specs / "kernels" / "hive-gpu" / "kernel.json").write_text(json.dumps(kernel_json(args)))
    srv = live_server_factory(launcher="local", cluster_config=ONE_GPU, env={"JUPYTER_PATH": str(specs)},
                              config={"HiveProvisioner": {"heartbeat_lease_s": 3}})
    # the blocker holds the GPU until the test lets it go (a fixed "sleep 8" ended first when the restart
    # below took longer than that on a busy machine, and the kernel then ran: the test's race, not the product's)
    go = tmp_path / "go"
    blocker = srv.request("POST", "jobs", json={"command": f"while [ ! -e {go} ]; do sleep 0.1; done",
                                                "tasks": [{"name": "main", "count": 1, "gpus": 1}]})
    assert blocker.status_code == 201
    r = srv.request("POST", "/api/kernels", json={"name": "hive-gpu"})
    assert r.status_code == 201, r.text  # returns while the kernel waits
    (kernel,) = [j for j in srv.request("GET", "jobs").json()["jobs"] if j["kind"] == "kernel"]
    assert kernel["state"] == "queued"
    await asyncio.to_thread(srv.kill)
    await asyncio.to_thread(srv.start)
    job = await wait_job(srv, kernel["id"], "succeeded", "failed", "cancelled", timeout=60)
    assert job["state"] == "cancelled" and "no heartbeat for" in job["reason"], job
    assert "running" not in [h["state"] for h in srv.request("GET", f"jobs/{job['id']}").json()["history"]]
    go.touch()
    await wait_job(srv, blocker.json()["id"], "succeeded")
    assert srv.request("GET", "cluster").json()["gpus_free"] == 1  # nobody's kernel took it


async def test_a_preempted_kernel_says_why_in_the_next_kernel(live_server_factory, hive_kernelspec, monkeypatch):
    srv = live_server_factory(launcher="local", cluster_config=ONE_GPU, config={"HiveLabApp": {"preemption_grace_s": 0.5}})
    use_server(monkeypatch, srv)
    km = AsyncKernelManager(kernel_name=hive_kernelspec(gpus=1))
    await km.start_kernel(env={"JPY_SESSION_NAME": "train.ipynb"})
    try:
        first = job_of(km)
        await run_code(km, "print(1)")
        urgent = srv.request("POST", "jobs", json={"command": "sleep 2", "priority": 500,
                                                   "tasks": [{"name": "main", "count": 1, "gpus": 1}]})
        assert urgent.status_code == 201, urgent.text
        job = await wait_job(srv, first, "failed", "cancelled", "queued", timeout=30)
        assert "preempted" in job["reason"], job
        deadline = time.monotonic() + 20
        while await km.is_alive():
            assert time.monotonic() < deadline, "the preempted kernel still looks alive"
            await asyncio.sleep(0.2)
        await km.restart_kernel()  # what Jupyter's restarter does; it queues behind the urgent job
        out = await run_code(km, "print('again')", timeout=60)
        assert job_of(km) != first
        assert "the previous kernel of this notebook ended: preempted" in out and "again" in out
    finally:
        if km.has_kernel:
            await km.shutdown_kernel(now=True)


async def test_shutting_down_a_queued_kernel_cancels_its_job(live_server_factory, hive_kernelspec, monkeypatch):
    """Deleting a kernel that waits for its GPU withdraws the request: the job ends cancelled and never
    runs (before: the queued shutdown message was read once it got the GPU, and it ended "succeeded")."""
    srv = live_server_factory(launcher="local", cluster_config=ONE_GPU)
    use_server(monkeypatch, srv)
    name = hive_kernelspec(gpus=1)
    first, second = AsyncKernelManager(kernel_name=name), AsyncKernelManager(kernel_name=name)
    await first.start_kernel()
    try:
        await run_code(first, "print(1)")
        await second.start_kernel()
        low = kernel_ports.ephemeral_low()
        for km in (first, second):  # bound only once the job runs: never ports an outgoing connection may get
            assert all(km.get_connection_info()[f"{c}_port"] < low for c in ("shell", "iopub", "stdin", "hb", "control"))
        job_id = job_of(second)
        await wait_job(srv, job_id, "queued")
        assert second.provisioner.waiting_for_gpus
        await second.shutdown_kernel()  # the graceful path JupyterLab takes
        job = await wait_job(srv, job_id, "cancelled", "succeeded", "failed")
        assert job["state"] == "cancelled" and "waiting for GPUs" in job["reason"]
        assert "running" not in [h["state"] for h in job["history"]]
    finally:
        for km in (first, second):
            if km.has_kernel:
                await km.shutdown_kernel(now=True)


async def test_a_kernel_shut_down_while_starting_leaves_no_job_behind(live_server_factory, hive_kernelspec, monkeypatch):
    srv = live_server_factory(launcher="local", cluster_config=ONE_GPU)
    use_server(monkeypatch, srv)
    km = AsyncKernelManager(kernel_name=hive_kernelspec(gpus=1))
    start = asyncio.ensure_future(km.start_kernel())
    while km.provisioner is None or km.provisioner._launched:  # launching: the job's POST is on its way
        await asyncio.sleep(0)
    await km.provisioner.kill()
    try:
        await start
    except RuntimeError as exc:
        assert "withdrawn" in str(exc)
    jobs = (await asyncio.to_thread(srv.request, "GET", "jobs")).json()["jobs"]
    assert len(jobs) == 1
    job = await wait_job(srv, jobs[0]["id"], "cancelled", "failed", "succeeded")
    assert job["state"] == "cancelled"
    if km.has_kernel:
        await km.shutdown_kernel(now=True)


async def test_the_websocket_of_a_queued_kernel_opens_without_a_500(live_server_factory, tmp_path):
    """JupyterLab's path: a notebook's GPU kernel waits for the GPU; its websocket opens at once (the
    browser used to give up while the server held it, and the server logged a 500)."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    specs = tmp_path / "specs"
    args = argparse.Namespace(gpus=1, gpu_type=None, vc=None, image=None, idle_timeout=None, cpus=0,
                              memory_mb=0, display_name=None)
    (specs / "kernels" / "hive-gpu").mkdir(parents=True)
    (specs / "kernels" / "hive-gpu" / "kernel.json").write_text(json.dumps(kernel_json(args)))
    srv = live_server_factory(launcher="local", cluster_config=ONE_GPU, env={"JUPYTER_PATH": str(specs)})

    async def session(path):
        body = {"path": path, "name": path, "type": "notebook", "kernel": {"name": "hive-gpu"}}
        r = await asyncio.to_thread(srv.request, "POST", "/api/sessions", json=body)
        assert r.status_code == 201, r.text
        return r.json()["kernel"]["id"]

    await session("holder.ipynb")
    waiting = await session("waiting.ipynb")
    jobs = (await asyncio.to_thread(srv.request, "GET", "jobs")).json()["jobs"]
    queued = [j for j in jobs if j["state"] == "queued"]
    assert len(queued) == 1 and "waiting.ipynb" in queued[0]["name"]

    url = f"ws://127.0.0.1:{srv.port}/api/kernels/{waiting}/channels?session_id=test"
    t0 = time.monotonic()
    try:
        ws = await websocket_connect(HTTPRequest(url, headers=srv.headers(), request_timeout=20))
    except Exception as exc:
        raise AssertionError(f"the websocket did not open: {exc}\n{srv.log()[-4000:]}") from None
    ws.close()
    assert "kernel_ws_protocol" not in srv.log() and " 500 " not in srv.log()
    r = await asyncio.to_thread(srv.request, "DELETE", f"/api/kernels/{waiting}")
    assert r.status_code == 204
    job = await wait_job(srv, queued[0]["id"], "cancelled", "succeeded", "failed")
    assert job["state"] == "cancelled"
