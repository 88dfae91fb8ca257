"""Reads ahead of writes in the event loop (issue 40): at most ``per_turn`` hive-lab writes are let into each
turn of the loop; the others wait, parsed but untouched, for later turns, oldest first.

A read is answered in about six turns of the loop (its socket's event, the request's parsing, its handler's
steps: each ``await`` resumes at the end of the loop's queue of ready callbacks). Under a flood of submits
every turn held the flood's steps too (each shed 503 ~0.3 ms of CPU, each accepted submit more: hundreds of
callbacks a turn), so a turn took 20-30 ms at the median and 200 ms at the p99, and every read waited for
six of them: p50 0.13 s, p99 0.3-0.5 s. Shedding alone cannot help, because the shedding itself is that work.

``WritesPerTurn`` is the gate: ``ShedAtConnection`` asks it for a place for each write once its headers are
parsed, before deciding anything about it (shed, or handed to the web application). While the turn has room
the write goes on at once; otherwise it waits in a queue, which costs the loop nothing, and its connection's
next request is not read meanwhile (tornado reads a connection's next request only once this one is
answered). So however many writes are offered, a turn holds the steps of a bounded number of them, and a read
waits for a few short turns, while the writes are still served in order as fast as the loop can. It is the
turn-level half of kube-apiserver's priority and fairness; ``load_shedding.WriteBudget`` is the other half
(how many writes are being served at once, and the shedding beyond).
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Callable

PER_TURN_DEFAULT = 8
READS_WINDOW_S = 1.0
DRAIN_PER_TURN = 64  # writes let in a turn from the queue once they are not held (jobs/lifecycle/admission.MAX_GROUP)


class WritesPerTurn:
    """At most ``per_turn`` writes started per turn of the loop while reads are about (one was seen in the last
    ``window_s``: a person's panel refreshing); otherwise the writes go on unbounded, so a closed loop of
    submits without reads keeps its throughput. ``start(step)`` runs ``step`` now when the turn has room, else queues it
    for the next turns (first come, first served). ``waited`` counts the writes that had to wait."""

    def __init__(self, per_turn: int = PER_TURN_DEFAULT, window_s: float = READS_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic):
        self.per_turn = per_turn
        self.window_s = window_s
        self.clock = clock
        self.queue: collections.deque[Callable[[], None]] = collections.deque()
        self.started = 0  # in this turn
        self.waited = 0
        self.reads_until = float("-inf")  # reads are about until then
        self._next_turn_due = False

    def read_seen(self) -> None:
        self.reads_until = self.clock() + self.window_s

    def holding(self) -> bool:
        """Writes are held to ``per_turn`` a turn: reads are about."""
        return self.clock() <= self.reads_until

    def room(self) -> bool:
        if self.queue:
            return False
        return self.started < self.per_turn or not self.holding()

    def take(self) -> None:
        """A write starts now (the caller asked ``room()``)."""
        self.started += 1
        self._call_next_turn()

    def start(self, step: Callable[[], None]) -> None:
        if self.room():
            self.take()
            step()
        else:
            self.waited += 1
            self.queue.append(step)
            self._call_next_turn()

    def _call_next_turn(self) -> None:
        # (a callback scheduled during a turn runs in the next one: asyncio runs only the callbacks that were
        # ready when a turn began)
        if not self._next_turn_due:
            self._next_turn_due = True
            asyncio.get_running_loop().call_soon(self._turn)

    def _turn(self) -> None:
        self._next_turn_due = False
        self.started = 0
        # (not holding: the queue drains a group commit's worth a turn, never all at once: thousands of writes
        # released into one turn would make it seconds long)
        bound = self.per_turn if self.holding() else max(self.per_turn, DRAIN_PER_TURN)
        while self.queue and self.started < bound:
            self.started += 1
            self.queue.popleft()()
        if self.started:
            self._call_next_turn()
