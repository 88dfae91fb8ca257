"""The OpenAPI document is generated from the pydantic models (issue 11): the served one is valid
OpenAPI 3.1, its limits are the models' limits, and real answers only carry fields it declares."""

import yaml
from openapi_spec_validator import validate

from hive_lab_server.wire import models
from hive_lab_server.wire.job_state import STATE_NAMES, JobState
from hive_lab_server.api.openapi import openapi_document
from hive_lab_server.wire.spec import JobSpec, PaiJob, PaiTaskRole, TaskSpec


def test_served_document_is_valid_and_generated(api):
    code, text = api("GET", "spec.yaml")
    assert code == 200
    served = yaml.safe_load(text)
    validate(served)  # openapi-spec-validator: raises on any error
    assert served == openapi_document()
    assert served["openapi"].startswith("3.1")


def _props(name):
    return openapi_document()["components"]["schemas"][name]["properties"]


def _limits(schema):
    """(lower, upper) bound of a schema: minimum/maximum, minLength/maxLength or minItems/maxItems."""
    schema = next((s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"), schema)
    lo = next((schema[k] for k in ("minimum", "minLength", "minItems") if k in schema), None)
    hi = next((schema[k] for k in ("maximum", "maxLength", "maxItems") if k in schema), None)
    return lo, hi


def _model_limits(model, field):
    lo = hi = None
    for meta in model.model_fields[field].metadata:
        lo = next((getattr(meta, a) for a in ("ge", "min_length") if getattr(meta, a, None) is not None), lo)
        hi = next((getattr(meta, a) for a in ("le", "max_length") if getattr(meta, a, None) is not None), hi)
    return lo, hi


def test_the_two_spec_forms_have_the_same_limits_as_the_models():
    """command and cpuNumber differed between the hand-written document and the code before."""
    assert _limits(_props("PaiTaskRole")["command"]) == (1, 100_000)
    assert _limits(_props("PaiTaskRole")["cpuNumber"]) == (0, 100_000)
    for name, model in (("TaskSpec", TaskSpec), ("PaiTaskRole", PaiTaskRole), ("PaiJob", PaiJob)):
        for field, schema in _props(name).items():
            if model.model_fields[field].metadata:
                assert _limits(schema) == _model_limits(model, field), (name, field)
    assert _limits(_props("JobSpec")["command"]) == (1, 100_000)
    assert set(_props("JobSpec")) == set(JobSpec.model_fields)


def test_one_state_vocabulary():
    doc = openapi_document()
    assert doc["components"]["schemas"]["JobState"]["enum"] == list(STATE_NAMES)
    assert [s.value for s in JobState] == list(STATE_NAMES)
    assert "state" in _props("Job") and "state" in _props("HistoryEntry")


def _undeclared(model, obj, where=""):
    """Keys of ``obj`` (an answer) that ``model`` does not declare, recursively through nested models."""
    out = [f"{where}{k}" for k in obj if k not in model.model_fields]
    for name, field in model.model_fields.items():
        value = obj.get(name)
        inner = getattr(field.annotation, "__args__", (field.annotation,))
        sub = next((a for a in inner if isinstance(a, type) and issubclass(a, models.BaseModel)), None)
        if sub is None:
            lists = [a for a in inner if getattr(a, "__origin__", None) is list]
            sub = next((a.__args__[0] for a in lists if isinstance(a.__args__[0], type)
                        and issubclass(a.__args__[0], models.BaseModel)), None)
            for i, item in enumerate(value or []) if sub is not None and isinstance(value, list) else ():
                out += _undeclared(sub, item, f"{where}{name}[{i}].")
        elif isinstance(value, dict):
            out += _undeclared(sub, value, f"{where}{name}.")
    return out


def test_real_answers_only_carry_declared_fields(api, wait_state):
    code, job = api("POST", "jobs", {"command": "echo hi > $HIVE_OUTPUT_DIR/o.txt", "tasks": [{"gpus": 1}]})
    assert code == 201 and not _undeclared(models.Job, job)
    wait_state(job["id"], "succeeded")
    answers = [
        (models.Job, api("GET", f"jobs/{job['id']}")[1]),
        (models.JobList, api("GET", "jobs")[1]),
        (models.LogChunk, api("GET", f"jobs/{job['id']}/logs")[1]),
        (models.OutputList, api("GET", f"jobs/{job['id']}/outputs")[1]),
        (models.Cluster, api("GET", "cluster")[1]),
        (models.VcList, api("GET", "vcs")[1]),
        (models.Me, api("GET", "me")[1]),
        (models.UsageReport, api("GET", "usage?by=user")[1]),
        (models.Drain, api("POST", "nodes/node-0/drain")[1]),
        (models.Error, api("GET", "jobs/j-999999")[1]),
    ]
    for model, answer in answers:
        assert not _undeclared(model, answer), (model.__name__, _undeclared(model, answer))
        model.model_validate(answer)
    assert answers[0][1]["history"] and answers[0][1]["spec"]
