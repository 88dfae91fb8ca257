"""The OpenAPI 3.1 document of the REST API, generated from the pydantic request models (``spec``) and
response models (``models``) plus a table of the routes: limits such as ``command``'s length or
``cpuNumber``'s range exist in one place only. Served at ``GET spec.yaml``; print it with
``python -m hive_lab_server.api.openapi``.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from hive_lab_server.wire import models
from hive_lab_server.version import __version__
from hive_lab_server.wire.job_state import STATE_NAMES
from hive_lab_server.wire.spec import JobSpec, PaiJob

REF = "#/components/schemas/{model}"

DESCRIPTION = """The hive-lab scheduler inside the Jupyter server. Paths are relative to `<base_url>hive_lab/api/`.
Every request is authenticated by jupyter_server (`Authorization: token <t>` or the browser's cookie +
`_xsrf`; 401 without either) and authorized for the resource `hive_lab`. No text a request sends may hold a
NUL character (\\u0000; a job's staged files' contents aside): a 400 names the field. Errors are
`{"error": "<what to change>", "field": "<field or null>"}`. Generated from the server's pydantic
models; see docs/rest-api.md."""

ERRORS = {
    400: "bad input; the message names the field and what to change",
    401: "no valid token or login: authenticate first",
    403: "the caller may not touch this VC, job or node",
    404: "no such job, node, file or schedule (another user's schedule answers 404 too)",
    409: "the job's state does not allow it (e.g. cancelling a finished job)",
    413: "the request body is larger than HiveLabApp.max_body_bytes",
    429: "the caller has as many jobs queued in the VC as their limits allow (max_queued_jobs); submit again later",
    503: "hive-lab is recovering its jobs after a restart, its store is unavailable, it serves "
         "max_requests_in_flight requests already (GET me and GET metrics are never shed), or (a new job) it "
         "holds max_unfinished_jobs unfinished jobs; retry after Retry-After",
}

JOB_ID = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"}}
NODE = {"name": "node", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[^/]{1,256}$"}}
VC = {"name": "vc", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[^/]{1,128}$"}}
GPU = {"name": "index", "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}}


def _query(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    out = {"name": name, "in": "query", "required": False, "schema": schema}
    if description:
        out["description"] = description
    return out


def _json(model: type[BaseModel] | dict[str, Any]) -> dict[str, Any]:
    schema = {"$ref": REF.format(model=model.__name__)} if isinstance(model, type) else model
    return {"application/json": {"schema": schema}}


def _op(op_id: str, summary: str, ok: tuple[int, str, dict[str, Any]] | None, errors: tuple[int, ...] = (),
        params: tuple[dict[str, Any], ...] = (), body: dict[str, Any] | None = None,
        body_options: dict[str, Any] | None = None) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    if ok is not None:
        status, description, content = ok
        responses[str(status)] = {"description": description, **({"content": content} if content else {})}
    for status in sorted({*errors, 401, 503}):
        responses[str(status)] = {"description": ERRORS[status], "content": _json(models.Error)}
    op: dict[str, Any] = {"operationId": op_id, "summary": summary, "responses": responses}
    if params:
        op["parameters"] = list(params)
    if body is not None:
        op["requestBody"] = {"required": True, "content": _json(body), **(body_options or {})}
        if op_id == "submitJob":  # the other platforms' files, as they are (hive_lab_server.api.formats)
            foreign = {".*": "the file is read by its platform's rules (docs/formats.md): OpenPAI v2, Kubernetes, "
                             "Volcano, sbatch; a 400 names the file's own field"}
            op["requestBody"]["content"].update({
                "application/yaml": {"schema": {"type": "object", "description": "JobSpec, an OpenPAI v2 job, a "
                                                "Kubernetes Job/Pod or a Volcano Job"}, "x-rules": foreign},
                "text/plain": {"schema": {"type": "string", "description": "an sbatch script (#SBATCH lines)"},
                               "x-rules": foreign}})
    return op


def _with_dry_run(op: dict[str, Any]) -> dict[str, Any]:
    op["responses"]["200"] = {"description": "dry_run=true: what would happen now (nothing was stored)",
                              "content": _json(models.WhatIf)}
    return op


def _paths() -> dict[str, Any]:
    from hive_lab_server.api.handlers import arrays, job_actions, schedules  # (lazy: the handlers import the service)
    from hive_lab_server.api.handlers.query import (AFTER_HELP, AFTER_SCHEMA, FLAG_SCHEMA, MAX_QUERY_INT,
                                                    NAMES_SCHEMA, OFFSET_HELP, SINCE_PATTERN, TEXT_SCHEMA,
                                                    integer_schema)

    m = models
    states = ", ".join(STATE_NAMES)
    names = "|".join(STATE_NAMES)
    offset = integer_schema(0, MAX_QUERY_INT, 0)
    drain = (200, "the new drain state", _json(m.Drain))
    healthy = (200, "the GPUs marked healthy", _json(m.Healthy))
    return {
        "/jobs": {
            "get": _op("listJobs", "Jobs, newest first, filtered, a page at a time (after=<next>: stable while jobs arrive)", (200, "a page of jobs", _json(m.JobList)),
                       (400, 403), (
                           _query("user", NAMES_SCHEMA, "comma-separated user names; `me` is the caller"),
                           _query("vc", NAMES_SCHEMA, "comma-separated VC names"),
                           _query("state", {"type": "string", "pattern": f"^({names})(,({names}))*$"},
                                  f"comma-separated states ({states})"),
                           _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50}),
                           _query("offset", {**offset, "maximum": 10**9}, OFFSET_HELP),
                           _query("after", AFTER_SCHEMA, AFTER_HELP),
                           _query("elements", {**FLAG_SCHEMA, "default": "true"}, "false: leave out the elements of job arrays "
                                                                   "(see GET arrays)"))),
            "post": _with_dry_run(_op(
                "submitJob", "Submit a job: hive-lab's JobSpec (JSON/YAML), an OpenPAI job (protocol v1 JSON, v2 "
                "YAML), a Kubernetes batch/v1 Job or v1 Pod, or a Volcano Job (YAML/JSON), or an sbatch script "
                "(text/plain), each taken as it is (docs/formats.md); with dry_run=true only say what would happen; "
                "a JobSpec with array or sweep makes a job array (201 with the Array, as POST arrays)",
                (201, "the job, queued or scheduled", _json(m.Job)), (400, 403, 413, 429),
                (_query("dry_run", FLAG_SCHEMA,
                        "true: store nothing, launch nothing; answer what would happen now (200, WhatIf)"),
                 _query("no_image", FLAG_SCHEMA,
                        "true (--no-image), on a server whose launcher has no containers: the images a job file "
                        "names are not applied (listed in spec.source.not_applied); its commands run as processes. "
                        "400 on a server that runs images")),
                body={"oneOf": [{"$ref": REF.format(model="JobSpec")}, {"$ref": REF.format(model="PaiJob")}]})),
        },
        "/jobs/{job_id}": {
            "parameters": [JOB_ID],
            "get": _op("getJob", "One job with its history (spec and dirs only for its owner and admins)",
                       (200, "the job", _json(m.Job)), (403, 404)),
            "delete": _op("cancelJob", "Cancel a job (owner or admin)",
                          (200, "the job (state cancelled once stopped)", _json(m.Job)), (403, 404, 409),
                          (_query("reason", TEXT_SCHEMA, "why (kept in the job's reason, 300 characters)"),)),
        },
        **job_actions.openapi_paths(_op, JOB_ID, _json),
        **arrays.openapi_paths(_op, _query, _json, offset),
        **schedules.openapi_paths(_op, _json),
        "/jobs/{job_id}/logs": {
            "parameters": [JOB_ID],
            "get": _op("getJobLogs", "A task's log (owner or admin); `follow=1` streams text/plain until the task ends",
                       (200, "a chunk of the log", {**_json(m.LogChunk), "text/plain": {"schema": {"type": "string"}}}),
                       (400, 403, 404), (
                           _query("task", TEXT_SCHEMA, "task name, e.g. main-0 (default: the first task)"),
                           _query("offset", offset),
                           _query("follow", FLAG_SCHEMA))),
        },
        "/jobs/{job_id}/outputs": {
            "parameters": [JOB_ID],
            "get": _op("listJobOutputs", "Files in the job's output dir (owner or admin)",
                       (200, "the files", _json(m.OutputList)), (403, 404)),
        },
        "/jobs/{job_id}/outputs/{path}": {
            "parameters": [JOB_ID, {"name": "path", "in": "path", "required": True, "schema": {"type": "string"}}],
            "get": _op("getJobOutput", "One output file (owner or admin)",
                       (200, "the file", {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}),
                       (400, 403, 404)),
        },
        "/cluster": {"get": _op("getCluster", "The cell tree with each cell's state, and a flat list of GPUs",
                                (200, "the cluster", _json(m.Cluster)), (403,))},
        "/vcs": {"get": _op("listVcs", "Virtual clusters with guarantee, use, borrowing and queue length",
                            (200, "the VCs", _json(m.VcList)), (403,))},
        "/me": {"get": _op("getMe", "The caller, whether they are an admin, the VCs they may submit to and "
                                    "their limits there", (200, "the caller", _json(m.Me)), (403,))},
        "/vcs/{vc}/limits": {
            "parameters": [VC],
            "get": _op("getVcLimits", "The VC's per-user limits (anyone who may use the VC)",
                       (200, "the limits", _json(m.VcLimits)), (403, 404)),
            "put": _op("putVcLimits", "Replace the VC's per-user limits (admins); stored, applied at once",
                       (200, "the limits now in effect", _json(m.VcLimits)), (400, 403, 404), body=m.VcLimitsBody),
        },
        "/usage": {"get": _op("getUsage", "GPU-seconds, CPU-seconds and jobs per user, VC, day or job (non-admins: "
                                          "their own only)", (200, "the totals", _json(m.UsageReport)), (400, 403, 404), (
            _query("since", {"type": "string", "default": "7d", "pattern": SINCE_PATTERN},
                   "start of the window: 7d, 24h, 90m before now, or an ISO date/time (UTC), e.g. 2026-11-01"),
            _query("by", {"type": "string", "enum": ["user", "vc", "day", "job"], "default": "user"}),
            _query("user", NAMES_SCHEMA, "comma-separated user names (admins; others may name only "
                                               "themselves); `me` is the caller"),
            _query("vc", NAMES_SCHEMA, "comma-separated VC names: only usage in these VCs (a course's)")))},
        "/history": {"get": _op("getHistory", "The jobs of a window as a history trace the simulator replays, with "
                                              "the live cluster and policy (admins)",
                                (200, "the history", _json(m.HistoryReport)), (400, 403), (
            _query("since", {"type": "string", "default": "7d", "pattern": SINCE_PATTERN},
                   "start of the window: 7d, 24h, 90m before now, or an ISO date/time (UTC), e.g. 2026-11-01"),
            _query("real_names", {**FLAG_SCHEMA, "default": "false"},
                   "owners' names instead of pseudonyms (user-001, ... in order of first submit)")))},
        "/nodes/{node}/drain": {"parameters": [NODE], "post": _op("drainNode", "No new work on this node (admins)", drain, (403, 404))},
        "/nodes/{node}/undrain": {"parameters": [NODE], "post": _op("undrainNode", "Undo a node drain (admins)", drain, (403, 404))},
        "/nodes/{node}/gpus/{index}/drain": {
            "parameters": [NODE, GPU], "post": _op("drainGpu", "No new work on this GPU (admins)", drain, (400, 403, 404))},
        "/nodes/{node}/gpus/{index}/undrain": {
            "parameters": [NODE, GPU], "post": _op("undrainGpu", "Undo a GPU drain (admins)", drain, (400, 403, 404))},
        "/nodes/{node}/healthy": {
            "parameters": [NODE], "post": _op("markNodeHealthy", "The node's bad GPUs were reset or repaired; give them "
                                              "out again (admins)", healthy, (403, 404))},
        "/nodes/{node}/gpus/{index}/healthy": {
            "parameters": [NODE, GPU], "post": _op("markGpuHealthy", "A bad GPU was reset or repaired; give it out again "
                                                   "unless drained (admins)", healthy, (400, 403, 404))},
        "/events": {"get": _events_op()},
        "/metrics": {"get": _op("getMetrics", "Prometheus text format (per-user series hive_lab_user_* "
                                               "for admins only; others get the rest)",
                                (200, "metrics", {"text/plain": {"schema": {"type": "string"}}}), (403,))},
        "/spec.yaml": {"get": _op("getSpec", "This document",
                                  (200, "the OpenAPI document", {"application/yaml": {"schema": {"type": "object"}}}), (403,))},
    }


EVENTS_DESCRIPTION = """A websocket of JSON messages (`x-messages`), each with `seq`. `state` messages are the
stored state changes, numbered by a sequence that only grows, also across server restarts. A client remembers
the last `seq` it read and reconnects with `since=<seq>`: after `hello` the server replays the state changes
after it (at most HiveLabApp.events_replay_max), then goes on live; when it cannot (more than that, or a `seq`
its store does not know) it sends `snapshot`: refetch, then go on from the snapshot's `seq`. `job`, `cluster`
and `vcs` messages are live only. A subscriber more than HiveLabApp.events_buffer_bytes behind is closed with
code 4008 (reason: slow consumer) and may resume with `since`."""


def _events_op() -> dict[str, Any]:
    from hive_lab_server.api.handlers.upgrade import MAX_EVENT_SEQ, UPGRADE_HEADERS
    from hive_lab_server.api.handlers.query import integer_schema

    headers = tuple({"name": name, "in": "header", "required": True, "schema": schema}
                    for name, schema in UPGRADE_HEADERS.items())
    op = _op("events", "Websocket of live updates: hello, state, snapshot, job, cluster, vcs messages",
             (101, "switching to the websocket protocol", {}), (400, 403), (
                 _query("since", integer_schema(0, MAX_EVENT_SEQ),
                        "replay the stored state changes after this seq (the last one you read), then go live"),
                 *headers))
    op["description"] = EVENTS_DESCRIPTION
    op["x-messages"] = {"oneOf": [{"$ref": REF.format(model=mdl.__name__)} for mdl in models.EVENT_MODELS]}
    return op


def _state_rules(paths: dict[str, Any]) -> None:
    """Each submit operation lists the rules JSON Schema cannot state (stated_rules.py)."""
    from hive_lab_server.api.stated_rules import ARRAY_RULES, JOB_RULES, PAGE_RULES, SCHEDULE_RULES

    for path, rules in (("/jobs", JOB_RULES), ("/arrays", ARRAY_RULES), ("/schedules", SCHEDULE_RULES)):
        paths[path]["post"]["x-rules"] = dict(rules)
        paths[path]["post"]["description"] = ("Beyond the schema, a 400 names a field with one of these rules "
                                              "(x-rules): " + "; ".join(rules.values()))
    for path in ("/jobs", "/arrays"):
        paths[path]["get"]["x-rules"] = dict(PAGE_RULES)


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The whole document as a dict (built once per process)."""
    from hive_lab_server.wire.schedule_models import SCHEMA_MODELS

    schema_models = [JobSpec, PaiJob, models.VcLimitsBody, *models.RESPONSE_MODELS, *SCHEMA_MODELS]
    _, defs = models_json_schema([(mdl, "validation") for mdl in schema_models], ref_template=REF)
    paths = _paths()
    _state_rules(paths)
    from hive_lab_server.api.handlers.arrays import array_spec_schema

    defs["$defs"]["ArraySpec"] = array_spec_schema(defs["$defs"]["JobSpec"])
    return {
        "openapi": "3.1.0",
        "info": {"title": "hive-lab REST API", "version": __version__, "description": DESCRIPTION},
        "servers": [{"url": "/hive_lab/api"}],
        "security": [{"token": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"token": {"type": "apiKey", "in": "header", "name": "Authorization",
                                          "description": "`token <jupyter token>`"}},
            "schemas": defs["$defs"],
        },
    }


@functools.cache
def openapi_yaml() -> bytes:
    import yaml

    return yaml.safe_dump(openapi_document(), sort_keys=False, allow_unicode=True).encode()


if __name__ == "__main__":
    import sys

    sys.stdout.write(openapi_yaml().decode())
