"""The TypeScript interfaces of what the REST API answers, generated from the response models' JSON Schema
(``wire/models.py``), so the panel's types are the server's and cannot drift (tests/server/api/test_wire_ts.py).

    python -m hive_lab_server.api.typescript labextension/src/wire.ts

Each model ``M`` becomes ``export interface IM``: a field the server always sends is required, one it may
leave out (a default, sent only when set) is optional (``?``); ``X | None`` is ``X | null``; the job states
come from the generated ``jobStates.ts`` (``JobState``), never listed here by hand.
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic import BaseModel

from hive_lab_server.wire import models
from hive_lab_server.wire.job_state import STATE_NAMES

HEADER = """// Generated from hive_lab_server/wire/models.py by
//   python -m hive_lab_server.api.typescript labextension/src/wire.ts
// Do not edit: tests/server/api/test_wire_ts.py fails when this file and the Python drift.
"""


def wire_models() -> list[type[BaseModel]]:
    """Every response model (and the error body), in the order models.py declares them."""
    found = []
    for value in vars(models).values():
        if (isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == models.__name__
                and not value.__name__.startswith("_")
                # answers allow extra fields (a newer server may add some); request bodies forbid them
                and (value.model_config.get("extra") == "allow" or value in (models.Error, models.Limits))):
            found.append(value)
    return found


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)


def _type(schema: dict[str, Any], defs: dict[str, Any]) -> str:
    """The TypeScript type of one JSON Schema."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        target = defs.get(name, {})
        if "enum" in target:  # an enum class (JobState): its union, or the generated JobState
            return _type(target, defs)
        return f"I{name}"
    if "anyOf" in schema:
        parts = [_type(s, defs) for s in schema["anyOf"]]
        return " | ".join(dict.fromkeys(parts))
    if "const" in schema:
        return _literal(schema["const"])
    if "enum" in schema:
        values = list(schema["enum"])
        if set(STATE_NAMES) <= set(values):  # the job states (and maybe more): named, never copied
            rest = [v for v in values if v not in STATE_NAMES]
            return " | ".join(["JobState", *(_literal(v) for v in rest)])
        return " | ".join(_literal(v) for v in values)
    kind = schema.get("type")
    if kind == "string":
        return "string"
    if kind in ("integer", "number"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    if kind == "array":
        item = _type(schema.get("items", {}), defs)
        return f"({item})[]" if "|" in item else f"{item}[]"
    if kind == "object":
        if "properties" in schema:  # an inline object: not made by these models
            raise ValueError(f"an inline object type in the models: {schema}")
        extra = schema.get("additionalProperties")
        value = _type(extra, defs) if isinstance(extra, dict) else "unknown"
        return f"{{ [key: string]: {value} }}"
    return "unknown"


def _doc(text: str | None, indent: str) -> list[str]:
    if not text:
        return []
    words = " ".join(text.split()).replace("*/", "* /")
    return [f"{indent}/** {words} */"]


def interface(model: type[BaseModel]) -> str:
    schema = model.model_json_schema(mode="serialization")
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    lines = [*_doc(model.__doc__ and model.__doc__.strip().split("\n\n")[0], ""),
             f"export interface I{model.__name__} {{"]
    for name, field in schema.get("properties", {}).items():
        lines += _doc(field.get("description"), "  ")
        optional = "" if name in required else "?"
        lines.append(f"  {name}{optional}: {_type(field, defs)};")
    lines.append("}")
    return "\n".join(lines)


def typescript() -> str:
    body = "\n\n".join(interface(m) for m in wire_models())
    uses_states = "JobState" in body
    head = HEADER + ("\nimport { JobState } from './jobStates';\n" if uses_states else "")
    return head + "\n" + body + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m hive_lab_server.api.typescript labextension/src/wire.ts", file=sys.stderr)
        return 2
    with open(argv[0], "w", encoding="utf-8") as out:
        out.write(typescript())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
