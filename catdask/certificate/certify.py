"""The entry point: :func:`certify_global_optimum` runs the tests in order and records them."""

from __future__ import annotations

import dataclasses
import logging
import math
import time

import numpy as np

from .bounds import (
    MAX_SDP_DIM,
    full_sdp_bound,
    reduced_bound,
    relative_gap,
    trivial_bound,
    want_full_sdp,
)
from .eigen import DENSE_MAX_DIM, weakest_check
from .moment import MAX_PSD_BLOCK, RelaxationTooLarge, moment_relaxation_bound
from .point import CannotTest, ClassMatrixOperator, StationaryPoint, read_inputs
from .rapcsak import rapcsak_lambda_max
from .record import Certificate, not_certified
from .resources import estimated_seconds, numerical_failures, one_blas_thread, size_guard
from .sdp_dual import sdp_dual_test
from .subspace_dual import have_small_sdp_solver, subspace_dual_bound

__all__ = ["certify_global_optimum", "estimated_seconds", "numerical_failures", "one_blas_thread"]

logger = logging.getLogger("catdask.certificate")

#: Default of ``max_seconds``: a larger estimated cost is not attempted.
MAX_SECONDS = 300.0
#: The subspace dual bound (seconds of L-BFGS) refines only a cheap bound whose relative gap is
#: above this (blobs, D = 50, K = 10: 1.6 s for 6.4e-4 -> 5.4e-4, docs/design.md §4).
SUBSPACE_MIN_GAP = 1e-3


def certify_global_optimum(
    scatter: np.ndarray | ClassMatrixOperator,
    W: np.ndarray,
    *,
    tol: float = 1e-6,
    full_sdp: bool | str = "auto",
    max_sdp_dim: int = MAX_SDP_DIM,
    dense_max_dim: int = DENSE_MAX_DIM,
    rng: None | int | np.random.Generator = None,
    moment: bool = False,
    max_moment_block: int = MAX_PSD_BLOCK,
    max_seconds: float = MAX_SECONDS,
    dual_out: dict | None = None,
    search_bound: bool = True,
) -> Certificate:
    """Test whether W globally maximises ``f(W) = 1/2 sum_k w_k^T R_k w_k`` on the Stiefel manifold.

    Runs Rapcsák's test and the SDP-dual test of Gilman, Burer & Balzano (docs/design.md
    section 4), verifies any candidate by eigenvalue upper bounds, and bounds ``max f`` from
    above when W is not certified. The test never raises on well-formed input: a numerical
    failure (a LAPACK or ARPACK error, a solver without an answer, W off the manifold,
    ``D < K`` on rank-deficient data, overflow; :func:`numerical_failures`) gives a certificate
    with ``certified=False`` whose ``reason`` names what failed. A bug propagates.

    Parameters
    ----------
    scatter : ndarray of shape (K, D, D) or ClassMatrixOperator
        The class matrices R_k (symmetric PSD), or a :class:`~.point.ClassMatrixOperator`:
        attributes ``n_features`` (D), ``n_classes`` (K) and a method ``apply(k, V)``
        returning ``R_k @ V`` for V of shape (D, m). Operators with ``D <= dense_max_dim`` are materialised (K products with I_D).
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
        (needs cvxpy and clarabel). ``"auto"`` does so when ``D <= max_sdp_dim``.
    max_sdp_dim : int, default=20
        Largest D for the full SDP under ``"auto"`` (memory grows fast: >21 GB at D = 100).
    dense_max_dim : int, default=200
        Largest D for dense eigendecompositions in the search (Kelley cutting planes, reduced
        bound); larger problems search with Lanczos. Verified bounds use dense ``eigh`` up to
        D = 1000 and a Cholesky-proved Lanczos estimate above it, or above 200 where the search
        holds the estimate, whenever the R_k are arrays (``eigen_check`` records which); only
        operators with ``D > dense_max_dim`` rely on Lanczos alone. Above ``dense_max_dim``
        the trivial bound and the SDP-dual test's bound at nu are proved only where a proved
        lower bound on them is below the best bound (the reason names those skipped).
    rng : None, int or numpy.random.Generator
        Seeds the Lanczos start vectors.
    moment : bool, default=False
        When the SDP-dual test does not certify W, try the level-2 moment relaxation
        (:mod:`.moment`; needs cvxpy): W is certified (``method="moment"``) when its rigorous
        bound is within ``tol`` of f(W), relative; otherwise the bound is used if it is the
        tightest. Needs the class matrices as arrays. The reason records the solver and time.
    max_moment_block : int, default=800
        Size guard of the moment relaxation: a larger PSD block is not attempted (the reason
        gives the size it would need).
    max_seconds : float, default=300
        Size guard for large D: when the class matrices are arrays with D > ``dense_max_dim``,
        the test's time is estimated first (:func:`estimated_seconds`, about ten D x D
        factorisations per class, timed on this machine at a smaller size); above
        ``max_seconds`` the test is not attempted and the certificate says so ("not
        attempted: D too large (estimated ... s)"), instead of a silent wait. ``math.inf``
        turns the guard off.
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
    Verification of the nu-test at W (docs/design.md section 4, 3c). ``M_k(nu) w_k`` equals the
    stationarity residual ``r_k`` for every nu, so M_k has a (near) zero eigenvalue along w_k.
    Writing ``x = a w_k + Q y`` (Q an orthonormal basis of the complement of w_k),
    ``lambda_max(M_k) <= lambda_max([[alpha, beta], [beta, gamma]])`` with
    ``alpha = w_k^T M_k w_k``, ``beta = ||Q^T M_k w_k||`` and ``gamma = lambda_max(Q^T M_k Q)``,
    which is what is checked; an inexact stationary point therefore only passes when its
    residual is below the tolerance. If the margins are ``-e_a`` (for (a)) and ``-e_b`` (for
    (b)), ``Y = W (S + e_a I) W^T`` with ``nu + e_b`` is dual feasible, so
    ``max f <= f(W) + K (e_a + e_b) / 2``: that bound is ``verified_upper_bound``.

    A necessary condition is ``nu_k in [lambda_max(P R_k P), Lambda_kk]`` with P the projector on
    the complement of W (``q^T M_k q = q^T R_k q - nu_k`` for q orthogonal to W and
    ``e_k^T S e_k = Lambda_kk - nu_k``). An empty interval proves W is not a global maximiser:
    replacing w_k by the top eigenvector of ``P R_k P`` raises f.

    Cutting planes use Rayleigh quotients of the eigen-solver's vectors, so they stay valid for
    inexact eigenvectors; only the verification needs upper bounds on eigenvalues
    (:func:`catdask.certificate.eigen.verified_top`).

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
    if not (max_seconds > 0):
        raise ValueError(f"max_seconds must be > 0. Got max_seconds = {max_seconds!r} instead.")
    rng = np.random.default_rng(rng)
    inputs = read_inputs(scatter, W, int(dense_max_dim))
    stage = "reading the class matrices"
    point = None
    blas = one_blas_thread()  # the size guard's probe too: it times what the test will run
    try:
        refused = size_guard(inputs, int(dense_max_dim), max_seconds, tol, t0)
        if refused is not None:
            return refused
        point = StationaryPoint(inputs, tol=tol, dense_max_dim=int(dense_max_dim), rng=rng)
        stage = "Rapcsák's test"
        rap_lmax, rap_check = rapcsak_lambda_max(point)
        stage = "the SDP-dual test"
        sdp = sdp_dual_test(point)
        stage = "the upper bound"
        cert = _record(point, rap_lmax, rap_check, sdp, full_sdp, max_sdp_dim, t0, dual_out,
                       search_bound)
        # One BLAS thread for the moment level too (SCS has its own; docs/design.md §4b).
        if moment and not cert.certified:
            stage = "the moment relaxation"
            cert = _moment_level(point, cert, int(max_moment_block), t0)
        return cert
    except CannotTest as exc:
        why = str(exc)
    except numerical_failures() as exc:  # never crash a fit on a numerical failure
        why = f"{type(exc).__name__}: {exc}"
    finally:
        blas.restore_original_limits()
    objective = np.nan if point is None else point.f * point.unit
    return not_certified(
        f"not certified: the test could not run ({stage}: {why})",
        objective=objective, tol=tol, seconds=time.perf_counter() - t0,
    )


def _record(point, rap_lmax, rap_check, sdp, full_sdp, max_sdp_dim, t0, dual_out=None,
            search_bound=True):
    """The Certificate of a completed test, in the caller's units."""
    tau, f, unit = point.tau, point.f, point.unit
    rapcsak = bool(rap_lmax <= tau)
    certified = sdp["passed"] or rapcsak
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
    elif search_bound:
        upper, bound_method, reason = _upper_bound(point, sdp, full_sdp, max_sdp_dim, dual_out)
        verified = upper
    else:
        bounds = [trivial_bound(point)] + ([sdp["bound"]] if sdp["bound"] is not None else [])
        upper, bound_method = max(min(bounds), f), "reduced"
        verified, reason = upper, sdp["reason"] + "; no bound search (search_bound=False)"
    gap = 0.0 if certified else relative_gap(upper, f, tau)
    checks = list(point.eigen_checks)  # after the bound, which may have proved more
    if method == "rapcsak":
        checks.append(rap_check)
    if point.notes:
        reason += "; " + "; ".join(point.notes)
    return Certificate(
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
    )


def _moment_level(point, cert, max_block, t0):
    """Level 2 of the hierarchy, tried only after the SDP-dual test failed (docs/design.md §4)."""
    if point.R_all is None:
        note = "moment relaxation skipped: it needs the class matrices as arrays"
        return dataclasses.replace(cert, reason=f"{cert.reason}; {note}")
    f, unit = point.f, point.unit
    try:
        mb = moment_relaxation_bound(point.R_all, W=point.W, max_psd_block=max_block,
                                     target_gap=point.tol)
        if mb.dual.anchor is not None and not mb.upper_bound - f <= point.tol * abs(f):
            # The anchored basis did not prove W: the full basis may (slower; docs 4b).
            full = moment_relaxation_bound(point.R_all, W=point.W, anchor="full",
                                           max_psd_block=max_block, target_gap=point.tol)
            mb = min((mb, full), key=lambda b: b.upper_bound)
    except (RelaxationTooLarge, ImportError) as exc:
        return dataclasses.replace(cert, reason=f"{cert.reason}; moment relaxation skipped: {exc}")
    # The proof data in the caller's units (unit is a power of two: the scaling is exact), kept
    # with the certificate so that it can be re-verified without re-solving.
    dual = dataclasses.replace(mb.dual, scale=mb.dual.scale * unit,
                               class_matrices=point.R_all * unit)
    plain = cert
    cert = dataclasses.replace(cert, moment_dual=dual)  # kept only where its bound is used
    gap = max(0.0, (mb.upper_bound - f) / abs(f)) if f else math.inf
    how = (f"level-2 moment relaxation ({mb.solver}, {mb.n_moments:,} moments, largest PSD "
           f"block {max(mb.block_sizes)}, {mb.iterations} iterations, {mb.seconds:.1f} s): "
           f"rigorous bound "
           f"{mb.upper_bound * unit:.10g}, relative gap {gap:.1e}"
           + ("" if mb.status in ("optimal", "solved") else f", solver status {mb.status}"))
    seconds = time.perf_counter() - t0
    if gap <= point.tol:
        return dataclasses.replace(
            cert, certified=True, method="moment", upper_bound=float(f * unit),
            bound_method="certificate", gap=0.0,
            verified_upper_bound=float(max(mb.upper_bound, f) * unit), seconds=seconds,
            reason=f"certified by the {how} <= tol = {point.tol:.0e}; {cert.reason}",
        )
    if mb.upper_bound * unit < cert.upper_bound:
        upper = max(mb.upper_bound, f)
        return dataclasses.replace(
            cert, upper_bound=float(upper * unit), bound_method="moment",
            gap=float(relative_gap(upper, f, point.tau)),
            verified_upper_bound=float(upper * unit), seconds=seconds,
            reason=f"{cert.reason}; not certified by the {how}",
        )
    return dataclasses.replace(plain, seconds=seconds,
                               reason=f"{cert.reason}; not certified by the {how}")


def _upper_bound(point, sdp, full_sdp, max_sdp_dim, dual_out=None):
    """(bound, where from, reason) when W is not certified: the smallest valid bound.

    Above ``dense_max_dim`` two bounds cost K eigenvalue proofs of order D each (the trivial
    bound, the SDP-dual test's bound at its nu) and are held *pending* with a proved lower
    bound on their value (Rayleigh quotients): one is proved only where it could decide
    something, i.e. where its lower bound is below the smallest proved bound (or within
    ``SUBSPACE_MIN_GAP``, where it decides whether the subspace bound runs). Skipping one
    whose lower bound is already beaten leaves the result unchanged (docs/design.md §4).
    """
    f = point.f
    bounds, pending, skipped = [], [], []
    if point.dense:
        bounds.append((trivial_bound(point), "reduced"))
    else:
        low = 0.5 * float(np.sum(point.lam_low_R)) - point.K * point.round_guard()
        pending.append(("trivial bound", low, lambda: trivial_bound(point)))
    if sdp["bound"] is not None:
        bounds.append((sdp["bound"], "reduced"))
    elif sdp.get("verify") is not None:
        def nu_bound():
            verified = sdp["verify"]()
            sdp["margin"] = verified["margin"]  # reported as verified from now on
            return verified["bound"]
        pending.append(("SDP-dual bound at nu", sdp["bound_low"], nu_bound))

    def settle(could_matter):
        """Prove the pending bounds whose lower bound ``could_matter``; keep the others."""
        for item in list(pending):
            if could_matter(item[1]):
                pending.remove(item)
                bounds.append((item[2](), "reduced"))

    def best():
        return min((b for b, _ in bounds), default=math.inf)

    use_sdp, why_not = want_full_sdp(full_sdp, point.D, max_sdp_dim)
    subspace_note = None
    reduced_done = False
    if point.dense:
        # Dense eigendecompositions: the projected-subgradient bound costs a few K eigh of
        # order D (0.06 s at D = 50, K = 10), the subspace bound ~20x that (docs/design.md §4).
        bounds.append((reduced_bound(point, sdp["nu"], sdp["directions"], out=dual_out),
                       "reduced"))
        reduced_done = True
    # A pending bound within SUBSPACE_MIN_GAP may make the subspace bound unnecessary.
    settle(lambda low: relative_gap(max(low, f), f, point.tau) <= SUBSPACE_MIN_GAP)
    cheap_gap = relative_gap(max(best(), f), f, point.tau)
    wants_subspace = (not use_sdp and full_sdp is not False and point.R_all is not None
                      and point.K < point.D)
    if wants_subspace and cheap_gap <= SUBSPACE_MIN_GAP:
        wants_subspace = False
        subspace_note = (f"subspace dual bound skipped: the cheap bound's relative gap "
                         f"{cheap_gap:.1e} is already <= {SUBSPACE_MIN_GAP:g}")
    if wants_subspace and have_small_sdp_solver():
        # Too large for the full SDP: its dual restricted to a growing subspace (still a
        # "reduced" bound, Y = V T V^T, T from a small model; docs/design.md §4). Arrays only:
        # an operator keeps to matvecs (the projected-subgradient bound).
        try:
            bound, info = subspace_dual_bound(point, sdp["directions"], sdp["nu"])
            bounds.append((bound, "reduced"))
            subspace_note = _subspace_note(point, bound, info)
            if dual_out is not None:  # its dual point, in the caller's units, for the lifts
                dual_out["subspace"] = (info["V"], info["T"] * point.unit)
        except numerical_failures() as exc:  # solver failure: the projected-subgradient bound
            subspace_note = f"subspace dual bound failed ({type(exc).__name__}: {exc})"
    if not reduced_done and (subspace_note is None or subspace_note.startswith(
            "subspace dual bound failed") or dual_out is not None):
        # (the low-rank kernel test lifts this bound's dual point: dual_out)
        bounds.append((reduced_bound(point, sdp["nu"], sdp["directions"], out=dual_out),
                       "reduced"))
    if use_sdp:
        try:
            bounds.append((full_sdp_bound(point), "sdp"))
        except numerical_failures() as exc:  # fall back to the cheap bound, say why
            why_not = f"the full SDP failed ({type(exc).__name__}: {exc})"
    settle(lambda low: low < best())
    skipped = [(name, low) for name, low, _ in pending]
    upper, bound_method = min(bounds, key=lambda b: b[0])
    upper = max(upper, f)  # a valid bound is never below an attained value
    reason = sdp["reason"]
    if why_not:
        reason += f"; full SDP bound skipped: {why_not}"
    if subspace_note:
        reason += f"; {subspace_note}"
    for name, low in skipped:
        reason += (f"; {name} not proved: it is >= {low * point.unit:.10g} (relative gap "
                   f"{relative_gap(max(low, f), f, point.tau):.1e})")
    return upper, bound_method, reason


def _subspace_note(point, bound, info):
    """What the subspace dual bound found, in the caller's units, with the relaxation's floor."""
    f, unit = point.f, point.unit
    gap = relative_gap(max(bound, f), f, point.tau)
    note = (f"relaxation's dual in a {info['m']}-dimensional subspace ({info['rounds']} rounds, "
            f"{info['seconds']:.1f} s): bound {bound * unit:.10g}, relative gap {gap:.1e}")
    low = info["floor"]
    if low is not None and low > f + point.tau:
        note += (f"; the SDP relaxation is not tight at W: a feasible point of it has value "
                 f"{low * unit:.10g} > f(W) (relative {(low - f) / abs(f):.1e}), so no nu "
                 "can pass and no bound from this relaxation is below it")
    return note
