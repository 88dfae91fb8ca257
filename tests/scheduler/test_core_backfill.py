"""Backfill (``Scheduler(..., backfill=True)``): a job passes a waiting gang only if it is gone before the
gang's reservation, so it never delays it. A scenario solved by hand and a property over random replays."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core_helpers import recount
from hive_scheduler import JobRequest, Scheduler, TaskGroup
from hive_scheduler.sim import simulate
from hive_scheduler.sim.events import parse_events

CFG = {"nodes": 1, "gpus_per_node": 4, "gpu_type": "GPU", "levels": ["pair"]}


def job(jid: str, count: int, gpus: int, limit: float | None, t: float) -> JobRequest:
    return JobRequest(id=jid, vc="default", user="ann", tasks=(TaskGroup("w", count, gpus),), time_limit_s=limit,
                      submit_time=t)


def starts(decisions) -> dict[str, tuple]:
    return {d.job: (d.t, tuple(g for p in d.placement for g in p.gpus)) for d in decisions if d.event == "started"}


def test_short_job_backfills_long_job_waits_for_the_gang():
    s = Scheduler(CFG, backfill=True)
    assert starts(s.submit(job("r", 1, 2, 100, 0), 0.0)) == {"r": (0.0, (0, 1))}
    # the gang (2 tasks x 2 GPUs) does not fit: it holds a reservation at r's end, t=100
    assert s.submit(job("gang", 2, 2, 50, 1), 1.0)[-1].event == "queued"
    assert s.estimate_starts(1.0)["gang"].start == 100.0
    # a 50 s job ends at 60 < 100: it backfills into the free pair
    assert starts(s.submit(job("short", 1, 1, 50, 10), 10.0)) == {"short": (10.0, (2,))}
    # a 500 s job would still run at 100: it waits, and says why
    assert s.submit(job("long", 1, 1, 500, 10), 10.0)[-1].event == "queued"
    reason = s.job("long").reason
    assert reason.startswith("waits behind gang's reservation (needs 4 GPUs, estimated to start in 90 s)"), reason
    # so does a job without a time limit
    s.submit(job("nolimit", 1, 1, None, 11), 11.0)
    assert s.job("nolimit").state == "waiting"
    recount(s)
    assert starts(s.finish("short", 60.0)) == {}
    assert s.job("long").state == "waiting"  # (60 + 500 > 100 still)
    out = s.finish("r", 100.0)
    assert starts(out) == {"gang": (100.0, (0, 1, 2, 3))}   # not delayed by anything that backfilled
    out = s.finish("gang", 150.0)
    assert set(starts(out)) == {"long", "nolimit"}
    recount(s)


def test_without_backfill_the_long_job_delays_the_gang():
    s = Scheduler(CFG)  # the default: jobs that fit pass one that does not
    s.submit(job("r", 1, 2, 100, 0), 0.0)
    s.submit(job("gang", 2, 2, 50, 1), 1.0)
    assert starts(s.submit(job("long", 1, 1, 500, 10), 10.0)) == {"long": (10.0, (2,))}
    assert starts(s.finish("r", 100.0)) == {}
    assert s.job("gang").state == "waiting"


def test_strict_order_lets_nobody_pass():
    s = Scheduler(CFG, strict_order=True)
    s.submit(job("r", 1, 2, 100, 0), 0.0)
    s.submit(job("gang", 2, 2, 50, 1), 1.0)
    assert starts(s.submit(job("short", 1, 1, 5, 10), 10.0)) == {}


# ------------------------------------------------------------------ property: backfill never delays a gang
PCFG = {"nodes": 2, "gpus_per_node": 4, "gpu_type": "G", "levels": ["pair"], "vcs": {"A": 4, "B": 4}}

job_st = st.fixed_dictionaries({
    "vc": st.sampled_from(["A", "B"]),
    "shape": st.sampled_from([(1, 1), (1, 1), (1, 2), (1, 4), (2, 2)]),
    "duration": st.integers(1, 100),
    "gap": st.integers(0, 30),
})


def _script(jobs, factor: int) -> list[str]:
    import json

    lines, t = [], 0
    for i, j in enumerate(jobs):
        t += j["gap"]
        count, gpus = j["shape"]
        lines.append(json.dumps({"t": t, "op": "submit", "job": f"j{i}", "vc": j["vc"], "duration": j["duration"],
                                 "time_limit_s": j["duration"] * factor,
                                 "tasks": [{"name": "w", "count": count, "gpus": gpus}]}))
    return lines


def _first_starts(result) -> dict[str, float]:
    out: dict[str, float] = {}
    for d in result.decisions:
        if d["event"] == "started":
            out.setdefault(d["job"], d["t"])
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(job_st, min_size=2, max_size=14))
def test_backfill_never_delays_a_gang(jobs):
    """Exact limits (= durations): every multi-GPU job starts no later with backfill than in strict order
    (the same reservations, nobody passing them), and every job finishes."""
    events = parse_events(_script(jobs, 1))
    kw = dict(anomaly=False, overflow=False)
    strict = simulate(PCFG, events, "hived", queueing="strict", **kw)
    back = simulate(PCFG, events, "hived", queueing="backfill", **kw)
    s0, s1 = _first_starts(strict), _first_starts(back)
    assert set(s0) == set(s1) == {f"j{i}" for i in range(len(jobs))}
    for i, j in enumerate(jobs):
        count, gpus = j["shape"]
        if count * gpus > 1:
            assert s1[f"j{i}"] <= s0[f"j{i}"] + 1e-9, (f"j{i}", s1[f"j{i}"], s0[f"j{i}"])


def test_higher_priority_is_not_held_by_a_reservation():
    s = Scheduler(CFG, backfill=True)
    s.submit(job("r", 1, 2, 100, 0), 0.0)
    s.submit(job("gang", 2, 2, 50, 1), 1.0)
    urgent = JobRequest(id="urgent", vc="default", user="bob", tasks=(TaskGroup("w", 1, 2),), priority=10,
                        submit_time=5)  # no limit, but priority 10 > the gang's 0
    assert starts(s.submit(urgent, 5.0)) == {"urgent": (5.0, (2, 3))}


# ------------------------------------------------------------------ property: backfill keeps the core's invariants
from core_helpers import SMALL, check_invariants  # noqa: E402
from core_helpers import job as make_job  # noqa: E402

ops = st.one_of(
    st.tuples(st.just("submit"), st.sampled_from(["a", "b", "c"]), st.sampled_from([1, 1, 2, 4, 8]),
              st.integers(1, 2), st.sampled_from([-1, 0, 0, 5]), st.sampled_from([None, 10, 100, 1000])),
    st.tuples(st.just("finish"), st.integers(0, 50)),
    st.tuples(st.just("stop"), st.integers(0, 50)),
    st.tuples(st.just("gpu"), st.integers(0, 3), st.integers(0, 7), st.booleans()),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(ops, min_size=5, max_size=40))
def test_backfill_keeps_invariants_and_estimates_change_nothing(steps):
    s = Scheduler(SMALL, backfill=True)
    t, n, victims = 0.0, 0, []
    for step in steps:
        t += 7
        ds = []
        if step[0] == "submit":
            _, vc, g, count, prio, limit = step
            n += 1
            try:
                ds = s.submit(make_job(f"j{n}", vc, g, count, prio, time_limit_s=limit), t)
            except Exception as e:  # RequestError: a shape its VC can never hold
                assert type(e).__name__ == "RequestError"
                continue
        elif step[0] == "finish" and s._jobs:
            ds = s.finish(list(s._jobs)[step[1] % len(s._jobs)], t)
        elif step[0] == "stop":
            pending = [v for v in victims if v in s._jobs and s._jobs[v].preempted_by is not None]
            if pending:
                ds = s.preemption_done(pending[step[1] % len(pending)], t)
        elif step[0] == "gpu":
            ds = s.set_gpu_health(f"node-{step[1]}", step[2], step[3], t)
        victims += [v for d in ds if d.event == "preempting" for v in d.victims]
        check_invariants(s)
        before = [v.to_dict() for v in s.jobs()]
        est = s.estimate_starts(t)
        assert [v.to_dict() for v in s.jobs()] == before
        assert set(est) == {v["id"] for v in before if v["state"] in ("waiting", "preempting")}
        assert all(e.start is None or e.start >= t for e in est.values())
        if s.estimator.twin is not None:
            assert not s.estimator.twin.job_table
            recount(s.estimator.twin)
