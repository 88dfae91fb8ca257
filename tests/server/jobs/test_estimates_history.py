"""The start estimates' run-time history, learned from the store without decoding every succeeded job's
spec on each recompute (issue 40): a job's kind is read once and kept while it is among the newest
``HISTORY_ROWS`` succeeded jobs. What it learns must be exactly what reading them all from scratch learns,
after every batch of jobs that succeeded, as the window slides past the oldest."""

from __future__ import annotations

from hive_lab_server.jobs import start_estimates
from hive_lab_server.jobs.start_estimates import StartEstimates


def learned(est: StartEstimates) -> dict:
    return {key: list(runs) for key, runs in est._history._runs.items()}


def from_scratch(service) -> dict:
    fresh = StartEstimates(service)
    fresh._learn()
    return learned(fresh)


def test_the_history_learned_step_by_step_is_the_history_read_from_scratch(api, wait_state, hive, monkeypatch):
    monkeypatch.setattr(start_estimates, "HISTORY_ROWS", 4)  # the window slides within the test
    # learning step by step on an instance of its own: the service's learns on its worker thread whenever it
    # recomputes, and two threads learning into one instance race (a busy CI run: one's older window won)
    est = StartEstimates(hive.service)
    commands = ["true", "exit 0", "true", ": a", "exit 0", "true", ": b", "true"]
    seen_kinds = []
    for batch in (commands[:3], commands[3:5], commands[5:]):
        ids = []
        for command in batch:
            code, job = api("POST", "jobs", {"command": command, "tasks": [{"gpus": 1}]})
            assert code == 201, job
            ids.append(job["id"])
        for job_id in ids:
            wait_state(job_id, "succeeded")
        est._learn()
        assert learned(est) == from_scratch(hive.service)
        assert len(est._kinds) <= 4  # only the window's jobs are kept
        seen_kinds.append(sorted({kind for (_, kind) in learned(est)}))
    # the window (the 4 newest succeeded jobs) moved on: ": a" (the 4th job) is no longer in it
    assert seen_kinds == [["cmd:exit 0", "cmd:true"], ["cmd:: a", "cmd:exit 0", "cmd:true"],
                          ["cmd:: b", "cmd:exit 0", "cmd:true"]], seen_kinds
