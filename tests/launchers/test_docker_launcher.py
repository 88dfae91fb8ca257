"""DockerLauncher against a real Docker engine and the locally built test image."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from hive_lab_server.execution.launchers.base import LaunchError, LaunchRequest, TaskLaunch
from hive_lab_server.execution.launchers.docker import DockerLauncher
from waiting import wait_until_async

# the first docker test may build the test image (apt + dpkg-deb + docker import, about half a minute on a fresh machine)
pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


def make_request(tmp_path, command, *, job_id=None, image=None, **task_kw) -> LaunchRequest:
    job_id = job_id or f"j-{uuid.uuid4().hex[:8]}"
    work = tmp_path / job_id
    work.mkdir(parents=True, exist_ok=True)
    t = TaskLaunch(
        job_id=job_id,
        task="main-0",
        group="main",
        index=0,
        rank=0,
        node="node-0",
        gpu_indices=task_kw.pop("gpu_indices", ()),
        gpu_uuids=None,
        command=command,
        env=task_kw.pop("env", {"HIVE_JOB_ID": job_id, "HIVE_TASK_NAME": "main-0"}),
        working_dir=str(work),
        log_path=str(work / "main-0.log"),
        image=image,
        user="ann",
        **task_kw,
    )
    return LaunchRequest(job_id=job_id, user="ann", kind="batch", tasks=(t,))


@pytest.fixture
async def launcher_factory(docker_engine, docker_test_image):
    instance = f"test-{uuid.uuid4().hex[:8]}"
    made = []

    def make(**kw):
        kw.setdefault("default_image", docker_test_image)
        kw.setdefault("pull_missing", False)
        launcher = DockerLauncher(docker_engine.base_url, instance=instance, **kw)
        made.append(launcher)
        return launcher

    yield make
    for launcher in made:
        await launcher.close()
    client = docker_engine.client()
    for c in client.containers.list(all=True, filters={"label": f"hive-lab.instance={instance}"}):
        c.remove(force=True)


async def wait_exits(launcher, n=1, timeout=60.0):
    exits = []
    deadline = time.monotonic() + timeout
    while len(exits) < n:
        assert time.monotonic() < deadline, f"no exit reported within {timeout} s"
        exits += await launcher.poll()
        await asyncio.sleep(0.1)
    return exits


CGROUP_PROBE = r"""
echo "gpus=$CUDA_VISIBLE_DEVICES"
echo "job=$HIVE_JOB_ID"
if [ -f /sys/fs/cgroup/cpu.max ]; then
  echo "cpu=$(cat /sys/fs/cgroup/cpu.max)"; echo "mem=$(cat /sys/fs/cgroup/memory.max)"
else
  echo "cpu=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"
  echo "mem=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"
fi
echo "uid=$(id -u) pwd=$(pwd)"
echo to-stderr >&2
"""


async def test_container_sees_its_gpus_and_limits(tmp_path, launcher_factory):
    launcher = launcher_factory()
    req = make_request(
        tmp_path,
        CGROUP_PROBE,
        gpu_indices=(1, 3),
        env={"CUDA_VISIBLE_DEVICES": "1,3", "HIVE_JOB_ID": "probe"},
        cpus=0.5,
        memory_mb=200,
    )
    await launcher.start(req)
    (exit_,) = await wait_exits(launcher)
    assert (exit_.exit_code, exit_.reason) == (0, "")
    out = open(req.tasks[0].log_path).read()
    assert "gpus=1,3" in out and "job=probe" in out
    assert "cpu=50000 100000" in out
    assert f"mem={200 * 1024 * 1024}" in out
    assert f"pwd={req.tasks[0].working_dir}" in out
    assert "to-stderr" in out
    assert await launcher.running() == {req.job_id: {"main-0"}}  # kept until the service stored its exit
    launcher.ack([exit_])
    await wait_until_async(lambda: nothing_left(launcher), "its container to go once its exit was stored")
    await launcher.close()


async def test_cancel_stops_the_container(tmp_path, docker_engine, launcher_factory):
    launcher = launcher_factory()
    req = make_request(tmp_path, "echo started; exec sleep 300")
    await launcher.start(req)
    assert await launcher.running() == {req.job_id: {"main-0"}}
    # what the hardware monitor maps a GPU's processes to jobs by: the job's real, running container
    (cid, job), = launcher.task_containers().items()
    assert job == req.job_id and docker_engine.client().containers.get(cid).status == "running"
    assert launcher.task_pids() == {}  # (its imageless jobs' processes: none here)
    t0 = time.monotonic()
    await launcher.stop(req.job_id, grace_s=1)
    assert time.monotonic() - t0 < 20
    (exit_,) = await wait_exits(launcher)
    assert exit_.reason == "stopped" and exit_.exit_code not in (0, None)
    assert "started" in open(req.tasks[0].log_path).read()
    launcher.ack([exit_])
    await wait_until_async(lambda: nothing_left(launcher), "its containers to go")
    await launcher.close()


async def test_over_memory_task_is_recorded_as_oom(tmp_path, launcher_factory):
    launcher = launcher_factory()
    req = make_request(
        tmp_path, "python3 -c 'b = bytearray(400 * 1024 * 1024); print(len(b))'", memory_mb=64
    )
    await launcher.start(req)
    (exit_,) = await wait_exits(launcher)
    assert exit_.reason == "OOMKilled" and exit_.exit_code == 137


async def test_missing_image_fails_at_once_naming_it(tmp_path, launcher_factory):
    for pull in (False, True):
        launcher = launcher_factory(pull_missing=pull)
        req = make_request(tmp_path, "true", image="hive-lab/no-such-image:0")
        t0 = time.monotonic()
        with pytest.raises(LaunchError, match="hive-lab/no-such-image:0"):
            await launcher.start(req)
        assert time.monotonic() - t0 < 30
        assert await launcher.running() == {}


async def test_mount_outside_allowed_roots_is_refused(tmp_path, launcher_factory):
    allowed = tmp_path / "data"
    allowed.mkdir()
    launcher = launcher_factory(allowed_mount_roots=[str(allowed)])
    req = make_request(tmp_path, "true", data_dir="/etc")
    with pytest.raises(LaunchError) as err:
        await launcher.start(req)
    assert "/etc" in str(err.value) and str(allowed) in str(err.value)
    (allowed / "x.txt").write_text("payload")
    req = make_request(tmp_path, f"cat {allowed}/x.txt; touch {allowed}/w 2>&1 || echo read-only", data_dir=str(allowed))
    await launcher.start(req)
    (exit_,) = await wait_exits(launcher)
    out = open(req.tasks[0].log_path).read()
    assert "payload" in out and "read-only" in out


async def test_network_isolation(tmp_path, launcher_factory):
    launcher = launcher_factory(network_mode="none")
    req = make_request(tmp_path, "ls /sys/class/net")
    await launcher.start(req)
    await wait_exits(launcher)
    assert open(req.tasks[0].log_path).read().split() == ["lo"]


async def test_new_launcher_adopts_running_and_exited_containers(tmp_path, launcher_factory):
    first = launcher_factory()
    counting = make_request(tmp_path, "for i in 1 2 3 4 5 6 7 8; do echo line-$i; sleep 0.3; done; exit 3")
    quick = make_request(tmp_path, "sleep 0.6; echo quick; exit 4")  # ends while nobody watches
    untaken = make_request(tmp_path, "echo fast; exit 6")  # ends while watched, but never polled
    await first.start(counting)
    await first.start(quick)
    await first.start(untaken)
    await asyncio.sleep(0.3)
    await first.close()  # the server goes away; containers keep running / end unwatched
    await asyncio.sleep(1.0)

    second = launcher_factory()
    found = await second.running()
    assert found == {j.job_id: {"main-0"} for j in (counting, quick, untaken)}
    for job in (counting, quick, untaken):
        await second.adopt(job)
    exits = {e.job_id: e for e in await wait_exits(second, 3)}
    assert exits[counting.job_id].exit_code == 3
    assert exits[quick.job_id].exit_code == 4
    assert exits[untaken.job_id].exit_code == 6
    lines = open(counting.tasks[0].log_path).read().split()
    assert lines == [f"line-{i}" for i in range(1, 9)]  # each line once, in order
    assert open(quick.tasks[0].log_path).read() == "quick\n"
    second.ack(list(exits.values()))
    await wait_until_async(lambda: nothing_left(second), "its containers to go")
    await second.close()


async def test_reconnects_after_docker_daemon_restart(tmp_path, docker_engine, launcher_factory):
    if not docker_engine.started:
        pytest.skip("the engine was not started by this session; it cannot be restarted here")
    launcher = launcher_factory()
    req = make_request(tmp_path, "echo before; sleep 6; echo after; exit 5")
    await launcher.start(req)
    await asyncio.sleep(0.5)
    await asyncio.get_running_loop().run_in_executor(None, docker_engine.restart)
    (exit_,) = await wait_exits(launcher, timeout=60)
    assert exit_.exit_code == 5
    assert open(req.tasks[0].log_path).read().split() == ["before", "after"]
    await launcher.close()


async def nothing_left(launcher) -> bool:
    """No container of the launcher's is left (removal follows ``ack`` off the event loop)."""
    return await launcher.running() == {}
