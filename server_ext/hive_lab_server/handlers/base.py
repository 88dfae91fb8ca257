"""Common base of hive-lab's REST handlers: auth, JSON errors, body size limit, the caller."""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from tornado import web

from ..access import Caller, identify
from ..service import HiveService, ServiceError

AUTH_RESOURCE = "hive_lab"


class HiveError(web.HTTPError):
    """An error answered as ``{"error": message, "field": field}``."""

    def __init__(self, status: int, message: str, field: str | None = None, retry_after_s: int | None = None):
        super().__init__(status, log_message=message.replace("%", "%%"))
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s


async def wait_for_recovery(handler: Any) -> None:
    """Hold a request until hive-lab has recovered its jobs after a restart (so nobody sees or changes
    the state from before recovery); 503 with Retry-After when that takes longer than ``recovery_wait_s``."""
    hive = handler.settings["hive_lab"]
    try:
        await hive.service.wait_ready(hive.recovery_wait_s)
    except ServiceError as exc:
        raise HiveError(exc.status, exc.message, exc.field, retry_after_s=1) from None


class HiveHandler(ExtensionHandlerMixin, APIHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def hive(self):
        return self.settings["hive_lab"]

    @property
    def service(self) -> HiveService:
        return self.hive.service

    async def prepare(self) -> None:
        await super().prepare()
        await wait_for_recovery(self)
        limit = self.hive.max_body_bytes
        length = self.request.headers.get("Content-Length")
        size = len(self.request.body or b"")
        if (length and length.isdigit() and int(length) > limit) or size > limit:
            raise HiveError(413, f"the request body is larger than {limit} bytes; send less (e.g. fewer or smaller files)")

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        self.set_header("Content-Type", "application/json")
        if status_code == 405:
            self.set_header("Allow", ", ".join(self.allowed_methods()))
        exc = kwargs.get("exc_info", (None, None, None))[1]
        field = None
        if isinstance(exc, HiveError):
            message, field = exc.message, exc.field
            if exc.retry_after_s is not None:
                self.set_header("Retry-After", str(exc.retry_after_s))
        elif isinstance(exc, web.HTTPError):
            message = exc.log_message % exc.args if exc.log_message and exc.args else (exc.log_message or exc.reason or "")
            if status_code == 403 and not message:
                message = "authenticate first (Authorization: token <token>)"
            message = message or self._reason
        else:
            message = "internal error; the server log has the details"
        self.finish(json.dumps({"error": message, "field": field}))

    # --- helpers --------------------------------------------------------------------------------

    def allowed_methods(self) -> list[str]:
        return [m for m in ("GET", "POST", "PUT", "PATCH", "DELETE")
                if getattr(type(self), m.lower()) is not getattr(web.RequestHandler, m.lower())]

    def caller(self) -> Caller:
        if not hasattr(self, "_hive_caller"):
            user, groups = identify(self, self.hive.owner)
            admin = bool(getattr(self.current_user, "hive_admin", False))  # hub.identity: a Hub scope
            self._hive_caller = self.hive.access.caller(user, groups, admin=admin)
        return self._hive_caller

    def json_body(self) -> Any:
        try:
            return json.loads(self.request.body or b"")
        except (ValueError, UnicodeDecodeError) as exc:
            raise HiveError(400, f"the body is not valid JSON ({exc}); send a JSON object") from None

    def reply(self, obj: Any, status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(obj))

    def int_arg(self, name: str, default: int, lo: int, hi: int | None = None) -> int:
        raw = self.get_argument(name, None)
        if raw is None or raw == "":
            return default
        try:
            value = int(raw)
        except ValueError:
            raise HiveError(400, f"query parameter {name} must be an integer, got {raw!r}", name) from None
        if value < lo or (hi is not None and value > hi):
            bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            raise HiveError(400, f"query parameter {name} must be {bound}, got {value}", name)
        return value

    def service_call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ServiceError as exc:
            raise HiveError(exc.status, exc.message, exc.field) from None

    def job_row(self, job_id: str) -> dict[str, Any]:
        row = self.service.store.get_job(job_id)
        if row is None:
            raise HiveError(404, f"job {job_id} does not exist")
        return row


class NotFoundHandler(HiveHandler):
    @web.authenticated
    def get(self, path: str = "") -> None:
        raise HiveError(404, f"no such hive_lab API endpoint: {path}; see spec.yaml")

    post = put = delete = patch = get
