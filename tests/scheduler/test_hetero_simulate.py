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
