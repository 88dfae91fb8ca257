"""A bound on the requests hive-lab serves at once: beyond it a request is answered 503 with Retry-After
at once (cheap: before authentication, the store or the core), instead of queueing without bound and
answering everything late (issue 24: 8,565 requests in flight, answers after up to 60 s). Requests that
say whether the server is alive (``GET me``, ``GET metrics``) are never shed, nor counted."""

from __future__ import annotations


class InFlight:
    def __init__(self, limit: int):
        self.limit = limit  # 0: no bound
        self.count = 0
        self.shed = 0

    def enter(self) -> bool:
        """Count one more request; False (not counted) when ``limit`` are being served already."""
        if self.limit and self.count >= self.limit:
            self.shed += 1
            return False
        self.count += 1
        return True

    def leave(self) -> None:
        self.count -= 1
