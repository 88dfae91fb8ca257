"""One route table: what the extension registers and what the OpenAPI document states are the same routes.

Every handler method the app really registers under hive_lab/api/ has a documented operation whose URL it
serves, and every documented operation's URL reaches (first match, as tornado routes) a handler with that
method, not the catch-all 404. A route added by hand to the registered list, or a path added by hand to
the document, fails here (the last test shows the checks see both)."""

import re

from hive_lab_server.api.handlers import TABLE
from hive_lab_server.api.handlers.base import NotFoundHandler
from hive_lab_server.api.openapi import openapi_document
from hive_lab_server.api.routes import PREFIX, check, handler_methods
from hive_lab_server.app import HiveLabApp

EXAMPLES = {p.name: p.example for route in TABLE for p in route.params}


def registered_rules() -> list[tuple[str, type]]:
    """The (pattern, handler) pairs the extension registers for its REST API, in order, catch-all included."""
    app = HiveLabApp()
    assert app.mode == "scheduler"
    app.initialize_handlers()
    return [(pattern, handler) for pattern, handler, *_ in app.handlers if pattern.startswith(PREFIX + "/")]


def documented(doc: dict) -> list[tuple[str, str]]:
    """(example URL, method) of every operation in the document."""
    out = []
    for path, item in doc["paths"].items():
        url = PREFIX + re.sub(r"\{(\w+)\}", lambda m: EXAMPLES.get(m.group(1), "x"), path)
        out += [(url, method) for method in item if method in ("get", "post", "put", "patch", "delete")]
    return out


def served_by(url: str, rules: list[tuple[str, type]]) -> type | None:
    """The handler tornado gives ``url``: the first rule whose pattern matches it whole."""
    return next((handler for pattern, handler in rules if re.fullmatch(pattern, url)), None)


def unserved(operations: list[tuple[str, str]], rules: list[tuple[str, type]]) -> list[str]:
    problems = []
    for url, method in operations:
        handler = served_by(url, rules)
        if handler in (None, NotFoundHandler) or method not in handler_methods(handler):
            problems.append(f"{method.upper()} {url} is documented but {getattr(handler, '__name__', 'nothing')} "
                            "serves it")
    return problems


def undocumented(rules: list[tuple[str, type]], operations: list[tuple[str, str]]) -> list[str]:
    problems = []
    for pattern, handler in rules:
        if handler is NotFoundHandler:
            continue
        for method in sorted(handler_methods(handler)):
            if not any(m == method and served_by(url, rules) is handler and re.fullmatch(pattern, url)
                       for url, m in operations):
                problems.append(f"{method.upper()} {pattern} ({handler.__name__}) is registered but not documented")
    return problems


def test_the_table_holds_together():
    assert check(TABLE) == []


def test_every_registered_route_is_documented_and_every_documented_path_registered():
    rules = registered_rules()
    operations = documented(openapi_document())
    assert len(operations) == sum(len(route.operations) for route in TABLE)
    assert unserved(operations, rules) == []
    assert undocumented(rules, operations) == []
    assert rules[-1][1] is NotFoundHandler  # what no route serves: the JSON 404, last


def test_a_route_or_a_path_added_by_hand_is_caught():
    rules = registered_rules()
    operations = documented(openapi_document())

    class ByHandHandler(NotFoundHandler.__base__):
        def get(self):
            pass

    by_hand_route = rules[:-1] + [(rf"{PREFIX}/by-hand/?", ByHandHandler)] + rules[-1:]
    assert undocumented(by_hand_route, operations) == [
        f"GET {PREFIX}/by-hand/? (ByHandHandler) is registered but not documented"]
    by_hand_path = operations + [(f"{PREFIX}/by-hand", "get"), (f"{PREFIX}/jobs", "put")]
    assert unserved(by_hand_path, rules) == [
        f"GET {PREFIX}/by-hand is documented but NotFoundHandler serves it",
        f"PUT {PREFIX}/jobs is documented but JobsHandler serves it"]


def test_what_the_table_says_only_admins_may_do_is_refused_to_others(live_server_factory):
    """The table's ``who`` is what the docs and the document (x-who) say: each operation it gives to admins
    answers 403 to a user who is not one (on a job of theirs, a VC they use, a node that exists)."""
    srv = live_server_factory(users={"ann": {}}, vc_access={"ann": ["default"]})
    job = srv.request("POST", "jobs", user="ann", json={"command": "sleep 60", "tasks": [{"gpus": 1}]}).json()
    values = {**EXAMPLES, "job_id": job["id"]}
    bodies = {"migrateJob": {"gpu_type": "A100"}, "resizeJob": {"gpus": 1}, "putVcLimits": {}}
    admins_only = [(route, op) for route in TABLE for op in route.operations if op.who == "admins"]
    assert len(admins_only) == 10
    try:
        for route, op in admins_only:
            path = re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], route.doc_path(op)).lstrip("/")
            r = srv.request(op.method.upper(), path, user="ann", json=bodies.get(op.op_id))
            assert r.status_code == 403, (op.op_id, r.status_code, r.text)
    finally:
        srv.request("DELETE", f"jobs/{job['id']}")
