"""``POST jobs?dry_run=true`` on a real Jupyter server (the built-in 4-GPU cluster, local launcher):
it says what would happen now, and stores, launches, publishes and preempts nothing."""

from __future__ import annotations

import json


def _spec(gpus, **kw):
    return {"command": "sleep 30", "tasks": [{"gpus": gpus}], **kw}


def _nothing_changed(api, hive, before_jobs, before_free, messages):
    assert api("GET", "jobs")[1]["total"] == before_jobs
    assert hive.service.scheduler.free_gpu_count() == before_free
    assert messages == []


def test_dry_run_says_where_it_would_start_and_changes_nothing(api, hive):
    messages: list[str] = []
    hive.service.events.subscribe(messages.append)
    code, answer = api("POST", "jobs?dry_run=true", _spec(2, time_limit_s=600))
    assert code == 200, answer
    assert answer["dry_run"] is True and answer["outcome"] == "start"
    assert [(p["node"], len(p["gpus"])) for p in answer["placement"]] == [("node-0", 2)]
    assert answer["preempts"] == [] and answer["estimated_start"] and answer["time_limit_s"] == 600
    _nothing_changed(api, hive, 0, 4, messages)
    code, job = api("POST", "jobs", _spec(2))  # no id was used up by the question
    assert code == 201 and job["id"] == "j-000001"


def test_dry_run_on_a_full_vc_says_why_it_would_wait(api, hive, wait_state):
    code, big = api("POST", "jobs", _spec(4))
    assert code == 201
    wait_state(big["id"], "running")
    messages: list[str] = []
    hive.service.events.subscribe(messages.append)
    code, answer = api("POST", "jobs?dry_run=1", _spec(1))
    assert code == 200 and answer["outcome"] == "wait", answer
    assert answer["reason"].startswith("VC default is using 4/4 guaranteed"), answer
    assert answer["placement"] == [] and answer["preempts"] == []
    _nothing_changed(api, hive, 1, 0, messages)


def test_dry_run_names_the_jobs_it_would_preempt_but_preempts_none(api, hive, wait_state):
    code, opp = api("POST", "jobs", _spec(4, priority="opportunistic"))
    assert code == 201
    wait_state(opp["id"], "running")
    code, answer = api("POST", "jobs?dry_run=true", _spec(2))
    assert code == 200 and answer["outcome"] == "preempt" and answer["preempts"] == [opp["id"]], answer
    assert len(answer["placement"][0]["gpus"]) == 2
    assert api("GET", f"jobs/{opp['id']}")[1]["state"] == "running"
    assert hive.service.scheduler.job(opp["id"]).preempted_by is None


def test_dry_run_refuses_what_a_submit_refuses(api):
    for path, body, field, text in [
        ("jobs?dry_run=maybe", _spec(1), "dry_run", "query parameter dry_run: use true or false"),
        ("jobs?dry_run=true", _spec(100), "tasks[0].gpus", "the cluster has 4 GPUs in all"),
        ("jobs?dry_run=true", _spec(1, vc="nope"), "vc", "VC 'nope' does not exist"),
        ("jobs?dry_run=true", _spec(1, time_limit_s=-1), "time_limit_s", "time_limit_s: input should be greater"),
    ]:
        code, body = api("POST", path, body)
        assert code == 400 and body["field"] == field and text in body["error"], (path, body)
    assert api("GET", "jobs")[1]["total"] == 0


def test_dry_run_answer_is_the_declared_model(api):
    from hive_lab_server.wire import models

    code, answer = api("POST", "jobs?dry_run=true", _spec(1))
    assert code == 200
    assert set(answer) <= set(models.WhatIf.model_fields), json.dumps(answer)
