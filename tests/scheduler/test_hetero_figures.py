"""The round simulator without numpy gives numpy's figures, to the last bit, and starts without numpy.

``data/hetero_figures.json`` holds what ``hive_scheduler.hetero.simulate`` printed when it computed
with numpy (main at 344e9d4): every policy on ``poisson_96.trace`` (seeds 0-9 for the seeded
``fifo``, ``fifo_perf`` and ``gandiva``), on ``minimize_makespan.trace`` and on two VCs with a restart
overhead; each run's metrics exactly and its per-job JCTs as a digest of their bits.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import random
import subprocess
import sys

import numpy as np
import pytest

from hive_scheduler.hetero import GpuCluster, load_throughputs, load_trace, parse_short_form, simulate
from hive_scheduler.hetero.arith import _fma_exact, dot, fsum_np, mean_np, median

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "scheduler" / "hive_scheduler" / "hetero" / "data"
PINNED = json.loads((pathlib.Path(__file__).parent / "data" / "hetero_figures.json").read_text())["runs"]


def _digest(jct: dict) -> str:
    text = ",".join(f"{int(k)}:{float(v).hex()}" for k, v in sorted(jct.items(), key=lambda kv: int(kv[0])))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def inputs():
    p96 = load_trace(str(DATA / "poisson_96.trace"))
    two_vcs = GpuCluster({"v100": 4, "p100": 4, "k80": 4},
                         {"a": {"v100": 2, "p100": 2, "k80": 2}, "b": {"v100": 2, "p100": 2, "k80": 2}})
    return load_throughputs(), {
        "p96": (p96, parse_short_form("v100:4,p100:4,k80:4"), {}),
        "mm": (load_trace(str(DATA / "minimize_makespan.trace")), parse_short_form("v100:8,p100:16,k80:24"), {}),
        "p96-2vc-ovh": ([dataclasses.replace(j, vc="ab"[j.job_id % 2]) for j in p96], two_vcs,
                        {"restart_overhead": 20.0}),
    }


@pytest.mark.parametrize("run", sorted(PINNED))
def test_figures_are_those_of_the_numpy_version(run, inputs):
    throughputs, setups = inputs
    name, policy, seed = run.split("/")
    trace, cluster, kw = setups[name]
    got = simulate(trace, throughputs, cluster, policy, seed=int(seed), **kw).to_dict(with_jobs=True)
    got["jct_s"] = _digest(got["jct_s"])
    assert got == PINNED[run]


def test_sums_and_dot_products_follow_numpys_order():
    rng = random.Random(5)
    for n in range(0, 200):
        for _ in range(4):
            x = [rng.uniform(0, 3) * rng.choice([1, 1e-4, 1e4]) for _ in range(n)]
            y = [rng.choice([1.0, 2.0, 4.0, rng.uniform(0, 10)]) for _ in range(n)]
            assert dot(x, y) == float(np.array(x) @ np.array(y)), n
            assert fsum_np(x) == float(np.sum(np.array(x))), n
            if n:
                assert mean_np(x) == float(np.mean(np.array(x))), n
                assert median(x) == float(np.median(np.array(x))), n


def test_fused_multiply_add_rounds_once():
    from fractions import Fraction

    rng = random.Random(3)
    for _ in range(2000):
        a, b, c = (rng.uniform(-1e6, 1e6) * rng.choice([1, 1e-9, 1e9]) for _ in range(3))
        assert _fma_exact(a, b, c) == float(Fraction(a) * Fraction(b) + Fraction(c))
    # the case a plain multiply-then-add gets wrong: the product's low bits decide the rounding
    a = 1.0 + 2.0 ** -30
    assert _fma_exact(a, a, -(1.0 + 2.0 ** -29)) == 2.0 ** -60
    assert a * a - (1.0 + 2.0 ** -29) == 0.0


def test_highs_solves_the_lists_as_it_solved_numpys_arrays():
    # the same LPs handed over as lists (costs set column by column) and as numpy arrays (the costs
    # in the model): the same optimum, bit for bit
    from hive_scheduler.hetero.policies import lp

    h = lp._highs_module()
    rng = random.Random(1)
    for _ in range(60):
        n, k = rng.randint(1, 25), 3
        sf = [rng.choice([1, 1, 2, 4]) for _ in range(n)]
        rows = [{i * k + t: 1.0 for t in range(k)} for i in range(n)]
        rows += [{i * k + t: float(sf[i]) for i in range(n)} for t in range(k)]
        b = [1.0] * n + [float(rng.randint(1, 8)) for _ in range(k)]
        cost = [-rng.choice([0.0, rng.uniform(0.1, 5)]) for _ in range(n * k)]
        lower, upper = [0.0] * (n * k), [1.0] * (n * k)
        ours = lp.Lp(cost, rows, b, lower, upper).solve()

        dense = np.zeros((len(rows), n * k))
        for r, row in enumerate(rows):
            for c, v in row.items():
                dense[r, c] = v
        highs = h._Highs()
        highs.setOptionValue("output_flag", False)
        model = h.HighsLp()
        model.num_col_, model.num_row_ = n * k, len(rows)
        model.col_cost_ = np.array(cost)
        model.col_lower_, model.col_upper_ = np.array(lower), np.array(upper)
        model.row_lower_, model.row_upper_ = np.full(len(rows), -h.kHighsInf), np.array(b)
        cols, rs = np.nonzero(dense.T)
        model.a_matrix_.format_ = h.MatrixFormat.kColwise
        model.a_matrix_.num_col_, model.a_matrix_.num_row_ = n * k, len(rows)
        model.a_matrix_.start_ = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=n * k))]).astype(np.int32)
        model.a_matrix_.index_ = rs.astype(np.int32)
        model.a_matrix_.value_ = dense.T[cols, rs]
        highs.passModel(model)
        highs.run()
        theirs = [float(v) for v in highs.getSolution().col_value]
        assert [v.hex() for v in ours] == [v.hex() for v in theirs]


@pytest.mark.parametrize("policy", ["fifo", "gandiva", "max_min_fairness", "max_min_fairness_perf",
                                    "finish_time_fairness_perf", "max_sum_throughput_perf"])
def test_hive_lab_simulate_with_a_gavel_trace_does_not_import_numpy(policy):
    code = (
        "import sys\n"
        "from hive_lab.cli import main\n"
        f"rc = main(['simulate', '--trace', {str(DATA / 'small_test.trace')!r}, '--cluster', 'v100:2,p100:2,k80:2',"
        f" '--policy', {policy!r}, '--json'])\n"
        "print('numpy' in sys.modules, 'scipy' in sys.modules, rc, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["policies"][policy]["jobs"] > 0  # nothing but the JSON on stdout
    assert done.stderr.strip().splitlines()[-1] == "False False 0"


def test_allocation_columns_are_the_rows_column_by_column():
    # the policies build their matrices column by column; the same entries as their rows sorted
    from hive_scheduler.hetero.policies import lp
    from hive_scheduler.hetero.policies.base import Problem

    def from_rows(rows, nv):
        entries = sorted((c, r, v) for r, row in enumerate(rows) for c, v in row.items() if v != 0)
        start = [0]
        for col in range(nv):
            start.append(start[-1] + sum(1 for e in entries if e[0] == col))
        return len(rows), start, [e[1] for e in entries], [float(e[2]) for e in entries]

    rng = random.Random(2)
    for _ in range(40):
        n, k = rng.randint(1, 12), rng.randint(1, 4)
        coeff = [[rng.choice([0.0, 0.0, rng.uniform(0.1, 3)]) for _ in range(k)] for _ in range(n)]
        p = Problem(job_ids=list(range(n)), gpu_types=[f"g{t}" for t in range(k)], gpus=[rng.randint(1, 8)] * k,
                    throughput=coeff, scale_factor=[rng.choice([1, 2, 4]) for _ in range(n)],
                    remaining_steps=[1.0] * n, priority_weight=[1.0] * n, time_since_start=[0.0] * n)
        total = [v for row in coeff for v in row]
        base = lp.base_rows(p)[0]
        cases = [
            (lp.allocation_columns(p), base, n * k),
            (lp.allocation_columns(p, coeff), base + lp.per_job_rows(p, coeff), n * k),
            (lp.allocation_columns(p, coeff, extra_col=True), base + lp.per_job_rows(p, coeff, 0, [1.0] * n), n * k + 1),
            (lp.allocation_columns(p, total=total), base + [{j: -v for j, v in enumerate(total)}], n * k),
        ]
        for cols, rows, nv in cases:
            assert (cols.rows, cols.start, cols.index, cols.values) == from_rows(rows, nv)
        assert lp.base_rhs(p) == lp.base_rows(p)[1]
