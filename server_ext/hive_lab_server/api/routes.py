"""The shape of one route table that is the REST API's single source: each ``Route`` is a URL pattern, the
handler class tornado gives it and, per method, an ``Operation`` (summary, who may call it, request body,
query parameters, answers and errors). From the table (``api/handlers/__init__.py``'s ``TABLE``):

- ``tornado_rules`` gives the ``(pattern, handler)`` pairs the extension registers (``app.py``);
- ``openapi_paths`` gives the OpenAPI document's ``paths`` (``openapi.py``);
- ``rest_docs`` writes the endpoint tables of docs/rest-api.md.

So a route cannot be served without being documented, nor documented without being served
(tests/server/api/test_route_table.py). This module holds data types only: no handler, no tornado.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from hive_lab_server.wire import models

PREFIX = "/hive_lab/api"
REF = "#/components/schemas/{model}"
METHODS = ("get", "post", "put", "patch", "delete")

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
ALWAYS = (401, 503)  # every operation may answer these


@dataclass(frozen=True)
class Param:
    """A path parameter: ``regex`` is what tornado matches (captured as ``kwarg``, the handler's argument),
    ``schema`` what the document states; ``example`` a value both accept (the drift test routes it)."""

    name: str
    regex: str
    schema: dict[str, Any] | None = None  # None: not in the document (an action fixed by each operation's path)
    example: str = "x"
    kwarg: str | None = None

    def openapi(self) -> dict[str, Any]:
        return {"name": self.name, "in": "path", "required": True, "schema": self.schema}


def in_query(name: str, schema: dict[str, Any], description: str = "") -> dict[str, Any]:
    """An optional query parameter as the document states it (read by ``api/handlers/query.py``)."""
    out = {"name": name, "in": "query", "required": False, "schema": schema}
    if description:
        out["description"] = description
    return out


@dataclass(frozen=True)
class Answer:
    """One answer: status, what it means, and its body (a response model, content types -> schema, or none)."""

    status: int
    description: str
    content: Any = None

    def openapi(self) -> dict[str, Any]:
        out: dict[str, Any] = {"description": self.description}
        if self.content:
            out["content"] = content(self.content)
        return out


def json_content(schema: "type[BaseModel] | dict[str, Any]") -> dict[str, Any]:
    ref = {"$ref": REF.format(model=schema.__name__)} if isinstance(schema, type) else schema
    return {"application/json": {"schema": ref}}


def content(value: Any) -> dict[str, Any]:
    """A model or a bare schema is JSON; a dict keyed by content types is taken as it is."""
    if isinstance(value, type) or not all("/" in key for key in value):
        return json_content(value)
    return value


def model_name(value: Any) -> str:
    """How the docs' tables name a body or an answer: its model(s), else its content type(s)."""
    if isinstance(value, type):
        return value.__name__
    if isinstance(value, dict) and "$ref" in value:
        return value["$ref"].rsplit("/", 1)[-1]
    if isinstance(value, dict) and "oneOf" in value:
        return " or ".join(model_name(v) for v in value["oneOf"])
    if isinstance(value, dict) and all("/" in key for key in value):
        kinds = []
        for kind, media in value.items():
            ref = media.get("schema", {}).get("$ref", "")
            kinds.append(ref.rsplit("/", 1)[-1] if ref else kind)
        return " or ".join(kinds)
    if isinstance(value, dict) and "title" in value:
        return value["title"]
    return "JSON"


@dataclass(frozen=True)
class Operation:
    """One method of a route. ``path``: the documented path when the route's pattern serves several (an
    action chosen by the URL); ``who``: who may call it, in words; ``also``: answers besides ``ok``;
    ``extra``: more keys of the operation object (description, x-messages). The document's summary adds
    ``who`` in brackets unless it starts with "anyone"."""

    method: str
    op_id: str
    summary: str
    who: str
    ok: Answer
    errors: tuple[int, ...] = ()
    query: tuple[dict[str, Any], ...] = ()
    body: Any = None  # a request model (a component of the document), a JSON schema, or None
    body_required: bool = True
    also: tuple[Answer, ...] = ()
    rules: dict[str, str] | None = None  # x-rules: what JSON Schema cannot state (stated_rules.py)
    body_content: dict[str, Any] = field(default_factory=dict)  # request content types besides JSON
    extra: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

    def openapi(self) -> dict[str, Any]:
        responses = {str(a.status): a.openapi() for a in (self.ok, *self.also)}
        for status in sorted({*self.errors, *ALWAYS}):
            responses[str(status)] = {"description": ERRORS[status], "content": json_content(models.Error)}
        # the summary says who when not everyone may call it (x-who says it always)
        summary = self.summary if self.who.startswith("anyone") else f"{self.summary} ({self.who})"
        op: dict[str, Any] = {"operationId": self.op_id, "summary": summary, "x-who": self.who,
                              "responses": responses}
        if self.query:
            op["parameters"] = list(self.query)
        if self.body is not None:
            op["requestBody"] = {"required": self.body_required,
                                 "content": {**json_content(self.body), **self.body_content}}
        if self.rules is not None:
            op["x-rules"] = dict(self.rules)
            op["description"] = ("Beyond the schema, a 400 names a field with one of these rules (x-rules): "
                                 + "; ".join(self.rules.values()))
        op.update(self.extra)
        return op


@dataclass(frozen=True)
class Route:
    """A URL ``path`` under ``PREFIX`` whose ``{name}`` parts are ``params`` (the rest may be regex, e.g. an
    optional part), served by ``handler``; ``area`` names its docs/rest-api.md table."""

    path: str
    handler: type
    operations: tuple[Operation, ...]
    params: tuple[Param, ...] = ()
    area: str = ""
    slash: bool = True  # a trailing slash is accepted

    def pattern(self) -> str:
        by_name = {p.name: p for p in self.params}

        def group(match: re.Match) -> str:
            param = by_name[match.group(1)]
            return f"(?P<{param.kwarg or param.name}>{param.regex})"

        return PREFIX + re.sub(r"\{(\w+)\}", group, self.path) + ("/?" if self.slash else "")

    def doc_path(self, op: Operation) -> str:
        return op.path or self.path

    def doc_params(self, op: Operation) -> list[dict[str, Any]]:
        by_name = {p.name: p for p in self.params}
        names = re.findall(r"\{(\w+)\}", self.doc_path(op))
        return [by_name[n].openapi() for n in names if by_name[n].schema is not None]

    def example_url(self, path: str) -> str:
        """``path`` with each parameter's example: what a caller would send."""
        by_name = {p.name: p for p in self.params}
        return PREFIX + re.sub(r"\{(\w+)\}", lambda m: by_name[m.group(1)].example, path)


def tornado_rules(table: list[Route], *tail: tuple[str, type]) -> list[tuple[str, type]]:
    """The ``(pattern, handler)`` pairs to register, in the table's order (tornado takes the first match)."""
    return [(route.pattern(), route.handler) for route in table] + list(tail)


def openapi_paths(table: list[Route]) -> dict[str, Any]:
    """The document's ``paths``: one path item per documented path, its parameters first."""
    paths: dict[str, Any] = {}
    for route in table:
        for op in route.operations:
            item = paths.setdefault(route.doc_path(op), {})
            params = route.doc_params(op)
            if params:
                item["parameters"] = params
            item[op.method] = op.openapi()
    return paths


def check(table: list[Route]) -> list[str]:
    """What does not hold together in the table: an operation whose path its route's pattern would not
    serve, or a method its handler does not have; a handler method no operation documents."""
    problems = []
    for route in table:
        regex = re.compile(route.pattern())
        for op in route.operations:
            url = route.example_url(route.doc_path(op))
            if not regex.fullmatch(url):
                problems.append(f"{op.op_id}: {url} is not served by {route.pattern()}")
            if op.method not in handler_methods(route.handler):
                problems.append(f"{op.op_id}: {route.handler.__name__} has no {op.method}")
        for method in handler_methods(route.handler) - {op.method for op in route.operations}:
            problems.append(f"{route.handler.__name__}.{method} ({route.path}) is not documented")
    return problems


def handler_methods(handler: type) -> set[str]:
    """The HTTP methods a handler class answers (those it, or a hive-lab base, defines)."""
    from tornado.web import RequestHandler

    return {m for m in METHODS if getattr(handler, m, None) is not getattr(RequestHandler, m)}
