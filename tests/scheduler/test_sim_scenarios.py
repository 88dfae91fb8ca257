"""Event-script scenarios replayed by ``simulate`` on the core scheduler (``hived``), and hived vs the baselines."""

from __future__ import annotations

import json
import random

import pytest

from hive_scheduler.sim import POLICIES, load_events, simulate
from hive_scheduler.sim.events import parse_events


def cluster(nodes: int = 2, gpus: int = 4, vcs: dict[str, int] | None = None) -> dict:
    """HiveD form: ``nodes`` nodes n1.. of ``gpus`` GPUs in one rack; each VC guaranteed whole nodes."""
    vcs = vcs if vcs is not None else {"A": 1, "B": 1}
    return {
        "physicalCluster": {
            "cellTypes": {
                "G-NODE": {"childCellType": "G", "childCellNumber": gpus, "isNodeLevel": True},
                "G-RACK": {"childCellType": "G-NODE", "childCellNumber": nodes},
            },
            "physicalCells": [
                {"cellType": "G-RACK", "cellChildren": [{"cellAddress": f"n{i + 1}"} for i in range(nodes)]}
            ],
        },
        "virtualClusters": {
            vc: {"virtualCells": [{"cellType": "G-RACK.G-NODE", "cellNumber": n}]} for vc, n in vcs.items()
        },
    }


def submit(t, job, vc, gpus, count=1, priority=0, duration=None, **extra):
    d = {"t": t, "op": "submit", "job": job, "vc": vc, "priority": priority,
         "tasks": [{"name": "w", "count": count, "gpus": gpus}], **extra}
    if duration is not None:
        d["duration"] = duration
    return json.dumps(d)


def replay(lines, policy="hived", grace=0.0, config=None, overflow=False):
    """These scenarios are the core's semantics: hived without the overflow lever unless asked."""
    return simulate(config or cluster(), parse_events(lines), policy, grace=grace, overflow=overflow)


def of(result, job):
    return [d for d in result.decisions if d["job"] == job]


def test_gang_starts_all_tasks_together():
    r = replay([submit(0, "g", "A", 4, count=2, duration=60)], config=cluster(vcs={"A": 2}))
    (start, finish) = of(r, "g")
    assert start["event"] == "started" and start["t"] == 0 and start["opportunistic"] is False
    assert sorted(p["task"] for p in start["placement"]) == ["w-0", "w-1"]
    assert {p["node"] for p in start["placement"]} == {"n1", "n2"}
    assert all(p["gpus"] == [0, 1, 2, 3] for p in start["placement"])
    assert finish == {"t": 60, "job": "g", "event": "finished"}


def test_a_gang_that_does_not_fit_queues_with_a_reason_and_does_not_block():
    r = replay([
        submit(0, "a", "A", 2, duration=100),
        submit(1, "big", "A", 4, duration=10),  # A has 2 of its 4 GPUs left
        submit(2, "small", "A", 1, duration=10),
    ])
    big = of(r, "big")
    assert big[0]["event"] == "queued" and isinstance(big[0]["reason"], str) and big[0]["reason"]
    assert big[1]["event"] == "started" and big[1]["t"] == 100
    assert of(r, "small")[0]["event"] == "started" and of(r, "small")[0]["t"] == 2


def test_preemption_waits_for_the_grace_period_and_requeues_the_rest_of_the_work():
    r = replay([
        submit(0, "low", "A", 4, priority=1, duration=100, lazy_preemption=False),
        submit(10, "high", "A", 4, priority=100, duration=20),
    ], grace=30)
    assert {"t": 10, "job": "high", "event": "preempting", "victims": ["low"]} in r.decisions
    assert {"t": 40, "job": "low", "event": "preempted", "by": "high"} in r.decisions
    high_start = next(d for d in of(r, "high") if d["event"] == "started")
    assert high_start["t"] == 40
    low = [d for d in of(r, "low") if d["event"] in ("started", "finished")]
    # low ran 0..40, so 60 s are left when it starts again after high (40..60)
    assert [(d["t"], d["event"]) for d in low] == [(0, "started"), (60, "started"), (120, "finished")]
    assert r.metrics.preemptions == 1


def test_opportunistic_jobs_borrow_idle_cells_and_are_preempted_for_the_owner():
    r = replay([
        submit(0, "opp", "B", 4, count=2, priority=-1, duration=1000),
        submit(5, "owner", "A", 4, duration=10),
    ], grace=0)
    opp = of(r, "opp")
    assert opp[0]["event"] == "started" and opp[0]["opportunistic"] is True
    assert any(d["event"] == "preempted" and d.get("by") == "owner" for d in opp)
    owner = next(d for d in of(r, "owner") if d["event"] == "started")
    assert owner["t"] == 5 and owner["opportunistic"] is False


def test_node_down_takes_no_new_work_and_node_up_gives_it_back():
    r = replay([
        '{"t":0,"op":"node_down","node":"n1"}',
        submit(1, "a", "A", 4, duration=10),
        submit(2, "b", "B", 4, duration=10),
        '{"t":50,"op":"node_up","node":"n1"}',
    ])
    starts = {d["job"]: d for d in r.decisions if d["event"] == "started"}
    first = min(starts.values(), key=lambda d: d["t"])
    assert first["t"] in (1, 2) and first["placement"][0]["node"] == "n2"
    waiting = [d for d in r.decisions if d["event"] == "queued"]
    assert waiting and waiting[0]["reason"]
    later = max(starts.values(), key=lambda d: d["t"])
    assert later["t"] >= 11 and len(starts) == 2
    assert all(p["node"] in ("n1", "n2") for d in starts.values() for p in d["placement"])


def test_gpu_down_is_avoided():
    r = replay(['{"t":0,"op":"gpu_down","node":"n1","gpu":0}', submit(1, "a", "A", 1, duration=5),
                submit(1, "b", "B", 1, duration=5)])
    starts = [d for d in r.decisions if d["event"] == "started"]
    assert {d["job"] for d in starts} == {"a", "b"}
    assert all((p["node"], g) != ("n1", 0) for d in starts for p in d["placement"] for g in p["gpus"])
    # HiveD: a VC's node cell may bind to the partly bad node; only its bad GPU is doomed, so both start at once
    assert [d["t"] for d in starts] == [1, 1]
    assert not [d for d in r.decisions if d["event"] == "queued"]


def test_finish_withdraws_a_queued_job():
    r = replay([
        submit(0, "a", "A", 4, duration=100),
        submit(1, "b", "A", 2, duration=100),
        '{"t":30,"op":"finish","job":"b"}',
    ])
    assert [(d["t"], d["event"]) for d in of(r, "b")] == [(1, "queued"), (30, "finished")]
    assert r.metrics.finished == 1 and r.metrics.jobs == 2


def test_bad_requests_are_rejected_decisions():
    r = replay([submit(0, "x", "nope", 1), submit(1, "y", "A", 1, priority=5000), submit(2, "ok", "A", 1, duration=1)])
    assert [d["event"] for d in r.decisions[:2]] == ["rejected", "rejected"]
    assert all(d["error"] for d in r.decisions[:2])
    assert of(r, "ok")[0]["event"] == "started"


# the HiveD paper's sharing anomaly: A alone on its own node would start a2 at once (2 of its 4 GPUs are
# free); quota scatters A's and B's jobs over both nodes and a2 waits for a1; hived keeps A's node A's
ANOMALY = [
    submit(0, "a1", "A", 2, duration=100),
    submit(1, "b1", "B", 3, duration=100),
    submit(2, "b2", "B", 1, duration=100),
    submit(3, "a2", "A", 2, duration=10),
]


def test_quota_shows_the_sharing_anomaly_and_hived_does_not():
    hived = replay(ANOMALY, "hived")
    quota = replay(ANOMALY, "quota")
    assert of(hived, "a2")[0]["event"] == "started" and of(hived, "a2")[0]["t"] == 3
    assert hived.metrics.sharing_anomaly_s == 0
    assert of(quota, "a2")[0]["event"] == "queued"
    assert quota.metrics.sharing_anomaly_s == pytest.approx(97) and quota.metrics.sharing_anomaly_jobs == 1
    assert quota.metrics.avg_jct_s > hived.metrics.avg_jct_s
    private = hived.private
    assert private.metrics.waits == hived.metrics.waits == {"a1": 0, "b1": 0, "b2": 0, "a2": 0}
    assert quota.metrics.by_vc["A"]["avg_queue_s"] == pytest.approx(97 / 2)
    assert private.metrics.by_vc["A"]["avg_queue_s"] == 0 and quota.metrics.by_vc["B"]["sharing_anomaly_s"] == 0


def _random_script(seed: int, n: int = 120) -> list[str]:
    rng = random.Random(seed)
    lines, t = [], 0
    for i in range(n):
        t += rng.choice([0, 0, 1, 5, 20])
        vc = rng.choice(["A", "B", "C"])
        gpus, count = rng.choice([(1, 1), (2, 1), (4, 1), (8, 1), (8, 2)])
        prio = rng.choice([-1, 0, 0, 10, 100])
        lines.append(submit(t, f"j{i}", vc, gpus, count=count, priority=prio, duration=rng.randint(5, 300),
                            lazy_preemption=rng.random() < 0.5))
        if rng.random() < 0.05:
            lines.append(json.dumps({"t": t, "op": "gpu_down", "node": f"n{rng.randint(1, 8)}", "gpu": rng.randint(0, 7)}))
    return lines


@pytest.mark.parametrize("policy", POLICIES)
def test_same_input_gives_an_identical_decisions_file(tmp_path, policy):
    config = cluster(nodes=8, gpus=8, vcs={"A": 4, "B": 2, "C": 2})
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join(_random_script(11)) + "\n")
    outs = []
    for i in range(2):
        out = tmp_path / f"{policy}-{i}.jsonl"
        result = simulate(config, load_events(events), policy, grace=7, out=out)
        outs.append(out.read_bytes())
        assert result.metrics.jobs == 120
    assert outs[0] == outs[1] and outs[0].count(b"\n") > 120
    lines = [json.loads(line) for line in outs[0].splitlines()]
    assert [d["t"] for d in lines] == sorted(d["t"] for d in lines)
    # no GPU is ever used twice at once
    in_use: dict[tuple[str, int], str] = {}
    for d in lines:
        if d["event"] == "started":
            for p in d["placement"]:
                for g in p["gpus"]:
                    assert (p["node"], g) not in in_use, d
                    in_use[(p["node"], g)] = d["job"]
        elif d["event"] in ("finished", "preempted"):
            for key in [k for k, j in in_use.items() if j == d["job"]]:
                del in_use[key]


def test_lazy_preemption_demotes_the_victim_and_lets_it_run_on():
    r = replay([
        submit(0, "low", "A", 4, priority=1, duration=100),  # lazy_preemption defaults to true
        submit(10, "high", "A", 4, priority=100, duration=20),
    ], grace=5)
    low = of(r, "low")
    assert [d["event"] for d in low] == ["started", "demoted", "finished"]
    assert low[1]["t"] == 10 and low[2]["t"] == 100  # never stopped: its whole run in one go
    assert of(r, "high")[0]["event"] == "started" and of(r, "high")[0]["t"] == 10
    assert r.metrics.preemptions == 0


def test_a_preemptor_does_not_start_on_reserved_cells_whose_node_went_down():
    config = cluster(nodes=4, gpus=4, vcs={"A": 2, "B": 1, "C": 1})
    jobs = [
        submit(0, "o1", "A", 1, priority=-1),
        submit(0, "o2", "A", 1, priority=-1),
        submit(0, "low", "A", 1, priority=0, lazy_preemption=False),
        submit(0, "high", "A", 4, count=2, priority=5, lazy_preemption=False),
    ]
    before = replay(jobs, grace=5, config=config)
    assert {"t": 0, "job": "high", "event": "preempting", "victims": ["low"]} in before.decisions
    node = of(before, "low")[0]["placement"][0]["node"]
    after = replay(jobs + [json.dumps({"t": 0.5, "op": "node_down", "node": node})], grace=5, config=config)
    start = next((d for d in of(after, "high") if d["event"] == "started"), None)
    assert start is None or node not in {p["node"] for p in start["placement"]}


def test_reconfigure_demotes_what_lost_its_guarantee_and_a_victim_may_finish_within_its_grace(tmp_path):
    import yaml

    (tmp_path / "new.yaml").write_text(yaml.safe_dump(cluster(vcs={"A": 2})))
    events = tmp_path / "events.jsonl"
    events.write_text("\n".join([
        submit(0, "a", "A", 4),
        submit(0, "b", "B", 4),
        '{"t":1,"op":"reconfigure","cluster":"new.yaml"}',  # VC B is gone, A owns both nodes
        submit(2, "a2", "A", 4, duration=10),
        '{"t":3,"op":"finish","job":"b"}',  # before its grace period ends at t=4
    ]) + "\n")
    r = simulate(cluster(), str(events), "hived", grace=2, overflow=False)
    assert [(d["t"], d["job"], d["event"]) for d in r.decisions] == [
        (0, "a", "started"), (0, "b", "started"), (1, "b", "demoted"), (2, "a2", "preempting"),
        (3, "b", "finished"), (3, "a2", "started"), (13, "a2", "finished"),
    ]
    assert r.decisions[3]["victims"] == ["b"]
    assert r.metrics.preemptions == 0  # b was never stopped by the preemption


def test_order_inside_a_vc_is_the_cores_policy():
    lines = [
        submit(0, "run", "A", 4, priority=100, duration=10),  # nobody below may preempt it
        submit(1, "first", "A", 4, priority=0, duration=10),
        submit(2, "urgent", "A", 4, priority=50, duration=10),
    ]
    config = cluster(nodes=2, vcs={"A": 1, "B": 1})
    for order, expected in (("fifo", "first"), ("priority", "urgent")):
        r = simulate(config, parse_events(lines), "hived", order=order, overflow=False)
        starts_at_10 = [d["job"] for d in r.decisions if d["event"] == "started" and d["t"] == 10]
        assert starts_at_10[:1] == [expected], (order, r.decisions)
    with pytest.raises(ValueError, match="unknown order 'lottery'"):
        simulate(config, parse_events(lines), "hived", order="lottery")
