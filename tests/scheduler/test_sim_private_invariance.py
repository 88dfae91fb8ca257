"""The private baseline does not depend on how the cluster is written (issue 41).

HiveD's sharing anomaly compares each VC with a cluster made of exactly its own cells. ``private`` derives
that cluster from the shared config (``sim/private.py``); a user can also write it by hand (the VC alone on
a short-form config) and replay its jobs there with the defaults (``hived``). Both are valid private
baselines, so every job must start at the same instant on both, and no guaranteed job may start later
under the defaults in the shared cluster than on either.

Before issue 41 the written replay disagreed on heavy loads: with overflow on (the default) a job of the
only VC got an opportunistic shadow, which could only run in the VC's own idle GPUs, ahead of the VC's own
queue (e.g. past a starving 8-GPU job that held back the 4-GPU jobs behind it); now a job whose VC owns
every GPU it may use gets no shadow (``OverflowScheduler._may_overflow``)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hive_scheduler import load_cluster_config
from hive_scheduler.shortform import expand_short_form
from hive_scheduler.sim import simulate
from hive_scheduler.sim.events import parse_events
from test_sim_overflow_guarantee import _philly_like


def starts(result) -> dict[str, float]:
    """Each job's first start (its queueing is measured to it)."""
    out: dict[str, float] = {}
    for d in result.decisions:
        if d["event"] == "started":
            out.setdefault(d["job"], d["t"])
    return out


def written(vc: str, gpus: int, *, nodes: int, gpus_per_node: int, levels: list[str], racks: int | None,
            names: list[str] | None = None, **resources) -> dict:
    """VC ``vc`` alone on a short-form cluster of its own ``nodes``, as a user would write it."""
    short = {"nodes": names if names is not None else nodes, "gpus_per_node": gpus_per_node, "gpu_type": "P40",
             "levels": levels, "vcs": {vc: gpus}, **resources}
    if racks:
        short["racks"] = racks
    return expand_short_form(short)


def test_private_and_a_written_one_vc_cluster_agree_job_by_job_on_a_heavy_philly_like_load(tmp_path):
    """The issue's case: VC 6214e9 (64 nodes, 4 racks) of ``philly``, its jobs of a 6,000-job Philly-like
    trace compressed 33x, on the derived private cluster and on ``nodes: 64, racks: 4`` written by hand
    (replayed with the defaults). Before the fix 151 of its 1,116 jobs started at other times (the written
    replay's opportunistic shadows ran in the VC's own GPUs past its queue)."""
    from hive_scheduler.sim.trace import load_trace

    cfg = load_cluster_config("philly")
    events = [e for e in load_trace(_philly_like(tmp_path, 6000, 7), cfg, time_scale=0.03) if e.vc == "6214e9"]
    assert len(events) > 1000
    derived = starts(simulate(cfg, events, "private", anomaly=False))
    own = written("6214e9", 512, nodes=64, gpus_per_node=8, levels=["pair", "socket"], racks=4,
                  cpus_per_node=48, memory_mb_per_node=458752)
    by_hand = simulate(own, events, "hived", anomaly=False)
    differ = {j: (derived.get(j), t) for j, t in starts(by_hand).items() if derived.get(j) != t}
    assert len(derived) == len(events) and not differ, sorted(differ.items())[:10]
    assert not any(d.get("opportunistic") for d in by_hand.decisions)  # nowhere else to overflow to


# ---------------------------------------------------------------- property: random clusters and heavy traces
SHAPES = [(1, 1), (1, 1), (1, 1), (1, 2), (1, 4), (1, 4), (1, 8), (2, 8), (2, 4)]  # (tasks, GPUs each)


@st.composite
def shared_clusters(draw):
    """A short-form shared cluster whose VCs hold whole racks (or whole nodes when there are no racks),
    maybe one VC of loose nodes beside nodes no VC owns, so each VC's own cells can be written as a short
    form of their own."""
    gpn = draw(st.sampled_from([4, 8]))
    levels = draw(st.sampled_from([["pair"], ["pair", "socket"]] if gpn == 8 else [["pair"]]))
    per_rack = draw(st.sampled_from([0, 2, 3]))  # 0: no racks
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))  # racks (or nodes) per VC
    unit = per_rack or 1
    vcs = {f"v{i}": n * unit * gpn for i, n in enumerate(sizes)}
    nodes = sum(sizes) * unit
    loose = draw(st.integers(0, per_rack - 1)) if per_rack else 0
    if loose:  # a VC of loose nodes (fewer than a rack), in a last rack whose other nodes no VC owns
        vcs[f"v{len(sizes)}"] = loose * gpn
        nodes += per_rack
    return {"gpus_per_node": gpn, "levels": levels, "per_rack": per_rack, "vcs": vcs, "nodes": nodes}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    shape=shared_clusters(),
    jobs=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(SHAPES), st.sampled_from([60, 600, 2400, 7200, 7200])),
                  min_size=30, max_size=60),
    gaps=st.lists(st.sampled_from([0, 0, 1, 5, 30, 300]), min_size=60, max_size=60),
    renamed=st.booleans(),
)
def test_derived_and_written_private_baselines_agree_and_the_defaults_delay_no_job(shape, jobs, gaps, renamed):
    """Over random shared clusters and heavy random traces: for each VC, its jobs start at the same
    instants on the derived private cluster and on its own cells written by hand (node names and order
    as a user picks them: ``renamed``), replayed with the defaults and with ``private``; and no job of
    any VC starts later in the shared cluster with the defaults than on those baselines."""
    gpn, levels, per_rack = shape["gpus_per_node"], shape["levels"], shape["per_rack"]
    vcs = sorted(shape["vcs"])
    short = {"nodes": shape["nodes"], "gpus_per_node": gpn, "gpu_type": "P40", "levels": levels,
             "vcs": shape["vcs"], "cpus_per_node": 48, "memory_mb_per_node": 65536}
    if per_rack:
        short["racks"] = shape["nodes"] // per_rack
    shared = load_cluster_config(expand_short_form(short))
    lines, t = [], 0
    for i, ((v, (count, gpus), duration), gap) in enumerate(zip(jobs, gaps)):
        t += gap
        vc = vcs[v % len(vcs)] if v < 3 else vcs[-1]
        if count * gpus > shape["vcs"][vc]:
            continue
        lines.append(json.dumps({"t": t, "op": "submit", "job": f"j{i}", "vc": vc, "duration": duration,
                                 "tasks": [{"name": "w", "count": count, "gpus": gpus}]}))
    events = parse_events(lines)
    hived = simulate(shared, events, "hived")
    derived = starts(hived.private)
    subs = {e.job: e for e in events}
    for vc in vcs:
        mine = [e for e in events if e.vc == vc]
        if not mine:
            continue
        n = shape["vcs"][vc] // gpn
        names = [f"box-{vc}-{k:02d}" for k in range(n)] if renamed else None
        own = written(vc, shape["vcs"][vc], nodes=n, gpus_per_node=gpn, levels=levels,
                      racks=n // per_rack if per_rack and n % per_rack == 0 else None, names=names,
                      cpus_per_node=48, memory_mb_per_node=65536)
        for policy in ("hived", "private"):
            got = starts(simulate(own, mine, policy, anomaly=False))
            differ = {e.job: (derived.get(e.job), got.get(e.job)) for e in mine if derived.get(e.job) != got.get(e.job)}
            assert not differ, f"{vc} written, {policy}: (derived, written) starts {differ}\n" + "\n".join(lines)
    shared_starts = starts(hived)
    later = {j: (s, derived[j]) for j, s in shared_starts.items() if s > derived[j] + 1e-9 and subs[j].priority >= 0}
    assert not later, f"started later with the defaults than privately: {later}\n" + "\n".join(lines)


def test_the_private_baseline_queues_by_the_rule_it_is_measured_against():
    """``--queueing strict`` (a job that does not fit holds a reservation nobody passes): the private replay
    the anomaly is measured against queues strictly too, so the bare core (which is its VC's private cluster
    in each VC) has no anomaly. Before, the private replay always skipped: the 1-GPU job that strict order
    holds behind the 4-GPU one counted as 58 s of sharing anomaly, the rule's cost, not sharing's."""
    from test_sim_private import submit, two_nodes

    lines = [submit(0, "long", "A", 2, duration=50), submit(1, "big", "A", 4, duration=10),
             submit(2, "small", "A", 1, duration=10), submit(3, "other", "B", 4, duration=10)]
    for queueing in ("strict", "skip"):
        result = simulate(two_nodes(), parse_events(lines), "hived", overflow=False, queueing=queueing)
        assert result.metrics.waits == result.private.metrics.waits
        assert (result.metrics.sharing_anomaly_s, result.metrics.sharing_anomaly_jobs) == (0, 0)
    strict = simulate(two_nodes(), parse_events(lines), "private", queueing="strict")
    assert strict.metrics.waits["small"] == 58  # behind "big" (it runs 50-60 on the VC's one node)
    assert simulate(two_nodes(), parse_events(lines), "private").metrics.waits["small"] == 0
