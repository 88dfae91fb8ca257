"""The round-based simulator on Gavel's traces, and ``hive-lab simulate --trace X.trace`` end to end."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from hive_scheduler.hetero import (
    GpuCluster, SimulationError, TraceJob, load_throughputs, load_trace, parse_short_form, simulate,
)
from hive_scheduler.hetero.throughputs import Throughputs

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "scheduler" / "hive_scheduler" / "hetero" / "data"
SMALL = str(DATA / "small_test.trace")
GAVEL_CLUSTER = "v100:8,p100:16,k80:24"


@pytest.fixture(scope="module")
def gavel():
    return load_throughputs()


def test_small_trace_every_policy_finishes_every_job(gavel):
    trace = load_trace(SMALL)
    cluster = parse_short_form(GAVEL_CLUSTER)
    from hive_scheduler.hetero import POLICIES

    results = {p: simulate(trace, gavel, cluster, p) for p in POLICIES}
    for name, m in results.items():
        assert m.finished == m.jobs == 20, name
        assert 0 < m.gpu_utilisation <= 1, name
        assert m.makespan_s >= max(m.jct_s.values()) - 1e-6
    # heterogeneity-aware is no worse than agnostic on this trace
    assert results["min_total_duration_perf"].makespan_s <= results["min_total_duration"].makespan_s
    assert results["max_min_fairness_perf"].avg_jct_s <= results["max_min_fairness"].avg_jct_s


def test_same_inputs_same_figures(gavel):
    trace = load_trace(SMALL)
    cluster = parse_short_form(GAVEL_CLUSTER)
    assert simulate(trace, gavel, cluster, "gandiva", seed=4) == simulate(trace, gavel, cluster, "gandiva", seed=4)


def _one_type_table():
    return Throughputs({"v100": {("A", 1): 2.0}, "k80": {("A", 1): 1.0}})


def test_a_lone_job_runs_at_full_speed_on_the_fast_type():
    # 1,000 steps at 2 steps/s on the V100: 500 s, in rounds of 360 s then 140 s
    job = TraceJob(job_id=0, job_type="A", total_steps=1000, scale_factor=1, arrival_time=0.0)
    m = simulate([job], _one_type_table(), GpuCluster({"v100": 1, "k80": 1}, {"default": {"v100": 1, "k80": 1}}),
                 "max_sum_throughput_perf")
    assert m.makespan_s == pytest.approx(500.0)
    assert (m.rounds, m.pauses, m.migrations) == (2, 0, 0)


def test_time_slicing_counts_pauses_and_charges_restart_overhead():
    # two equal jobs on one GPU under max-min fairness: they alternate rounds
    jobs = [TraceJob(job_id=i, job_type="A", total_steps=720, scale_factor=1, arrival_time=0.0) for i in range(2)]
    table = Throughputs({"v100": {("A", 1): 1.0}})
    cluster = GpuCluster({"v100": 1}, {"default": {"v100": 1}})
    free = simulate(jobs, table, cluster, "max_min_fairness_perf")
    assert free.makespan_s == pytest.approx(1440.0)  # 4 rounds of 360 s, one GPU always busy
    assert free.pauses >= 2 and free.resumes >= 1
    charged = simulate(jobs, table, cluster, "max_min_fairness_perf", restart_overhead=60)
    assert charged.makespan_s == pytest.approx(1440.0 + 60 * charged.resumes)
    assert charged.restart_overhead_s == 60


def test_what_a_job_missed_under_one_allocation_it_gets_under_the_next():
    # one V100 and two K80s; gandiva gives every job an equal share of each type while the jobs fit.
    # Jobs 0 and 1 at t=0: a third of the V100 each; round 1 is a tie there and job 0 gets it. Job 2
    # arrives at 360 s and the allocation is solved again (a third each): every job is credited the
    # same at a solve, so the V100 priorities tie again. Job 1 was owed 120 s of V100 and got none, job
    # 0 got 240 s more than owed: job 1 gets the V100 next (Gavel's deficits), not job 0 again
    jobs = [TraceJob(job_id=i, job_type="A", total_steps=3600, scale_factor=1, arrival_time=0.0) for i in range(2)]
    jobs.append(TraceJob(job_id=2, job_type="A", total_steps=3600, scale_factor=1, arrival_time=360.0))
    table = Throughputs({"v100": {("A", 1): 1.0}, "k80": {("A", 1): 0.5}})
    cluster = GpuCluster({"v100": 1, "k80": 2}, {"default": {"v100": 1, "k80": 2}})
    seen = []
    m = simulate(jobs, table, cluster, "gandiva", min_resolve_interval=0,
                 observer=lambda vc, t, chosen: seen.append((t, chosen)))
    assert seen[0] == (0.0, {(0,): 0, (1,): 1})
    assert seen[1][0] == 360.0 and seen[1][1][(1,)] == 0  # type 0 is the V100
    assert m.allocations >= 2 and m.finished == 3


@pytest.mark.parametrize("policy", ["fifo", "fifo_perf"])
def test_a_strict_policy_solves_again_rather_than_leave_a_gpu_idle_while_a_job_waits(policy):
    # two V100s; job 0 (long) at t=0 is solved and placed at once. Job 1 arrives at 10 s: the
    # re-solve interval (1,920 s) has not passed at the first round's end (360 s), and a FIFO policy
    # runs no job it has not placed, so the second V100 would idle until a solve at >= 1,920 s. It is
    # solved at 360 s instead and job 1 (720 steps at 1 step/s) ends at 1,080 s
    jobs = [TraceJob(job_id=0, job_type="A", total_steps=7200, scale_factor=1, arrival_time=0.0),
            TraceJob(job_id=1, job_type="A", total_steps=720, scale_factor=1, arrival_time=10.0)]
    table = Throughputs({"v100": {("A", 1): 1.0}})
    cluster = GpuCluster({"v100": 2}, {"default": {"v100": 2}})
    seen = []
    m = simulate(jobs, table, cluster, policy, observer=lambda vc, t, chosen: seen.append((t, dict(chosen))))
    assert seen[1] == (360.0, {(0,): 0, (1,): 0})
    assert m.jct_s[1] == pytest.approx(1080.0 - 10.0)
    assert m.allocations == 3  # at 0 s, 360 s, and after job 1's end once the interval has passed


def test_a_strict_policy_does_not_solve_early_while_every_gpu_is_busy():
    # one V100: job 1 arriving at 10 s could not run anyway, so no solve before the interval ends
    jobs = [TraceJob(job_id=0, job_type="A", total_steps=3600, scale_factor=1, arrival_time=0.0),
            TraceJob(job_id=1, job_type="A", total_steps=720, scale_factor=1, arrival_time=10.0)]
    table = Throughputs({"v100": {("A", 1): 1.0}})
    m = simulate(jobs, table, GpuCluster({"v100": 1}, {"default": {"v100": 1}}), "fifo")
    assert m.allocations == 3  # at 0 s, at 2,160 s (the interval) and when job 0 ends: none at 360 s
    assert m.jct_s[1] == pytest.approx(3600.0 + 720.0 - 10.0)


def _packing_table():
    # one type; two jobs packed on a GPU each keep half their speed (Gavel's test: 0.5 + 0.5 >= 1)
    return Throughputs({"v100": {("A", 1): 1.0}}, paired={"v100": {(("A", 1), ("A", 1)): (0.5, 0.5)}})


def test_a_pair_that_lost_a_job_leaves_no_share_to_the_other_until_the_next_solve():
    # 3 jobs on 1 GPU: gandiva packs two of them and leaves one alone, half the GPU each. When a
    # packed job finishes, its pair is gone, and with it the pair's share: until the allocation is
    # solved again (never, here) the unit alone holds the only share and runs every round; the other
    # job of the pair runs on what is left over, after it (as Gavel's simulator)
    cluster = GpuCluster({"v100": 1}, {"default": {"v100": 1}})
    checked = 0
    for seed in range(6):
        jobs = [TraceJob(job_id=i, job_type="A", total_steps=s, scale_factor=1, arrival_time=0.0)
                for i, s in enumerate([100, 2000, 2000])]
        seen = []
        m = simulate(jobs, _packing_table(), cluster, "gandiva", seed=seed, min_resolve_interval=1e9,
                     observer=lambda vc, t, chosen: seen.append((t, chosen)))
        assert m.finished == 3
        pair = next((u for _, chosen in seen for u in chosen if len(u) == 2), None)
        if pair is None or 0 not in pair:
            continue  # job 0 was left alone under this seed
        checked += 1
        survivor = pair[1] if pair[0] == 0 else pair[0]
        alone = ({1, 2} - {survivor}).pop()
        done_0, done_alone = m.jct_s[0], m.jct_s[alone]
        between = [chosen for t, chosen in seen if done_0 <= t < done_alone]
        assert between and all(chosen == {(alone,): 0} for chosen in between), (seed, between)
    assert checked >= 2


def test_a_slice_runs_whole_steps():
    # two GPUs: job 0 takes 100 s a step, job 1 runs whole 360 s rounds beside it. 3 whole steps fit
    # in a round (Gavel's int(0.01 x 360)); a step is never split across rounds, so job 0's 6 steps
    # end 300 s into its second round: at 660 s, not 600 s
    table = Throughputs({"v100": {("slow", 1): 0.01, ("fast", 1): 1.0}})
    jobs = [TraceJob(job_id=0, job_type="slow", total_steps=6, scale_factor=1, arrival_time=0.0),
            TraceJob(job_id=1, job_type="fast", total_steps=1000, scale_factor=1, arrival_time=0.0)]
    m = simulate(jobs, table, GpuCluster({"v100": 2}, {"default": {"v100": 2}}), "fifo")
    assert m.jct_s[0] == pytest.approx(660.0)
    assert m.jct_s[1] == pytest.approx(1000.0)


def test_bad_inputs_are_refused_with_a_reason(gavel):
    trace = load_trace(SMALL)
    with pytest.raises(SimulationError, match="fits on no GPU type"):
        simulate(trace, gavel, parse_short_form("v100:1"), "fifo")  # small_test has 2-GPU jobs
    with pytest.raises(SimulationError, match="shorter than a round"):
        simulate(trace, gavel, parse_short_form(GAVEL_CLUSTER), "fifo", restart_overhead=400)
    with pytest.raises(SimulationError, match="VC 'x'"):
        simulate([TraceJob(0, "LM (batch size 5)", 10, 1, 0.0, vc="x")], gavel, parse_short_form("v100:1"), "fifo")
    with pytest.raises(ValueError, match="unknown policy"):
        simulate(trace, gavel, parse_short_form(GAVEL_CLUSTER), "drf")


def hive_lab(*args: str) -> subprocess.CompletedProcess:
    exe = REPO / ".venv" / "bin" / "hive-lab"
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "hive_lab.cli"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, cwd=REPO, timeout=300)


def test_cli_small_trace_json():
    r = hive_lab("simulate", "--trace", SMALL, "--cluster", GAVEL_CLUSTER, "--policy", "fifo,max_min_fairness_perf",
                 "--throughputs", str(DATA / "simulation_throughputs.json"), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["gpus"] == {"v100": 8, "p100": 16, "k80": 24}
    assert set(doc["policies"]) == {"fifo", "max_min_fairness_perf"}
    for m in doc["policies"].values():
        assert m["jobs"] == m["finished"] == 20
        assert {"makespan_s", "avg_jct_s", "gpu_utilisation", "avg_rho", "pauses", "migrations", "resizes"} <= set(m)


def test_cli_simulate_imports_neither_other_subcommands_nor_scipy_optimize():
    # the process's start-up is most of a Gavel-trace run: `hive-lab simulate` builds its own parser
    # only, and the LP policies reach HiGHS without scipy.optimize's package (every optimiser scipy has)
    code = ("import sys; from hive_lab.cli import main; "
            f"rc = main(['simulate', '--trace', {SMALL!r}, '--cluster', {GAVEL_CLUSTER!r}, "
            "'--policy', 'max_min_fairness_perf', '--json']); "
            "print(sorted(m for m in sys.modules if m.startswith('hive_lab.cli.')), 'scipy.optimize' in sys.modules, "
            "file=sys.stderr); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines()[-1] == "['hive_lab.cli.simulate', 'hive_lab.cli.simulate_hetero', " \
        "'hive_lab.cli.simulate_history'] False"
    assert json.loads(r.stdout)["policies"]["max_min_fairness_perf"]["finished"] == 20


def test_cli_table_and_order_name():
    r = hive_lab("simulate", "--trace", SMALL, "--cluster", GAVEL_CLUSTER, "--order", "gandiva", "--restart-overhead", "10")
    assert r.returncode == 0, r.stderr
    assert "gandiva" in r.stdout and "makespan" in r.stdout and "migrations" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["--policy", "drf"], "unknown drf"),
    (["--cluster", "v100:0"], "at least 1"),
    (["--restart-overhead", "-1"], "restart overhead"),
    (["--throughputs", "/nonexistent.json"], "No such file"),
])
def test_cli_bad_input_is_exit_2_with_a_message(args, message):
    base = {"--cluster": GAVEL_CLUSTER}
    extra = list(args)
    if "--cluster" not in extra:
        extra += ["--cluster", base["--cluster"]]
    r = hive_lab("simulate", "--trace", SMALL, *extra)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_old_orders_still_refuse_gavel_names_for_csv_traces(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("job_id,submit_time_s,duration_s,num_gpus,gpu_type,vc,user,status\n")
    r = hive_lab("simulate", "--trace", str(csv), "--cluster", "default", "--order", "max_min_fairness_perf")
    assert r.returncode == 2 and "Gavel's policies go with a .trace file" in r.stderr


def test_cli_hived_config_with_vcs(tmp_path):
    from test_hetero_parsing import _mixed_hived_config

    cfg = _mixed_hived_config()
    cfg["physicalCluster"]["cellTypes"]["P100-NODE"] = {"childCellType": "P100", "childCellNumber": 4, "isNodeLevel": True}
    cfg["physicalCluster"]["physicalCells"].append({"cellType": "P100-NODE", "cellAddress": "p0"})
    cfg["virtualClusters"]["b"]["virtualCells"].append({"cellType": "P100-NODE", "cellNumber": 1})
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(cfg))
    r = hive_lab("simulate", "--trace", SMALL, "--cluster", str(path), "--policy", "max_min_fairness_perf", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["vcs"] == {"a": {"v100": 4, "k80": 8}, "b": {"v100": 4, "p100": 4}}
    assert doc["policies"]["max_min_fairness_perf"]["finished"] == 20
    one = hive_lab("simulate", "--trace", SMALL, "--cluster", str(path), "--vc", "b", "--json")
    assert one.returncode == 0, one.stderr
    bad = hive_lab("simulate", "--trace", SMALL, "--cluster", str(path), "--vc", "z")
    assert bad.returncode == 2 and "not a VC" in bad.stderr


def test_jobs_spread_over_vcs_by_hash_in_proportion():
    from hive_lab.cli.simulate_hetero import assign_vcs

    jobs = [TraceJob(i, "A", 10, 1, 0.0) for i in range(400)]
    cluster = GpuCluster({"v100": 8}, {"big": {"v100": 6}, "small": {"v100": 2}})
    vcs = [j.vc for j in assign_vcs(jobs, cluster, None)]
    assert vcs == [j.vc for j in assign_vcs(jobs, cluster, None)]  # deterministic
    assert 0.65 < vcs.count("big") / len(vcs) < 0.85
