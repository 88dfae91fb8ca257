"""``HiveLabApp.kernel_limits``: the caps every GPU kernel of a VC gets whatever its kernelspec says.

The time limit a kernel asks for is capped at admission; the service's own idle watch follows a kernel's
IOPub over a real ZMQ socket (a PUB socket here publishes what a kernel publishes) on an injected clock.
(tests/server/test_course_service.py runs both through a real server on the course ``course init`` writes.)
"""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import replace

import pytest

from hive_lab_server.jobs.lifecycle import machine as m
from hive_lab_server.jobs.lifecycle.active import ActiveJob, request_from
from hive_lab_server.jobs.lifecycle.kernel_caps import KernelCapsError, capped_time_limit, parse_kernel_limits
from hive_lab_server.jobs.lifecycle.kernel_idle import KernelIdleWatch
from hive_lab_server.wire.launch_spec import LaunchSpec
from hive_lab_server.wire.states import JobState
from hive_lab_server.kernels.job import CONNECTION_FILE
from hive_scheduler.types import TaskPlacement

CAPS = parse_kernel_limits({"cs-101": {"max_idle_s": 1800, "max_time_limit_s": 14400}}, ["cs-101", "research"])


@pytest.mark.parametrize("config, words", [
    ({"nlp": {"max_idle_s": 60}}, "there is no VC 'nlp'"),
    ({"cs-101": {"idle": 60}}, "give a dict with max_idle_s and/or max_time_limit_s"),
    ({"cs-101": {"max_idle_s": 0}}, "max_idle_s: seconds > 0"),
    ({"cs-101": {"max_time_limit_s": True}}, "max_time_limit_s: seconds > 0"),
])
def test_a_malformed_cap_names_the_entry_and_what_to_change(config, words):
    with pytest.raises(KernelCapsError) as exc:
        parse_kernel_limits(config, ["cs-101"])
    assert words in exc.value.message


@pytest.mark.parametrize("asked, kind, gpus, vc, want", [
    (None, "kernel", 1, "cs-101", 14400),     # the kernelspec asks for no limit: the cap
    (86400, "kernel", 1, "cs-101", 14400),    # a longer one: the cap
    (600, "kernel", 1, "cs-101", 600),        # a shorter one stays
    (None, "kernel", 0.25, "cs-101", 14400),  # a share of a GPU too
    (None, "kernel", 0, "cs-101", None),      # a kernel without GPUs holds nothing
    (None, "batch", 1, "cs-101", None),       # batch jobs: vc_time_limits decides
    (None, "kernel", 1, "research", None),    # a VC without a cap
])
def test_a_gpu_kernel_gets_the_cap_as_its_time_limit(asked, kind, gpus, vc, want):
    assert capped_time_limit(asked, kind, gpus, vc, CAPS) == want


def kernel_job(port: int, started_at: float, vc: str = "cs-101") -> ActiveJob:
    """A running GPU kernel's job, as admission and the launch make it."""
    spec = LaunchSpec.of({"kind": "kernel", "tasks": [{"name": "kernel", "count": 1, "gpus": 1}], "time_limit_s": None,
                          "files": {CONNECTION_FILE: json.dumps({"ip": "127.0.0.1", "transport": "tcp",
                                                                 "iopub_port": port})}})
    lc = replace(m.Job("j-1", policy=m.completion_policy(spec.tasks)), state=JobState.RUNNING, attempt=1,
                 started_at=started_at)
    return ActiveJob(id="j-1", seq=1, user="ann", vc=vc, spec=spec, working_dir="/nonexistent", output_dir="/nonexistent",
                     request=request_from("j-1", vc, "ann", spec.tasks, 0, None, started_at, kind="kernel"), lc=lc,
                     placement=[TaskPlacement("kernel", "kernel", 0, 0, "node-0", (0,))])


def status(state: str, parent: str) -> list[bytes]:
    return [b"kernel.x.status", b"<IDS|MSG>", b"", json.dumps({"msg_type": "status"}).encode(),
            json.dumps({"msg_type": parent} if parent else {}).encode(), b"{}",
            json.dumps({"execution_state": state}).encode()]


class Clock:
    def __init__(self) -> None:
        self.t = 5000.0

    def __call__(self) -> float:
        return self.t


async def test_the_service_culls_a_kernel_idle_for_the_cap_and_never_one_that_executes():
    import zmq
    import zmq.asyncio

    pub = zmq.asyncio.Context.instance().socket(zmq.PUB)
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    clock = Clock()
    job = kernel_job(port, started_at=clock.t)
    busy = {"gpu": False}
    watch = KernelIdleWatch(CAPS, clock, lambda node: "127.0.0.1", gpu_busy=lambda j: busy["gpu"])
    try:
        watch.sync([job])
        (culler,) = [c for _, c in watch.watched.values()]

        async def heard():  # the SUB socket joins in its own time: publish until it has heard the kernel
            for _ in range(500):
                await pub.send_multipart(status("idle", ""))
                if culler.up:
                    return True
                await asyncio.sleep(0.01)
            return False

        assert await heard()
        await pub.send_multipart(status("busy", "execute_request"))
        await _until(lambda: culler.executing)
        clock.t += 5000
        assert watch.idle({job.id: job}) == []  # a cell running for hours is never idle
        await pub.send_multipart(status("idle", "execute_request"))
        await _until(lambda: not culler.executing)
        clock.t += 1799
        assert watch.idle({job.id: job}) == []
        busy["gpu"] = True  # its GPU busy (a training thread): activity
        clock.t += 2
        assert watch.idle({job.id: job}) == []
        busy["gpu"] = False
        clock.t += 1800
        (culled,) = watch.idle({job.id: job})
        assert culled[0] == job.id and "VC cs-101 culls idle GPU kernels after 30 min" in culled[1]
        # it ended: nothing is watched any more
        watch.sync([])
        assert watch.watched == {}
    finally:
        watch.close()
        pub.close(linger=0)


async def test_a_kernel_the_service_cannot_hear_counts_as_idle_after_the_grace():
    clock = Clock()
    with socket.socket() as s:  # a port nothing publishes on
        s.bind(("127.0.0.1", 0))
        silent = s.getsockname()[1]
    for port in (silent, 80, 0):  # a kernel that never says anything, a privileged port, none at all
        job = kernel_job(port, started_at=clock.t)
        watch = KernelIdleWatch(CAPS, clock, lambda node: "127.0.0.1", startup_grace_s=120)
        try:
            watch.sync([job])
            start = clock.t
            clock.t = start + 1800 + 119
            assert watch.idle({job.id: job}) == []
            clock.t = start + 1800 + 121
            assert [j for j, _ in watch.idle({job.id: job})] == [job.id]
        finally:
            watch.close()


def test_a_vc_without_an_idle_cap_is_not_watched():
    clock = Clock()
    watch = KernelIdleWatch(CAPS, clock, lambda node: "127.0.0.1")
    watch.sync([kernel_job(5555, clock.t, vc="research")])
    assert watch.watched == {}


async def _until(condition) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the culler never saw the kernel's message")

