"""Pause, resume, migrate and resize where users work: ``Client``/``Job`` methods, the ``hive-lab``
CLI and the ``%hive_*`` magics, each against a REAL server on a mixed K80 + V100 cluster (local
launcher). Who may is the server's business (pause/resume: owner or admin; migrate/resize: admins):
the tests check that each surface passes the server's refusal on as its sentence (403, 409, 400).

Jobs here do not checkpoint (a plain ``sleep``): a stop is SIGTERM and the job starts again; what is
checked is the request and the job's state and history, waited for on conditions."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from fixtures.live_server import LiveServer

from hive_lab import Client
from hive_lab.errors import BadRequest, Conflict, Forbidden
from waiting import wait_until

MIXED = {
    "physicalCluster": {
        "cellTypes": {
            "K80-NODE": {"childCellType": "K80", "childCellNumber": 2, "isNodeLevel": True},
            "V100-NODE": {"childCellType": "V100", "childCellNumber": 2, "isNodeLevel": True},
        },
        "physicalCells": [{"cellType": "K80-NODE", "cellAddress": "k80-node"},
                          {"cellType": "V100-NODE", "cellAddress": "v100-node"}],
    },
    "virtualClusters": {"lab": {"virtualCells": [{"cellType": "K80-NODE", "cellNumber": 1},
                                                 {"cellType": "V100-NODE", "cellNumber": 1}]}},
}
HIVE_LAB = str(pathlib.Path(sys.executable).parent / "hive-lab")


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LiveServer(
        tmp_path_factory.mktemp("job-actions"), cluster_config=MIXED,
        users={"ann": {}, "bob": {}, "carol": {}}, vc_access={"ann": ["lab"], "bob": ["lab"]},
        admin_users=["carol"], config={"HiveLabApp": {"cancel_wait_s": 0.1}},
    )
    server.start()
    yield server
    server.close()


@pytest.fixture
def clients(srv):
    """ann (owner), bob (another user), carol (admin); ann's unfinished jobs are cancelled afterwards."""
    out = {name: Client(srv.url, srv.tokens[name]) for name in ("ann", "bob", "carol")}
    yield out
    for job in out["ann"].jobs(user="me", state="submitted,queued,scheduled,running,paused"):
        try:
            out["ann"].cancel(job["id"])
        except Exception:  # noqa: BLE001 - it may have just finished
            pass


def submit(client: Client, name: str, **extra) -> dict:
    return client.submit({"name": name, "vc": "lab", "command": "sleep 600",
                          "tasks": [{"gpus": 1, "gpu_type": "K80"}], **extra})


def wait_for(client: Client, job_id: str, cond, what: str, timeout: float = 60.0) -> dict:
    last: dict = {}

    def reached():
        last.update(client.job(job_id))
        return dict(last) if cond(last) else None

    return wait_until(reached, lambda: f"{job_id} to be {what}; it is {last.get('state')}", timeout=timeout)


def state_is(state: str):
    return lambda job: job["state"] == state


def on_node(node: str, gpus: int = 1):
    return lambda job: (job["state"] == "running" and [p["node"] for p in job["placement"]] == [node]
                        and len(job["placement"][0]["gpus"]) == gpus)


def history(job: dict) -> list[str]:
    return [h.get("reason") or "" for h in job.get("history") or []]


# --- the Python client ---------------------------------------------------------------------------------

def test_client_pause_resume_migrate_resize(clients):
    ann, bob, carol = clients["ann"], clients["bob"], clients["carol"]
    job = submit(ann, "client-actions", min_gpus=1, max_gpus=2)
    wait_for(ann, job["id"], on_node("k80-node"), "running on the K80s")

    # another user may not pause or resume ann's job: the server's 403 sentence
    with pytest.raises(Forbidden) as err:
        bob.pause(job["id"])
    assert err.value.status == 403 and f"user bob may not pause job {job['id']} (it belongs to ann)" in str(err.value)

    ann.pause(job, reason="lunch")  # a job dict works as well as an id
    paused = wait_for(ann, job["id"], state_is("paused"), "paused")
    assert paused["placement"] == [] and paused["reason"] == "paused: by ann (lunch)"
    with pytest.raises(Conflict, match="already paused"):
        ann.pause(job["id"])
    with pytest.raises(Forbidden, match="bob may not resume"):
        bob.resume(job["id"])

    handle = ann.handle(job["id"])
    handle.resume()
    assert handle.info["state"] in ("queued", "scheduled", "running")
    wait_for(ann, job["id"], on_node("k80-node"), "running again")
    with pytest.raises(Conflict, match="not paused"):
        ann.resume(job["id"])

    # migrate and resize: admins only
    with pytest.raises(Forbidden, match="only admins may"):
        ann.migrate(job["id"], "V100")
    with pytest.raises(Forbidden, match="only admins may"):
        handle.resize(2)
    with pytest.raises(BadRequest, match="no GPU type 'TPU'") as err:
        carol.migrate(job["id"], "TPU")
    assert err.value.field == "gpu_type"
    with pytest.raises(Conflict, match="already runs on K80"):
        carol.migrate(job["id"], "k80")
    carol.migrate(job["id"], "v100", reason="faster type")
    wait_for(ann, job["id"], on_node("v100-node"), "running on the V100s")

    with pytest.raises(BadRequest, match=r"range 1\.\.2, got 3"):
        carol.resize(job["id"], 3)
    carol.handle(job["id"]).resize(2, reason="room")
    done = wait_for(ann, job["id"], on_node("v100-node", gpus=2), "running on 2 V100s")
    reasons = history(done)
    assert "paused: by ann (lunch)" in reasons and "resumed: by ann" in reasons
    assert "migrated K80 -> V100: by carol (faster type)" in reasons
    assert "resized 1 -> 2 GPUs: by carol (room)" in reasons
    assert done["retries"] == 0

    not_elastic = submit(ann, "not-elastic")
    with pytest.raises(Conflict, match="not elastic"):
        carol.resize(not_elastic["id"], 2)


# --- the hive-lab CLI ----------------------------------------------------------------------------------

def cli(srv, *args, user="ann"):
    command, *rest = args
    return subprocess.run([HIVE_LAB, command, "--url", srv.url, "--token", srv.tokens[user], *rest],
                          capture_output=True, text=True, timeout=60)


def test_cli_pause_resume_migrate_resize(srv, clients):
    ann = clients["ann"]
    job = submit(ann, "cli-actions", min_gpus=1, max_gpus=2)["id"]
    wait_for(ann, job, on_node("k80-node"), "running")

    out = cli(srv, "pause", job, "--reason", "not now", user="bob")
    assert out.returncode == 1 and out.stdout == ""
    assert f"hive-lab: {job}: user bob may not pause job {job} (it belongs to ann)" in out.stderr
    assert "Traceback" not in out.stderr

    out = cli(srv, "pause", job, "--reason", "not now", "--json")
    assert out.returncode == 0, out.stderr
    assert [j["id"] for j in json.loads(out.stdout)["jobs"]] == [job]
    wait_for(ann, job, state_is("paused"), "paused")
    out = cli(srv, "pause", job)  # a table-less line for people; the 409 sentence when it cannot
    assert out.returncode == 1 and f"job {job} is already paused" in out.stderr

    out = cli(srv, "resume", job)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"{job} cli-actions: ")
    wait_for(ann, job, on_node("k80-node"), "running again")

    out = cli(srv, "migrate", job, "--gpu-type", "V100")
    assert out.returncode == 1 and "only admins may" in out.stderr
    out = cli(srv, "migrate", job, "--gpu-type", "TPU", user="carol")
    assert out.returncode == 1 and "the cluster has no GPU type 'TPU'" in out.stderr
    out = cli(srv, "migrate", job, "--gpu-type", "V100", "--json", user="carol")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["jobs"][0]["id"] == job
    wait_for(ann, job, on_node("v100-node"), "on the V100s")

    out = cli(srv, "resize", job, "--gpus", "5", user="carol")
    assert out.returncode == 1 and "range 1..2" in out.stderr
    out = cli(srv, "resize", job, "--gpus", "0", user="carol")  # refused before asking the server
    assert out.returncode == 2 and "at least 1 GPU" in out.stderr
    out = cli(srv, "resize", job, "--gpus", "2", "--reason", "room", user="carol")
    assert out.returncode == 0, out.stderr
    done = wait_for(ann, job, on_node("v100-node", gpus=2), "on 2 V100s")
    reasons = history(done)
    assert "paused: by ann (not now)" in reasons and "migrated K80 -> V100: by carol" in reasons
    assert "resized 1 -> 2 GPUs: by carol (room)" in reasons

    # several jobs at once: one refused, the others done; exit status 1, every answer in --json
    other = submit(ann, "cli-other")["id"]
    out = cli(srv, "pause", other, "j-999999", "--json")
    assert out.returncode == 1
    answers = json.loads(out.stdout)["jobs"]
    assert answers[0]["id"] == other and answers[1] == {"id": "j-999999", "status": 404,
                                                        "error": answers[1]["error"]}
    assert "j-999999" in answers[1]["error"]


# --- the %hive_* magics --------------------------------------------------------------------------------

@pytest.fixture
def shell(srv, monkeypatch):
    from IPython.core.getipython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    ip = start_ipython() or get_ipython()
    ip.run_line_magic("load_ext", "hive_lab")
    magics = ip.magics_manager.registry["HiveLabMagics"]
    old = magics._client
    yield ip, magics
    magics.client = old


def test_magics_pause_resume_migrate_resize(srv, clients, shell, capsys):
    ip, magics = shell
    ann = clients["ann"]
    job = submit(ann, "magic-actions", min_gpus=1, max_gpus=2)["id"]
    wait_for(ann, job, on_node("k80-node"), "running")

    magics.client = clients["bob"]
    ip.run_line_magic("hive_pause", job)
    captured = capsys.readouterr()
    assert f"hive-lab: {job}: user bob may not pause job {job} (it belongs to ann)" in captured.err

    magics.client = ann
    ip.run_line_magic("hive_pause", f"{job} --reason tea")
    assert capsys.readouterr().out.startswith(f"{job} magic-actions: ")
    wait_for(ann, job, state_is("paused"), "paused")
    ip.run_line_magic("hive_resume", job)
    assert capsys.readouterr().out.startswith(f"{job} magic-actions: ")
    wait_for(ann, job, on_node("k80-node"), "running again")
    ip.run_line_magic("hive_migrate", f"{job} --gpu-type V100")
    assert "only admins may" in capsys.readouterr().err

    magics.client = clients["carol"]
    ip.run_line_magic("hive_migrate", f"{job} --gpu-type V100")
    wait_for(ann, job, on_node("v100-node"), "on the V100s")
    ip.run_line_magic("hive_resize", f"{job} --gpus 2")
    assert capsys.readouterr().err == ""
    done = wait_for(ann, job, on_node("v100-node", gpus=2), "on 2 V100s")
    reasons = history(done)
    assert "paused: by ann (tea)" in reasons and "resized 1 -> 2 GPUs: by carol" in reasons


# --- measured throughputs in the job's details ----------------------------------------------------------

REPORTS = ("print('hive-progress: steps=0 t=100 attempt=1 gpu_type=K80'); "
           "print('hive-progress: steps=50 t=110 attempt=1 gpu_type=K80')")


def test_job_details_show_measured_throughputs(srv, clients):
    ann = clients["ann"]
    job = ann.submit({"name": "reports", "vc": "lab", "command": f'python3 -c "{REPORTS}"',
                      "tasks": [{"gpus": 1, "gpu_type": "K80"}]})["id"]
    wait_for(ann, job, state_is("succeeded"), "done")
    progress = ann.job(job)["progress"]
    assert progress["steps"] == 50 and progress["rates"] == {"K80": {"steps_per_s": 5.0, "seconds": 10.0}}
    out = cli(srv, "jobs", job)
    assert out.returncode == 0, out.stderr
    assert "  progress: 50 steps (last on K80); measured: K80 5 steps/s (over 10 s)" in out.stdout


def test_hive_lab_progress_goes_through_a_side_channel_not_the_users_output(srv, clients):
    """``hive_lab.progress`` inside a job writes to ``$HIVE_PROGRESS_FILE``: the log holds only what the
    user printed, and the job's details still show the steps (issue 30)."""
    import sys

    ann = clients["ann"]
    code = ("import hive_lab; hive_lab.progress(0, total=100, t=100); print('user output'); "
            "hive_lab.progress(40, total=100, t=110)")
    job = ann.submit({"name": "side-channel", "vc": "lab", "command": f'{sys.executable} -c "{code}"',
                      "tasks": [{"gpus": 1, "gpu_type": "K80"}]})["id"]
    wait_for(ann, job, state_is("succeeded"), "done")
    assert ann.log_text(job) == "user output\n"
    progress = ann.job(job)["progress"]
    assert progress["steps"] == 40 and progress["total_steps"] == 100 and progress["remaining_steps"] == 60


def test_a_running_jobs_line_says_its_progress_in_a_few_words():
    from datetime import datetime, timezone

    from hive_lab.format import progress_short, status_line

    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    job = {"id": "j-000001", "name": "train", "state": "running", "started_at": "2026-01-01T00:00:00Z",
           "placement": [{"task": "main-0", "node": "node-0", "gpus": [0]}],
           "progress": {"steps": 40, "total_steps": 100, "gpu_type": "K80", "rates": {"K80": {"steps_per_s": 4.0}},
                        "estimated_finish": at.timestamp() + 40}}
    assert status_line(job, at.replace(second=25)) == ("j-000001 train: running on node-0 GPU 0 for 25 s; "
                                                       "step 40 of 100, 4 steps/s, about 15 s left")
    assert progress_short({"progress": {"steps": 3, "rates": {}}}) == "step 3"
    assert progress_short({"progress": None}) is None


def test_progress_text():
    from hive_lab.format import progress_text, when_text

    assert progress_text({"progress": None}) is None
    assert progress_text({"progress": {"steps": 3, "at": 1.0, "gpu_type": None, "rates": {},
                                       "known_rates": None}}) == "3 steps; no rate measured yet"
    job = {"progress": {"steps": 1200, "at": 1.0, "gpu_type": "V100",
                        "rates": {"V100": {"steps_per_s": 40.0, "seconds": 1.0},
                                  "K80": {"steps_per_s": 10.0, "seconds": 3.0}},
                        "known_rates": {"v100": 7.922, "k80": 1.26}}}
    assert progress_text(job) == ("1200 steps (last on V100); measured: K80 10 steps/s (over 3.0 s), "
                                  "V100 40 steps/s (over 1.0 s); Gavel's figures: k80 1.26, v100 7.92 steps/s")
    job["progress"].update(total_steps=5000, remaining_steps=3800, estimated_finish=0.0)
    assert progress_text(job).startswith("1200 steps of 5000 (last on V100); 3800 to go, "
                                         f"estimated finish {when_text(0.0)}; measured: ")  # local, with zone
