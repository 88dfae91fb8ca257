"""Error messages a new user meets (issue 15): they say what is wrong in the user's terms, and a broken
cluster config stops the server instead of leaving it half up."""

import pytest

from hive_scheduler import ConfigError, load_cluster_config


def test_too_many_gpus_names_the_cluster_size(live_server):
    r = live_server.request("POST", "jobs", json={"command": "true", "tasks": [{"gpus": 100}]})
    assert r.status_code == 400
    assert "asks for 100 GPUs in one task but the cluster has 4 GPUs in all" in r.json()["error"]
    assert "largest node" not in r.json()["error"]


def test_overcommitted_vcs_say_how_many_gpus_they_ask_for():
    with pytest.raises(ConfigError) as err:
        load_cluster_config({"nodes": 1, "gpus_per_node": 8, "gpu_type": "T4", "vcs": {"a": 6, "b": 4}})
    assert "VCs ask for 10 T4 GPUs (a: 6, b: 4), the cluster has 8" in str(err.value)
    assert "infeasible" not in str(err.value)


def test_malformed_cluster_yaml_stops_the_server_with_line_and_column(live_server_factory, tmp_path):
    bad = tmp_path / "cluster.yaml"
    bad.write_text("nodes: 1\ngpus_per_node: [4\nvcs: {a: 4}\n")
    with pytest.raises(RuntimeError) as err:
        live_server_factory(cluster_config=str(bad))
    text = str(err.value)
    assert "jupyter server exited with" in text                      # not serving on without hive-lab
    assert f"{bad}, line 3, column 4: not valid YAML/JSON" in text
    assert "has no attribute 'hardware'" not in text                 # the stop is clean


def test_auto_launcher_choice_is_logged_and_shown(live_server_factory):
    srv = live_server_factory(launcher="auto")
    cluster = srv.request("GET", "cluster").json()
    launcher = cluster["launcher"]
    # no GPU on this machine and jobs run here: the GPUs are only modelled, and the API says so
    assert cluster["hardware"] == {"source": "config", "gpus_seen_here": 0, "simulated": True}
    assert launcher["chosen_by"] == "auto" and launcher["name"] in ("local", "docker")
    line = next(ln for ln in srv.log().splitlines() if f"launcher 'auto' chose {launcher['name']}" in ln)
    assert line.startswith("[I") and "fix" not in line, line  # an ordinary choice, said as an info line (issue 30)
    srv.stop()
    assert srv.proc.returncode is not None


def test_opportunistic_jobs_retry_by_default():
    from hive_lab_server.api.formats import from_document
    from hive_lab_server.wire.spec import OPPORTUNISTIC_MAX_RETRIES, parse_job_spec

    assert parse_job_spec({"command": "x", "priority": "opportunistic"}).max_retries == OPPORTUNISTIC_MAX_RETRIES > 0
    assert parse_job_spec({"command": "x", "priority": "opportunistic", "max_retries": 0}).max_retries == 0
    assert parse_job_spec({"command": "x"}).max_retries == 0
    pai = {"jobName": "p", "jobPriority": "opportunistic", "taskRoles": [{"command": "x"}]}
    assert from_document(pai).max_retries == OPPORTUNISTIC_MAX_RETRIES
    assert from_document({**pai, "retryCount": 1}).max_retries == 1


def test_preempted_opportunistic_job_goes_back_to_the_queue(live_server):
    r = live_server.request("POST", "jobs", json={"name": "opp", "priority": "opportunistic", "command": "sleep 60",
                                                  "tasks": [{"gpus": 4}]})
    assert r.status_code == 201, r.text
    opp = r.json()["id"]
    live_server.wait_for_job(opp, "running")
    r = live_server.request("POST", "jobs", json={"name": "guaranteed", "command": "sleep 60", "tasks": [{"gpus": 4}]})
    assert r.status_code == 201, r.text
    guaranteed = r.json()["id"]
    live_server.wait_for_job(guaranteed, "running")
    job = live_server.wait_for_job(opp, "queued", "failed")
    assert job["state"] == "queued" and job["retries"] == 1, job
    assert any("preempted" in h["reason"] and f"retry 1/{job['max_retries']}" in h["reason"] for h in job["history"])
    for j in (guaranteed, opp):
        live_server.request("DELETE", f"jobs/{j}")
