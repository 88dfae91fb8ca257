"""Bad input is a 4xx whose message says what to fix, never a 500 (issue 11, defects 4 and 5), against
the in-process Jupyter server of ``conftest.py``; nothing is stored for a refused submit."""

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


@pytest.mark.parametrize("query, field", [
    ("limit=-5", "limit"), ("limit=" + str(10**30), "limit"), ("limit=1001", "limit"),
    ("offset=" + str(10**30), "offset"), ("offset=-3", "offset"),
])
def test_huge_or_negative_list_limits_are_a_400(api, query, field):
    code, err = api("GET", f"jobs?{query}")
    assert code == 400 and err["field"] == field, err
