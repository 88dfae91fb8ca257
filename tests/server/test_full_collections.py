"""Python's full garbage collections on the service's timer (``full_collections``, issue 40): while the
timer runs, Python starts none of its own however many objects pile up (the same pile starts one without
it), the timer runs them, and stopping the last timer puts Python's thresholds back."""

from __future__ import annotations

import asyncio
import gc

import pytest

from hive_lab_server.full_collections import NEVER, TimedFullCollections


def full_collections_so_far() -> int:
    return gc.get_stats()[2]["collections"]


def pile_up_objects() -> list:
    """Enough long-lived container objects that Python's own rule starts a full collection: more than a
    quarter of those already tracked (its condition), whatever ran before in this process."""
    n = max(600_000, len(gc.get_objects()) // 2)
    return [[i] for i in range(n)]


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_python_starts_full_collections_of_its_own_without_the_timer(collector_on):
    """The control: the pile that follows does start a full collection on Python's own count."""
    before = full_collections_so_far()
    pile = pile_up_objects()
    assert full_collections_so_far() > before
    del pile


async def test_while_the_timer_runs_only_it_starts_full_collections(collector_on):
    thresholds = gc.get_threshold()
    runs: list[int] = []
    timer = TimedFullCollections(0.01, collect=runs.append)
    timer.start()
    try:
        assert gc.get_threshold() == (thresholds[0], thresholds[1], NEVER)
        before = full_collections_so_far()
        pile = pile_up_objects()
        assert full_collections_so_far() == before  # Python started none of its own
        del pile
        for _ in range(500):  # (waits for the condition: the timer's first two ticks)
            if len(runs) >= 2:
                break
            await asyncio.sleep(0.01)
        assert runs[:2] == [2, 2]  # full collections, on the timer
    finally:
        timer.stop()
    assert gc.get_threshold() == thresholds
    ran = len(runs)
    await asyncio.sleep(0.05)
    assert len(runs) == ran  # none after stop


async def test_the_last_of_two_timers_to_stop_puts_the_thresholds_back():
    thresholds = gc.get_threshold()
    first, second = TimedFullCollections(60), TimedFullCollections(60)
    first.start()
    second.start()
    first.stop()
    assert gc.get_threshold()[2] == NEVER  # the second still runs
    second.stop()
    assert gc.get_threshold() == thresholds


def test_an_interval_that_is_not_positive_is_refused():
    with pytest.raises(ValueError, match="interval_s must be > 0"):
        TimedFullCollections(0)
