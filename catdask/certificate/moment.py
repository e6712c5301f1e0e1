"""Second-level moment relaxation (Lasserre) of the CQS problem: a rigorous upper bound on max f."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.sparse.linalg import lsqr

from ..core.progress import report_stage
from .budget import DEFAULT_BUDGET
from .eigen import NumericalFailure
from .moment_dual import MomentDual, dual_bound, reduction_basis
from .moment_polish import polish as slackness_polish
from .moment_polish import slackness_system
from .moment_sos import Identity, block_sizes, count_moments, identity

class RelaxationTooLarge(ValueError):
    """The relaxation would exceed the size guard; the message says what it would cost."""


@dataclass(frozen=True)
class MomentBound:
    """Outcome of the level-2 moment relaxation: ``upper_bound`` (rigorous, proved from ``dual``,
    the :class:`MomentDual` data) and ``solver_value`` (the solver's value before the proof, not
    rigorous); what the identity's residual (``residual_charge``; ``residual_l1`` the looser
    ``||rho||_1``), negative Gram eigenvalues (``psd_slack``) and the class matrices' part outside
    the reduced space (``nullspace_charge``) added to the bound; the relaxation's ``n_moments``,
    ``block_sizes`` and ``reduced_dim``; the ``solver``, its ``status``, ``iterations`` (all
    stages), ``seconds``; ``polish_rounds`` behind ``dual`` (0: SCS's own solve).
    """

    upper_bound: float
    solver_value: float
    residual_charge: float
    residual_l1: float
    psd_slack: float
    nullspace_charge: float
    n_moments: int
    block_sizes: tuple
    reduced_dim: int
    solver: str
    status: str
    iterations: int
    seconds: float
    dual: MomentDual
    polish_rounds: int = 0


def _as_stack(R):
    R = np.asarray(R, dtype=float)
    if R.ndim != 3 or R.shape[1] != R.shape[2]:
        raise ValueError(f"R must have shape (K, D, D). Got {R.shape} instead.")
    if not np.all(np.isfinite(R)):
        raise ValueError("R contains NaN or infinite values.")
    K, D, _ = R.shape
    if K > D:
        raise ValueError(f"Need K <= D for orthonormal W. Got K = {K} and D = {D}.")
    return (R + R.transpose(0, 2, 1)) / 2


def moment_relaxation_size(R):
    """Size of the level-2 relaxation for class matrices R (K, D, D) without building it: a dict of
    ``reduced_dim``, ``n_moments``, ``block_sizes`` and ``largest_block``.
    """
    R = _as_stack(R)
    K = R.shape[0]
    r = reduction_basis(R, K).shape[1]
    sizes = block_sizes(K, r)
    return {"reduced_dim": r, "n_moments": count_moments(K, r), "block_sizes": sizes,
            "largest_block": max(sizes)}


#: The option :func:`moment_hint` names (a certificate with the hint has ``next_level =
#: "moment"``: what the CLI and the train flow read to suggest it in their own words).
MOMENT_HINT = "certify='moment'"


def moment_hint(R, budget=DEFAULT_BUDGET):
    """A clause saying the opt-in moment level may prove W, or "" where it would not run, for the
    class matrices ``R`` of a test that did not certify W at the SDP-dual level. Above the budget's
    ``moment_hint_max_dim`` the reduced dimension (an eigh of sum_k R_k) is worked out only where
    the full one could fit the size guard.
    """
    K, D = R.shape[0], R.shape[1]
    max_block = budget.max_moment_block
    if block_sizes(K, D)[0] > max_block and D > budget.moment_hint_max_dim:
        return ""
    size = moment_relaxation_size(R)
    if size["largest_block"] > max_block or size["n_moments"] > budget.max_moments:
        return ""
    return (f"the level-2 moment relaxation ({MOMENT_HINT}: {size['n_moments']:,} moments, "
            f"largest PSD block {size['largest_block']}) may prove it{moment_install_note()}")


def moment_install_note(template: str = " ({})") -> str:
    """``""`` when SCS, the moment level's solver, can be imported; else how to install it, in
    ``template``: for the hints that suggest the moment level (a user who follows one would
    otherwise be refused next)."""
    import importlib.util

    if importlib.util.find_spec("scs"):
        return ""
    return template.format("it needs SCS: pip install 'catdask[sdp]'")


def _svec_blocks(ident):
    """Per Gram block, in triu order (i <= j): its entries' rows in SCS's svec of all blocks,
    and their svec weights (1 on the diagonal, sqrt 2 off it)."""
    offset = 0
    for basis in ident.bases:
        s = len(basis)
        iu, ju = np.triu_indices(s)  # (i <= j) upper = (j >= i) lower of the symmetric M_b
        # SCS orders the lower triangle column by column: entry (row j, col i), i <= j.
        yield (offset + ju - iu + (iu * (2 * s - iu + 1)) // 2,
               np.where(iu == ju, 1.0, np.sqrt(2.0)))
        offset += s * (s + 1) // 2


def _svec_map(ident):
    """SCS's PSD rows: ``svec(M_b(y))`` (lower triangle by columns, off-diagonals * sqrt 2)."""
    import scipy.sparse as sp

    rows, weights = zip(*_svec_blocks(ident))
    return sp.csr_matrix((-np.concatenate(weights),
                          (np.concatenate(rows), np.concatenate(ident.gram_rows))),
                         shape=(sum(len(b) * (len(b) + 1) // 2 for b in ident.bases), ident.n))


def _unpack_gram(z, ident):
    """SCS's PSD dual (svec) -> upper triangles of Q_b in triu order."""
    return [z[pos] / weights for pos, weights in _svec_blocks(ident)]


def _project_psd(t, s):
    Q = np.zeros((s, s))
    Q[np.triu_indices(s)] = t
    Q = Q + np.triu(Q, 1).T
    w, V = np.linalg.eigh(Q)
    Qp = (V * np.clip(w, 0.0, None)) @ V.T
    return Qp[np.triu_indices(s)]


def _closed(ident, dual, f_vec):
    """The same data with the identity's residual (all but its constant) moved, by a
    least-norm change of every Gram entry and multiplier, onto the Gram matrices: what that
    costs shows up as eigenvalues below zero (charged by ``dual_bound``) instead of as residual.
    """
    import scipy.sparse as sp

    rho = (dual.gamma * np.eye(1, ident.n, 0).ravel() - f_vec - ident.gram_sum(dual.gram)
           - ident.multipliers @ dual.multipliers)
    rho[0] = 0.0  # the constant enters the bound with its sign (gamma - rho_0)
    A = sp.hstack(list(ident._A) + [ident.multipliers]).tocsr()
    delta = lsqr(A, rho, atol=1e-15, btol=1e-15, iter_lim=1000)[0]
    cuts = np.cumsum([len(g) for g in dual.gram])
    parts = np.split(delta, cuts)
    gram = tuple(g + d for g, d in zip(dual.gram, parts[:-1]))
    return MomentDual(dual.basis, dual.scale, dual.gamma, gram,
                      dual.multipliers + parts[-1], dual.anchor)


def _anchor(anchor, W, K, r, min_block):
    """The anchor of the Gram basis (None: full) for the option ``anchor``."""
    if anchor == "full" or W is None:
        return None
    if anchor == "auto":
        full, anchored = block_sizes(K, r)[0], block_sizes(K, r, K)[0]
        return K if full >= min_block and 2 * anchored <= full else None
    anchor = int(anchor)
    if not K <= anchor <= r:
        raise ValueError(f"anchor must be in [K, r] = [{K}, {r}]. Got {anchor} instead.")
    return None if anchor == r else anchor


@dataclass(frozen=True)
class MomentProblem:
    """The level-2 relaxation of class matrices R in conic form, as any solver gets it: the
    moment side ``min c^T x  s.t.  A x + s = b`` with ``s`` in ``cones`` (``x[0] = 1`` and the
    localising equalities in the zero cone, then ``svec(M_b(x))`` per Gram block in the PSD
    cones), ``c = -f_vec``. Its dual variables ``z`` are the proof data: ``z[0]`` gamma,
    ``-z[1:1 + n_mult]`` the multipliers, the rest ``svec(Q_b)`` (:meth:`proof_candidates`).
    ``basis`` (D x r) and ``scale`` map R to the reduced, scaled problem."""

    R: np.ndarray
    scale: float
    basis: np.ndarray
    anchor: int | None
    ident: Identity
    f_vec: np.ndarray
    A: Any
    b: np.ndarray
    cones: dict

    def dual_data(self, z, gram=None, multipliers=None):
        n_mult = self.ident.n_mult
        gram = tuple(_unpack_gram(z[1 + n_mult:], self.ident)) if gram is None else gram
        lam = -z[1:1 + n_mult] if multipliers is None else multipliers
        return MomentDual(self.basis, self.scale, float(z[0]), tuple(gram), lam, self.anchor)

    def proof_candidates(self, z):
        """Three versions of a solver's dual iterate ``z`` (docs/design.md 4b, "Closing the
        residual"): the Gram matrices projected onto the PSD cone with the multipliers refitted
        by least squares, the raw data, and the first with its residual closed."""
        ident, n = self.ident, self.ident.n
        raw = self.dual_data(z)
        gram = tuple(_project_psd(t, s) for t, s in zip(raw.gram, ident.sizes()))
        target = raw.gamma * np.eye(1, n, 0).ravel() - self.f_vec - ident.gram_sum(gram)
        fit = lsqr(ident.multipliers, target - ident.multipliers @ raw.multipliers, atol=1e-15,
                   btol=1e-15, iter_lim=10 * ident.n_mult)[0]
        projected = self.dual_data(z, gram, raw.multipliers + fit)
        return [projected, raw, _closed(ident, projected, self.f_vec)]

    def prove(self, z):
        """The smallest bound ``dual_bound`` proves from the candidates of ``z``, and its data."""
        proved = [(dual_bound(self.R, d, self.ident), d) for d in self.proof_candidates(z)]
        return min(proved, key=lambda p: p[0].upper_bound)


def moment_problem(R, W=None, anchor="auto", budget=DEFAULT_BUDGET):
    """The :class:`MomentProblem` of R (K, D, D), its Gram basis anchored at W per ``anchor``
    (docs/design.md 4b, "Which SOS family")."""
    import scipy.sparse as sp

    R = _as_stack(R)
    K = R.shape[0]
    scale = float(max(np.linalg.norm(Rk, 2) for Rk in R)) or 1.0
    basis = reduction_basis(R, K)
    r = basis.shape[1]
    anchor = _anchor(anchor, W, K, r, budget.anchor_min_block)
    if anchor is not None:
        Y = basis.T @ np.asarray(W, dtype=float)
        U = np.linalg.qr(np.column_stack([Y, np.eye(r)]))[0]
        basis = basis @ U
    # Batched products: an unoptimised einsum over "di,kde,ej" costs K D^2 r^2 (4 s at D = 178,
    # K = 3, measured), the two products 2 K D^2 r.
    ident = identity(K, r, anchor)
    f_vec = ident.objective(basis.T @ (R / scale) @ basis)
    e0 = sp.csr_matrix(([1.0], ([0], [0])), shape=(1, ident.n))
    A = sp.vstack([e0, ident.multipliers.T, _svec_map(ident)]).tocsc()
    b = np.zeros(A.shape[0])
    b[0] = 1.0
    return MomentProblem(R, scale, basis, anchor, ident, f_vec, A, b,
                         {"z": 1 + ident.n_mult, "s": ident.sizes()})


def moment_relaxation_bound(R, *, W=None, eps=1e-8, max_iters=20_000, budget=DEFAULT_BUDGET,
                            verbose=False, anchor="auto", scs_options=None, target_gap=None,
                            polish=True):
    """Rigorous upper bound on ``max 1/2 sum_k w_k^T R_k w_k`` over orthonormal W (level 2), as a
    :class:`MomentBound`.
    Raises :class:`RelaxationTooLarge` above the budget's size guard (``max_moment_block``,
    ``max_moments``; the message gives the size) and ``ImportError`` without SCS (``pip install
    catdask[sdp]``)."""
    t0 = time.perf_counter()
    R = _as_stack(R)
    K, D, _ = R.shape
    size = moment_relaxation_size(R)
    max_psd_block, max_moments = budget.max_moment_block, budget.max_moments
    max_seconds, margin = budget.max_solve_seconds, budget.polish_margin
    if size["largest_block"] > max_psd_block or size["n_moments"] > max_moments:
        raise RelaxationTooLarge(
            f"the level-2 moment relaxation would need {size['n_moments']:,} moments and a PSD "
            f"block of size {size['largest_block']} (K = {K}, reduced D = "
            f"{size['reduced_dim']}); the guard allows {max_moments:,} moments and blocks up to "
            f"{max_psd_block}"
        )
    report_stage(f"global-optimality test: level-2 moment relaxation, {size['n_moments']:,} "
                 f"moments, largest PSD block {size['largest_block']} (SCS)")
    try:
        import scs
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("the moment relaxation needs SCS: pip install 'catdask[sdp]'") from exc

    problem = moment_problem(R, W, anchor, budget)
    ident, r = problem.ident, problem.basis.shape[1]
    A_scs, b, cones = problem.A, problem.b, problem.cones
    settings = {"scale": budget.anchored_scs_scale if problem.anchor is not None
                else budget.full_scs_scale,
                **(scs_options or {})}
    if W is not None:
        x0 = ident.moment_vector(problem.basis.T @ np.asarray(W, dtype=float))  # feasible
        start = {"x": x0, "y": np.zeros(A_scs.shape[0]), "s": b - A_scs @ x0}
    staged = bool(polish) and W is not None and target_gap is not None
    if staged:
        prove, system = slackness_setup(problem, W)

    total, stage = 0, budget.polish_first_iters if staged else int(max_iters)
    while True:
        left = max(max_seconds - (time.perf_counter() - t0), 1e-3)
        solver = scs.SCS({"A": A_scs, "b": b, "c": -problem.f_vec}, cones, eps_abs=eps,
                         eps_rel=eps, max_iters=int(min(stage, max_iters - total)),
                         time_limit_secs=left, verbose=bool(verbose), **settings)
        sol = solver.solve(warm_start=True, **start) if W is not None else solver.solve()
        info = sol["info"]
        total += int(info["iter"])
        done = (info["status_val"] == 1 or total >= max_iters
                or time.perf_counter() - t0 >= max_seconds)
        z = np.asarray(sol["y"], dtype=float)
        if not staged or done or not np.all(np.isfinite(z)):
            break
        gap, best, data, rounds = slackness_polish(
            ident, problem.dual_data(z), problem.f_vec, system, prove, margin * target_gap)
        report_stage(f"global-optimality test: moment relaxation, {total} SCS iterations, "
                     f"proved gap {gap:.1e} (target {target_gap:.0e})")
        if gap <= margin * target_gap:
            return _result(best, data, ident, r, t0, solver_value=problem.scale * float(z[0]),
                           solver="SCS + slackness polish", iterations=total, polish_rounds=rounds,
                           status=f"stopped early, {rounds} polish rounds proved the target gap")
        # Continue from the iterate, at the scale SCS had adapted to.
        start = {"x": sol["x"], "y": sol["y"], "s": sol["s"]}
        settings = {**settings, "scale": float(info["scale"])}
        stage = total
    if not np.all(np.isfinite(z)):
        raise NumericalFailure(
            f"the moment relaxation solver returned no solution ({info['status']})")
    best, dual = problem.prove(z)
    return _result(best, dual, ident, r, t0, solver_value=problem.scale * float(z[0]),
                   solver="SCS", status=str(info["status"]), iterations=total)


def slackness_setup(problem, W):
    """``(prove, system)`` for :func:`slackness_polish` at W: ``prove(data)`` gives the relative
    gap over ``f(W)`` that ``dual_bound`` proves from ``data``, and its bound; ``system`` the
    complementary-slackness system at the nearest orthonormal reduced point."""
    W = np.asarray(W, dtype=float)
    R = problem.R
    f_W = 0.5 * float(sum(W[:, k] @ R[k] @ W[:, k] for k in range(R.shape[0])))
    Yo = np.linalg.svd(problem.basis.T @ W, full_matrices=False)
    system = slackness_system(problem.ident, Yo[0] @ Yo[2])

    def prove(data):
        bound = dual_bound(R, data, problem.ident)
        return (bound.upper_bound - f_W) / abs(f_W) if f_W else math.inf, bound

    return prove, system


def _result(best, dual, ident, r, t0, **how):
    """The :class:`MomentBound` of the proof data ``dual``, whose proved bound is ``best``;
    ``how``: the solver's value, name, status and iterations (and polish rounds)."""
    return MomentBound(
        upper_bound=float(best.upper_bound), residual_charge=best.residual_charge,
        residual_l1=best.residual_l1, psd_slack=best.psd_charge,
        nullspace_charge=best.nullspace_charge, n_moments=ident.n,
        block_sizes=tuple(ident.sizes()), reduced_dim=r, seconds=time.perf_counter() - t0,
        dual=dual, **how)
