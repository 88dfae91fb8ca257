"""POST jobs/{id}/pause | resume | migrate | resize: the time-sharing mechanisms by hand.

Pause and resume: the job's owner or an admin. Migrate and resize: admins (they choose where and how
big a job runs, which is the scheduler's business). The body is optional for pause/resume
(``{"reason": "..."}``); migrate needs ``{"gpu_type": "V100"}``, resize ``{"gpus": 4}``. A job that
cannot do it now is a 409 saying why (finished, already paused, being stopped, not elastic ...).
"""

from __future__ import annotations

from typing import Annotated, Any

from jupyter_server.auth.decorator import authorized
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from tornado import web

from hive_lab_server.wire import models
from hive_lab_server.jobs.service import ServiceError
from hive_lab_server.api.handlers.base import HiveError, HiveHandler

ADMIN_ONLY = {"migrate", "resize"}


class JobAction(BaseModel):
    """The body of POST jobs/{id}/pause and /resume (optional)."""

    model_config = ConfigDict(extra="forbid")
    reason: Annotated[str, Field(max_length=300)] = ""


class MigrateAction(JobAction):
    """The body of POST jobs/{id}/migrate: the GPU type to move to."""

    gpu_type: Annotated[str, Field(min_length=1, max_length=64, description="e.g. V100")]


class ResizeAction(JobAction):
    """The body of POST jobs/{id}/resize: the job's new GPU count."""

    gpus: Annotated[int, Field(ge=1, le=1024, strict=True)]

    @field_validator("gpus", mode="before")
    @classmethod
    def _whole_number(cls, v: Any) -> Any:
        """JSON Schema's integer includes 314.0 (the OpenAPI document allows it); "314" and 314.5 stay refused."""
        return int(v) if isinstance(v, float) and v.is_integer() else v


BODIES: dict[str, type[JobAction]] = {"pause": JobAction, "resume": JobAction, "migrate": MigrateAction,
                                      "resize": ResizeAction}
MISSING = {"gpu_type": "gpu_type: give the GPU type to move the job to, e.g. {\"gpu_type\": \"V100\"}",
           "gpus": "gpus: give the job's new GPU count, e.g. {\"gpus\": 4}"}


class JobActionHandler(HiveHandler):
    @web.authenticated
    @authorized
    async def post(self, job_id: str, action: str) -> None:
        row = self.job_row(job_id)
        caller = self.caller()
        if action in ADMIN_ONLY and not caller.admin:
            raise HiveError(403, f"user {caller.user} may not {action} job {job_id}; only admins may")
        if not caller.sees_private(row):
            raise HiveError(403, f"user {caller.user} may not {action} job {job_id} (it belongs to {row['user']})")
        body = self.json_body() if self.request.body else {}
        if not isinstance(body, dict):
            raise HiveError(400, f"the body must be a JSON object like {{\"reason\": \"...\"}}, got {type(body).__name__}")
        try:
            req = BODIES[action].model_validate(body)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "body"
            if err["type"] == "missing" and where in MISSING:
                raise HiveError(400, MISSING[where], where) from None
            raise HiveError(400, f"{where}: {err['msg']}", where) from None
        by = f"by {caller.user}" + (f" ({req.reason})" if req.reason else "")
        moves = self.moves
        wait_s = self.hive.cancel_wait_s
        try:
            if action == "pause":
                job = await moves.pause(job_id, by, wait_s=wait_s)
            elif action == "resume":
                job = moves.resume(job_id, by)
            elif isinstance(req, MigrateAction):
                job = await moves.migrate(job_id, req.gpu_type, by, wait_s=wait_s)
            else:
                assert isinstance(req, ResizeAction)
                job = await moves.resize(job_id, req.gpus, by, wait_s=wait_s)
        except ServiceError as exc:
            raise HiveError(exc.status, exc.message, exc.field, retry_after_s=exc.retry_after_s) from None
        self.reply_model(models.Job, job)
