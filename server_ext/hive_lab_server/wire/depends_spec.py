"""The ``depends_on`` field of a job spec: ``[{"job": "j-000012", "when": "succeeded"}]``.

``when``: ``succeeded`` (the default), ``failed`` or ``ended`` (any final state). The short form
``"after": ["j-000012"]`` means ``succeeded`` for each id; it is folded into ``depends_on`` before
validation, so the stored spec has one form only.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

WHEN = ("succeeded", "failed", "ended")
JOB_REF = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"
MAX_DEPENDENCIES = 64


class Dependency(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job: Annotated[str, Field(pattern=JOB_REF, description="the id of a job submitted before this one")]
    when: Literal["succeeded", "failed", "ended"] = Field(
        "succeeded", description="what the other job must do for this one to start: succeed, fail, or end in any way")


DependsOn = Annotated[list[Dependency], Field(max_length=MAX_DEPENDENCIES)]


def fold_after(body: Any) -> Any:
    """``after: [ids]`` -> ``depends_on`` entries with ``when: succeeded`` (a body without it unchanged).
    Raises ValueError (the caller names the field) for an ``after`` that is not a list of ids."""
    if not isinstance(body, dict) or "after" not in body:
        return body
    body = dict(body)
    after = body.pop("after")
    if isinstance(after, str):
        after = [after]
    if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
        raise ValueError("give a list of job ids, e.g. [\"j-000012\"]")
    existing = body.get("depends_on") or []
    if not isinstance(existing, list):
        raise ValueError("depends_on must be a list when after is given too")
    body["depends_on"] = list(existing) + [{"job": a, "when": "succeeded"} for a in after]
    return body
