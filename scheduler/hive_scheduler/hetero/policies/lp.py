"""Linear programs over an allocation, solved by scipy's HiGHS (``scipy.optimize.linprog``).

Variables: ``X`` flattened row-major (job i, type j -> i*k + j), then any extra variables the policy
adds. The base rows are Gavel's: each job's time fractions sum to <= 1, each type's GPUs are not
over-committed (scale factor x fraction), ``0 <= X <= 1``.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from .base import Problem


class SolveError(RuntimeError):
    pass


def base_rows(problem: Problem, extra: int) -> tuple[sparse.csr_matrix, np.ndarray]:
    n, k = problem.n, problem.k
    nv = n * k + extra
    rows = np.repeat(np.arange(n), k)
    per_job = sparse.csr_matrix((np.ones(n * k), (rows, np.arange(n * k))), shape=(n, nv))
    cols = np.arange(n * k)
    per_type = sparse.csr_matrix((np.repeat(problem.scale_factor.astype(float), k), (cols % k, cols)), shape=(k, nv))
    a = sparse.vstack([per_job, per_type], format="csr")
    b = np.concatenate([np.ones(n), problem.gpus.astype(float)])
    return a, b


def per_job_rows(problem: Problem, coeff: np.ndarray, extra_col: int | None, extra_coeff: np.ndarray | None,
                 extra: int) -> sparse.csr_matrix:
    """Row i: ``-sum_j coeff[i, j] X[i, j] (+ extra_coeff[i] * v_extra)``."""
    n, k = problem.n, problem.k
    nv = n * k + extra
    rows = np.repeat(np.arange(n), k)
    data = -coeff.reshape(-1)
    cols = np.arange(n * k)
    if extra_col is not None:
        rows = np.concatenate([rows, np.arange(n)])
        cols = np.concatenate([cols, np.full(n, n * k + extra_col)])
        data = np.concatenate([data, extra_coeff])
    return sparse.csr_matrix((data, (rows, cols)), shape=(n, nv))


def solve(c: np.ndarray, a_ub, b_ub: np.ndarray, bounds) -> np.ndarray | None:
    """The optimum of ``min c.v`` s.t. ``a_ub v <= b_ub`` and bounds, or None when infeasible."""
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status == 2:
        return None
    if res.status != 0:
        raise SolveError(f"HiGHS: {res.message}")
    return res.x


def to_allocation(v: np.ndarray, problem: Problem) -> np.ndarray:
    return np.clip(v[: problem.n * problem.k].reshape(problem.n, problem.k), 0.0, 1.0)
