"""Isolation through a REAL Jupyter server run as root in the token-map shared mode with
``c.Isolation.run_as = "owner"``: students' jobs run under their own Unix accounts, cannot read the
server's secrets, cannot make the server serve a file through a link they planted, die whole on
cancel; and a student's token reaches hive-lab's API only (no terminals, kernels, contents)."""

from __future__ import annotations

import os
import pathlib
import re
import stat
import subprocess
import time

import psutil
import pytest

from fixtures.live_server import LiveServer
from fixtures.unix_accounts import ACCOUNTS
from waiting import wait_until

A, B = ACCOUNTS


@pytest.fixture(scope="module")
def srv(unix_accounts):
    import shutil
    import tempfile

    base = tempfile.mkdtemp(prefix="hive-iso-live-", dir="/tmp")
    os.chmod(base, 0o711)  # jobs under other accounts must reach their dirs below it
    dev = pathlib.Path(base) / "dev"  # fake NVIDIA nodes (no GPUs here), world-openable as a careless install
    dev.mkdir(mode=0o755)
    for name, minor in (("nvidia0", 0), ("nvidia1", 1), ("nvidia2", 2), ("nvidia3", 3), ("nvidiactl", 255)):
        os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(195, minor))
        os.chmod(dev / name, 0o666)
    server = LiveServer(base, users={A: {}, B: {}, "no-account-x": {}, "daemon": {}}, vc_access={"*": ["*"]},
                        config={"Isolation": {"run_as": "owner", "gpu_device_glob": str(dev / "nvidia[0-9]*"),
                                              "gpu_control_globs": [str(dev / "nvidiactl")]}}).start()
    server.dev = dev
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


def _host_pids(uid: int, *argv: str) -> list[int]:
    """Pids (as this host sees them) of ``uid``'s processes running exactly ``argv``: a job runs in its own
    PID namespace, so the pids it prints itself ($$, $!) mean nothing out here."""
    return [p.pid for p in psutil.process_iter(["uids", "cmdline"])
            if p.info["uids"] and p.info["uids"].real == uid and p.info["cmdline"] == list(argv)]


def test_cancel_kills_a_setsid_daemon(srv, unix_accounts):
    uid = unix_accounts[A].pw_uid
    job_id = _submit(srv, A, "setsid sleep 3021 & sleep 300")
    wait_until(lambda: _host_pids(uid, "sleep", "3021"), "the daemon's start")
    assert srv.request("DELETE", f"jobs/{job_id}", user=A).status_code == 200
    assert _finished(srv, job_id, A)["state"] == "cancelled"
    wait_until(lambda: not _host_pids(uid, "sleep", "3021"), "the setsid daemon's end (it outlived its cancelled job)")


def test_a_planted_path_and_ld_preload_in_a_jobs_env_never_run_as_root(srv, unix_accounts):
    """Issue 22's escape through the REST API: the job's env puts the student's own setpriv/mv/sh first
    on PATH and the student's library in LD_PRELOAD. Nothing of it may run as root; the job, as the
    student, does run it (so the check could fail)."""
    from planted import plant

    planted = plant(pathlib.Path(srv.tmp) / f"planted-{time.monotonic_ns()}")
    job_id = _submit(srv, A, "id -u; sh -c 'echo inner'", env=planted.env, tasks=[{"gpus": 1}])
    job = _finished(srv, job_id, A)
    assert job["state"] == "succeeded", (job, _log(srv, job_id, A))
    assert planted.root_lines() == [], planted.lines()
    assert planted.ran_as(unix_accounts[A].pw_uid), planted.lines()


def _opened(output: str) -> dict[str, bool]:
    out = {}
    for line in output.splitlines():
        name, _, rest = line.partition(": ")
        if name.startswith("nvidia"):
            out[name] = "No such device" in rest  # got past the permission checks to the (absent) driver
    return out


def _probe(dev) -> str:
    return (f'echo "cvd=$CUDA_VISIBLE_DEVICES"; for d in nvidia0 nvidia1 nvidia2 nvidia3 nvidiactl; do '
            f'head -c1 {dev}/$d 2>&1 | sed "s/^/$d: /"; done')


def test_gpus_open_only_in_the_job_that_was_granted_them(srv, unix_accounts):
    from fixtures.unix_accounts import run_as

    for node in srv.dev.iterdir():  # locked down by the server at its start (no launcher here needs a group)
        st = node.stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o600), node
    own = run_as(unix_accounts[A], "/bin/sh", "-c", _probe(srv.dev)).stdout  # the student's own process
    assert not any(_opened(own).values()), own
    job_id = _submit(srv, A, _probe(srv.dev), tasks=[{"gpus": 1}])
    assert _finished(srv, job_id, A)["state"] == "succeeded"
    out = _log(srv, job_id, A)
    gpu = re.search(r"cvd=(\d+)", out).group(1)
    assert {k for k, v in _opened(out).items() if v} == {f"nvidia{gpu}", "nvidiactl"}, out


def test_a_setgid_copy_made_in_a_gpu_job_opens_no_gpu_after_it(srv, unix_accounts):
    """The reviewer's escape through the REST API: a 1-GPU job makes a setgid copy of python3 in the
    student's home for every group it holds; the student's own process running it opens no GPU node."""
    from fixtures.unix_accounts import run_as

    student = unix_accounts[A]
    home = f"{student.pw_dir}/hive-gpy-live"
    job_id = _submit(srv, A, f"rm -rf {home}; mkdir -p {home}; for g in $(id -G); do cp /usr/bin/python3 "
                             f"{home}/gpy-$g && chgrp $g {home}/gpy-$g && chmod 2755 {home}/gpy-$g; done; "
                             f"echo groups $(id -G)", tasks=[{"gpus": 1}])
    try:
        assert _finished(srv, job_id, A)["state"] == "succeeded"
        groups = _log(srv, job_id, A).split("groups ", 1)[1].split()
        assert sorted(os.listdir(home)) == sorted(f"gpy-{g}" for g in groups)
        probe = (f"import os; print('egid', os.getegid())\nfor n in {sorted(p.name for p in srv.dev.iterdir())!r}:\n"
                 f"    try: os.close(os.open({str(srv.dev)!r} + '/' + n, os.O_RDWR)); print(n, 'OPENED')\n"
                 f"    except OSError as e: print(n, e.strerror)\n")
        for g in groups:
            r = run_as(student, f"{home}/gpy-{g}", "-c", probe)
            assert f"egid {g}" in r.stdout, (g, r.stdout, r.stderr)
            results = [line for line in r.stdout.splitlines() if line.startswith("nvidia")]
            assert len(results) == 5 and all(line.endswith("Permission denied") for line in results), (g, r.stdout)
    finally:
        subprocess.run(["rm", "-rf", home], check=False)


def test_the_jobs_root_is_not_listable_and_system_accounts_run_nothing(srv, unix_accounts):
    from fixtures.unix_accounts import run_as

    assert stat.S_IMODE(srv.jobs_root.stat().st_mode) == 0o711
    r = run_as(unix_accounts[B], "ls", str(srv.jobs_root))
    assert r.returncode != 0 and "Permission denied" in r.stderr, r
    r = srv.request("POST", "jobs", user="daemon", json={"command": "id -u", "tasks": [{"gpus": 0}]})
    assert r.status_code == 403 and "system account" in r.text and "Isolation.accounts" in r.text, r.text


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


def test_the_gpu_lock_down_survives_a_restart(srv):
    """A driver reload (or an admin) made the nodes world-openable again: the next start locks them."""
    for node in srv.dev.iterdir():
        os.chmod(node, 0o666)
    srv.restart()
    for node in srv.dev.iterdir():
        st = node.stat()  # the local launcher needs no group: root only
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o600), node
