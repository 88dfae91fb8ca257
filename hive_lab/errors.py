"""Errors raised by the hive-lab client. Each carries the server's sentence saying what to change."""

from __future__ import annotations


class HiveLabError(Exception):
    """Base class: something hive-lab refused or could not do. ``str()`` is meant for people."""

    status: int | None = None

    def __init__(self, message: str, *, status: int | None = None, field: str | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.field = field


class BadRequest(HiveLabError):
    """400: the request is invalid; ``field`` names the offending field when the server said so."""

    status = 400


class Unauthorized(HiveLabError):
    """401: the token is missing or wrong."""

    status = 401


class Forbidden(HiveLabError):
    """403: the VC or job is not yours to touch."""

    status = 403


class NotFound(HiveLabError):
    """404: no such job, file or endpoint."""

    status = 404


class Conflict(HiveLabError):
    """409: the request conflicts with the job's state (e.g. cancelling a finished job)."""

    status = 409


class TooLarge(HiveLabError):
    """413: the request body (usually the staged files) is too large."""

    status = 413


class TooManyQueued(HiveLabError):
    """429: the caller already has as many jobs queued in the VC as their limits allow (max_queued_jobs)."""

    status = 429


class ServerError(HiveLabError):
    """5xx or an answer that is not the REST contract's JSON."""


class ServerNotFound(HiveLabError):
    """No hive-lab server could be found from arguments, environment or runtime files."""


class ServerUnreachable(HiveLabError):
    """A server was chosen but does not answer."""


BY_STATUS: dict[int, type[HiveLabError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    429: TooManyQueued,
}


def error_for_status(status: int, message: str, field: str | None = None) -> HiveLabError:
    cls = BY_STATUS.get(status, ServerError)
    return cls(message, status=status, field=field)
