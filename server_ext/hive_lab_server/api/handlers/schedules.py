"""schedules, schedules/{id}, schedules/{id}/pause | resume: recurring jobs (pipelines/schedules.py).

Anyone may create one for themselves (the checks of a ``POST jobs`` apply, as its owner); each user
sees and changes only their own; admins see and change everyone's. Another user's schedule answers
404, as one that does not exist.
"""

from __future__ import annotations

from typing import Any

from jupyter_server.auth.decorator import authorized
from tornado import web

from hive_lab_server.errors import ServiceError
from hive_lab_server.wire.schedule_models import ScheduleList, ScheduleOut
from hive_lab_server.api.handlers.base import HiveError, HiveHandler
from hive_lab_server.api.handlers import query

SCHEDULE_ID = r"(?P<schedule_id>[A-Za-z0-9_.-]{1,64})"


def _answer(call, *args):
    try:
        return call(*args)
    except ServiceError as exc:
        raise HiveError(exc.status, exc.message, exc.field, retry_after_s=exc.retry_after_s) from None


class SchedulesHandler(HiveHandler):
    @web.authenticated
    @authorized
    def get(self) -> None:
        caller = self.caller()
        users = query.users(self, caller.user)
        if not caller.admin:
            if any(u != caller.user for u in users):
                raise HiveError(403, f"user {caller.user} may only list their own schedules (user=me)", "user")
            users = [caller.user]
        self.reply_model(ScheduleList, self.hive.schedules.list(users or None))

    @web.authenticated
    @authorized
    def post(self) -> None:
        body = self.json_body()
        if not isinstance(body, dict):
            raise HiveError(400, "send a JSON object describing the schedule: name, cron, timezone, policy, job")
        schedule = _answer(self.hive.schedules.create, self.caller(), body)
        self.reply_model(ScheduleOut, schedule, 200 if schedule.get("replaced") else 201)


class ScheduleHandler(HiveHandler):
    @web.authenticated
    @authorized
    def get(self, schedule_id: str) -> None:
        _answer(self.hive.schedules.visible, self.caller(), schedule_id)
        self.reply_model(ScheduleOut, self.hive.schedules.view(schedule_id))

    @web.authenticated
    @authorized
    def delete(self, schedule_id: str) -> None:
        _answer(self.hive.schedules.visible, self.caller(), schedule_id)
        self.hive.schedules.delete(schedule_id)
        self.set_status(204)
        self.finish()


class ScheduleActionHandler(HiveHandler):
    @web.authenticated
    @authorized
    def post(self, schedule_id: str, action: str) -> None:
        _answer(self.hive.schedules.visible, self.caller(), schedule_id)
        self.reply_model(ScheduleOut, self.hive.schedules.set_paused(schedule_id, action == "pause"))


ROUTES = [
    (rf"/schedules/?", SchedulesHandler),
    (rf"/schedules/{SCHEDULE_ID}/?", ScheduleHandler),
    (rf"/schedules/{SCHEDULE_ID}/(?P<action>pause|resume)/?", ScheduleActionHandler),
]


def openapi_paths(op, json) -> dict[str, Any]:
    """The schedules' operations for the OpenAPI document (``openapi._paths``)."""
    param = {"name": "schedule_id", "in": "path", "required": True,
             "schema": {"type": "string", "pattern": "^[A-Za-z0-9_.-]{1,64}$"}}
    one = (200, "the schedule with its next run and its last runs", json(ScheduleOut))
    paths = {
        "/schedules": {
            "get": op("listSchedules", "Recurring jobs with their next run time and last runs (yours; admins: "
                                       "everyone's, or user=...)", (200, "the schedules", json(ScheduleList)), (400, 403),
                      ({"name": "user", "in": "query", "required": False, "schema": query.NAMES_SCHEMA,
                        "description": "comma-separated user names (admins); `me` is the caller"},)),
            "post": op("createSchedule", "A job submitted as you at each time a cron expression names in a time "
                                         "zone (docs/schedules.md); a schedule of yours with the same name is "
                                         "replaced (200, replaced: true)", (201, "the schedule", json(ScheduleOut)),
                       (400, 403), body={"$ref": "#/components/schemas/ScheduleBody"}),
        },
        "/schedules/{schedule_id}": {
            "parameters": [param],
            "get": op("getSchedule", "One schedule (owner or admin)", one, (404,)),
            "delete": op("deleteSchedule", "Delete a schedule (owner or admin); its jobs are not touched",
                         (204, "deleted", {}), (404,)),
        },
        "/schedules/{schedule_id}/pause": {"parameters": [param], "post": op(
            "pauseSchedule", "No runs until resumed (owner or admin)", one, (404,))},
        "/schedules/{schedule_id}/resume": {"parameters": [param], "post": op(
            "resumeSchedule", "Runs again from the next due time after now; missed times are not run (owner or "
                              "admin)", one, (404,))},
    }
    paths["/schedules"]["post"]["responses"]["200"] = {
        "description": "your schedule of that name, replaced by this one (replaced: true; same id, its runs kept)",
        "content": json(ScheduleOut)}
    return paths
