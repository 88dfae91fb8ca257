"""The ``quota`` (YARN-CS style) and ``fifo`` baselines, driven through ``simulate`` by event scripts."""

from __future__ import annotations

import json

import pytest

from hive_scheduler.sim import simulate
from hive_scheduler.sim.events import parse_events
from hive_scheduler.sim.shape import cluster_shape


def two_nodes(vcs: dict[str, int] | None = None, gpus: int = 4) -> dict:
    """HiveD form: nodes n1, n2 of ``gpus`` GPUs; each VC guaranteed that many whole nodes."""
    vcs = vcs if vcs is not None else {"A": 1, "B": 1}
    return {
        "physicalCluster": {
            "cellTypes": {"G-NODE": {"childCellType": "G", "childCellNumber": gpus, "isNodeLevel": True}},
            "physicalCells": [{"cellType": "G-NODE", "cellAddress": "n1"}, {"cellType": "G-NODE", "cellAddress": "n2"}],
        },
        "virtualClusters": {vc: {"virtualCells": [{"cellType": "G-NODE", "cellNumber": n}]} for vc, n in vcs.items()},
    }


def submit(t, job, vc, gpus, count=1, priority=0, duration=None, **extra):
    d = {"t": t, "op": "submit", "job": job, "vc": vc, "priority": priority,
         "tasks": [{"name": "w", "count": count, "gpus": gpus}], **extra}
    if duration is not None:
        d["duration"] = duration
    return json.dumps(d)


def run(policy, lines, cluster=None, grace=0.0):
    return simulate(cluster or two_nodes(), parse_events(lines), policy, grace=grace)


def by_job(result):
    out: dict[str, list[dict]] = {}
    for d in result.decisions:
        out.setdefault(d["job"], []).append(d)
    return out


def test_fifo_head_of_line_blocks_and_quota_does_not():
    lines = [
        submit(0, "a", "A", 4, duration=100),
        submit(1, "big", "B", 4, count=2, duration=10),  # needs both nodes
        submit(2, "small", "B", 1, duration=10),
    ]
    fifo = by_job(run("fifo", lines))
    assert fifo["small"][0] == {"t": 2, "job": "small", "event": "queued", "reason": "1 job(s) ahead in the global FIFO queue"}
    assert fifo["big"][1]["t"] == 100 and fifo["big"][1]["event"] == "started"
    assert [p["node"] for p in fifo["big"][1]["placement"]] == ["n1", "n2"]
    assert fifo["small"][1]["t"] == 110  # after big, strictly in order

    quota = by_job(run("quota", lines, two_nodes({"A": 1, "B": 1})))
    # big needs 8 GPUs but B's quota is 4: refused; small starts at once on n2
    assert quota["big"][0]["event"] == "rejected" and "quota of 4" in quota["big"][0]["error"]
    assert quota["small"][0] == {
        "t": 2, "job": "small", "event": "started", "placement": [{"task": "w-0", "node": "n2", "gpus": [0]}],
        "opportunistic": False,
    }


def test_quota_caps_a_vc_at_its_gpu_count():
    result = run("quota", [submit(0, "a1", "A", 3, duration=50), submit(1, "a2", "A", 2, duration=50)])
    a2 = by_job(result)["a2"]
    assert a2[0]["event"] == "queued" and a2[0]["reason"] == "VC A is using 3/4 quota GPUs; the job needs 2"
    assert a2[1]["event"] == "started" and a2[1]["t"] == 50
    # alone on its one node, A's a2 would have waited for a1 just as long: no anomaly
    assert result.metrics.sharing_anomaly_s == 0 and result.metrics.sharing_anomaly_jobs == 0


def test_quota_shows_the_sharing_anomaly():
    lines = [
        submit(0, "a1", "A", 2, duration=100),  # n1: 0,1
        submit(1, "b1", "B", 3, duration=100),  # n1 has 2 free -> n2: 0,1,2
        submit(2, "b2", "B", 1, duration=100),  # n1: 2 (first fit)
        submit(3, "a2", "A", 2, duration=10),  # A uses 2/4 but no node has 2 free GPUs
    ]
    result = run("quota", lines)
    a2 = by_job(result)["a2"]
    assert a2[0]["event"] == "queued"
    assert "VC A has 2 unused quota GPUs but no first-fit placement" in a2[0]["reason"]
    assert a2[1]["t"] == 100
    assert result.metrics.sharing_anomaly_s == pytest.approx(97)
    assert result.metrics.sharing_anomaly_jobs == 1


def test_quota_preempts_opportunistic_jobs_after_the_grace_period():
    lines = [
        submit(0, "a", "A", 2, duration=100),
        submit(1, "opp", "B", 4, priority=-1, duration=50),  # n2, outside the quota accounting
        submit(2, "g", "B", 4, duration=10),  # B's quota is free, but no node has 4 free GPUs
    ]
    result = run("quota", lines, grace=5)
    d = by_job(result)
    assert d["opp"][0]["opportunistic"] is True and d["opp"][0]["placement"][0]["node"] == "n2"
    assert {"t": 2, "job": "g", "event": "preempting", "victims": ["opp"]} in d["g"]
    assert d["opp"][1] == {"t": 7, "job": "opp", "event": "preempted", "by": "g"}
    assert d["g"][-2]["event"] == "started" and d["g"][-2]["t"] == 7
    assert d["g"][-2]["placement"] == [{"task": "w-0", "node": "n2", "gpus": [0, 1, 2, 3]}]
    assert d["opp"][2]["event"] == "queued" and d["opp"][2]["t"] == 7  # the log says it is queued again
    # requeued with its remaining run time: 50 - 6 s already run, restarted when g finished at 17
    assert d["opp"][3]["event"] == "started" and d["opp"][3]["t"] == 17
    assert d["opp"][4] == {"t": 17 + 44, "job": "opp", "event": "finished"}
    assert result.metrics.preemptions == 1


def test_finish_withdraws_a_queued_job():
    result = run("fifo", [submit(0, "a", "A", 4, count=2), submit(1, "b", "A", 1, duration=5),
                          '{"t":3,"op":"finish","job":"b"}', '{"t":9,"op":"finish","job":"a"}'])
    assert [(d["t"], d["job"], d["event"]) for d in result.decisions] == [
        (0, "a", "started"), (1, "b", "queued"), (3, "b", "finished"), (9, "a", "finished"),
    ]
    assert result.metrics.finished == 1


def test_bad_hardware_takes_no_new_work():
    lines = [
        '{"t":0,"op":"node_down","node":"n1"}',
        '{"t":0,"op":"gpu_down","node":"n2","gpu":0}',
        submit(1, "a", "A", 2, duration=10),
        '{"t":2,"op":"node_up","node":"n1"}',
        submit(3, "b", "A", 2, duration=10),
    ]
    for policy in ("quota", "fifo"):
        d = by_job(run(policy, lines))
        assert d["a"][0]["placement"] == [{"task": "w-0", "node": "n2", "gpus": [1, 2]}]
        assert d["b"][0]["placement"] == [{"task": "w-0", "node": "n1", "gpus": [0, 1]}]


@pytest.mark.parametrize(
    "line, error",
    [
        (submit(0, "x", "nope", 1), "unknown virtual cluster 'nope'"),
        (submit(0, "x", "A", 5), "task group 'w' asks for 5 GPUs per task; no node has more than 4"),
        (submit(0, "x", "A", 1, priority=1001), "priority must be -1 (opportunistic) or 0..1000"),
        (submit(0, "x", "A", 1, pinned_cell="p1"), "pinned cell 'p1' is not in VC 'A'"),
    ],
)
def test_quota_rejects_bad_requests_and_changes_nothing(line, error):
    result = run("quota", [line, submit(1, "ok", "A", 4, duration=1)])
    assert result.decisions[0]["event"] == "rejected" and error in result.decisions[0]["error"]
    assert result.decisions[1]["event"] == "started"
    assert result.metrics.rejected == 1


@pytest.mark.parametrize("policy", ["quota", "fifo"])
def test_reconfigure_keeps_running_jobs_and_applies_the_new_quotas(tmp_path, policy):
    import yaml

    (tmp_path / "new.yaml").write_text(yaml.safe_dump(two_nodes({"A": 2})))
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join([
        submit(0, "a", "A", 4),
        submit(0, "b", "B", 4),
        '{"t":1,"op":"reconfigure","cluster":"new.yaml"}',
        submit(2, "a2", "A", 4, duration=10),
        '{"t":3,"op":"finish","job":"b"}',
    ]) + "\n")
    result = simulate(cluster_shape(two_nodes()), str(events), policy)
    assert [(d["t"], d["job"], d["event"]) for d in result.decisions] == [
        (0, "a", "started"), (0, "b", "started"), (2, "a2", "queued"),
        (3, "b", "finished"), (3, "a2", "started"), (13, "a2", "finished"),
    ]
    assert result.decisions[4]["placement"][0]["node"] == "n2"


def test_unknown_hardware_in_the_script_is_an_error_with_its_line():
    from hive_scheduler.sim import EventError

    with pytest.raises(EventError, match=r"line 2: gpu_down: node 'n1' has GPUs 0\.\.3, got gpu 9"):
        run("fifo", [submit(0, "a", "A", 1), '{"t":1,"op":"gpu_down","node":"n1","gpu":9}'])
    with pytest.raises(EventError, match=r"line 1: node_down: unknown node 'n7'"):
        run("quota", ['{"t":1,"op":"node_down","node":"n7"}'])


def test_quota_calls_off_the_preemption_when_the_preemptor_is_withdrawn():
    lines = [
        submit(0, "a", "A", 2, duration=100),
        submit(1, "opp", "B", 4, priority=-1, duration=50),
        submit(2, "g", "B", 4, duration=10),
        '{"t":4,"op":"finish","job":"g"}',  # withdrawn while opp is in its grace period
    ]
    d = by_job(run("quota", lines, grace=5))
    assert {"t": 2, "job": "g", "event": "preempting", "victims": ["opp"]} in d["g"]
    assert d["g"][-1] == {"t": 4, "job": "g", "event": "finished"}
    assert [(x["t"], x["event"]) for x in d["opp"]] == [(1, "started"), (51, "finished")]  # never stopped
