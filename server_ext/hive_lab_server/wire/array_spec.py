"""The ``array`` and ``sweep`` fields of a submit, read into an ``ArrayPlan``.

``array``: Slurm's syntax: comma-separated indices and ranges, an optional step and an optional throttle,
e.g. ``"0-49%8"`` (indices 0..49, at most 8 running at once), ``"1,3,5-9%2"``, ``"0-20:5"`` (0, 5, 10,
15, 20). For a sweep only the throttle may be given (``"%8"``).

``sweep``: ``{"lr": [0.1, 0.01], "bs": [32, 64]}``, expanded to the product of its lists in a stable
order: names sorted (by code point), the LAST name varying fastest, each list in the order given. So
``{"lr": [0.1, 0.01], "bs": [32, 64]}`` gives, for indices 0..3: bs=32 lr=0.1, bs=32 lr=0.01, bs=64
lr=0.1, bs=64 lr=0.01. The element with index i gets the i-th set (``HIVE_PARAM_BS``, ``HIVE_PARAM_LR``
and a JSON file, ``HIVE_PARAMS_FILE``).

Every refusal is a ``SpecError`` (400) that says what to change.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Any

from hive_lab_server.wire.spec import SpecError

MAX_ELEMENTS = 10_000  # one array (or the product of one sweep) has at most this many elements
MAX_INDEX = 1_000_000  # the largest index an array may name
PARAM_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_PARAM_VALUE_CHARS = 1000
PARAMS_FILE = "hive-params.json"  # staged in each sweep element's working dir (HIVE_PARAMS_FILE)

_RANGE = re.compile(r"^(\d{1,7})(?:-(\d{1,7})(?::(\d{1,7}))?)?$")


@dataclasses.dataclass(frozen=True)
class ArrayPlan:
    """What one submit asks for: the elements' indices (ascending, distinct), the throttle (None: no
    limit but the cluster's and the owner's) and, for a sweep, its axes (name -> values)."""

    indices: tuple[int, ...]
    throttle: int | None
    sweep: dict[str, list[Any]] | None = None

    @property
    def count(self) -> int:
        return len(self.indices)

    def params(self, position: int) -> dict[str, Any] | None:
        """The parameters of the element at ``position`` (0-based; a sweep's index is its position)."""
        if self.sweep is None:
            return None
        return sweep_params(self.sweep, position)


def parse_throttle(text: str, field: str = "array") -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_ELEMENTS:
        raise SpecError(f"{field}: the throttle after % must be a whole number from 1 to {MAX_ELEMENTS} "
                        f"(at most that many elements run at once), got {text!r}; e.g. \"0-49%8\"", field)
    return int(text)


def parse_array(text: Any) -> tuple[tuple[int, ...], int | None]:
    """``"0-49%8"`` -> (indices 0..49, throttle 8). An index list may be empty only with a sweep."""
    field = "array"
    if not isinstance(text, str):
        raise SpecError(f"{field}: give a string of indices and ranges, e.g. \"0-49%8\" or \"1,3,5-9%2\"", field)
    body, _, throttle_text = text.strip().partition("%")
    throttle = parse_throttle(throttle_text.strip()) if "%" in text else None
    body = body.strip()
    if not body:
        return (), throttle
    indices: set[int] = set()
    for part in body.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise SpecError(f"{field}: {part.strip()!r} is not an index or a range; use N, N-M or N-M:STEP, "
                            f"comma-separated, e.g. \"1,3,5-9%2\"", field)
        lo = int(match.group(1))
        hi = int(match.group(2)) if match.group(2) is not None else lo
        step = int(match.group(3)) if match.group(3) is not None else 1
        if hi < lo:
            raise SpecError(f"{field}: the range {part.strip()!r} ends before it starts; write it {hi}-{lo}", field)
        if step < 1:
            raise SpecError(f"{field}: the step in {part.strip()!r} must be 1 or more", field)
        if hi > MAX_INDEX:
            raise SpecError(f"{field}: indices go up to {MAX_INDEX}; {hi} is too large", field)
        if (hi - lo) // step + 1 + len(indices) > MAX_ELEMENTS:
            raise SpecError(f"{field}: {text!r} makes more than {MAX_ELEMENTS} elements; split it into arrays "
                            f"of at most {MAX_ELEMENTS}", field)
        indices.update(range(lo, hi + 1, step))
    if len(indices) > MAX_ELEMENTS:
        raise SpecError(f"{field}: {text!r} makes {len(indices)} elements; at most {MAX_ELEMENTS} per array", field)
    return tuple(sorted(indices)), throttle


def parse_sweep(value: Any) -> dict[str, list[Any]]:
    """``{"lr": [0.1, 0.01], "bs": [32, 64]}``: names sorted; each value a non-empty list of distinct
    strings, numbers or booleans; at most ``MAX_ELEMENTS`` sets in the product."""
    field = "sweep"
    if not isinstance(value, dict) or not value:
        raise SpecError(f"{field}: give an object of parameter name -> list of values, e.g. "
                        f"{{\"lr\": [0.1, 0.01], \"bs\": [32, 64]}}", field)
    axes: dict[str, list[Any]] = {}
    total = 1
    for name in sorted(value):
        values = value[name]
        where = f"{field}.{name}"
        if not isinstance(name, str) or not PARAM_NAME_RE.match(name):
            raise SpecError(f"{field}: parameter name {name!r} is invalid; use letters, digits and _ (it becomes "
                            f"HIVE_PARAM_<NAME>), not starting with a digit, at most 64 characters", field)
        if not isinstance(values, list) or not values:
            raise SpecError(f"{where}: give a non-empty list of values, e.g. [0.1, 0.01]", where)
        seen: set[str] = set()
        for v in values:
            if isinstance(v, (dict, list)) or v is None:
                raise SpecError(f"{where}: values must be strings, numbers or true/false, got {v!r}", where)
            if isinstance(v, str) and len(v) > MAX_PARAM_VALUE_CHARS:
                raise SpecError(f"{where}: a value is longer than {MAX_PARAM_VALUE_CHARS} characters", where)
            if isinstance(v, str) and "\x00" in v:
                raise SpecError(f"{where}: a value contains a NUL character", where)
            key = repr((type(v).__name__, v))
            if key in seen:
                raise SpecError(f"{where}: the value {v!r} is given twice; each value once", where)
            seen.add(key)
        total *= len(values)
        if total > MAX_ELEMENTS:
            raise SpecError(f"{field}: the product of the lists has more than {MAX_ELEMENTS} parameter sets; "
                            f"sweep fewer values or split the sweep", field)
        axes[name] = list(values)
    upper = {n.upper() for n in axes}
    if len(upper) != len(axes):
        raise SpecError(f"{field}: two parameter names differ only in case (they would share HIVE_PARAM_<NAME>); "
                        f"rename one", field)
    return axes


def sweep_size(axes: dict[str, list[Any]]) -> int:
    n = 1
    for values in axes.values():
        n *= len(values)
    return n


def sweep_params(axes: dict[str, list[Any]], position: int) -> dict[str, Any]:
    """The ``position``-th set of the product (names sorted, the last varying fastest) without building
    the product."""
    names = sorted(axes)
    out: dict[str, Any] = {}
    for name in reversed(names):
        values = axes[name]
        position, k = divmod(position, len(values))
        out[name] = values[k]
    return {n: out[n] for n in names}


def all_sweep_params(axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    names = sorted(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[n] for n in names))]


def param_env_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def plan_from(array: Any = None, sweep: Any = None) -> ArrayPlan:
    """The plan of a submit's ``array`` and/or ``sweep``. With a sweep, ``array`` may only give the
    throttle (``"%8"``): the sweep's sets are the elements, numbered 0..N-1."""
    if sweep is not None:
        axes = parse_sweep(sweep)
        throttle = None
        if array is not None:
            indices, throttle = parse_array(array)
            if indices:
                raise SpecError("array: with a sweep the elements are the sweep's parameter sets (indices 0..N-1); "
                                "give only a throttle, e.g. \"array\": \"%8\", or drop the sweep", "array")
        n = sweep_size(axes)
        return ArrayPlan(indices=tuple(range(n)), throttle=throttle, sweep=axes)
    indices, throttle = parse_array(array)
    if not indices:
        raise SpecError("array: name at least one index, e.g. \"0-49%8\" (a bare \"%8\" only goes with a sweep)",
                        "array")
    return ArrayPlan(indices=indices, throttle=throttle)
