"""Global-optimality certificate for the quadratic objective (CQS, K-CQS).

The problem is ``max f(W) = 1/2 sum_k w_k^T R_k w_k`` over W (D x K) with orthonormal columns,
every R_k symmetric positive semidefinite (paper eqs. EquadW2, Rkdef; DESIGN.md section 4). At a
point W returned by a solver, :func:`certify_global_optimum` runs, in order:

1. **First-order residuals** (paper eq. 1storderneccond): ``Lambda = W^T [R_1 w_1, ..., R_K w_K]``
   must be symmetric and ``[R_k w_k]_k = W Lambda``. Diagnostic only: the tests below already
   account for an inexact stationary point.
2. **Rapcsák's condition** (paper section "Euclidean setting"): ``blockdiag(R_k) - Lambda (x) I_D``
   negative semidefinite. Sufficient, and vacuous in practice: it needs every w_k to be a top
   eigenvector of its own R_k (DESIGN.md section 4, "Measured").
3. **The SDP-dual test** (Gilman, Burer & Balzano, arXiv:2205.13653; DESIGN.md section 4): W is a
   global maximiser if some nu in R^K makes

       (a) S(nu) = Lambda - diag(nu) PSD,
       (b) M_k(nu) = R_k - W S(nu) W^T - nu_k I NSD for every k,

   because then ``Y = W S W^T`` and ``nu`` are feasible for the dual of the SDP relaxation and
   their dual value is ``sum_k nu_k + tr S = tr Lambda = 2 f(W)``. nu is searched for by Kelley
   cutting planes on the concave margin (DESIGN.md 3c), then **verified** with plain eigenvalue
   computations; the verification is what makes it a certificate.
4. **An upper bound** on ``max f`` and the relative gap, when not certified: the full SDP
   relaxation's dual solved with cvxpy/Clarabel for small D (made safe by an exact feasibility
   repair), else a cheap dual-feasible bound with ``Y`` in the span of W.

All objective values and bounds are on the estimators' scale ``1/2 sum_k w_k^T R_k w_k``.
Verification tolerances are relative to ``scale = max_k ||R_k||_2``.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, fields

import numpy as np
import scipy.linalg
from scipy.optimize import linprog
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

__all__ = ["Certificate", "certify_global_optimum", "not_applicable"]

# Classes with D above this use Lanczos (eigsh) on operators instead of dense eigh; D x D dense
# eigendecompositions cost more than warm-started Lanczos above a few hundred.
DENSE_MAX_DIM = 200
# Full SDP relaxation (cvxpy + Clarabel) only up to this D when ``full_sdp="auto"``: measured
# D <= 18 in 0.1 s, D = 40 (K = 4) 16 s, and over 21 GB at D = 100 (DESIGN.md 3c).
MAX_SDP_DIM = 20
# Kelley cutting-plane iterations for nu (8-25 measured, DESIGN.md 3c), and projected
# subgradient steps that polish the cheap ("reduced") bound.
_KELLEY_MAX_ITER = 200
_REDUCED_STEPS = 15
# Lanczos accuracy (relative to a shifted, well-separated eigenvalue; see _top_eig).
_LANCZOS_TOL = 1e-10
_EPS = np.finfo(float).eps


@dataclass(frozen=True)
class Certificate:
    """Outcome of the global-optimality test for one point W (DESIGN.md section 4).

    Objective values and bounds are on the scale ``f(W) = 1/2 sum_k w_k^T R_k w_k`` that the
    estimators report.

    Attributes
    ----------
    applicable : bool
        False for the absolute-value objective (CAS), which is never certified.
    certified : bool
        True only if a verified sufficient condition for global optimality holds.
    method : {"sdp-dual", "rapcsak"} or None
        The condition that certified W ("sdp-dual" is preferred when both hold).
    objective : float
        f(W); nan if not applicable.
    upper_bound : float
        A valid upper bound on ``max f`` over the Stiefel manifold (nan if none).
    bound_method : {"certificate", "sdp", "reduced"} or None
        Where ``upper_bound`` comes from: the certificate itself (``upper_bound = objective``),
        the full SDP relaxation solved with cvxpy, or the cheap dual-feasible bound.
    gap : float
        ``(upper_bound - objective) / |objective|``, clipped at 0; 0.0 when certified.
    rapcsak : bool
        Whether Rapcsák's condition ``lambda_max(blockdiag(R_k) - Lambda (x) I_D) <= tol * scale``
        held.
    rapcsak_lambda_max : float
        ``lambda_max(blockdiag(R_k) - Lambda (x) I_D) / scale``.
    sdp_margin : float
        Verified margin of the nu-test divided by ``scale``: ``min(lambda_min(S(nu)),
        -max_k lambda_max(M_k(nu)))``; ``>= -tol`` means pass. Near 0 at best, since each
        M_k(nu) has a (near) zero eigenvalue along w_k.
    nu : tuple of float or None
        The nu used by the SDP-dual test.
    first_order : float
        ``max(asymmetry, stationarity)``.
    asymmetry : float
        ``||Lambda - Lambda^T||_F / ||Lambda||_F``.
    stationarity : float
        ``||[R_k w_k]_k - W sym(Lambda)||_F / ||[R_k w_k]_k||_F``.
    tol : float
        Relative tolerance of the verification (relative to ``scale = max_k ||R_k||_2``).
    seconds : float
        Wall time of the test.
    reason : str
        One sentence: why W is certified, not certified, or the test does not apply.
    """

    applicable: bool
    certified: bool
    method: str | None
    objective: float
    upper_bound: float
    bound_method: str | None
    gap: float
    rapcsak: bool
    rapcsak_lambda_max: float
    sdp_margin: float
    nu: tuple[float, ...] | None
    first_order: float
    asymmetry: float
    stationarity: float
    tol: float
    seconds: float
    reason: str

    def __str__(self):
        if not self.applicable:
            return f"Certificate(not applicable: {self.reason})"
        how = f" ({self.method})" if self.certified else ""
        bound = "" if self.bound_method is None else f" ({self.bound_method})"
        return (
            f"Certificate(certified={self.certified}{how}, gap<={self.gap:.2g}{bound}, "
            f"rapcsak={self.rapcsak}, first_order={self.first_order:.1e})"
        )

    __repr__ = __str__

    def to_dict(self):
        """JSON-serialisable dict (nan becomes None, ``nu`` a list) for the model registry."""
        d = asdict(self)
        for key, value in d.items():
            if isinstance(value, float) and not math.isfinite(value):
                d[key] = None if math.isnan(value) else ("inf" if value > 0 else "-inf")
        if d["nu"] is not None:
            d["nu"] = [float(v) for v in d["nu"]]
        return d

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict` (unknown keys are ignored, so old records still load)."""
        kwargs = {}
        for field in fields(cls):
            value = d.get(field.name)
            if field.name == "nu":
                value = None if value is None else tuple(float(v) for v in value)
            elif field.name in ("applicable", "certified", "rapcsak"):
                value = bool(value)
            elif field.name in ("method", "bound_method"):
                value = None if value is None else str(value)
            elif field.name == "reason":
                value = "" if value is None else str(value)
            else:
                value = math.nan if value is None else float(value)
            kwargs[field.name] = value
        return cls(**kwargs)


def not_applicable(
    reason="not applicable: the absolute-value objective (CAS) is not quadratic",
):
    """A certificate that does not apply (CAS, or not attempted); never certified.

    Parameters
    ----------
    reason : str
        Why the test does not apply.

    Returns
    -------
    Certificate
    """
    nan = math.nan
    return Certificate(
        applicable=False, certified=False, method=None, objective=nan, upper_bound=nan,
        bound_method=None, gap=nan, rapcsak=False, rapcsak_lambda_max=nan, sdp_margin=nan,
        nu=None, first_order=nan, asymmetry=nan, stationarity=nan, tol=nan, seconds=0.0,
        reason=str(reason),
    )


def certify_global_optimum(
    scatter,
    W,
    *,
    tol=1e-6,
    full_sdp="auto",
    max_sdp_dim=MAX_SDP_DIM,
    dense_max_dim=DENSE_MAX_DIM,
    rng=None,
):
    """Test whether W globally maximises ``f(W) = 1/2 sum_k w_k^T R_k w_k`` on the Stiefel manifold.

    Runs Rapcsák's test and the SDP-dual test of Gilman, Burer & Balzano (DESIGN.md section 4),
    verifies any candidate by eigenvalues, and bounds ``max f`` from above when W is not
    certified.

    Parameters
    ----------
    scatter : ndarray of shape (K, D, D) or operator
        The class matrices R_k (symmetric PSD), or an object with attributes ``n_features`` (D),
        ``n_classes`` (K) and a method ``apply(k, V)`` returning ``R_k @ V`` for V of shape
        (D, m). Operators with ``D <= dense_max_dim`` are materialised (K products with I_D).
    W : ndarray of shape (D, K)
        The point, with orthonormal columns. If ``1e-10 < ||W^T W - I||_2 <= 1e-2``, W is
        replaced by its polar factor (the reason says so); a larger error raises ValueError.
    tol : float, default=1e-6
        Relative verification tolerance: a condition "X NSD" passes when
        ``lambda_max(X) <= tol * scale`` with ``scale = max_k ||R_k||_2`` (``max_k lambda_max(R_k)``
        for operators). When W is certified, every orthonormal W' has
        ``f(W') <= f(W) + K * tol * scale`` (exactly ``<= f(W)`` when the margins are >= 0).
    full_sdp : {"auto", True, False}, default="auto"
        Whether, when W is not certified, to bound ``max f`` with the full SDP relaxation
        (needs cvxpy and clarabel). ``"auto"`` does so when ``D <= max_sdp_dim``.
    max_sdp_dim : int, default=20
        Largest D for the full SDP under ``"auto"`` (memory grows fast: >21 GB at D = 100).
    dense_max_dim : int, default=200
        Largest D for dense eigendecompositions of D x D matrices; larger problems use Lanczos
        (``scipy.sparse.linalg.eigsh`` on a ``LinearOperator``). Rapcsák's KD x KD matrix is
        dense when ``K * D <= 2 * dense_max_dim``.
    rng : None, int or numpy.random.Generator
        Seeds the Lanczos start vectors.

    Returns
    -------
    Certificate

    Notes
    -----
    Verification of the nu-test at W (DESIGN.md section 4, 3c). ``M_k(nu) w_k`` equals the
    stationarity residual ``r_k`` for every nu, so M_k has a (near) zero eigenvalue along w_k.
    Writing ``x = a w_k + Q y`` (Q an orthonormal basis of the complement of w_k),
    ``lambda_max(M_k) <= lambda_max([[alpha, beta], [beta, gamma]])`` with
    ``alpha = w_k^T M_k w_k``, ``beta = ||Q^T M_k w_k||`` and ``gamma = lambda_max(Q^T M_k Q)``,
    which is what is checked; an inexact stationary point therefore only passes when its
    residual is below the tolerance. If the margins are ``-e_a`` (for (a)) and ``-e_b`` (for
    (b)), ``Y = W (S + e_a I) W^T`` with ``nu + e_b`` is dual feasible, so
    ``max f <= f(W) + K (e_a + e_b) / 2``.

    A necessary condition is ``nu_k in [lambda_max(P R_k P), Lambda_kk]`` with P the projector on
    the complement of W (``q^T M_k q = q^T R_k q - nu_k`` for q orthogonal to W and
    ``e_k^T S e_k = Lambda_kk - nu_k``). An empty interval proves W is not a global maximiser:
    replacing w_k by the top eigenvector of ``P R_k P`` raises f.

    Eigenvalues on the Lanczos path are trusted once ARPACK converges; cutting planes use Rayleigh
    quotients of the returned vectors, so they stay valid even for inexact eigenvectors.

    References
    ----------
    .. [1] Smith & Rangarajan, "A Category Space Approach to Supervised Dimensionality Reduction"
       (eqs. EquadW2, 1storderneccond and Rapcsák's condition).
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
    rng = np.random.default_rng(rng)
    ctx = _Context(scatter, W, tol=tol, dense_max_dim=int(dense_max_dim), rng=rng)
    notes = list(ctx.notes)

    # 2. Rapcsák (paper, section "Euclidean setting"; DESIGN.md section 4).
    rap_lmax = ctx.rapcsak_lambda_max()
    rapcsak = bool(rap_lmax <= ctx.tau)

    # 3. SDP-dual test (arXiv:2205.13653; DESIGN.md section 4).
    sdp = ctx.sdp_dual_test()
    certified = sdp["passed"] or rapcsak
    method = "sdp-dual" if sdp["passed"] else ("rapcsak" if rapcsak else None)

    # 4. Upper bound on max f (scale 1/2 sum w^T R w) and the relative gap.
    f = ctx.f
    if certified:
        # Reported bound = f(W) (gap 0); the reason states the rigorous slack of the tolerance.
        upper, bound_method = f, "certificate"
        if sdp["passed"]:
            slack = max(0.0, sdp["bound"] - f)
            reason = (
                "certified by the SDP-dual test (arXiv:2205.13653): verified margin "
                f"{sdp['margin'] / ctx.scale:.1e} * scale >= -tol = {-tol:.0e}, so every "
                f"orthonormal W' has f(W') <= f(W) + {slack:.1e}"
            )
        else:
            slack = 0.5 * ctx.K * max(0.0, rap_lmax)
            reason = (
                f"certified by Rapcsák's condition: lambda_max = {rap_lmax / ctx.scale:.1e} * "
                f"scale <= tol = {tol:.0e}, so every orthonormal W' has f(W') <= f(W) + "
                f"{slack:.1e}"
            )
    else:
        bounds = [(ctx.trivial_bound(), "reduced")]
        if sdp["bound"] is not None:
            bounds.append((sdp["bound"], "reduced"))
        bounds.append((ctx.reduced_bound(sdp["nu"]), "reduced"))
        use_sdp, why_not = _want_full_sdp(full_sdp, ctx.D, max_sdp_dim)
        if use_sdp:
            try:
                bounds.append((ctx.full_sdp_bound(), "sdp"))
            except Exception as exc:  # solver failure: fall back to the cheap bound, say why
                why_not = f"the full SDP failed ({type(exc).__name__}: {exc})"
        upper, bound_method = min(bounds, key=lambda b: b[0])
        upper = max(upper, f)  # a valid bound is never below an attained value
        reason = sdp["reason"]
        if why_not:
            reason += f"; full SDP bound skipped: {why_not}"
    gap = 0.0 if certified else _relative_gap(upper, f, ctx.tau)
    if notes:
        reason += "; " + "; ".join(notes)
    return Certificate(
        applicable=True,
        certified=bool(certified),
        method=method,
        objective=float(f),
        upper_bound=float(upper),
        bound_method=bound_method,
        gap=float(gap),
        rapcsak=rapcsak,
        rapcsak_lambda_max=float(rap_lmax / ctx.scale),
        sdp_margin=float(sdp["margin"] / ctx.scale),
        nu=None if sdp["nu"] is None else tuple(float(v) for v in sdp["nu"]),
        first_order=float(max(ctx.asymmetry, ctx.stationarity)),
        asymmetry=float(ctx.asymmetry),
        stationarity=float(ctx.stationarity),
        tol=float(tol),
        seconds=time.perf_counter() - t0,
        reason=reason,
    )


# --------------------------------------------------------------------------------------------
# Internals


def _want_full_sdp(full_sdp, D, max_sdp_dim):
    """(whether to solve the full SDP, why not) for the given setting and size."""
    if full_sdp is False:
        return False, "not requested (full_sdp=False)"
    if full_sdp == "auto" and D > max_sdp_dim:
        return False, f"too large (D = {D} > max_sdp_dim = {max_sdp_dim})"
    try:
        import clarabel  # noqa: F401
        import cvxpy  # noqa: F401
    except ImportError:
        return False, "cvxpy/clarabel not installed (pip install catdask[sdp])"
    return True, ""


def _relative_gap(upper, f, tau):
    if not np.isfinite(upper):
        return math.inf
    excess = max(0.0, upper - f)
    if abs(f) > 0:
        return excess / abs(f)
    return 0.0 if excess <= tau else math.inf


def _sym(A):
    return 0.5 * (A + A.T)


def _top_eig(n, *, matrix=None, matvec=None, shift=0.0, v0=None):
    """Upper estimate of the largest eigenvalue of a symmetric matrix or operator, and a unit
    eigenvector.

    Dense ``eigh`` (top pair only) for a matrix; Lanczos otherwise, run on ``A + shift I`` so
    that the wanted eigenvalue is well away from 0 (ARPACK's stopping test is relative to it).
    The value returned is the Rayleigh quotient plus the residual norm ``||A v - theta v||``,
    which bounds lambda_max from above once the iteration has converged to the top eigenvalue.
    """
    if matrix is None and n <= 8:  # too small for ARPACK
        matrix = _sym(np.column_stack([matvec(e) for e in np.eye(n)]))
    if matrix is not None:
        _, V = scipy.linalg.eigh(matrix, subset_by_index=[n - 1, n - 1], driver="evx")
        v = V[:, 0]
        Av = matrix @ v
    else:
        op = LinearOperator(
            (n, n), matvec=lambda x: matvec(np.ravel(x)) + shift * np.ravel(x), dtype=float
        )
        for ncv in (min(n - 1, 24), min(n - 1, 64)):
            try:
                _, V = eigsh(op, k=1, which="LA", v0=v0, tol=_LANCZOS_TOL, ncv=ncv,
                             maxiter=max(1000, 20 * n))
                break
            except ArpackNoConvergence:
                continue
        else:
            raise RuntimeError(f"Lanczos (eigsh) did not converge on a {n} x {n} operator")
        v = V[:, 0] / np.linalg.norm(V[:, 0])
        Av = matvec(v)
    theta = float(v @ Av)
    return theta + float(np.linalg.norm(Av - theta * v)), v


class _Context:
    """What the tests share: access to R_k, the point W, Lambda, the scale, eigen-solvers."""

    def __init__(self, scatter, W, *, tol, dense_max_dim, rng):
        self.notes = []
        self.rng = rng
        self.dense_max_dim = dense_max_dim
        self._operator = None
        if hasattr(scatter, "apply"):
            D, K = int(scatter.n_features), int(scatter.n_classes)
            self._operator = scatter
            R = None
            if D <= dense_max_dim:  # materialise small operators: K products with I_D
                eye = np.eye(D)
                R = np.stack([np.asarray(scatter.apply(k, eye), dtype=float) for k in range(K)])
        else:
            R = np.asarray(scatter, dtype=float)
            if R.ndim != 3 or R.shape[1] != R.shape[2]:
                raise ValueError(
                    "scatter must have shape (K, D, D) or be an operator with apply(k, V); "
                    f"got an array of shape {R.shape}."
                )
            K, D = R.shape[0], R.shape[1]
        if R is not None:
            if not np.all(np.isfinite(R)):
                raise ValueError("scatter contains non-finite values.")
            R = 0.5 * (R + R.transpose(0, 2, 1))
        self.R_all = R  # dense R_k whenever available (array input of any size)
        self.dense = R is not None and D <= dense_max_dim
        self.D, self.K = D, K

        W = np.asarray(W, dtype=float)
        if W.shape != (D, K):
            raise ValueError(f"W must have shape (D, K) = ({D}, {K}); got {W.shape}.")
        if not 1 <= K <= D:
            raise ValueError(f"Need D >= K >= 1. Values supplied were D = {D} and K = {K}.")
        if not np.all(np.isfinite(W)):
            raise ValueError("W contains non-finite values.")
        orth = float(np.linalg.norm(W.T @ W - np.eye(K), 2))
        if orth > 1e-2:
            raise ValueError(f"W must have orthonormal columns; ||W^T W - I||_2 = {orth:.2e}.")
        if orth > 1e-10:
            U, _, Vt = np.linalg.svd(W, full_matrices=False)
            W = U @ Vt
            self.notes.append(f"W was re-orthonormalised (||W^T W - I|| = {orth:.1e})")
        self.W = W

        # 1. First-order quantities (paper eq. 1storderneccond; DESIGN.md section 4).
        G = np.column_stack([self.apply(k, W[:, k]) for k in range(K)])
        Lam = W.T @ G
        self.Lam = _sym(Lam)
        self.f = 0.5 * float(np.trace(Lam))
        nL, nG = np.linalg.norm(Lam), np.linalg.norm(G)
        self.asymmetry = float(np.linalg.norm(Lam - Lam.T) / nL) if nL > 0 else 0.0
        self.stationarity = float(np.linalg.norm(G - W @ self.Lam) / nG) if nG > 0 else 0.0
        self.lam_norm = float(np.linalg.norm(self.Lam, 2))

        # Scale of the tolerances: max_k ||R_k||_2 (max_k lambda_max(R_k) for operators, R_k
        # being PSD). lambda_max(R_k) also gives the trivial bound.
        self.lam_max_R = np.empty(K)
        norms = np.empty(K)
        for k in range(K):
            if self.dense:
                ev = scipy.linalg.eigh(R[k], eigvals_only=True)
                self.lam_max_R[k], norms[k] = ev[-1], max(abs(ev[0]), abs(ev[-1]))
            else:
                self.lam_max_R[k] = self._top(lambda x, k=k: self.apply(k, x))[0]
                norms[k] = abs(self.lam_max_R[k])
        scale = float(norms.max())
        self.scale = scale if scale > 0 else 1.0
        self.tol = tol
        self.tau = tol * self.scale

    def apply(self, k, v):
        """R_k @ v for a vector v (D,) or a block (D, m)."""
        if self.R_all is not None:
            return self.R_all[k] @ v
        if v.ndim == 1:
            return np.asarray(self._operator.apply(k, v[:, None]), dtype=float)[:, 0]
        return np.asarray(self._operator.apply(k, v), dtype=float)

    def _top(self, matvec, v0=None, shift=0.0, n=None):
        """Top eigenpair of a D x D (or n x n) operator by Lanczos."""
        n = self.D if n is None else n
        if v0 is None:
            v0 = self.rng.standard_normal(n)
        return _top_eig(n, matvec=matvec, shift=shift, v0=v0)

    def _mbound(self, nu):
        """An upper bound on ||M_k(nu)||_2 (M_k as in DESIGN.md section 4, (b))."""
        return self.scale + self.lam_norm + 2.0 * float(np.max(np.abs(nu)))

    # Rapcsák ----------------------------------------------------------------------------------
    def rapcsak_lambda_max(self):
        """lambda_max(blockdiag(R_k) - Lambda (x) I_D) (DESIGN.md section 4)."""
        K, D, Lam = self.K, self.D, self.Lam
        n = K * D
        if self.R_all is not None and n <= 2 * self.dense_max_dim:
            M = scipy.linalg.block_diag(*self.R_all) - np.kron(Lam, np.eye(D))
            return _top_eig(n, matrix=M)[0]

        def matvec(v):
            V = v.reshape(K, D)
            out = np.stack([self.apply(k, V[k]) for k in range(K)])
            return (out - Lam @ V).ravel()

        return self._top(matvec, shift=2.0 * (self.scale + self.lam_norm), n=n)[0]

    # SDP-dual test ----------------------------------------------------------------------------
    def _complement_top(self, k):
        """lambda_max(P R_k P) on the complement of W (Rayleigh quotient of a unit q with
        W^T q = 0), and q."""
        W, D = self.W, self.D
        big = 3.0 * self.scale
        if self.dense:
            PR = self.R_all[k] - W @ (W.T @ self.R_all[k])
            PRP = PR - (PR @ W) @ W.T
            lam, q = _top_eig(D, matrix=_sym(PRP) - big * (W @ W.T))
        else:
            def matvec(x):
                y = x - W @ (W.T @ x)
                z = self.apply(k, y)
                return z - W @ (W.T @ z) - big * (W @ (W.T @ x))

            lam, q = self._top(matvec, shift=self.scale)
        q = q - W @ (W.T @ q)  # exactly orthogonal to W, then the exact Rayleigh quotient
        q /= np.linalg.norm(q)
        return float(q @ self.apply(k, q)), q

    def _restricted(self, nu):
        """Matrices / matvecs of M_k(nu) restricted to the complement of w_k (w_k deflated).

        ``M_k(nu) = R_k - W (Lambda - diag nu) W^T - nu_k I`` (DESIGN.md section 4, (b)); its
        restriction is ``P_k M_k P_k`` with ``P_k = I - w_k w_k^T``, and ``w_k`` is sent to the
        bottom of the spectrum by ``-big w_k w_k^T`` so that the top eigenvalue is the one of
        ``Q^T M_k Q``.
        """
        W, S = self.W, self.Lam - np.diag(nu)
        big = 3.0 * self._mbound(nu) + self.scale
        for k in range(self.K):
            w = W[:, k]
            if self.dense:
                M = self.R_all[k] - W @ S @ W.T - nu[k] * np.eye(self.D)
                Mw = M @ w
                PMP = M - np.outer(w, Mw) - np.outer(Mw, w) + (w @ Mw) * np.outer(w, w)
                yield k, _sym(PMP) - big * np.outer(w, w), None
            else:
                def matvec(x, k=k, w=w):
                    y = x - w * (w @ x)
                    z = self.apply(k, y) - W @ (S @ (W.T @ y)) - nu[k] * y
                    return z - w * (w @ z) - big * w * (w @ x)

                yield k, None, matvec

    def _margin_pieces(self, nu, v0s):
        """Margin t(nu) and one affine majorant (cut) per piece, from the eigenvectors.

        Returns ``(t, cuts)`` with cuts ``(c, g)`` meaning ``t(nu') <= c + g @ nu'`` for all nu'.
        The cuts are Rayleigh quotients, so they are valid even for inexact eigenvectors.
        """
        W, K = self.W, self.K
        cuts = []
        # (a): lambda_min(Lambda - diag nu) <= u^T Lambda u - sum_j u_j^2 nu_j.
        lam, U = np.linalg.eigh(self.Lam - np.diag(nu))
        u = U[:, 0]
        cuts.append((float(u @ self.Lam @ u), -(u ** 2)))
        values = [float(lam[0])]
        # (b): -lambda_max(Q^T M_k Q) <= -v^T M_k(nu') v for a unit v orthogonal to w_k
        # (no such v when D = 1).
        for k, matrix, matvec in self._restricted(nu) if self.D > 1 else ():
            if matrix is not None:
                _, v = _top_eig(self.D, matrix=matrix)
            else:
                _, v = self._top(matvec, v0s[k], shift=2.0 * self._mbound(nu))
                v0s[k] = v
            v = v - W[:, k] * (W[:, k] @ v)
            v /= np.linalg.norm(v)
            p = W.T @ v
            c0 = float(v @ self.apply(k, v) - p @ self.Lam @ p)
            g = p ** 2
            g[k] -= v @ v
            # -v^T M_k(nu') v = -c0 - sum_j p_j^2 nu'_j + nu'_k
            cuts.append((-c0, -g))
            values.append(float(-c0 - g @ nu))
        return min(values), cuts

    def _box(self):
        """Necessary interval for each nu_k (padded by tau), and whether it is empty."""
        K, tau, Lam = self.K, self.tau, self.Lam
        hi = np.diag(Lam).copy()
        lo = np.empty(K)
        witness = None
        self.complement_dirs = []
        if K < self.D:
            for k in range(K):
                lo[k], q = self._complement_top(k)
                self.complement_dirs.append(q)
                if lo[k] > hi[k] + tau and (witness is None or lo[k] - hi[k] > witness[1]):
                    witness = (k, lo[k] - hi[k])
        else:
            # K = D: shifting all nu by a constant leaves (b) unchanged; some feasible nu lies
            # above lambda_min(Lambda) + min_j (w_j^T R_k w_j - Lambda_jj) (DESIGN.md 3c).
            WRW = np.stack([self.W.T @ self.apply(k, self.W) for k in range(K)])
            lmin = np.linalg.eigvalsh(Lam)[0]
            for k in range(K):
                d = np.diag(WRW[k]) - np.diag(Lam)
                d[k] = 0.0
                lo[k] = lmin + min(0.0, d.min())
        return lo - tau, hi + tau, witness

    def sdp_dual_test(self):
        """Search nu (Kelley cutting planes, DESIGN.md 3c), then verify it by eigenvalues."""
        K, tau = self.K, self.tau
        lo, hi, witness = self._box()
        if witness is not None:
            k, excess = witness
            return {
                "passed": False, "margin": -excess, "nu": None, "bound": None,
                "reason": (
                    f"nu interval empty for class {k}: a direction orthogonal to W raises "
                    f"w_{k}^T R_{k} w_{k} by {excess:.3g}, so a better W exists (W is not a "
                    "global maximiser)"
                ),
            }
        lo = np.minimum(lo, hi)
        nu = 0.5 * (lo + hi)
        v0s = [None] * K
        A_ub, b_ub = [], []
        best_t, best_nu, upper = -np.inf, nu.copy(), np.inf
        s_cap = float(np.max(hi - lo)) + self.scale + 1.0
        for it in range(_KELLEY_MAX_ITER):
            t, cuts = self._margin_pieces(nu, v0s)
            if t > best_t:
                best_t, best_nu = t, nu.copy()
            for c, g in cuts:  # s <= c + g @ nu  <=>  -g @ nu + s <= c
                A_ub.append(np.append(-g, 1.0))
                b_ub.append(c)
            res = linprog(
                np.append(np.zeros(K), -1.0), A_ub=np.array(A_ub), b_ub=np.array(b_ub),
                bounds=[(a, b) for a, b in zip(lo, hi)] + [(None, s_cap)], method="highs",
            )
            if res.status != 0:
                break
            upper, nu = -res.fun, res.x[:K]
            if best_t >= 0 and best_t >= 0.5 * upper:
                break  # certifiable with a comfortable margin
            # Converged; or proved that no nu reaches margin -tau (the LP value bounds the
            # margin everywhere) and came within 10% of the best margin, whose nu seeds the
            # "reduced" upper bound.
            if upper - best_t <= max(1e-3 * tau, 0.1 * -upper):
                break
        verified = self._verify(best_nu)
        passed = verified["margin"] >= -tau
        if passed:
            reason = "certified"
        elif upper < -tau:
            reason = (
                f"not certified: no nu passes the SDP-dual test (best margin <= "
                f"{upper / self.scale:.2e} * scale; the relaxation is not tight at W or W is not "
                "global)"
            )
        else:
            reason = (
                f"not certified: best nu found has verified margin "
                f"{verified['margin'] / self.scale:.2e} * scale < -tol"
            )
        residual = max(self.asymmetry, self.stationarity)
        if not passed and residual > self.tol:
            # Not even stationary (paper eq. 1storderneccond): a nearby W is better.
            reason += f"; W is not a stationary point (first-order residual {residual:.1e})"
        return {"passed": passed, "margin": verified["margin"], "nu": best_nu,
                "bound": verified["bound"], "reason": reason, "iterations": it + 1}

    def _verify(self, nu):
        """Verified margin at nu by plain eigenvalues, and the dual bound it yields.

        ``lambda_max(M_k) <= lambda_max([[a, b], [b, c]])`` with ``a = w_k^T M_k w_k``,
        ``b = ||P_k M_k w_k||``, ``c = lambda_max(Q^T M_k Q)`` (docstring of
        :func:`certify_global_optimum`).
        """
        W, K = self.W, self.K
        S = self.Lam - np.diag(nu)
        evals, evecs = np.linalg.eigh(S)
        m_a = float(evals[0])
        bmax = np.empty(K)
        for k, matrix, matvec in self._restricted(nu):
            w = W[:, k]
            Mw = self.apply(k, w) - W @ (S @ (W.T @ w)) - nu[k] * w
            a = float(w @ Mw)
            if self.D == 1:  # M_k is the 1 x 1 matrix [a]
                bmax[k] = a
                continue
            if matrix is not None:
                c = _top_eig(self.D, matrix=matrix)[0]
            else:
                c = self._top(matvec, shift=2.0 * self._mbound(nu))[0]
            b = float(np.linalg.norm(Mw - w * a))
            bmax[k] = 0.5 * (a + c) + math.hypot(0.5 * (a - c), b)
        margin = min(m_a, float(-bmax.max()))
        # Dual-feasible point: Y = W S_+ W^T (S_+ >= S, so M_k only decreases), nu_k + bmax_k.
        S_plus = (evecs * np.maximum(evals, 0.0)) @ evecs.T
        guard = self._round_guard()
        bound2 = float(np.sum(nu + bmax) + np.trace(S_plus @ (W.T @ W))) + K * guard
        return {"margin": margin, "bound": 0.5 * bound2}

    def _round_guard(self):
        """Allowance for rounding in the eigenvalues that make a bound valid."""
        return 64.0 * self.D * _EPS * (self.scale + self.lam_norm)

    # Upper bounds -----------------------------------------------------------------------------
    def trivial_bound(self):
        """sum_k lambda_max(R_k) / 2 (Y = 0 in the dual)."""
        return 0.5 * float(np.sum(self.lam_max_R) + self.K * self._round_guard())

    def _subspace(self):
        """Orthonormal V = [W, Q']: W plus the top complement direction of each R_k."""
        if not self.complement_dirs:
            return self.W
        Q = np.column_stack(self.complement_dirs)
        Q = Q - self.W @ (self.W.T @ Q)
        U, s, _ = np.linalg.svd(Q, full_matrices=False)
        U = U[:, s > 1e-8 * s.max()]
        U = U - self.W @ (self.W.T @ U)  # re-orthogonalise against W
        U = np.linalg.qr(U)[0]
        return np.column_stack([self.W, U])

    def _h(self, T, V, v0s):
        """Dual value (scale sum w^T R w) and a subgradient at ``Y = V T V^T``,
        ``nu_k = lambda_max(R_k - V T V^T)``."""
        total = float(np.trace(T @ (V.T @ V)))
        g = np.eye(T.shape[0])
        for k in range(self.K):
            if self.dense:
                lam, v = _top_eig(self.D, matrix=_sym(self.R_all[k] - V @ T @ V.T))
            else:
                lam, v = self._top(
                    lambda x, k=k: self.apply(k, x) - V @ (T @ (V.T @ x)),
                    v0s[k], shift=self.scale + 2.0 * float(np.linalg.norm(T, 2)),
                )
                v0s[k] = v
            total += lam
            p = V.T @ v
            g -= np.outer(p, p)
        return total + self.K * self._round_guard(), g

    def reduced_bound(self, nu, steps=_REDUCED_STEPS):
        """Cheap bound: dual value of ``Y = V T V^T`` minimised over PSD T (small), with V
        spanning W and each class's top direction orthogonal to W.

        Projected subgradient with Polyak steps towards ``2 f(W)`` (a lower bound on the
        optimum), started at ``(Lambda - diag nu)_+`` on the W block. Every iterate is dual
        feasible, so the best value seen is a valid bound.
        """
        V = self._subspace()
        m = V.shape[1]
        if nu is None:
            nu = np.diag(self.Lam)
        T = np.zeros((m, m))
        evals, evecs = np.linalg.eigh(self.Lam - np.diag(nu))
        T[:self.K, :self.K] = (evecs * np.maximum(evals, 0.0)) @ evecs.T
        v0s = [None] * self.K
        target = 2.0 * self.f
        history = [np.inf]
        for _ in range(steps):
            h, g = self._h(T, V, v0s)
            history.append(min(h, history[-1]))
            best = history[-1]
            gg = float(np.sum(g * g))
            if best - target <= self.tau or gg == 0:
                break
            if len(history) > 4 and history[-4] - best <= 0.02 * (best - target):
                break  # stalled (the target 2 f(W) is below the optimum unless W is certified)
            T = T - (h - target) / gg * g
            evals, evecs = np.linalg.eigh(_sym(T))
            T = (evecs * np.maximum(evals, 0.0)) @ evecs.T
        return 0.5 * history[-1]

    def full_sdp_bound(self):
        """Full SDP relaxation's dual (arXiv:2205.13653), solved by Clarabel, made safe.

        ``min sum_k nu_k + tr Y  s.t.  Y PSD,  Y + nu_k I - R_k PSD``. The solver's Y is
        projected to PSD and each nu_k reset to ``lambda_max(R_k - Y)``, so the point is exactly
        feasible (up to rounding, allowed for) whatever the solver's accuracy.
        """
        import cvxpy as cp

        K, D = self.K, self.D
        R = self.R_all if self.R_all is not None else np.stack(
            [_sym(self.apply(k, np.eye(D))) for k in range(K)])
        s = self.scale
        Y = cp.Variable((D, D), PSD=True)
        nu = cp.Variable(K)
        eye = np.eye(D)
        cons = [Y + nu[k] * eye - R[k] / s >> 0 for k in range(K)]
        prob = cp.Problem(cp.Minimize(cp.sum(nu) + cp.trace(Y)), cons)
        prob.solve(solver=cp.CLARABEL)
        if Y.value is None:
            raise RuntimeError(f"Clarabel returned status {prob.status}")
        evals, evecs = np.linalg.eigh(_sym(np.asarray(Y.value)) * s)
        Yp = (evecs * np.maximum(evals, 0.0)) @ evecs.T
        nus = np.array([np.linalg.eigvalsh(_sym(R[k] - Yp))[-1] for k in range(K)])
        guard = 64.0 * D * _EPS * (s + float(np.max(np.maximum(evals, 0.0))))
        return 0.5 * float(np.sum(nus) + K * guard + np.trace(Yp))
