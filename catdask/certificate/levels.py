"""The linear test's ladder: the levels :func:`certify_global_optimum` climbs (design.md §4)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

from .bounds import full_sdp_bound, reduced_bound, relative_gap, trivial_bound, want_full_sdp
from .ladder import CERTIFIED, FAILED, GAP, NEXT, NOT_ATTEMPTED, REFUTED, Outcome
from .moment import RelaxationTooLarge, moment_relaxation_bound, moment_relaxation_size
from .rapcsak import rapcsak_lambda_max
from .resources import numerical_failures
from .sdp_dual import sdp_dual_test
from .subspace_dual import have_small_sdp_solver, subspace_dual_bound


@dataclasses.dataclass
class LinearState:
    """What the linear levels share: the point, the caller's options and the bounds so far."""

    point: Any
    full_sdp: bool | str
    moment: bool
    dual_out: dict | None
    search_bound: bool
    stage: str = "reading the class matrices"  # what was running (for a failure's reason)
    certified: bool = False
    sdp: dict = dataclasses.field(default_factory=dict)
    rap_lmax: float = math.nan
    rap_check: str | None = None
    bounds: list = dataclasses.field(default_factory=list)  # (bound, bound_method)
    pending: list = dataclasses.field(default_factory=list)  # (name, proved low, prove)
    reduced_done: bool = False
    use_sdp: bool = False
    subspace_settled: bool = False  # the subspace level bounded, or found the gap small

    def best(self):
        return min((b for b, _ in self.bounds), default=math.inf)

    def settle(self, could_matter: Callable[[float], bool]):
        """Prove the pending bounds whose lower bound ``could_matter``; keep the others."""
        for item in list(self.pending):
            if could_matter(item[1]):
                self.pending.remove(item)
                self.bounds.append((item[2](), "reduced"))

    def searching(self):
        return not self.certified and self.search_bound


class SdpDual:
    """Rapcsák's condition, then the SDP-dual test (arXiv:2205.13653) at W."""

    name = "sdp dual"

    def applies(self, budget, state):
        return True

    def estimate(self, budget, state):
        return {"eigenproblems": 2 * state.point.K, "order": state.point.D}

    def run(self, budget, state):
        state.stage = "Rapcsák's test"
        state.rap_lmax, state.rap_check = rapcsak_lambda_max(state.point)
        state.stage = "the SDP-dual test"
        sdp = state.sdp = sdp_dual_test(state.point)
        state.stage = "the upper bound"
        state.certified = bool(sdp["passed"] or state.rap_lmax <= state.point.tau)
        status = CERTIFIED if state.certified else (REFUTED if sdp["refuted"] else GAP)
        return Outcome(self.name, status, bound=math.nan if sdp["bound"] is None
                       else sdp["bound"], evidence=sdp, next=None if state.certified else NEXT)


class CheapBound:
    """The trivial bound, the SDP-dual bound at nu and, dense, the projected subgradient."""

    name = "cheap bound"

    def applies(self, budget, state):
        return state.searching()

    def estimate(self, budget, state):
        return {"eigenproblems": 3 * state.point.K, "order": state.point.D}

    def run(self, budget, state):
        point, sdp = state.point, state.sdp
        if point.dense:
            state.bounds.append((trivial_bound(point), "reduced"))
        else:
            low = 0.5 * float(np.sum(point.lam_low_R)) - point.K * point.round_guard()
            state.pending.append(("trivial bound", low, lambda: trivial_bound(point)))
        if sdp["bound"] is not None:
            state.bounds.append((sdp["bound"], "reduced"))
        elif sdp.get("verify") is not None:
            def nu_bound():
                verified = sdp["verify"]()
                sdp["margin"] = verified["margin"]  # reported as verified from now on
                return verified["bound"]
            state.pending.append(("SDP-dual bound at nu", sdp["bound_low"], nu_bound))
        if point.dense:
            # Dense eigendecompositions: a few K eigh of order D (0.06 s at D = 50, K = 10),
            # the subspace bound ~20x that (docs/design.md §4).
            state.bounds.append((reduced_bound(point, sdp["nu"], sdp["directions"],
                                               out=state.dual_out), "reduced"))
            state.reduced_done = True
        # A pending bound within subspace_min_gap may make the subspace bound unnecessary.
        state.settle(lambda low: relative_gap(max(low, point.f), point.f, point.tau)
                     <= budget.subspace_min_gap)
        return Outcome(self.name, GAP, bound=state.best())


class FullSdp:
    """The full SDP relaxation (cvxpy + Clarabel) up to ``max_sdp_dim`` under "auto"."""

    name = "full SDP"

    def applies(self, budget, state):
        return state.searching()

    def estimate(self, budget, state):
        return {"order": state.point.D, "classes": state.point.K}

    def run(self, budget, state):
        use, why_not = want_full_sdp(state.full_sdp, state.point.D, budget.max_sdp_dim)
        state.use_sdp = use
        status, bound = NOT_ATTEMPTED, math.nan
        if use:
            try:
                bound = full_sdp_bound(state.point)
                state.bounds.append((bound, "sdp"))
                status = GAP
            except numerical_failures() as exc:  # fall back to the cheap bound, say why
                why_not, status = f"the full SDP failed ({type(exc).__name__}: {exc})", FAILED
        note = f"full SDP bound skipped: {why_not}" if why_not else ""
        return Outcome(self.name, status, bound=bound, note=note)


class SubspaceDual:
    """The relaxation's dual in a growing subspace (Y = V T V^T, T from a small model):
    where the full SDP is too large, for arrays (an operator keeps to matvecs)."""

    name = "subspace dual"

    def applies(self, budget, state):
        point = state.point
        return (state.searching() and not state.use_sdp and state.full_sdp is not False
                and point.R_all is not None and point.K < point.D)

    def estimate(self, budget, state):
        return {"order": state.point.D, "classes": state.point.K}

    def run(self, budget, state):
        point = state.point
        cheap_gap = relative_gap(max(state.best(), point.f), point.f, point.tau)
        if cheap_gap <= budget.subspace_min_gap:
            state.subspace_settled = True
            return Outcome(self.name, NOT_ATTEMPTED, note=(
                f"subspace dual bound skipped: the cheap bound's relative gap {cheap_gap:.1e} "
                f"is already <= {budget.subspace_min_gap:g}"))
        if not have_small_sdp_solver():
            return Outcome(self.name, NOT_ATTEMPTED)
        try:
            bound, info = subspace_dual_bound(point, state.sdp["directions"], state.sdp["nu"])
        except numerical_failures() as exc:  # solver failure: the projected-subgradient bound
            return Outcome(self.name, FAILED, note=(
                f"subspace dual bound failed ({type(exc).__name__}: {exc})"))
        state.bounds.append((bound, "reduced"))
        state.subspace_settled = True
        if state.dual_out is not None:  # its dual point, in the caller's units, for the lifts
            state.dual_out["subspace"] = (info["V"], info["T"] * point.unit)
        return Outcome(self.name, GAP, bound=bound, note=_subspace_note(point, bound, info))


class ProjectedSubgradient:
    """The reduced bound on matvecs, where no level above gave a bound (and always when the
    low-rank kernel test wants its dual point to lift: ``dual_out``)."""

    name = "projected subgradient"

    def applies(self, budget, state):
        return (state.searching() and not state.reduced_done
                and (not state.subspace_settled or state.dual_out is not None))

    def estimate(self, budget, state):
        return {"eigenproblems": state.point.K, "order": state.point.D}

    def run(self, budget, state):
        sdp = state.sdp
        bound = reduced_bound(state.point, sdp["nu"], sdp["directions"], out=state.dual_out)
        state.bounds.append((bound, "reduced"))
        return Outcome(self.name, GAP, bound=bound)


class Moment:
    """Level 2 of the hierarchy, tried only after the SDP-dual test failed (docs/design.md
    §4b); W is certified where its rigorous bound is within ``tol`` of f(W)."""

    name = "moment"

    def applies(self, budget, state):
        return state.moment and not state.certified

    def estimate(self, budget, state):
        R = state.point.R_all
        return {} if R is None else moment_relaxation_size(R)

    def run(self, budget, state):
        point = state.point
        state.stage = "the moment relaxation"
        if point.R_all is None:
            return Outcome(self.name, NOT_ATTEMPTED, note=(
                "moment relaxation skipped: it needs the class matrices as arrays"))
        try:
            mb = moment_relaxation_bound(point.R_all, W=point.W, budget=budget,
                                         target_gap=point.tol)
            if mb.dual.anchor is not None and not mb.upper_bound - point.f <= point.tol * abs(
                    point.f):
                # The anchored basis did not prove W: the full basis may (slower; docs 4b).
                full = moment_relaxation_bound(point.R_all, W=point.W, anchor="full",
                                               budget=budget, target_gap=point.tol)
                mb = min((mb, full), key=lambda b: b.upper_bound)
        except (RelaxationTooLarge, ImportError) as exc:
            return Outcome(self.name, NOT_ATTEMPTED, note=f"moment relaxation skipped: {exc}")
        f = point.f
        gap = max(0.0, (mb.upper_bound - f) / abs(f)) if f else math.inf
        how = (f"level-2 moment relaxation ({mb.solver}, {mb.n_moments:,} moments, largest "
               f"PSD block {max(mb.block_sizes)}, {mb.iterations} iterations, "
               f"{mb.seconds:.1f} s): rigorous bound {mb.upper_bound * point.unit:.10g}, "
               f"relative gap {gap:.1e}"
               + ("" if mb.status in ("optimal", "solved") else f", solver status {mb.status}"))
        return Outcome(self.name, CERTIFIED if gap <= point.tol else GAP, bound=mb.upper_bound,
                       evidence=mb, note=how)


def _subspace_note(point, bound, info):
    """What the subspace dual bound found, in the caller's units."""
    f, unit = point.f, point.unit
    gap = relative_gap(max(bound, f), f, point.tau)
    return (f"relaxation's dual in a {info['m']}-dimensional subspace ({info['rounds']} rounds, "
            f"{info['seconds']:.1f} s): bound {bound * unit:.10g}, relative gap {gap:.1e}")


#: The linear test's levels, in the order they are tried.
LINEAR_LADDER = (SdpDual(), CheapBound(), FullSdp(), SubspaceDual(), ProjectedSubgradient(),
                 Moment())
