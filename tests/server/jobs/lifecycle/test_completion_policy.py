"""Completion policies (issue 29): a task group's ``min_failed`` / ``min_succeeded`` (OpenPAI's
``completion``, FrameworkController's ``FrameworkAttemptCompletionPolicy``) decide when a job of several
tasks ends and how; the tasks that ended are stored, so a restart neither counts them again nor calls
them lost.

The machine is pure, so most of this is the machine; the live tests run a real server: a parameter
server that never exits is stopped once its worker succeeds, and a job with a task already over
survives a SIGKILL of the server."""

from __future__ import annotations

import pathlib

import pytest

from fixtures.live_server import LiveServer
from hive_lab_server.api.formats import read_job
from hive_lab_server.jobs.lifecycle import machine as m
from hive_lab_server.wire.launch_spec import LaunchSpec
from hive_lab_server.wire.states import Intent, JobState
from hive_lab_server.wire.spec import SpecError, parse_job_spec
from waiting import wait_until

S = JobState
DATA = pathlib.Path(__file__).resolve().parents[2] / "api" / "formats" / "data"


def running(tasks, policy=(), max_retries=0) -> m.Job:
    job = m.Job("j", max_retries=max_retries, policy=tuple(policy))
    job, _ = m.step(job, m.Queued())
    job, _ = m.step(job, m.Placed(tuple(tasks)))
    job, _ = m.step(job, m.LaunchBegin(1))
    job, _ = m.step(job, m.LaunchStarted(1, at=0.0))
    assert job.state is S.RUNNING
    return job


def stops(effects) -> bool:
    return any(isinstance(e, m.StopTasks) for e in effects)


# --- the machine ----------------------------------------------------------------------------------

def test_a_worker_reaching_min_succeeded_ends_the_job_as_succeeded_and_stops_the_parameter_server():
    job = running(["ps-0", "worker-0", "worker-1"], [m.GroupPolicy("worker", min_succeeded=2)])
    job, effects = m.step(job, m.Exit("worker-0", 0))
    assert job.state is S.RUNNING and job.intent is None and not stops(effects)
    job, effects = m.step(job, m.Exit("worker-1", 0))
    assert job.intent is Intent.SUCCEED and stops(effects)
    assert job.intent_reason == ("2 tasks of group worker exited with code 0 (min_succeeded 2); its 1 other "
                                 "task was stopped")
    job, _ = m.step(job, m.Exit("ps-0", 143))  # SIGTERM: the stop, not a failure
    assert job.intent is Intent.SUCCEED
    job, effects = m.step(job, m.Stopped(1))
    assert job.state is S.SUCCEEDED and job.exit_code == 0
    assert m.Core("finish") in effects


def test_the_default_policy_is_the_gang_one_the_first_failure_fails_the_job():
    job = running(["w-0", "w-1"])
    job, effects = m.step(job, m.Exit("w-0", 3))
    assert job.intent is Intent.FAIL and stops(effects) and job.intent_reason == "task w-0 exited with code 3"
    job, _ = m.step(job, m.Exit("w-1", 143))
    job, _ = m.step(job, m.Stopped(1))
    assert job.state is S.FAILED and job.exit_code == 3
    # all tasks exiting 0 succeed, as ever
    ok = running(["w-0", "w-1"])
    ok, effects = m.step(ok, m.Exit("w-0", 0))
    assert [e.fields for e in effects if isinstance(e, m.Record)] == [{"task_exits": {"w-0": 0}}]
    ok, _ = m.step(ok, m.Exit("w-1", 0))
    assert ok.state is S.SUCCEEDED and ok.reason == "all 2 tasks exited with code 0"


def test_failures_under_min_failed_let_the_others_run_and_the_count_fails_it():
    job = running(["w-0", "w-1", "w-2"], [m.GroupPolicy("w", min_failed=2)])
    job, effects = m.step(job, m.Exit("w-0", 1))
    assert job.state is S.RUNNING and job.intent is None and not stops(effects)
    job, effects = m.step(job, m.Exit("w-2", 7))
    assert job.intent is Intent.FAIL and stops(effects)
    assert job.intent_reason == "task w-2 exited with code 7 (2 of group w failed: min_failed 2)"
    job, _ = m.step(job, m.Exit("w-1", 143))
    job, _ = m.step(job, m.Stopped(1))
    assert job.state is S.FAILED and job.exit_code == 7


def test_without_min_failed_a_job_whose_tasks_all_ended_succeeds_and_says_which_failed():
    job = running(["ps-0", "worker-0"], [m.GroupPolicy("ps", min_failed=None)])
    job, _ = m.step(job, m.Exit("ps-0", 2))
    assert job.state is S.RUNNING and job.intent is None
    job, _ = m.step(job, m.Exit("worker-0", 0))
    assert job.state is S.SUCCEEDED and job.exit_code == 0
    assert job.reason == "all 2 tasks ended, 1 failed (ps-0 with code 2), fewer than their group's min_failed"
    # the other group keeps the default: its first failure fails the job
    job = running(["ps-0", "worker-0", "worker-1"], [m.GroupPolicy("ps", min_failed=None)])
    job, _ = m.step(job, m.Exit("worker-1", 1))
    assert job.intent is Intent.FAIL


def test_a_lost_task_is_never_counted_as_an_outcome():
    job = running(["w-0", "w-1"], [m.GroupPolicy("w", min_failed=None, min_succeeded=1)], max_retries=1)
    job, effects = m.step(job, m.Exit("w-0", None, "lost"))
    assert job.intent is Intent.LOST and job.ended == ()
    job, _ = m.step(job, m.Stopped(1))
    assert job.state is S.QUEUED and job.retries == 1


def test_a_cancel_while_the_rest_of_a_succeeded_job_stops_keeps_it_succeeded():
    job = running(["ps-0", "worker-0"], [m.GroupPolicy("worker", min_succeeded=1)])
    job, _ = m.step(job, m.Exit("worker-0", 0))
    job, effects = m.step(job, m.Cancel("ann"))
    assert job.intent is Intent.SUCCEED and effects == []
    job, _ = m.step(job, m.Stopped(1))
    assert job.state is S.SUCCEEDED


def test_a_new_attempt_counts_from_zero():
    job = running(["w-0", "w-1"], [m.GroupPolicy("w", min_failed=2)], max_retries=1)
    job, _ = m.step(job, m.Exit("w-0", 1))
    job, _ = m.step(job, m.Preempt("vc"))
    job, _ = m.step(job, m.Exit("w-1", 143))
    job, _ = m.step(job, m.Stopped(1))
    assert job.state is S.QUEUED and job.ended == ()
    job, effects = m.step(job, m.Placed(("w-0", "w-1")))
    assert any(isinstance(e, m.Record) and e.fields.get("task_exits", 0) is None for e in effects)
    job, _ = m.step(job, m.LaunchBegin(2))
    job, _ = m.step(job, m.LaunchStarted(2, at=1.0))
    job, _ = m.step(job, m.Exit("w-1", 1))  # one failure of this attempt: under min_failed 2
    assert job.state is S.RUNNING and job.intent is None


def test_a_restart_knows_which_tasks_were_over_before_it():
    """Before the store kept them, a task that had exited 0 (exit acknowledged, so never reported again)
    was 'not running after the server restarted': lost, and the job failed or ran again."""
    stored = m.Job("j", state=S.RUNNING, attempt=1, tasks=("w-0", "w-1"), left=frozenset({"w-0", "w-1"}),
                   ended=(("w-0", 0),), started_at=0.0)
    job, _ = m.step(stored, m.Recovered(frozenset({"w-1"}), at=5.0))
    assert job.state is S.RUNNING and job.left == {"w-1"} and job.intent is None
    job, _ = m.step(job, m.Exit("w-1", 0))
    assert job.state is S.SUCCEEDED
    # the policy's count goes on from the stored outcomes
    stored = m.Job("j", state=S.RUNNING, attempt=1, tasks=("w-0", "w-1", "w-2"), ended=(("w-0", 0),),
                   policy=(m.GroupPolicy("w", min_succeeded=2),), started_at=0.0)
    job, _ = m.step(stored, m.Recovered(frozenset({"w-1", "w-2"}), at=5.0))
    job, _ = m.step(job, m.Exit("w-2", 0))
    assert job.intent is Intent.SUCCEED


@pytest.mark.parametrize("intent, state, code", [(Intent.SUCCEED, S.SUCCEEDED, 0), (Intent.FAIL, S.FAILED, 3)])
def test_a_restart_finishes_a_policy_stop_whose_tasks_are_gone(intent, state, code):
    stored = m.Job("j", state=S.SCHEDULED, attempt=1, launched=True, tasks=("a-0", "b-0"), intent=intent,
                   intent_reason="why", stop_code=code, ended=(("a-0", code),))
    job, _ = m.step(stored, m.Recovered(frozenset()))
    assert job.state is state and job.exit_code == code and job.reason == "why"


# --- the spec and the formats ---------------------------------------------------------------------

def test_the_spec_refuses_a_count_no_group_can_reach():
    with pytest.raises(SpecError) as err:
        parse_job_spec({"command": "x", "tasks": [{"name": "w", "count": 2, "min_succeeded": 3}]})
    assert err.value.field == "tasks[0].min_succeeded" and "at most 2" in err.value.message
    spec = parse_job_spec({"command": "x", "tasks": [{"name": "w", "count": 2, "min_failed": None,
                                                      "min_succeeded": 1}]})
    assert m.completion_policy(spec.tasks) == (m.GroupPolicy("w", None, 1),)
    # what recovery reads back from the store: the same policies
    assert m.completion_policy(LaunchSpec.of(spec.model_dump(mode="json")).tasks) == (m.GroupPolicy("w", None, 1),)
    assert m.completion_policy(LaunchSpec.of(parse_job_spec({"command": "x"}).model_dump(mode="json")).tasks) == ()


def policies(path: str) -> dict[str, tuple]:
    spec = read_job((DATA / path).read_bytes(), seal=lambda values: {k: "sealed" for k in values})
    assert not any("min" in n and "Count" in n or "completion" in n or "TaskCompleted" in n
                   for n in spec.source.not_applied), spec.source.not_applied
    return {t.name: (t.count, t.min_failed, t.min_succeeded) for t in spec.tasks}


def test_openpai_completion_policies_are_applied_as_the_protocol_means_them():
    # v2, the protocol's own example: the worker's success ends the job; the parameter server never does
    assert policies("openpai_v2/protocol_example.yaml") == {"worker": (1, 1, 1), "ps_server": (1, 1, None)}
    # minSucceededInstances -1: never
    assert policies("openpai_v2/cifar10_vgg16_tf_gpu_distributed.yaml") == {"taskrole": (1, 1, None)}
    # v1, OpenPAI's job tutorial: the job succeeds when its 2 workers have
    assert policies("openpai_v1/job_tutorial_example.json")["worker"] == (2, 1, 2)
    # Volcano's own TensorFlow example: the worker task's TaskCompleted -> CompleteJob
    assert policies("kubernetes/volcano.yaml") == {"ps": (1, 1, None), "worker": (2, 1, 2)}


# --- live: a real server and the local launcher ---------------------------------------------------

CLUSTER = {"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"default": 4}}


@pytest.mark.timeout(120)
def test_a_parameter_server_that_never_exits_is_stopped_once_its_worker_succeeded(tmp_path):
    """OpenPAI's parameter-server pattern: without the policy this job would hold its GPUs forever."""
    runs = tmp_path / "runs.txt"
    srv = LiveServer(tmp_path / "srv", cluster_config=CLUSTER)
    try:
        srv.start()
        r = srv.request("POST", "jobs", json={"name": "ps-worker", "env": {"RUNS": str(runs)}, "tasks": [
            {"name": "ps", "gpus": 0, "cpus": 1, "command": 'echo ps-start >> "$RUNS"; exec sleep 600'},
            {"name": "worker", "gpus": 1, "min_succeeded": 1,
             "command": 'until grep -q ps-start "$RUNS" 2>/dev/null; do sleep 0.05; done; echo trained'}]})
        assert r.status_code == 201, r.text
        done = srv.wait_for_job(r.json()["id"], "succeeded", "failed", "cancelled", timeout=60)
        assert done["state"] == "succeeded" and done["exit_code"] == 0, done
        assert done["reason"] == ("1 task of group worker exited with code 0 (min_succeeded 1); its 1 other "
                                  "task was stopped"), done
        assert srv.request("GET", "cluster").json()["gpus_free"] == 4
    finally:
        srv.close()


@pytest.mark.timeout(180)
def test_a_task_that_ended_before_the_server_was_killed_is_neither_lost_nor_run_again(tmp_path):
    """Task 0 exits 0 and its exit is acknowledged (the launcher forgets it); the server is SIGKILLed and
    restarted while task 1 runs. Before the store kept ended tasks, the restart found task 0 neither
    running nor reported: 'lost', and the job ran again (or failed without a retry left)."""
    runs, go = tmp_path / "runs.txt", tmp_path / "go"
    srv = LiveServer(tmp_path / "srv", cluster_config=CLUSTER)
    try:
        srv.start()
        r = srv.request("POST", "jobs", json={
            "name": "pair", "max_retries": 1, "env": {"RUNS": str(runs), "GO": str(go)},
            "tasks": [{"name": "w", "count": 2, "gpus": 1, "command": (
                'echo "start $HIVE_TASK_NAME $HIVE_ATTEMPT" >> "$RUNS"; '
                '[ "$HIVE_TASK_INDEX" = 0 ] && exit 0; while [ ! -e "$GO" ]; do sleep 0.05; done')}]})
        assert r.status_code == 201, r.text
        job_id = r.json()["id"]
        srv.wait_for_job(job_id, "running")
        records = lambda: sorted(srv.jobs_root.glob(f".*launcher/{job_id}/*"))  # noqa: E731
        wait_until(lambda: records() and not any(p.name.startswith("w-0.") for p in records()),
                   "task w-0's exit recorded and acknowledged (the launcher forgot it)")
        srv.kill()
        srv.start()
        job = srv.request("GET", f"jobs/{job_id}").json()
        assert job["state"] == "running" and job["retries"] == 0, job
        go.touch()
        done = srv.wait_for_job(job_id, "succeeded", "failed", timeout=60)
        assert done["state"] == "succeeded" and done["retries"] == 0, done
        assert sorted(runs.read_text().splitlines()) == ["start w-0 1", "start w-1 1"]  # each ran once
    finally:
        srv.close()
