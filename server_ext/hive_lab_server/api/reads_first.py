"""A hive-lab read's steps at the head of the event loop's queue (issue 40: reads under a write flood).

A read over a kept-alive connection is served in three turns of the event loop: its socket's event (the
bytes read), the request's parsing (a wakeup of the connection's coroutine), its handler (a new task). Each
step is a callback appended to the loop's queue of ready callbacks, so each waits for every callback queued
before it: under a flood of submits a turn holds hundreds of them (the flood's reads, parses, refusals, the
jobs' exits and starts), and a read waited for three such turns, most of its latency (its handler itself
takes a millisecond or two).

``ReadsFirst`` is that queue with a head: a callback whose context is a *reading connection's* goes to the
head, behind the reading callbacks already there (first come, first served among them), so a read is served
at the start of the turn in which its bytes arrive, its three steps one after the other. A connection is a
reading one once its latest request was a hive-lab read (``reading(True)``, from ``connection_shedding``,
in the connection's own task): its coroutine's wakeups, its socket's next event and its handler's task all
carry that context (asyncio copies the current context into each callback it schedules). A connection whose
latest request was a write is not. The rest of the turn runs as before, in order: what the head took the
turn's room of runs at the start of the next one.

It is the queue-level half of the reads' priority (``read_priority`` lets a bounded number of writes into
each turn); both are kube-apiserver's priority-and-fairness idea in one event loop. Reads do not starve
writes: a turn still runs every callback that was ready when it began, only later. It needs asyncio's own
selector loop (its ``_ready`` deque); elsewhere (another loop implementation) ``install`` does nothing.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars

_READING: contextvars.ContextVar[bool] = contextvars.ContextVar("hive_lab_reading", default=False)


def reading(flag: bool) -> None:
    """The current task's connection is a reading one (``flag``), or no longer."""
    if flag or _READING.get():
        _READING.set(flag)


class ReadsFirst(collections.deque):
    """The loop's queue of ready callbacks, reading connections' callbacks first (see the module's doc).
    ``head`` counts the reading callbacks at its front."""

    def __init__(self, items=()):
        super().__init__(items)
        self.head = 0

    def append(self, handle) -> None:
        # (call_soon_threadsafe appends from other threads too: a switch between the insert and the count
        # can only put a reading callback one place later, never lose or repeat one)
        context = getattr(handle, "_context", None)
        if context is not None and context.get(_READING, False):
            self.insert(self.head, handle)
            self.head += 1
        else:
            super().append(handle)

    def popleft(self):
        if self.head:
            self.head -= 1
        return super().popleft()

    def clear(self) -> None:
        self.head = 0
        super().clear()


def install(loop: asyncio.AbstractEventLoop) -> bool:
    """Give ``loop`` a ``ReadsFirst`` queue (its ready callbacks kept, in order). False where the loop has no
    such queue (not asyncio's own loop) or has one already."""
    ready = getattr(loop, "_ready", None)
    if type(ready) is not collections.deque:
        return isinstance(ready, ReadsFirst)
    loop._ready = ReadsFirst(ready)
    return True
