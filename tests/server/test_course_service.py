"""The course ``hive-lab course init`` sets up with its defaults, run by a REAL Jupyter server with hive-lab
loading the generated service settings (``--config=<root>/etc/hive-lab/hive_lab_config.py``, the Hub
service's command; the Hub itself is not needed for scheduling) and students' jobs run under their own
Unix accounts (tests/fixtures/unix_accounts.py), on GPUs simulated by ``--simulate-gpus``:

- a student's ``priority: 1000`` job is refused (403, with the sentence) instead of preempting a
  classmate's running job, whose job stays running; an instructor's may preempt it;
- a fork bomb in a job stops at ``Isolation.pids_max``: forks beyond it fail with EAGAIN, the machine
  is unaffected;
- a GPU kernel submitted as a student's own kernelspec makes it (``idle_timeout: 0``, no time limit) gets
  the course's time limit and is culled by the service at the course's idle cap.

The service's clock is injected through the instructor's local file (``hive_lab_local.py``, which init's
file loads last): it reads an offset from a file the test writes, so the idle cap passes without waiting.
"""

from __future__ import annotations

import json
import os
import pathlib
import secrets
import socket
import subprocess
import sys

import pytest

from hive_lab.cli import main
from hive_lab.cli.course import SERVICE_FILE, SERVICE_LOCAL
from hive_lab_server.kernels.ports import below_ephemeral
from fixtures.live_server import LiveServer, free_port
from fixtures.unix_accounts import ACCOUNTS, ensure_account

pytestmark = pytest.mark.timeout(300)
ANN, BOB = ACCOUNTS  # two students
IVY = "hive-ins-i"  # an instructor
COURSE = "cs-101"
FINAL = ("succeeded", "failed", "cancelled")

CLOCK = '''
import pathlib as _pathlib
import time as _time


def _test_clock(_offset=_pathlib.Path({path!r})):
    """The test's clock: the real time plus the offset in {path} (the test moves it forward)."""
    try:
        return _time.time() + float(_offset.read_text())
    except (OSError, ValueError):
        return _time.time()


c.HiveLabApp.clock = _test_clock
'''

FORK_BOMB = r'''
import errno, os, signal
limit = None
for line in open("/proc/self/cgroup"):
    _, controllers, path = line.rstrip("\n").split(":", 2)
    if "pids" in controllers.split(",") or controllers == "":
        for base in ("/sys/fs/cgroup/pids", "/sys/fs/cgroup"):
            try:
                limit = open(base + path + "/pids.max").read().strip()
                break
            except OSError:
                pass
children, error = [], None
while len(children) < 2000:
    try:
        pid = os.fork()
    except OSError as exc:
        error = errno.errorcode.get(exc.errno)
        break
    if pid == 0:
        signal.pause()
        os._exit(0)
    children.append(pid)
print("pids.max", limit, "forked", len(children), "error", error, flush=True)
for pid in children:
    os.kill(pid, signal.SIGKILL)
for pid in children:
    os.waitpid(pid, 0)
'''


@pytest.fixture(scope="module")
def course(unix_accounts, tmp_path_factory):
    """A course set up by ``course init`` with its defaults (2 simulated GPUs), and a real server on it."""
    import tempfile

    ensure_account(IVY)
    top = pathlib.Path(tempfile.mkdtemp(prefix="hive-course-", dir="/tmp"))
    os.chmod(top, 0o711)  # the students' jobs live below it
    root = top / "root"
    import contextlib
    import io

    said = io.StringIO()
    with contextlib.redirect_stderr(said):
        rc = main(["course", "init", "--name", COURSE, "--simulate-gpus", "2", "--students", f"{ANN},{BOB}",
                   "--instructors", IVY, "--root", str(root)])
    # init's check runs as the students: the kernelspec's Python here is the test venv's, which may lead
    # into root's home (pyenv), out of their reach; that is the one problem a test machine may show (the
    # kernels of this test run another Python, see kernel_python below)
    problems = [line for line in said.getvalue().splitlines() if line.startswith("- ")]
    assert rc == 0 or (problems and all("cannot reach" in line or "cannot run" in line for line in problems)), \
        said.getvalue()
    offset = top / "clock-offset"
    offset.write_text("0")
    with open(root / SERVICE_LOCAL, "a") as f:  # the instructor's own file: init never rewrites it
        f.write(CLOCK.format(path=str(offset)))
    srv = LiveServer(tmp_path_factory.mktemp("srv"),
                     users={ANN: {"groups": [COURSE]}, BOB: {"groups": [COURSE]}, IVY: {"groups": ["instructors"]}},
                     config={"Isolation": {"run_as": "owner"}},
                     extra_args=[f"--config={root / SERVICE_FILE}"])
    # with --config, jupyter loads that file instead of jupyter_server_config.*: the test's own settings
    # (identities, the extension, run as owner) go in jupyter_config.json, which is loaded first
    (srv.config_dir / "jupyter_server_config.json").rename(srv.config_dir / "jupyter_config.json")
    srv.jobs_root = root / "var/lib/hive-lab/jobs"  # (where the teardown finds the tasks left running)
    srv.start()
    srv.course_root, srv.clock_offset = root, offset
    yield srv
    srv.close()
    import shutil

    shutil.rmtree(top, ignore_errors=True)


def submit(srv, user: str, **body):
    body.setdefault("command", "sleep 600")
    body.setdefault("tasks", [{"gpus": 1}])
    return srv.request("POST", "jobs", user=user, json=body)


def cancel_all(srv) -> None:
    for job in srv.request("GET", "jobs").json()["jobs"]:
        if job["state"] not in FINAL:
            srv.request("DELETE", f"jobs/{job['id']}")
            srv.wait_for_job(job["id"], *FINAL)


def test_the_service_runs_the_courses_settings(course):
    cluster = course.request("GET", "cluster").json()
    assert course.request("GET", "me", user=ANN).json()["vcs"] == [COURSE]
    log = course.log()
    assert "will not be scheduled" not in log and "not monitored" not in log, log[-3000:]
    assert socket.gethostname() in json.dumps(cluster)


def test_a_student_cannot_preempt_a_classmate_and_an_instructor_can(course):
    a = submit(course, ANN, name="ann's training", tasks=[{"gpus": 2}])
    assert a.status_code == 201, a.text
    a = course.wait_for_job(a.json()["id"], "running")
    try:
        # Bob outbids her: refused with a sentence, instead of lazily preempting her running job
        r = submit(course, BOB, name="bob's", priority=1000, tasks=[{"gpus": 2}])
        assert r.status_code == 403, r.text
        assert f"priority 1000 is above your limit in VC {COURSE} (0)" in r.text, r.text
        # at the default priority he queues behind her; her job runs on
        b = submit(course, BOB, name="bob's", tasks=[{"gpus": 2}])
        assert b.status_code == 201 and b.json()["state"] == "queued", b.text
        assert course.request("GET", f"jobs/{a['id']}").json()["state"] == "running"
        # the instructors' group may (the course's deadline, an exam)
        i = submit(course, IVY, name="exam", priority=1000, tasks=[{"gpus": 2}])
        assert i.status_code == 201, i.text
        gone = course.wait_for_job(a["id"], "queued", "failed")
        assert "preempted" in gone["reason"], gone
        course.wait_for_job(i.json()["id"], "running")
    finally:
        cancel_all(course)


def test_a_fork_bomb_stops_at_pids_max(course, user_python):
    job = submit(course, ANN, name="bomb", command=f"{user_python} bomb.py", files={"bomb.py": FORK_BOMB})
    assert job.status_code == 201, job.text
    done = course.wait_for_job(job.json()["id"], *FINAL, timeout=120)
    out = course.request("GET", f"jobs/{done['id']}/logs", user=ANN).json()["data"]
    assert done["state"] == "succeeded", (done, out)
    words = out.split()
    forked, error, limit = int(words[words.index("forked") + 1]), words[words.index("error") + 1], \
        words[words.index("pids.max") + 1]
    assert error == "EAGAIN" and forked < 512, out  # the task's processes stop at the course's pids_max
    assert limit in ("512", "None"), out  # where the task can read its cgroup: the course's value
    assert subprocess.run(["true"]).returncode == 0  # the machine is unaffected


def kernel_python(srv) -> str:
    """A Python with ipykernel that the students' jobs can run (probed by a job of theirs), else skip."""
    for python in ("/opt/hive-hub-venv/bin/python", sys.executable):
        r = submit(srv, BOB, name="probe", command=f"{python} -c 'import ipykernel'", tasks=[{"gpus": 0}])
        assert r.status_code == 201, r.text
        if srv.wait_for_job(r.json()["id"], *FINAL)["state"] == "succeeded":
            return python
    pytest.skip("no Python with ipykernel is runnable by the test accounts (the JupyterHub tests build one)")


def _kernel_body(ports: list[int], python: str) -> dict:
    """The job a student's own kernelspec asks for ({"gpus": 1, "idle_timeout": 0}, no time limit): what the
    provisioner in her server posts, posted here directly (she may as well)."""
    from hive_lab_server.kernels.job import kernel_argv, kernel_job_body

    connection = {"ip": "127.0.0.1", "transport": "tcp", "signature_scheme": "hmac-sha256",
                  "key": secrets.token_hex(16), "shell_port": ports[0], "iopub_port": ports[1],
                  "stdin_port": ports[2], "control_port": ports[3], "hb_port": ports[4], "kernel_name": "mine"}
    argv = kernel_argv([python, "-m", "ipykernel_launcher", "-f", "CONN"], "CONN", None)
    return kernel_job_body(name="kernel: mine", argv=argv, connection_text=json.dumps(connection), url=None,
                           token=None, gpus=1, gpu_type=None, vc=COURSE, image=None, cpus=0, memory_mb=0, env={})


def test_a_students_own_kernelspec_cannot_opt_out_of_the_courses_caps(course):

    python = kernel_python(course)
    # (its ports below the ephemeral range, as the provisioner draws them: kernels/ports.py)
    ports = below_ephemeral("127.0.0.1", 5) or [free_port() for _ in range(5)]
    r = course.request("POST", "jobs", user=BOB, json=_kernel_body(ports, python))
    assert r.status_code == 201, r.text
    job = course.wait_for_job(r.json()["id"], "running")
    try:
        assert job["time_limit_s"] == 12 * 3600  # none asked: the course's cap
        assert job["gpus"] == 1
        # nothing executes; the service's clock passes the course's idle cap (30 min) and the startup grace. A
        # kernel that comes up (publishes its first status) after a jump counts its idle time from then, on the
        # moved clock: on a loaded machine it may still be importing ipykernel at the first jump, so the clock
        # moves on by as much again until the cull (the kernel is silent once up; its 12 h limit is 22 jumps off)
        ended, offset = None, 0
        for _ in range(5):
            offset += 1800 + 120 + 1
            course.clock_offset.write_text(str(offset))
            try:
                ended = course.wait_for_job(job["id"], *FINAL, timeout=20)
                break
            except AssertionError:
                continue
        assert ended is not None, "the idle kernel was not culled after 5 jumps of the cap and its grace"
        assert ended["state"] == "cancelled", ended
        assert "idle kernel culled" in ended["reason"] and "whatever their kernelspec says" in ended["reason"], ended
        assert "after 30 min" in ended["reason"], ended  # the course's cap, not the kernelspec's 0 (off)
    finally:
        cancel_all(course)
