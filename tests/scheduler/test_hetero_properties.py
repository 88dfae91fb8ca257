"""Properties of every policy and of the round mechanism on random problems (hypothesis)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hive_scheduler.hetero import GpuCluster, TraceJob, simulate
from hive_scheduler.hetero.policies import POLICIES, make_policy
from hive_scheduler.hetero.rounds import choose_round
from hive_scheduler.hetero.throughputs import Throughputs

from hetero_helpers import per_job_time, per_type_gpus, problem

EPS = 1e-6


@st.composite
def problems(draw):
    k = draw(st.integers(1, 3))
    gpus = draw(st.lists(st.integers(1, 8), min_size=k, max_size=k))
    n = draw(st.integers(1, 7))
    sfs = [draw(st.sampled_from([s for s in (1, 2, 4) if s <= max(gpus)])) for _ in range(n)]
    thr = [[draw(st.floats(0.1, 50.0)) for _ in range(k)] for _ in range(n)]
    remaining = [draw(st.integers(1, 10_000)) for _ in range(n)]
    since = [draw(st.floats(0.0, 5_000.0)) for _ in range(n)]
    priority = [draw(st.sampled_from([1.0, 2.0, 5.0])) for _ in range(n)]
    pair_rate = draw(st.floats(0.0, 1.0))
    pairs = lambda a, b: np.full((k, 2), pair_rate)  # noqa: E731
    return problem(thr, gpus, sfs, remaining, priority, since, pairs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p=problems(), name=st.sampled_from(POLICIES))
def test_allocations_respect_gpus_and_time(p, name):
    x = make_policy(name, seed=1).allocate(p)
    assert np.all(np.asarray(x.x if hasattr(x, "units") else x) >= -EPS)
    # each job's time fractions sum to <= 1, over all the units it is part of
    assert np.all(per_job_time(x, p.n) <= 1 + EPS)
    # no type is over-committed (a packed pair shares its GPUs)
    assert np.all(per_type_gpus(x, p.scale_factor) <= p.gpus + EPS)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_round_never_exceeds_gpus_and_runs_each_job_once(data):
    k = data.draw(st.integers(1, 3))
    gpus = np.array(data.draw(st.lists(st.integers(0, 8), min_size=k, max_size=k)))
    n = data.draw(st.integers(1, 8))
    singles = [(i,) for i in range(n)]
    pairs = [tuple(sorted(p)) for p in data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))
                                                          .filter(lambda t: t[0] != t[1]), max_size=4, unique=True))]
    units = sorted(set(singles) | set(pairs))
    sf_job = data.draw(st.lists(st.sampled_from([1, 2, 4]), min_size=n, max_size=n))
    u = len(units)
    alloc = np.array(data.draw(st.lists(st.lists(st.floats(0, 1), min_size=k, max_size=k), min_size=u, max_size=u)))
    received = np.array(data.draw(st.lists(st.lists(st.floats(0, 1e4), min_size=k, max_size=k), min_size=u, max_size=u)))
    usable = np.array(data.draw(st.lists(st.lists(st.sampled_from([0.0, 1.0]), min_size=k, max_size=k), min_size=u, max_size=u)))
    sf = np.array([sf_job[un[0]] for un in units])
    order = data.draw(st.permutations(range(k)))
    chosen = choose_round(units, alloc, received, usable, sf, gpus, order, strict=data.draw(st.booleans()))
    used = np.zeros(k)
    seen: list[int] = []
    for unit, t in chosen.items():
        used[t] += sf[units.index(unit)]
        assert usable[units.index(unit), t] > 0
        seen.extend(unit)
    assert np.all(used <= gpus)
    assert len(seen) == len(set(seen))


def _table(n_types: int) -> Throughputs:
    names = [f"g{t}" for t in range(n_types)]
    return Throughputs({g: {("A", s): 1.0 + t for s in (1, 2, 4)} | {("B", s): 3.0 - t for s in (1, 2, 4)}
                        for t, g in enumerate(names)})


@st.composite
def vc_traces(draw):
    jobs = []
    for i in range(draw(st.integers(1, 8))):
        jobs.append(TraceJob(job_id=i, job_type=draw(st.sampled_from("AB")), total_steps=draw(st.integers(100, 5000)),
                             scale_factor=draw(st.sampled_from([1, 2])), arrival_time=float(10 * i),
                             vc=draw(st.sampled_from(["a", "b"]))))
    return jobs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=vc_traces(), name=st.sampled_from(POLICIES))
def test_a_vc_keeps_its_gpus_whatever_the_others_do(trace, name):
    """HiveD's guarantee in the simulator: VC a's jobs finish exactly as if VC b did not exist, and no
    round gives a VC more than its own GPUs of a type."""
    cluster = GpuCluster({"g0": 4, "g1": 4}, {"a": {"g0": 2, "g1": 2}, "b": {"g0": 2, "g1": 2}})
    table = _table(2)
    rounds: list[tuple[str, dict]] = []
    full = simulate(trace, table, cluster, name, round_s=100, observer=lambda vc, t, chosen: rounds.append((vc, chosen)))
    sf = {j.job_id: j.scale_factor for j in trace}
    for vc, chosen in rounds:
        used = [0, 0]
        for unit, t in chosen.items():
            used[t] += sf[unit[0]]
        assert used[0] <= 2 and used[1] <= 2
    a_only = [j for j in trace if j.vc == "a"]
    if a_only and len(a_only) < len(trace):
        alone = simulate(a_only, table, cluster, name, round_s=100)
        assert {j: full.jct_s[j] for j in alone.jct_s} == alone.jct_s
