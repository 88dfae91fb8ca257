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
    m = compute_metrics("x", submits, decisions, total_gpus=8, vc_guaranteed={"v": 8})
    assert (m.jobs, m.finished, m.rejected, m.unfinished) == (2, 2, 0, 0)
    assert m.avg_jct_s == 20 and m.median_jct_s == 20 and m.p95_jct_s == pytest.approx(29)
    assert m.avg_queue_s == 5 and m.p95_queue_s == pytest.approx(9.5)
    assert m.makespan_s == 30
    assert m.gpu_utilisation == pytest.approx((4 * 10 + 8 * 20) / (8 * 30))
    assert m.preemptions == 0
    # b waited while the VC had only 4 unused guaranteed GPUs: no anomaly
    assert m.sharing_anomaly_s == 0 and m.sharing_anomaly_jobs == 0


def test_sharing_anomaly_preemption_and_requeue_time():
    submits = [sub("x", 0, 4), sub("o", 0, 8, priority=-1), sub("y", 5, 6)]
    decisions = [
        ev(0, "x", "queued", reason="cells fragmented"),
        started(0, "o", 8, node="n2", opportunistic=True),  # opportunistic: does not use the guarantee
        started(5, "y", 6),
        ev(8, "y", "finished"),
        ev(10, "x", "preempting", victims=["o"]),
        ev(12, "o", "preempted", by="x"),
        started(12, "x", 4, node="n2"),
        ev(20, "x", "finished"),
        started(20, "o", 8, node="n2", opportunistic=True),
        ev(30, "o", "finished"),
    ]
    m = compute_metrics("x", submits, decisions, total_gpus=16, vc_guaranteed={"v": 8})
    # x (4 GPUs) waited 0..12; the VC's unused guarantee was 8 on [0,5), 2 on [5,8), 8 on [8,12)
    assert m.sharing_anomaly_s == pytest.approx(5 + 4)
    assert m.sharing_anomaly_jobs == 1
    assert m.preemptions == 1
    assert m.avg_queue_s == pytest.approx((12 + 0 + 8) / 3)  # o waited 8 s after its preemption
    assert sorted([m.avg_jct_s * 3]) == [pytest.approx(20 + 3 + 30)]
    assert m.gpu_utilisation == pytest.approx((6 * 3 + 4 * 8 + 8 * 12 + 8 * 10) / (16 * 30))


def test_demoted_jobs_stop_counting_against_the_guarantee():
    submits = [sub("g", 0, 8), sub("w", 1, 4)]
    decisions = [
        started(0, "g", 8),
        ev(1, "w", "queued", reason="VC full"),
        ev(3, "g", "demoted", reason="reconfigured"),  # from t=3 the VC's 8 guaranteed GPUs are unused
        started(7, "w", 4, node="n2"),
        ev(9, "w", "finished"),
        ev(9, "g", "finished"),
    ]
    m = compute_metrics("x", submits, decisions, total_gpus=16, vc_guaranteed={"v": 8})
    assert m.sharing_anomaly_s == pytest.approx(4)


def test_withdrawn_rejected_and_unfinished_jobs():
    submits = [sub("q", 0, 2), sub("r", 0, 99), sub("run", 0, 1), sub("wait", 0, 4, vc="other")]
    decisions = [
        ev(0, "q", "queued", reason="x"),
        ev(0, "r", "rejected", error="too big"),
        started(0, "run", 1),
        ev(0, "wait", "queued", reason="x"),
        ev(5, "q", "finished"),  # withdrawn while queued: not a completed job
    ]
    m = compute_metrics("x", submits, decisions, total_gpus=8, vc_guaranteed={"v": 8, "other": 8})
    assert (m.jobs, m.finished, m.rejected, m.unfinished) == (4, 0, 1, 2)
    assert m.avg_jct_s == 0 and m.makespan_s == 5
    # "wait" asked for 4 of its VC's 8 idle guaranteed GPUs for 5 s; "q" for 2 of v's 7 idle GPUs until withdrawn
    assert m.sharing_anomaly_s == pytest.approx(5 + 5)
    assert m.sharing_anomaly_jobs == 2
