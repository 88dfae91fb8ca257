"""Job spec validation: native and OpenPAI forms; errors name the field and say what to change."""

import pytest

from hive_lab_server.api.formats import from_document  # any format, as POST jobs reads it
from hive_lab_server.wire.spec import SpecError, parse_job_spec


def test_native_defaults():
    spec = parse_job_spec({"command": "python train.py"})
    assert spec.name == "job" and spec.vc is None and spec.kind == "batch"
    assert [(t.name, t.count, t.gpus) for t in spec.tasks] == [("main", 1, 1)]
    assert spec.core_priority == 0 and not spec.opportunistic


def test_whole_number_floats_are_taken_where_an_integer_is_asked():
    """JSON Schema's integer includes 2048.0 (the OpenAPI document allows it); 2048.5 stays refused. Asked twice:
    the second parse reads the int fields from the per-model cache (spec._int_fields)."""
    for _ in range(2):
        spec = parse_job_spec({"command": "x", "max_retries": 2.0, "tasks": [{"gpus": 1.0, "memory_mb": 2048.0, "count": 2.0}]})
        task = spec.tasks[0]
        assert (task.memory_mb, task.count, task.gpus, spec.max_retries) == (2048, 2, 1, 2)
        assert type(task.memory_mb) is int and type(task.count) is int and type(spec.max_retries) is int
        with pytest.raises(SpecError, match="memory_mb"):
            parse_job_spec({"command": "x", "tasks": [{"memory_mb": 2048.5}]})
    assert type(parse_job_spec({"command": "x", "tasks": [{"cpus": 2.0}]}).tasks[0].cpus) is float  # a float field


def test_opportunistic_priority_is_minus_one():
    spec = parse_job_spec({"command": "x", "priority": "opportunistic"})
    assert spec.opportunistic and spec.core_priority == -1


def test_openpai_form_is_accepted():
    spec = from_document({
        "jobName": "pai", "image": "img", "dataDir": "/data", "outputDir": "/out", "virtualCluster": "vc1",
        "retryCount": 2,
        "taskRoles": [{"name": "worker", "taskNumber": 2, "cpuNumber": 4, "memoryMB": 8192, "gpuNumber": 2,
                       "command": "python w.py"}],
    })
    assert (spec.name, spec.vc, spec.image, spec.data_dir, spec.output_dir, spec.max_retries) == (
        "pai", "vc1", "img", "/data", None, 2)
    # the job writes into its own dir (HIVE_OUTPUT_DIR); OpenPAI's outputDir is passed on, and said so
    assert spec.env["PAI_OUTPUT_DIR"] == "/out"
    assert any(n.startswith("outputDir: '/out' is given to the tasks as PAI_OUTPUT_DIR") for n in spec.source.not_applied)
    t = spec.tasks[0]
    assert (t.name, t.count, t.cpus, t.memory_mb, t.gpus, t.command) == ("worker", 2, 4, 8192, 2, "python w.py")
    assert spec.total_gpus == 4 and spec.task_count == 2


@pytest.mark.parametrize(
    "body, field, words",
    [
        ({"command": "x", "tasks": [{"gpus": -1}]}, "tasks[0].gpus", "whole number of GPUs (0, 1, 2, ...) or a share of one GPU"),
        ({"command": "x", "tasks": [{"gpu": 1}]}, "tasks[0].gpu", "unknown field"),
        ({"command": "x", "tasks": [{"count": "2"}]}, "tasks[0].count", "integer"),
        ({"command": "x", "priority": 1001}, "priority", "0..1000"),
        ({"command": "x", "priority": "high"}, "priority", "opportunistic"),
        ({"tasks": [{"gpus": 1}]}, "tasks[0].command", "give a command"),
        ({"command": "x", "tasks": [{"name": "a"}, {"name": "a"}]}, "tasks[1].name", "used twice"),
        ({"command": "x", "tasks": []}, "tasks", "at least 1"),
        ({"command": "x", "env": {"HIVE_JOB_ID": "1"}}, "env", "set by hive-lab"),
        ({"command": "x", "env": {"1BAD": "1"}}, "env", "invalid"),
        ({"command": "x", "files": {"../evil": "x"}}, "files", "relative path"),
        ({"command": "x", "files": {"/etc/passwd": "x"}}, "files", "relative path"),
        ({"command": "x", "files": {"big": "x" * (1 << 20 + 1)}}, "files", "under"),
        ({"command": "x", "max_retries": -1}, "max_retries", "greater than or equal to 0"),
        ({"command": "x", "kind": "daemon"}, "kind", "batch"),
        ({"command": "x", "bogus": 1}, "bogus", "unknown field"),
        ({"jobName": "p", "taskRoles": [{"taskNumber": 1, "gpuNumber": -2, "command": "x"}]}, "taskRoles[0].gpuNumber", ">= 0".replace(">= 0", "whole number of GPUs")),
        ({"jobName": "p", "taskRoles": [{"taskNumber": 1}]}, "taskRoles[0].command", "required"),
        ({"jobName": "p"}, "taskRoles", "required"),
    ],
)
def test_errors_name_the_field(body, field, words):
    with pytest.raises(SpecError) as info:
        from_document(body)
    assert info.value.field == field
    assert words in info.value.message
    assert info.value.message.startswith(field)


@pytest.mark.parametrize("body", [None, [], "job", 3])
def test_non_object_body(body):
    with pytest.raises(SpecError, match="JSON object"):
        parse_job_spec(body)
