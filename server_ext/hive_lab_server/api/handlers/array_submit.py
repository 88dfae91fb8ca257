"""POST jobs / POST arrays with ``array`` or ``sweep``: the array is stored and answered (handlers/arrays.py
has the other array routes)."""

from __future__ import annotations

from typing import Any

from hive_lab_server.wire import models
from hive_lab_server.jobs.arrays import views
from hive_lab_server.wire.array_spec import plan_from
from hive_lab_server.jobs.service import ServiceError
from hive_lab_server.wire.spec import SpecError
from hive_lab_server.api.handlers import query
from hive_lab_server.api.handlers.base import HiveError


def _raise(exc: ServiceError):
    raise HiveError(exc.status, exc.message, exc.field, retry_after_s=exc.retry_after_s) from None


async def submit_array(handler, spec, caller, vc: str) -> None:
    """The rest of POST jobs / POST arrays for a body with ``array`` or ``sweep``."""
    fields = handler.array_fields
    if not fields:
        raise HiveError(400, "give array (e.g. \"0-49%8\") or sweep (e.g. {\"lr\": [0.1, 0.01]}) to make an "
                             "array; POST jobs submits one job", "array")
    if query.flag(handler, "dry_run"):
        if spec.source is not None:  # #SBATCH --array, an OpenPAI role without gang: the file makes an array
            raise HiveError(400, f"dry_run answers for one job, and this {spec.source.format} file runs as a job "
                                 "array (one job per task or index, each started as it fits); submit it without "
                                 "dry_run (hive-lab jobs ARRAY shows its elements)", "dry_run")
        raise HiveError(400, "dry_run answers for one job: drop array/sweep to ask what would happen to one "
                             "element", "dry_run")
    try:
        plan = plan_from(fields.get("array"), fields.get("sweep"))
    except SpecError as exc:
        raise HiveError(400, exc.message, exc.field) from None
    svc = handler.service
    try:
        array_id = svc.arrays.submit(spec, plan, caller.user, vc, caller.groups,
                                     handler.hive.access.fair_share_group(caller, vc))
    except ServiceError as exc:
        _raise(exc)
    handler.set_header("Location", f"{handler.base_url.rstrip('/')}/hive_lab/api/arrays/{array_id}")
    handler.reply_model(models.Array, array_view(svc, svc.store.get_array(array_id)), 201)


def array_view(svc, row: dict[str, Any]) -> dict[str, Any]:
    states = svc.store.array_states([row["id"]])[row["id"]]
    return views.array_object(row, states, svc.arrays.blocked_reason(row["id"]))
