"""Isolation through a REAL Jupyter server run as root in the token-map shared mode with
``c.Isolation.run_as = "owner"``: students' jobs run under their own Unix accounts, cannot read the
server's secrets, cannot make the server serve a file through a link they planted, die whole on
cancel; and a student's token reaches hive-lab's API only (no terminals, kernels, contents)."""

from __future__ import annotations

import os
import re
import stat
import time

import psutil
import pytest

from fixtures.live_server import LiveServer
from fixtures.unix_accounts import ACCOUNTS

A, B = ACCOUNTS


@pytest.fixture(scope="module")
def srv(unix_accounts):
    import shutil
    import tempfile

    base = tempfile.mkdtemp(prefix="hive-iso-live-", dir="/tmp")
    os.chmod(base, 0o711)  # jobs under other accounts must reach their dirs below it
    server = LiveServer(base, users={A: {}, B: {}, "no-account-x": {}}, vc_access={"*": ["*"]},
                        config={"Isolation": {"run_as": "owner"}}).start()
    yield server
    for job in server.request("GET", "jobs", params={"state": "queued,running,scheduled"}).json().get("jobs", []):
        server.request("DELETE", f"jobs/{job['id']}")
    server.close()
    shutil.rmtree(base, ignore_errors=True)


def _submit(srv, user, command, **extra):
    r = srv.request("POST", "jobs", user=user, json={"command": command, "tasks": [{"gpus": 0}], **extra})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def _log(srv, job_id, user=None) -> str:
    r = srv.request("GET", f"jobs/{job_id}/logs", user=user)
    assert r.status_code == 200, r.text
    return r.json()["data"]


def _finished(srv, job_id, user=None) -> dict:
    return srv.wait_for_job(job_id, "succeeded", "failed", "cancelled", timeout=60, user=user)


def test_students_jobs_run_under_their_own_uids(srv, unix_accounts):
    ids = {u: _submit(srv, u, "id -u") for u in (A, B)}
    for user, job_id in ids.items():
        job = _finished(srv, job_id, user)
        assert job["state"] == "succeeded", job
        assert _log(srv, job_id, user).strip() == str(unix_accounts[user].pw_uid)


def test_no_account_and_root_get_a_clear_403_not_a_root_process(srv):
    before = srv.request("GET", "jobs").json()["total"]
    for user, why in (("no-account-x", "no Unix account 'no-account-x'"), (None, "never run as root")):
        r = srv.request("POST", "jobs", user=user, json={"command": "id -u", "tasks": [{"gpus": 0}]})
        assert r.status_code == 403 and why in r.text, r.text
    assert srv.request("GET", "jobs").json()["total"] == before  # nothing queued


def test_jobs_cannot_read_the_servers_secrets(srv):
    db = str(srv.db_path)
    secrets = [db, f"{db}-wal", f"{db}-shm", str(srv.config_dir / "jupyter_server_config.json"),
               *(str(p) for p in srv.runtime_dir.glob("*"))]
    probe = "; ".join(f'if cat "{p}" > /dev/null 2>&1; then echo "READ {p}"; fi' for p in secrets) + "; echo checked"
    job_id = _submit(srv, A, probe)
    assert _finished(srv, job_id, A)["state"] == "succeeded"
    out = _log(srv, job_id, A)
    assert "checked" in out and "READ" not in out, out
    for p in (db, f"{db}-wal", f"{db}-shm"):
        assert stat.S_IMODE(os.stat(p).st_mode) == 0o600, p


def test_outputs_and_logs_never_follow_links_out_of_the_job_dir(srv):
    plant = ('echo mine > "$HIVE_OUTPUT_DIR/ok"; ln -s / "$HIVE_OUTPUT_DIR/x"; ln -s /etc/shadow "$HIVE_OUTPUT_DIR/s"; '
             'echo not-in-the-job-dir > "$HOME/outside"; ln "$HOME/outside" "$HIVE_OUTPUT_DIR/hard"; '
             'mkdir "$HIVE_OUTPUT_DIR/sub"; ln -s /etc "$HIVE_OUTPUT_DIR/sub/etc"; echo planted; '
             'ln -sf /etc/shadow "$HIVE_WORKING_DIR/logs/main-0.log"')
    job_id = _submit(srv, A, plant)
    assert _finished(srv, job_id, A)["state"] == "succeeded"
    files = srv.request("GET", f"jobs/{job_id}/outputs", user=A).json()["files"]
    assert [f["path"] for f in files] == ["ok"]
    assert srv.request("GET", f"jobs/{job_id}/outputs/ok", user=A).text == "mine\n"
    for path in ("x/etc/shadow", "x/etc/passwd", "s", "hard", "sub/etc/shadow", "../../../etc/shadow"):
        r = srv.request("GET", f"jobs/{job_id}/outputs/{path}", user=A)
        assert r.status_code in (403, 404), (path, r.status_code)
        assert "root:" not in r.text and "not-in-the-job-dir" not in r.text, path
    assert srv.request("GET", f"jobs/{job_id}/outputs/hard", user=A).status_code == 403
    assert "root:" not in _log(srv, job_id, A)  # the log is now a symlink to /etc/shadow: not followed


def test_other_students_see_no_env_logs_or_outputs(srv):
    job_id = _submit(srv, A, "echo a-log-line", env={"API_KEY_OF_A": "s3cr3t-value"})
    _finished(srv, job_id, A)
    r = srv.request("GET", f"jobs/{job_id}", user=B)
    assert r.status_code == 200 and "s3cr3t-value" not in r.text
    for path in ("logs", "outputs"):
        assert srv.request("GET", f"jobs/{job_id}/{path}", user=B).status_code == 403


def test_cancel_kills_a_setsid_daemon(srv, unix_accounts):
    job_id = _submit(srv, A, 'setsid sleep 300 & echo "daemon=$!"; sleep 300')
    deadline = time.monotonic() + 60
    while "daemon=" not in _log(srv, job_id, A) and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(re.search(r"daemon=(\d+)", _log(srv, job_id, A)).group(1))
    assert psutil.Process(pid).uids().real == unix_accounts[A].pw_uid
    assert srv.request("DELETE", f"jobs/{job_id}", user=A).status_code == 200
    assert _finished(srv, job_id, A)["state"] == "cancelled"

    def gone():
        try:
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    deadline = time.monotonic() + 30
    while not gone() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(), "the setsid daemon outlived its cancelled job"


@pytest.mark.parametrize("method,path", [
    ("POST", "/api/terminals"), ("GET", "/api/terminals"), ("POST", "/api/kernels"), ("GET", "/api/kernels"),
    ("GET", "/api/contents"), ("GET", "/api/sessions"), ("POST", "/api/sessions"), ("GET", "/api/kernelspecs"),
])
def test_a_students_token_reaches_hive_labs_api_only(srv, method, path):
    body = {"path": "x.ipynb", "type": "notebook", "kernel": {"name": "python3"}} if path == "/api/sessions" else {}
    r = srv.request(method, path, user=A, json=body if method == "POST" else None)
    assert r.status_code == 403, (method, path, r.status_code, r.text[:200])
    assert srv.request("GET", "me", user=A).status_code == 200


def test_the_admin_keeps_the_jupyter_apis(srv):
    for path in ("/api/contents", "/api/kernels", "/api/sessions", "/api/terminals"):
        assert srv.request("GET", path).status_code == 200, path
