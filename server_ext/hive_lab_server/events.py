"""In-process publish/subscribe of live updates (job changes, cluster totals) for the websocket."""

from __future__ import annotations

import json
import logging
from typing import Callable

log = logging.getLogger(__name__)


class EventBus:
    def __init__(self) -> None:
        self._subscribers: list[Callable[[str], None]] = []

    def subscribe(self, send: Callable[[str], None]) -> Callable[[], None]:
        """``send`` gets each message as a JSON string; returns the unsubscribe function."""
        self._subscribers.append(send)

        def unsubscribe() -> None:
            try:
                self._subscribers.remove(send)
            except ValueError:
                pass

        return unsubscribe

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def publish(self, message: dict) -> None:
        if not self._subscribers:
            return
        text = json.dumps(message)
        for send in list(self._subscribers):
            try:
                send(text)
            except Exception:
                log.debug("hive-lab: dropping a broken event subscriber", exc_info=True)
                try:
                    self._subscribers.remove(send)
                except ValueError:
                    pass
