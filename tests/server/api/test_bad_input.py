"""Bad input is a 4xx whose message says what to fix, never a 500 (issue 11, defects 4 and 5), against
the in-process Jupyter server of ``conftest.py``; nothing is stored for a refused submit."""

import pathlib

import pytest


def _deep(depth: int) -> str:
    return '{"command": "true", "env": ' + '{"a": ' * depth + '"x"' + "}" * depth + "}"


@pytest.mark.parametrize("body", ["[" * 1000 + "]" * 1000, _deep(1000), _deep(100)])
def test_deeply_nested_json_is_a_400(api, body):
    code, err = api("POST", "jobs", body)
    assert code == 400, err
    assert "nested too deeply" in err["error"] and "32 levels" in err["error"]
    assert api("GET", "jobs")[1]["total"] == 0


def test_nul_in_an_output_path_is_a_400(api, wait_state):
    code, job = api("POST", "jobs", {"command": "echo hi > $HIVE_OUTPUT_DIR/x", "tasks": [{"gpus": 1}]})
    assert code == 201, job
    wait_state(job["id"], "succeeded")
    code, err = api("GET", f"jobs/{job['id']}/outputs/x\x00")
    assert code == 400 and err["field"] == "path" and "NUL" in err["error"], err
    code, data = api("GET", f"jobs/{job['id']}/outputs/x")
    assert code == 200 and data == "hi\n"


@pytest.mark.parametrize("query, field", [
    ("offset=" + str(10**30), "offset"), ("offset=-1", "offset"), ("offset=" + "9" * 5000, "offset"),
])
def test_huge_or_negative_log_offsets_are_a_400(api, query, field):
    code, job = api("POST", "jobs", {"command": "true", "tasks": [{"gpus": 1}]})
    assert code == 201, job
    code, err = api("GET", f"jobs/{job['id']}/logs?{query}")
    assert code == 400 and err["field"] == field and f"query parameter {field}" in err["error"], err


@pytest.mark.parametrize("params, field", [
    ([("offset", "1"), ("offset", "2")], "offset"), ([("follow", "AAA")], "follow"),
])
def test_repeated_offsets_and_unknown_follow_values_are_a_400(api, jp_fetch, run, params, field):
    """What the OpenAPI document forbids is refused, not quietly read as something else (schemathesis found both)."""
    import json

    code, job = api("POST", "jobs", {"command": "true", "tasks": [{"gpus": 0}]})
    assert code == 201, job
    r = run(jp_fetch("hive_lab", "api", "jobs", job["id"], "logs", params=params, raise_error=False))
    err = json.loads(r.body)
    assert r.code == 400 and err["field"] == field, err


@pytest.mark.parametrize("query, field", [
    ("limit=-5", "limit"), ("limit=" + str(10**30), "limit"), ("limit=1001", "limit"),
    ("offset=" + str(10**30), "offset"), ("offset=-3", "offset"),
])
def test_huge_or_negative_list_limits_are_a_400(api, query, field):
    code, err = api("GET", f"jobs?{query}")
    assert code == 400 and err["field"] == field, err


# --- defect 5: refused at submit with a 400 naming the field (the in-process server runs the local launcher)


@pytest.fixture
def jp_server_config(jp_server_config):
    jp_server_config["HiveLabApp"]["launcher"] = "local"
    return jp_server_config


@pytest.mark.parametrize("body, field, words", [
    ('{"command": "true", "files": {"a.txt": "x\\ud800y"}}', "files", "lone UTF-16 surrogate"),
    ('{"command": "true", "files": {"a\\udc00.txt": "x"}}', "files", "lone UTF-16 surrogate"),
    ('{"command": "echo \\ud800"}', "command", "lone UTF-16 surrogate"),
    ({"command": "true", "files": {"output": "x"}}, "files", "output dir"),
    ({"command": "true", "files": {"./output": "x"}}, "files", "output dir"),
    ({"command": "true", "files": {"logs/main-0.log": "x"}}, "files", "logs dir"),
    ({"command": "true", "image": "python:3.12"}, "image", "local launcher"),
    ({"command": "true", "priority": "opportunistic", "tasks": [{"count": 2, "gpus": 4}]}, "tasks", "never all run"),
    ({"command": "true", "tasks": [{"count": 2, "gpus": 1, "cpus": 20}]}, "tasks", "never all run"),
    ({"command": "true", "tasks": [{"gpus": 0, "cpus": 0}]}, "tasks[0].cpus", "ask for cpus > 0"),
    ({"jobName": "p", "taskRoles": [{"gpuNumber": 0, "cpuNumber": 0, "command": "true"}]}, "taskRoles[0].cpuNumber",
     "ask for cpus > 0"),
    ({"command": "true", "working_dir": "../../etc"}, "working_dir", "leaves the job's own directory"),
    ({"command": "true", "working_dir": "/etc"}, "working_dir", "leaves the job's own directory"),
    ({"command": "true", "output_dir": "out/../../x"}, "output_dir", "leaves the job's own directory"),
    ({"command": "true", "output_dir": "/srv/results"}, "output_dir", "leaves the job's own directory"),
    ({"command": "true", "working_dir": "~/src"}, "working_dir", "leaves the job's own directory"),
    ({"command": "true", "working_dir": "logs/x"}, "working_dir", "logs dir"),
    ({"command": "true", "working_dir": "src/run", "files": {"src": "x"}}, "working_dir", "must be a directory"),
    ({"command": "true", "output_dir": "results", "files": {"results": "x"}}, "output_dir", "must be a directory"),
])
def test_submits_that_could_never_run_are_refused(api, hive, body, field, words):
    assert hive.service.launcher.name == "local"
    code, err = api("POST", "jobs", body)
    assert code == 400, err
    assert err["field"] == field and words in err["error"], err
    assert api("GET", "jobs")[1]["total"] == 0


def test_what_stays_allowed(api, wait_state):
    """Files inside output/, NULs in file contents and CPU-only tasks with CPUs still run."""
    code, job = api("POST", "jobs", {"command": "cat output/a.txt; cat b.bin | wc -c", "files": {
        "output/a.txt": "in-output\n", "b.bin": "a\u0000b"}, "tasks": [{"gpus": 0, "cpus": 1}]})
    assert code == 201, job
    assert wait_state(job["id"], "succeeded", "failed")["state"] == "succeeded"
    assert api("GET", f"jobs/{job['id']}/logs")[1]["data"] == "in-output\n3\n"


def test_a_relative_working_dir_and_output_dir_are_where_the_job_starts_and_writes(api, wait_state):
    """Inside the job's own dir: its tasks start in ``working_dir``, HIVE_OUTPUT_DIR is ``output_dir``
    (issue 24: a relative working_dir was accepted and ignored)."""
    code, job = api("POST", "jobs", {
        "command": 'pwd; sh train.sh; echo saved > "$HIVE_OUTPUT_DIR/r.txt"; echo "$HIVE_OUTPUT_DIR"',
        "working_dir": "src/run", "output_dir": "results/today",
        "files": {"src/run/train.sh": "echo training in $(basename $(pwd))\n"}, "tasks": [{"gpus": 0, "cpus": 1}]})
    assert code == 201, job
    assert wait_state(job["id"], "succeeded", "failed")["state"] == "succeeded"
    root = pathlib.Path(job["working_dir"])
    assert api("GET", f"jobs/{job['id']}/logs")[1]["data"].splitlines() == [
        str(root / "src" / "run"), "training in run", str(root / "results" / "today")]
    assert (root / "results" / "today" / "r.txt").read_text() == "saved\n"
    assert api("GET", f"jobs/{job['id']}")[1]["output_dir"] == str(root / "results" / "today")


def test_a_link_the_job_planted_as_its_working_dir_is_never_followed(api, wait_state, tmp_path):
    """Its first attempt swaps its working dir's parent for a link out of its dir; after a pause, the next
    attempt's staging (as root) stops there instead of making (and handing over) directories where the
    link points. Switched off (os.makedirs of the joined path), ``victim/run`` appears."""
    from waiting import wait_until

    victim = tmp_path / "victim"
    victim.mkdir()
    plant = f'rm -rf "$HIVE_WORKING_DIR/src"; ln -s {victim} "$HIVE_WORKING_DIR/src"; touch "$HIVE_WORKING_DIR/planted"; ' \
            'exec sleep 300'
    code, job = api("POST", "jobs", {"command": plant, "working_dir": "src/run", "tasks": [{"gpus": 0, "cpus": 1}]})
    assert code == 201, job
    root = pathlib.Path(wait_state(job["id"], "running")["working_dir"])
    wait_until(lambda: (root / "planted").exists(), "the link to be planted")
    assert api("POST", f"jobs/{job['id']}/pause", {})[0] == 200
    wait_state(job["id"], "paused")
    assert api("POST", f"jobs/{job['id']}/resume", {})[0] == 200
    ended = wait_state(job["id"], "failed", "succeeded", "cancelled")
    assert ended["state"] == "failed" and "working_dir" in ended["reason"] and "link" in ended["reason"], ended
    assert list(victim.iterdir()) == []  # no run/ made through the link


@pytest.mark.parametrize("gpus, ok", [(314.0, True), (4, True), (314.5, False), ("314", False), (True, False)])
def test_an_action_body_takes_what_the_document_calls_an_integer(gpus, ok):
    """JSON Schema's integer includes 314.0 (schemathesis sent it to pause and got a 400); strings,
    fractions and booleans stay refused."""
    from pydantic import ValidationError

    from hive_lab_server.api.handlers.job_actions import ResizeAction

    if ok:
        assert ResizeAction.model_validate({"gpus": gpus}).gpus == int(gpus)
    else:
        with pytest.raises(ValidationError):
            ResizeAction.model_validate({"gpus": gpus})


@pytest.mark.parametrize("path, field, says", [
    ("jobs?offset=", "offset", "is empty; give an integer 0..1000000000, or leave offset out"),
    ("jobs?limit=", "limit", "is empty"), ("jobs?limit=1_0", "limit", "must be an integer"),
    ("jobs?elements=", "elements", "is empty; use true or false"), ("jobs?elements=TRUE", "elements", "use true or false"),
    ("jobs?user=", "user", "is empty; give user names"), ("jobs?user=ann,,bob", "user", "empty name"),
    ("jobs?state=", "state", "is empty"), ("jobs?vc=", "vc", "is empty"),
    ("arrays?offset=", "offset", "is empty"), ("schedules?user=", "user", "is empty"),
    ("usage?since=", "since", "is empty; give a duration like 7d"), ("usage?since=2025-02-29", "since", "a date like"),
    ("usage?by=", "by", "is empty; use one of user, vc, day, job"), ("history?since=", "since", "is empty"),
    ("history?real_names=", "real_names", "is empty; use true or false"),
])
def test_empty_or_malformed_query_values_are_a_400_naming_them(api, path, field, says):
    """An empty value is not "absent" (schemathesis found offset=, elements=, since= taken as the default)."""
    code, err = api("GET", path)
    assert code == 400 and err["field"] == field, err
    assert err["error"].startswith(f"query parameter {field}") and says in err["error"], err


def test_empty_task_reason_and_flags_are_a_400(api):
    code, job = api("POST", "jobs", {"command": "true", "tasks": [{"gpus": 0}]})
    assert code == 201, job
    for path, field in ((f"jobs/{job['id']}/logs?task=", "task"), (f"jobs/{job['id']}/logs?follow=", "follow"),
                        ("jobs?dry_run=", "dry_run")):
        code, err = api("POST" if path.startswith("jobs?") else "GET", path, {"command": "true"})
        assert code == 400 and err["field"] == field and "is empty" in err["error"], (path, err)
    code, err = api("DELETE", f"jobs/{job['id']}?reason=")
    assert code == 400 and err["field"] == "reason", err
