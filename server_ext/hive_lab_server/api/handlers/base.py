"""Common base of hive-lab's REST handlers: auth, JSON errors, body size limit, the caller."""

from __future__ import annotations

import functools
import json
import logging
from http.client import responses
from typing import Any

from jupyter_server.base.handlers import APIHandler
from jupyter_server.extension.handler import ExtensionHandlerMixin
from jupyter_server.log import log_request as jupyter_log_request
from jupyter_server.prometheus.log_functions import prometheus_log_method
from pydantic import BaseModel
from tornado import web

from hive_lab_server.api.load_shedding import WRITES
from hive_lab_server.auth.access import Caller, identify
from hive_lab_server.jobs.limits import Limits
from hive_lab_server.jobs.lifecycle.admission import Admission
from hive_lab_server.jobs.lifecycle.hardware_events import HardwareEvents
from hive_lab_server.jobs.lifecycle.moves import Moves
from hive_lab_server.jobs.service import HiveService, ServiceError

AUTH_RESOURCE = "hive_lab"
MAX_JSON_DEPTH = 32  # a job spec is 4 levels deep; deeper bodies are refused before anything walks them


def json_depth(value: Any) -> int:
    """How deeply ``value`` (parsed JSON) nests lists and objects, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


class HiveError(web.HTTPError):
    """An error answered as ``{"error": message, "field": field}``."""

    def __init__(self, status: int, message: str, field: str | None = None, retry_after_s: int | None = None):
        super().__init__(status, log_message=message.replace("%", "%%"))
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s


UNAUTHENTICATED = "authenticate first: send Authorization: token <token> (or log in to the server)"


def unauthenticated() -> HiveError:
    """401 for a request without a valid token or login (403 stays for callers who are known but not allowed)."""
    return HiveError(401, UNAUTHENTICATED)


def shows_debug(logger: logging.Logger) -> bool:
    """A debug record sent to ``logger`` would be written somewhere (by a handler of it or of a parent)."""
    if not logger.isEnabledFor(logging.DEBUG):
        return False
    current: Any = logger
    while current is not None:
        if any(h.level <= logging.DEBUG for h in current.handlers):
            return True
        current = current.parent if current.propagate else None
    return False


def _no_user(handler: Any) -> bool:
    """jupyter_server has looked for the caller (``prepare``) and found none."""
    return getattr(handler, "_jupyter_current_user", "unset") is None


async def require_caller(handler: Any, prepared: Any) -> None:
    """Await jupyter_server's ``prepare`` (``prepared``); every hive-lab endpoint needs a known caller, so
    an unknown one is a 401, whether jupyter_server refused it with its bare 403 or let it through
    (``allow_unauthenticated_access``) for the method's own ``authenticated`` check to refuse."""
    try:
        if prepared is not None:
            await prepared
    except web.HTTPError as exc:
        if exc.status_code != 403 or isinstance(exc, HiveError) or not _no_user(handler):
            raise
    if _no_user(handler):
        raise unauthenticated()


async def wait_for_recovery(handler: Any) -> None:
    """Hold a request until hive-lab has recovered its jobs after a restart (so nobody sees or changes
    the state from before recovery); 503 with Retry-After when that takes longer than ``recovery_wait_s``."""
    hive = handler.settings["hive_lab"]
    if hive.service.ready:
        return
    try:
        await hive.service.wait_ready(hive.recovery_wait_s)
    except ServiceError as exc:
        raise HiveError(exc.status, exc.message, exc.field, retry_after_s=exc.retry_after_s or 1) from None


def json_error(handler: Any, status_code: int, **kwargs: Any) -> None:
    """Answer an error as ``{"error": message, "field": field}`` (every hive_lab endpoint, the events
    websocket's refusals included)."""
    handler.set_header("Content-Type", "application/json")
    if status_code == 405:
        allowed = getattr(handler, "allowed_methods", None)
        handler.set_header("Allow", ", ".join(allowed()) if allowed else "GET")
    exc = kwargs.get("exc_info", (None, None, None))[1]
    field = None
    if isinstance(exc, HiveError):
        message, field = exc.message, exc.field
        if exc.retry_after_s is not None:
            handler.set_header("Retry-After", str(exc.retry_after_s))
        if status_code == 401:
            handler.set_header("WWW-Authenticate", 'token realm="hive_lab"')
    elif isinstance(exc, web.HTTPError):
        message = exc.log_message % exc.args if exc.log_message and exc.args else (exc.log_message or exc.reason or "")
        if status_code == 403 and not message:
            message = "you may not do this (authorization for the hive_lab resource was refused)"
        message = message or responses.get(status_code, "Unknown")  # (the status line's reason, as tornado's)
    else:
        message = "internal error; the server log has the details"
    handler.finish(json.dumps({"error": message, "field": field}))


class HiveHandler(ExtensionHandlerMixin, APIHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def hive(self):
        return self.settings["hive_lab"]

    @property
    def service(self) -> HiveService:
        return self.hive.service

    # the service's parts, from the settings, as jupyter_server hands its handlers ``kernel_manager``
    # (``HiveLabApp`` puts them there: ``SERVICE_PARTS``)

    @property
    def admission(self) -> Admission:
        """New jobs: submit, group commit, what-if."""
        return self.settings["hive_lab_admission"]

    @property
    def moves(self) -> Moves:
        """Pause, resume, migrate, resize."""
        return self.settings["hive_lab_moves"]

    @property
    def limits(self) -> Limits:
        """Per-user limits in each VC."""
        return self.settings["hive_lab_limits"]

    @property
    def hardware_events(self) -> HardwareEvents:
        """Drains and GPU health."""
        return self.settings["hive_lab_hardware_events"]

    def check_xsrf_cookie(self) -> None:
        # jupyter_server checks XSRF (403) for unsafe methods before it looks at the caller: an unknown
        # caller is answered 401 first; a known one without the XSRF token still gets 403
        if _no_user(self):
            raise unauthenticated()
        super().check_xsrf_cookie()

    def get_login_url(self) -> str:
        # ``web.authenticated`` on GET/HEAD asks where to log in: an API answers 401 instead
        if _no_user(self):
            raise unauthenticated()
        return super().get_login_url()

    #: answered even when max_requests_in_flight are being served (liveness: GET me, GET metrics)
    never_shed: tuple[str, ...] = ()

    async def prepare(self) -> None:
        if self.request.method in WRITES:
            await self._enter_write_budget()
        elif self.request.method not in self.never_shed:
            if not self.hive.in_flight.enter():
                self._shed()
                raise HiveError(503, f"hive-lab is serving {self.hive.in_flight.limit} requests already "
                                     "(HiveLabApp.max_requests_in_flight); retry after Retry-After", retry_after_s=1)
            self._in_flight = self.hive.in_flight
        await require_caller(self, super().prepare())
        await wait_for_recovery(self)
        limit = self.hive.max_body_bytes
        length = self.request.headers.get("Content-Length")
        size = len(self.request.body or b"")
        if (length and length.isdigit() and int(length) > limit) or size > limit:
            raise HiveError(413, f"the request body is larger than {limit} bytes; send less (e.g. fewer or smaller files)")

    async def _enter_write_budget(self) -> None:
        """Wait for this write's turn (reads never wait behind writes: api/load_shedding.py); 503 at once when
        the writes served and waiting fill ``max_requests_in_flight``."""
        budget = self.hive.writes_in_flight
        ticket = budget.enter()
        if ticket is None:
            self._shed()  # (most sheds happen before a handler: api/connection_shedding.py)
            raise HiveError(503, budget.shed_message(), retry_after_s=1)
        self._in_flight = ticket
        if not await ticket.wait():
            raise HiveError(503, "the connection closed while this write waited for its turn; send it again")

    def on_finish(self) -> None:
        self._leave()
        super().on_finish()

    def on_connection_close(self) -> None:
        self._leave()
        super().on_connection_close()

    def _leave(self) -> None:
        counter, self._in_flight = getattr(self, "_in_flight", None), None
        if counter is not None:
            counter.leave()

    def _shed(self) -> None:
        self.service.metrics.requests_shed.inc()
        self._was_shed = True

    def _log(self) -> None:
        if getattr(self, "_was_shed", False):  # one summary line now and then (load_shedding.ShedLog)
            fn = self.settings.get("log_function")
            if not isinstance(fn, functools.partial) or fn.keywords.get("record_prometheus_metrics", True):
                prometheus_log_method(self)
            self.hive.shed_log.shed(f"{self.request.method} {self.request.path}")
            return

        # jupyter_server logs every success at debug level, and traitlets keeps the app's logger at DEBUG
        # (its handlers filter): the line was formatted and dropped for each submit (~5% of the server's
        # CPU per submit). Skip it when no handler would write it; the request metric is still recorded.
        fn = self.settings.get("log_function")
        if (self.get_status() < 300 and isinstance(fn, functools.partial) and fn.func is jupyter_log_request
                and not shows_debug(self.log)):
            if fn.keywords.get("record_prometheus_metrics", True):
                prometheus_log_method(self)
            return
        super()._log()

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        json_error(self, status_code, **kwargs)

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
            body = json.loads(self.request.body or b"")
        except RecursionError:
            raise HiveError(400, f"the body is nested too deeply; keep JSON nesting under {MAX_JSON_DEPTH} levels") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise HiveError(400, f"the body is not valid JSON ({exc}); send a JSON object") from None
        if json_depth(body) > MAX_JSON_DEPTH:
            raise HiveError(400, f"the body is nested too deeply; keep JSON nesting under {MAX_JSON_DEPTH} levels")
        return body

    def reply(self, obj: Any, status: int = 200) -> None:
        self.set_status(status)
        self.finish(json.dumps(obj))

    def reply_model(self, model: type[BaseModel], obj: Any, status: int = 200) -> None:
        """Answer ``obj`` (a service view) as the response model the OpenAPI document declares for it."""
        self.set_status(status)
        self.finish(model.model_validate(obj).model_dump_json(exclude_unset=True))

    def service_call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ServiceError as exc:
            raise HiveError(exc.status, exc.message, exc.field, retry_after_s=exc.retry_after_s) from None

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
