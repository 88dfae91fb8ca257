"""Under the real Hub, the one hive-lab service (run by the Hub as root, ``Isolation.run_as`` "auto")
runs every student's job as the student's own Unix account, in its own cgroup:

- the job prints ``id -u``: the student's uid (submitted to the service, or through her own server);
- one student's job cannot read the other's job dir nor signal the other's processes;
- a ``setsid`` daemon dies with its job (when the job ends, and when it is cancelled);
- a link planted in the job's output dir is not followed by the service's outputs endpoint.

(The same isolation through a token-map server: tests/isolation/test_isolation_live.py.)
"""

from __future__ import annotations

import pwd
import re

import psutil
import pytest
from hub_people import ANN, BOB, IVY
from waiting import wait_until

pytestmark = pytest.mark.timeout(600)


def submit(hub, user, command, vc, via_server=False, **extra):
    body = {"command": command, "vc": vc, "tasks": [{"gpus": 0}], **extra}
    if via_server:
        r = hub.request("POST", f"/user/{user}/hive_lab/api/jobs", user=user, json=body)
    else:
        r = hub.service("POST", "jobs", user, json=body)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def job(hub, job_id):
    return hub.service("GET", f"jobs/{job_id}", IVY).json()


def log(hub, job_id, user):
    r = hub.service("GET", f"jobs/{job_id}/logs", user)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def wait(hub, job_id, done, what, timeout=60):
    wait_until(done, lambda: f"job {job_id}: {what}; job: {job(hub, job_id)}", timeout=timeout)


def finished(hub, job_id):
    wait(hub, job_id, lambda: job(hub, job_id)["state"] in ("succeeded", "failed", "cancelled"), "the end")
    return job(hub, job_id)


def gone(pid):
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_students_jobs_run_under_their_own_uids(hub):
    ids = {(ANN, False): submit(hub, ANN, "id -u", "cv-101"),
           (BOB, False): submit(hub, BOB, "id -u", "nlp-201"),
           (ANN, True): submit(hub, ANN, "id -u", "cv-101", via_server=True)}
    for (user, _), job_id in ids.items():
        assert finished(hub, job_id)["state"] == "succeeded", job(hub, job_id)
        assert log(hub, job_id, user).strip() == str(pwd.getpwnam(user).pw_uid), log(hub, job_id, user)


def host_pids(uid: int, *argv: str) -> list[int]:
    """Pids (as the host sees them) of ``uid``'s processes running exactly ``argv``: a job runs in its own
    PID namespace, so the pids it prints itself ($$, $!) mean nothing out here."""
    return [p.pid for p in psutil.process_iter(["uids", "cmdline"])
            if p.info["uids"] and p.info["uids"].real == uid and p.info["cmdline"] == list(argv)]


def test_a_student_cannot_read_the_others_job_dir_or_signal_their_processes(hub):
    ann_job = submit(hub, ANN, 'echo ann-private > "$HIVE_OUTPUT_DIR/answer.txt"; sleep 3041', "cv-101")
    uid = pwd.getpwnam(ANN).pw_uid
    try:
        wait(hub, ann_job, lambda: host_pids(uid, "sleep", "3041"), "her job's start")
        (pid,) = host_pids(uid, "sleep", "3041")
        seen = job(hub, ann_job)  # the instructor sees where it lives
        answer = f"{seen['output_dir']}/answer.txt"
        probe = (f'cat "{answer}" && echo READ-IT; ls "{seen["working_dir"]}" && echo LISTED-IT; '
                 f'kill -0 {pid} && echo SIGNALLED-IT; kill -TERM {pid} && echo KILLED-IT; '
                 f'grep -l "30[4]1" /proc/[0-9]*/cmdline && echo SAW-IT; echo probed')
        bob_job = submit(hub, BOB, probe, "nlp-201")
        assert finished(hub, bob_job)["state"] == "succeeded"
        out = log(hub, bob_job, BOB)
        assert "probed" in out and "Permission denied" in out, out
        assert not {"READ-IT", "LISTED-IT", "SIGNALLED-IT", "KILLED-IT", "SAW-IT", "ann-private"} & set(out.split()), out
        assert job(hub, ann_job)["state"] == "running" and not gone(pid)  # untouched
        assert hub.service("GET", f"jobs/{ann_job}/outputs/answer.txt", BOB).status_code == 403
        assert hub.service("GET", f"jobs/{ann_job}/outputs/answer.txt", ANN).text == "ann-private\n"
    finally:
        hub.service("DELETE", f"jobs/{ann_job}", IVY)
    assert finished(hub, ann_job)["state"] == "cancelled"


@pytest.mark.parametrize("ending", ["ends", "cancelled"])
def test_a_setsid_daemon_dies_with_its_job(hub, ending):
    seconds = "3042" if ending == "ends" else "3043"
    command = f"setsid sleep {seconds} & sleep 0.5" + ("; sleep 300" if ending == "cancelled" else "")
    uid = pwd.getpwnam(ANN).pw_uid
    job_id = submit(hub, ANN, command, "cv-101")
    wait(hub, job_id, lambda: host_pids(uid, "sleep", seconds) or job(hub, job_id)["state"] == "succeeded",
         "the daemon's start")
    if ending == "cancelled":
        assert host_pids(uid, "sleep", seconds)  # it runs, as her
        assert hub.service("DELETE", f"jobs/{job_id}", ANN).status_code == 200
    assert finished(hub, job_id)["state"] == ("succeeded" if ending == "ends" else "cancelled")
    wait(hub, job_id, lambda: not host_pids(uid, "sleep", seconds), "the end of the setsid daemon", timeout=30)


def test_a_planted_link_is_not_followed_by_the_outputs_endpoint(hub):
    plant = ('echo mine > "$HIVE_OUTPUT_DIR/ok"; ln -s / "$HIVE_OUTPUT_DIR/x"; ln -s /etc/shadow "$HIVE_OUTPUT_DIR/s"; '
             'ln -s /etc "$HIVE_OUTPUT_DIR/etc"; echo planted')
    job_id = submit(hub, ANN, plant, "cv-101")
    assert finished(hub, job_id)["state"] == "succeeded", log(hub, job_id, ANN)
    files = hub.service("GET", f"jobs/{job_id}/outputs", ANN).json()["files"]
    assert [f["path"] for f in files] == ["ok"]
    assert hub.service("GET", f"jobs/{job_id}/outputs/ok", ANN).text == "mine\n"
    for path in ("x/etc/shadow", "s", "etc/passwd", "x/etc/passwd"):
        for user in (ANN, IVY):
            r = hub.service("GET", f"jobs/{job_id}/outputs/{path}", user)
            assert r.status_code in (403, 404), (path, user, r.status_code)
            assert "root:" not in r.text, path
