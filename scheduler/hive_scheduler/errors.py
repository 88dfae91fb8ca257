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
