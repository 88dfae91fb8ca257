"""The ``--array`` and ``--sweep`` options of ``hive-lab submit`` and ``%%submit`` as a submit's fields.

``--sweep lr=0.1,0.01 --sweep bs=32,64`` -> ``{"lr": [0.1, 0.01], "bs": [32, 64]}``: each value is read
as JSON where it is a number or true/false (``32`` -> 32, ``0.1`` -> 0.1), else kept as text. The server
checks the rest (docs/arrays.md) and says what to fix.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import BadRequest


def _value(text: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (int, float, bool)) else text


def parse_sweep(items: list[str] | None) -> dict[str, list[Any]] | None:
    """``["lr=0.1,0.01", "bs=32,64"]`` -> ``{"lr": [0.1, 0.01], "bs": [32, 64]}`` (None for no items)."""
    if not items:
        return None
    out: dict[str, list[Any]] = {}
    for item in items:
        name, eq, values = item.partition("=")
        name = name.strip()
        if not eq or not name or not values.strip():
            raise BadRequest(f"--sweep takes NAME=V1,V2,..., e.g. --sweep lr=0.1,0.01; got {item!r}", field="sweep")
        if name in out:
            raise BadRequest(f"--sweep {name} is given twice; give all its values once: {name}=V1,V2", field="sweep")
        out[name] = [_value(v.strip()) for v in values.split(",")]
    return out


def array_fields(array: str | None, sweep_items: list[str] | None) -> dict[str, Any]:
    """The submit body's ``array`` / ``sweep`` fields ({} when neither is given)."""
    fields: dict[str, Any] = {}
    if array:
        fields["array"] = array
    sweep = parse_sweep(sweep_items)
    if sweep is not None:
        fields["sweep"] = sweep
    return fields
