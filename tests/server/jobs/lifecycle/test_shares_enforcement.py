"""Shares enforced through the service and the local launcher: MIG devices handed to each share (and
to Docker as its device), an MPS daemon per shared GPU started for its first share and stopped after
its last (run for real against a stand-in nvidia-cuda-mps-control), a type that takes no shares."""

import asyncio
import json
import stat

import pytest

from hive_lab_server.hardware.sharing import GpuSharing, MigDevice
from hive_lab_server.execution.launchers.docker_spec import container_env
from hive_lab_server.execution.launchers.local import LocalLauncher
from hive_lab_server.jobs.lifecycle import launch_plan
from hive_lab_server.jobs.service import HiveService, ServiceError
from hive_lab_server.wire.spec import parse_job_spec
from hive_lab_server.store import Store
from hive_scheduler import Scheduler, load_cluster_config

CLUSTER = {"nodes": ["ws"], "gpus_per_node": 1, "gpu_type": "A100", "vcs": {"cv-101": 1}}
MIGS = [MigDevice("MIG-1111", 9856, 2), MigDevice("MIG-2222", 9856, 2), MigDevice("MIG-3333", 19968, 4)]


def make_service(tmp_path, sharing):
    cfg = load_cluster_config(CLUSTER)
    return HiveService(scheduler=Scheduler(cfg), config=cfg, store=Store(f"sqlite:///{tmp_path / 's.sqlite'}"),
                       launcher=LocalLauncher(tmp_path / "state"), jobs_root=tmp_path / "jobs",
                       gpu_uuids={("ws", 0): "GPU-0000"}, poll_interval_s=0.02, sharing=sharing)


def run_jobs(svc, specs, until):
    async def main():
        await svc.start()
        try:
            ids = [svc.admission.submit(parse_job_spec(s), "ann", "cv-101")["id"] for s in specs]
            for _ in range(500):
                objs = [svc.job_object(i, detail=False, private=True) for i in ids]
                if until(objs):
                    break
                await asyncio.sleep(0.02)
            return ids, objs
        finally:
            await svc.stop()
    return asyncio.run(main())


ENV_DUMP = 'env | grep -E "^(CUDA|NVIDIA|HIVE_GPU)" | sort > "$HIVE_OUTPUT_DIR/env"'


def env_of(tmp_path, job_id):
    return dict(line.split("=", 1) for line in (tmp_path / "jobs" / job_id / "output" / "env").read_text().split())


def test_mig_gives_each_share_its_own_device_and_docker_that_device(tmp_path):
    svc = make_service(tmp_path, GpuSharing({"A100": "mig"}, gpu_memory_mb={("ws", 0): 40960},
                                            mig_devices={("ws", 0): MIGS}, mps_binary=""))
    spec = {"command": ENV_DUMP, "tasks": [{"gpus": 0.25, "cpus": 0.1}]}
    ids, objs = run_jobs(svc, [spec, spec], lambda o: all(j["state"] == "succeeded" for j in o))
    assert [o["state"] for o in objs] == ["succeeded"] * 2
    envs = [env_of(tmp_path, i) for i in ids]
    assert sorted(e["CUDA_VISIBLE_DEVICES"] for e in envs) == ["MIG-1111", "MIG-2222"]
    assert all(e["HIVE_GPU_SHARE_MODE"] == "mig" and e["HIVE_GPU_MEMORY_MB"] == "9856" for e in envs)
    assert svc.sharing.mig_given == {}  # given back when the jobs ended
    # the Docker side of the same grant: the container gets the MIG device, not the whole GPU
    job = type("J", (), {})()
    job.id, job.user, job.vc, job.placement = "j-x", "ann", "cv-101", ()
    grant = svc.sharing.grant("j-x", "A100", "ws", 0, 0.5, "GPU-0000")
    env = launch_plan.share_env(grant)
    assert env["CUDA_VISIBLE_DEVICES"] == env["NVIDIA_VISIBLE_DEVICES"] == "MIG-3333"
    from hive_lab_server.execution.launchers.base import TaskLaunch
    task = TaskLaunch(job_id="j-x", task="main-0", group="main", index=0, rank=0, node="ws", gpu_indices=(0,),
                      gpu_uuids=(grant.mig_uuid,), command="true", env=env, working_dir=str(tmp_path),
                      log_path=str(tmp_path / "l"))
    assert container_env(task)["NVIDIA_VISIBLE_DEVICES"] == "MIG-3333"


def test_mps_daemon_started_for_the_shared_gpu_and_stopped_after_its_last_share(tmp_path):
    log = tmp_path / "mps-calls.jsonl"
    binary = tmp_path / "nvidia-cuda-mps-control"
    binary.write_text("#!/usr/bin/env python3\nimport json, os, sys\n"
                      "stdin = '' if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()\n"
                      f"open({str(log)!r}, 'a').write(json.dumps({{'argv': sys.argv[1:], 'stdin': stdin}}) + '\\n')\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    svc = make_service(tmp_path, GpuSharing({"*": "mps"}, gpu_memory_mb={("ws", 0): 40960}, mps_binary=str(binary),
                                            mps_root=tmp_path / "mps"))
    spec = {"command": ENV_DUMP, "tasks": [{"gpus": 0.5, "cpus": 0.1, "gpu_memory_mb": 8000}]}
    ids, objs = run_jobs(svc, [spec], lambda o: o[0]["state"] == "succeeded"
                         and len(log.read_text().splitlines() if log.exists() else []) == 2)
    env = env_of(tmp_path, ids[0])
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-0000" and env["HIVE_GPU_SHARE_MODE"] == "mps"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50" and env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=8000M"
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == str(tmp_path / "mps" / "ws-gpu0" / "pipe")
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    assert calls == [{"argv": ["-d"], "stdin": ""}, {"argv": [], "stdin": "quit\n"}]


def test_a_type_that_takes_no_shares_or_mps_without_its_binary_is_a_400(tmp_path):
    svc = make_service(tmp_path, GpuSharing({"A100": "none"}, mps_binary=""))
    with pytest.raises(ServiceError) as e:
        svc.admission.submit(parse_job_spec({"command": "x", "tasks": [{"gpus": 0.25}]}), "ann", "cv-101")
    assert e.value.status == 400 and "A100 takes no shares" in str(e.value)
    svc2 = make_service(tmp_path / "b", GpuSharing({"A100": "mps"}, mps_binary=""))
    with pytest.raises(ServiceError) as e:
        svc2.admission.submit(parse_job_spec({"command": "x", "tasks": [{"gpus": 0.25}]}), "ann", "cv-101")
    assert "nvidia-cuda-mps-control is not installed" in str(e.value)
