"""The kernel certificate: K-CQS certified as the linear problem on a Gram factor's rows."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..kernels.gram_factor import pivoted_cholesky
from ..operators import blocks
from .budget import DEFAULT_BUDGET
from .certify import certify_global_optimum
from .kernel_lowrank import certify_kernel_lowrank
from .ladder import CERTIFIED, GAP, NOT_ATTEMPTED, Outcome, climb
from .record import not_applicable


@dataclass
class KernelState:
    """The problem the kernel levels share, as :func:`certify_kernel_axes` takes it."""

    operator: Any
    classes: Any
    origin: str
    A: np.ndarray
    full_sdp: bool | str
    moment: bool
    rng: Any
    projections: Any
    fit_seconds: float | None = None


class Probe:
    """The low-rank test at ``probe_rank`` landmarks (docs/design.md §4c, "Cost"): a
    certificate ends the test (wine, global origin: 0.015 s against the dense test's 0.053 s);
    otherwise the exact factor decides, with its gap."""

    name = "probe"

    def applies(self, budget, state):
        return state.operator.n_samples <= budget.dense_max_samples

    def estimate(self, budget, state):
        return {"landmarks": budget.probe_rank, "samples": state.operator.n_samples}

    def run(self, budget, state):
        probe = certify_kernel_lowrank(state.operator, state.origin, state.A,
                                       full_sdp=state.full_sdp, rng=state.rng, probe_only=True,
                                       projections=state.projections, budget=budget)
        if probe is not None:
            return Outcome(self.name, CERTIFIED, bound=probe.verified_upper_bound,
                           evidence=probe, next=None)
        return Outcome(self.name, GAP, next="exact factor")


class LowRank:
    """The low-rank test's rounds with their lifts (docs/design.md §4c)."""

    name = "low-rank"

    def applies(self, budget, state):
        return state.operator.n_samples > budget.dense_max_samples

    def estimate(self, budget, state):
        return {"factor_bytes": budget.lowrank_max_bytes, "samples": state.operator.n_samples}

    def run(self, budget, state):
        # Landmarks bought with the fit's time only where no exact factor can follow: up to
        # exact_factor_max_rank samples it decides a gap the lift leaves open, exactly.
        exact_follows = state.operator.n_samples <= budget.exact_factor_max_rank
        cert, result = certify_kernel_lowrank(
            state.operator, state.origin, state.A, full_sdp=state.full_sdp,
            moment=state.moment, rng=state.rng, projections=state.projections, details=True,
            fit_seconds=None if exact_follows else state.fit_seconds, budget=budget)
        # Up to exact_factor_max_rank samples an exact factor always exists (rank <= N), and
        # where the lift, not the relaxation, keeps the gap open the dense test can close it.
        rescue = not cert.certified and exact_follows and lift_keeps_gap_open(cert, result)
        return Outcome(self.name, cert.status, bound=cert.verified_upper_bound, evidence=cert,
                       next="exact factor" if rescue else None)


class ExactFactor:
    """The test through an exact factor ``G = L L^T`` of rank at most
    ``exact_factor_max_rank`` (docs/design.md §4, "Kernel version")."""

    name = "exact factor"

    def applies(self, budget, state):
        return True

    def estimate(self, budget, state):
        return {"max_rank": budget.exact_factor_max_rank, "samples": state.operator.n_samples}

    def run(self, budget, state):
        dense = dense_kernel_test(state.operator, state.classes, state.origin, state.A,
                                  state.full_sdp, state.moment, state.rng, budget)
        if dense is None:
            return Outcome(self.name, NOT_ATTEMPTED, next=None, note=(
                "not attempted: the Gram matrix's numerical rank exceeds "
                f"{budget.exact_factor_max_rank} (pivoted Cholesky did not converge)"))
        return Outcome(self.name, dense.status, bound=dense.verified_upper_bound,
                       evidence=dense, next=None)


#: The kernel test's levels, in the order they are tried.
KERNEL_LADDER = (Probe(), LowRank(), ExactFactor())


def certify_kernel_axes(operator, classes, origin, A, *, full_sdp="auto", moment=False,
                        rng=None, projections=None, fit_seconds=None, budget=DEFAULT_BUDGET):
    """Certificate of kernel axes ``A`` (K, N; ``w_k = sum_j A[k, j] phi(x_j)``) on a Gram operator
    of class-sorted samples (``classes``): ``G`` for ``origin="class"``, ``H G H`` for ``"global"``,
    the one the problem was solved on. ``full_sdp``, ``moment`` and ``rng`` as in
    :func:`certify_global_optimum`; ``projections``, the fit's ``A G`` in float64, spare the
    low-rank test its product with G; ``fit_seconds``, the fit's wall seconds, is what the low-rank
    test may grow its landmarks against; ``budget`` sizes the ladder (:data:`KERNEL_LADDER`).
    Returns the ladder's certificate (docs/design.md §4c); where the exact factor runs after
    the low-rank test, the better outcome (certified, else the smaller gap)."""
    state = KernelState(operator, classes, origin, A, full_sdp, moment, rng, projections,
                        fit_seconds)
    return _render(climb(KERNEL_LADDER, budget, state))


def _render(trail):
    """The certificate of a climb of :data:`KERNEL_LADDER`, its reason from the trail."""
    last = trail[-1]
    low = next((o.evidence for o in trail if o.level == "low-rank"), None)
    if low is None:
        return not_applicable(last.note) if last.evidence is None else last.evidence
    dense = last.evidence if last.level == "exact factor" else None
    if dense is None or not (dense.certified or dense.gap < low.gap):
        return low
    # The exact factor, where the low-rank lift (not the relaxation) left the gap open.
    return dataclasses.replace(dense, reason=(
        f"{dense.reason}; the exact Gram factor decided: the low-rank test's lift left a "
        f"gap of {low.gap:.1e}"), seconds=low.seconds + dense.seconds)


def dense_kernel_test(operator, classes, origin, A, full_sdp="auto", moment=False, rng=None,
                      budget=DEFAULT_BUDGET):
    """The test through an exact factor ``G = L L^T`` (docs/design.md §4, "Kernel version"),
    or None when G's numerical rank exceeds ``budget.exact_factor_max_rank``."""
    t0 = time.perf_counter()
    L, _, ok = pivoted_cholesky(operator.diagonal(), operator.columns, rtol=1e-12,
                                max_rank=budget.exact_factor_max_rank)
    if not ok:
        return None
    cert = certify_global_optimum(equivalent_class_matrices(L, classes, origin), L.T @ A.T,
                                  full_sdp=full_sdp, moment=moment, rng=rng, budget=budget)
    return dataclasses.replace(cert, seconds=time.perf_counter() - t0)


def lift_keeps_gap_open(cert, result):
    """Whether the lift to the full problem, not the compressed SDP relaxation, is what keeps
    the low-rank test's gap open: the compressed problem's own gap is under half the lifted
    one (0 where the compressed test certified)."""
    if result is None or not cert.applicable:
        return False
    compressed = result.compressed
    own = 0.0 if compressed.certified else compressed.gap
    return own < 0.5 * cert.gap


def equivalent_class_matrices(L, classes, origin):
    """Class matrices of the linear problem on the rows of the Gram factor L (sorted rows)."""
    stats = blocks.block_class_stats(L, classes.codes, classes.n_classes)
    return blocks.class_second_moments(stats, np.zeros(L.shape[1]), origin)
