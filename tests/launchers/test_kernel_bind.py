"""The kernel job's supervisor (``kernels.job.supervisor_command``, run by a real /bin/sh) binds the
kernel at its node's address: the staged connection file's ``ip`` becomes ``HIVE_NODE_ADDRESS`` (an IP),
``0.0.0.0`` for a host name, and stays private (0600)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from hive_lab_server.kernels.job import CONNECTION_FILE, KERNEL_DIR, supervisor_command

# the "kernel": shows the address it would bind, then ends for good (no restart wanted)
SHOW = ["sh", "-c", f"grep '\"ip\"' {CONNECTION_FILE}; rm -f {KERNEL_DIR}/keep"]


@pytest.mark.parametrize(
    ("node_address", "bound"),
    [("10.1.2.3", "10.1.2.3"), ("gpu07.cluster", "0.0.0.0"), ("127.0.0.1", "127.0.0.1"), (None, "192.0.2.9")],
)
def test_kernel_binds_its_node_address(tmp_path, node_address, bound):
    kdir = tmp_path / KERNEL_DIR
    kdir.mkdir(mode=0o700)
    conn = tmp_path / CONNECTION_FILE
    fd = os.open(conn, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, json.dumps({"ip": "192.0.2.9", "shell_port": 1, "key": "k"}, indent=2).encode())
    os.close(fd)
    env = {"PATH": os.environ["PATH"]}
    if node_address is not None:
        env["HIVE_NODE_ADDRESS"] = node_address
    r = subprocess.run(["sh", "-c", supervisor_command(SHOW, None, lease_s=3)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(conn.read_text())["ip"] == bound
    assert f'"ip": "{bound}"' in r.stdout
    assert conn.stat().st_mode & 0o777 == 0o600


def test_the_watchdog_stops_a_kernel_whose_heartbeat_is_older_than_the_lease(tmp_path):
    """The fallback for a kernel the service cannot end (the service itself is down): the supervisor's
    watchdog stops it once the heartbeat is older than the lease plus its slack, and says why."""
    (tmp_path / KERNEL_DIR).mkdir(mode=0o700)
    (tmp_path / KERNEL_DIR / "alive").write_text("1000")  # the Jupyter server's last word, long ago
    r = subprocess.run(["sh", "-c", supervisor_command(["sleep", "120"], None, lease_s=1, slack_s=0)], cwd=tmp_path,
                       env={"PATH": os.environ["PATH"]}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 143, (r.returncode, r.stderr)
    assert "no heartbeat from the Jupyter server holding this kernel" in r.stderr


def test_the_watchdogs_slack_is_the_provisioners_setting():
    """``c.HiveProvisioner.watchdog_slack_s`` reaches the kernel job's supervisor: the watchdog acts at the
    lease plus that slack (the default: ``WATCHDOG_SLACK_S``)."""
    from hive_lab_server.kernels.job import WATCHDOG_SLACK_S, kernel_job_body
    from hive_lab_server.kernels.provisioner import HiveProvisioner

    def body(**kw):
        return kernel_job_body(name="k", argv=["sleep", "1"], connection_text="{}", url=None, token=None, gpus=1,
                               gpu_type=None, vc=None, image=None, cpus=0, memory_mb=0, env={}, lease_s=4, **kw)

    assert "-gt 604 ]" in body(watchdog_slack_s=600)["command"]
    assert f"-gt {4 + WATCHDOG_SLACK_S} ]" in body()["command"]
    assert HiveProvisioner.watchdog_slack_s.default_value == WATCHDOG_SLACK_S
