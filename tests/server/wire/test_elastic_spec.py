"""Issue 17's spec fields: elastic jobs (min_gpus..max_gpus), job_type, the reserved checkpoint dir."""

from __future__ import annotations

import pytest

from hive_lab_server.wire.spec import SpecError, parse_job_spec


def spec(**kw):
    return parse_job_spec({"command": "true", **kw})


def test_an_elastic_job_has_one_task_within_its_range():
    s = spec(min_gpus=1, max_gpus=4, tasks=[{"gpus": 2}], job_type="ResNet-50 (batch size 64)")
    assert (s.min_gpus, s.max_gpus, s.job_type) == (1, 4, "ResNet-50 (batch size 64)")


@pytest.mark.parametrize("body,field", [
    ({"min_gpus": 1}, "min_gpus"),
    ({"max_gpus": 2}, "max_gpus"),
    ({"min_gpus": 3, "max_gpus": 2, "tasks": [{"gpus": 2}]}, "min_gpus"),
    ({"min_gpus": 1, "max_gpus": 2, "tasks": [{"gpus": 1, "count": 2}]}, "tasks"),
    ({"min_gpus": 2, "max_gpus": 4, "tasks": [{"gpus": 1}]}, "tasks[0].gpus"),
])
def test_bad_elastic_specs_name_the_field(body, field):
    with pytest.raises(SpecError) as err:
        spec(**body)
    assert err.value.field == field, err.value.message


def test_checkpoint_is_a_reserved_file_name():
    with pytest.raises(SpecError, match="checkpoint"):
        spec(files={"checkpoint": "x"})
