"""The core's one trial-and-rollback (``state.Trial``: ``Scheduler.trial`` / ``ClusterState.trial``), ``fork()``
and the read-only view: on a real scheduler, with every counter recounted from scratch (``recount``)."""

from __future__ import annotations

import pytest

from hive_scheduler import JobRequest, Scheduler, TaskGroup
from hive_scheduler.jobs import FREE, Job

from core_helpers import recount

# two VCs of 2 x 4-GPU nodes each: a gang of 2 x 4 binds two virtual nodes (and leaves idle cells to unbind)
CFG = {"nodes": 4, "gpus_per_node": 4, "gpu_type": "GPU", "levels": ["pair"],
       "vcs": {"a": {"cells": {"node": 2}}, "b": {"cells": {"node": 2}}}}


def req(jid: str, vc: str = "a", gpus: int = 4, count: int = 2) -> JobRequest:
    return JobRequest(id=jid, vc=vc, user="ann", tasks=(TaskGroup("w", count, gpus),))


def seen(s: Scheduler) -> tuple:
    """Everything a trial may touch: the cells, the VC counters, the flags, the bound cells' list, the jobs."""
    return (s.cluster_view(), s.vc_view(), s.free_gpu_count(), [j.to_dict() for j in s.jobs()],
            [(vc.dirty, dict(vc.free), dict(vc.held), dict(vc.unbound)) for vc in s.state.vcs.values()],
            s.state.opp_dirty, list(s.placement.pending_idle), list(s.job_table), s.next_seq)


@pytest.fixture
def core() -> Scheduler:
    s = Scheduler(CFG)
    assert [d.event for d in s.submit(req("r1", "b", gpus=2, count=1), 0.0)] == ["started"]
    return s


def test_a_trial_is_undone_whole_unless_committed(core):
    before = seen(core)
    j = Job(req("try"), core.next_seq)
    with core.trial(j) as txn:
        assert core.job_table["try"] is j  # placement looks its job up
        res = core.placement.place(j, FREE, txn)
        assert res is not None and len(txn) > 0 and core.free_gpu_count() == before[2]  # virtual GPUs held
        assert core.state.vcs["a"].free != before[4][0][1]
    assert seen(core) == before
    recount(core)


def test_a_savepoint_undoes_only_what_came_after_it(core):
    j = Job(req("try", count=1), core.next_seq)
    with core.trial(j) as txn:
        assert core.placement.place(j, FREE, txn) is not None
        held = dict(core.state.vcs["a"].held)
        mark = len(txn)
        k = Job(req("more", count=1), core.next_seq + 1)
        core.put_back(k)  # (a second job for placement to look up, inside the same trial)
        assert core.placement.place(k, FREE, txn) is not None
        txn.undo_to(mark)
        assert dict(core.state.vcs["a"].held) == held  # the first placement still holds its GPUs
    assert "more" in core.job_table  # only the trial's own job leaves with it
    core.finish("more", 1.0)
    recount(core)


def test_an_exception_inside_undoes_the_trial(core):
    before = seen(core)
    j = Job(req("try"), core.next_seq)
    with pytest.raises(RuntimeError):
        with core.trial(j) as txn:
            assert core.placement.place(j, FREE, txn) is not None
            raise RuntimeError("a bug half-way through a gang")
    assert seen(core) == before
    recount(core)


def test_a_committed_trial_keeps_its_changes_and_its_job(core):
    before = seen(core)
    j = Job(req("kept", count=1), core.next_seq)
    with core.trial(j) as txn:
        assert core.placement.place(j, FREE, txn) is not None
        txn.commit()
    assert core.job_table["kept"] is j
    assert sum(core.state.vcs["a"].held.values()) == 4
    assert seen(core) != before


def test_flags_false_leaves_the_flags_as_the_undo_left_them(core):
    for vc in core.state.vcs.values():
        vc.dirty = False
    core.state.opp_dirty = False
    j = Job(req("try", count=1), core.next_seq)
    core.put_back(j)
    with core.state.trial(flags=False) as txn:
        assert core.placement.place(j, FREE, txn) is not None
    assert core.state.vcs["a"].dirty  # giving the virtual GPUs back raised it: kept
    for vc in core.state.vcs.values():
        vc.dirty = False
    with core.state.trial() as txn:
        assert core.placement.place(j, FREE, txn) is not None
    assert not core.state.vcs["a"].dirty  # restored to how the trial found it


def test_fork_is_an_empty_twin_with_the_same_settings_and_limits():
    s = Scheduler(CFG, policy="priority", starvation_after=60.0, backfill=True, private_placement=True)
    s.set_user_limits("a", {"default": {"max_gpus": 4}}, 0.0)
    s.submit(req("r1", count=1), 0.0)
    twin = s.fork(trusted=True, backfill=False)
    assert (twin.policy, twin.starvation_after, twin.backfill, twin.private_placement) == ("priority", 60.0, False, True)
    assert dict(twin.limit_tables) == dict(s.limit_tables) and twin.limit_tables is not s.limit_tables
    assert not twin.job_table and twin.now == 0.0 and twin.free_gpu_count() == twin.gpu_count() == 16
    assert twin.submit(req("t1", count=1), 5.0)[0].event == "started"  # the twin's calls change only the twin
    assert list(s.job_table) == ["r1"] and s.free_gpu_count() == 12
    twin.clear_jobs()
    twin.rewind_clock(0.0)
    assert not twin.job_table and twin.free_gpu_count() == 16 and twin.now == 0.0
    recount(twin)


def test_the_view_is_read_only():
    s = Scheduler(CFG)
    s.submit(req("r1", count=1), 0.0)
    with pytest.raises(TypeError):
        s.job_table["x"] = s.job_table["r1"]  # type: ignore[index]
    with pytest.raises(TypeError):
        s.limit_tables["a"] = None  # type: ignore[index]
    with pytest.raises(AttributeError):
        s.now = 5.0  # type: ignore[misc]
    with pytest.raises(Exception, match="without jobs"):
        s.rewind_clock(0.0)
