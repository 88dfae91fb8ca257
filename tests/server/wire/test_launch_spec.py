"""Launching reads a job's stored spec through its typed view (``wire.launch_spec.LaunchSpec``): the view
holds what admission stored, cannot be changed, and the launch plan and the platform variables read no
string key of the spec themselves."""

from __future__ import annotations

import ast
import json
import dataclasses
import pathlib

import pytest

from hive_lab_server.api import formats
from hive_lab_server.wire.launch_spec import LaunchSpec, LaunchTaskGroup
from hive_lab_server.wire.spec import parse_job_spec

SERVER = pathlib.Path(__file__).resolve().parents[3] / "server_ext" / "hive_lab_server"
DATA = pathlib.Path(__file__).resolve().parents[1] / "api" / "formats" / "data"
# the modules that turn a placed job into what the launcher gets
LAUNCHING = [SERVER / "jobs" / "lifecycle" / "launch_plan.py", SERVER / "execution" / "runtime_env.py"]


def string_key_reads(source: str) -> list[str]:
    """Each ``spec[...]`` / ``spec.get(...)`` (of a name or an attribute called ``spec``) in ``source``."""
    def is_spec(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "spec") or (isinstance(node, ast.Attribute) and node.attr == "spec")

    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and is_spec(node.value):
            out.append(ast.unparse(node))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and is_spec(node.func.value)):
            out.append(ast.unparse(node))
    return out


def test_the_view_holds_what_admission_stores():
    spec = parse_job_spec({
        "name": "train", "vc": "cv-101", "image": "pytorch:2", "command": "python train.py",
        "tasks": [{"name": "ps", "count": 2, "gpus": 0, "cpus": 2, "memory_mb": 2048, "command": "python ps.py"},
                  {"name": "worker", "count": 4, "gpus": 2}],
        "env": {"LR": "0.1"}, "working_dir": "src", "data_dir": "/data/imagenet", "files": {"src/a.txt": "hi"},
        "job_type": "resnet50",
    })
    view = LaunchSpec.of(spec.model_dump(mode="json"))  # what the store keeps and recovery reads back
    assert (view.name, view.vc, view.kind, view.image, view.command) == ("train", "cv-101", "batch", "pytorch:2",
                                                                        "python train.py")
    assert view.tasks == (LaunchTaskGroup("ps", 2, 0, 2.0, 2048, "python ps.py"),
                          LaunchTaskGroup("worker", 4, 2, 1.0, 1024, None))
    assert dict(view.env) == {"LR": "0.1"} and dict(view.files) == {"src/a.txt": "hi"}
    assert (view.working_dir, view.data_dir, view.job_type) == ("src", "/data/imagenet", "resnet50")
    assert view.group("worker").count == 4 and view.group("nobody") is None
    assert view.runtime.platform is None and dict(view.runtime.ports) == {}


def test_the_view_holds_a_foreign_jobs_platform_runtime():
    raw = (DATA / "openpai_v1" / "job_tutorial_example.json").read_bytes()
    stored = formats.read_job(raw, "application/json", seal=lambda v: {k: "sealed" for k in v}).model_dump(mode="json")
    view = LaunchSpec.of(stored)
    assert view.runtime.platform == "openpai" == stored["source"]["runtime"]["platform"]
    assert {k: dict(v) for k, v in view.runtime.ports.items()} == stored["source"]["runtime"].get("ports", {})
    assert [t.name for t in view.tasks] == [t["name"] for t in stored["tasks"]]


def test_the_view_cannot_be_changed():
    view = LaunchSpec.of(parse_job_spec({"command": "true", "env": {"A": "1"}}).model_dump(mode="json"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.image = "evil"  # type: ignore[misc]
    with pytest.raises(TypeError):
        view.env["A"] = "2"  # type: ignore[index]


def test_the_reader_finds_string_key_reads():
    assert string_key_reads('x = job.spec["tasks"]\ny = spec.get("image")\nz = other["tasks"]') == [
        "job.spec['tasks']", "spec.get('image')"]


@pytest.mark.parametrize("path", LAUNCHING, ids=lambda p: p.name)
def test_launching_reads_the_spec_only_through_its_view(path):
    assert string_key_reads(path.read_text()) == [], f"{path.name}: read the spec through LaunchSpec"


def test_each_attribute_of_the_view_is_the_submitted_specs_field():
    """The view reads each field under the name JobSpec gives it (a misspelt key would read None)."""
    spec = parse_job_spec({
        "name": "train", "vc": "cv-101", "command": "python train.py", "within": "rack-1", "pinned_cell": "pc-1",
        "time_limit_s": 600, "checkpoint": True, "min_gpus": 1, "max_gpus": 4, "job_type": "resnet50",
        "working_dir": "src", "data_dir": "/data", "kind": "batch",
        "tasks": [{"name": "w", "gpus": 2, "gpu_type": "V100", "cpus": 2, "memory_mb": 512, "min_failed": None,
                   "min_succeeded": 1}],
        "depends_on": [{"job": "j-000001", "when": "ended"}], "after": ["j-000002"],
    })
    view = LaunchSpec.of(spec.model_dump(mode="json"))
    for name in ("name", "vc", "command", "within", "pinned_cell", "time_limit_s", "checkpoint", "min_gpus",
                 "max_gpus", "job_type", "working_dir", "data_dir", "kind", "image"):
        assert getattr(view, name) == getattr(spec, name), name
    for group, asked in zip(view.tasks, spec.tasks):
        for name in LaunchTaskGroup._fields:
            assert getattr(group, name) == getattr(asked, name), name
    assert [(d.job, d.when) for d in view.depends_on] == [("j-000001", "ended"), ("j-000002", "succeeded")]
    assert view.total_gpus == spec.total_gpus == 2 and view.share is None and view.elastic
    assert view.task_names() == ["w-0"]


def test_a_changed_spec_is_a_new_view_and_keeps_every_stored_key():
    stored = parse_job_spec({"command": "x", "min_gpus": 1, "max_gpus": 4, "tasks": [{"gpus": 2}],
                             "files": {"a.txt": "a"}, "env": {"A": "1"}}).model_dump(mode="json")
    before = json.loads(json.dumps(stored))
    view = LaunchSpec.of(stored)
    resized, moved = view.with_gpus(3), view.with_gpu_type("V100")
    element = view.as_element("sweep[2]", {**view.env, "HIVE_ARRAY_INDEX": "2"})
    assert stored == before and view.tasks[0].gpus == 2 and view.tasks[0].gpu_type is None  # the view is unchanged
    assert resized.as_stored() == {**before, "tasks": [{**before["tasks"][0], "gpus": 3}]}
    assert moved.as_stored() == {**before, "tasks": [{**before["tasks"][0], "gpu_type": "V100"}]}
    assert element.as_stored() == {**before, "name": "sweep[2]", "env": {"A": "1", "HIVE_ARRAY_INDEX": "2"}}
    assert dict(view.as_element("e", {}, {"p.json": "{}"}).files) == {"p.json": "{}"}
    with pytest.raises(TypeError):
        view.stored["name"] = "evil"  # type: ignore[index]
