"""Linear programs over an allocation, solved by HiGHS (the copy scipy ships), kept warm between solves.

Variables: ``X`` flattened row-major (job i, type j -> i*k + j), then any extra variables the policy
adds. The base rows are Gavel's: each job's time fractions sum to <= 1, each type's GPUs are not
over-committed (scale factor x fraction), ``0 <= X <= 1``.

HiGHS is reached without ``scipy.optimize``: importing that package costs about 0.45 s of CPU
(it imports every optimiser scipy has) where HiGHS's own extension module loads in under 10 ms.
:func:`_highs_module` loads scipy's compiled HiGHS module by its file, and falls back to the ordinary
import (which runs ``scipy.optimize``'s ``__init__``) where that fails. An :class:`Lp` keeps its model
in one HiGHS instance, so a policy that solves a sequence of LPs differing only in right-hand sides or
costs (a bisection) re-solves from the previous optimal basis instead of from scratch.
"""

from __future__ import annotations

import sys

import numpy as np

from .base import Problem

_CORE = "scipy.optimize._highspy._core"


class SolveError(RuntimeError):
    pass


def _highs_module():
    """scipy's HiGHS extension module, loaded by its file (not through ``scipy.optimize``) once."""
    mod = sys.modules.get(_CORE)
    if mod is not None:
        return mod
    try:
        import glob
        import importlib.util
        import os

        import scipy  # the package __init__ only: cheap

        pattern = os.path.join(os.path.dirname(scipy.__file__), "optimize", "_highspy", "_core.*")
        found = [p for p in glob.glob(pattern) if p.endswith((".so", ".pyd"))]
        spec = importlib.util.spec_from_file_location(_CORE, found[0]) if found else None
        if spec is None or spec.loader is None:
            raise ImportError(pattern)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[_CORE] = mod  # a later ``import scipy.optimize`` reuses it instead of loading it twice
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            del sys.modules[_CORE]
            raise
        return mod
    except ImportError:
        from scipy.optimize._highspy import _core  # the slow, ordinary way

        return _core


class Lp:
    """``min c.v`` s.t. ``a v <= b`` and ``lower <= v <= upper``, in one HiGHS instance.

    ``a`` is dense (the allocation LPs have a few hundred rows and columns at most); it is handed to
    HiGHS column-wise with its zeros left out. :meth:`set_rhs` and :meth:`set_cost` change the model in
    place, so the next :meth:`solve` starts from the last optimal basis (HiGHS warm start).
    """

    def __init__(self, c: np.ndarray, a: np.ndarray, b: np.ndarray, lower: np.ndarray, upper: np.ndarray):
        h = _highs_module()
        self._h = h
        self.highs = h._Highs()
        self.highs.setOptionValue("output_flag", False)
        inf = h.kHighsInf
        m, nv = a.shape
        lp = h.HighsLp()
        lp.num_col_ = nv
        lp.num_row_ = m
        lp.col_cost_ = np.asarray(c, dtype=float)
        lp.col_lower_ = np.asarray(lower, dtype=float)
        lp.col_upper_ = np.where(np.isfinite(upper), upper, inf).astype(float)
        lp.row_lower_ = np.full(m, -inf)
        lp.row_upper_ = np.asarray(b, dtype=float)
        cols, rows = np.nonzero(a.T)  # column-major order of the non-zeros
        lp.a_matrix_.format_ = h.MatrixFormat.kColwise
        lp.a_matrix_.num_col_ = nv
        lp.a_matrix_.num_row_ = m
        lp.a_matrix_.start_ = np.concatenate([[0], np.cumsum(np.bincount(cols, minlength=nv))]).astype(np.int32)
        lp.a_matrix_.index_ = rows.astype(np.int32)
        lp.a_matrix_.value_ = a.T[cols, rows].astype(float)
        self.highs.passModel(lp)
        self._b = np.array(b, dtype=float)
        self._nv = nv

    def set_rhs(self, b: np.ndarray) -> None:
        lo = -self._h.kHighsInf
        changed = np.flatnonzero(np.asarray(b, dtype=float) != self._b)
        for row in changed.tolist():
            self.highs.changeRowBounds(row, lo, float(b[row]))
        self._b = np.array(b, dtype=float)

    def set_cost(self, c: np.ndarray) -> None:
        self.highs.changeColsCost(self._nv, np.arange(self._nv, dtype=np.int32), np.asarray(c, dtype=float))

    def solve(self) -> np.ndarray | None:
        """The optimum, or None when the LP is infeasible."""
        self.highs.run()
        status = self.highs.getModelStatus()
        ms = self._h.HighsModelStatus
        if status == ms.kInfeasible:
            return None
        if status != ms.kOptimal:
            raise SolveError(f"HiGHS: {self.highs.modelStatusToString(status)}")
        return np.asarray(self.highs.getSolution().col_value, dtype=float)


def base_rows(problem: Problem, extra: int) -> tuple[np.ndarray, np.ndarray]:
    """Gavel's base constraints as dense rows: each job's fractions sum to <= 1; each type's GPUs."""
    n, k = problem.n, problem.k
    a = np.zeros((n + k, n * k + extra))
    idx = np.arange(n * k)
    a[idx // k, idx] = 1.0
    a[n + idx % k, idx] = np.repeat(problem.scale_factor.astype(float), k)
    b = np.concatenate([np.ones(n), problem.gpus.astype(float)])
    return a, b


def per_job_rows(problem: Problem, coeff: np.ndarray, extra_col: int | None, extra_coeff: np.ndarray | None,
                 extra: int) -> np.ndarray:
    """Row i: ``-sum_j coeff[i, j] X[i, j] (+ extra_coeff[i] * v_extra)``."""
    n, k = problem.n, problem.k
    a = np.zeros((n, n * k + extra))
    idx = np.arange(n * k)
    a[idx // k, idx] = -coeff.reshape(-1)
    if extra_col is not None:
        a[np.arange(n), n * k + extra_col] = extra_coeff
    return a


def bounds(problem: Problem, extra_upper: list[float] = ()) -> tuple[np.ndarray, np.ndarray]:
    """``0 <= X <= 1`` and the extra variables' ``0 <= v <= upper``."""
    nk = problem.n * problem.k
    lower = np.zeros(nk + len(extra_upper))
    upper = np.concatenate([np.ones(nk), np.asarray(extra_upper, dtype=float)])
    return lower, upper


def solve(c: np.ndarray, a: np.ndarray, b: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray | None:
    """One LP solved cold: the optimum, or None when infeasible."""
    return Lp(c, a, b, lower, upper).solve()


def to_allocation(v: np.ndarray, problem: Problem) -> np.ndarray:
    return np.clip(v[: problem.n * problem.k].reshape(problem.n, problem.k), 0.0, 1.0)
