"""A crash at any step of a Docker launch, or between an exit and its storing, never runs a task unknown
to the next server nor loses a finished one (issue 24), against the real Docker engine.

Docker is the launch record: a container exists (labelled with its job and task) from ``create`` on, so a
restarted launcher's ``running()`` lists every task that may have run, started or not; recovery then
adopts the whole gang or stops what it found and queues the job again. An ended container stays until
the service stored its exit (``ack``): a crash in between finds the exit again instead of a lost task.
"""

from __future__ import annotations

import uuid

import pytest
from docker.models.containers import Container, ContainerCollection

from hive_lab_server.execution.launchers.base import LaunchRequest, TaskLaunch
from hive_lab_server.execution.launchers.docker import DockerLauncher
from waiting import wait_until_async

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]
TASKS = 2
STEPS = [f"create {i}" for i in range(TASKS)] + [f"start {i}" for i in range(TASKS)]


class Crash(BaseException):
    """The server died here."""


@pytest.fixture
def engine(docker_engine, docker_test_image):
    instance = f"crash-{uuid.uuid4().hex[:8]}"
    made: list[DockerLauncher] = []

    def launcher() -> DockerLauncher:
        made.append(DockerLauncher(docker_engine.base_url, instance=instance, default_image=docker_test_image,
                                   pull_missing=False))
        return made[-1]

    yield launcher, docker_engine.client(), instance
    for c in docker_engine.client().containers.list(all=True, filters={"label": f"hive-lab.instance={instance}"}):
        c.remove(force=True)


def gang(tmp_path, command: str) -> LaunchRequest:
    job_id = f"j-{uuid.uuid4().hex[:8]}"
    (tmp_path / job_id).mkdir()
    tasks = tuple(
        TaskLaunch(job_id=job_id, task=f"w-{i}", group="w", index=i, rank=i, node="node-0", gpu_indices=(),
                   gpu_uuids=None, command=command, env={"HIVE_JOB_ID": job_id}, working_dir=str(tmp_path / job_id),
                   log_path=str(tmp_path / job_id / f"w-{i}.log"), user="ann")
        for i in range(TASKS))
    return LaunchRequest(job_id=job_id, user="ann", kind="batch", tasks=tasks)


def started(client, instance: str, job_id: str) -> dict[str, bool]:
    """task -> whether its container ever started, as Docker says."""
    out = {}
    for c in client.containers.list(all=True, filters={"label": [f"hive-lab.instance={instance}",
                                                                 f"hive-lab.job={job_id}"]}):
        out[c.labels["hive-lab.task"]] = not c.attrs["State"]["StartedAt"].startswith("0001-")
    return out


@pytest.mark.parametrize("crash_at", range(len(STEPS)), ids=STEPS)
async def test_a_crash_at_any_step_of_a_launch_leaves_nothing_unknown(tmp_path, engine, monkeypatch, crash_at):
    make, client, instance = engine
    steps = {"n": 0}

    def step(real):
        def wrapped(*args, **kwargs):
            if steps["n"] == crash_at:
                raise Crash(STEPS[crash_at])
            steps["n"] += 1
            return real(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(ContainerCollection, "create", step(ContainerCollection.create))
    monkeypatch.setattr(Container, "start", step(Container.start))
    request = gang(tmp_path, "sleep 300")
    first = make()
    with pytest.raises(Crash):
        await first.start(request)
    monkeypatch.undo()
    created = min(crash_at, TASKS)
    ran = max(0, crash_at - TASKS)
    assert started(client, instance, request.job_id) == {f"w-{i}": i < ran for i in range(created)}

    restarted = make()  # the next server: every container that exists is known, started or not
    assert (await restarted.running()).get(request.job_id, set()) == {f"w-{i}" for i in range(created)}
    # a part of a gang is never adopted as the whole: recovery stops what it found and queues the job again
    await restarted.adopt(request)
    await restarted.stop(request.job_id, grace_s=0)
    exits = await _exits(restarted, TASKS)
    assert sorted(e.task for e in exits) == [f"w-{i}" for i in range(TASKS)]
    restarted.ack(exits)
    await wait_until_async(lambda: nothing_left(restarted), "its containers to go")
    assert started(client, instance, request.job_id) == {}


async def _exits(launcher: DockerLauncher, n: int) -> list:
    out: list = []

    async def more():
        out.extend(await launcher.poll())
        return len(out) >= n

    await wait_until_async(more, f"{n} exits")
    return out


async def test_an_exit_not_yet_stored_is_found_again_after_a_crash(tmp_path, engine):
    make, client, instance = engine
    request = gang(tmp_path, 'echo "done $HIVE_JOB_ID"; exit 7')
    first = make()
    await first.start(request)
    exits = await _exits(first, TASKS)
    assert {e.exit_code for e in exits} == {7}
    await first.poll()  # the server dies before the store took the exits: no ack
    await first.close()

    restarted = make()
    assert await restarted.running() == {request.job_id: {"w-0", "w-1"}}  # not "lost": still there, ended
    await restarted.adopt(request)
    again = await _exits(restarted, TASKS)
    assert sorted((e.task, e.exit_code) for e in again) == [("w-0", 7), ("w-1", 7)]
    assert open(request.tasks[0].log_path).read() == f"done {request.job_id}\n"  # each line once
    restarted.ack(again)
    await wait_until_async(lambda: nothing_left(restarted), "its containers to go")
    assert started(client, instance, request.job_id) == {}


async def nothing_left(launcher) -> bool:
    """No container of the launcher's is left (removal follows ``ack`` off the event loop)."""
    return await launcher.running() == {}
