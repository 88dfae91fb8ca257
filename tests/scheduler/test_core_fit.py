"""``Scheduler.check_can_ever_fit``: a gang that could not be placed even on an empty cluster (or in its
VC's guaranteed cells, all free) is refused with a RequestError naming ``tasks``; the query changes
nothing (issue 11, defect 5)."""

import pytest

from hive_scheduler import JobRequest, RequestError, Scheduler, TaskGroup

CLUSTER = {"nodes": 2, "gpus_per_node": 4, "gpu_type": "T4", "vcs": {"a": 6, "b": 2}}


def job(*groups, priority=0, vc="a", id="j1"):
    return JobRequest(id=id, vc=vc, user="u", tasks=tuple(TaskGroup(f"g{i}", *g) for i, g in enumerate(groups)),
                      priority=priority, submit_time=0.0)


@pytest.mark.parametrize("request_, words", [
    (job((3, 3), priority=-1), "empty cluster (8 GPUs)"),      # 9 GPUs on 8
    (job((3, 4), priority=-1), "empty cluster"),               # three whole nodes on two
    (job((2, 3)), "in VC a"),                 # 6 <= a's 6 GPUs, but a holds one node (4) + two single GPUs
    (job((1, 4), (1, 2)), "in VC a"),         # 6 again; a 2-GPU task needs a node cell (no pair level), a has one
    (job((3, 1, None, 20, 1), priority=-1), "empty cluster"),       # CPU: 20 of a node's 32 CPUs, three tasks, two nodes
])
def test_gangs_that_never_fit_are_refused(request_, words):
    s = Scheduler(CLUSTER)
    with pytest.raises(RequestError) as info:
        s.check_can_ever_fit(request_)
    assert info.value.field == "tasks" and words in str(info.value)
    assert s.free_gpu_count() == 8 and s.submit(job((1, 1)), 0.0)  # nothing held; still usable


@pytest.mark.parametrize("request_", [
    job((2, 4), priority=-1), job((1, 4), (2, 1)), job((4, 2), priority=-1), job((2, 1), vc="b"), job((2, 1, None, 16, 1)),
])
def test_gangs_that_fit_an_empty_cluster_pass_even_when_it_is_full(request_):
    s = Scheduler(CLUSTER)
    s.submit(job((2, 4), priority=-1, id="hog"), 0.0)  # every GPU busy now
    assert s.free_gpu_count() == 0
    s.check_can_ever_fit(request_)
    s.check_can_ever_fit(request_)  # remembered per shape: same answer
    assert s.free_gpu_count() == 0 and [v["queue_length"] for v in s.vc_view().values()] == [0, 0]
