"""Gavel's policies on small cases whose optimum is obvious by hand."""

from __future__ import annotations

import numpy as np
import pytest

from hive_scheduler.hetero.policies import POLICIES, PackedAllocation, make_policy
from hive_scheduler.hetero.rounds import choose_round

from hetero_helpers import per_job_time, per_type_gpus, problem

# two jobs, two GPU types of one GPU each; job 0 is 4x faster on type 0, job 1 4x faster on type 1
CROSSED = [[4.0, 1.0], [1.0, 4.0]]


@pytest.mark.parametrize("name", ["max_sum_throughput_perf", "min_total_duration_perf", "max_min_fairness_perf",
                                  "finish_time_fairness_perf", "fifo_perf"])
def test_perf_policies_give_each_job_its_fast_type(name):
    x = make_policy(name).allocate(problem(CROSSED, [1, 1]))
    assert np.allclose(x, [[1, 0], [0, 1]], atol=1e-6)


@pytest.mark.parametrize("name", ["max_min_fairness", "min_total_duration", "finish_time_fairness"])
def test_agnostic_policies_ignore_the_types(name):
    # planned as one pool: each job gets the same mix of types, in proportion to the GPUs
    x = make_policy(name).allocate(problem(CROSSED, [1, 1]))
    assert np.allclose(x, [[0.5, 0.5], [0.5, 0.5]], atol=1e-6)


def test_max_sum_throughput_prefers_the_larger_total():
    # one GPU of each type; job 0 gains most from type 0 (10 vs 1), job 1 only 2 vs 1
    x = make_policy("max_sum_throughput_perf").allocate(problem([[10, 1], [2, 1]], [1, 1]))
    assert np.allclose(x, [[1, 0], [0, 1]], atol=1e-6)


@pytest.mark.parametrize("short", [0, 1, 2])
def test_max_sum_throughput_gives_ties_to_the_job_nearest_its_end(short):
    # one GPU, three identical jobs: every split of the GPU has the same total throughput. Among
    # those, the job with the least work left gets the GPU (it finishes first, the average JCT falls)
    remaining = [1000.0, 1000.0, 1000.0]
    remaining[short] = 100.0
    x = np.asarray(make_policy("max_sum_throughput_perf").allocate(problem([[1.0], [1.0], [1.0]], [1], remaining=remaining)))
    assert x[short, 0] == pytest.approx(1.0, abs=1e-6)
    assert x.sum() == pytest.approx(1.0, abs=1e-6)


def test_min_total_duration_balances_finish_times():
    # one GPU, two jobs at 1 step/s, 100 and 300 steps left: the makespan is 400 s whatever the split,
    # and the long job must run 3/4 of the time to finish by then (phase 2 only adds slack to the short one)
    x = np.asarray(make_policy("min_total_duration_perf").allocate(problem([[1.0], [1.0]], [1], remaining=[100, 300])))
    assert x[1, 0] >= 0.75 - 1e-6
    assert x.sum() <= 1 + 1e-6


def test_agnostic_min_total_duration_closed_form_matches_its_lps():
    # one pool: the closed form against the two LPs it replaces, on random problems: the same
    # slowest rate (1 / makespan), the same shares, within the GPUs
    from hive_scheduler.hetero.policies.base import agnostic, pooled
    from hive_scheduler.hetero.policies.min_total_duration import min_makespan_allocation, min_makespan_pooled

    rng = np.random.default_rng(3)
    for _ in range(100):
        n = int(rng.integers(1, 25))
        p = problem(rng.uniform(0.1, 5.0, (n, 3)), rng.integers(1, 6, 3), scale_factor=rng.choice([1, 1, 2, 4], n),
                    remaining=rng.uniform(10, 1e5, n))
        speed = np.asarray(agnostic(p.throughput))
        closed = np.asarray(min_makespan_pooled(p, speed[:, 0]))
        by_lp = np.asarray(min_makespan_allocation(pooled(p, speed), speed[:, :1]))[:, 0]
        rate = speed[:, 0] / p.remaining_steps
        assert (rate * closed).min() == pytest.approx((rate * by_lp).min(), rel=1e-6)
        assert closed == pytest.approx(by_lp, abs=1e-6)
        assert (p.scale_factor * closed).sum() <= p.gpus.sum() + 1e-9


def test_max_min_fairness_splits_one_gpu_evenly_and_weights_priority():
    x = make_policy("max_min_fairness_perf").allocate(problem([[1.0], [1.0]], [1]))
    assert np.allclose(x, [[0.5], [0.5]], atol=1e-6)
    # priority weight 2 asks for twice the normalised throughput... Gavel divides by the weight
    # (a weight-2 job needs half as much to reach the same normalised level)
    x = make_policy("max_min_fairness_perf").allocate(problem([[1.0], [1.0]], [1], priority=[1.0, 3.0]))
    assert np.allclose(x, [[0.25], [0.75]], atol=1e-6)


def test_agnostic_max_min_fairness_water_filling_reaches_the_lps_optimum():
    # the closed form against the LP it replaces (one pool, each job at its own speed), on random
    # clusters, scale factors and priorities: the same least normalised share, within the GPUs
    from hive_scheduler.hetero.policies.base import agnostic, equal_share, pooled, spread
    from hive_scheduler.hetero.policies.max_min_fairness import max_min_allocation

    rng = np.random.default_rng(7)
    for _ in range(100):
        n = int(rng.integers(1, 25))
        p = problem(rng.uniform(0.1, 5.0, (n, 3)), rng.integers(1, 6, 3), scale_factor=rng.choice([1, 1, 2, 4], n),
                    priority=rng.choice([1.0, 1.0, 5.0], n))
        closed = np.asarray(make_policy("max_min_fairness").allocate(p))
        speed = np.asarray(agnostic(p.throughput))
        by_lp = np.asarray(spread(max_min_allocation(pooled(p, speed), speed[:, :1]), p))
        weight = p.scale_factor / (p.priority_weight * np.asarray(equal_share(pooled(p, speed)))[:, 0])
        assert (weight * closed.sum(axis=1)).min() == pytest.approx((weight * by_lp.sum(axis=1)).min(), rel=1e-5)
        assert (closed.sum(axis=1) <= 1 + 1e-9).all()
        assert (per_type_gpus(closed, p.scale_factor) <= p.gpus + 1e-9).all()


def test_max_min_fairness_counts_scale_factor():
    # a 2-GPU job and a 1-GPU job on 2 GPUs: each gets one GPU's worth, so the 1-GPU job runs all
    # the time and the 2-GPU job half of it
    x = np.asarray(make_policy("max_min_fairness_perf").allocate(problem([[1.0], [1.0]], [2], scale_factor=[2, 1])))
    assert np.allclose(x[:, 0], [0.5, 1.0], atol=1e-6)


def test_finish_time_fairness_on_one_gpu_is_the_equal_share():
    # same speed, one GPU: any other split makes one job's rho exceed 1, whatever it ran before
    p = problem([[1.0], [1.0]], [1], remaining=[100, 300], since=[300, 0])
    x = make_policy("finish_time_fairness_perf").allocate(p)
    assert np.allclose(x, [[0.5], [0.5]], atol=1e-3)


def test_finish_time_fairness_perf_lowers_rho_below_one_with_fast_types():
    # CROSSED: the equal share gives each job 0.5 x 4 + 0.5 x 1 = 2.5 steps/s; its fast type gives 4,
    # so rho = 2.5 / 4 for both
    p = problem(CROSSED, [1, 1], remaining=[100, 100])
    x = make_policy("finish_time_fairness_perf").allocate(p)
    thr = (x * np.array(CROSSED)).sum(axis=1)
    rho = 2.5 / thr
    assert rho == pytest.approx([0.625, 0.625], rel=1e-3)


def test_fifo_perf_fastest_free_type_in_arrival_order():
    # both jobs fastest on type 0 which has one GPU: the first gets it, the second takes type 1
    x = make_policy("fifo_perf").allocate(problem([[5, 1], [5, 2]], [1, 1]))
    assert np.allclose(x, [[1, 0], [0, 1]])


def test_fifo_keeps_placements_and_nobody_overtakes():
    f = make_policy("fifo", seed=3)
    p = problem([[1, 1], [1, 1], [1, 1]], [1, 1], scale_factor=[1, 2, 1])
    x = np.asarray(f.allocate(p))
    # job 0 placed; job 1 needs 2 GPUs of one type and finds none: job 2 waits behind it
    assert x[0].sum() == 1 and x[1].sum() == 0 and x[2].sum() == 0
    again = f.allocate(p)
    assert np.array_equal(again, x)  # sticky: the same type as before


def test_gandiva_equal_shares_when_jobs_fit():
    x = make_policy("gandiva").allocate(problem([[1, 1], [3, 1]], [2, 2]))
    assert np.allclose(x, [[0.5, 0.5], [0.5, 0.5]])


def test_gandiva_packs_pairs_when_jobs_do_not_fit():
    pairs = lambda a, b: np.array([[0.8, 0.7]])  # one type; each job keeps most of its speed  # noqa: E731
    x = make_policy("gandiva").allocate(problem([[1.0]] * 4, [2], pairs=pairs))
    assert isinstance(x, PackedAllocation)
    assert sorted(len(u) for u in x.units) == [2, 2]
    assert np.allclose(per_job_time(x, 4), [1.0] * 4)  # 2 pairs on 2 GPUs: every job runs all the time
    assert per_type_gpus(x, [1] * 4)[0] <= 2 + 1e-9


def test_gandiva_splits_pairs_that_cannot_run():
    pairs = lambda a, b: np.array([[0.0, 0.0]])  # packing makes no progress  # noqa: E731
    g = make_policy("gandiva")
    p = problem([[1.0]] * 3, [1], pairs=pairs)
    g.allocate(p)
    x = g.allocate(p)  # the useless pair of the first call is split, and others are tried
    assert isinstance(x, PackedAllocation)
    assert per_type_gpus(x, [1] * 3)[0] <= 1 + 1e-9


def test_gandiva_tries_again_to_pack_the_jobs_it_left_alone():
    # Gavel forgets the jobs it left unpacked at every solve and pairs them afresh: 3 jobs on 1 GPU
    # make one pair and one job alone; with a 4th job, the one left alone and the newcomer pair up
    pairs = lambda a, b: np.array([[0.8, 0.7]])  # noqa: E731
    g = make_policy("gandiva")
    first = g.allocate(problem([[1.0]] * 3, [1], pairs=pairs))
    assert sorted(len(u) for u in first.units) == [1, 2]
    second = g.allocate(problem([[1.0]] * 4, [1], pairs=pairs))
    assert sorted(len(u) for u in second.units) == [2, 2]
    kept = next(u for u in first.units if len(u) == 2)
    assert kept in [tuple(sorted(u)) for u in second.units]  # a pair that pays is kept


def test_unknown_policy_lists_the_names():
    with pytest.raises(ValueError, match="max_min_fairness_perf"):
        make_policy("drf_perf")
    assert set(POLICIES) >= {"fifo", "fifo_perf", "max_min_fairness", "max_min_fairness_perf", "finish_time_fairness",
                             "finish_time_fairness_perf", "min_total_duration", "min_total_duration_perf",
                             "max_sum_throughput_perf", "gandiva"}


def test_round_fills_types_by_priority_and_fits_gangs():
    units = [(0,), (1,), (2,)]
    alloc = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
    received = np.zeros((3, 2))
    usable = np.ones((3, 2))
    chosen = choose_round(units, alloc, received, usable, np.array([1, 1, 2]), np.array([1, 2]), [0, 1])
    # type 0 (1 GPU): job 0 ranks first; type 1 (2 GPUs): job 2 needs both and ranks first
    assert chosen == {(0,): 0, (2,): 1}


def test_round_rotates_by_time_received():
    units = [(0,), (1,)]
    alloc = np.array([[0.5], [0.5]])
    usable = np.ones((2, 1))
    first = choose_round(units, alloc, np.array([[180.0], [180.0]]), usable, np.array([1, 1]), np.array([1]), [0])
    assert first == {(0,): 0}
    second = choose_round(units, alloc, np.array([[540.0], [180.0]]), usable, np.array([1, 1]), np.array([1]), [0])
    assert second == {(1,): 0}


def test_round_breaks_equal_priorities_by_deficit():
    # equal allocations and time received: the unit owed more by the earlier allocations runs (Gavel's
    # deficits), not the one that happens to come first
    units = [(0,), (1,)]
    args = (units, np.array([[0.5], [0.5]]), np.array([[180.0], [180.0]]), np.ones((2, 1)), np.array([1, 1]),
            np.array([1]), [0])
    assert choose_round(*args) == {(0,): 0}
    assert choose_round(*args, deficit=np.array([[-180.0], [180.0]])) == {(1,): 0}
    # a deficit only breaks ties: a higher priority still wins
    assert choose_round(units, np.array([[0.5], [0.5]]), np.array([[180.0], [540.0]]), np.ones((2, 1)),
                        np.array([1, 1]), np.array([1]), [0], deficit=np.array([[0.0], [1e6]])) == {(0,): 0}


def test_strict_round_leaves_zero_allocations_idle():
    units = [(0,), (1,)]
    alloc = np.array([[1.0], [0.0]])
    args = (units, alloc, np.zeros((2, 1)), np.ones((2, 1)), np.array([1, 1]), np.array([2]), [0])
    assert choose_round(*args, strict=True) == {(0,): 0}
    assert choose_round(*args, strict=False) == {(0,): 0, (1,): 0}  # work-conserving otherwise
