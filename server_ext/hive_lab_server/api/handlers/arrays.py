"""arrays, arrays/{id}, arrays/{id}/{cancel|pause|resume}: job arrays and sweeps (docs/arrays.md).

``POST arrays`` (or ``POST jobs`` with ``array`` / ``sweep``) takes a JobSpec plus ``array`` ("0-49%8")
and/or ``sweep`` ({"lr": [0.1, 0.01]}) and answers the array (201). Only the owner and admins see an
array's elements or change it; the elements are jobs (jobs/{id}, their logs and outputs as any job's).
"""

from __future__ import annotations

import copy
from typing import Annotated, Any

from jupyter_server.auth.decorator import authorized
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from tornado import web

from hive_lab_server.wire import models
from hive_lab_server.jobs.arrays import views
from hive_lab_server.wire.array_spec import parse_array
from hive_lab_server.jobs.service import ServiceError
from hive_lab_server.wire.spec import SpecError
from hive_lab_server.api.handlers.array_submit import _raise, array_view
from hive_lab_server.api.handlers.base import HiveError, HiveHandler
from hive_lab_server.api.handlers import query
from hive_lab_server.api.handlers.jobs import JobsHandler


class ArrayPatch(BaseModel):
    """The body of PATCH arrays/{id}."""

    model_config = ConfigDict(extra="forbid")
    throttle: Annotated[int, Field(ge=1, le=10_000, strict=True)] | None = Field(
        description="at most this many elements not ended at once; null: no throttle")


class ArrayCancel(BaseModel):
    """The body of POST arrays/{id}/cancel (optional): which elements (default all not ended)."""

    model_config = ConfigDict(extra="forbid")
    indices: Annotated[str, Field(min_length=1, max_length=100_000)] | None = Field(
        None, description="indices and ranges as in the array field, e.g. \"3,5-7\"")
    reason: Annotated[str, Field(max_length=300)] = ""


class ArraysHandler(JobsHandler):
    require_array = True

    async def post(self) -> None:
        """POST jobs' checks (authenticated, authorized, VC, launcher), then the array (``submit_array``)."""
        await super().post()

    @web.authenticated
    @authorized
    def get(self) -> None:
        """The caller's arrays (admins: ``user=`` anyone's, or everyone's with ``user=*``), newest first."""
        caller = self.caller()
        users = query.users(self, caller.user) or [caller.user]
        if users == ["*"]:
            users = []
        if not caller.admin and any(u != caller.user for u in users or ["*"]):
            raise HiveError(403, f"user {caller.user} may list only their own arrays; drop user or use user=me", "user")
        limit, offset, after = query.page(self, 50, 1000)
        rows, total = self.service.store.list_arrays(users=users or None, limit=limit + 1, offset=offset, after=after)
        more, rows = len(rows) > limit, rows[:limit]
        states = self.service.store.array_states([r["id"] for r in rows])
        arrays = [views.array_object(r, states[r["id"]], self.service.arrays.blocked_reason(r["id"])) for r in rows]
        self.reply_model(models.ArrayList, {"arrays": arrays, "total": total, "limit": limit, "offset": offset,
                                            "next": rows[-1]["seq"] if more else None})


class _OwnedArray(HiveHandler):
    def owned_array(self, array_id: str, what: str) -> dict[str, Any]:
        row = self.service.store.get_array(array_id)
        if row is None:
            raise HiveError(404, f"array {array_id} does not exist")
        caller = self.caller()
        if not caller.sees_private(row):
            raise HiveError(403, f"user {caller.user} may not {what} array {array_id} (it belongs to {row['user']})")
        return row

    def body_model(self, model: type[BaseModel], optional: bool = False):
        body = self.json_body() if self.request.body or not optional else {}
        if not isinstance(body, dict):
            raise HiveError(400, f"the body must be a JSON object, got {type(body).__name__}")
        try:
            return model.model_validate(body)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "body"
            raise HiveError(400, f"{where}: {err['msg']}", where) from None


class ArrayHandler(_OwnedArray):
    @web.authenticated
    @authorized
    def get(self, array_id: str) -> None:
        """The array with a page of its elements (by index; ``limit``, ``offset``)."""
        row = self.owned_array(array_id, "read")
        limit = query.integer(self, "limit", 100, 1, 10_000)
        offset = query.integer(self, "offset", 0, 0, 10**9)
        page = row["indices"][offset:offset + limit]
        rows = {r["array_index"]: r for r in self.service.store.array_elements(array_id, page)}
        obj = array_view(self.service, row)
        obj.update(elements=views.element_objects(row, rows, offset, limit), limit=limit, offset=offset)
        self.reply_model(models.Array, obj)

    @web.authenticated
    @authorized
    async def delete(self, array_id: str) -> None:
        """Cancel every element not ended (pending ones are never released)."""
        row = self.owned_array(array_id, "cancel")
        try:
            await self.service.arrays.cancel(row, None, f"{self.caller().user} (array {array_id} cancelled)")
        except ServiceError as exc:
            _raise(exc)
        self.reply_model(models.Array, array_view(self.service, self.service.store.get_array(array_id)))

    @web.authenticated
    @authorized
    def patch(self, array_id: str) -> None:
        """Change the throttle (``{"throttle": 4}``, null: none); running elements are not stopped."""
        row = self.owned_array(array_id, "change")
        req = self.body_model(ArrayPatch)
        try:
            self.service.arrays.set_throttle(row, req.throttle)
        except ServiceError as exc:
            _raise(exc)
        self.reply_model(models.Array, array_view(self.service, self.service.store.get_array(array_id)))


class ArrayActionHandler(_OwnedArray):
    @web.authenticated
    @authorized
    async def post(self, array_id: str, action: str) -> None:
        row = self.owned_array(array_id, action)
        by = f"by {self.caller().user} (array {array_id})"
        arrays = self.service.arrays
        try:
            if action == "cancel":
                req = self.body_model(ArrayCancel, optional=True)
                indices = None
                if req.indices is not None:
                    try:
                        indices, _ = parse_array(req.indices)
                    except SpecError as exc:
                        raise HiveError(400, exc.message.replace("array:", "indices:", 1), "indices") from None
                    unknown = sorted(set(indices) - set(row["indices"]))
                    if unknown:
                        raise HiveError(400, f"indices: array {array_id} has no element {unknown[0]}; its indices "
                                             f"are {views.compact(row['indices'])}", "indices")
                    indices = list(indices)
                who = self.caller().user + (f" ({req.reason})" if req.reason else "")
                await arrays.cancel(row, indices, who)
            elif action == "pause":
                await arrays.hold(row, by)
            else:
                arrays.release_hold(row, by)
        except ServiceError as exc:
            _raise(exc)
        self.reply_model(models.Array, array_view(self.service, self.service.store.get_array(array_id)))


def array_spec_schema(job_spec: dict[str, Any]) -> dict[str, Any]:
    """POST arrays' body: a JobSpec (closed to other fields) plus array and/or sweep."""
    schema = copy.deepcopy(job_spec)
    schema["title"] = "ArraySpec"
    schema["description"] = "A JobSpec plus array and/or sweep (docs/arrays.md)"
    schema["properties"].update({
        "array": {"type": "string", "minLength": 1, "description": "indices, ranges (N-M, N-M:STEP), %THROTTLE"},
        "sweep": {"type": "object", "additionalProperties": {"type": "array", "minItems": 1}}})
    one_of_them = {"anyOf": [{"required": ["array"]}, {"required": ["sweep"]}]}
    command = schema.pop("anyOf", None)
    schema["allOf"] = [one_of_them] + ([{"anyOf": command}] if command else [])
    return schema
