"""In-process publish/subscribe of live updates (job changes, cluster totals) for the websocket.

Every message carries ``seq``: stored state changes (``{"type": "state"}``) have their own, the store's
``job_events.id`` (grows across restarts, never reused); every other message carries the newest ``seq``
published before it, so a client that remembers the last ``seq`` it saw can resume from there
(``GET events?since=N``, see handlers/live.py and docs/rest-api.md).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any, Callable, Iterable

log = logging.getLogger(__name__)


def state_message(row: dict[str, Any]) -> dict[str, Any]:
    """A stored state change (a ``job_events`` row with its ``seq``) as the websocket sends it."""
    at = dt.datetime.fromtimestamp(row["at"], dt.timezone.utc).isoformat().replace("+00:00", "Z")
    return {"type": "state", "seq": row["seq"], "job": row["job_id"], "state": row["state"], "at": at,
            "reason": row["reason"]}


class EventBus:
    def __init__(self, seq: int = 0) -> None:
        self._subscribers: list[Callable[[str], None]] = []
        self.seq = seq  # the newest stored state change published (or found in the store at start)

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

    def publish_states(self, rows: Iterable[dict[str, Any]]) -> None:
        """Committed state changes (``Store.on_events``), in ``seq`` order."""
        for row in rows:
            self.seq = max(self.seq, row["seq"])
            if self._subscribers:
                self.publish(state_message(row))

    def publish(self, message: dict) -> None:
        if not self._subscribers:
            return
        message.setdefault("seq", self.seq)
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
