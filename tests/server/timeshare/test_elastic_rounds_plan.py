"""elastic_rounds.plan_resizes: the grow-shrink rules on their own (the live test is
test_rounds_elastic.py)."""

from __future__ import annotations

from types import SimpleNamespace

from hive_lab_server.timeshare.elastic_rounds import plan_resizes
from hive_lab_server.wire.launch_spec import LaunchSpec


def job(job_id, gpus, lo=None, hi=None):
    return SimpleNamespace(id=job_id, spec=LaunchSpec.of({"min_gpus": lo, "max_gpus": hi,
                                                          "tasks": [{"gpus": gpus, "count": 1}]}))


def plan(jobs, choice, cooling=()):
    return plan_resizes("lab", jobs, choice, {"K80": 4, "V100": 2}, lambda j: choice[j.id],
                        runs=lambda j: True, cooling=lambda j: j in cooling)


def test_grows_into_idle_gpus_of_its_type_up_to_max():
    r = plan([job("e", 1, 1, 2), job("f", 1, 1, 8)], {"e": "K80", "f": "K80"})
    assert [(x.job_id, x.sizes) for x in r] == [("e", (2,)), ("f", (2,))]
    assert r[0].why.format(gpus=2) == "grown 1 -> 2 GPUs: 2 idle GPUs of K80 in VC lab"


def test_shrinks_only_for_a_waiting_job_it_lets_in_and_never_grows_then():
    jobs = [job("e", 4, 1, 4), job("w", 2)]
    r = plan(jobs, {"e": "K80", "w": None})
    assert [(x.job_id, x.sizes, x.grow) for x in r] == [("e", (2, 1), False)]
    assert r[0].why.format(gpus=2) == "shrunk 4 -> 2 GPUs: w waits for 2 GPUs of K80 in VC lab"
    assert plan([job("e", 4, 3, 4), job("w", 2)], {"e": "K80", "w": None}) == []  # min 3: cannot let w in
    assert plan([job("e", 1, 1, 4), job("w", 2)], {"e": "K80", "w": None}) == []  # waiting: no grow


def test_a_job_resized_last_round_is_left_alone():
    assert plan([job("e", 1, 1, 2)], {"e": "K80"}, cooling={"e"}) == []
    assert plan([job("e", 1)], {"e": "K80"}) == []  # not elastic
