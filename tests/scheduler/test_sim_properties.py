"""Property-based checks of whole replays (hypothesis): random event scripts, every policy, invariants on the
decision stream after every decision."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hive_scheduler.sim import POLICIES, simulate
from hive_scheduler.sim.events import parse_events
from hive_scheduler.sim.shape import cluster_shape

NODES, GPUS = 4, 4
VCS = {"A": 2, "B": 1, "C": 1}  # whole nodes


def config() -> dict:
    return {
        "physicalCluster": {
            "cellTypes": {
                "G-PAIR": {"childCellType": "G", "childCellNumber": 2},
                "G-NODE": {"childCellType": "G-PAIR", "childCellNumber": 2, "isNodeLevel": True},
                "G-RACK": {"childCellType": "G-NODE", "childCellNumber": NODES},
            },
            "physicalCells": [{"cellType": "G-RACK", "cellChildren": [{"cellAddress": f"n{i}"} for i in range(NODES)]}],
        },
        "virtualClusters": {v: {"virtualCells": [{"cellType": "G-RACK.G-NODE", "cellNumber": n}]} for v, n in VCS.items()},
    }


job_st = st.fixed_dictionaries({
    "vc": st.sampled_from(sorted(VCS)),
    "shape": st.sampled_from([(1, 1), (1, 2), (1, 4), (2, 2), (2, 4), (3, 1)]),
    "priority": st.sampled_from([-1, 0, 0, 5, 50]),
    "duration": st.one_of(st.none(), st.integers(1, 200)),
    "lazy": st.booleans(),
})
step_st = st.one_of(
    st.tuples(st.just("submit"), job_st),
    st.tuples(st.just("finish"), st.integers(0, 40)),
    st.tuples(st.sampled_from(["node_down", "node_up"]), st.integers(0, NODES - 1)),
    st.tuples(st.sampled_from(["gpu_down", "gpu_up"]), st.tuples(st.integers(0, NODES - 1), st.integers(0, GPUS - 1))),
)


def script(steps, gaps) -> list[str]:
    lines, t, n = [], 0, 0
    for (op, arg), gap in zip(steps, gaps):
        t += gap
        if op == "submit":
            count, gpus = arg["shape"]
            ev = {"t": t, "op": "submit", "job": f"j{n}", "vc": arg["vc"], "priority": arg["priority"],
                  "tasks": [{"name": "w", "count": count, "gpus": gpus}], "lazy_preemption": arg["lazy"]}
            if arg["duration"] is not None:
                ev["duration"] = arg["duration"]
            n += 1
        elif op == "finish":
            if n == 0:
                continue
            ev = {"t": t, "op": "finish", "job": f"j{arg % n}"}
        else:  # hardware changes at half seconds: never at the same instant as a job event or decision
            t += 1
            if op in ("node_down", "node_up"):
                ev = {"t": t - 0.5, "op": op, "node": f"n{arg}"}
            else:
                ev = {"t": t - 0.5, "op": op, "node": f"n{arg[0]}", "gpu": arg[1]}
        lines.append(json.dumps(ev))
    return lines


def check(policy: str, lines: list[str], decisions: list[dict]) -> None:
    jobs = {}
    for line in lines:
        ev = json.loads(line)
        if ev["op"] == "submit":
            jobs[ev["job"]] = ev
    shape = cluster_shape(config())
    in_use: dict[tuple[str, int], str] = {}
    running: dict[str, dict] = {}
    opportunistic: dict[str, bool] = {}
    named_victims: dict[str, str] = {}
    # bad-hardware intervals [t_down, t_up): no start inside one may use that hardware
    open_since: dict[tuple, float] = {}
    intervals: list[tuple[tuple, float, float]] = []
    for line in lines:
        h = json.loads(line)
        if h["op"] in ("submit", "finish"):
            continue
        key = (h["node"],) if h["op"].startswith("node") else (h["node"], h["gpu"])
        if h["op"].endswith("_down"):
            open_since.setdefault(key, h["t"])
        elif key in open_since:
            intervals.append((key, open_since.pop(key), h["t"]))
    intervals += [(key, t, float("inf")) for key, t in open_since.items()]

    def bad(node: str, gpu: int, t: float) -> bool:
        return any(key in ((node,), (node, gpu)) and lo <= t < hi for key, lo, hi in intervals)

    last_t = 0
    for d in decisions:
        assert d["t"] >= last_t
        last_t = d["t"]
        job, event = d["job"], d["event"]
        req = jobs[job]
        if event == "started":
            assert job not in running
            group = req["tasks"][0]
            # gang: every task, each with exactly its GPUs, on one node per task
            assert sorted(p["task"] for p in d["placement"]) == [f"w-{i}" for i in range(group["count"])]
            for p in d["placement"]:
                assert len(p["gpus"]) == group["gpus"] == len(set(p["gpus"]))
                for g in p["gpus"]:
                    assert not bad(p["node"], g, d["t"]), f"bad GPU {p['node']}/{g} given to {job}"
                    assert (p["node"], g) not in in_use, f"GPU {p['node']}/{g} used twice"
                    in_use[(p["node"], g)] = job
            running[job] = d
            opportunistic[job] = d["opportunistic"]
            if policy == "quota":  # a VC's guaranteed jobs never exceed its quota
                vc = req["vc"]
                used = sum(
                    len(p["gpus"]) for j, s in running.items()
                    if jobs[j]["vc"] == vc and not opportunistic[j] for p in s["placement"]
                )
                assert used <= shape.vc_total(vc)
        elif event == "demoted":
            opportunistic[job] = True
        elif event == "preempting":
            assert policy != "fifo"
            assert req["priority"] >= 0, "opportunistic jobs never cause preemption"
            for v in d["victims"]:
                assert v in running
                # never another VC's guaranteed job; inside the VC only lower priorities
                assert opportunistic[v] or (jobs[v]["vc"] == req["vc"] and jobs[v]["priority"] < req["priority"])
                named_victims[v] = job
        elif event in ("finished", "preempted"):
            if event == "preempted":  # a named victim, or an overflowed job moving into its VC's cells
                assert job in named_victims or (d.get("by") == job and opportunistic[job])
            if job in running:
                del running[job]
                for key in [k for k, j in in_use.items() if j == job]:
                    del in_use[key]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(step_st, min_size=1, max_size=40),
    gaps=st.lists(st.sampled_from([0, 0, 1, 3, 10, 60]), min_size=40, max_size=40),
    grace=st.sampled_from([0, 5]),
)
def test_replays_keep_the_invariants_and_are_deterministic(steps, gaps, grace):
    lines = script(steps, gaps)
    for policy in POLICIES:
        first = simulate(config(), parse_events(lines), policy, grace=grace, anomaly=False)
        try:
            check(policy, lines, first.decisions)
        except AssertionError as exc:  # say which policy and script, so a failure can be replayed by hand
            decisions = "\n".join(json.dumps(d) for d in first.decisions)
            raise AssertionError(f"{policy} (grace {grace}): {exc}\nscript:\n" + "\n".join(lines)
                                 + f"\ndecisions:\n{decisions}") from None
        again = simulate(config(), parse_events(lines), policy, grace=grace, anomaly=False)
        assert again.decisions == first.decisions


guaranteed_st = st.tuples(
    st.sampled_from(sorted(VCS)),
    st.sampled_from([(1, 1), (1, 2), (1, 4), (2, 2), (2, 4), (3, 1)]),
    st.sampled_from([0, 0, 5, 50]),
    st.integers(1, 200),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    jobs=st.lists(guaranteed_st, min_size=1, max_size=40),
    gaps=st.lists(st.sampled_from([0, 0, 1, 3, 10, 60]), min_size=40, max_size=40),
    withdraw=st.sets(st.integers(0, 39), max_size=5),
)
def test_hived_queues_every_job_exactly_as_its_private_cluster(jobs, gaps, withdraw):
    """The core without the overflow lever, no opportunistic work, healthy hardware, immediate preemption (no lazy preemption, no grace): a VC
    sees only its own cells under hived, so every job waits exactly as long as on the VC's private cluster
    (HiveD's guarantee: sharing anomaly 0). Lazy preemption lets a demoted job run on in other VCs' idle
    cells, which changes its VC's later history, so waits may then differ either way."""
    lines, t = [], 0
    for i, ((vc, (count, gpus), priority, duration), gap) in enumerate(zip(jobs, gaps)):
        t += gap
        lines.append(json.dumps({"t": t, "op": "submit", "job": f"j{i}", "vc": vc, "priority": priority,
                                 "tasks": [{"name": "w", "count": count, "gpus": gpus}], "duration": duration,
                                 "lazy_preemption": False}))
        if i in withdraw:
            lines.append(json.dumps({"t": t + 2, "op": "finish", "job": f"j{i}"}))
    lines.sort(key=lambda line: json.loads(line)["t"])
    hived = simulate(config(), parse_events(lines), "hived", overflow=False)
    assert hived.metrics.waits == hived.private.metrics.waits, "\n".join(lines)
    assert hived.metrics.sharing_anomaly_s == 0 and hived.metrics.sharing_anomaly_jobs == 0
