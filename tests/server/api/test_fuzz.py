"""Fuzz the OpenAPI document against a live server (schemathesis, every check, as an admin and as a user):
no 5xx, the server refuses what the document calls invalid and takes what it calls valid, responses match
the document, and rejected requests change nothing.

JSON Schema cannot state every rule a submit obeys (task names unique within a job, min_gpus <= max_gpus,
the VCs, GPU types and cells of this cluster): each operation lists those in the document (``x-rules``: the
field a 400 names -> the rule in words). A 400 for schema-valid input passes only when it names one of them.

A websocket opened on ``GET events`` (101) is checked here (test_events_protocol.py reads its messages);
every other answer of ``events`` goes through all the checks.

The server's tasks get PATH=/nonexistent: accepted fuzzed jobs really run, but only shell builtins."""

import re
import sqlite3

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.core.failures import FailureGroup
from schemathesis.openapi.checks import RejectedPositiveData

from fixtures.live_server import LiveServer
from hive_lab_server.api.openapi import openapi_document

schema = schemathesis.openapi.from_dict(openapi_document())  # generated from the server's pydantic models
TOKEN: dict[str, str] = {}  # the Authorization header of the test running now (admin's or ann's)


@schema.auth()
class Token:
    """Each case carries the caller's token as its credentials (schemathesis also sends it without, for a 401)."""

    def get(self, case, ctx):
        return True

    def set(self, case, data, ctx):
        case.headers = {**(case.headers or {}), **TOKEN}


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = LiveServer(
        tmp_path_factory.mktemp("fuzz"),
        cluster_config={"nodes": 1, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"default": 4}},
        env={"PATH": "/nonexistent"},
        users={"ann": {}},  # a non-admin (the server's own token is an admin's)
        vc_access={"ann": ["default"]},
        config={"HiveLabApp": {"max_body_bytes": 200_000}},
    ).start()
    yield server
    server.close()


# What a write through the API could change and the service's own work never does, read in one snapshot
# of the server's store (its SQLite file, read-only) instead of through the API: the jobs and arrays there
# are (a job's state, events, placements and usage move on by themselves as accepted jobs run), the
# drained GPUs, the VCs' limits, and the schedules but for when each is next due (the service advances it).
# Reading the file costs the server nothing; the API reads (4 per rejected case) were most of this
# test's time, and they saw only the jobs' number and the drains.
STORE_STATE = {
    "jobs": "SELECT id FROM jobs ORDER BY seq",
    "arrays": "SELECT id FROM job_arrays ORDER BY id",
    "drains": "SELECT node, gpu, at, by FROM drains ORDER BY id",
    "limits": "SELECT vc, limits, at, by FROM vc_limits ORDER BY vc",
    "schedules": "SELECT seq, id, name, user, owner_groups, cron, timezone, policy, spec, paused, created_at,"
                 " updated_at FROM schedules ORDER BY seq",
}


@pytest.fixture(scope="module")
def store(srv):
    conn = sqlite3.connect(f"file:{srv.db_path}?mode=ro", uri=True, isolation_level=None)
    yield conn
    conn.close()


def snapshot(store) -> dict[str, list]:
    store.execute("BEGIN")  # one read transaction: every table as of the same commit
    try:
        return {name: store.execute(query).fetchall() for name, query in STORE_STATE.items()}
    finally:
        store.execute("COMMIT")


def names_a_stated_rule(case, response) -> bool:
    """The 400 names a field whose rule the operation (or the body's media type) states in words (``x-rules``)."""
    raw = case.operation.definition.raw
    content = (raw.get("requestBody") or {}).get("content", {}).get(case.media_type or "", {})
    rules = content.get("x-rules") or raw.get("x-rules") or {}
    if response.status_code != 400:
        return False
    field = response.json().get("field") or ""
    sent = response.request.body or b""
    sent = sent.encode() if isinstance(sent, str) else sent
    if "contains a NUL character" in response.json()["error"] and (b"\\u0000" in sent or b"\x00" in sent):
        return True  # the document's description: no text may hold one (JSON Schema patterns on every
        # string said it too, but made schemathesis's collection take 40 s)
    return any(re.fullmatch(pattern, field) for pattern in rules)


def send(case, srv):
    if case.operation.path != "/events":
        return case.call(base_url=srv.api_url.rstrip("/"), timeout=30)
    import requests

    with requests.Session() as session:  # a websocket opened (101) sends frames, not an HTTP body: read none
        del session.headers["Connection"]  # (the session's keep-alive would replace the case's Connection)
        response = case.call(base_url=srv.api_url.rstrip("/"), session=session, timeout=30, stream=True)
    return response


@pytest.mark.parametrize("user", [None, "ann"], ids=["admin", "user"])
@schema.parametrize()
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_api_never_fails_and_rejections_change_nothing(case, srv, store, user):
    changes = case.method != "GET"
    before = snapshot(store) if changes else None
    TOKEN.clear()
    TOKEN.update(srv.headers(user))
    response = send(case, srv)
    assert response.status_code < 500, (response.status_code, response.text[:500], srv.log()[-3000:])
    if 400 <= response.status_code:
        assert response.headers.get("content-type", [""])[0].startswith("application/json"), (response.status_code, response.text[:300])
        body = response.json()
        assert body["error"], body
        if changes:
            assert snapshot(store) == before, (case.method, case.path, response.text)
    if response.status_code == 101:  # the handshake succeeded; schemathesis's checks know no protocol switch
        upgrade = {name.lower(): values for name, values in response.headers.items()}.get("upgrade")
        assert case.operation.path == "/events" and [v.lower() for v in upgrade] == ["websocket"], response.headers
        return
    try:
        case.validate_response(response)  # every check schemathesis has
    except FailureGroup as group:
        rest = [f for f in group.exceptions
                if not (isinstance(f, RejectedPositiveData) and names_a_stated_rule(case, response))]
        if rest:
            raise FailureGroup(rest) from None
