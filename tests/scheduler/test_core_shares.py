"""Shares of a GPU (0.5 / 0.25 / 0.125) in the core: packing, exclusivity with whole-GPU jobs, the
VC's guarantee, preemption and opportunistic rules, wait reasons, adopt. Invariants after every call."""

import pytest

from core_helpers import WORKSTATION, check_invariants, events, job
from hive_scheduler import JobRequest, RequestError, Scheduler, TaskGroup
from hive_scheduler.types import TaskPlacement

COURSE = dict(WORKSTATION, vcs={"cv-101": 4})
TWO_VCS = dict(WORKSTATION, vcs={"cv-101": 2, "lab": 2})


def share(jid, vc, g=0.25, priority=0, **kw):
    return JobRequest(jid, vc, user=kw.pop("user", "u"), tasks=(TaskGroup("w", 1, g),), priority=priority, **kw)


def run(s, call, *a):
    ds = getattr(s, call)(*a)
    check_invariants(s)
    return ds


def gpu_of(s, jid):
    p = s.job(jid).placement[0]
    return p.gpus[0], p.share_slot


def test_four_quarters_pack_one_gpu_then_the_fifth_opens_another():
    s = Scheduler(COURSE)
    for i in range(4):
        run(s, "submit", share(f"s{i}", "cv-101"), i)
    assert [gpu_of(s, f"s{i}") for i in range(4)] == [(0, 0), (0, 2), (0, 4), (0, 6)]
    run(s, "submit", share("s4", "cv-101"), 5)
    assert gpu_of(s, "s4")[0] == 1  # the pair partner: shares stay close
    v = s.vc_view()["cv-101"]
    assert (v["used_gpus"], v["shared_gpus"], v["share_used_gpus"]) == (2, 2, 1.25)


def test_buddy_best_fit_keeps_a_half_whole():
    s = Scheduler(COURSE)
    run(s, "submit", share("e1", "cv-101", 0.125), 0)
    run(s, "submit", share("q1", "cv-101", 0.25), 1)
    run(s, "submit", share("h1", "cv-101", 0.5), 2)
    assert gpu_of(s, "e1") == (0, 0) and gpu_of(s, "q1") == (0, 2) and gpu_of(s, "h1") == (0, 4)
    run(s, "submit", share("e2", "cv-101", 0.125), 3)
    assert gpu_of(s, "e2") == (0, 1)  # the eighth beside e1, not one that would split another block
    run(s, "finish", "q1", 4)
    run(s, "submit", share("h2", "cv-101", 0.5), 5)
    assert gpu_of(s, "h2")[0] == 1    # no aligned half left on GPU 0 (0-3 holds two eighths)


def test_whole_gpu_jobs_and_shares_never_mix_and_the_guarantee_counts_shares():
    s = Scheduler(COURSE)
    for i in range(3):
        run(s, "submit", job(f"w{i}", "cv-101", 1), i)
    for i in range(4):
        run(s, "submit", share(f"s{i}", "cv-101"), 10 + i)
    ds = run(s, "submit", share("s5", "cv-101"), 20)
    assert ds[-1].event == "queued"
    assert ds[-1].reason == ("no GPU of VC cv-101 has a free quarter; 3 of 4 GPUs hold whole-GPU jobs, "
                             "1 is shared (1 without a free quarter)")
    ds = run(s, "submit", job("w9", "cv-101", 1), 21)
    assert ds[-1].event == "queued"  # the shared GPU is used for whole-GPU purposes
    run(s, "finish", "w0", 22)        # a GPU frees: the waiting share opens it (FIFO: s5 before w9)
    assert s.job("s5").state == "running" and gpu_of(s, "s5") == (0, 0)
    assert s.job("w9").state == "waiting"
    for i in range(4):
        run(s, "finish", f"s{i}", 30 + i)
    assert s.job("w9").state == "running" and s.job("w9").placement[0].gpus == (3,)


def test_a_vc_shares_only_its_own_gpus():
    s = Scheduler(TWO_VCS)
    run(s, "submit", share("a", "cv-101"), 0)
    run(s, "submit", share("b", "lab"), 1)
    assert gpu_of(s, "a")[0] != gpu_of(s, "b")[0]
    cells = s.cluster_view()["cells"][0]
    leaves = [leaf for pair in cells["children"] for leaf in pair["children"]]
    shared = {leaf["gpu"]: (leaf["vc"], leaf["shares"]) for leaf in leaves if "shares" in leaf}
    assert shared == {gpu_of(s, "a")[0]: ("cv-101", [{"job": "a", "slot": 0, "share": 0.25}]),
                      gpu_of(s, "b")[0]: ("lab", [{"job": "b", "slot": 0, "share": 0.25}])}


def test_opportunistic_shares_pack_together_and_are_preempted_as_one_gpu():
    s = Scheduler(COURSE)
    run(s, "submit", share("o1", "cv-101", 0.5, priority=-1), 0)
    run(s, "submit", share("o2", "cv-101", 0.25, priority=-1), 1)
    assert gpu_of(s, "o1")[0] == gpu_of(s, "o2")[0] and s.job("o1").opportunistic
    # as with a whole opportunistic job: binding the VC's node cell (it has opportunistic work) takes
    # that GPU, and every share on it is a victim
    ds = run(s, "submit", job("w0", "cv-101", 1), 2)
    assert events(ds) == [("preempting", "w0", ["o1", "o2"])]
    run(s, "submit", share("o3", "cv-101", 0.25, priority=-1), 3)
    assert gpu_of(s, "o3")[0] != gpu_of(s, "o1")[0]  # a reserved shared GPU takes no new shares
    run(s, "preemption_done", "o1", 4, False)
    ds = run(s, "preemption_done", "o2", 5, False)
    assert ("started", "w0", False) in events(ds)


def test_a_guaranteed_share_preempts_opportunistic_work_and_shares_its_gpu_afterwards():
    s = Scheduler(COURSE)
    run(s, "submit", job("opp", "cv-101", 4, priority=-1), 0)
    ds = run(s, "submit", share("g1", "cv-101"), 1)
    assert events(ds) == [("preempting", "g1", ["opp"])]
    ds = run(s, "preemption_done", "opp", 2, False)
    assert ("started", "g1", False) in events(ds)
    run(s, "submit", share("g2", "cv-101"), 3)
    assert gpu_of(s, "g2") == (gpu_of(s, "g1")[0], 2)


@pytest.mark.parametrize("lazy", [True, False])
def test_higher_priority_displaces_a_shared_gpu_only_when_every_share_is_lower(lazy):
    s = Scheduler(dict(WORKSTATION, vcs={"cv-101": 1, "rest": 3}))
    run(s, "submit", share("lo1", "cv-101", priority=1, lazy_preemption=lazy), 0)
    run(s, "submit", share("hi", "cv-101", priority=9), 1)
    ds = run(s, "submit", job("mid", "cv-101", 1, priority=5), 2)
    assert events(ds) == [("queued", "mid")]  # hi (9) is on the shared GPU: not displaceable by 5
    run(s, "finish", "mid", 3)
    run(s, "finish", "hi", 4)
    run(s, "submit", share("lo2", "cv-101", priority=2, lazy_preemption=lazy), 5)
    ds = run(s, "submit", job("top", "cv-101", 1, priority=5), 6)
    if lazy:  # both demoted at once; the VC's cell binds to another free GPU and they run on there
        assert events(ds) == [("demoted", "lo1"), ("demoted", "lo2"), ("started", "top", False)]
        assert s.job("lo1").opportunistic and s.job("lo2").opportunistic
        return
    assert events(ds) == [("preempting", "top", ["lo1", "lo2"])]
    run(s, "preemption_done", "lo2", 7)
    ds = run(s, "preemption_done", "lo1", 8)
    assert ("started", "top", False) in events(ds)
    assert {s.job("lo1").state, s.job("lo2").state} == {"waiting"}


def test_bad_requests_say_what_is_allowed():
    s = Scheduler(COURSE)
    with pytest.raises(RequestError, match="0.5, 0.25 or 0.125"):
        s.submit(share("x", "cv-101", 0.3), 0)
    with pytest.raises(RequestError, match="integer >= 0"):
        s.submit(share("x", "cv-101", 1.5), 0)
    with pytest.raises(RequestError, match="one task on one GPU"):
        s.submit(job("x", "cv-101", 0.25, count=2), 0)
    with pytest.raises(RequestError, match="drop 'within'"):
        s.submit(share("x", "cv-101", within="A6000-pair"), 0)
    s.check_can_ever_fit(share("x", "cv-101"))
    assert s.jobs() == []


def test_adopt_puts_shares_back_on_their_eighths():
    s = Scheduler(COURSE)
    for i, g in enumerate([0.5, 0.125, 0.25]):
        run(s, "submit", share(f"s{i}", "cv-101", g), i)
    s2 = Scheduler(COURSE)
    for j in sorted(s._jobs.values(), key=lambda j: j.seq):
        run(s2, "adopt", j.req, [p.to_dict() for p in j.placement], j.opp, 10)
    assert [s2.job(f"s{i}").placement for i in range(3)] == [s.job(f"s{i}").placement for i in range(3)]
    with pytest.raises(RequestError, match="no free"):
        s2.adopt(share("big", "cv-101", 0.5), [TaskPlacement("w-0", "w", 0, 0, "ws", (0,), share=0.5,
                                                             share_slot=0)], False, 11)
    assert s2.vc_view() == s.vc_view()


def test_adopting_an_opportunistic_share_beside_guaranteed_ones_demotes_them_instead_of_refusing():
    """A restart finds a GPU running guaranteed shares and an opportunistic one (a store written by an
    older version, or a demotion the core no longer sees): every share is adopted, all opportunistic."""
    s = Scheduler(COURSE)
    at = lambda slot: [TaskPlacement("w-0", "w", 0, 0, "ws", (0,), share=0.25, share_slot=slot)]
    assert events(run(s, "adopt", share("g", "cv-101"), at(0), False, 1)) == []
    assert not s.job("g").opportunistic
    ds = run(s, "adopt", share("o", "cv-101"), at(2), True, 1)
    assert events(ds) == [("demoted", "g")] and "opportunistic share o" in ds[0].reason
    assert s.job("g").opportunistic and s.job("o").opportunistic
    assert [gpu_of(s, j) for j in ("g", "o")] == [(0, 0), (0, 2)]
    assert s.vc_view()["cv-101"]["used_gpus"] == 0  # the GPU no longer counts against the guarantee


def test_what_if_for_a_share_answers_where_it_would_start_never_a_type_error():
    """A dry run of a GPU share raised TypeError in the guaranteed placement (a 500 for any share's dry
    run): it answers as submit decides, on a GPU its VC shares already or on a new one."""
    s = Scheduler(COURSE)
    first = s.what_if(share("s1", "cv-101", 0.5), 0.0)
    assert first.outcome == "start" and len(first.placement) == 1 and len(first.placement[0].gpus) == 1
    assert first.placement[0].share == 0.5
    run(s, "submit", share("s1", "cv-101", 0.5), 0.0)
    second = s.what_if(share("s2", "cv-101", 0.5), 1.0)
    assert second.outcome == "start" and second.placement[0].gpus == (gpu_of(s, "s1")[0],)  # packs onto its GPU
    assert second.placement[0].share == 0.5 and second.placement[0].share_slot != gpu_of(s, "s1")[1]
