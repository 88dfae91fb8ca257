"""The service's refusals, as HTTP statuses (a leaf module: every part raises these, none imports a part).

The handlers turn a ``ServiceError`` into its status and message (and ``Retry-After`` when set).
"""

from __future__ import annotations

STORE_RETRY_AFTER_S = 5
FULL_RETRY_AFTER_S = 5  # a submit refused because max_unfinished_jobs are unfinished


class ServiceError(Exception):
    """A request the service refuses: ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str, field: str | None = None, retry_after_s: int | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s


class ServiceFull(ServiceError):
    """A new job refused because the service holds ``HiveLabApp.max_unfinished_jobs`` unfinished jobs."""

    def __init__(self, bound: int):
        super().__init__(503, f"hive-lab holds {bound} unfinished jobs, as many as it takes "
                              "(HiveLabApp.max_unfinished_jobs); submit again after Retry-After, when some have "
                              "ended", retry_after_s=FULL_RETRY_AFTER_S)


class StoreUnavailable(ServiceError):
    """The store refused a write (disk full, database down): nothing was changed; retry later."""

    def __init__(self, exc: BaseException):
        super().__init__(503, f"hive-lab cannot write its job store right now ({type(exc).__name__}); nothing was "
                              "changed; retry in a moment", retry_after_s=STORE_RETRY_AFTER_S)
