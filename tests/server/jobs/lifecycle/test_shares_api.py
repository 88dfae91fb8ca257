"""Shares of a GPU through the service: spec validation (400s that say what is allowed), four quarter
jobs on one GPU at once with the fifth waiting with a reason, the job and cluster objects."""

import asyncio

import pytest

from hive_lab.submission import parse_gpus
from hive_lab_server.execution.launchers.local import LocalLauncher
from hive_lab_server.jobs.lifecycle import presentation
from hive_lab_server.jobs.service import HiveService
from hive_lab_server.api.formats import from_document as parse_job_spec  # any format, as POST jobs reads it
from hive_lab_server.wire.spec import SpecError
from hive_lab_server.store import Store
from hive_scheduler import Scheduler, load_cluster_config


@pytest.mark.parametrize("body, field, words", [
    ({"command": "x", "tasks": [{"gpus": 0.3}]}, "tasks[0].gpus", "0.5, 0.25 or 0.125"),
    ({"command": "x", "tasks": [{"gpus": 1.5}]}, "tasks[0].gpus", "whole number of GPUs"),
    ({"command": "x", "tasks": [{"gpus": 0.25, "count": 2}]}, "tasks[0].gpus", "one task on one GPU"),
    ({"command": "x", "tasks": [{"name": "a", "gpus": 0.5}, {"name": "b", "gpus": 1}]}, "tasks[0].gpus", "gang"),
    ({"command": "x", "tasks": [{"gpus": 1, "gpu_memory_mb": 100}]}, "tasks[0].gpu_memory_mb", "share"),
    ({"jobName": "j", "taskRoles": [{"command": "x", "gpuNumber": 0.3}]}, "taskRoles[0].gpuNumber", "0.125"),
])
def test_bad_shares_say_what_is_allowed(body, field, words):
    with pytest.raises(SpecError) as e:
        parse_job_spec(body)
    assert e.value.field == field and words in e.value.message


def test_shares_accepted_in_both_forms_and_by_the_flags():
    spec = parse_job_spec({"command": "x", "tasks": [{"gpus": 0.25, "gpu_memory_mb": 4096}]})
    assert spec.gpu_share == 0.25 and spec.tasks[0].gpu_memory_mb == 4096
    assert parse_job_spec({"jobName": "j", "taskRoles": [{"command": "x", "gpuNumber": 0.5}]}).gpu_share == 0.5
    assert parse_job_spec({"command": "x", "tasks": [{"gpus": 2}]}).gpu_share == 0.0
    assert [parse_gpus(t) for t in ("0.25", "0.5", "0.125", "2", "0")] == [0.25, 0.5, 0.125, 2, 0]
    for bad in ("0.3", "1.5", "-1", "x"):
        with pytest.raises(ValueError, match="0.5, 0.25 or 0.125"):
            parse_gpus(bad)


@pytest.fixture
def service(tmp_path):
    cfg = load_cluster_config({"nodes": ["ws"], "gpus_per_node": 1, "gpu_type": "T4", "vcs": {"cv-101": 1}})
    return HiveService(scheduler=Scheduler(cfg), config=cfg, store=Store(f"sqlite:///{tmp_path / 's.sqlite'}"),
                       launcher=LocalLauncher(tmp_path / "state"), jobs_root=tmp_path / "jobs", poll_interval_s=0.02)


def test_four_quarters_share_one_gpu_and_the_fifth_waits(service, tmp_path):
    gate = tmp_path / "release"
    spec = parse_job_spec({"command": f'echo "$CUDA_VISIBLE_DEVICES" > "$HIVE_OUTPUT_DIR/cvd"; '
                                      f'while [ ! -e {gate} ]; do sleep 0.05; done',
                           "tasks": [{"gpus": 0.25, "cpus": 0.1, "memory_mb": 16}]})

    async def main():
        await service.start()
        try:
            ids = [service.admission.submit(spec, f"student{i}", "cv-101")["id"] for i in range(5)]
            for _ in range(400):
                states = [service.job_object(i, detail=False, private=True)["state"] for i in ids]
                if states[:4] == ["running"] * 4:
                    break
                await asyncio.sleep(0.02)
            objs = [service.job_object(i, detail=False, private=True) for i in ids]
            cluster = presentation.cluster_object(service)
            metrics = {m.name: m.samples[0].value for m in service.metrics.registry.collect()
                       if m.name.startswith("hive_lab_vc_") and m.samples}
            gate.touch()
            for _ in range(500):
                if all(service.job_object(i, detail=False, private=True)["state"] == "succeeded" for i in ids):
                    break
                await asyncio.sleep(0.02)
            done = [service.job_object(i, detail=False, private=True)["state"] for i in ids]
            return ids, objs, cluster, done, metrics
        finally:
            gate.touch()
            await service.stop()

    ids, objs, cluster, done, metrics = asyncio.run(main())
    assert [o["state"] for o in objs] == ["running"] * 4 + ["queued"]
    assert all(o["gpus"] == 0.25 and o["placement"][0]["gpus"] == [0] for o in objs[:4])
    assert objs[4]["reason"].startswith("no GPU of VC cv-101 has a free quarter; 0 of 1 GPUs hold whole-GPU jobs, "
                                        "1 is shared (1 without a free quarter)")
    (gpu,) = cluster["gpus"]
    assert [(s["job"], s["user"], s["share"]) for s in gpu["shares"]] == \
        [(ids[i], f"student{i}", 0.25) for i in range(4)] and gpu["free_share"] == 0.0
    assert done == ["succeeded"] * 5
    assert (metrics["hive_lab_vc_shared_gpus"], metrics["hive_lab_vc_gpu_shares_used"]) == (1, 1.0)
    for i in ids:  # time-slicing: every share sees the one GPU
        assert (tmp_path / "jobs" / i / "output" / "cvd").read_text().strip() == "0"


def test_cli_and_magic_flags_build_share_specs_the_server_accepts(capsys):
    from hive_lab.cli import build_parser
    from hive_lab.cli.submit import build_spec
    from hive_lab.magics import HiveLabMagics
    from hive_lab.submission import cell_spec

    args = build_parser().parse_args(["submit", "--gpus", "0.5", "--gpu-memory-mb", "4000", "--", "python", "x.py"])
    spec = parse_job_spec(build_spec(args))
    assert spec.gpu_share == 0.5 and spec.tasks[0].gpu_memory_mb == 4000
    with pytest.raises(SystemExit):
        build_parser().parse_args(["submit", "--gpus", "0.3", "--", "true"])
    assert "0.5, 0.25 or 0.125" in capsys.readouterr().err
    # %%submit --gpus 0.25: the magic's own argument parser, then the body it sends
    parsed = HiveLabMagics.submit.parser.parse_argstring("--gpus 0.25")
    assert parsed.gpus == 0.25
    body = cell_spec("print(1)", gpus=parsed.gpus, local_python=None)
    assert parse_job_spec(body).gpu_share == 0.25
