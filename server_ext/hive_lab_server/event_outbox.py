"""A bounded outbox per events-websocket subscriber.

Messages wait here until the socket took the previous one; a subscriber that reads slower than events
come (or never reads) fills it, and once more than ``max_bytes`` wait the outbox closes itself and calls
``on_overflow`` (the handler closes the socket with ``SLOW_CONSUMER``): the server's memory per subscriber
stays bounded by ``max_bytes`` plus one message, whatever the client does.
"""

from __future__ import annotations

import asyncio
import collections
from typing import Awaitable, Callable

SLOW_CONSUMER = 4008  # websocket close code: the subscriber fell behind by more than the outbox holds


class Outbox:
    def __init__(self, max_bytes: int, on_overflow: Callable[[int], None]):
        self.max_bytes = max_bytes
        self.on_overflow = on_overflow
        self.waiting_bytes = 0
        self.closed = False
        self._queue: collections.deque[str] = collections.deque()
        self._ready = asyncio.Event()

    def put(self, text: str) -> None:
        """Queue one message (never blocks); overflowing closes the outbox and tells ``on_overflow``."""
        if self.closed:
            return
        if self.waiting_bytes + len(text) > self.max_bytes:
            waiting = self.waiting_bytes
            self.close()
            self.on_overflow(waiting)
            return
        self._queue.append(text)
        self.waiting_bytes += len(text)
        self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._queue.clear()
        self.waiting_bytes = 0
        self._ready.set()

    async def pump(self, send: Callable[[str], Awaitable[None]]) -> None:
        """Send the queued messages one at a time, each once the socket took the one before."""
        while not self.closed:
            if not self._queue:
                self._ready.clear()
                await self._ready.wait()
                continue
            text = self._queue[0]
            await send(text)
            if self.closed:
                return
            self._queue.popleft()
            self.waiting_bytes -= len(text)
