"""The slurm launcher and Slurm inventory against a REAL Slurm 22.05 cluster (tests/fixtures/slurm_cluster.py):
4 nodes x 4 fake GPUs with per-index GRES, two racks. Tasks print where Slurm ran them; the tests check
that against the placement hive-lab asked for."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import pathlib
import time

import pytest

from hive_lab_server.execution.launchers.base import LaunchRequest, TaskLaunch
from hive_lab_server.execution.launchers.slurm import SlurmLauncher
from hive_lab_server.execution.slurm.cli import SlurmCLI
from hive_lab_server.execution.slurm.inventory import cluster_config_from_inventory, read_inventory

pytestmark = pytest.mark.slurm

REPORT = 'echo "node=$SLURMD_NODENAME cvd=$CUDA_VISIBLE_DEVICES idx=$HIVE_GPU_INDICES rank=${RANK:-}"'


@pytest.fixture
def cluster(slurm_cluster):
    slurm_cluster.cancel_all()
    yield slurm_cluster
    slurm_cluster.cancel_all()


def task(root: pathlib.Path, job: str, name: str, rank: int, node: str, gpus, command: str = REPORT) -> TaskLaunch:
    group, index = name.rsplit("-", 1)
    return TaskLaunch(job_id=job, task=name, group=group, index=int(index), rank=rank, node=node,
                      gpu_indices=tuple(gpus), gpu_uuids=None, command=command,
                      env={"HIVE_JOB_ID": job, "RANK": str(rank), "CUDA_VISIBLE_DEVICES": "not-from-slurm"},
                      working_dir=str(root), log_path=str(root / job / "logs" / f"{name}.log"))


def launcher(cluster, root: pathlib.Path, **kw) -> SlurmLauncher:
    kw.setdefault("slurm_poll_s", 0.2)
    return SlurmLauncher(slurm_conf=cluster.slurm_conf, jobs_root=str(root), sync_node_health=False, **kw)


async def collect(l: SlurmLauncher, n: int, timeout: float = 30) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += await l.poll()
        await asyncio.sleep(0.1)
    assert len(out) >= n, f"only {out} after {timeout}s"
    return out


def log_of(root: pathlib.Path, job: str, task_name: str) -> str:
    return (root / job / "logs" / f"{task_name}.log").read_text()


def slurm_jobs(cluster) -> list[dict]:
    return json.loads(cluster.run("squeue", "--json"))["jobs"]


# --- inventory -----------------------------------------------------------------------------------


def test_inventory_becomes_the_core_cell_tree(cluster):
    from hive_scheduler import load_cluster_config

    inv = read_inventory(SlurmCLI(cluster.slurm_conf))
    assert sorted(inv.nodes) == ["n1", "n2", "n3", "n4"]
    assert inv.racks == {"rack1": ["n1", "n2"], "rack2": ["n3", "n4"]}
    n1 = inv.nodes["n1"]
    assert [(g.index, g.model, g.gres_type) for g in n1.gpus] == [(i, "a100", f"a100_g{i}") for i in range(4)]
    assert (n1.cpus, n1.memory_mb, n1.per_index, n1.bad) == (8, 16000, True, False)

    cfg = cluster_config_from_inventory(inv, {"research": 6, "course": {"cells": {"node": 1}}})
    core = load_cluster_config(cfg)
    assert core.gpu_count() == 16
    assert sorted(core.nodes) == ["n1", "n2", "n3", "n4"]
    assert core.nodes["n3"].cpus == 8 and core.nodes["n3"].memory_mb == 16000
    assert [c["cellAddress"] for c in cfg["physicalCluster"]["physicalCells"]] == ["rack1", "rack2"]
    assert core.vc_gpus("research") == 6 and core.vc_gpus("course") == 4


def test_drained_and_down_nodes_are_bad(cluster):
    cluster.set_node_state("n2", "drain", "fan broken")
    try:
        inv = read_inventory(SlurmCLI(cluster.slurm_conf))
        assert list(inv.bad_nodes) == ["n2"]
        assert "DRAIN" in inv.bad_nodes["n2"] and "fan broken" in inv.bad_nodes["n2"]
    finally:
        cluster.set_node_state("n2", "resume")
    assert read_inventory(SlurmCLI(cluster.slurm_conf)).bad_nodes == {}


# --- placement -----------------------------------------------------------------------------------


async def test_gang_is_one_slurm_job_on_the_placed_nodes_and_gpus(cluster, tmp_path):
    l = launcher(cluster, tmp_path)
    req = LaunchRequest("gang1", "root", "batch", (
        task(tmp_path, "gang1", "worker-0", 0, "n2", [1, 3], REPORT + "; sleep 2"),
        task(tmp_path, "gang1", "worker-1", 1, "n3", [0, 2], REPORT + "; sleep 2"),
    ))
    await l.start(req)
    mine = [j for j in slurm_jobs(cluster) if j["name"] == "hive-lab:gang1"]
    assert len({j["het_job_id"] for j in mine}) == 1 and len(mine) == 2  # one het job, one component per node
    assert await l.running() == {"gang1": {"worker-0", "worker-1"}}
    exits = await collect(l, 2)
    assert sorted((e.task, e.exit_code) for e in exits) == [("worker-0", 0), ("worker-1", 0)]
    assert "node=n2 cvd=1,3 idx=1,3 rank=0" in log_of(tmp_path, "gang1", "worker-0")
    assert "node=n3 cvd=0,2 idx=0,2 rank=1" in log_of(tmp_path, "gang1", "worker-1")


async def test_tasks_sharing_a_node_get_their_own_gpus(cluster, tmp_path):
    l = launcher(cluster, tmp_path)
    await l.start(LaunchRequest("share", "root", "batch", (
        task(tmp_path, "share", "a-0", 0, "n4", [0]),
        task(tmp_path, "share", "a-1", 1, "n4", [3], REPORT + "; exit 7"),
        task(tmp_path, "share", "cpu-0", 2, "n4", []),
    )))
    exits = {e.task: e for e in await collect(l, 3)}
    assert exits["a-0"].exit_code == 0 and exits["a-1"].exit_code == 7 and exits["cpu-0"].exit_code == 0
    assert "node=n4 cvd=0 idx=0" in log_of(tmp_path, "share", "a-0")
    assert "node=n4 cvd=3 idx=3" in log_of(tmp_path, "share", "a-1")
    assert "node=n4 cvd= idx=" in log_of(tmp_path, "share", "cpu-0")


async def test_count_gres_mismatch_never_runs_on_the_wrong_gpus(cluster, tmp_path):
    """Without per-index GRES (gres_mode=count) Slurm picks the lowest free GPUs; the wrapper catches it."""
    marker = tmp_path / "ran"
    l = launcher(cluster, tmp_path, gres_mode="count")
    await l.start(LaunchRequest("wrong", "root", "batch", (
        task(tmp_path, "wrong", "main-0", 0, "n1", [2, 3], f"touch {marker}"),)))
    [e] = await collect(l, 1)
    assert e.exit_code is None  # lost -> the service requeues it (when retries remain)
    assert "Slurm gave main-0 n1 GPU 0,1, hive-lab placed it on n1 GPU 2,3" in e.reason
    assert not marker.exists()
    assert "the task was not run" in log_of(tmp_path, "wrong", "main-0")


async def test_job_slurm_cannot_start_where_placed_is_given_back(cluster, tmp_path):
    """A foreign Slurm job holds the GPU hive-lab placed on: after start_timeout_s it is cancelled, reported lost."""
    foreign = cluster.run("sbatch", "--parsable", "-w", "n1", "--gres=gpu:a100_g1:1", "--wrap", "sleep 60").strip()
    deadline = time.monotonic() + 20
    while not any(str(j["job_id"]) == foreign and j["job_state"] == "RUNNING" for j in slurm_jobs(cluster)):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)
    l = launcher(cluster, tmp_path, start_timeout_s=2)
    await l.start(LaunchRequest("blocked", "root", "batch", (task(tmp_path, "blocked", "main-0", 0, "n1", [1]),)))
    [e] = await collect(l, 1)
    assert e.exit_code is None and "did not start" in e.reason
    assert "(Resources)" in e.reason or "(Priority)" in e.reason  # Slurm's pending reason is passed on
    assert not [j for j in slurm_jobs(cluster) if j["name"] == "hive-lab:blocked" and j["job_state"] == "PENDING"]
    cluster.run("scancel", foreign)


# --- stop, preemption, recovery -------------------------------------------------------------------


async def test_stop_sends_term_then_reports_stopped(cluster, tmp_path):
    l = launcher(cluster, tmp_path)
    cmd = 'trap "echo got-term; exit 143" TERM; echo started; sleep 60 & wait'
    await l.start(LaunchRequest("long", "root", "batch", (task(tmp_path, "long", "main-0", 0, "n2", [0], cmd),)))
    deadline = time.monotonic() + 20
    while "started" not in (log_of(tmp_path, "long", "main-0") if (tmp_path / "long/logs/main-0.log").exists() else ""):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.1)
    await l.stop("long", grace_s=5)
    [e] = await collect(l, 1)
    assert e.exit_code == 143
    assert "got-term" in log_of(tmp_path, "long", "main-0")
    assert await l.running() == {}


async def test_slurm_preemption_reports_the_task_lost(cluster, tmp_path):
    """An admin's job in the higher-priority partition takes the node: Slurm preempts ours."""
    l = launcher(cluster, tmp_path)
    await l.start(LaunchRequest("opp", "root", "batch", (task(tmp_path, "opp", "main-0", 0, "n3", [0, 1, 2, 3], "sleep 60"),)))
    deadline = time.monotonic() + 20
    while await l.running() != {"opp": {"main-0"}} or not any(
            j["name"] == "hive-lab:opp" and j["job_state"] == "RUNNING" for j in slurm_jobs(cluster)):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)
    cluster.run("sbatch", "-p", "high", "-w", "n3", "--gres=gpu:4", "--wrap", "sleep 1")
    [e] = await collect(l, 1, timeout=40)
    assert e.exit_code is None and e.reason == "preempted by Slurm"


async def test_a_job_submitted_while_slurm_is_read_is_not_taken_for_lost(cluster, tmp_path):
    """sbatch can run while a poll awaits squeue: that answer does not know the new job, which must not be
    reported lost ("Slurm no longer knows the job") a few ms after it started."""
    l = launcher(cluster, tmp_path, slurm_poll_s=0)
    await l.start(LaunchRequest("first", "root", "batch", (task(tmp_path, "first", "main-0", 0, "n1", [0], "sleep 5"),)))
    read_slurm = l._raw_jobs

    async def answer_then_sbatch():
        answer = await read_slurm()
        if "second" not in l._jobs:  # the submit lands while this answer is on its way back
            await l.start(LaunchRequest("second", "root", "batch",
                                        (task(tmp_path, "second", "main-0", 0, "n2", [0], "sleep 5"),)))
        return answer

    l._raw_jobs = answer_then_sbatch
    assert await l.poll() == []
    l._raw_jobs = read_slurm
    assert await l.running() == {"first": {"main-0"}, "second": {"main-0"}}
    await l.stop("first", 0)
    await l.stop("second", 0)
    exits = await collect(l, 2)
    assert sorted(e.job_id for e in exits) == ["first", "second"]
    assert not any("no longer knows" in e.reason for e in exits), exits


async def test_a_new_launcher_finds_and_adopts_running_jobs(cluster, tmp_path):
    first = launcher(cluster, tmp_path)
    tasks = (task(tmp_path, "keep", "w-0", 0, "n1", [0], "sleep 3; exit 5"),
             task(tmp_path, "keep", "w-1", 1, "n4", [1], "sleep 3"))
    await first.start(LaunchRequest("keep", "root", "batch", tasks))
    await first.close()
    other = launcher(cluster, tmp_path.parent / "another-server")  # another hive-lab instance sees nothing
    assert await other.running() == {}
    second = launcher(cluster, tmp_path)  # same server after a restart
    assert await second.running() == {"keep": {"w-0", "w-1"}}
    await second.adopt(LaunchRequest("keep", "root", "batch", tasks))
    exits = {e.task: e.exit_code for e in await collect(second, 2)}
    assert exits == {"w-0": 5, "w-1": 0}
    assert await second.running() == {}


async def test_cli_can_submit_as_the_job_owner(cluster):
    """``submit_as_user`` (server running as root): ``sbatch --uid=<owner>``; the task runs as the owner."""
    root = cluster.root / f"uid-{time.monotonic_ns()}"  # the job runs as nobody: a path it can reach
    for d in (root, root / "own", root / "own" / "logs", root / "own" / "logs" / ".slurm"):
        d.mkdir()
        d.chmod(0o777)
    l = launcher(cluster, root, submit_as_user=True)
    await l.start(LaunchRequest("own", "nobody", "batch",
                                (task(root, "own", "main-0", 0, "n1", [3], REPORT + '; echo "user=$(id -un)"'),)))
    [e] = await collect(l, 1)
    out = log_of(root, "own", "main-0")
    assert e.exit_code == 0, out
    assert "node=n1 cvd=3 idx=3" in out and "user=nobody" in out


async def test_a_planted_path_and_ld_preload_never_run_as_root(cluster):
    """Issue 22 on Slurm: the job's env names the owner's own tools first on PATH and their library in
    LD_PRELOAD. sbatch (run by the root server) never sees that env; the batch script applies it as the
    owner and calls its own tools by absolute path. Nothing runs them as root; the job (as nobody) does."""
    import pwd
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "isolation"))
    from planted import plant

    root = cluster.root / f"plant-{time.monotonic_ns()}"
    for d in (root, root / "own", root / "own" / "logs", root / "own" / "logs" / ".slurm"):
        d.mkdir()
        d.chmod(0o777)
    planted = plant(root / "planted")
    l = launcher(cluster, root, submit_as_user=True)
    t = task(root, "own", "main-0", 0, "n1", [1], "id -u; sh -c 'echo inner'")
    t = dataclasses.replace(t, env={**t.env, **planted.env})
    await l.start(LaunchRequest("own", "nobody", "batch", (t,)))
    [e] = await collect(l, 1)
    out = log_of(root, "own", "main-0")
    assert e.exit_code == 0, out
    assert planted.root_lines() == [], planted.lines()
    assert planted.ran_as(pwd.getpwnam("nobody").pw_uid), (planted.lines(), out)


async def test_staged_files_of_a_job_run_as_its_owner_are_private_and_theirs(cluster):
    """With ``submit_as_user`` the job's dirs (0700) and staged files (0600) belong to the owner, who
    alone can read them; the job, running as that user, reads its staged secret."""
    import dataclasses
    import pwd

    from hive_lab_server.execution.staging import private_dir, write_private

    root = cluster.root / f"stage-{time.monotonic_ns()}"
    root.mkdir()
    root.chmod(0o755)
    l = launcher(cluster, root, submit_as_user=True)
    owner = l.task_owner("nobody")
    assert owner == (pwd.getpwnam("nobody").pw_uid, pwd.getpwnam("nobody").pw_gid)
    wd = root / "own"
    private_dir(wd, owner)
    private_dir(wd / "logs", owner, stop_at=wd)
    private_dir(wd / ".hive-kernel", owner, stop_at=wd)
    write_private(wd / ".hive-kernel" / "token", "s3cret-token", owner)
    for path, mode in ((wd, 0o700), (wd / "logs", 0o700), (wd / ".hive-kernel", 0o700),
                       (wd / ".hive-kernel" / "token", 0o600)):
        st = path.stat()
        assert (st.st_mode & 0o777, st.st_uid) == (mode, owner[0]), path
    t = dataclasses.replace(task(root, "own", "main-0", 0, "n1", [0], 'echo "user=$(id -un) token=$(cat .hive-kernel/token)"'),
                            working_dir=str(wd))
    await l.start(LaunchRequest("own", "nobody", "batch", (t,)))
    [e] = await collect(l, 1)
    out = log_of(root, "own", "main-0")
    assert e.exit_code == 0, out
    assert "user=nobody token=s3cret-token" in out
    with pytest.raises(Exception, match="no Unix account"):
        l.task_owner("no-such-unix-user-here")
    assert launcher(cluster, root).task_owner("nobody") is None  # runs as the server's user: nothing to hand over


# --- slurmrestd ----------------------------------------------------------------------------------


@pytest.mark.skipif(not os.path.exists("/usr/sbin/slurmrestd"), reason="slurmrestd not installed (Debian: slurmrestd)")
async def test_rest_submits_as_the_user_with_jwt(cluster, tmp_path):
    import glob

    if not glob.glob("/usr/lib/*/slurm-wlm/auth_jwt.so"):
        pytest.skip("Slurm's JWT plugin is not installed (Debian: slurm-wlm-jwt-plugin)")
    sock = cluster.start_rest()
    root = cluster.root / f"rest-{time.monotonic_ns()}"  # the job runs as nobody: a path it can reach
    for d in (root, root / "rest", root / "rest" / "logs", root / "rest" / "logs" / ".slurm"):
        d.mkdir()
        d.chmod(0o777)
    tmp_path = root
    l = launcher(cluster, root, rest_url=f"unix://{sock}", jwt_key_file=cluster.jwt_key, rest_user="root")
    cmd = REPORT + '; echo "user=$(id -un)"'
    gang = (task(root, "rest", "w-0", 0, "n2", [2], cmd), task(root, "rest", "w-1", 1, "n3", [1, 3], cmd))
    await l.start(LaunchRequest("rest", "nobody", "batch", gang))  # a het job over REST, as user nobody
    exits = {e.task: e.exit_code for e in await collect(l, 2)}
    out0, out1 = log_of(root, "rest", "w-0"), log_of(root, "rest", "w-1")
    assert exits == {"w-0": 0, "w-1": 0}, out0 + out1
    assert "node=n2 cvd=2 idx=2" in out0 and "user=nobody" in out0
    assert "node=n3 cvd=1,3 idx=1,3" in out1 and "user=nobody" in out1
    await l.close()
