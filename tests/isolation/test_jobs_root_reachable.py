"""A REAL server that runs jobs as their owners (root, ``Isolation.run_as`` auto) refuses to start when its
jobs root, or a dir above it, is not searchable by other accounts: with the default jobs root under
Jupyter's data dir (created 0700) every job used to fail at run time ("cannot enter the working dir",
exit 126). The sentence names ``c.HiveLabApp.jobs_root`` and the fix; a traversable jobs root starts."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

import pytest

from fixtures.live_server import LiveServer
from fixtures.unix_accounts import ACCOUNTS, run_as

from hive_lab_server.execution.isolation.jobs_root import untraversable


@pytest.fixture
def base(unix_accounts):
    d = pathlib.Path(tempfile.mkdtemp(prefix="hive-jobs-root-", dir="/tmp"))
    os.chmod(d, 0o711)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _refused(srv: LiveServer) -> str:
    """The server's output when it refused to start (a server that started anyway is stopped, and fails the test)."""
    try:
        srv.start()
    except RuntimeError as exc:
        assert srv.proc.returncode != 0
        return str(exc)
    srv.close()
    pytest.fail("the server started")


def _server(base: pathlib.Path, **hive) -> LiveServer:
    dev = base / "no-gpus"  # no GPU device nodes are touched by these servers
    return LiveServer(base / "srv", users={ACCOUNTS[0]: {}}, vc_access={"*": ["*"]}, config={
        "HiveLabApp": hive,
        "Isolation": {"run_as": "auto", "gpu_device_glob": str(dev / "nvidia[0-9]*"), "gpu_control_globs": []},
    })


def test_the_default_jobs_root_under_a_0700_data_dir_stops_the_server_naming_the_setting(base):
    srv = _server(base, jobs_root="")  # the default: <data dir>/hive_lab/jobs
    os.chmod(base / "srv", 0o711)
    os.chmod(srv.data_dir, 0o700)  # as Jupyter creates it
    log = _refused(srv)
    assert "c.HiveLabApp.jobs_root is" in log and str(srv.data_dir) in log, log[-3000:]
    assert "/var/lib/hive-lab/jobs" in log and "chmod 711" in log and f"chmod o+x {srv.data_dir}" in log


def test_a_jobs_root_behind_a_symlink_into_a_private_dir_stops_the_server(base):
    private = base / "private"
    (private / "jobs").mkdir(parents=True)
    os.chmod(private, 0o700)
    os.chmod(private / "jobs", 0o711)
    (base / "link").symlink_to(private)
    srv = _server(base, jobs_root=str(base / "link" / "jobs"))
    os.chmod(base / "srv", 0o711)
    log = _refused(srv)
    assert f"other accounts cannot enter {private} (0700)," in log, log[-3000:]


def test_a_traversable_jobs_root_starts_and_the_students_job_runs_in_it(base, unix_accounts):
    srv = _server(base, jobs_root=str(base / "jobs"))
    os.chmod(base / "srv", 0o711)
    try:
        srv.start()
        r = srv.request("POST", "jobs", user=ACCOUNTS[0], json={"command": "pwd", "tasks": [{"gpus": 0}]})
        assert r.status_code == 201, r.text
        job = srv.wait_for_job(r.json()["id"], "succeeded", "failed", timeout=60, user=ACCOUNTS[0])
        assert job["state"] == "succeeded", job
    finally:
        srv.close()


def test_untraversable_names_each_dir_a_student_cannot_enter(base, unix_accounts):
    student = unix_accounts[ACCOUNTS[0]]
    (base / "a" / "b").mkdir(parents=True)
    os.chmod(base / "a", 0o750)
    assert untraversable(base / "a" / "b") == [base / "a"]
    assert run_as(student, "/usr/bin/test", "-x", str(base / "a" / "b")).returncode == 1  # it is what a student sees
    os.chmod(base / "a", 0o711)
    assert untraversable(base / "a" / "b") == []
    assert run_as(student, "/usr/bin/test", "-x", str(base / "a" / "b")).returncode == 0
