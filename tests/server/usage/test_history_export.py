"""``history_rows``: stored jobs and usage records -> history trace rows (pure; issue 28)."""

import json

import pytest

from hive_lab_server.usage.history_export import history_rows, live_policy

SINCE, UNTIL = 1000.0, 5000.0


def job(seq, user, submitted, state="succeeded", finished=None, **kw):
    return {"seq": seq, "id": f"j-{seq:06d}", "user": user, "vc": "cv-101", "kind": "batch", "state": state,
            "priority": 0, "opportunistic": False, "gpus": 1, "gpu_type": "T4", "submitted_at": submitted,
            "finished_at": finished, "user_group": "cv-101", "spec": {"tasks": [{"name": "main", "count": 1, "gpus": 1}]},
            **kw}


def use(seq, attempt, started, ended):
    return {"job_id": f"j-{seq:06d}", "attempt": attempt, "started_at": started, "ended_at": ended}


def test_waits_durations_and_pseudonyms():
    jobs = [job(1, "zoe", 1100, finished=1400), job(2, "ann", 1200, finished=2600),
            job(3, "zoe", 1300, state="cancelled", finished=1350), job(4, "ann", 4000, state="queued")]
    usage = [use(1, 1, 1100, 1400),
             use(2, 1, 1400, 1500), use(2, 2, 2000, 2600)]  # preempted at 1500, queued again, ran from 2000
    rows = {r["job_id"]: r for r in history_rows(jobs, usage, SINCE, UNTIL)}
    one, two, three, four = (rows[f"j-00000{i}"] for i in range(1, 5))
    assert (one["submit_time_s"], one["duration_s"], one["observed_wait_s"]) == (100, 300, 0)
    assert (two["duration_s"], two["observed_wait_s"]) == (700, 200 + 500)  # both attempts; both waits
    assert (three["duration_s"], three["observed_wait_s"], three["end_time_s"]) == (None, 50, 350)
    assert (four["duration_s"], four["observed_wait_s"], four["end_time_s"]) == (None, 1000, None)  # still waiting
    assert [r["user"] for r in (one, two, three, four)] == ["user-001", "user-002", "user-001", "user-002"]
    assert json.loads(one["tasks"]) == [{"count": 1, "gpus": 1, "name": "main"}]
    real = history_rows(jobs, usage, SINCE, UNTIL, real_names=True)
    assert [r["user"] for r in real] == ["zoe", "ann", "zoe", "ann"]


def test_jobs_running_at_the_window_start_are_carried_over_with_their_time_inside_it():
    jobs = [job(1, "ann", 500, finished=1600), job(2, "bob", 100, finished=900), job(3, "cy", 800, state="running")]
    usage = [use(1, 1, 600, 1600), use(2, 1, 100, 900), use(3, 1, 900, None)]
    rows = history_rows(jobs, usage, SINCE, UNTIL)
    assert [r["job_id"] for r in rows] == ["j-000001", "j-000003"]  # j-000002 ended before the window
    assert [(r["submit_time_s"], r["duration_s"], r["carried_over"]) for r in rows] == [(0, 600, 1), (0, 4000, 1)]


def test_shares_kernels_priorities_and_time_limits_are_kept():
    spec = {"tasks": [{"name": "kernel", "count": 1, "gpus": 0.5}], "time_limit_s": 7200}
    rows = history_rows([job(1, "ann", 2000, kind="kernel", spec=spec, priority=-1, state="running")],
                        [use(1, 1, 2000, None)], SINCE, UNTIL)
    (r,) = rows
    assert (r["kind"], r["priority"], r["time_limit_s"], r["num_gpus"]) == ("kernel", -1, 7200, 1)
    assert json.loads(r["tasks"])[0]["gpus"] == 0.5 and r["duration_s"] == 3000


@pytest.mark.parametrize("queue_policy, order", [("fair_share", "fair_share"), ("max_min_fairness_perf", "fifo")])
def test_live_policy(queue_policy, order):
    p = live_policy(queue_policy, True, False)
    assert (p["order"], p["overflow"], p["queueing"]) == (order, True, "skip")
    assert ("note" in p) == (order != queue_policy)
