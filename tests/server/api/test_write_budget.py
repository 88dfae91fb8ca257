"""The write budget's rules (api/load_shedding.WriteBudget), on an injected clock and real loop-lag readings:
AIMD (halved while the loop is late, one more a window while it is not, between floor and ceiling), first come
first served, a full queue sheds, a write that leaves while waiting frees its place; shed requests are logged
once per interval with a count."""

from __future__ import annotations

import asyncio

from hive_lab_server.api.load_shedding import LoopLag, WriteBudget


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def budget(ceiling=64, floor=4, target_s=0.05):
    clock = Clock()
    lag = LoopLag(clock=clock)
    return WriteBudget(lag, ceiling, target_s, floor=floor, window_s=0.1, clock=clock), lag, clock


def test_the_limit_halves_while_the_loop_is_late_and_grows_by_one_after():
    b, lag, clock = budget()
    limits = []
    lag.observe(0.2)  # the loop runs 200 ms late
    for _ in range(6):
        clock.t += 0.125  # (a window and a bit, exact in binary)
        b.adapt()
        limits.append(b.limit)
    assert limits == [32, 16, 8, 4, 4, 4]  # halved each window, never below the floor
    for _ in range(10):
        lag.observe(0.0)  # (the reading halves towards on-time ones)
    for _ in range(3):
        clock.t += 0.125  # (a window and a bit, exact in binary)
        b.adapt()
        limits.append(b.limit)
    assert limits[-3:] == [5, 6, 7]
    clock.t += 0.05  # within a window: unchanged
    b.adapt()
    assert b.limit == 7


def test_writes_beyond_the_limit_wait_in_order_and_beyond_the_ceiling_are_shed():
    async def main():
        b, lag, clock = budget(ceiling=4, floor=1)
        lag.observe(1.0)
        for _ in range(2):
            clock.t += 0.125  # (a window and a bit, exact in binary)
            b.adapt()
        assert b.limit == 1
        first = b.enter()
        waiting = [b.enter() for _ in range(3)]
        assert first.granted and not any(t.granted for t in waiting)
        assert b.enter() is None and b.shed == 1  # 1 served + 3 waiting = the ceiling
        order = []
        tasks = [asyncio.ensure_future(t.wait()) for t in waiting]
        for i, t in enumerate(tasks):
            t.add_done_callback(lambda _, i=i: order.append(i))
        await asyncio.sleep(0)
        waiting[1].leave()  # its connection closed while it waited: it gets no turn
        first.leave()
        await asyncio.sleep(0)
        waiting[0].leave()
        await asyncio.sleep(0)
        results = await asyncio.gather(*tasks)
        return order, results, b
    order, results, b = asyncio.run(main())
    assert order == [1, 0, 2] and results == [True, False, True]  # (1 left first; 0 then 2 got their turns)
    assert b.count == 1 and not b.queue


def test_a_fixed_bound_without_a_target_and_none_without_a_ceiling():
    b, lag, clock = budget(ceiling=3, target_s=0.0)
    lag.observe(5.0)
    clock.t += 1
    tickets = [b.enter() for _ in range(3)]
    assert all(t.granted for t in tickets) and b.limit == 3 and b.enter() is None
    unbounded, _, _ = budget(ceiling=0)
    assert all(unbounded.enter().granted for _ in range(1000))


def test_shed_requests_are_logged_once_per_interval_with_a_count():
    from hive_lab_server.api.load_shedding import ShedLog

    clock, lines = Clock(), []
    shed_log = ShedLog(lines.append, every_s=10.0, clock=clock)
    for _ in range(500):  # a flood within one interval: one line, the first
        shed_log.shed("POST /hive_lab/api/jobs")
        clock.t += 0.01
    clock.t = 10.5
    shed_log.shed("GET /hive_lab/api/jobs")
    assert lines == ["hive-lab shed POST /hive_lab/api/jobs: 503 with Retry-After",
                     "hive-lab shed GET /hive_lab/api/jobs: 503 with Retry-After (and 499 more since the last such line)"]
