"""Property: with the overflow lever (the simulator's default, an overflowed job keeping its place in its
VC's queue), no guaranteed job waits longer than in its VC's private cluster (issue 25).

Random workloads of guaranteed jobs (gangs, priorities, withdrawals) on the small two-rack cluster of
the simulator's property tests, immediate preemption; each job's wait under hived+overflow is compared
with the private replay of its VC."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hive_scheduler.sim import simulate
from hive_scheduler.sim.events import parse_events
from test_sim_properties import VCS, config

guaranteed_st = st.tuples(
    st.sampled_from(sorted(VCS)),
    st.sampled_from([(1, 1), (1, 2), (1, 4), (2, 2), (2, 4), (3, 1)]),
    st.sampled_from([0, 0, 5]),
    st.integers(1, 200),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    jobs=st.lists(guaranteed_st, min_size=1, max_size=40),
    gaps=st.lists(st.sampled_from([0, 0, 1, 3, 10, 60]), min_size=40, max_size=40),
    withdraw=st.sets(st.integers(0, 39), max_size=5),
)
def test_no_guaranteed_job_waits_longer_than_in_its_private_cluster(jobs, gaps, withdraw):
    lines, t = [], 0
    for i, ((vc, (count, gpus), priority, duration), gap) in enumerate(zip(jobs, gaps)):
        t += gap
        lines.append(json.dumps({"t": t, "op": "submit", "job": f"j{i}", "vc": vc, "priority": priority,
                                 "tasks": [{"name": "w", "count": count, "gpus": gpus}], "duration": duration,
                                 "lazy_preemption": False}))
        if i in withdraw:
            lines.append(json.dumps({"t": t + 2, "op": "finish", "job": f"j{i}"}))
    lines.sort(key=lambda line: json.loads(line)["t"])
    hived = simulate(config(), parse_events(lines), "hived")
    private = hived.private.metrics.waits
    worse = {j: (w, private[j]) for j, w in hived.metrics.waits.items() if w > private[j] + 1e-9}
    assert not worse, f"waits (hived+overflow, private): {worse}\n" + "\n".join(lines)


def _philly_like(tmp_path, jobs: int, seed: int):
    """``benchmarks/gen_philly_trace.py --jobs N --seed S --jobs-per-day 0``: the sample's jobs and gaps resampled."""
    import importlib.util
    import pathlib

    from hive_scheduler.sim import samples

    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "gen_philly_trace.py"
    spec = importlib.util.spec_from_file_location("gen_philly_trace", path)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    out = tmp_path / f"philly-{jobs}-{seed}.csv"
    with open(out, "w", newline="", encoding="utf-8") as fh:
        gen.generate(samples.PHILLY_DEV, jobs, seed, fh, jobs_per_day=0)
    return out


def test_a_vcs_placement_ignores_other_vcs_overflowed_work_in_its_cells(tmp_path):
    """On a Philly-like load (3,000 resampled jobs, arrivals compressed 33x) no guaranteed job waits longer
    than in its private cluster. Before, a guaranteed job was first placed only on GPUs free of
    opportunistic work: with other VCs' overflowed jobs in some of its cells it landed elsewhere in its
    VC than on its private cluster, and the VC's cells fragmented differently (4 jobs, 39 min)."""
    from hive_scheduler import load_cluster_config
    from hive_scheduler.sim.trace import load_trace

    cfg = load_cluster_config("philly")
    events = load_trace(_philly_like(tmp_path, 3000, 7), cfg, time_scale=0.03)
    result = simulate(cfg, events, "hived")
    private = result.private.metrics.waits
    worse = {j: (w, private[j]) for j, w in result.metrics.waits.items() if w > private[j] + 1e-9}
    assert not worse, f"waits (hived+overflow, private): {sorted(worse.items())[:10]}"
    assert result.metrics.to_dict()["sharing_anomaly_s"] == 0


def test_an_overflowed_job_that_ends_early_delays_no_job_of_its_vc(tmp_path):
    """On a heavier Philly-like load (6,000 resampled jobs, arrivals compressed 33x) no guaranteed job waits
    longer than in its private cluster, and the mean wait stays far under the bare core's. A job that ran
    outside its VC ends earlier than on its private cluster; before the ghosts (``private_timing``) its VC's
    cells freed early, the VC's next jobs started in another order and 9 of them waited 1.8 h longer than
    privately: the run without them shows it, so this test can fail."""
    from hive_scheduler import load_cluster_config
    from hive_scheduler.sim.trace import load_trace

    cfg = load_cluster_config("philly")
    events = load_trace(_philly_like(tmp_path, 6000, 7), cfg, time_scale=0.03)
    result = simulate(cfg, events, "hived")
    m = result.metrics
    assert (m.sharing_anomaly_s, m.sharing_anomaly_jobs) == (0, 0)
    # (the bare core queues as privately: 2,195 s since issue 38's starvation rule, 21,307 s with the 1-h hold)
    assert m.avg_queue_s < result.private.metrics.avg_queue_s / 3
    assert 0 < m.held_gpu_s
    early = simulate(cfg, events, "hived", private=result.private, private_timing=False).metrics
    assert early.sharing_anomaly_jobs > 0 and early.held_gpu_s is None


def test_a_job_that_moves_into_its_vc_in_a_nested_pass_keeps_its_ghost(tmp_path):
    """The same load compressed 100x (issue 41): no guaranteed job waits longer than privately. Before, a
    job whose victims' GPUs were freed by a withdrawal earlier in the same list of decisions (another job's
    shadow, as that job moved into its VC) started in a nested pass, and its stale ``preempting`` marked it
    waiting again: when it ended, the wrapper took it for a cancel and left no ghost, its cell freed 54 min
    early, another ghost took it out of the private order, and an 8-GPU job of VC 0e4a51 waited 11 min
    longer than on its private cluster (0.18 h over 1 job)."""
    from hive_scheduler import load_cluster_config
    from hive_scheduler.sim.trace import load_trace

    cfg = load_cluster_config("philly")
    events = load_trace(_philly_like(tmp_path, 6000, 7), cfg, time_scale=0.01)
    result = simulate(cfg, events, "hived")
    m = result.metrics
    private = result.private.metrics.waits
    worse = {j: (w, private[j]) for j, w in m.waits.items() if w > private[j] + 1e-9}
    assert not worse and (m.sharing_anomaly_s, m.sharing_anomaly_jobs) == (0, 0), sorted(worse.items())[:10]


def test_a_ghost_and_a_job_of_its_vc_that_end_together_end_in_the_private_order():
    """Issue 38 (the 20,000-job anomaly, reduced). X ran entirely outside VC A (in B's idle GPU), so its
    place in A's queue became a ghost, which starts at t=100 beside Y and F, as X does privately; X and Y
    end together at 150. Privately X ends first (its end was scheduled first): the waiting 1-GPU Z takes
    X's GPU, Y's pair then frees and the 2-GPU W starts at 150. The ghost's end used to be scheduled
    after Y's (when the ghost's start was reported, after the pass), so Y ended first, Z took a GPU of Y's
    pair and W waited until 1,100 s (950 s of sharing anomaly). Completions at one instant now come in
    (start, submit) order, on every policy."""
    from hive_scheduler import load_cluster_config
    from hive_scheduler.shortform import expand_short_form

    def submit(t, job, vc, gpus, duration):
        return json.dumps({"t": t, "op": "submit", "job": job, "vc": vc, "duration": duration,
                           "tasks": [{"name": "w", "count": 1, "gpus": gpus}]})

    cfg = load_cluster_config(expand_short_form({"nodes": 2, "gpus_per_node": 4, "gpu_type": "P40",
                                                 "levels": ["pair"], "vcs": {"A": 4, "B": 4}}))
    lines = [submit(0, "Y0", "A", 4, 100), submit(0, "B1", "B", 3, 5000), submit(1, "X", "A", 1, 50),
             submit(2, "Y", "A", 2, 50), submit(51, "B2", "B", 1, 5000), submit(55, "F", "A", 1, 1000),
             submit(120, "Z", "A", 1, 1000), submit(121, "W", "A", 2, 10)]
    result = simulate(cfg, parse_events(lines), "hived")
    outside = [d for d in result.decisions if d["job"] == "X" and d["event"] == "started"]
    assert [d["opportunistic"] for d in outside] == [True]  # (the scenario: X ran outside, a ghost kept its place)
    private = result.private.metrics.waits
    assert private["W"] == 29
    assert result.metrics.waits["W"] == 29
    assert (result.metrics.sharing_anomaly_s, result.metrics.sharing_anomaly_jobs) == (0, 0)
