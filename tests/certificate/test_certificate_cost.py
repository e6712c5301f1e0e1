"""What makes the low-rank kernel test cheaper must not change what it proves (issue 26).

- the probe at a few landmarks ends the test only with a certificate, and a planted local
  maximum is refuted with or without it (on numpy and Dask);
- the probe leaves the first round's subspace exactly as it was (the pending block);
- a dual point whose lifts are skipped (``above``) could not have given a smaller bound;
- the class-block pass gives the same bounds from ``class_gram`` as from Gram columns.
"""

from __future__ import annotations

import numpy as np
import pytest

from catdask.certificate import certify_global_optimum
from catdask.certificate.budget import CertificateBudget
from catdask.certificate.complement import class_block_leftover
from catdask.certificate.kernel_lowrank import certify_kernel_lowrank, lifted_dual_bound
from catdask.certificate.subspace_factor import SubspaceFactor
from catdask.kernels import make_kernel

from tests.certificate.test_certificate_lowrank import (
    BACKENDS,
    coefficients,
    exact_features,
    gram_operator,
    leftover_case,
    objective,
    wide_rbf_optima,
)
from tests.helpers.data import make_blobs


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_probe_never_skips_a_refutation_and_certifies_only_what_the_full_test_does(backend):
    """The two-optima data through a wide RBF kernel (a strict local maximum at 0.889 of the
    global one, 40 samples): with a probe of 1-8 landmarks running before the full test, the
    local maximum is still refuted (the dense test refutes it too) and every bound lies above
    the best of 100 restarts; the global maximum is certified with and without the probe."""
    op, F, R, optima, values = wide_rbf_optima(backend)
    best = values.max()
    local, glob = optima[int(np.argmin(values))], optima[int(np.argmax(values))]
    assert objective(R, local) < 0.9 * best
    assert not certify_global_optimum(R, local).certified
    probed = 0
    for probe in (0, 1, 2, 4, 8):
        budget = CertificateBudget(probe_rank=probe)
        cert = certify_kernel_lowrank(op, "class", coefficients(F, local), budget=budget)
        assert not cert.certified
        assert cert.verified_upper_bound >= best - 1e-9
        cert, res = certify_kernel_lowrank(op, "class", coefficients(F, glob), budget=budget,
                                           details=True)
        assert cert.certified and cert.verified_upper_bound >= best - 1e-9
        probed += res.rounds == 0  # certified by the probe itself
    assert probed  # the probe's own certificates were among those checked


def test_a_probe_keeps_the_first_rounds_subspace():
    """Growing to a few landmarks and then on gives the pivots and the factor, bit for bit, of
    growing at once (the block of candidates the probe stopped in is finished first)."""
    X, y = make_blobs(n_per_class=70, n_features=4, n_classes=3, seed=5, spread=1.0)
    op = gram_operator(X, y, make_kernel("rbf", n_features=4, gamma=0.3), "class", "numpy")
    F, R = exact_features(op, y, "class")
    W = np.linalg.qr(np.random.default_rng(3).standard_normal((F.shape[1], 3)))[0]
    A = coefficients(F, W)
    K, plan = 3, 3 + 100
    direct = SubspaceFactor(op, A, plan)
    direct.grow(0.0, plan)
    for probe in (5, 30, 64, 90):
        staged = SubspaceFactor(op, A, plan)
        staged.grow(0.0, K + probe, plan=plan)
        assert staged.m == K + probe and staged.pending() == (probe not in (64,))
        staged.grow(0.0, plan)
        assert staged.pivots == direct.pivots
        assert np.array_equal(staged.L[:, : staged.m], direct.L[:, : direct.m])
        assert np.array_equal(staged.d, direct.d)
        assert staged.columns_used == direct.columns_used


def test_a_dual_point_whose_lifts_are_skipped_could_not_have_done_better():
    """``above``: the costlier lifts (Lemmas 2', 2'') are skipped only when they cannot go below
    it, so min(above, result) is the same as without the skip, and the result is a bound."""
    rng = np.random.default_rng(7)
    K, m = 3, 9
    B = [rng.standard_normal((m, 12)) for _ in range(K)]
    R_S = np.stack([b @ b.T for b in B])
    W_S = np.linalg.qr(rng.standard_normal((m, K)))[0]
    eps = np.array([0.3, 0.05, 0.1])
    gamma2 = np.array([1e-3, 2e-2, 0.0])
    for nu in (np.full(K, 5.0), np.array([20.0, 8.0, 12.0])):
        full = lifted_dual_bound(R_S, W_S, nu, eps, gamma2=gamma2)[0]
        lemma2 = lifted_dual_bound(R_S, W_S, nu, eps)[0]
        assert full <= lemma2
        for above in np.linspace(0.5 * full, 2.0 * lemma2, 25):
            got = lifted_dual_bound(R_S, W_S, nu, eps, gamma2=gamma2, above=above)[0]
            assert got in (full, lemma2)
            assert min(above, got) == min(above, full)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("origin", ["class", "global"])
def test_class_blocks_from_class_gram_match_those_from_columns(origin, backend):
    op, _, _, _, _, L = leftover_case(origin, backend)
    members = [np.asarray(op.classes.members(k)) for k in range(3)]
    budget = CertificateBudget(class_block_columns=5)
    whole = class_block_leftover(op, L, members, origin, budget=budget)
    columns = class_block_leftover(op, L, members, origin, budget=CertificateBudget(
        class_block_columns=5, class_gram_max_bytes=0))  # Gram columns only
    np.testing.assert_allclose(whole[0], columns[0], rtol=1e-9)
    np.testing.assert_allclose(whole[1], columns[1], rtol=1e-9)
    for a, b in zip(whole[2], columns[2]):
        np.testing.assert_allclose(a[0], b[0], rtol=1e-8, atol=1e-12 * np.abs(b[0]).max())


@pytest.mark.parametrize("backend", BACKENDS)
def test_below_the_dense_cap_the_probe_certifies_only_what_the_dense_test_does(backend):
    """Up to 300 samples the probe runs before the dense test (``certify_kernel_axes``): the
    planted local maximum is still refuted, the global one certified (here by the probe)."""
    from catdask.certificate.kernel import certify_kernel_axes

    op, F, R, optima, values = wide_rbf_optima(backend)
    best = values.max()
    by_probe = 0
    for probe in (1, 2, 4, 8):  # 40 samples: probes below the Gram rank
        budget = CertificateBudget(probe_rank=probe)
        local = certify_kernel_axes(op, op.classes, "class",
                                    coefficients(F, optima[int(np.argmin(values))]),
                                    budget=budget)
        assert not local.certified and local.verified_upper_bound >= best - 1e-9
        glob = certify_kernel_axes(op, op.classes, "class",
                                   coefficients(F, optima[int(np.argmax(values))]),
                                   budget=budget)
        assert glob.certified and glob.verified_upper_bound >= best - 1e-9
        by_probe += "low-rank test" in glob.reason
    assert by_probe  # some of those certificates were the probe's
