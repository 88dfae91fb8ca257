"""Per-user limits inside a VC: resolution, the admission gate in the VC pass, submit-time refusals,
and a property over random call sequences (nobody ever holds more than their limits allow)."""

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core_helpers import SMALL, WORKSTATION, check_invariants, events, job
from hive_scheduler import JobRequest, RequestError, Scheduler, TaskGroup
from hive_scheduler.errors import LimitRefusal
from hive_scheduler.limits import LimitTable, LimitsError, UserLimits, blocking, owner_groups


def started(ds):
    return [d.job for d in ds if d.event == "started"]


def reason(s, jid):
    return s.job(jid).reason


# --------------------------------------------------------------------------- resolution and parsing

def test_most_specific_entry_wins_key_by_key():
    t = LimitTable.from_dict({
        "default": {"max_gpus": 1, "max_kernels": 1, "max_priority": 10},
        "groups": {"ta": {"max_gpus": 4}, "students": {"max_gpus": 2, "max_running_jobs": 3}},
        "users": {"ann": {"max_gpus": 8}},
    })
    assert t.resolve("zed") == UserLimits(max_gpus=1, max_kernels=1, max_priority=10)
    # several groups: the most generous value among those that set the key; unset keys fall to default
    assert t.resolve("bob", ["students", "ta"]) == UserLimits(max_gpus=4, max_running_jobs=3, max_kernels=1,
                                                              max_priority=10)
    assert t.resolve("ann", ["students"]) == UserLimits(max_gpus=8, max_running_jobs=3, max_kernels=1, max_priority=10)
    assert t.resolve("ann", ["nobody"]).max_running_jobs is None  # no entry sets it: no limit


@pytest.mark.parametrize("body, field", [
    ({"default": {"max_gpu": 1}}, "default.max_gpu"),
    ({"users": {"ann": {"max_gpus": -1}}}, "users.ann.max_gpus"),
    ({"groups": {"s": {"max_kernels": 1.5}}}, "groups.s.max_kernels"),
    ({"groups": {"s": {"max_kernels": True}}}, "groups.s.max_kernels"),
    ({"users": {"ann": "2"}}, "users.ann"),
    ({"defaults": {}}, "defaults"),
    ({"users": ["ann"]}, "users"),
])
def test_malformed_limits_name_the_key(body, field):
    with pytest.raises(LimitsError) as e:
        LimitTable.from_dict(body)
    assert e.value.field == field
    assert field in e.value.message


def test_round_trip_and_nulls_mean_no_limit():
    d = {"default": {"max_gpus": 2, "max_kernels": None}, "groups": {}, "users": {"ann": {"max_gpus": 0}}}
    t = LimitTable.from_dict(d)
    assert t.to_dict() == {"default": {"max_gpus": 2}, "groups": {}, "users": {"ann": {"max_gpus": 0}}}
    assert LimitTable.from_dict(t.to_dict()) == t
    assert not LimitTable.from_dict({"default": {"max_gpus": None}})


def test_owner_groups_fall_back_to_the_fair_share_group():
    assert owner_groups(JobRequest("x", "v", group="g")) == ("g",)
    assert owner_groups(JobRequest("x", "v", group="g", groups=["a", "b"])) == ("a", "b")


# --------------------------------------------------------------------------- the gate

def ws(**limits):
    s = Scheduler(WORKSTATION, starvation_after=0)
    s.set_user_limits("default", {"default": limits}, 0)
    return s


def test_at_max_gpus_a_job_waits_with_the_limit_named_and_others_pass_it():
    s = ws(max_gpus=2)
    assert started(s.submit(job("a1", "default", user="ann"), 1)) == ["a1"]
    assert started(s.submit(job("a2", "default", user="ann"), 2)) == ["a2"]
    ds = s.submit(job("a3", "default", user="ann"), 3)
    assert events(ds) == [("queued", "a3")]
    assert ds[0].reason == "you hold 2 of your 2 GPUs in default; the next starts when one of yours ends"
    # bob's job comes after ann's waiting one and starts: the gate skips ann's, it blocks nobody
    assert started(s.submit(job("b1", "default", user="bob"), 4)) == ["b1"]
    assert reason(s, "a3").startswith("you hold 2 of your 2 GPUs in default")
    # ann's own job ends: hers starts
    ds = s.finish("a1", 5)
    assert started(ds) == ["a3"]
    check_invariants(s)


def test_a_job_that_would_cross_the_limit_says_how_much_it_needs():
    s = ws(max_gpus=3)
    s.submit(job("a1", "default", gpus=2, user="ann"), 1)
    s.submit(job("a2", "default", gpus=2, user="ann"), 2)
    assert reason(s, "a2") == ("you hold 2 of your 3 GPUs in default and this job needs 2; "
                               "it starts when yours free enough")


def test_raising_a_limit_starts_the_waiting_job_at_once_and_lowering_stops_nothing():
    s = ws(max_gpus=1)
    s.submit(job("a1", "default", user="ann"), 1)
    s.submit(job("a2", "default", user="ann"), 2)
    assert s.job("a2").state == "waiting"
    ds = s.set_user_limits("default", {"default": {"max_gpus": 1}, "users": {"ann": {"max_gpus": 2}}}, 3)
    assert started(ds) == ["a2"]
    ds = s.set_user_limits("default", {"default": {"max_gpus": 1}}, 4)
    assert ds == [] and s.job("a1").state == s.job("a2").state == "running"
    s.submit(job("a3", "default", user="ann"), 5)
    s.finish("a1", 6)
    assert s.job("a3").state == "waiting"  # still 1 held, limit 1
    assert started(s.finish("a2", 7)) == ["a3"]


def test_max_running_jobs_and_max_kernels():
    s = ws(max_running_jobs=2, max_kernels=1)
    k = lambda jid, gpus=1: JobRequest(jid, "default", user="ann", tasks=(TaskGroup("k", 1, gpus),), kind="kernel")
    assert started(s.submit(k("k1"), 1)) == ["k1"]
    s.submit(k("k2"), 2)
    assert reason(s, "k2") == "you have 1 of your 1 GPU kernel in default; the next starts when one of yours is shut down"
    assert started(s.submit(job("b1", "default", user="ann"), 3)) == ["b1"]  # a batch job is no kernel
    s.submit(job("b2", "default", user="ann"), 4)
    assert reason(s, "b2") == "you run 2 of your 2 running jobs in default; the next starts when one of yours ends"
    assert started(s.finish("b1", 5)) == ["b2"]  # k2 still waits: ann still has her one GPU kernel
    assert s.job("k2").state == "waiting"
    assert started(s.finish("k1", 6)) == ["k2"]


def test_a_gang_counts_all_its_gpus_and_the_gate_never_splits_it():
    s = ws(max_gpus=3)
    s.submit(job("g", "default", gpus=1, count=2, user="ann"), 1)  # 2 GPUs
    s.submit(job("g2", "default", gpus=1, count=2, user="ann"), 2)
    assert s.job("g2").state == "waiting" and "you hold 2 of your 3 GPUs" in reason(s, "g2")
    check_invariants(s)


def test_opportunistic_jobs_count_and_are_gated_too():
    s = ws(max_gpus=1)
    assert started(s.submit(job("o1", "default", priority=-1, user="ann"), 1)) == ["o1"]
    s.submit(job("o2", "default", priority=-1, user="ann"), 2)
    s.submit(job("g1", "default", user="ann"), 3)
    assert s.job("o2").state == "waiting" and s.job("g1").state == "waiting"
    assert reason(s, "o2").startswith("you hold 1 of your 1 GPU in default")
    got = started(s.finish("o1", 4))
    assert len(got) == 1 and got[0] in ("o2", "g1")  # one GPU: one of them, never both


def test_a_job_waiting_at_its_limit_does_not_hold_back_others_under_anti_starvation():
    # starvation_after=0: an overtaken job that cannot be placed holds back the VC at once. Ann's job
    # waiting at her own limit must not do that.
    s = ws(max_gpus=1)
    s.submit(job("a1", "default", user="ann"), 1)
    s.submit(job("a2", "default", user="ann"), 2)
    for i, u in enumerate(["bob", "cy", "dee"]):
        assert started(s.submit(job(f"{u}1", "default", user=u), 3 + i)) == [f"{u}1"]


def test_higher_priority_over_the_limit_preempts_nobody():
    s = Scheduler(WORKSTATION, policy="priority", starvation_after=None)
    s.set_user_limits("default", {"users": {"ann": {"max_gpus": 2}}}, 0)
    for i in range(2):
        s.submit(job(f"a{i}", "default", user="ann"), 1)
    for i in range(2):
        s.submit(job(f"b{i}", "default", user="bob"), 2)
    ds = s.submit(job("hi", "default", priority=100, user="ann"), 3)
    assert [d.event for d in ds] == ["queued"] and "you hold 2 of your 2 GPUs" in ds[0].reason
    assert all(s.job(f"b{i}").state == "running" for i in range(2))


def test_limits_are_per_vc_and_survive_reconfiguration():
    s = Scheduler(SMALL)
    s.set_user_limits("a", {"default": {"max_gpus": 1}}, 0)
    s.submit(job("a1", "a", user="ann"), 1)
    s.submit(job("a2", "a", user="ann"), 1)
    assert s.job("a2").state == "waiting"
    assert started(s.submit(job("b1", "b", user="ann"), 2)) == ["b1"]  # VC b has no limits
    s.reconfigure(SMALL, 3)
    assert s.user_limits("a").default.max_gpus == 1
    assert s.job("a2").state == "waiting"


def test_set_user_limits_refuses_bad_input_and_changes_nothing():
    s = ws(max_gpus=2)
    with pytest.raises(RequestError) as e:
        s.set_user_limits("default", {"default": {"max_gpus": -2}}, 1)
    assert e.value.field == "default.max_gpus"
    with pytest.raises(RequestError):
        s.set_user_limits("nope", {}, 1)
    assert s.user_limits("default").default.max_gpus == 2


# --------------------------------------------------------------------------- refusals at submit

def test_what_can_never_fit_under_the_limits_is_refused_at_submit():
    s = Scheduler(WORKSTATION)
    s.set_user_limits("default", {"default": {"max_gpus": 2, "max_priority": 10, "max_time_limit_s": 3600,
                                              "max_queued_jobs": 1}}, 0)
    with pytest.raises(LimitRefusal) as e:
        s.check_limits(job("x", "default", gpus=3, user="ann"), time_limit_s=60)
    assert (e.value.field, e.value.limit, e.value.queue_full) == ("tasks", "max_gpus", False)
    assert "ask for fewer GPUs" in e.value.message
    with pytest.raises(LimitRefusal) as e:
        s.check_limits(job("x", "default", priority=11, user="ann"), time_limit_s=60)
    assert e.value.limit == "max_priority" and "ask for priority 10 or less" in e.value.message
    with pytest.raises(LimitRefusal) as e:
        s.check_limits(job("x", "default", user="ann"), time_limit_s=7200)
    assert e.value.limit == "max_time_limit_s"
    with pytest.raises(LimitRefusal) as e:
        s.check_limits(job("x", "default", user="ann"))  # no time limit asked: unlimited is over the limit
    assert e.value.field == "time_limit_s"
    kernel = JobRequest("k", "default", user="ann", tasks=(TaskGroup("k", 1, 1),), kind="kernel")
    s.check_limits(kernel)  # a kernel without a time limit: bounded by the culler and max_kernels instead
    with pytest.raises(LimitRefusal):
        s.check_limits(kernel, time_limit_s=7200)
    s.check_limits(job("x", "default", priority=-1, user="ann"), time_limit_s=60)  # opportunistic: fine
    # max_queued_jobs: counts the owner's waiting jobs (and those about to be submitted)
    s.check_limits(job("x", "default", user="ann"), time_limit_s=60)
    with pytest.raises(LimitRefusal) as e:
        s.check_limits(job("x", "default", user="ann"), time_limit_s=60, also_waiting=1)
    assert e.value.queue_full and e.value.limit == "max_queued_jobs"


# --------------------------------------------------------------------------- property

USERS = ["ann", "bob", "cy"]
GROUPS = {"ann": ("students",), "bob": ("students", "ta"), "cy": ()}

submit_op = st.tuples(st.just("submit"), st.sampled_from(USERS), st.sampled_from(["a", "b", "c"]),
                      st.sampled_from([1, 1, 2, 4]), st.integers(1, 2), st.sampled_from([-1, 0, 0, 5, 50]),
                      st.sampled_from(["batch", "kernel"]))
ops = st.one_of(submit_op, submit_op, submit_op,
                st.tuples(st.just("finish"), st.integers(0, 60)),
                st.tuples(st.just("stop"), st.integers(0, 60)),
                st.tuples(st.just("raise"), st.sampled_from(["a", "b", "c"]), st.integers(0, 2)))


def limits_for(level: int) -> dict:
    return {"default": {"max_gpus": 2 + level, "max_running_jobs": 2 + level, "max_kernels": 1 + level},
            "groups": {"ta": {"max_gpus": 4 + level}},
            "users": {"cy": {"max_gpus": 1 + level, "max_kernels": level}}}


def check_limits_hold(s: Scheduler) -> None:
    """Nobody holds more than their limits allow, and nobody waits at a limit they are under."""
    for vc in ("a", "b", "c"):
        table = s.user_limits(vc)
        for user in USERS:
            lim = table.resolve(user, GROUPS[user])
            use = s._gate.usage(vc, user)
            if lim.max_gpus is not None:
                assert use.gpus <= lim.max_gpus, f"{user} holds {use.gpus} > {lim.max_gpus} GPUs in {vc}"
            if lim.max_running_jobs is not None:
                assert use.running_jobs <= lim.max_running_jobs
            if lim.max_kernels is not None:
                assert use.kernels <= lim.max_kernels
            for j in s._jobs.values():  # no lost wake-up: a job said to wait at a limit really is at it
                if j.req.vc == vc and j.req.user == user and j.state == "waiting" and \
                        type(j.fail).__name__ == "OverLimit":
                    assert blocking(lim, vc, use, j.req) is not None, f"{j.req.id} waits at a limit it is under"


@settings(max_examples=int(os.environ.get("HIVE_PROP_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(ops, min_size=5, max_size=50), policy=st.sampled_from(["fifo", "priority", "drf", "fair_share"]))
def test_nobody_ever_holds_more_than_their_limits(steps, policy):
    s = Scheduler(SMALL, policy=policy, starvation_after=30)
    level = {vc: 0 for vc in "abc"}
    for vc in "abc":
        s.set_user_limits(vc, limits_for(0), 0)
    t, n = 0.0, 0
    for step in steps:
        t += 7
        if step[0] == "submit":
            _, user, vc, gpus, count, prio, kind = step
            req = JobRequest(f"j{n}", vc, user=user, tasks=(TaskGroup("w", count, gpus),), priority=prio,
                             groups=GROUPS[user], kind=kind, submit_time=t)
            n += 1
            try:
                s.check_can_ever_fit(req)
                s.check_limits(req, time_limit_s=None)
            except RequestError:
                continue
            s.submit(req, t)
        elif step[0] == "finish":
            ids = sorted(s._jobs)
            if ids:
                s.finish(ids[step[1] % len(ids)], t)
        elif step[0] == "stop":  # a preempted job stopped: queued again
            victims = sorted(jid for jid, j in s._jobs.items() if j.preempted_by is not None)
            if victims:
                s.preemption_done(victims[step[1] % len(victims)], t)
        else:  # limits only go up here (lowering one stops nothing, so what runs may then be above it)
            _, vc, up = step
            level[vc] += up
            s.set_user_limits(vc, limits_for(level[vc]), t)
        check_invariants(s)
        check_limits_hold(s)
