"""What every format translator returns, and the small helpers they share.

A translator is a pure function ``(document) -> Translation``: hive-lab's own job request (the dict
``spec.JobSpec`` validates), the reasons for what it could not apply, and the original document with
its secrets masked. It raises ``spec.SpecError`` naming the field of the original that hive-lab cannot
run and why.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from hive_lab_server.wire.spec import SpecError

SECRET_MASK = "<secret>"  # what a secret's value reads as wherever the job's spec is shown or stored


@dataclasses.dataclass
class Translation:
    format: str  # "openpai-v1", "openpai-v2", "sbatch", "kubernetes", "volcano"
    request: dict[str, Any]  # hive-lab's job request (JobSpec's fields)
    original: Any  # the document as sent, secrets masked
    not_applied: list[str] = dataclasses.field(default_factory=list)  # "field: what hive-lab does instead"
    runtime: dict[str, Any] = dataclasses.field(default_factory=dict)  # what execution.runtime_env needs at launch
    secrets: dict[str, str] = dataclasses.field(default_factory=dict)  # env name -> clear value (never stored)


NO_IMAGE_HINT = ("or, on a server without containers, submit the file with --no-image "
                 "(hive-lab submit FILE --no-image) to run its commands as processes")


def image_not_applied(field: str, images: list[str]) -> str:
    """The note a job sent with ``--no-image`` keeps about the images its file names."""
    named = ", ".join(repr(i) for i in dict.fromkeys(images)) or "none given"
    return f"{field}: {named} not applied (--no-image): the commands run as processes on this server"


def fail(field: str, why: str) -> SpecError:
    return SpecError(f"{field}: {why}", field)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def want_int(v: Any, field: str, minimum: int | None = None) -> int:
    if isinstance(v, str) and re.fullmatch(r"-?\d+", v.strip()):
        v = int(v)
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if not is_int(v):
        raise fail(field, f"must be a whole number (got {v!r:.40})")
    if minimum is not None and v < minimum:
        raise fail(field, f"must be at least {minimum} (got {v})")
    return v


def want_str(v: Any, field: str) -> str:
    if not isinstance(v, str):
        raise fail(field, f"must be a string (got {v!r:.40})")
    return v


def want_dict(v: Any, field: str) -> dict:
    if not isinstance(v, dict):
        raise fail(field, f"must be a mapping (got {type(v).__name__})")
    return v


def want_list(v: Any, field: str) -> list:
    if not isinstance(v, list):
        raise fail(field, f"must be a list (got {type(v).__name__})")
    return v


def env_value(v: Any) -> str:
    """An environment value as platforms write them: true/false for booleans, numbers as written."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return ""
    return str(v)


def task_name(name: str, field: str) -> str:
    """A task group name hive-lab takes (letters, digits, _ . -, starting with a letter or digit)."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", name):
        raise fail(field, f"task name {name!r:.70} must start with a letter or digit and hold only letters, digits, "
                          "_ . - (63 characters at most)")
    return name


def job_name(name: Any) -> str:
    """A job name hive-lab shows (1..128 characters); longer ones are cut."""
    text = str(name or "job").strip() or "job"
    return text[:128]


def vc_from(value: Any, field: str, not_applied: list[str]) -> str | None:
    """A platform's VC/queue/partition name. ``default`` (every platform's name for "the one you get")
    means the caller's default VC, as it does there; other names must exist (the handler checks)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise fail(field, f"must be a string (got {value!r:.40})")
    if value == "default":
        not_applied.append(f"{field}: 'default' means your default VC here")
        return "@default"
    return value


ABSENT = object()  # a field the document does not have (unlike one given as null)


def completion_count(v: Any, field: str, count: int, default: int | None) -> int | None:
    """A completion policy's task count (OpenPAI's minFailed/minSucceeded) as hive-lab's ``min_failed`` /
    ``min_succeeded``: absent -> ``default``; null or -1 -> None (never); 0 acts as 1 (the first such
    exit reaches it); more than the role's tasks can never be reached -> None. Each keeps its meaning."""
    if v is ABSENT:
        return default
    if v is None:
        return None
    n = want_int(v, field, -1)
    if n == -1 or n > count:
        return None
    return max(n, 1)

