"""``hive-lab course check`` catches what breaks a term (issue: it said "consistent" on each of these).

Each broken set-up is built under a test ``--root`` from what ``course init`` wrote, with a real student
account (tests/fixtures/unix_accounts.py) where the check runs as a student; ``course check`` exits 1
with a sentence naming the fix. The good set-up (a Python every account can run, the node named after
this machine, fake NVML showing it 4 GPUs) passes; warnings (homes, ``/proc``) are printed, not failed.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from fixtures.unix_accounts import ensure_account, run_as
from hive_lab.cli import course, course_check, main

STUDENT, SYSTEM_STUDENT = "hive-crs-stu", "hive-crs-sys"
HOST = socket.gethostname()


def add(path: pathlib.Path, *lines: str) -> None:
    """The instructor's additions, appended (the owned file loads the local one at its end; either reads merged)."""
    with open(path, "a") as f:
        f.write("\n" + "\n".join(lines) + "\n")


def set_kernel_python(root: pathlib.Path, python: str) -> None:
    spec_file = root / course.KERNELS_DIR / "cv-101-gpu" / "kernel.json"
    spec = json.loads(spec_file.read_text())
    spec["argv"][0] = python
    spec_file.write_text(json.dumps(spec, indent=1))


def private_dir(base: pathlib.Path, name: str) -> pathlib.Path:
    """A dir only root may enter, like root's home (where pyenv puts its Pythons)."""
    d = base / name
    d.mkdir()
    os.chmod(d, 0o700)
    return d


@pytest.fixture(scope="module")
def student(unix_accounts):
    return ensure_account(STUDENT)


@pytest.fixture
def good(student, user_python, capsys):
    """A course that passes: init's files, then a Python every account can run (the kernelspec and the
    Hub's PATH) and the node named after this machine, whose fake NVML shows 4 GPUs."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="hive-course-check-", dir="/tmp"))
    os.chmod(base, 0o755)
    root = base / "root"
    main(["course", "init", "--name", "cv-101", "--gpus", "4", "--students", STUDENT, "--max-gpus", "2",
          "--root", str(root)])  # (exit 1 here: init checks, and this test's own Python lives under /root)
    venv_bin = os.path.dirname(user_python)
    set_kernel_python(root, user_python)
    hardware = base / "hardware.yaml"
    hardware.write_text("gpus:\n" + "".join(f"- {{model: Tesla T4, memory_mb: 15360}}\n" for _ in range(4)))
    add(root / course.SERVICE_FILE, f"c.HiveLabApp.cluster_config['nodes'] = [{HOST!r}]",
        f"c.HiveLabApp.nvml_backend = 'fake:{hardware}'")
    add(root / course.HUB_FILE, f"c.Spawner.environment.update({{'PATH': '{venv_bin}:/usr/bin:/bin'}})")
    capsys.readouterr()
    yield root
    shutil.rmtree(base, ignore_errors=True)


def check(root: pathlib.Path, capsys) -> tuple[int, str]:
    rc = main(["course", "check", "--root", str(root)])
    return rc, capsys.readouterr().err


def test_the_good_course_passes_with_its_warnings_printed(good, capsys):
    rc, err = check(good, capsys)
    assert rc == 0, err
    assert course_check.check_course(good) == []
    assert "note: the paths students need were not tested" not in err  # they were: the student has an account


def user_python_venv_into_a_private_dir(root: pathlib.Path) -> str:
    """The issue's pyenv: the venv's python is a symlink to a Python in a dir only root may enter."""
    base = root.parent
    pyenv = private_dir(base, "root-home")
    shutil.copy2(os.path.realpath("/usr/bin/python3"), pyenv / "python3.11")
    (base / "venv" / "bin").mkdir(parents=True)
    (base / "venv" / "bin" / "python").symlink_to(pyenv / "python3.11")
    set_kernel_python(root, str(base / "venv" / "bin" / "python"))
    return f"cannot reach {base / 'venv/bin/python'}, the Python of the kernelspec cv-101-gpu (it resolves to " \
           f"{pyenv / 'python3.11'}); {pyenv} is not searchable by them: install hive-lab in a venv every account can read"


def hub_path_into_a_private_dir(root: pathlib.Path) -> str:
    private = private_dir(root.parent, "private-bin")
    (private / "jupyterhub-singleuser").write_text("#!/bin/sh\n")
    add(root / course.HUB_FILE, f"c.Spawner.environment.update({{'PATH': '{private}:/usr/bin:/bin'}})")
    return f"cannot reach {private}, a dir on their servers' PATH (c.Spawner.environment)"


def jobs_root_under_a_private_dir(root: pathlib.Path) -> str:
    jobs = private_dir(root.parent, "private-state") / "jobs"
    jobs.mkdir(mode=0o711)
    add(root / course.SERVICE_FILE, f"c.HiveLabApp.jobs_root = '{jobs}'")
    return f"cannot reach {jobs}, the jobs root"


def node_named_otherwise(root: pathlib.Path) -> str:
    add(root / course.SERVICE_FILE, "c.HiveLabApp.cluster_config['nodes'] = ['node-0']")
    return (f"this machine ({HOST}) is not a node of the configured cluster (configured nodes: node-0); its 4 GPUs "
            f"will not be scheduled: name the node after this machine in cluster_config (short form: \"nodes\": ['{HOST}'])")


def vc_access_group_without_at(root: pathlib.Path) -> str:
    add(root / course.SERVICE_FILE, "c.HiveLabApp.vc_access = {'cv-101': ['cv-101']}")
    return "vc_access key 'cv-101' has no '@', so it names a user, but 'cv-101' is a Hub group"


def vc_access_unknown_user(root: pathlib.Path) -> str:
    add(root / course.SERVICE_FILE, "c.HiveLabApp.vc_access['hive-crs-stx'] = ['cv-101']")
    return "vc_access names user 'hive-crs-stx', who is not one of the course's users (c.Authenticator.allowed_users, " \
           "load_groups) (did you mean 'hive-crs-stu'?)"


def misspelled_limit(root: pathlib.Path) -> str:
    add(root / course.SERVICE_FILE, "c.HiveLabApp.user_limits['cv-101']['default']['max_priorty'] = 0")
    return "user_limits['cv-101'].default has the unknown limit 'max_priorty' (did you mean 'max_priority'?)"


def misspelled_limit_table_key(root: pathlib.Path) -> str:
    add(root / course.SERVICE_FILE, "c.HiveLabApp.user_limits['cv-101']['group'] = {'ta': {'max_gpus': 4}}")
    return "user_limits['cv-101'] has the unknown key 'group' (did you mean 'groups'?)"


def misspelled_setting(root: pathlib.Path) -> str:
    add(root / course.SERVICE_FILE, "c.HiveLabApp.jobs_rot = '/var/lib/hive-lab/jobs'")
    return "c.HiveLabApp.jobs_rot is not a setting of hive-lab's HiveLabApp (did you mean 'jobs_root'?)"


def listable_jobs_root(root: pathlib.Path) -> str:
    jobs = root / "var/lib/hive-lab/jobs"
    os.chmod(jobs, 0o755)
    return f"the jobs root {jobs} is listable by others (mode 0755): every student could list classmates' job dirs; " \
           f"chmod 711 {jobs}"


def student_with_a_system_account(root: pathlib.Path) -> str:
    pw = ensure_account(SYSTEM_STUDENT, system=True)
    assert 0 < pw.pw_uid < 1000
    add(root / course.HUB_FILE, f"c.Authenticator.allowed_users.add({SYSTEM_STUDENT!r})",
        f"c.JupyterHub.load_groups['cv-101']['users'].append({SYSTEM_STUDENT!r})")
    return f"'{SYSTEM_STUDENT}' runs jobs as the Unix account '{SYSTEM_STUDENT}', a system account (uid {pw.pw_uid}, " \
           f"below c.Isolation.min_uid = 1000): every job of theirs is refused (403); give them an ordinary account"


@pytest.mark.parametrize("breakage", [
    user_python_venv_into_a_private_dir, hub_path_into_a_private_dir, jobs_root_under_a_private_dir,
    node_named_otherwise, vc_access_group_without_at, vc_access_unknown_user, misspelled_limit,
    misspelled_limit_table_key, misspelled_setting, listable_jobs_root, student_with_a_system_account,
])
def test_check_fails_on_each_broken_setup_naming_the_fix(good, capsys, breakage):
    sentence = breakage(good)
    rc, err = check(good, capsys)
    assert rc == 1 and any(line.startswith("- ") and sentence in line for line in err.splitlines()), err  # a problem


def test_a_path_is_tested_as_the_student_not_by_roots_view(good, student, capsys):
    """Root may run the pyenv Python; the student may not, which is what the check reports."""
    sentence = user_python_venv_into_a_private_dir(good)
    python = str(good.parent / "venv" / "bin" / "python")
    assert os.access(python, os.X_OK)  # root's view: fine
    assert run_as(student, "/usr/bin/test", "-x", python).returncode == 1  # the student's: not
    rc, err = check(good, capsys)
    assert rc == 1 and f"- {STUDENT} {sentence}" in err, err


def test_the_fixes_are_named_in_the_instructors_local_file_when_there_is_one(good, capsys):
    local = good / course_check.SERVICE_LOCAL_FILE
    local.write_text("# your additions\n")
    misspelled_limit(good)
    rc, err = check(good, capsys)
    assert rc == 1 and f"fix it in {local}" in err, err


def test_the_instructors_local_file_is_read_merged_as_the_service_reads_it(good, capsys):
    """A mistake made in the local file (loaded at the end of the owned one) is found and named there."""
    local = good / course_check.SERVICE_LOCAL_FILE
    local.write_text("c.HiveLabApp.vc_access = {'cv-101': ['cv-101']}\n")
    add(good / course.SERVICE_FILE, "load_subconfig('hive_lab_local.py')")
    rc, err = check(good, capsys)
    assert rc == 1 and f"write '@cv-101' in {local}" in err, err


def test_without_a_students_account_here_the_paths_are_not_tested_and_it_says_so(tmp_path, capsys):
    main(["course", "init", "--name", "cv-101", "--gpus", "2", "--students", "nobody-here-x", "--root", str(tmp_path)])
    capsys.readouterr()
    rc, err = check(tmp_path, capsys)
    assert "note: the paths students need were not tested as a student (none of the course's users has a Unix " \
           "account here)" in err, err
    assert "warning: nobody-here-x have no Unix account on this machine" in err


def test_homes_others_can_read_are_a_warning_with_the_fix(good, student, capsys):
    home = pathlib.Path(student.pw_dir)
    os.chmod(home, 0o755)
    rc, err = check(good, capsys)
    assert rc == 0 and f"warning: homes other accounts may read or enter: {home} (0755)" in err and \
        f"chmod 700 {home}" in err, err
    os.chmod(home, 0o700)
    rc, err = check(good, capsys)
    assert rc == 0 and "homes other accounts may read" not in err, err


def _check_in_a_proc_namespace(root: pathlib.Path, hidepid: bool) -> subprocess.CompletedProcess:
    """``course check`` with a /proc of its own (a PID and mount namespace), mounted with or without hidepid."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    remount = "mount -o remount,hidepid=invisible /proc && " if hidepid else ""
    return subprocess.run(["unshare", "--mount", "--pid", "--fork", "--mount-proc", "/bin/sh", "-c",
                           f'{remount}exec "$0" -m hive_lab.cli course check --root "$1"', sys.executable, str(root)],
                          capture_output=True, text=True, timeout=300)


def test_a_proc_without_hidepid_is_a_warning_with_the_fix(good):
    plain = _check_in_a_proc_namespace(good, hidepid=False)
    assert plain.returncode == 0, plain.stderr
    assert "warning: /proc is mounted without hidepid" in plain.stderr
    assert "mount -o remount,hidepid=invisible /proc" in plain.stderr and "hidepid=invisible 0 0" in plain.stderr
    hidden = _check_in_a_proc_namespace(good, hidepid=True)
    assert hidden.returncode == 0, hidden.stderr
    assert "/proc is mounted without hidepid" not in hidden.stderr


def test_the_layout_is_the_one_init_writes():
    assert (course_check.SERVICE_FILE, course_check.HUB_FILE, course_check.KERNELS_DIR, course_check.PROFILE_FILE) == \
        (course.SERVICE_FILE, course.HUB_FILE, course.KERNELS_DIR, course.PROFILE_FILE)
    assert all(course_check.levels_for(n) == course.levels_for(n) for n in range(1, 65))
    # the instructor's local files, where init writes them (course-init's names; the same paths)
    assert getattr(course, "SERVICE_LOCAL", course_check.SERVICE_LOCAL_FILE) == course_check.SERVICE_LOCAL_FILE
    assert getattr(course, "HUB_LOCAL", course_check.HUB_LOCAL_FILE) == course_check.HUB_LOCAL_FILE


def test_a_gpu_driver_that_would_reopen_the_locked_nodes_fails_the_check_with_the_fix(good, capsys, tmp_path):
    """Seen on a real H100 (tests/hardware/test_real_gpu.py): a stock driver puts the GPUs' nodes back to 0666,
    so the service refuses to start; the check says so before the term, with the same fix."""
    params = tmp_path / "params"
    params.write_text("ModifyDeviceFiles: 1\nDeviceFileUID: 0\nDeviceFileGID: 0\nDeviceFileMode: 438\n")
    add(good / course.SERVICE_FILE, f"c.Isolation.nvidia_params_file = {str(params)!r}")
    rc, err = check(good, capsys)
    assert rc == 1 and "the service will not start: the NVIDIA driver makes its device nodes" in err, err
    assert "NVreg_DeviceFileMode=0600" in err
    params.write_text("ModifyDeviceFiles: 1\nDeviceFileUID: 0\nDeviceFileGID: 0\nDeviceFileMode: 384\n")
    rc, err = check(good, capsys)
    assert rc == 0 and "NVIDIA driver" not in err, err
