"""The whole thing on a REAL Slurm: a real Jupyter server with hive-lab (``launcher=slurm``, the cluster
model read from Slurm's own inventory) driving the throw-away Slurm cluster. Jobs go in through the REST
API; the tests check where Slurm ran them against the placement the core chose."""

from __future__ import annotations

import json
import time

import pytest

from fixtures.live_server import LiveServer
from hive_lab_server.execution.slurm.cli import SlurmCLI
from hive_lab_server.execution.slurm.inventory import cluster_config_from_inventory, read_inventory

pytestmark = pytest.mark.slurm

REPORT = 'echo "task=$HIVE_TASK_NAME node=$SLURMD_NODENAME cvd=$CUDA_VISIBLE_DEVICES slurm_job=$SLURM_JOB_ID"'


@pytest.fixture(scope="module")
def server(slurm_cluster, tmp_path_factory):
    slurm_cluster.cancel_all()
    inv = read_inventory(SlurmCLI(slurm_cluster.slurm_conf))
    cfg = cluster_config_from_inventory(inv, {"a": 8, "b": 8})  # two VCs, two nodes' worth each
    srv = LiveServer(
        tmp_path_factory.mktemp("slurm-srv"), cluster_config=cfg, launcher="slurm",
        users={"ann": {}, "bob": {}}, vc_access={"ann": ["a"], "bob": ["b"]},
        config={"SlurmLauncher": {"slurm_conf": slurm_cluster.slurm_conf, "slurm_poll_s": 0.3, "node_poll_s": 0.5},
                "HiveLabApp": {"nvml_backend": "none", "gpu_sample_interval_s": 0}},
        env={"SLURM_CONF": slurm_cluster.slurm_conf},
    )
    srv.start()
    yield srv
    srv.close()
    slurm_cluster.cancel_all()


@pytest.fixture
def srv(server, slurm_cluster):
    yield server
    for job in server.request("GET", "jobs?state=submitted,queued,scheduled,running").json()["jobs"]:
        server.request("DELETE", f"jobs/{job['id']}")
    slurm_cluster.cancel_all()


def submit(srv: LiveServer, user: str, vc: str, command: str, count: int, gpus: int, **extra) -> dict:
    body = {"name": "t", "vc": vc, "command": command, "tasks": [{"name": "w", "count": count, "gpus": gpus}]}
    body.update(extra)
    r = srv.request("POST", "jobs", user=user, json=body)
    assert r.status_code == 201, r.text
    return r.json()


def logs(srv: LiveServer, job_id: str, task: str) -> str:
    return srv.request("GET", f"jobs/{job_id}/logs?task={task}").json()["data"]


def wait_log(srv: LiveServer, job_id: str, task: str, text: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = logs(srv, job_id, task)
        if text in out:
            return out
        time.sleep(0.2)
    raise AssertionError(f"{text!r} not in the log of {job_id}/{task}: {logs(srv, job_id, task)!r}")


def slurm_names(cluster, state: str = "RUNNING") -> list[str]:
    return sorted(j["name"] for j in json.loads(cluster.run("squeue", "--json"))["jobs"] if j["job_state"] == state)


def test_gang_runs_where_the_core_placed_it(srv, slurm_cluster):
    job = submit(srv, "ann", "a", REPORT, count=2, gpus=2, within="A100-NODE")  # two tasks, one node
    gang = submit(srv, "ann", "a", REPORT, count=2, gpus=3)  # 3+3 GPUs: two nodes
    for j in (job, gang):
        done = srv.wait_for_job(j["id"], "succeeded", "failed", timeout=40)
        assert done["state"] == "succeeded", done
        nodes = set()
        for p in done["placement"]:
            out = logs(srv, j["id"], p["task"])
            assert f"task={p['task']} node={p['node']} cvd={','.join(map(str, p['gpus']))} " in out, (p, out)
            nodes.add(p["node"])
        slurm_ids = {line.split("slurm_job=")[1].split()[0] for p in done["placement"]
                     for line in logs(srv, j["id"], p["task"]).splitlines() if "slurm_job=" in line}
        assert len(nodes) == (1 if j is job else 2)
        # one Slurm job for the gang: het components report the leader's id + offset
        assert len({int(s) for s in slurm_ids}) <= 2 and max(map(int, slurm_ids)) - min(map(int, slurm_ids)) <= 1


def test_guarantee_holds_and_opportunistic_jobs_are_preempted(srv, slurm_cluster):
    sleeper = REPORT + "; sleep 120"
    own = [submit(srv, "ann", "a", sleeper, count=1, gpus=4) for _ in range(2)]  # VC a's 8 GPUs
    opp = [submit(srv, "ann", "a", sleeper, count=1, gpus=4, priority="opportunistic", max_retries=3) for _ in range(2)]
    for j in own + opp:
        srv.wait_for_job(j["id"], "running", timeout=30)
        wait_log(srv, j["id"], "w-0", "task=w-0")
    assert len(slurm_names(slurm_cluster)) == 4  # the whole cluster busy in Slurm
    extra = submit(srv, "ann", "a", sleeper, count=1, gpus=4)  # beyond VC a's guarantee: waits
    assert srv.wait_for_job(extra["id"], "queued")["state"] == "queued"

    theirs = submit(srv, "bob", "b", REPORT + "; sleep 2", count=2, gpus=4)  # VC b's guarantee, now
    done = srv.wait_for_job(theirs["id"], "succeeded", "failed", timeout=60)
    assert done["state"] == "succeeded", done
    for p in done["placement"]:
        assert f"node={p['node']} cvd=0,1,2,3 " in logs(srv, theirs["id"], p["task"])
    for j in opp:
        hist = srv.request("GET", f"jobs/{j['id']}").json()["history"]
        assert any(h["state"] == "queued" and f"preempted by {theirs['id']}" in h["reason"] for h in hist), hist
    for j in own:  # guaranteed jobs of VC a were never touched
        assert srv.request("GET", f"jobs/{j['id']}").json()["state"] == "running"
    assert srv.request("GET", f"jobs/{extra['id']}").json()["state"] == "queued"


def test_node_drained_in_slurm_becomes_bad_in_hive_lab(srv, slurm_cluster):
    def gpus_of(node: str) -> list[dict]:
        return [g for g in srv.request("GET", "cluster").json()["gpus"] if g["node"] == node]

    slurm_cluster.set_node_state("n4", "drain", "bad fan")
    try:
        deadline = time.monotonic() + 20
        while not all(g["drained"] for g in gpus_of("n4")):
            assert time.monotonic() < deadline, gpus_of("n4")
            time.sleep(0.2)
        jobs = [submit(srv, "ann", "a", REPORT, count=1, gpus=4) for _ in range(2)]
        jobs += [submit(srv, "bob", "b", REPORT, count=1, gpus=4) for _ in range(2)]
        placed = []
        for j in jobs:
            got = srv.wait_for_job(j["id"], "succeeded", "queued", timeout=40)
            placed += [p["node"] for p in got["placement"]]
        assert "n4" not in placed
    finally:
        slurm_cluster.set_node_state("n4", "resume")
    deadline = time.monotonic() + 20
    while any(g["drained"] for g in gpus_of("n4")):
        assert time.monotonic() < deadline, gpus_of("n4")
        time.sleep(0.2)


def test_restart_finds_its_slurm_jobs_again(srv, slurm_cluster, tmp_path):
    go = tmp_path / "go"
    job = submit(srv, "ann", "a", REPORT + f"; while [ ! -e {go} ]; do sleep 0.2; done; echo finished", count=2, gpus=4)
    srv.wait_for_job(job["id"], "running", timeout=30)
    wait_log(srv, job["id"], "w-0", "task=w-0")
    before = slurm_names(slurm_cluster)
    srv.kill()  # SIGKILL: no goodbye
    assert slurm_names(slurm_cluster) == before  # Slurm keeps running it
    srv.start()
    deadline = time.monotonic() + 20  # recovery runs as the server starts answering
    while True:
        adopted = srv.request("GET", f"jobs/{job['id']}").json()
        if any("adopted after a server restart" in h["reason"] for h in adopted["history"]):
            break
        assert time.monotonic() < deadline, adopted["history"]
        time.sleep(0.2)
    assert adopted["state"] == "running", adopted
    assert slurm_names(slurm_cluster) == before  # the same Slurm jobs, not new ones
    go.touch()
    done = srv.wait_for_job(job["id"], "succeeded", "failed", timeout=40)
    if done["state"] != "succeeded":
        open("/tmp/hs-fail.log", "w").write(srv.log())
    assert done["state"] == "succeeded", done["reason"]
    assert "finished" in logs(srv, job["id"], "w-1")


async def test_notebook_kernel_runs_inside_a_slurm_grant(srv, slurm_cluster, tmp_path, monkeypatch):
    """A ``hive`` kernel is a Slurm job on the node and GPUs the core chose; Jupyter talks to it over ZMQ
    (the test cluster's nodes are all 127.0.0.1, so the connection file's address is the node's)."""
    import argparse
    import asyncio

    from jupyter_client.manager import AsyncKernelManager

    from hive_lab.cli.kernelspec import kernel_json

    spec = kernel_json(argparse.Namespace(gpus=2, gpu_type=None, vc="a", image=None, idle_timeout=None, cpus=0,
                                          memory_mb=0, display_name=None))
    kdir = tmp_path / "jupyter-path" / "kernels" / "slurm-gpu"
    kdir.mkdir(parents=True)
    (kdir / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter-path"))
    monkeypatch.setenv("HIVE_LAB_URL", srv.url)
    monkeypatch.setenv("HIVE_LAB_TOKEN", srv.tokens["ann"])
    km = AsyncKernelManager(kernel_name="slurm-gpu")
    await km.start_kernel()
    try:
        job_id = km.provisioner.job_id
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=60)
            out: list[str] = []
            code = "import os; print('NODE=' + os.environ['SLURMD_NODENAME'], 'CVD=' + os.environ['CUDA_VISIBLE_DEVICES'])"
            reply = await kc.execute_interactive(
                code, output_hook=lambda m: out.append(m["content"].get("text", "")) if m["msg_type"] == "stream" else None,
                timeout=60)
            assert reply["content"]["status"] == "ok", out
        finally:
            kc.stop_channels()
        job = await asyncio.to_thread(srv.wait_for_job, job_id, "running")
        p = job["placement"][0]
        assert job["kind"] == "kernel" and len(p["gpus"]) == 2
        assert f"NODE={p['node']} CVD={','.join(map(str, p['gpus']))}" in "".join(out)
        # Jupyter talks to the kernel at its node's address (Slurm's NodeAddr), given by the job object
        node_addr = slurm_cluster.run("scontrol", "show", "node", p["node"]).split("NodeAddr=")[1].split()[0]
        assert p["address"] == node_addr
        assert km.provisioner.connection_info["ip"] == p["address"] and km.ip == p["address"]
        assert json.loads(open(km.connection_file).read())["ip"] == p["address"]
        assert f"hive-lab:{job_id}" in slurm_names(slurm_cluster)
    finally:
        await km.shutdown_kernel()
    await asyncio.to_thread(srv.wait_for_job, job_id, "cancelled", "succeeded")
    deadline = time.monotonic() + 20
    while f"hive-lab:{job_id}" in slurm_names(slurm_cluster):  # the Slurm job ends with the kernel
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)


def test_job_preempted_by_slurm_is_requeued_and_placed_again(srv, slurm_cluster, tmp_path):
    """An admin's job in Slurm's higher-priority partition takes the node: Slurm preempts hive-lab's
    job, hive-lab requeues it (one retry) and the core places it again; the second run completes."""
    marker = tmp_path / "runs"
    job = submit(srv, "ann", "a", REPORT + f"; echo run >> {marker}; [ $(wc -l < {marker}) -ge 2 ] || sleep 120",
                 count=1, gpus=4, max_retries=1)
    running = srv.wait_for_job(job["id"], "running", timeout=30)
    wait_log(srv, job["id"], "w-0", "task=w-0")
    node = running["placement"][0]["node"]
    slurm_cluster.run("sbatch", "-p", "high", "-w", node, "--gres=gpu:4", "--wrap", "sleep 2")
    done = srv.wait_for_job(job["id"], "succeeded", "failed", timeout=60)
    assert done["state"] == "succeeded", done
    hist = srv.request("GET", f"jobs/{job['id']}").json()["history"]
    assert any(h["state"] == "queued" and "preempted by Slurm" in h["reason"] and "retry 1/1" in h["reason"]
               for h in hist), hist
    assert marker.read_text().count("run") == 2
