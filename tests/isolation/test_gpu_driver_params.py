"""GPUs only through the scheduler needs the NVIDIA driver's agreement.

Seen on a real H100 (driver 580, ``tests/hardware/test_real_gpu.py``, docs/hardware.md): the server locked
``/dev/nvidia0`` and ``/dev/nvidiactl`` to ``root:root`` 0600, and before the first job they were 0666
again: with ``ModifyDeviceFiles: 1`` (the default) NVML and CUDA in any root process (the server's own GPU
sampler) and the set-uid ``nvidia-modprobe`` put the nodes back to the driver's ``DeviceFileMode`` (0666 by
default), and a student's own PyTorch found the GPU. A server that locks the nodes now refuses to start
while the driver's parameters would undo the lock, with the sentence that fixes it; here on fake nodes
and a fake parameters file (no NVIDIA driver on this machine)."""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import tempfile

import pytest

from fixtures.live_server import LiveServer
from fixtures.unix_accounts import ACCOUNTS

from hive_lab_server.execution.isolation.gpu_access import driver_reopens_nodes

STOCK = "ModifyDeviceFiles: 1\nDeviceFileUID: 0\nDeviceFileGID: 0\nDeviceFileMode: 438\nEnableMSI: 1\n"
LOCKED = "ModifyDeviceFiles: 1\nDeviceFileUID: 0\nDeviceFileGID: 0\nDeviceFileMode: 384\n"


def _params(tmp_path, text: str) -> pathlib.Path:
    path = tmp_path / "params"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text,gid,mode,undone", [
    (STOCK, 0, 0o600, True),  # a stock driver: the lock does not hold
    (LOCKED, 0, 0o600, False),  # the driver told the same (docs/isolation.md's modprobe.d line)
    ("ModifyDeviceFiles: 0\nDeviceFileMode: 438\n", 0, 0o600, False),  # the driver never touches the nodes
    ("ModifyDeviceFiles: 1\nDeviceFileUID: 0\nDeviceFileGID: 997\nDeviceFileMode: 432\n", 997, 0o660, False),  # Docker
    ("ModifyDeviceFiles: 1\nDeviceFileUID: 0\nDeviceFileGID: 997\nDeviceFileMode: 432\n", 0, 0o600, True),
    ("ModifyDeviceFiles: 1\n", 0, 0o600, True),  # the driver's defaults: 0666
])
def test_which_driver_parameters_undo_the_lock(tmp_path, text, gid, mode, undone):
    why = driver_reopens_nodes(_params(tmp_path, text), gid, mode)
    assert (why is not None) == undone, why
    if undone:
        assert f"NVreg_DeviceFileGID={gid} NVreg_DeviceFileMode=0{mode:o}" in why
        assert "lock_gpu_devices = False" in why


def test_no_driver_loaded_is_nothing_to_check(tmp_path):
    assert driver_reopens_nodes(tmp_path / "absent", 0, 0o600) is None


@pytest.fixture
def base(unix_accounts):
    d = pathlib.Path(tempfile.mkdtemp(prefix="hive-driver-params-", dir="/tmp"))
    os.chmod(d, 0o711)
    dev = d / "dev"
    dev.mkdir(mode=0o755)
    for name, minor in (("nvidia0", 0), ("nvidiactl", 255)):
        os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(195, minor))
        os.chmod(dev / name, 0o666)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _server(base: pathlib.Path, params: str, **isolation) -> LiveServer:
    (base / "params").write_text(params)
    dev = base / "dev"
    return LiveServer(base / "srv", users={ACCOUNTS[0]: {}}, vc_access={"*": ["*"]},
                      config={"Isolation": {"run_as": "owner", "gpu_device_glob": str(dev / "nvidia[0-9]*"),
                                            "gpu_control_globs": [str(dev / "nvidiactl")],
                                            "nvidia_params_file": str(base / "params"), **isolation}})


def test_a_driver_that_would_reopen_the_nodes_stops_the_server_with_the_fix(base):
    srv = _server(base, STOCK)
    try:
        srv.start()
    except RuntimeError as exc:
        assert srv.proc.returncode != 0
        said = str(exc)
    else:
        srv.close()
        pytest.fail("the server started on a driver that re-opens the GPUs' nodes")
    assert "mode 0666 again" in said and "NVreg_DeviceFileMode=0600" in said, said[-2000:]
    assert "c.Isolation.lock_gpu_devices = False" in said


def test_a_driver_told_the_same_modes_starts_with_the_nodes_locked(base):
    srv = _server(base, LOCKED).start()
    try:
        for name in ("nvidia0", "nvidiactl"):
            st = (base / "dev" / name).stat()
            assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o600), name
    finally:
        srv.close()


def test_without_the_lock_the_server_starts_and_says_the_gpus_are_open(base):
    srv = _server(base, STOCK, lock_gpu_devices=False).start()
    try:
        assert "lock_gpu_devices is off" in srv.log()
        assert stat.S_IMODE((base / "dev" / "nvidia0").stat().st_mode) == 0o666
    finally:
        srv.close()


def test_mps_shares_where_the_nodes_are_locked_stop_the_server(base):
    """The MPS server runs as a job's user outside the job: it cannot open a locked GPU, and the descriptor
    sweep ends it where it could (seen on the H100). So MPS with the lock is a configuration that cannot
    work, said at start, not a share that fails in a student's job."""
    (base / "params").write_text(LOCKED)
    dev = base / "dev"
    srv = LiveServer(base / "srv", users={ACCOUNTS[0]: {}}, vc_access={"*": ["*"]},
                     config={"HiveLabApp": {"gpu_share_modes": {"H100": "mps", "*": "timeslice"}},
                             "Isolation": {"run_as": "owner", "gpu_device_glob": str(dev / "nvidia[0-9]*"),
                                           "gpu_control_globs": [str(dev / "nvidiactl")],
                                           "nvidia_params_file": str(base / "params")}})
    try:
        srv.start()
    except RuntimeError as exc:
        said = str(exc)
    else:
        srv.close()
        pytest.fail("the server started with MPS shares on locked GPUs")
    assert "shares H100 through MPS" in said and "'timeslice' or 'mig'" in said, said[-2000:]
