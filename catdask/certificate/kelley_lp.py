"""The LP of the SDP-dual search's Kelley cutting planes, solved by HiGHS without linprog."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

try:  # SciPy's bundled HiGHS (private: the fallback below keeps linprog's behaviour)
    from scipy.optimize._highspy import _core as _highs

    _INF = float(_highs.kHighsInf)
    _OPTIMAL = _highs.HighsModelStatus.kOptimal
except (ImportError, AttributeError):  # pragma: no cover - other SciPy versions
    _highs = None

#: linprog's feasibility check of a returned point (``_check_result``: ``10 sqrt(tol)``).
_CHECK_TOL = 10.0 * np.sqrt(1e-9)
_OPTIONS = None


def _options():
    """The options linprog(method="highs") passes to HiGHS at its defaults (built once)."""
    global _OPTIONS
    if _OPTIONS is None:
        opts = _highs.HighsOptions()
        opts.presolve = "on"
        opts.highs_debug_level = _highs.HighsDebugLevel.kHighsDebugLevelNone
        opts.log_to_console = False
        opts.output_flag = False
        opts.simplex_strategy = _highs.simplex_constants.SimplexStrategy.kSimplexStrategyDual
        _OPTIONS = opts
    return _OPTIONS


def solve_kelley_lp(A_ub, b_ub, lo, hi, s_cap):
    """``min -s`` over ``x = (nu, s)`` with ``A_ub x <= b_ub``, ``lo <= nu <= hi``,
    ``s <= s_cap`` (s free below): ``(status, x, fun)`` as linprog's ``status``, ``x`` and
    ``fun`` (status 0: solved; x and fun None otherwise)."""
    A_ub = np.asarray(A_ub, dtype=float)
    b_ub = np.asarray(b_ub, dtype=float)
    K = lo.size
    c = np.append(np.zeros(K), -1.0)
    if _highs is None:
        res = linprog(c, A_ub=A_ub, b_ub=b_ub,
                      bounds=[(a, b) for a, b in zip(lo, hi)] + [(None, s_cap)],
                      method="highs")
        return res.status, res.x, res.fun
    m, n = A_ub.shape
    lb = np.append(np.asarray(lo, dtype=float), -_INF)
    ub = np.append(np.asarray(hi, dtype=float), float(s_cap))
    rhs = b_ub.copy()
    for v in (lb, ub, rhs):  # linprog's _replace_inf
        inf = np.isinf(v)
        v[inf] = np.sign(v[inf]) * _INF
    # Column-wise sparse storage of the nonzeros, as scipy.sparse.csc_array(A_ub) stores them.
    mask = A_ub.T != 0.0
    lp = _highs.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = m
    lp.a_matrix_.num_col_ = n
    lp.a_matrix_.num_row_ = m
    lp.a_matrix_.format_ = _highs.MatrixFormat.kColwise
    lp.col_cost_ = c
    lp.col_lower_ = lb
    lp.col_upper_ = ub
    lp.row_lower_ = np.full(m, -_INF)
    lp.row_upper_ = rhs
    lp.a_matrix_.start_ = np.concatenate(([0], np.cumsum(mask.sum(axis=1)))).astype(np.int32)
    lp.a_matrix_.index_ = np.nonzero(mask)[1].astype(np.int32)
    lp.a_matrix_.value_ = A_ub.T[mask]
    highs = _highs._Highs()
    if highs.passOptions(_options()) == _highs.HighsStatus.kError \
            or highs.passModel(lp) == _highs.HighsStatus.kError \
            or highs.run() == _highs.HighsStatus.kError \
            or highs.getModelStatus() != _OPTIMAL:
        return 2, None, None  # not solved (the caller stops the search, as on any status)
    solution = highs.getSolution()
    x = np.array(solution.col_value)
    fun = float(highs.getInfo().objective_function_value)
    # linprog's _check_result: a point outside the bounds or constraints is not a solution.
    slack = rhs - np.array(solution.row_value)
    if np.isnan(x).any() or np.isnan(fun) or (slack < -_CHECK_TOL).any() \
            or not np.all((x >= lb - _CHECK_TOL) & (x <= ub + _CHECK_TOL)):
        return 4, x, fun
    return 0, x, fun
