"""Metrics from hand-written decision streams whose figures can be worked out on paper."""

from __future__ import annotations

import pytest

from hive_scheduler.sim.events import SubmitEvent, TaskSpec
from hive_scheduler.sim.metrics import compute_metrics, percentile


def sub(job: str, t: float, gpus: int, vc: str = "v", priority: int = 0) -> SubmitEvent:
    return SubmitEvent(t=t, job=job, vc=vc, tasks=(TaskSpec("w", 1, gpus),), priority=priority)


def started(t, job, gpus, node="n1", opportunistic=False):
    return {"t": t, "job": job, "event": "started",
            "placement": [{"task": "w-0", "node": node, "gpus": list(range(gpus))}], "opportunistic": opportunistic}


def ev(t, job, event, **kw):
    return {"t": t, "job": job, "event": event, **kw}


def test_percentile_matches_linear_interpolation():
    assert percentile([10, 30], 95) == pytest.approx(29.0)
    assert percentile([5], 95) == 5
    assert percentile([], 50) == 0.0
    assert percentile([1, 2, 3, 4, 5], 50) == 3


def test_jct_queueing_makespan_and_utilisation():
    submits = [sub("a", 0, 4), sub("b", 0, 8)]
    decisions = [
        started(0, "a", 4),
        ev(0, "b", "queued", reason="busy"),
        ev(10, "a", "finished"),
        started(10, "b", 8),
        ev(30, "b", "finished"),
    ]
    m = compute_metrics("x", submits, decisions, total_gpus=8)
    assert (m.jobs, m.finished, m.rejected, m.unfinished) == (2, 2, 0, 0)
    assert m.avg_jct_s == 20 and m.median_jct_s == 20 and m.p95_jct_s == pytest.approx(29)
    assert m.avg_queue_s == 5 and m.p95_queue_s == pytest.approx(9.5)
    assert m.makespan_s == 30
    assert m.gpu_utilisation == pytest.approx((4 * 10 + 8 * 20) / (8 * 30))
    assert m.preemptions == 0
    assert m.waits == {"a": 0, "b": 10}
    assert m.by_vc == {"v": {"jobs": 2, "avg_queue_s": 5, "sharing_anomaly_s": None, "sharing_anomaly_jobs": None}}
    # no private replay to compare with: no anomaly figure at all
    assert m.sharing_anomaly_s is None and m.sharing_anomaly_jobs is None
    assert "waits" not in m.to_dict()


def test_sharing_anomaly_is_the_extra_wait_over_the_private_replay():
    submits = [sub("a", 0, 4), sub("b", 0, 8), sub("c", 1, 2, vc="w"), sub("o", 2, 1, priority=-1)]
    decisions = [
        started(0, "a", 4),
        ev(0, "b", "queued", reason="busy"),
        ev(1, "c", "queued", reason="busy"),
        ev(2, "o", "queued", reason="busy"),
        ev(10, "a", "finished"),
        started(10, "b", 8),
        started(10, "c", 2, node="n2"),
        started(10, "o", 1, node="n3"),
        ev(30, "b", "finished"),
        ev(30, "c", "finished"),
        ev(30, "o", "finished"),
    ]
    # private: b waited 4 s (not 10), c 12 s (more than here), o not at all (opportunistic: never counted)
    m = compute_metrics("x", submits, decisions, total_gpus=8, reference={"a": 0, "b": 4, "c": 12, "o": 0})
    assert m.waits == {"a": 0, "b": 10, "c": 9, "o": 8}
    assert m.sharing_anomaly_s == pytest.approx(10 - 4)
    assert m.sharing_anomaly_jobs == 1
    assert m.by_vc["v"] == {"jobs": 3, "avg_queue_s": pytest.approx(18 / 3), "sharing_anomaly_s": pytest.approx(6),
                            "sharing_anomaly_jobs": 1}
    assert m.by_vc["w"] == {"jobs": 1, "avg_queue_s": 9, "sharing_anomaly_s": 0, "sharing_anomaly_jobs": 0}


def test_waits_add_up_over_preemptions_and_count_to_the_end():
    submits = [sub("x", 0, 4), sub("o", 0, 8, priority=-1), sub("y", 5, 6), sub("z", 6, 2)]
    decisions = [
        ev(0, "x", "queued", reason="cells fragmented"),
        started(0, "o", 8, node="n2", opportunistic=True),
        started(5, "y", 6),
        ev(6, "z", "queued", reason="busy"),
        ev(10, "x", "preempting", victims=["o"]),
        ev(12, "o", "preempted", by="x"),
        started(12, "x", 4, node="n2"),
        ev(20, "x", "finished"),
        started(20, "o", 8, node="n2", opportunistic=True),
        ev(30, "o", "finished"),
    ]
    m = compute_metrics("x", submits, decisions, total_gpus=16, reference={"x": 12, "y": 0, "z": 30})
    # z never started: it waited from 6 to the end of the replay (30); y is still running at the end
    assert m.waits == {"x": 12, "o": 8, "y": 0, "z": 24}
    assert m.sharing_anomaly_s == 0 and m.sharing_anomaly_jobs == 0
    assert m.preemptions == 1
    assert m.avg_queue_s == pytest.approx((12 + 8 + 0) / 3)  # over jobs that started; o waited 8 s after its preemption
    assert m.gpu_utilisation == pytest.approx((6 * 25 + 4 * 8 + 8 * 12 + 8 * 10) / (16 * 30))


def test_withdrawn_rejected_and_unfinished_jobs():
    submits = [sub("q", 0, 2), sub("r", 0, 99), sub("run", 0, 1), sub("wait", 0, 4, vc="other")]
    decisions = [
        ev(0, "q", "queued", reason="x"),
        ev(0, "r", "rejected", error="too big"),
        started(0, "run", 1),
        ev(0, "wait", "queued", reason="x"),
        ev(5, "q", "finished"),  # withdrawn while queued: not a completed job
    ]
    m = compute_metrics("x", submits, decisions, total_gpus=8, reference={"q": 1, "r": 0, "run": 0, "wait": 0})
    assert (m.jobs, m.finished, m.rejected, m.unfinished) == (4, 0, 1, 2)
    assert m.avg_jct_s == 0 and m.makespan_s == 5
    # q waited 5 s until withdrawn (1 s privately); "wait" 5 s to the end of the replay (0 s privately)
    assert m.waits == {"q": 5, "r": 0, "run": 0, "wait": 5}
    assert m.sharing_anomaly_s == pytest.approx(4 + 5)
    assert m.sharing_anomaly_jobs == 2
