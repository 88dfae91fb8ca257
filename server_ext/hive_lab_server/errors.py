"""The service's refusals, as HTTP statuses (a leaf module: every part raises these, none imports a part).

The handlers turn a ``ServiceError`` into its status and message (and ``Retry-After`` when set).
"""

from __future__ import annotations

STORE_RETRY_AFTER_S = 5


class ServiceError(Exception):
    """A request the service refuses: ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str, field: str | None = None, retry_after_s: int | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s


class StoreUnavailable(ServiceError):
    """The store refused a write (disk full, database down): nothing was changed; retry later."""

    def __init__(self, exc: BaseException):
        super().__init__(503, f"hive-lab cannot write its job store right now ({type(exc).__name__}); nothing was "
                              "changed; retry in a moment", retry_after_s=STORE_RETRY_AFTER_S)
