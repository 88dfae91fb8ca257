"""``estimates_snapshot``: ``estimate_starts`` split into a copy of its inputs and a replay that may run on
another thread while the core changes. On random states the replay of a snapshot answers what the inline
``estimate_starts`` answered when the snapshot was taken, even though the core changed (jobs started, ended,
preempted, hardware failed) before and while the replay ran."""

from __future__ import annotations

import random
import threading

import pytest

from hive_scheduler import JobRequest, Scheduler, TaskGroup
from hive_scheduler.errors import RequestError
from hive_scheduler.estimates import Expected
from hive_scheduler.overflow import OverflowScheduler

CFG = {"nodes": 2, "gpus_per_node": 4, "gpu_type": "GPU", "levels": ["pair"], "vcs": {"a": 4, "b": 4}}


def random_request(rng: random.Random, n: int, t: float) -> JobRequest:
    limit = rng.choice([None, 30.0, 60.0, 120.0, 500.0])
    return JobRequest(f"j{n}", rng.choice(["a", "b"]), user=rng.choice(["ann", "bob"]),
                      tasks=(TaskGroup("w", rng.choice([1, 1, 2]), rng.choice([1, 2])),),
                      priority=rng.choice([0, 0, 1, -1]), time_limit_s=limit, submit_time=t)


class RandomLoad:
    """A core driven by random submits, ends, preemptions' ends and GPU failures and repairs."""

    def __init__(self, core, seed: int):
        self.core = core
        self.rng = random.Random(seed)
        self.n = 0
        self.t = 0.0
        self.victims: list[str] = []

    def step(self) -> None:
        rng, core = self.rng, self.core
        self.t += rng.choice([0.0, 1.0, 5.0])
        roll = rng.random()
        jobs = {v.id: v.state for v in core.jobs()}
        running = sorted(j for j, s in jobs.items() if s == "running")
        if roll < 0.55 or not running:
            self.n += 1
            decisions = core.submit(random_request(rng, self.n, self.t), self.t)
        elif roll < 0.85:
            decisions = core.finish(rng.choice(running), self.t)
        else:
            node, gpu = f"node-{rng.randrange(2)}", rng.randrange(4)
            decisions = core.set_gpu_health(node, gpu, rng.random() < 0.6, self.t)
        # victims stop at a later step (so some snapshots hold preempting jobs)
        self.victims += [v for d in decisions if d.event == "preempting" for v in d.victims]
        if self.victims and rng.random() < 0.5:
            try:
                core.preemption_done(self.victims.pop(0), self.t, requeue=True)
            except RequestError:
                pass  # (it ended meanwhile)


def expected_durations(core, rng: random.Random) -> dict[str, Expected]:
    """A learned duration for some jobs without a limit (the others run forever)."""
    return {v.id: Expected(float(rng.choice([10, 40, 90])), "history", "ann", 3, "train")
            for v in core.jobs() if rng.random() < 0.5}


def run_on_a_thread(snap) -> dict:
    out = {}
    worker = threading.Thread(target=lambda: out.update(answer=snap.run()))
    worker.start()
    worker.join()
    return out["answer"]


@pytest.mark.parametrize("overflow", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_a_snapshot_replayed_later_answers_what_the_inline_replay_answered(seed, overflow):
    core = OverflowScheduler(Scheduler(CFG)) if overflow else Scheduler(CFG)
    load = RandomLoad(core, seed)
    estimator = core.new_estimator()
    compared = 0
    for _ in range(12):
        for _ in range(load.rng.randrange(1, 8)):
            load.step()
        expected = expected_durations(core, load.rng)
        max_waiting = load.rng.choice([None, 3])
        now = load.t + 2.0
        snap = core.estimates_snapshot(estimator, now, expected, max_waiting=max_waiting)
        assert snap.version == core.version
        inline = core.estimate_starts(now, expected, max_waiting=max_waiting)
        for _ in range(6):  # the core moves on before the replay runs
            load.step()
        assert core.version != snap.version
        assert run_on_a_thread(snap) == inline
        compared += len(inline)
    assert compared > 0  # (the states had waiting jobs to estimate)


def test_the_snapshot_replays_on_its_own_twin():
    """The snapshot's twin is its estimator's, not the core's (which backfill replays on, on the loop)."""
    core = Scheduler(CFG)
    estimator = core.new_estimator()
    core.estimate_starts(0.0)
    snap = core.estimates_snapshot(estimator, 0.0)
    assert snap.twin is estimator.twin and snap.twin is not core.estimator.twin
