"""`hive-lab kernelspec install`: a kernelspec that uses the `hive` provisioner."""

import json
import subprocess
import sys

from jupyter_client.kernelspec import KernelSpecManager


def run_cli(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "hive_lab.cli", "kernelspec", *args], capture_output=True, text=True, env=env
    )


def test_install_writes_a_hive_kernelspec(tmp_path, monkeypatch):
    import os

    env = {**os.environ, "JUPYTER_DATA_DIR": str(tmp_path / "data"), "JUPYTER_PATH": str(tmp_path / "data")}
    out = run_cli("install", "--name", "gpu-2", "--gpus", "2", "--gpu-type", "A100", "--vc", "cv-101",
                  "--image", "hive-lab/test-python:1", "--user", env=env)
    assert out.returncode == 0, out.stderr
    spec = json.loads((tmp_path / "data" / "kernels" / "gpu-2" / "kernel.json").read_text())
    prov = spec["metadata"]["kernel_provisioner"]
    assert prov["provisioner_name"] == "hive"
    assert prov["config"] == {"gpus": 2, "gpu_type": "A100", "vc": "cv-101", "image": "hive-lab/test-python:1"}
    assert spec["interrupt_mode"] == "message"
    assert "{connection_file}" in spec["argv"]
    assert "2 A100 GPUs" in spec["display_name"]
    logo = tmp_path / "data" / "kernels" / "gpu-2" / "logo-svg.svg"  # the launcher's tile: a GPU icon
    assert logo.read_text().startswith("<svg") and logo.stat().st_mode & 0o777 == 0o644
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "data"))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    assert "gpu-2" in KernelSpecManager().find_kernel_specs()


def test_bad_input_says_what_to_fix(tmp_path):
    import os

    env = {**os.environ, "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    out = run_cli("install", "--name", "GPU 1", "--gpus", "1", "--user", env=env)
    assert out.returncode == 2 and "--name" in out.stderr
    out = run_cli("install", "--name", "g", "--gpus", "-1", "--user", env=env)
    assert out.returncode == 2 and "--gpus" in out.stderr and "0 or more" in out.stderr
    assert not (tmp_path / "data" / "kernels").exists()


def test_a_kernel_of_a_quarter_gpu(tmp_path):
    import os

    from hive_lab_server.kernels.provisioner import HiveProvisioner
    from hive_lab_server.wire.spec import parse_job_spec

    env = {**os.environ, "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    out = run_cli("install", "--name", "quarter", "--gpus", "0.25", "--user", env=env)
    assert out.returncode == 0, out.stderr
    spec = json.loads((tmp_path / "data" / "kernels" / "quarter" / "kernel.json").read_text())
    assert spec["metadata"]["kernel_provisioner"]["config"]["gpus"] == 0.25
    assert "0.25 GPU" in spec["display_name"] and "0.25 GPUs" not in spec["display_name"]
    assert HiveProvisioner(gpus=0.25).gpus == 0.25 and HiveProvisioner(gpus=2).gpus == 2
    assert parse_job_spec({"command": "x", "kind": "kernel", "tasks": [{"gpus": 0.25}]}).gpu_share == 0.25
    out = run_cli("install", "--name", "q", "--gpus", "0.3", "--user", env=env)
    assert out.returncode == 2 and "0.5, 0.25 or 0.125" in out.stderr


def test_a_kernelspec_installed_by_root_is_readable_by_every_student(shared_tmp, unix_accounts):
    """Issue 26: installed as root (a course's kernel), the dir was 0700 root: students did not see it."""
    import os
    import stat

    from fixtures.unix_accounts import ACCOUNTS, run_as

    prefix = shared_tmp / "prefix"
    out = run_cli("install", "--name", "course-gpu", "--gpus", "1", "--prefix", str(prefix), env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert f"under {prefix}" in out.stdout  # says where it went
    kdir = prefix / "share" / "jupyter" / "kernels" / "course-gpu"
    assert stat.S_IMODE(kdir.stat().st_mode) == 0o755
    assert stat.S_IMODE((kdir / "kernel.json").stat().st_mode) == 0o644
    for d in (prefix, prefix / "share", prefix / "share" / "jupyter", prefix / "share" / "jupyter" / "kernels"):
        os.chmod(d, 0o755)
    seen = run_as(unix_accounts[ACCOUNTS[0]], "cat", str(kdir / "kernel.json"))
    assert seen.returncode == 0 and "hive" in seen.stdout, seen.stderr


def test_a_user_who_cannot_write_the_system_dir_gets_a_personal_kernelspec(tmp_path, monkeypatch, capsys):
    """Issue 30: `hive-lab kernelspec install --name gpu-1 --gpus 1` as an ordinary user crashed with a
    PermissionError traceback on the system kernels dir."""
    from hive_lab.cli import kernelspec, main

    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(kernelspec, "_system_dir_writable", lambda: False)
    assert main(["kernelspec", "install", "--name", "gpu-1", "--gpus", "1"]) == 0
    assert (tmp_path / "data" / "kernels" / "gpu-1" / "kernel.json").exists()
    assert "for you only" in capsys.readouterr().out
