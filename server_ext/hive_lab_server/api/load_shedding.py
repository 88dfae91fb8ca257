"""Load shedding: what hive-lab refuses at once (503 with Retry-After, cheap: before authentication, the
store or the core) rather than answer everything late.

- ``InFlight``: a bound on the requests served at once (issue 24: 8,565 requests in flight, answers after up
  to 60 s). Reads and writes each have their own, so writes never crowd reads out. Requests that say
  whether the server is alive (``GET me``, ``GET metrics``) are never shed, nor counted.
- ``LoopLag``: how late the event loop runs. Every request waits for the loop, so a flood of submits that
  keeps it busy made every read wait behind it (issue 40: ``GET me`` p50 0.9 s at twice the sustainable
  submit rate).
- ``WriteBudget``: how many writes are served at once, adapted to that lag the way TCP adapts its
  congestion window (AIMD): halved while the loop runs later than its target, one more per window while it
  does not, never below ``floor`` nor above ``ceiling``. Writes beyond it wait their turn in a queue (which
  costs the loop nothing), and only writes beyond a full queue are shed: a closed loop of clients keeps its
  throughput (it was shed to nothing when every write was refused while the loop ran late), and the loop's
  work per turn stays small enough for reads, which never wait there, to be answered in about the target.
  As kube-apiserver's priority and fairness (a concurrency limit and queues per priority level, rejection
  when the queues are full) keeps reads served under write floods.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Callable

WRITES = frozenset({"POST", "PUT", "PATCH"})  # budgeted as writes (a cancel, DELETE, sheds load: a read's)


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


class LoopLag:
    """How late the event loop runs a callback due every ``interval_s``: ``lag_s`` follows a rise at once
    and halves towards the newer readings as they fall."""

    def __init__(self, interval_s: float = 0.01, clock: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self.clock = clock
        self.lag_s = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def start(self) -> None:
        if self._handle is None:
            self._loop = asyncio.get_running_loop()
            self._schedule()

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _schedule(self) -> None:
        assert self._loop is not None
        self._due = self.clock() + self.interval_s
        self._handle = self._loop.call_later(self.interval_s, self._tick)

    def _tick(self) -> None:
        self.observe(self.clock() - self._due)
        self._schedule()

    def observe(self, late_s: float) -> None:
        late_s = max(0.0, late_s)
        self.lag_s = late_s if late_s >= self.lag_s else (self.lag_s + late_s) / 2


class WriteTicket:
    """One write's place in a ``WriteBudget``: ``granted`` once it may be served; ``leave()`` when it is
    answered or its connection closed (a write still waiting then gives up its place in the queue)."""

    def __init__(self, budget: "WriteBudget"):
        self.budget = budget
        self.granted = False
        self.waiting: asyncio.Future | None = None

    async def wait(self) -> bool:
        """Until its turn: True; False when it left the queue first (its connection closed)."""
        if not self.granted:
            self.waiting = asyncio.get_running_loop().create_future()
            await self.waiting
        return self.granted

    def leave(self) -> None:
        self.budget.leave(self)


class WriteBudget:
    """Writes served at once (at most ``limit``, adapted to the loop's lag by AIMD: see the module's
    docstring) and writes waiting their turn, first come first served; together at most ``ceiling`` (0: no
    bound at all). A write beyond that is shed. ``target_s`` 0: ``limit`` stays at ``ceiling``.

    Waiting costs the loop nothing, so a closed loop of clients (each sending its next write once answered)
    is queued, not shed, as long as it has fewer than ``ceiling`` clients; an open-loop flood fills the
    queue and the rest is shed. Reads never wait here."""

    def __init__(self, lag: LoopLag, ceiling: int, target_s: float, floor: int = 64, window_s: float = 0.1,
                 clock: Callable[[], float] = time.monotonic):
        # floor 64: one group commit's worth (jobs/lifecycle/admission.MAX_GROUP), so batching, and with it a
        # closed loop's throughput, never suffers (measured: floor 16 cut 50 clients' submits/s to 0.63x on a
        # busy machine, where the loop runs late whatever hive-lab does)
        self.lag = lag
        self.ceiling = ceiling
        self.floor = min(floor, ceiling) if ceiling else floor
        self.target_s = target_s
        self.window_s = window_s
        self.clock = clock
        self.limit = ceiling
        self._budget = float(ceiling)
        self._adapted_at = clock()
        self.count = 0  # being served
        self.queue: collections.deque[WriteTicket] = collections.deque()
        self.shed = 0

    @property
    def adaptive(self) -> bool:
        return bool(self.target_s and self.ceiling)

    def adapt(self) -> None:
        """Once per ``window_s``: halve ``limit`` while the loop is late, else add one."""
        now = self.clock()
        if not self.adaptive or now - self._adapted_at < self.window_s:
            return
        self._adapted_at = now
        if self.lag.lag_s > self.target_s:
            self._budget = max(float(self.floor), self._budget / 2)
        else:
            self._budget = min(float(self.ceiling), self._budget + 1)
        self.limit = int(self._budget)
        self._grant()

    def full(self) -> bool:
        """Writes being served and waiting fill ``ceiling``: the next write is shed (nothing is counted)."""
        self.adapt()
        return bool(self.ceiling) and self.count + len(self.queue) >= self.ceiling

    def shed_message(self) -> str:
        """What a shed write is answered (its 503's sentence)."""
        late = (f" (its event loop runs late, so it serves {self.limit} at once: HiveLabApp.max_loop_lag_ms)"
                if self.limit < self.ceiling else "")
        return (f"hive-lab is serving or queueing {self.ceiling} writes already{late} "
                "(HiveLabApp.max_requests_in_flight); send this again after Retry-After")

    def enter(self) -> WriteTicket | None:
        """A ticket (``await ticket.wait()`` for its turn), or None: shed (``ceiling`` writes are being
        served or waiting)."""
        self.adapt()
        if self.ceiling and self.count + len(self.queue) >= self.ceiling:
            self.shed += 1
            return None
        ticket = WriteTicket(self)
        if not self.ceiling or (self.count < self.limit and not self.queue):
            ticket.granted = True
            self.count += 1
        else:
            self.queue.append(ticket)
        return ticket

    def leave(self, ticket: WriteTicket) -> None:
        if ticket.granted:
            ticket.granted = False
            self.count -= 1
            self._grant()
        elif ticket in self.queue:  # its connection closed while it waited
            self.queue.remove(ticket)
            if ticket.waiting is not None and not ticket.waiting.done():
                ticket.waiting.set_result(None)

    def _grant(self) -> None:
        while self.queue and self.count < self.limit:
            ticket = self.queue.popleft()
            ticket.granted = True
            self.count += 1
            if ticket.waiting is not None and not ticket.waiting.done():
                ticket.waiting.set_result(None)


class ShedLog:
    """One log line per ``every_s`` for the requests shed in it, instead of one per request: under a flood
    the sheds are most of the requests, and a line each (formatted and written on the event loop) made
    shedding cost the loop nearly what serving did (issue 40). Each is still counted in
    ``hive_lab_requests_shed_total`` and the request metrics."""

    def __init__(self, log: Callable[[str], None], every_s: float = 10.0, clock: Callable[[], float] = time.monotonic):
        self.log = log
        self.every_s = every_s
        self.clock = clock
        self.unlogged = 0
        self._logged_at: float | None = None

    def shed(self, what: str) -> None:
        """A request was shed (``what``: its first line, e.g. "POST /hive_lab/api/jobs")."""
        self.unlogged += 1
        now = self.clock()
        if self._logged_at is None or now - self._logged_at >= self.every_s:
            more = f" (and {self.unlogged - 1} more since the last such line)" if self.unlogged > 1 else ""
            self.log(f"hive-lab shed {what}: 503 with Retry-After{more}")
            self.unlogged, self._logged_at = 0, now
