"""The low-rank kernel test's landmarks grown against the fit's time (issue 42, item 0).

Where the compressed relaxation is not tight and the lift keeps the gap open, the test adds
landmarks past ``untight_max_rank`` while ``growth_fit_share`` of the fit's time allows
(docs/design.md §4c, "The test"). A small blobs problem (N = 80, K = 4, class origin) whose
compressed relaxation stops being tight at 28 landmarks stands in for the 784-pixel images.
"""

from __future__ import annotations

import numpy as np
import pytest

from catdask import KernelCategorySpace
from catdask.certificate import certify_global_optimum
from catdask.certificate.budget import CertificateBudget, budget_scope
from catdask.certificate.kernel_lowrank import _affordable_rank, certify_kernel_lowrank
from catdask.core.classes import ClassIndex
from catdask.kernels import make_kernel
from catdask.operators import NumpyGramOperator

from tests.certificate.test_certificate_lowrank import coefficients, wide_rbf_optima
from tests.helpers.data import make_blobs

#: 28 landmarks to start with and as the old fixed cap; no probe, no rank cap but N.
SMALL = CertificateBudget(first_rank=28, untight_max_rank=28, probe_rank=0,
                          lowrank_max_rank=None)


@pytest.fixture(scope="module")
def untight_case():
    """Blobs whose compressed relaxation is not tight from 28 landmarks on (its own gap
    3e-4 there, 9e-3 at full rank) while the lift leaves a gap of 7e-2 at 28."""
    X, y = make_blobs(n_per_class=20, n_features=3, n_classes=4, seed=0, spread=1.0)
    est = KernelCategorySpace(origin="class", gamma=0.2, random_state=0, certify=False)
    est.fit(X, y)
    op = NumpyGramOperator(X, ClassIndex(y, 4), make_kernel("rbf", n_features=3, gamma=0.2))
    return op, est.dual_coef_


def run(case, fit_seconds, budget=SMALL):
    op, A = case
    cert, res = certify_kernel_lowrank(op, "class", A, details=True, rng=0,
                                       fit_seconds=fit_seconds, budget=budget)
    f = cert.objective
    return cert, res, max(0.0, res.compressed.verified_upper_bound - f) / f


def test_without_the_fit_time_the_landmarks_stop_at_the_fixed_cap(untight_case):
    cert, res, own = run(untight_case, None)
    assert res.rank == 28 and not cert.certified
    assert cert.gap > 2.0 * own > 0.0  # the lift, not the relaxation, keeps the gap open
    cheap, res_cheap, _ = run(untight_case, 1e-9)  # a fit too short to buy anything
    assert res_cheap.rank == 28 and cheap.gap == cert.gap


def test_growth_stops_once_the_gap_is_the_relaxations_own(untight_case):
    fixed, _, _ = run(untight_case, None)
    cert, res, own = run(untight_case, 1e6)
    assert 28 < res.rank < 76  # grown, and stopped before the whole span (rank 76)
    assert not cert.certified and cert.gap <= 2.0 * own  # the relaxation's own gap is most
    assert cert.gap < 0.5 * fixed.gap
    # Every bound stays an upper bound: above the best of the fit's restarts' objective.
    assert cert.verified_upper_bound >= cert.objective


def test_the_next_round_is_sized_to_what_the_fit_time_leaves():
    budget = CertificateBudget(growth_fit_share=0.5, round_cost_growth=4.0)
    # 14 s left, a round of 4 s: 4 * 4^d = 14, d = 0.90 doublings, 256 -> 478 landmarks.
    N = 4000
    assert _affordable_rank(256, 4.0, 6.0, 40.0, N, budget) == int(256 * 2 ** (np.log(3.5)
                                                                            / np.log(4.0)))
    assert _affordable_rank(256, 4.0, 6.0, 20.0, N, budget) == 0  # 4 s left: < a quarter more
    assert _affordable_rank(256, 4.0, 25.0, 40.0, N, budget) == 0  # past the share already
    assert _affordable_rank(256, 4.0, 6.0, None, N, budget) == 0  # no fit time: no growth
    assert _affordable_rank(256, 1.0, 0.0, 32.0, N, budget) == 1024  # 16 s: two doublings
    # From growth_large_samples on, a tenth of the fit: 3.2 s of 32 s, a round of 1 s at 256.
    assert _affordable_rank(256, 1.0, 0.0, 32.0, 20_000, budget) == int(
        256 * 2 ** (np.log(3.2) / np.log(4.0)))


def test_growth_never_certifies_a_planted_local_maximum():
    """The wide RBF kernel's planted local maximum (0.889 of the global one): with every
    landmark the fit's time could buy, it stays uncertified and every bound lies above the
    best of 100 restarts."""
    op, F, R, optima, values = wide_rbf_optima("numpy")
    best = values.max()
    local = optima[int(np.argmin(values))]
    assert not certify_global_optimum(R, local).certified
    grown = 0
    for rank in (1, 2, 4):
        budget = CertificateBudget(first_rank=rank, untight_max_rank=rank, probe_rank=0,
                                   lowrank_max_rank=None)
        cert, res = certify_kernel_lowrank(op, "class", coefficients(F, local), details=True,
                                           fit_seconds=1e6, budget=budget)
        grown += res.rank > rank
        assert not cert.certified
        assert cert.verified_upper_bound >= best - 1e-9
    assert grown  # the growth past the fixed cap ran and was checked


def test_the_fit_hands_its_time_to_the_test(monkeypatch):
    """The estimator's fit time reaches the low-rank test where no exact factor follows it
    (above exact_factor_max_rank samples); below, the exact factor decides an open lift."""
    from catdask.certificate import kernel

    seen = []
    real = kernel.certify_kernel_lowrank

    def spy(*args, fit_seconds=None, **kwargs):
        seen.append(fit_seconds)
        return real(*args, fit_seconds=fit_seconds, **kwargs)

    monkeypatch.setattr(kernel, "certify_kernel_lowrank", spy)
    X, y = make_blobs(n_per_class=40, n_features=4, n_classes=3, seed=3)
    for exact_max in (20, 1500):  # N = 120: above, then below exact_factor_max_rank
        with budget_scope(CertificateBudget(dense_max_samples=20, probe_rank=0,
                                            exact_factor_max_rank=exact_max)):
            KernelCategorySpace(gamma=0.1, n_restarts=2, random_state=0,
                                certify_at="fit").fit(X, y)
    assert len(seen) == 2 and seen[0] is not None and seen[0] > 0.0 and seen[1] is None
