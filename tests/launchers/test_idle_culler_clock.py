"""The idle culler's clock: idle time counts from when the kernel is up, not from its launch
(a kernel slow to start on a loaded node must not be culled before anyone could use it)."""

import json

from hive_lab_server.kernels.culler import IdleCuller


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def status(state: str, parent_type: str) -> list[bytes]:
    header = {"msg_type": "status"}
    parent = {"msg_type": parent_type} if parent_type else {}
    return [b"<IDS|MSG>", b"", json.dumps(header).encode(), json.dumps(parent).encode(), b"{}",
            json.dumps({"execution_state": state}).encode()]


async def _noop(idle_s):
    return None


def culler(clock, grace=120.0):
    return IdleCuller({"ip": "127.0.0.1", "iopub_port": 1}, 2.0, _noop, startup_grace_s=grace, clock=clock)


def test_a_starting_kernel_is_not_idle_until_it_is_up():
    clock = FakeClock()
    c = culler(clock)
    clock.now += 30  # a slow start: 30 s before the kernel says anything
    assert c.idle_for() == 0.0
    c._on_message(status("starting", ""))
    assert c.idle_for() == 0.0
    clock.now += 1.5
    assert c.idle_for() == 1.5


def test_a_frontend_attaching_and_executing_count_as_activity():
    clock = FakeClock()
    c = culler(clock)
    c._on_message(status("idle", ""))
    clock.now += 10
    assert c.idle_for() == 10
    c._on_message(status("idle", "kernel_info_request"))  # a notebook connected
    assert c.idle_for() == 0.0
    c._on_message(status("busy", "execute_request"))
    clock.now += 50
    assert c.idle_for() == 0.0  # executing is never idle
    c._on_message(status("idle", "execute_request"))
    clock.now += 3
    assert c.idle_for() == 3


def test_a_kernel_that_never_comes_up_counts_after_the_grace():
    clock = FakeClock()
    c = culler(clock, grace=60.0)
    clock.now += 59
    assert c.idle_for() == 0.0
    clock.now += 5
    assert c.idle_for() == 4.0


def test_a_restart_starts_the_count_again():
    clock = FakeClock()
    c = culler(clock)
    c._on_message(status("idle", ""))
    clock.now += 100
    c.reset()
    assert c.idle_for() == 0.0 and not c.up
