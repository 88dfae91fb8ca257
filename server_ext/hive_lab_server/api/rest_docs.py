"""docs/rest-api.md's endpoint tables, generated from the route table (``api/handlers/__init__.py``), so the
docs list exactly the routes the server registers and documents (tests/server/api/test_rest_docs.py):

    python -m hive_lab_server.api.rest_docs docs/rest-api.md

Each table stands between ``<!-- endpoints:AREA -->`` and ``<!-- /endpoints:AREA -->`` (AREA: a route's
``area``); only what is between the markers is rewritten, the prose around them stays as written.
"""

from __future__ import annotations

import re
import sys

from hive_lab_server.api.routes import Answer, Operation, Route, model_name

MARKERS = re.compile(r"(<!-- endpoints:(?P<area>[\w-]+) -->\n)(?P<body>.*?)(<!-- /endpoints:(?P=area) -->)", re.S)
HEADER = ("| method | path | who | what | parameters |\n"
          "| --- | --- | --- | --- | --- |\n")


def _cell(text: str) -> str:
    """One line, with what Markdown would take for a column, a tag or emphasis escaped."""
    text = " ".join(text.split())
    for char, escaped in (("|", "\\|"), ("<", "&lt;"), (">", "&gt;"), ("*", "\\*")):
        text = text.replace(char, escaped)
    return text


def _answer(answer: Answer) -> str:
    return f"{answer.status}" + (f" `{model_name(answer.content)}`" if answer.content else "")


def _parameters(op: Operation) -> str:
    parts = [f"`{p['name']}`" for p in op.query if p["in"] == "query"]
    if op.body is not None:
        kinds = "".join(f", `{kind}`" for kind in op.body_content)
        parts.append(f"body: `{model_name(op.body)}`{kinds}" + ("" if op.body_required else " (optional)"))
    return ", ".join(parts)


def row(route: Route, op: Operation) -> str:
    what = f"{op.summary} → " + ", ".join(_answer(a) for a in (op.ok, *op.also))
    path = route.doc_path(op).lstrip("/")
    return f"| {op.method.upper()} | `{path}` | {_cell(op.who)} | {_cell(what)} | {_parameters(op)} |\n"


def table(routes: list[Route], area: str) -> str:
    rows = [row(route, op) for route in routes if route.area == area for op in route.operations]
    if not rows:
        raise ValueError(f"docs/rest-api.md has a table for area {area!r}, which no route has")
    return HEADER + "".join(rows)


def render(text: str, routes: list[Route]) -> str:
    """``text`` with every marked table rewritten; ValueError when a route's area has no table there."""
    areas = {m.group("area") for m in MARKERS.finditer(text)}
    missing = sorted({route.area for route in routes} - areas)
    if missing:
        raise ValueError(f"docs/rest-api.md has no table for the routes of {', '.join(missing)}: add "
                         f"<!-- endpoints:{missing[0]} --> and <!-- /endpoints:{missing[0]} --> where it belongs")
    return MARKERS.sub(lambda m: m.group(1) + table(routes, m.group("area")) + m.group(4), text)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m hive_lab_server.api.rest_docs docs/rest-api.md", file=sys.stderr)
        return 2
    from hive_lab_server.api.handlers import TABLE

    with open(argv[0], encoding="utf-8") as f:
        text = render(f.read(), TABLE)
    with open(argv[0], "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
