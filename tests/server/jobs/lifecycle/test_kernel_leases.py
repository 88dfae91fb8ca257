"""The service ends a kernel job whose Jupyter server stopped sending heartbeats (lifecycle.kernel_leases),
reading the files in the owner's job dir the safe way: no link followed, no FIFO waited on."""

from __future__ import annotations

import os
import types

from hive_lab_server.jobs.lifecycle.kernel_leases import lapsed, unreachable_kernels
from hive_lab_server.wire.launch_spec import LaunchSpec
from hive_lab_server.wire.states import JobState

NOW = 1_800_000_000.0


def kernel_dir(tmp_path, alive: float | str | None, lease: str | None = "60"):
    wd = tmp_path / "j-000001"
    (wd / ".hive-kernel").mkdir(parents=True)
    if alive is not None:
        (wd / ".hive-kernel" / "alive").write_text(str(alive))
    if lease is not None:
        (wd / ".hive-kernel" / "lease").write_text(lease)
    return wd


def test_a_heartbeat_older_than_the_lease_says_why(tmp_path):
    wd = kernel_dir(tmp_path, int(NOW - 75))
    why = lapsed(str(wd), NOW)
    assert why is not None and "no heartbeat for 75 s" in why and "lease 60 s" in why and "nobody can reach" in why
    assert lapsed(str(wd), NOW - 20) is None  # 55 s old: within the lease


def test_no_heartbeat_or_no_lease_or_garbage_is_no_verdict(tmp_path):
    assert lapsed(str(kernel_dir(tmp_path / "a", None)), NOW) is None  # the provisioner sees no job dir
    assert lapsed(str(kernel_dir(tmp_path / "b", NOW - 500, lease=None)), NOW) is None
    assert lapsed(str(kernel_dir(tmp_path / "c", "yesterday")), NOW) is None
    assert lapsed(str(kernel_dir(tmp_path / "d", "nan")), NOW) is None


def test_a_planted_link_or_fifo_is_not_read(tmp_path):
    """Root reads these files in the job's dir: a link out of it is not followed, a FIFO does not hang."""
    old = tmp_path / "elsewhere"
    old.write_text(str(int(NOW - 500)))
    wd = kernel_dir(tmp_path, None)
    os.symlink(old, wd / ".hive-kernel" / "alive")
    assert lapsed(str(wd), NOW) is None
    os.unlink(wd / ".hive-kernel" / "alive")
    os.mkfifo(wd / ".hive-kernel" / "alive")
    assert lapsed(str(wd), NOW) is None


def test_only_unfinished_kernel_jobs_are_ended(tmp_path):
    def job(name, kind, state):
        wd = kernel_dir(tmp_path / name, int(NOW - 500))
        return types.SimpleNamespace(id=name, spec=LaunchSpec.of({"kind": kind}), working_dir=str(wd),
                                     lc=types.SimpleNamespace(state=state))

    jobs = [job("queued-kernel", "kernel", JobState.QUEUED), job("running-kernel", "kernel", JobState.RUNNING),
            job("batch", "batch", JobState.RUNNING), job("ended-kernel", "kernel", JobState.CANCELLED)]
    assert [job_id for job_id, _ in unreachable_kernels(jobs, NOW)] == ["queued-kernel", "running-kernel"]
