"""``--after`` for the CLI and ``%%submit``: which jobs a new job waits for, as ``depends_on`` entries.

``--after REF[:WHEN]`` (repeatable; several REFs may be given comma-separated). REF is a job id
(``j-000012``) or a job array's (``a-000003``: it has ended when all its elements did; it succeeded when
they all did), a ``Job`` or ``JobArray`` handle or a variable holding one (``%%submit`` only), or the name of one of
your jobs (the newest job of yours with that name). WHEN is what that job must do for this one to
start: ``ok`` / ``succeeded`` (the default), ``failed`` / ``notok``, or ``ended`` / ``any``.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

from .errors import BadRequest

WHEN = {"": "succeeded", "ok": "succeeded", "succeeded": "succeeded", "success": "succeeded",
        "failed": "failed", "notok": "failed", "fail": "failed", "ended": "ended", "any": "ended", "end": "ended"}
JOB_ID = re.compile(r"^[ja]-\d+$")  # a job, or a job array (it ends when all its elements did)


def split_after(values: Iterable[str]) -> list[tuple[str, str]]:
    """``["train", "prep:any,j-000003"]`` -> ``[("train", "succeeded"), ("prep", "ended"), ("j-000003", "succeeded")]``."""
    out = []
    for value in values:
        for item in str(value).split(","):
            item = item.strip()
            if not item:
                continue
            ref, _, when = item.partition(":")
            if when.lower() not in WHEN:
                raise BadRequest(f"--after {item}: after the colon use ok, failed or ended (got {when!r})",
                                 field="depends_on")
            out.append((ref.strip(), WHEN[when.lower()]))
    return out


def depends_on(values: Iterable[str], resolve: Callable[[str], str]) -> list[dict[str, str]]:
    """The ``depends_on`` entries for ``--after`` values; ``resolve(ref) -> job id``."""
    return [{"job": resolve(ref), "when": when} for ref, when in split_after(values)]


def job_id_of(value: Any) -> str | None:
    """The id of a ``Job`` handle, a job dict or an id string (None for anything else)."""
    if isinstance(value, str) and JOB_ID.match(value):
        return value
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return value["id"]
    job_id = getattr(value, "id", None)
    return job_id if isinstance(job_id, str) else None


def resolver(client: Any, namespace: dict | None = None) -> Callable[[str], str]:
    """REF -> job id: an id as it is; a variable of ``namespace`` holding a job; else the newest of the
    caller's jobs named REF (BadRequest if there is none)."""
    def resolve(ref: str) -> str:
        if JOB_ID.match(ref):
            return ref
        if namespace is not None and ref in namespace:
            found = job_id_of(namespace[ref])
            if found:
                return found
        named = [j for j in client.jobs(user="me") if j.get("name") == ref]
        if not named:
            raise BadRequest(f"--after {ref}: no job of yours has that id or name; give a job id (j-000012), "
                             "an array id (a-000003) or the name of one of your jobs", field="depends_on")
        return max(named, key=lambda j: (j.get("submitted_at") or "", j["id"]))["id"]
    return resolve
