"""The variables a platform gives its tasks (execution.runtime_env), computed from a job's stored spec and
its placement, and OpenPAI secrets sealed at rest (execution.secrets)."""

from __future__ import annotations

import itertools
import pathlib

from hive_scheduler import TaskPlacement

from hive_lab_server.api import formats
from hive_lab_server.execution.runtime_env import platform_env as _platform_env
from hive_lab_server.wire.launch_spec import LaunchSpec
from hive_lab_server.execution.secrets import seal, unseal

DATA = pathlib.Path(__file__).resolve().parents[1] / "api" / "formats" / "data"
ADDRESS = {"node-0": "10.0.0.1", "node-1": "10.0.0.2"}.__getitem__


def _ports():
    counter = itertools.count(20000)
    return lambda: next(counter)


def platform_env(spec: dict, placement, address, free_port) -> dict:
    """The variables of a stored spec (as admission stores it), read through its launch view."""
    return _platform_env(LaunchSpec.of(spec), placement, address, free_port)


def _spec(rel: str, ctype: str) -> dict:
    return formats.read_job((DATA / rel).read_bytes(), ctype, seal=lambda v: {k: "sealed" for k in v}).model_dump(mode="json")


def test_openpai_tasks_learn_each_others_addresses_ports_and_counts():
    spec = _spec("openpai_v1/job_tutorial_example.json", "application/json")
    placement = [TaskPlacement("ps_server-0", "ps_server", 0, 0, "node-0"), TaskPlacement("ps_server-1", "ps_server", 1, 1, "node-0"),
                 TaskPlacement("worker-0", "worker", 0, 2, "node-0", (0, 1, 2, 3)),
                 TaskPlacement("worker-1", "worker", 1, 3, "node-1", (0, 1, 2, 3))]
    env = platform_env(spec, placement, ADDRESS, _ports())
    w1 = env["worker-1"]
    assert (w1["PAI_CURRENT_TASK_ROLE_NAME"], w1["PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX"]) == ("worker", "1")
    assert w1["PAI_TASK_ROLE_LIST"] == "ps_server,worker" and w1["PAI_TASK_ROLE_COUNT"] == "2"
    assert w1["PAI_TASK_ROLE_TASK_COUNT_ps_server"] == "2" and w1["PAI_HOST_IP_worker_1"] == "10.0.0.2"
    assert w1["PAI_HOST_IP_ps_server_1"] == "10.0.0.1"
    # every task sees the same table, and each its own ports in it
    assert {k: v for k, v in env["ps_server-0"].items() if "_HOST_LIST" in k or "PORT_LIST_" in k} == \
           {k: v for k, v in w1.items() if "_HOST_LIST" in k or "PORT_LIST_" in k}
    assert w1["PAI_CONTAINER_HOST_http_PORT_LIST"] == w1["PAI_PORT_LIST_worker_1_http"] == w1["PAI_worker_1_http_PORT"]
    hosts = w1["PAI_TASK_ROLE_worker_HOST_LIST"].split(",")
    assert hosts == [f"10.0.0.1:{env['worker-0']['PAI_CONTAINER_HOST_PORT']}",
                     f"10.0.0.2:{w1['PAI_CONTAINER_HOST_PORT']}"]
    ports = [e[k] for e in env.values() for k in e if k.startswith("PAI_CONTAINER_HOST_") and k.endswith("PORT_LIST")]
    assert len(ports) == len(set(ports)) == 8  # http and ssh for each of 4 tasks, all different
    assert spec["env"]["PAI_DATA_DIR"] == "/path/tensorflow-distributed-jobguid/data"
    assert spec["env"]["batch_size"] == "32"


def test_sbatch_tasks_get_slurm_variables_per_node():
    spec = _spec("sbatch/ddp_2nodes.sbatch", "text/plain")
    assert spec["env"]["SLURM_NTASKS"] == "8" and spec["env"]["SLURM_JOB_NUM_NODES"] == "2"
    assert spec["tasks"][0]["cpus"] == 32 and spec["tasks"][0]["memory_mb"] == 65536 and spec["time_limit_s"] == 7200
    placement = [TaskPlacement("node-0", "node", 0, 0, "node-0", (0, 1, 2, 3)),
                 TaskPlacement("node-1", "node", 1, 1, "node-1", (0, 1, 2, 3))]
    env = platform_env(spec, placement, ADDRESS, _ports())
    assert env["node-1"]["SLURM_NODEID"] == "1" and env["node-1"]["SLURM_PROCID"] == "4"
    assert env["node-0"]["SLURM_JOB_NODELIST"] == "10.0.0.1,10.0.0.2" and env["node-1"]["SLURMD_NODENAME"] == "node-1"
    assert any("--output" in n for n in spec["source"]["not_applied"])


def test_volcano_tasks_get_their_index_and_hosts():
    spec = _spec("kubernetes/volcano.yaml", "application/yaml")
    placement = [TaskPlacement("ps-0", "ps", 0, 0, "node-0"), TaskPlacement("worker-0", "worker", 0, 1, "node-0", (0,)),
                 TaskPlacement("worker-1", "worker", 1, 2, "node-1", (0,))]
    env = platform_env(spec, placement, ADDRESS, _ports())
    assert env["worker-1"]["VK_TASK_INDEX"] == "1" and env["ps-0"]["VC_WORKER_HOSTS"] == "10.0.0.1,10.0.0.2"
    assert env["ps-0"]["VC_WORKER_NUM"] == "2"


def test_a_native_job_gets_no_platform_variables():
    spec = formats.read_job(b'{"command": "true", "tasks": [{"gpus": 1}]}').model_dump(mode="json")
    assert platform_env(spec, [TaskPlacement("main-0", "main", 0, 0, "node-0", (0,))], ADDRESS, _ports()) == {}


def test_secrets_are_sealed_with_a_private_key_and_unsealed_only_with_it(tmp_path):
    sealed = seal({"PAI_SECRET_token": "s3cret"}, tmp_path)
    assert "s3cret" not in sealed["PAI_SECRET_token"] and sealed["PAI_SECRET_token"].startswith("hive-secret:")
    assert (tmp_path / ".secrets.key").stat().st_mode & 0o777 == 0o600
    assert unseal({**sealed, "OTHER": "x"}, tmp_path) == {"PAI_SECRET_token": "s3cret"}
    assert unseal(sealed, tmp_path / "elsewhere") == {}  # another key: nothing comes out


def test_a_v2_secret_reference_becomes_an_env_reference_and_the_original_is_masked():
    spec = formats.read_job((DATA / "openpai_v2/protocol_example.yaml").read_bytes(), "application/yaml",
                            seal=lambda v: {k: "sealed" for k in v})
    dumped = str(spec.model_dump(mode="json"))
    assert "cGFzc3dvcmQ=" not in dumped and "'password'" not in dumped.replace("'password': '<% $secrets", "")
    worker = next(t for t in spec.tasks if t.name == "worker")
    assert "${PAI_SECRET_github_token}" in worker.command and "wget https://www.cs.toronto.edu" in worker.command
    assert "--model=resnet20" in worker.command and "script_tensorflow_cnnbenchmarks" in worker.command
    assert spec.max_retries == 1 and spec.image == "openpai/pai.example.tensorflow"
