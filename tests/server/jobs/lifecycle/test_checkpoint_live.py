"""Issue 17 live: a training-like plain-Python job that checkpoints is paused and resumed, migrated
between GPU types and resized on a simulated mixed cluster (K80 + V100 nodes, local launcher), through
the REST endpoints of a real Jupyter server, and ends with the same result as an uninterrupted run.

The job advances only as far as an allowance file (written by the test) lets it, so every pause lands
mid-run whatever the machine's speed; every wait is on a condition (a file, a job state)."""

from __future__ import annotations

import json
import pathlib
import sys
import time

import pytest

from checkpointing_job import MIXED, TRAIN, expected
from fixtures.live_server import LiveServer
from waiting import wait_until

TOTAL = 90


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LiveServer(
        tmp_path_factory.mktemp("checkpoint"), cluster_config=MIXED,
        users={"ann": {}, "bob": {}, "carol": {}}, vc_access={"ann": ["lab"], "bob": ["lab"]}, admin_users=["carol"],
        config={"HiveLabApp": {"checkpoint_grace_s": 20.0, "cancel_wait_s": 0.1}},
    )
    server.start()
    yield server
    server.close()


def submit(srv, command: str, **extra) -> str:
    body = {"vc": "lab", "command": command, "files": {"train.py": TRAIN}, "checkpoint": True,
            "tasks": [{"gpus": 1, "gpu_type": "K80"}], **extra}
    r = srv.request("POST", "jobs", user="ann", json=body)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def reached_step(srv, job_id: str) -> int:
    """How far the job got (it says so when it waits for a larger allowance)."""
    try:
        return int((srv.jobs_root / job_id / "output" / "reached").read_text())
    except (OSError, ValueError):
        return -1


def allow(srv, job_id: str, steps: int) -> None:
    path = srv.jobs_root / job_id / "allow"
    wait_until(lambda: path.parent.exists(), "the job dir")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(str(steps))
    tmp.replace(path)


def attempts(srv, job_id: str) -> list[dict]:
    path = srv.jobs_root / job_id / "output" / "attempts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def post(srv, job_id: str, action: str, user: str | None = None, **body):
    return srv.request("POST", f"jobs/{job_id}/{action}", user=user, json=body)


def placed_node(srv, job_id: str) -> str:
    return srv.request("GET", f"jobs/{job_id}").json()["placement"][0]["node"]


@pytest.mark.timeout(300)
def test_paused_migrated_resized_job_ends_like_an_uninterrupted_run(srv):
    pause_migrate_resize(srv, f"{sys.executable} train.py {TOTAL}")


def pause_migrate_resize(srv, command: str, **extra) -> None:
    # the reference: the same job, never interrupted
    ref = submit(srv, command, min_gpus=1, max_gpus=2, job_type="ResNet-50 (batch size 64)", **extra)
    allow(srv, ref, TOTAL)
    srv.wait_for_job(ref, "succeeded", timeout=60)
    reference = (srv.jobs_root / ref / "output" / "result.txt").read_text()
    assert reference == expected(TOTAL)

    job = submit(srv, command, min_gpus=1, max_gpus=2, job_type="ResNet-50 (batch size 64)", **extra)
    allow(srv, job, 30)
    srv.wait_for_job(job, "running")
    assert placed_node(srv, job) == "k80-node"
    wait_until(lambda: reached_step(srv, job) == 30, "30 steps done")

    # pause (its owner): the checkpoint signal, then paused, holding no GPU
    r = post(srv, job, "pause", user="ann", reason="lunch")
    assert r.status_code == 200, r.text
    paused = srv.wait_for_job(job, "paused")
    assert paused["placement"] == [] and paused["reason"] == "paused: by ann (lunch)"
    r = post(srv, job, "pause", user="ann")
    assert r.status_code == 409, r.text  # already paused: says so
    r = post(srv, job, "pause", user="bob")
    assert r.status_code == 403, r.text  # not bob's
    allow(srv, job, 50)
    r = post(srv, job, "resume", user="ann")
    assert r.status_code == 200, r.text
    wait_until(lambda: reached_step(srv, job) == 50, "50 steps done after the resume")
    assert [a["HIVE_RESUMED"] for a in attempts(srv, job)] == ["0", "1"]
    assert [a["from"] for a in attempts(srv, job)] == [0, 30]

    # migrate (an admin) K80 -> V100
    r = post(srv, job, "migrate", user="ann", gpu_type="V100")
    assert r.status_code == 403, r.text
    r = post(srv, job, "migrate", user="carol", gpu_type="TPU")
    assert r.status_code == 400, r.text
    r = post(srv, job, "migrate", user="carol", gpu_type="K80")
    assert r.status_code == 409, r.text  # it runs there
    r = post(srv, job, "migrate", user="carol", gpu_type="v100", reason="faster type")
    assert r.status_code == 200, r.text
    # more steps only once the attempt on the V100 runs: allowed while the K80 attempt still ran (its
    # checkpoint signal not yet there), that attempt took them itself (seen under load: step 70 on the K80)
    wait_until(lambda: len(attempts(srv, job)) == 3, "the attempt on the V100")
    assert placed_node(srv, job) == "v100-node"
    allow(srv, job, 70)
    wait_until(lambda: reached_step(srv, job) == 70, "70 steps done on the V100")
    assert placed_node(srv, job) == "v100-node"

    # resize (an admin) 1 -> 2 GPUs: the next attempt has world size 2
    r = post(srv, job, "resize", user="carol", gpus=3)
    assert r.status_code == 400, r.text  # outside 1..2
    r = post(srv, job, "resize", user="carol", gpus=2, reason="room on the V100s")
    assert r.status_code == 200, r.text
    wait_until(lambda: len(attempts(srv, job)) == 4, "the resized attempt")
    allow(srv, job, TOTAL)
    done = srv.wait_for_job(job, "succeeded", timeout=60)
    assert (srv.jobs_root / job / "output" / "result.txt").read_text() == reference

    runs = attempts(srv, job)
    assert [a["from"] for a in runs] == [0, 30, 50, 70]
    assert [a["HIVE_RESUMED"] for a in runs] == ["0", "1", "1", "1"]
    assert [a["HIVE_WORLD_SIZE"] for a in runs] == ["1", "1", "1", "2"]
    assert done["retries"] == 0  # pauses, migrations and resizes use no retry
    details = srv.request("GET", f"jobs/{job}").json()
    history = [h["reason"] for h in details["history"]]
    # progress: the rate learned per GPU type from hive_lab.progress lines; the known Gavel figures
    progress = details["progress"]
    assert progress["steps"] == TOTAL and progress["gpu_type"] == "V100"
    assert progress["rates"]["K80"]["steps_per_s"] == pytest.approx(10.0)
    assert progress["rates"]["V100"]["steps_per_s"] == pytest.approx(40.0)
    assert progress["known_rates"]["v100"] == pytest.approx(7.922054367597505)  # Gavel: 2 GPUs (its size now)
    assert "paused: by ann (lunch)" in history
    assert "resumed: by ann" in history
    assert "migrated K80 -> V100: by carol (faster type)" in history
    assert "resized 1 -> 2 GPUs: by carol (room on the V100s)" in history
    # the finished job: nothing more to do
    r = post(srv, job, "pause", user="ann")
    assert r.status_code == 409 and "already succeeded" in r.json()["error"]


@pytest.mark.timeout(120)
def test_a_job_that_does_not_checkpoint_is_restarted(srv):
    """A job that does not say it checkpoints (no ``checkpoint: true``) is stopped as always (SIGTERM)
    and starts from scratch."""
    marker = "runs.txt"
    cmd = f'echo "$HIVE_RESUMED" >> output/{marker}; while [ ! -e release ]; do sleep 0.02; done'
    r = srv.request("POST", "jobs", user="ann", json={"vc": "lab", "command": cmd, "tasks": [{"gpus": 1}]})
    assert r.status_code == 201, r.text
    job = r.json()["id"]
    srv.wait_for_job(job, "running")
    out = srv.jobs_root / job / "output" / marker
    wait_until(out.exists, "the first run")
    r = post(srv, job, "pause", user="ann")
    assert r.status_code == 200, r.text
    srv.wait_for_job(job, "paused")
    r = post(srv, job, "resize", user="carol", gpus=2)
    assert r.status_code == 409, r.text  # not elastic
    r = post(srv, job, "resume", user="ann")
    assert r.status_code == 200, r.text
    wait_until(lambda: out.read_text().split() == ["0", "0"], "the second run, from scratch")
    (srv.jobs_root / job / "release").touch()
    srv.wait_for_job(job, "succeeded")


@pytest.mark.docker
@pytest.mark.timeout(900)  # the first docker test may build the test image
def test_the_same_in_docker_containers(tmp_path, docker_engine, docker_test_image):
    """The checkpoint signal reaches the command in its container (docker-init forwards it);
    HIVE_CHECKPOINT_DIR is inside the bind-mounted job dir."""
    server = LiveServer(
        tmp_path / "srv", cluster_config=MIXED, launcher="docker",
        users={"ann": {}, "bob": {}, "carol": {}}, vc_access={"ann": ["lab"], "bob": ["lab"]}, admin_users=["carol"],
        config={"HiveLabApp": {"checkpoint_grace_s": 20.0, "cancel_wait_s": 0.1},
                "DockerLauncher": {"base_url": docker_engine.base_url, "pull_missing": False}},
    )
    try:
        server.start()
        pause_migrate_resize(server, f"exec python3 train.py {TOTAL}", image=docker_test_image)
    finally:
        server.close()
