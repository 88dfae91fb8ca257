"""The private replays in worker processes (``sim/private_pool.py``) give exactly the serial result: every
decision line in the same order, the same metrics, the same sharing anomaly and the same decision file.

Each comparison runs the same replay twice, once with the pool (checked to have been used: its workers
really forked) and once serially (``WORKERS = 0``)."""

from __future__ import annotations

import io
import json
import random

import pytest

from hive_scheduler import load_cluster_config
from hive_scheduler.sim import private_pool, samples, simulate, simulate_policies
from hive_scheduler.sim.engine import _request
from hive_scheduler.sim.events import parse_events
from hive_scheduler.sim.trace import load_trace


@pytest.fixture
def pool_used(monkeypatch):
    """Records each ``private_pool.start``'s answer (a pending replay, or None: serial)."""
    answers: list = []
    real = private_pool.start

    def spy(*args, **kwargs):
        got = real(*args, **kwargs)
        answers.append(got)
        return got

    monkeypatch.setattr(private_pool, "start", spy)
    monkeypatch.setattr("hive_scheduler.sim.engine.start_private", spy)
    return answers


def both(monkeypatch, run):
    """``run()`` with the pool, then serially."""
    parallel = run()
    monkeypatch.setattr(private_pool, "WORKERS", 0)
    serial = run()
    monkeypatch.setattr(private_pool, "WORKERS", None)
    return parallel, serial


def lines(result) -> list[str]:
    return [json.dumps(d, sort_keys=True) for d in result.decisions]


def test_philly_dev_anomaly_parallel_equals_serial(monkeypatch, pool_used):
    config = load_cluster_config("philly")
    events = load_trace(samples.PHILLY_DEV, config, time_scale=0.03)  # queues, preemptions by overflow
    monkeypatch.setattr(private_pool, "WORKERS", 2)
    parallel, serial = both(monkeypatch, lambda: simulate(config, events, "hived"))
    assert pool_used[0] is not None and pool_used[1] is None  # the first ran in the pool, the second serially
    assert lines(parallel.private) == lines(serial.private)
    assert parallel.private.metrics == serial.private.metrics
    assert parallel.metrics == serial.metrics and lines(parallel) == lines(serial)
    assert parallel.metrics.sharing_anomaly_s is not None


def priority_script(n: int, seed: int = 3) -> list:
    """``n`` jobs in 3 VCs of a 4-node cluster, priorities 0/10/100 and long runs: the private clusters
    queue and preempt (non-lazy jobs, so victims stop after the grace period)."""
    rng = random.Random(seed)
    out = []
    t = 0
    for i in range(n):
        t += rng.choice([0, 0, 5, 30, 120])
        vc = rng.choice("ABC")
        gpus = rng.choice([1, 1, 2, 4])
        out.append(json.dumps({"t": t, "op": "submit", "job": f"j{i}", "vc": vc, "priority": rng.choice([0, 10, 100]),
                               "lazy_preemption": False, "duration": rng.choice([60, 600, 3600]),
                               "tasks": [{"name": "w", "count": 1, "gpus": gpus}]}))
        if i % 7 == 3:  # some jobs are withdrawn (waiting or before their end)
            out.append(json.dumps({"t": t, "op": "finish", "job": f"j{i - 2}"}))
    return parse_events(out)


def small_cluster() -> dict:
    return {
        "physicalCluster": {
            "cellTypes": {"G-NODE": {"childCellType": "G", "childCellNumber": 4, "isNodeLevel": True},
                          "G-RACK": {"childCellType": "G-NODE", "childCellNumber": 4}},
            "physicalCells": [{"cellType": "G-RACK",
                               "cellChildren": [{"cellAddress": f"n{i}"} for i in range(4)]}],
        },
        "virtualClusters": {"A": {"virtualCells": [{"cellType": "G-RACK.G-NODE", "cellNumber": 2}]},
                            "B": {"virtualCells": [{"cellType": "G-RACK.G-NODE", "cellNumber": 1}]},
                            "C": {"virtualCells": [{"cellType": "G-RACK.G-NODE", "cellNumber": 1}]}},
    }


def test_preemptions_and_decision_file_parallel_equal_serial(monkeypatch, pool_used, tmp_path):
    """``private`` among the policies (its own decision file, written by the merge), with preemptions in the
    private clusters, grace periods and withdrawn jobs."""
    monkeypatch.setattr(private_pool, "MIN_JOBS", 100)
    monkeypatch.setattr(private_pool, "WORKERS", 3)
    events = priority_script(400)
    config = load_cluster_config(small_cluster())
    files = iter(range(10))

    def run():
        k = next(files)
        results = simulate_policies(config, events, ["hived", "private"], grace=30.0,
                                    out=lambda p: str(tmp_path / f"{k}.{p}.jsonl"))
        return results, k

    (par, kp), (ser, ks) = both(monkeypatch, run)
    assert pool_used[0] is not None and pool_used[1] is None
    assert par[1].metrics.preemptions > 10  # the private clusters did preempt
    for p, s in zip(par, ser):
        assert lines(p) == lines(s) and p.metrics == s.metrics
    assert par[0].private is par[1]  # hived's reference is the private result itself
    for policy in ("hived", "private"):
        assert (tmp_path / f"{kp}.{policy}.jsonl").read_text() == (tmp_path / f"{ks}.{policy}.jsonl").read_text()


def test_scripts_the_pool_cannot_replay_exactly_run_serially(monkeypatch, pool_used):
    """Hardware events (the shared cluster's) and a job id named twice: the pool declines, the replay is serial."""
    monkeypatch.setattr(private_pool, "MIN_JOBS", 10)
    monkeypatch.setattr(private_pool, "WORKERS", 1)  # (one worker beside the caller's replay: the pool, on any machine)
    config = load_cluster_config(small_cluster())
    events = priority_script(60)
    down = parse_events([json.dumps({"t": 100, "op": "node_down", "node": "n1"})])
    twice = parse_events([json.dumps({"t": 200, "op": "submit", "job": "j1", "vc": "B",
                                      "tasks": [{"name": "w", "count": 1, "gpus": 1}]})])
    for script in (events + down, events + twice):
        simulate(config, script, "hived")
    assert pool_used == [None, None]
    simulate(config, events, "hived")
    assert pool_used[-1] is not None


@pytest.mark.parametrize("cpus, caller_busy, workers", [
    (2, True, 1),    # one worker beside the caller's own replay (two and the caller took 1.1x the wall time)
    (2, False, 2),   # ``private`` alone: the caller only waits, a worker per CPU
    (1, True, 0),    # one CPU: a worker would only share it with the caller (and cost a fork)
    (1, False, 0),   # one worker and an idle caller: no gain over serial
    (16, True, 15),
])
def test_the_workers_leave_the_callers_cpu_to_its_own_replay(monkeypatch, cpus, caller_busy, workers):
    monkeypatch.setattr(private_pool.os, "cpu_count", lambda: cpus)
    assert private_pool._workers(caller_busy) == workers
    monkeypatch.setattr(private_pool, "WORKERS", 0)
    assert private_pool._workers(caller_busy) == 0


def test_simulate_policies_tells_the_pool_whether_it_replays_meanwhile(monkeypatch):
    """hived beside private: the caller is busy; private alone: it only waits for the workers."""
    seen: list = []

    def spy(events, **kwargs):
        seen.append(kwargs["caller_busy"])
        return None  # (serial: only the question is under test)

    monkeypatch.setattr("hive_scheduler.sim.engine.start_private", spy)
    config = load_cluster_config(small_cluster())
    events = priority_script(40)
    simulate_policies(config, events, ["hived", "private"])
    simulate_policies(config, events, ["private"])
    assert seen == [True, False]


def test_a_call_off_the_tape_is_an_error():
    """The merge never guesses: a call its VC's tape does not have raises."""
    events = parse_events([json.dumps({"t": 0, "op": "submit", "job": "a", "vc": "A",
                                       "tasks": [{"name": "w", "count": 1, "gpus": 1}]})])
    playback = private_pool._Playback([([("submit", "a", 0)], [])], [events])
    with pytest.raises(RuntimeError, match="does not match"):
        playback.finish("a", 0.0)
    request = _request(events[0])
    playback.submit(request, 0.0)
    playback.check_done()
    with pytest.raises(RuntimeError, match="does not match"):
        playback.submit(request, 0.0)
