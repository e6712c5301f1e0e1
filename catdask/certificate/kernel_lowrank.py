"""A kernel certificate of any rank in O(N r) memory: a compressed test plus a lifted bound."""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from ..core.progress import report_stage
from .budget import DEFAULT_BUDGET
from .certify import certify_global_optimum, one_blas_thread
from .complement import class_block_leftover
from .eigen import sym
from .ladder import CERTIFIED, FAILED, GAP, REFUTED
from .lift import _delta, lifted_dual_bound, sqrt_lift_bound  # noqa: F401 (re-exported)
from .record import Certificate, not_certified
from .subspace_factor import SubspaceFactor

_EPS = np.finfo(float).eps


@dataclasses.dataclass
class LowRankResult:
    """What the low-rank test measured (for benchmarks and tests)."""

    rank: int  # landmarks r (the compressed dimension is K + r)
    residual: float  # sum_k eps_k, the complement's trace bound
    lifted_dual: float  # Lemma 2 bound on max f (inf when no nu was available)
    lifted_sqrt: float  # Lemma 3 bound on max f
    compressed: Certificate  # the linear certificate of the compressed problem
    columns: int  # Gram columns evaluated (N entries each)
    rounds: int
    frobenius: bool = False  # eps_k from a class-block pass (Lemmas 1b, 1c) instead of the trace
    norm: str = "trace"  # which bound on ||D_k|| was smallest: trace, Frobenius or spectral


def _class_matrices(L, members, origin):
    """Compressed class matrices ``R_k^S`` from the coordinates L (N, m)."""
    out = []
    for idx in members:
        Lk = L[idx]
        if origin == "class":
            Lk = Lk - Lk.mean(axis=0)
        out.append(sym(Lk.T @ Lk))
    return np.stack(out)


def axis_leakage(operator, L, W_S, members, origin):
    """``gamma_k^2 >= ||(I - P) R_k u_k||^2`` for the unit axes ``u_k = w_k / ||w_k||`` (§4c)."""
    diag = np.asarray(operator.diagonal(), dtype=float)
    m = L.shape[1]
    out = np.empty(len(members))
    for k, idx in enumerate(members):
        u = W_S[:, k] / np.linalg.norm(W_S[:, k])
        v = L[idx] @ u
        if origin == "class":
            v = v - v.mean()
        Gv = np.asarray(operator.class_matvec(k, v), dtype=float).reshape(-1)
        Lv = L[idx].T @ v
        vv = float(v @ v)
        slack = 2.0 * idx.size * (idx.size + m + 2) * _EPS * float(diag[idx].max()) * vv
        out[k] = max(0.0, float(v @ Gv) - float(Lv @ Lv)) + slack
    return out


def _objective(FW, members, origin):
    """f(A) = 1/2 sum_k ||E_k (G A^T)[C_k, k]||^2, the fit's objective, from ``G A^T``."""
    total = 0.0
    for k, idx in enumerate(members):
        u = FW[idx, k]
        if origin == "class":
            u = u - u.mean()
        total += float(u @ u)
    return 0.5 * total


def certify_kernel_lowrank(operator, origin, A, *, full_sdp="auto", moment=False,
                           frobenius=True, spectral=True, projections=None, rng=None,
                           details=False, probe_only=False, fit_seconds=None,
                           budget=DEFAULT_BUDGET):
    """Certify K-CQS coefficients A (K, N; operator's sample order, ``A G A^T = I``) through a
    rank-r subspace and a lifted bound (§4c).
    Returns a Certificate (and a :class:`LowRankResult` when ``details``)."""
    if origin not in ("class", "global"):
        raise ValueError(f"origin must be 'class' or 'global'; got {origin!r}.")
    # One BLAS thread throughout: small eigenproblems and products of order K + r, where a
    # second thread beside busy processes loses far more than it gains.
    with one_blas_thread():
        return _certify(operator, origin, A, full_sdp, moment, frobenius, spectral,
                        projections, rng, details, probe_only, fit_seconds, budget)


def _certify(operator, origin, A, full_sdp, moment, frobenius, spectral, projections, rng,
             details, probe_only, fit_seconds, budget):
    t0 = time.perf_counter()
    gap_tol, max_rank, probe_rank = (budget.lowrank_gap_tol, budget.lowrank_max_rank,
                                     budget.probe_rank)
    A = np.asarray(A, dtype=float)
    K, N = A.shape
    members = [np.asarray(operator.classes.members(k)) for k in range(K)]
    cap_bytes = max(int(budget.lowrank_max_bytes // (8 * N)) - K, 1)
    r_max = min(N, cap_bytes if max_rank is None else min(int(max_rank), cap_bytes))
    try:
        fac = SubspaceFactor(operator, A, K + r_max, projections)
    except (np.linalg.LinAlgError, ValueError) as exc:
        if probe_only:  # the caller's own test says what is wrong
            return (None, None) if details else None
        cert = not_certified(f"not certified: the low-rank test could not start ({exc}: "
                             "A G A^T is not positive definite)", seconds=time.perf_counter() - t0)
        return (cert, None) if details else cert
    f = _objective(fac.FW, members, origin)
    target = budget.first_target * gap_tol * abs(f)
    limit = K + min(r_max, budget.first_rank)
    test = dict(operator=operator, origin=origin, fac=fac, members=members, f=f,
                frobenius=frobenius, spectral=spectral, budget=budget)
    if probe_rank and K + probe_rank < limit and N <= budget.probe_max_samples:
        # The probe (docs/design.md §4c, "Cost"): the same test at a few landmarks, kept only
        # if it certifies; the pending block makes the first round's subspace the same as
        # without it.
        fac.grow(target, K + probe_rank, plan=limit)
        if fac.m == K + probe_rank and (fac.pending() or fac.residual() > target):
            probe, comp, _ = _subspace_test(rounds=0, compressed=dict(
                full_sdp=full_sdp, rng=rng, search_bound=False, budget=budget),
                only_certified=True, **dict(
                    test, frobenius=frobenius and N <= budget.probe_block_pass_max_samples))
            if probe is not None and _gap(probe, f) <= gap_tol and comp.status != REFUTED:
                cert = _record(probe, f, gap_tol, time.perf_counter() - t0, N)
                return (cert, probe) if details else cert
    if probe_only:
        return (None, None) if details else None
    result, prev_gap = None, None
    for rounds in range(1, budget.max_rounds + 2):
        report_stage(f"global-optimality test (kernel, N = {N:,}): round {rounds}, up to "
                     f"{limit - K} landmark features")
        started = time.perf_counter()
        fac.grow(target, limit)
        result, comp, eps = _subspace_test(rounds=rounds, compressed=dict(
            full_sdp=full_sdp, moment=moment, rng=rng, budget=budget), **test)
        comp_gap = _gap_of(comp.verified_upper_bound, f)
        gap = _gap(result, f)
        if gap <= gap_tol or fac.m >= fac.capacity or fac.residual() == 0.0:
            break
        tight = comp_gap <= 0.5 * gap_tol
        if rounds > budget.max_rounds or (not tight and gap <= 2.0 * comp_gap):
            break  # the relaxation is not tight and its own gap is most of the lifted one
        if tight and prev_gap is not None and not _within_reach(prev_gap, gap, gap_tol,
                                                                 fac.m - K, r_max):
            break  # at the rate the last doubling gave, the budget cannot close the gap
        prev_gap = gap
        limit = min(fac.capacity, K + 2 * (fac.m - K))  # double the landmarks
        if not tight:  # a gap, not a certificate, can come: as many landmarks as affordable
            now = time.perf_counter()
            limit = min(limit, K + max(budget.untight_max_rank, _affordable_rank(
                fac.m - K, now - started, now - t0, fit_seconds, N, budget)))
            if limit <= fac.m:
                break
        if comp_gap <= 0.5 * gap_tol:
            excess = max(min(result.lifted_dual, result.lifted_sqrt)
                         - max(comp.verified_upper_bound, f), 1e-300)
            target = min(target, eps.sum()) * min(0.5, 0.25 * gap_tol * abs(f) / excess)
        else:
            target = 0.0  # only the rank limit: the lift should shrink below the relaxation's gap
    assert result is not None  # the loop runs at least once
    cert = _record(result, f, gap_tol, time.perf_counter() - t0, N)
    return (cert, result) if details else cert


def _subspace_test(operator, origin, fac, members, f, frobenius, spectral, rounds,
                   compressed, budget, only_certified=False):
    """One compressed test on the factor's current subspace and its lifts: ``(result or None,
    compressed certificate, eps)``."""
    L = fac.L[:, : fac.m]
    lo = fac.leftover()
    eps = np.array([float(lo[idx].sum()) for idx in members])  # Lemma 1: tr D_k
    R_S = _class_matrices(L, members, origin)
    W_S = fac.LW[:, : fac.m].T
    dual_point: dict = {}
    comp = certify_global_optimum(R_S, W_S, dual_out=dual_point, **compressed)
    if only_certified and not comp.certified:
        return None, comp, eps
    cache: dict = {}  # shared by this compressed test's lifts (same R_S, W_S, comp)
    result = _lift(R_S, W_S, comp, eps, fac, rounds, dual_point=dual_point, cache=cache)
    comp_gap = _gap_of(comp.verified_upper_bound, f)
    limits = max(budget.lowrank_gap_tol, budget.lift_slack * comp_gap)
    if _gap(result, f) > limits:  # the lift is what limits
        # Lemma 2' needs the axes' leak into T: one class-block pass.
        gamma2 = axis_leakage(operator, L, W_S, members, origin)
        result = _lift(R_S, W_S, comp, eps, fac, rounds, gamma2=gamma2,
                       dual_point=dual_point, cache=cache)
        if frobenius and _gap(result, f) > limits and fac.residual() > 0.0:
            # The trace bound is what keeps the gap open: one class-block pass for
            # ||D_k||_F and lambda_max(D_k) (Lemmas 1b, 1c), then lift again.
            frob, spec, cross = class_block_leftover(operator, L, members, origin,
                                                     spectral=spectral, budget=budget)
            better = _lift(R_S, W_S, comp, np.minimum(eps, np.minimum(frob, spec)), fac,
                           rounds, gamma2=gamma2, dual_point=dual_point, cross=cross,
                           cache=cache)
            better.frobenius = True
            better.norm = _norm_name(eps, frob, spec)
            if _gap(better, f) < _gap(result, f):
                result = better
    return result, comp, eps


def _norm_name(trace, frob, spec):
    """Which bound on ``||D_k||`` gave the smallest total (for the reason string)."""
    totals = {"trace": float(np.sum(trace)), "Frobenius": float(np.sum(frob)),
              "spectral": float(np.sum(spec))}
    return min(totals, key=lambda name: totals[name])


def _affordable_rank(rank, round_seconds, spent, fit_seconds, N, budget):
    """Most landmarks a next round may have within ``growth_fit_share`` of the fit's time
    (``growth_large_share`` from ``growth_large_samples`` samples on), its cost estimated from
    the last round's (``round_cost_growth`` per doubling); 0 without the fit's time or where
    it affords less than a quarter more landmarks."""
    if fit_seconds is None or rank <= 0:
        return 0
    share = budget.growth_fit_share
    if N >= budget.growth_large_samples:
        share = min(share, budget.growth_large_share)
    left = share * float(fit_seconds) - spent
    if left <= 0.0:
        return 0
    doublings = math.log(left / max(round_seconds, 1e-9)) / math.log(budget.round_cost_growth)
    affordable = int(rank * 2.0 ** doublings)
    return affordable if affordable >= 1.25 * rank else 0


def _within_reach(prev_gap, gap, gap_tol, rank, r_max):
    """Whether doubling the landmarks, at the rate the last doubling shrank the gap, reaches
    ``gap_tol`` within ``r_max`` (measured: high-rank blobs went 128 -> 1,024 landmarks, 30x the
    fit's time, for a gap of 0.28)."""
    if gap <= gap_tol:
        return True
    rate = prev_gap / gap
    if not rate > 1.0:
        return False
    needed = math.log(gap / gap_tol) / math.log(rate)
    available = math.log2(max(r_max, 1) / max(rank, 1))
    return needed <= available + 0.5


def _lift(R_S, W_S, comp, eps, fac, rounds, gamma2=None, dual_point=None, cross=None,
          cache=None):
    """Both lifted bounds (Lemmas 2 and 3) for complement bounds ``eps``."""
    nu = None if comp.nu is None else np.asarray(comp.nu)
    if nu is None and math.isfinite(comp.objective):
        nu = np.diag(W_S.T @ np.column_stack([R_S[k] @ W_S[:, k] for k in range(len(R_S))]))
        nu = 0.5 * nu  # Lemma 2 holds for any nu; a plain choice when the search gave none
    # The searched dual points first (their lifts were the smallest on every case measured),
    # so that a point that cannot do better skips its costlier lifts (``above``).
    dual = math.inf
    for key, (V, T) in ([("subspace", dual_point["subspace"])]
                        if dual_point and "subspace" in dual_point else []) + (
            [("cheap", (dual_point["V"], dual_point["T"]))]
            if dual_point and "T" in dual_point else []):
        dual = min(dual, lifted_dual_bound(R_S, W_S, None, eps, gamma2=gamma2, cross=cross,
                                           Y=V @ T @ V.T, cache=cache, key=key,
                                           above=dual)[0])
    if nu is not None:
        dual = min(dual, lifted_dual_bound(R_S, W_S, nu, eps, gamma2=gamma2, cross=cross,
                                           cache=cache, key="nu", above=dual)[0])
    sq = sqrt_lift_bound(comp.verified_upper_bound, eps)
    return LowRankResult(rank=fac.m - fac.K, residual=float(eps.sum()), lifted_dual=dual,
                         lifted_sqrt=sq, compressed=comp, columns=fac.columns_used,
                         rounds=rounds)


def _gap_of(upper, f):
    return max(0.0, upper - f) / abs(f) if f else math.inf


def _gap(res, f):
    return _gap_of(min(res.lifted_dual, res.lifted_sqrt), f)


def _record(res, f, gap_tol, seconds, N):
    comp = res.compressed
    upper = max(min(res.lifted_dual, res.lifted_sqrt), f)
    gap = (upper - f) / abs(f) if f else math.inf
    how = "dual lift" if res.lifted_dual <= res.lifted_sqrt else "sqrt lift"
    norm = res.norm
    where = (f"{res.rank} landmarks and the K axes of N = {N} points, complement {norm} bound "
             f"{res.residual:.2e}, {res.columns} Gram columns")
    refuted = comp.status == REFUTED
    certified = bool(gap <= gap_tol) and not refuted
    if certified:
        reason = (f"certified by the low-rank test (docs/design.md §4c; {where}): every "
                  f"orthonormal W' has f(W') <= f(W) + {upper - f:.1e} ({how}; compressed "
                  f"test: {comp.method})")
    else:
        reason = (f"not certified by the low-rank test ({where}): bound {upper:.10g} ({how}), "
                  f"gap {gap:.1e} > {gap_tol:.0e}; compressed test: {comp.reason}")
    return dataclasses.replace(
        comp, certified=certified, method=(comp.method or "sdp-dual") if certified else None,
        objective=float(f), upper_bound=float(f if certified else upper),
        bound_method="certificate" if certified else "lowrank",
        gap=0.0 if certified else float(gap), seconds=float(seconds), reason=reason,
        verified_upper_bound=float(upper), status=CERTIFIED if certified else (
            REFUTED if refuted else (GAP if math.isfinite(upper) else FAILED)),
    )
