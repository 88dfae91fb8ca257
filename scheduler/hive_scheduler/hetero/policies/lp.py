"""Linear programs over an allocation, solved by HiGHS (the copy scipy ships), kept warm between solves.

Variables: ``X`` flattened row-major (job i, type j -> i*k + j), then any extra variables the policy
adds. The base rows are Gavel's: each job's time fractions sum to <= 1, each type's GPUs are not
over-committed (scale factor x fraction), ``0 <= X <= 1``. Rows are sparse (``{column: value}``);
zeros are left out.

HiGHS is reached without ``scipy.optimize`` and without numpy: importing ``scipy.optimize`` costs
about 0.45 s of CPU (it imports every optimiser scipy has), ``scipy`` itself and numpy about 0.1 s,
where HiGHS's own extension module loads in ~25 ms. :func:`_highs_module` finds scipy's compiled
HiGHS module on disk (without running scipy's ``__init__``) and loads it by its file; it falls back
to the ordinary import where that fails. The model is handed over as plain lists: the binding takes
lists for every field but the costs (whose setter imports numpy), so the costs are set column by
column after ``passModel`` on a model that starts with zero costs (same model, same solutions: the
tests compare them with the numpy hand-over). An :class:`Lp` keeps its model in one HiGHS instance,
so a policy that solves a sequence of LPs differing only in right-hand sides (a bisection) re-solves
from the previous optimal basis instead of from scratch.
"""

from __future__ import annotations

import _thread
import math
import sys
from collections.abc import Sequence
from itertools import accumulate

from .base import Problem

_CORE = "scipy.optimize._highspy._core"

Row = dict[int, float]  # column -> coefficient


class SolveError(RuntimeError):
    pass


def _highs_module():
    """scipy's HiGHS extension module, loaded by its file (not through ``scipy`` or ``scipy.optimize``) once."""
    mod = sys.modules.get(_CORE)
    if mod is not None:
        return mod
    try:
        import glob
        import importlib.util
        import os

        found_scipy = importlib.util.find_spec("scipy")  # finds the package without running its __init__
        if found_scipy is None or not found_scipy.submodule_search_locations:
            raise ImportError("scipy")
        found = []
        for where in found_scipy.submodule_search_locations:
            pattern = os.path.join(where, "optimize", "_highspy", "_core.*")
            found += [p for p in glob.glob(pattern) if p.endswith((".so", ".pyd"))]
        spec = importlib.util.spec_from_file_location(_CORE, found[0]) if found else None
        if spec is None or spec.loader is None:
            raise ImportError("scipy/optimize/_highspy/_core")
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


_template: list = []  # [HighsLp with zero costs for at least this many columns, that many] (see the module)
_template_lock = _thread.allocate_lock()  # the template is filled in and copied into HiGHS by one thread at a time


def _model_with_columns(h, nv: int):
    """A HighsLp whose costs are +0.0 for ``nv`` columns or more: HiGHS takes a cost list longer than the
    model's columns (it reads the first ``num_col_``), so one grows by doubling and serves every LP."""
    if not _template or _template[1] < nv:
        size = max(nv, 2 * _template[1] if _template else 256)
        maker = h._Highs()
        maker.setOptionValue("output_flag", False)
        for _ in range(size):
            maker.addVar(0.0, 0.0)
        _template[:] = [maker.getLp(), size]
    return _template[0]


class Lp:
    """``min c.v`` s.t. ``rows v <= b`` and ``lower <= v <= upper``, in one HiGHS instance.

    ``rows`` are sparse (``{column: coefficient}``, one dict a row); they are handed to HiGHS
    column-wise with their zeros left out. :meth:`set_rhs` and :meth:`set_cost` change the model in
    place, so the next :meth:`solve` starts from the last optimal basis (HiGHS warm start).
    """

    def __init__(self, c: Sequence[float], rows: Sequence[Row] | Columns, b: Sequence[float],
                 lower: Sequence[float], upper: Sequence[float]):
        h = _highs_module()
        self._h = h
        self.highs = h._Highs()
        self.highs.setOptionValue("output_flag", False)
        # one thread: the simplex that solves these LPs (a few hundred columns) is serial anyway, and
        # HiGHS's pool of worker threads cost ~8 ms of CPU in a process of 76 solves (same optima)
        self.highs.setOptionValue("threads", 1)
        inf = h.kHighsInf
        nv = len(c)
        if isinstance(rows, Columns):
            m, start, index, values = rows.rows, rows.start, rows.index, rows.values
        else:
            m = len(rows)
            # column-wise, each column's entries by row: (column, row, value) sorted
            entries = sorted((col, r, value) for r, row in enumerate(rows) for col, value in row.items() if value != 0)
            counts = [0] * nv
            for e in entries:
                counts[e[0]] += 1
            start = [0, *accumulate(counts)]
            index = [e[1] for e in entries]
            values = [float(e[2]) for e in entries]
        with _template_lock:
            lp = _model_with_columns(h, nv)
            lp.num_col_ = nv
            lp.num_row_ = m
            lp.col_lower_ = [float(v) for v in lower]
            lp.col_upper_ = [float(v) if v != float("inf") else inf for v in upper]
            lp.row_lower_ = [-inf] * m
            lp.row_upper_ = [float(v) for v in b]
            lp.a_matrix_.format_ = h.MatrixFormat.kColwise
            lp.a_matrix_.num_col_ = nv
            lp.a_matrix_.num_row_ = m
            lp.a_matrix_.start_ = start
            lp.a_matrix_.index_ = index
            lp.a_matrix_.value_ = values
            status = self.highs.passModel(lp)  # HiGHS copies the model
        if status == h.HighsStatus.kError:
            raise SolveError(f"HiGHS refused the LP ({m} rows, {nv} columns)")
        self._nv = nv
        self.set_cost(c, _from_zero=True)
        self._b = [float(v) for v in b]

    def set_rhs(self, b: Sequence[float]) -> None:
        lo = -self._h.kHighsInf
        new = [float(v) for v in b]
        for row, (was, now) in enumerate(zip(self._b, new)):
            if now != was:
                self.highs.changeRowBounds(row, lo, now)
        self._b = new

    def set_cost(self, c: Sequence[float], _from_zero: bool = False) -> None:
        """The objective's coefficients (``_from_zero``: the model's are all +0.0, left as they are where ``c`` has +0.0)."""
        change = self.highs.changeColCost
        for col, value in enumerate(c):
            value = float(value)
            if not _from_zero or value != 0.0 or math.copysign(1.0, value) < 0:
                change(col, value)

    def solve(self) -> list[float] | None:
        """The optimum, or None when the LP is infeasible."""
        self.highs.run()
        status = self.highs.getModelStatus()
        ms = self._h.HighsModelStatus
        if status == ms.kInfeasible:
            return None
        if status != ms.kOptimal:
            raise SolveError(f"HiGHS: {self.highs.modelStatusToString(status)}")
        return [float(v) for v in self.highs.getSolution().col_value]


class Columns:
    """A constraint matrix already column-wise (HiGHS's form): ``rows`` rows; column j's entries are
    ``index[start[j]:start[j + 1]]`` (rows, ascending) and ``values[...]`` (no zeros)."""

    __slots__ = ("rows", "start", "index", "values")

    def __init__(self, rows: int, start: list[int], index: list[int], values: list[float]):
        self.rows, self.start, self.index, self.values = rows, start, index, values


def allocation_columns(problem: Problem, per_job: Sequence[Sequence[float]] | None = None,
                       extra_col: bool = False, total: Sequence[float] | None = None) -> Columns:
    """The matrix of ``base_rows``, then (``per_job``) ``per_job_rows(problem, per_job, 0 if extra_col
    else None, [1.0] * n)``, or (``total``) one row ``-total . X``: the same entries as those rows
    handed to :class:`Lp`, built column by column (no dicts, no sort)."""
    n, k = problem.n, problem.k
    base = n + k
    start = [0]
    index: list[int] = []
    values: list[float] = []
    at = 0
    for i, sf in enumerate(problem.scale_factor):
        sf = float(sf)
        own = per_job[i] if per_job is not None else None
        for t in range(k):
            index.append(i)
            index.append(n + t)
            values.append(1.0)
            values.append(sf)
            at += 2
            if own is not None:
                v = -own[t]
                if v != 0:
                    index.append(base + i)
                    values.append(float(v))
                    at += 1
            elif total is not None:
                v = -total[i * k + t]
                if v != 0:
                    index.append(base)
                    values.append(float(v))
                    at += 1
            start.append(at)
    if extra_col:
        index.extend(range(base, base + n))
        values.extend([1.0] * n)
        start.append(at + n)
    rows = base + (n if per_job is not None else 1 if total is not None else 0)
    return Columns(rows, start, index, values)


def base_rhs(problem: Problem) -> list[float]:
    """The right-hand sides of :func:`base_rows`."""
    return [1.0] * problem.n + [float(g) for g in problem.gpus]


def base_rows(problem: Problem, extra: int = 0) -> tuple[list[Row], list[float]]:
    """Gavel's base constraints: each job's fractions sum to <= 1; each type's GPUs. (``extra``: the
    policy's own variables after X, which these rows leave out.)"""
    n, k = problem.n, problem.k
    rows = [{i * k + t: 1.0 for t in range(k)} for i in range(n)]
    sf = [float(s) for s in problem.scale_factor]
    rows += [{i * k + t: sf[i] for i in range(n)} for t in range(k)]
    return rows, [1.0] * n + [float(g) for g in problem.gpus]


def per_job_rows(problem: Problem, coeff: Sequence[Sequence[float]], extra_col: int | None = None,
                 extra_coeff: Sequence[float] | None = None) -> list[Row]:
    """Row i: ``-sum_j coeff[i, j] X[i, j] (+ extra_coeff[i] * v_extra)``."""
    n, k = problem.n, problem.k
    rows = [{i * k + t: -coeff[i][t] for t in range(k)} for i in range(n)]
    if extra_col is not None:
        for i in range(n):
            rows[i][n * k + extra_col] = extra_coeff[i]
    return rows


def bounds(problem: Problem, extra_upper: Sequence[float] = ()) -> tuple[list[float], list[float]]:
    """``0 <= X <= 1`` and the extra variables' ``0 <= v <= upper``."""
    nk = problem.n * problem.k
    return [0.0] * (nk + len(extra_upper)), [1.0] * nk + [float(u) for u in extra_upper]


def solve(c: Sequence[float], rows: Sequence[Row], b: Sequence[float], lower: Sequence[float],
          upper: Sequence[float]) -> list[float] | None:
    """One LP solved cold: the optimum, or None when infeasible."""
    return Lp(c, rows, b, lower, upper).solve()


def to_allocation(v: Sequence[float], problem: Problem) -> list[list[float]]:
    k = problem.k
    return [[min(max(v[i * k + t], 0.0), 1.0) for t in range(k)] for i in range(problem.n)]
