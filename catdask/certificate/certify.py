"""The entry point: :func:`certify_global_optimum` climbs the linear ladder (:mod:`.levels`)
and renders the certificate, its reason included, once from the trail of outcomes."""

from __future__ import annotations

import dataclasses
import logging
import time

import numpy as np

from .bounds import relative_gap, trivial_bound
from .budget import DEFAULT_BUDGET, CertificateBudget
from .eigen import weakest_check
from .ladder import CERTIFIED, climb
from .levels import LINEAR_LADDER, LinearState
from .point import CannotTest, ClassMatrixOperator, StationaryPoint, read_inputs
from .record import Certificate, not_certified
from .resources import estimated_seconds, numerical_failures, one_blas_thread, size_guard

logger = logging.getLogger("catdask.certificate")


def certify_global_optimum(
    scatter: np.ndarray | ClassMatrixOperator,
    W: np.ndarray,
    *,
    tol: float = 1e-6,
    full_sdp: bool | str = "auto",
    rng: None | int | np.random.Generator = None,
    moment: bool = False,
    budget: CertificateBudget = DEFAULT_BUDGET,
    dual_out: dict | None = None,
    search_bound: bool = True,
) -> Certificate:
    """Test whether W globally maximises ``f(W) = 1/2 sum_k w_k^T R_k w_k`` on the Stiefel manifold.

    Never raises on well-formed input: a numerical failure (:func:`numerical_failures`) gives
    ``certified=False`` with a reason naming it; a bug propagates.

    Parameters
    ----------
    scatter : ndarray of shape (K, D, D) or ClassMatrixOperator
        The class matrices R_k (symmetric PSD), or a :class:`~.point.ClassMatrixOperator`
        (``apply(k, V) = R_k @ V``), materialised when ``D <= budget.dense_max_dim``.
    W : ndarray of shape (D, K)
        The point, with orthonormal columns. If ``1e-10 < ||W^T W - I||_2 <= 1e-2``, W is
        replaced by its polar factor (the reason says so); a larger error is reported as not
        certified.
    tol : float, default=1e-6
        Relative verification tolerance: a condition "X NSD" passes when
        ``lambda_max(X) <= tol * scale`` with ``scale = max_k ||R_k||_2`` (``max_k lambda_max(R_k)``
        for operators). When W is certified, every orthonormal W' has
        ``f(W') <= verified_upper_bound <= f(W) + K * tol * scale``.
    full_sdp : {"auto", True, False}, default="auto"
        Whether, when W is not certified, to bound ``max f`` with the full SDP relaxation
        (needs cvxpy and clarabel). ``"auto"`` does so when ``D <= budget.max_sdp_dim``.
    rng : None, int or numpy.random.Generator
        Seeds the Lanczos start vectors.
    moment : bool, default=False
        When the SDP-dual test does not certify W, try the level-2 moment relaxation
        (:mod:`.moment`; needs cvxpy): W is certified (``method="moment"``) when its rigorous
        bound is within ``tol`` of f(W), relative; otherwise the bound is used if it is the
        tightest. Needs the class matrices as arrays. The reason records the solver and time.
    budget : CertificateBudget
        The thresholds, each documented in :mod:`.budget`. Above ``dense_max_dim`` the search
        uses Lanczos (``eigen_check`` records how the bounds were proved), the cheap bounds are
        proved only where they could beat the best one (the reason names those skipped), and
        for arrays the test's time is estimated first (:func:`estimated_seconds`): above
        ``max_seconds`` it is "not attempted: D too large (estimated ... s)".
    dual_out : dict, optional
        When W is not certified, receives the cheap bound's dual point ``Y = V T V^T`` as
        ``V`` and ``T`` (used by the low-rank kernel test to lift it, docs/design.md §4c).
    search_bound : bool, default=True
        When W is not certified, search for a tight upper bound (reduced, subspace and full SDP
        bounds). False: the SDP-dual test's own bound only (the low-rank test's probe, which
        needs only whether W is certified).

    Returns
    -------
    Certificate

    Raises
    ------
    ValueError
        Malformed arguments: ``tol``, ``full_sdp``, or shapes of ``scatter`` and ``W``.

    Notes
    -----
    How the nu-test is verified at an inexact stationary point (a 2 x 2 bound per class), the
    bound its margins give (``verified_upper_bound``), the necessary nu interval whose emptiness
    refutes W, and why the cutting planes stay valid for inexact eigenvectors: docs/design.md
    section 4 and :mod:`.sdp_dual`.

    References
    ----------
    .. [1] Smith & Rangarajan, "A Category Space Approach to Supervised Dimensionality Reduction"
       (eqs. (42), (50) and Rapcsák's condition).
    .. [2] Gilman, Burer & Balzano, "A semidefinite relaxation for sums of heterogeneous quadratic
       forms on the Stiefel manifold", arXiv:2205.13653.

    Examples
    --------
    >>> import numpy as np
    >>> R = np.stack([np.diag([5.0, 1.0, 0.0]), np.diag([1.0, 4.0, 0.5])])
    >>> cert = certify_global_optimum(R, np.eye(3)[:, :2])
    >>> cert.certified, cert.objective
    (True, 4.5)
    """
    t0 = time.perf_counter()
    if full_sdp not in ("auto", True, False):
        raise ValueError(f"full_sdp must be 'auto', True or False. Got {full_sdp!r} instead.")
    if not (np.isfinite(tol) and 0 < tol < 1):
        raise ValueError(f"tol must be in (0, 1). Got tol = {tol!r} instead.")
    if not (budget.max_seconds > 0):
        raise ValueError(f"max_seconds must be > 0. Got max_seconds = {budget.max_seconds!r} "
                         "instead.")
    rng = np.random.default_rng(rng)
    inputs = read_inputs(scatter, W, int(budget.dense_max_dim))
    state = LinearState(None, full_sdp, moment, dual_out, search_bound)
    blas = one_blas_thread()  # the size guard's probe too: it times what the test will run
    try:
        refused = size_guard(inputs, int(budget.dense_max_dim), budget.max_seconds, tol, t0)
        if refused is not None:
            return refused
        state.point = StationaryPoint(inputs, tol=tol, budget=budget, rng=rng)
        # One BLAS thread for the moment level too (SCS has its own; docs/design.md §4b).
        trail = climb(LINEAR_LADDER, budget, state)
        return _render(state, trail, t0)
    except CannotTest as exc:
        why = str(exc)
    except numerical_failures() as exc:  # never crash a fit on a numerical failure
        why = f"{type(exc).__name__}: {exc}"
    finally:
        blas.restore_original_limits()
    point = state.point
    objective = np.nan if point is None else point.f * point.unit
    return not_certified(
        f"not certified: the test could not run ({state.stage}: {why})",
        objective=objective, tol=tol, seconds=time.perf_counter() - t0,
    )


def _render(state, trail, t0):
    """The Certificate of a completed climb, in the caller's units: the SDP-dual level's
    verdict, the bound levels' smallest bound and the moment level's; the reason is each
    level's clause, joined in the order the levels ran."""
    point, sdp = state.point, state.sdp
    tau, f, unit = point.tau, point.f, point.unit
    rap_lmax = state.rap_lmax
    rapcsak = bool(rap_lmax <= tau)
    certified = state.certified
    method = "sdp-dual" if sdp["passed"] else ("rapcsak" if rapcsak else None)
    if certified:
        # Reported bound = f(W) (gap 0); the verified bound includes the tolerance's slack.
        upper, bound_method = f, "certificate"
        if sdp["passed"]:
            verified = max(sdp["bound"], f)
            reason = (
                "certified by the SDP-dual test (arXiv:2205.13653): verified margin "
                f"{sdp['margin'] / point.scale:.1e} * scale >= -tol = {-point.tol:.0e}, so "
                f"every orthonormal W' has f(W') <= f(W) + {(verified - f) * unit:.1e}"
            )
        else:
            verified = f + 0.5 * point.K * max(0.0, rap_lmax)
            reason = (
                f"certified by Rapcsák's condition: lambda_max = {rap_lmax / point.scale:.1e} "
                f"* scale <= tol = {point.tol:.0e}, so every orthonormal W' has f(W') <= f(W) + "
                f"{(verified - f) * unit:.1e}"
            )
    elif state.search_bound:
        state.stage = "the upper bound"
        upper, bound_method, reason = _searched_bound(state, trail)
        verified = upper
    else:
        bounds = [trivial_bound(point)] + ([sdp["bound"]] if sdp["bound"] is not None else [])
        upper, bound_method = max(min(bounds), f), "reduced"
        verified, reason = upper, sdp["reason"] + "; no bound search (search_bound=False)"
    gap = 0.0 if certified else relative_gap(upper, f, tau)
    checks = list(point.eigen_checks)  # after the bound, which may have proved more
    if method == "rapcsak":
        checks.append(state.rap_check)
    if point.notes:
        reason += "; " + "; ".join(point.notes)
    cert = Certificate(
        applicable=True,
        certified=bool(certified),
        method=method,
        objective=float(f * unit),
        upper_bound=float(upper * unit),
        bound_method=bound_method,
        gap=float(gap),
        rapcsak=rapcsak,
        rapcsak_lambda_max=float(rap_lmax / point.scale),
        sdp_margin=float(sdp["margin"] / point.scale),
        nu=None if sdp["nu"] is None else tuple(float(v) * unit for v in sdp["nu"]),
        first_order=float(max(point.asymmetry, point.stationarity)),
        asymmetry=float(point.asymmetry),
        stationarity=float(point.stationarity),
        tol=float(point.tol),
        seconds=time.perf_counter() - t0,
        reason=reason,
        verified_upper_bound=float(verified * unit),
        eigen_check=weakest_check(checks),
        status=trail[0].status,
    )
    moment = [o for o in trail if o.level == "moment"]
    return _with_moment(point, cert, moment[0], t0) if moment and moment[0].note else cert


def _searched_bound(state, trail):
    """(bound, where from, reason) when W is not certified: the smallest valid bound. The
    pending cheap bounds whose proved lower bound is below it are proved now; the reason
    names the others."""
    point, f = state.point, state.point.f
    state.settle(lambda low: low < state.best())
    upper, bound_method = min(state.bounds, key=lambda b: b[0])
    upper = max(upper, f)  # a valid bound is never below an attained value
    clauses = [state.sdp["reason"]]
    clauses += [o.note for o in trail[1:] if o.note and o.level != "moment"]
    for name, low, _ in state.pending:
        clauses.append(f"{name} not proved: it is >= {low * point.unit:.10g} (relative gap "
                       f"{relative_gap(max(low, f), f, point.tau):.1e})")
    return upper, bound_method, "; ".join(clauses)


def _with_moment(point, cert, outcome, t0):
    """``cert`` with the moment level's outcome: its proof, its tighter bound, or its clause."""
    seconds = time.perf_counter() - t0
    mb = outcome.evidence
    if mb is None:  # not attempted: the reason says why
        return dataclasses.replace(cert, reason=f"{cert.reason}; {outcome.note}")
    f, unit = point.f, point.unit
    # The proof data in the caller's units (unit is a power of two: the scaling is exact), kept
    # with the certificate so that it can be re-verified without re-solving.
    dual = dataclasses.replace(mb.dual, scale=mb.dual.scale * unit,
                               class_matrices=point.R_all * unit)
    if outcome.status == CERTIFIED:
        return dataclasses.replace(
            cert, certified=True, method="moment", upper_bound=float(f * unit),
            bound_method="certificate", gap=0.0, moment_dual=dual, status=CERTIFIED,
            verified_upper_bound=float(max(mb.upper_bound, f) * unit), seconds=seconds,
            reason=f"certified by the {outcome.note} <= tol = {point.tol:.0e}; {cert.reason}",
        )
    reason = f"{cert.reason}; not certified by the {outcome.note}"
    if mb.upper_bound * unit < cert.upper_bound:
        upper = max(mb.upper_bound, f)
        return dataclasses.replace(
            cert, upper_bound=float(upper * unit), bound_method="moment", moment_dual=dual,
            gap=float(relative_gap(upper, f, point.tau)),
            verified_upper_bound=float(upper * unit), seconds=seconds, reason=reason,
        )
    return dataclasses.replace(cert, seconds=seconds, reason=reason)
