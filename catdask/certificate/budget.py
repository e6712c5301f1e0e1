"""What the certificate may spend: every threshold of its ladder, in one frozen object.

Each field's comment names the measurement behind its default (docs/design.md §4, §4b, §4c).
A caller (or a test) that wants another budget passes ``CertificateBudget(field=value)``;
:func:`budget_scope` sets the budget the certifiers a fit builds will use.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, replace

_MiB = 1024**2


@dataclass(frozen=True)
class CertificateBudget:
    """The certificate's thresholds (see the module docstring); defaults as measured."""

    # -- The linear test (certify_global_optimum, docs/design.md §4) --
    #: Larger estimated cost (s) not attempted (D = 784, K = 10: 30 s with one BLAS thread).
    max_seconds: float = 300.0
    #: Dense D x D eigh in the search up to this D; warm-started Lanczos (faster) above.
    dense_max_dim: int = 200
    #: Verified bounds by dense eigh up to this order (<= ~0.1 s), a Cholesky proof above.
    verify_dense_max_dim: int = 1000
    #: Rapcsák's K D x K D matrix is formed up to this order; Lanczos on matvecs above.
    rapcsak_dense_max: int = 2000
    #: Full SDP up to this D under "auto" (D <= 18: 0.1 s; D = 40: 16 s; D = 100: over 21 GB).
    max_sdp_dim: int = 20
    #: Kelley cutting-plane iterations for nu at most (8-25 measured, docs/design.md §3c).
    kelley_max_iter: int = 200
    #: Projected-subgradient steps that polish the reduced bound.
    reduced_steps: int = 15
    #: Subspace dual rounds (a second lowered the gap on all six problems) and L-BFGS iterations.
    subspace_rounds: int = 2
    subspace_model_iterations: int = 120
    #: Subspace dual only above this cheap gap (blobs D = 50: 1.6 s for 6.4e-4 -> 5.4e-4).
    subspace_min_gap: float = 1e-3

    # -- The moment level (docs/design.md §4b) --
    #: Largest PSD block: SCS's cost per iteration is an eigendecomposition of it.
    max_moment_block: int = 800
    #: Most moments of the relaxation (the size guard's second half).
    max_moments: int = 300_000
    #: Anchored Gram basis from this block size on (wine, 274 -> 109: same CPU, looser bound).
    anchor_min_block: int = 400
    #: SCS's initial scale, anchored basis (vehicle: 2,150 iterations against 3,675 at 0.1).
    anchored_scs_scale: float = 0.01
    #: SCS's initial scale, full basis (wine: 175 iterations at 0.1, 275 at 0.01).
    full_scs_scale: float = 0.1
    #: Solver time limit (s); a solve stopped by it still gives a rigorous, looser bound.
    max_solve_seconds: float = 900.0
    #: SCS's first stage before the polish, doubling after (segmentation: 300 against 950).
    polish_first_iters: int = 150
    #: The polish stops early only with this fraction of the target gap to spare.
    polish_margin: float = 0.5
    #: No moment hint above this D (its eigh of sum_k R_k: a third of the test at D = 784).
    moment_hint_max_dim: int = 200

    # -- The kernel test (docs/design.md §4, "Kernel version", and §4c) --
    #: Exact Gram factor up to this N, low-rank above (vehicle N = 846: 3.3 s, dense 25x the fit).
    dense_max_samples: int = 300
    #: Most rank of the exact factor, and most N it may rescue (blobs N = 1,500: certified, 2.6 s).
    exact_factor_max_rank: int = 1500
    #: The low-rank test certifies when the lifted bound is within this relative gap of f(W).
    lowrank_gap_tol: float = 1e-6
    #: Most landmarks (the compressed test works on (K + r)^2 matrices; the factor costs N r^2).
    lowrank_max_rank: int | None = 1024
    #: Memory for the low-rank factor, N x (K + r) float64.
    lowrank_max_bytes: int = 512 * _MiB
    #: Landmarks of the first round (doubling each round while the relaxation is tight).
    first_rank: int = 128
    #: Landmarks cap where the relaxation is not tight (blobs: 1,024 took 7x the fit, gap 3e-3).
    untight_max_rank: int = 256
    #: Past untight_max_rank, the test's share of the fit's time (images N = 4,000: 1.7e-2 -> 9.9e-3).
    growth_fit_share: float = 0.5
    #: From this N on, the share is growth_large_share (blobs N = 20,000: 6-10% at 128 landmarks).
    growth_large_samples: int = 20_000
    growth_large_share: float = 0.1
    #: Time of a round at twice the landmarks over the last one's (images N = 4,000: 4.2, 3.9).
    round_cost_growth: float = 4.0
    #: First residual target: sum_k eps_k <= first_target * gap_tol * f(W).
    first_target: float = 0.1
    #: The lift "limits" beyond this multiple of the compressed gap (wine: 5.1e-3 vs 3.9e-3).
    lift_slack: float = 1.25
    #: Rounds of growth after the first compressed test.
    max_rounds: int = 3
    #: Probe landmarks (32 missed vehicle's certificate, 64 cost 10-40% more); 0: no probe.
    probe_rank: int = 48
    #: The probe runs up to this many samples.
    probe_max_samples: int = 20_000
    #: The probe's class-block pass up to this N (blobs N = 5,000: 0.62 -> 0.88 s when wasted).
    probe_block_pass_max_samples: int = 2500
    #: Largest class block kept for the spectral bound (n_k <= 4,096).
    spectral_max_class_bytes: int = 128 * _MiB
    #: Class blocks up to this size come whole from ``class_gram`` (blobs: 1.3 s against 5.2 s).
    class_gram_max_bytes: int = 32 * _MiB
    #: Entries of one slab of rows of a class block too large to hold (32 MB of float64).
    slab_entries: int = 4 * _MiB
    #: Gram columns per request in the class-block pass (N x 128: 51 MB at N = 50,000).
    class_block_columns: int = 128

#: The measured defaults.
DEFAULT_BUDGET = CertificateBudget()

_SCOPE: contextvars.ContextVar[CertificateBudget] = contextvars.ContextVar(
    "catdask_certificate_budget", default=DEFAULT_BUDGET)


def current_budget() -> CertificateBudget:
    """The budget of the innermost :func:`budget_scope` (the defaults outside any)."""
    return _SCOPE.get()


def aiming_at(max_gap: float | None, budget: CertificateBudget | None = None) -> CertificateBudget:
    """``budget`` (the current one by default) that tries until it proves ``max_gap``: a cheap
    bound that leaves more than ``max_gap`` is refined by the subspace dual bound even where it
    is already within ``subspace_min_gap`` (``catdask train --max-gap``: on a 30,000 x 40,
    5-class table the cheap bound stopped at 8.2e-4 where a 0.1 s subspace bound proves 6.3e-4)."""
    budget = current_budget() if budget is None else budget
    if max_gap is None or max_gap >= budget.subspace_min_gap:
        return budget
    return replace(budget, subspace_min_gap=max_gap)


@contextlib.contextmanager
def budget_scope(budget: CertificateBudget):
    """Within the block, the certifiers a fit builds take ``budget`` (they keep it after)."""
    token = _SCOPE.set(budget)
    try:
        yield budget
    finally:
        _SCOPE.reset(token)
