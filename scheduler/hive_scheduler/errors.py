"""The two errors the core raises: bad configuration and bad job requests."""

from __future__ import annotations


class ConfigError(ValueError):
    """Invalid cluster configuration. ``str()`` is ``"<field path>: <reason>"``."""

    def __init__(self, field: str, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}" if field else reason)


class RequestError(ValueError):
    """A job request the cluster can never accept. ``.field`` names the offending field.

    Raising it changes nothing in the scheduler.
    """

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


class LimitRefusal(RequestError):
    """A job its owner's limits in its VC refuse at submit (a ``RequestError``: nothing changes).

    ``limit`` names the limit (``max_gpus``, ``max_priority``, ``max_time_limit_s``, ``max_queued_jobs``);
    ``queue_full`` tells a refusal that goes away once the owner's queued jobs start (``max_queued_jobs``)
    from one the job can never overcome."""

    def __init__(self, field: str, message: str, limit: str, queue_full: bool = False):
        super().__init__(field, message)
        self.limit = limit
        self.queue_full = queue_full
