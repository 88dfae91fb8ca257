"""The Slurm launcher's pure parts (no Slurm needed): reading GRES/topology/node records, the HiveD
config built from them (checked by the real core), and the Slurm request written for a placement."""

from __future__ import annotations

import pytest

from hive_lab_server.execution.launchers.base import LaunchError, LaunchRequest, TaskLaunch
from hive_lab_server.execution.launchers.slurm import _exit_code
from hive_lab_server.execution.launchers.slurm_script import parse_comment, plan_job
from hive_lab_server.execution.slurm.inventory import (
    cluster_config_from_inventory,
    inventory_from,
    parse_gres,
    parse_node,
    parse_topology,
)


def node(name, gres, state="idle", flags=(), cpus=32, mem=256000, partitions=("gpu",)):
    return {"name": name, "address": f"10.0.0.{name[-1]}", "cpus": cpus, "real_memory": mem, "gres": gres,
            "state": state, "state_flags": list(flags), "reason": "", "partitions": list(partitions)}


def test_gres_forms():
    assert [(g.index, g.model, g.gres_type) for g in parse_gres("gpu:a100:2(S:0-1)")] == [(0, "a100", "a100"), (1, "a100", "a100")]
    assert [(g.index, g.gres_type) for g in parse_gres("gpu:h100_g1:1,gpu:h100_g0:1,mps:200")] == [(0, "h100_g0"), (1, "h100_g1")]
    assert [(g.index, g.model) for g in parse_gres("gpu:3", default_model="t4")] == [(0, "t4"), (1, "t4"), (2, "t4")]
    assert parse_gres("(null)") == [] and parse_gres("") == []


def test_node_state_and_topology():
    assert parse_node(node("n1", "gpu:a100:4", flags=["DRAIN"])).bad
    assert parse_node(node("n1", "gpu:a100:4", state="down")).bad
    assert not parse_node(node("n1", "gpu:a100:4", state="mixed")).bad
    text = "SwitchName=r1 Level=0 LinkSpeed=1 Nodes=g[1-2]\nSwitchName=r2 Nodes=g3\n" \
           "SwitchName=top Level=1 LinkSpeed=1 Nodes=g[1-3] Switches=r[1-2]\n"
    assert parse_topology(text) == {"r1": ["g1", "g2"], "r2": ["g3"]}


def test_mixed_cluster_becomes_a_valid_core_config():
    from hive_scheduler import load_cluster_config

    raw = [node("g1", "gpu:a100:8"), node("g2", "gpu:a100:8"), node("g3", "gpu:v100:4"), node("g4", "gpu:v100:4"),
           node("g5", "gpu:v100:4"), node("c1", "(null)"), node("x9", "gpu:a100:8", partitions=["other"])]
    inv = inventory_from(raw, "SwitchName=r1 Nodes=g[1-2],g3\nSwitchName=r2 Nodes=g4\n", partition="gpu")
    assert "x9" not in inv.nodes and inv.racks == {"r1": ["g1", "g2", "g3"], "r2": ["g4"]}
    cfg = cluster_config_from_inventory(inv, {"vision": {"gpus": 12, "gpu_type": "A100"}, "nlp": {"gpus": 4, "gpu_type": "v100"},
                                              "ops": {"cells": {"node": 1}, "gpu_type": "V100"}}, levels=["pair"])
    core = load_cluster_config(cfg)
    assert core.gpu_count() == 16 + 12
    assert sorted(core.nodes) == ["g1", "g2", "g3", "g4", "g5"]  # the CPU-only node holds no cells
    assert core.nodes["g1"].cpus == 32 and core.nodes["g1"].memory_mb == 256000
    assert core.vc_gpus("vision") == 12 and core.vc_gpus("nlp") == 4
    types = cfg["physicalCluster"]["cellTypes"]
    assert types["A100-NODE"] == {"childCellType": "A100-PAIR", "childCellNumber": 4, "isNodeLevel": True}
    tops = {c["cellAddress"]: c["cellType"] for c in cfg["physicalCluster"]["physicalCells"]}
    assert tops["r1-A100-NODE"].startswith("A100-RACK") and tops["r1-V100-NODE"].startswith("V100-RACK")
    assert tops["g5"] == "V100-NODE"  # not in any switch: a top-level node cell


def test_bad_inputs_say_what_to_fix():
    with pytest.raises(ValueError, match="no node with GPU GRES"):
        cluster_config_from_inventory(inventory_from([node("c1", "(null)")]))
    inv = inventory_from([node("g1", "gpu:a100:4")])
    with pytest.raises(ValueError, match="no Slurm node has GPUs of type 'h100'"):
        cluster_config_from_inventory(inv, {"x": {"gpus": 1, "gpu_type": "h100"}})
    with pytest.raises(ValueError, match="levels"):
        cluster_config_from_inventory(inventory_from([node("g1", "gpu:a100:3")]), levels=["pair"])


def _task(name, rank, node_name, gpus, cpus=0.0, mem=0):
    return TaskLaunch(job_id="j-1", task=name, group=name.rsplit("-", 1)[0], index=rank, rank=rank, node=node_name,
                      gpu_indices=tuple(gpus), gpu_uuids=None, command="python train.py --lr 'a b'", env={"A": "x y"},
                      working_dir="/jobs/j-1", log_path=f"/jobs/j-1/logs/{name}.log", cpus=cpus, memory_mb=mem)


def test_plan_pins_each_node_and_names_the_gpus():
    inv = inventory_from([node("n1", ",".join(f"gpu:a100_g{i}:1" for i in range(4))), node("n2", "gpu:a100:4")])
    req = LaunchRequest("j-1", "ann", "batch", (_task("w-0", 0, "n1", [2, 3], 2, 1000), _task("w-1", 1, "n1", [0], 1, 500),
                                                _task("w-2", 2, "n2", [1, 2])))
    plan = plan_job(req, inv.nodes, instance="abc", partition="gpu")
    [c1, c2] = plan.components
    assert (c1.node, c1.gres, c1.cpus_per_task, c1.memory_mb) == ("n1", "gpu:a100_g0:1,gpu:a100_g2:1,gpu:a100_g3:1", 2, 1500)
    assert c1.task_gres == {"w-0": "gpu:a100_g2:1,gpu:a100_g3:1", "w-1": "gpu:a100_g0:1"}
    assert (c2.node, c2.gres, c2.memory_mb) == ("n2", "gpu:2", None)  # no per-index types there: count + check
    text = plan.sbatch_script()
    assert text.count("#SBATCH hetjob") == 1 and "#SBATCH --nodelist=n1" in text and "--het-group=1" in text
    assert "#SBATCH '--comment=hive-lab:j-1 instance=abc tasks=w-0,w-1,w-2'" in text
    assert parse_comment(plan.comment) == ("j-1", "abc", ["w-0", "w-1", "w-2"])
    rest = plan.rest_payload({"PATH": "/bin"}, ["n1", "n2", "n3"])
    assert [j["exclude_nodes"] for j in rest["jobs"]] == ["n2,n3", "n1,n3"]


def test_plan_refuses_what_slurm_cannot_do():
    inv = inventory_from([node("n1", ",".join(f"gpu:a100_g{i}:1" for i in range(2)))])
    with pytest.raises(LaunchError, match="which Slurm does not know"):
        plan_job(LaunchRequest("j-1", "a", "batch", (_task("w-0", 0, "zz", [0]),)), inv.nodes, instance="i")
    with pytest.raises(LaunchError, match="has no GRES type for GPU 5"):
        plan_job(LaunchRequest("j-1", "a", "batch", (_task("w-0", 0, "n1", [5]),)), inv.nodes, instance="i")
    with pytest.raises(LaunchError, match="same GPU"):
        plan_job(LaunchRequest("j-1", "a", "batch", (_task("w-0", 0, "n1", [0]), _task("w-1", 1, "n1", [0]))),
                 inv.nodes, instance="i")


async def test_container_images_are_refused_with_a_reason(tmp_path):
    import dataclasses

    from hive_lab_server.execution.launchers.slurm import SlurmLauncher

    l = SlurmLauncher(slurm_conf=str(tmp_path / "no-slurm.conf"), jobs_root=str(tmp_path))  # no Slurm needed
    t = dataclasses.replace(_task("w-0", 0, "n1", [0]), image="pytorch/pytorch:2.3.0")
    with pytest.raises(LaunchError, match="cannot run container images .*pytorch/pytorch:2.3.0"):
        await l.start(LaunchRequest("j-1", "ann", "batch", (t,)))


def test_unknown_launcher_options_are_named(tmp_path):
    """The launchers are traitlets Configurables now (issue 11): config comes as a traitlets Config."""
    from traitlets.config import Config

    from hive_lab_server.execution.launchers.docker import DockerLauncher
    from hive_lab_server.execution.launchers.local import LocalLauncher
    from hive_lab_server.execution.launchers.slurm import SlurmLauncher

    with pytest.raises(ValueError, match="unknown option.*partiton.*known: .*partition"):
        SlurmLauncher(config=Config({"SlurmLauncher": {"partiton": "gpu"}}))
    with pytest.raises(ValueError, match="c.DockerLauncher: unknown option.*allowed_mounts"):
        DockerLauncher(config=Config({"DockerLauncher": {"allowed_mounts": ["/data"]}}))
    with pytest.raises(ValueError, match="c.LocalLauncher: unknown option.*hiden_env"):
        LocalLauncher(tmp_path, config=Config({"LocalLauncher": {"hiden_env": []}}))


def test_launcher_options_come_from_config_and_arguments_win(tmp_path):
    from traitlets.config import Config

    from hive_lab_server.execution.launchers.docker import DockerLauncher
    from hive_lab_server.execution.launchers.slurm import SlurmLauncher

    cfg = Config({"SlurmLauncher": {"partition": "gpu", "extra_args": ["--constraint=ib"], "slurm_conf": str(tmp_path / "x")},
                  "DockerLauncher": {"allowed_mount_roots": ["/datasets"], "network_mode": "none"}})
    s = SlurmLauncher(config=cfg, slurm_poll_s=0.5)
    assert (s.partition, s.extra_args, s.slurm_poll_s, s.gres_mode) == ("gpu", ["--constraint=ib"], 0.5, "auto")
    d = DockerLauncher("unix:///nowhere.sock", config=cfg, jobs_root=str(tmp_path), state_dir=str(tmp_path / "s"))
    assert d.base_url == "unix:///nowhere.sock" and d.policy.allowed_mount_roots == ("/datasets",)
    assert d.policy.network_mode == "none" and d.instance != "default"  # derived from jobs_root
    with pytest.raises(Exception, match="gres_mode"):
        SlurmLauncher(config=Config({"SlurmLauncher": {"gres_mode": "bogus", "slurm_conf": str(tmp_path / "x")}}))


def test_slurm_exit_status():
    assert _exit_code({"exit_code": 3 << 8}) == 3
    assert _exit_code({"exit_code": 15}) == 143
    assert _exit_code({"exit_code": {"status": "FAILED", "return_code": 2}}) == 2
    assert _exit_code({}) is None
