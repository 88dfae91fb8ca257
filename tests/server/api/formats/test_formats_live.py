"""Job files in other platforms' formats (OpenPAI v1/v2, sbatch, Kubernetes/Volcano) posted as they are
to a real server (16 nodes x 8 GPUs, the Docker launcher): a dry run places each with exactly the tasks
and GPUs it asks for; refusals are 400s naming the field; a submitted job keeps its original (secrets
masked) and its format; the platform's variables reach the tasks."""

from __future__ import annotations

import pathlib

import pytest
import yaml

DATA = pathlib.Path(__file__).parent / "data"
EXPECTED = yaml.safe_load((DATA / "expected.yaml").read_text())
CTYPE = {".json": "application/json", ".yaml": "application/yaml", ".sbatch": "text/plain"}


@pytest.fixture
def jp_server_config(tmp_path, docker_engine):
    return {
        "DockerLauncher": {"base_url": docker_engine.base_url, "pull_missing": False},
        "ServerApp": {"jpserver_extensions": {"hive_lab_server": True}},
        "HiveLabApp": {
            "cluster_config": {"nodes": 16, "gpus_per_node": 8, "gpu_type": "V100", "levels": ["pair", "socket"],
                               "cpus_per_node": 64, "memory_mb_per_node": 512000,
                               "vcs": {"default": 96, "your_virtual_cluster": 32}},
            "launcher": "docker",
            "db_url": f"sqlite:///{tmp_path / 'hive.sqlite'}",
            "jobs_root": str(tmp_path / "jobs"),
            "poll_interval_s": 0.02,
        },
        "Isolation": {"run_as": "server"},
    }


def _post(api, path, rel):
    file = DATA / rel
    return api("POST", path, file.read_bytes(), headers={"Content-Type": CTYPE[file.suffix]})


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_every_shipped_file_is_placed_as_it_asks(api, rel):
    code, answer = _post(api, "jobs?dry_run=true", rel)
    assert code == 200, (rel, answer)
    assert answer["outcome"] == "start", (rel, answer)
    got: dict[str, list] = {}
    for p in answer["placement"]:
        group = p["task"].rsplit("-", 1)[0]
        share = p.get("share")
        gpus = share if share else len(p["gpus"])
        got.setdefault(group, [0, gpus])[0] += 1
        assert got[group][1] == gpus, (rel, answer["placement"])
    assert got == {k: list(v) for k, v in EXPECTED[rel]["tasks"].items()}, (rel, answer["placement"])


def test_a_submitted_job_keeps_its_original_and_format_with_secrets_masked(api):
    code, job = _post(api, "jobs", "openpai_v2/protocol_example.yaml")
    assert code == 201, job
    code, job = api("GET", f"jobs/{job['id']}")
    source = job["spec"]["source"]
    assert source["format"] == "openpai-v2"
    assert source["original"]["secrets"] == {"docker_password": "<secret>", "github_token": "<secret>"}
    text = str(job)
    assert "cGFzc3dvcmQ=" not in text  # github_token's value
    assert ": 'password'" not in text  # docker_password's value
    assert job["spec"]["env"]["PAI_SECRET_github_token"].startswith("hive-secret:")
    assert any("shmMB" in n for n in source["not_applied"])
    assert "${PAI_SECRET_github_token}" in job["spec"]["tasks"][0]["command"]


@pytest.mark.parametrize("ctype, body, field, words", [
    ("text/plain", "#!/bin/bash\n#SBATCH --array=9-0\npython x.py\n", "#SBATCH --array", ""),
    ("text/plain", "#!/bin/bash\n#SBATCH --dependency=afterok:12\nx\n", "#SBATCH --dependency", "not a hive-lab job id"),
    ("text/plain", "#!/bin/bash\n#SBATCH --dependency=singleton\nx\n", "#SBATCH --dependency", "not supported"),
    ("text/plain", "#!/bin/bash\n#SBATCH --gres=fpga:1\nx\n", "#SBATCH --gres", "GPUs only"),
    ("text/plain", "#!/bin/bash\n#SBATCH --frobnicate\nx\n", "#SBATCH --frobnicate", "unknown sbatch option"),
    ("application/yaml", "protocolVersion: 2\nname: a\ntype: job\nprerequisites: [{name: i, type: dockerimage, uri: u}]\n"
     "taskRoles: {w: {dockerImage: i, resourcePerInstance: {cpu: 1, memoryMB: 100, gpu: 9999}, commands: [x]}}\n",
     "taskRoles.w.resourcePerInstance.gpu", ""),
    ("application/yaml", "protocolVersion: 2\nname: a\ntype: job\nprerequisites: [{name: i, type: dockerimage, uri: u}]\n"
     "taskRoles: {w: {dockerImage: nope, resourcePerInstance: {cpu: 1, memoryMB: 100, gpu: 1}, commands: [x]}}\n",
     "taskRoles.w.dockerImage", "not a dockerimage"),
    ("application/yaml", "protocolVersion: 2\nname: a\ntype: job\nprerequisites: [{name: i, type: dockerimage, uri: u}]\n"
     "taskRoles: {w: {dockerImage: i, resourcePerInstance: {cpu: 1, memoryMB: 100, gpu: 1}, commands: ['<% $secrets.k %>']}}\n",
     "taskRoles.w.commands", "names no entry of secrets"),
    ("application/yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
     "  - {name: a, image: i, command: [x]}\n  - {name: b, image: i, command: [y]}\n", "spec.containers", "one container"),
    ("application/yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {}\n", "kind", "batch/v1 Job"),
    ("application/json", '{"jobName": "x", "taskRoles": [{"name": "w", "gpuNumber": 1, "command": "x", "bogus": 1}]}',
     "taskRoles[0].bogus", "unknown field"),
])
def test_refusals_are_400s_that_name_the_field(api, ctype, body, field, words):
    code, answer = api("POST", "jobs?dry_run=true", body, headers={"Content-Type": ctype})
    assert code == 400, answer
    assert answer["field"] == field and words in answer["error"], answer
    assert api("GET", "jobs")[1]["total"] == 0


def test_an_sbatch_array_runs_one_element_per_index_with_slurms_array_variables(api, run):
    """#SBATCH --array=0-3%2 is a hive-lab array (issue 29): one job per index, at most 2 at once, and
    each sees SLURM_ARRAY_TASK_ID (its index), SLURM_ARRAY_TASK_COUNT/MIN/MAX and SLURM_ARRAY_JOB_ID."""
    import asyncio
    import time

    script = ("#!/bin/bash\n#SBATCH --job-name=arr\n#SBATCH --array=0-3%2\n"
              "echo task=$SLURM_ARRAY_TASK_ID of=$SLURM_ARRAY_TASK_COUNT min=$SLURM_ARRAY_TASK_MIN "
              "max=$SLURM_ARRAY_TASK_MAX array=$SLURM_ARRAY_JOB_ID hive=$HIVE_ARRAY_INDEX\n")
    code, array = api("POST", "jobs", script, headers={"Content-Type": "text/plain"})
    assert code == 201, array
    assert array["id"].startswith("a-") and array["count"] == 4 and array["throttle"] == 2
    deadline = time.monotonic() + 60
    while True:
        code, got = api("GET", f"arrays/{array['id']}")
        if got["state"] == "ended" or time.monotonic() > deadline:
            break
        run(asyncio.sleep(0.1))  # the in-process server works while its loop runs
    assert [e["state"] for e in got["elements"]] == ["succeeded"] * 4, got
    for e in got["elements"]:
        code, log = api("GET", f"jobs/{e['job_id']}/logs")
        i = e["index"]
        assert log["data"].strip() == f"task={i} of=4 min=0 max=3 array={array['id']} hive={i}", log


def test_an_sbatch_dependency_waits_for_hive_lab_jobs(api, run):
    import asyncio

    code, first = api("POST", "jobs", {"command": "sleep 0.5", "tasks": [{"gpus": 1}]})
    assert code == 201, first
    script = f"#!/bin/bash\n#SBATCH --dependency=afterok:{first['id']}\necho second\n"
    code, second = api("POST", "jobs", script, headers={"Content-Type": "text/plain"})
    assert code == 201, second
    assert second["spec"]["depends_on"] == [{"job": first["id"], "when": "succeeded"}]
    assert second["state"] == "queued" and second["reason"] == f"waiting for {first['id']} to succeed"
    for _ in range(300):
        code, got = api("GET", f"jobs/{second['id']}")
        if got["state"] in ("succeeded", "failed", "cancelled"):
            break
        run(asyncio.sleep(0.1))
    assert got["state"] == "succeeded", got


def test_no_image_is_refused_where_the_launcher_runs_images(api):
    """Issue 40, 6: --no-image (no_image=true) is for servers without containers; the docker launcher
    runs the file's image, so it is a 400 naming the flag, and a missing image still names the way out."""
    code, answer = _post(api, "jobs?dry_run=true&no_image=true", "kubernetes/job.yaml")
    assert code == 400 and answer["field"] == "no_image" and "without --no-image" in answer["error"], answer
    body = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: a, command: [x]}\n"
    code, answer = api("POST", "jobs?dry_run=true", body, headers={"Content-Type": "application/yaml"})
    assert code == 400 and answer["field"] == "spec.containers[0].image" and "--no-image" in answer["error"], answer
    assert api("GET", "jobs")[1]["total"] == 0
