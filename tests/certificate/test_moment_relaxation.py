"""Level-2 moment relaxation: a rigorous bound that proves optima the SDP-dual test cannot."""

import numpy as np
import pytest

pytest.importorskip("scs", reason="the moment relaxation needs the sdp extra (SCS)")

from catdask.certificate import certify_global_optimum  # noqa: E402
from catdask.certificate.budget import CertificateBudget  # noqa: E402
from catdask.certificate.moment import (  # noqa: E402
    RelaxationTooLarge,
    moment_relaxation_bound,
    moment_relaxation_size,
)


def _polar(Y):
    U, _, Vt = np.linalg.svd(Y, full_matrices=False)
    return U @ Vt


def _objective(R, W):
    return 0.5 * sum(W[:, k] @ R[k] @ W[:, k] for k in range(R.shape[0]))


def _best_local_optimum(R, starts=40, seed=0):
    """Best of many runs of the scatter-form iteration W <- polar([R_k w_k]) (monotone ascent)."""
    rng = np.random.default_rng(seed)
    K, D, _ = R.shape
    best = (-np.inf, None)
    for _ in range(starts):
        W = _polar(rng.standard_normal((D, K)))
        for _ in range(3000):
            W_new = _polar(np.stack([R[k] @ W[:, k] for k in range(K)], axis=1))
            done = np.linalg.norm(W_new - W) < 1e-13
            W = W_new
            if done:
                break
        best = max(best, (_objective(R, W), W), key=lambda t: t[0])
    return best


def _competing_classes(seed):
    """Class matrices whose top directions compete (orthogonality binds): the SDP dual is loose."""
    rng = np.random.default_rng(seed)
    D = int(rng.integers(3, 6))
    K = min(int(rng.integers(2, 4)), D)
    u = rng.standard_normal((D, 2))
    R = []
    for _ in range(K):
        B = u @ rng.standard_normal((2, 2)) * rng.uniform(0.5, 2) + 0.3 * rng.standard_normal((D, 2))
        R.append(B @ B.T)
    return np.stack(R)


def test_proves_an_optimum_the_sdp_dual_test_cannot():
    # Found by search over _competing_classes: D = 4, K = 2, SDP-dual gap 6.7e-6 > tol.
    R = _competing_classes(376)
    f, W = _best_local_optimum(R, seed=376)
    cert = certify_global_optimum(R, W)
    assert not cert.certified and cert.gap > 1e-6
    bound = moment_relaxation_bound(R)
    assert bound.upper_bound >= f
    assert (bound.upper_bound - f) / f <= 1e-6
    assert bound.upper_bound <= cert.upper_bound + 1e-12 * f


def test_single_axis_bound_is_half_the_top_eigenvalue():
    # K = 1: max 1/2 w^T R w over unit w is 1/2 lambda_max(R) (closed form).
    rng = np.random.default_rng(1)
    A = rng.standard_normal((5, 5))
    R = (A @ A.T)[None]
    top = 0.5 * np.linalg.eigvalsh(R[0])[-1]
    bound = moment_relaxation_bound(R)
    assert top <= bound.upper_bound <= top * (1 + 1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_bound_is_never_below_an_attained_value(seed):
    R = _competing_classes(seed)
    f, _ = _best_local_optimum(R, starts=10, seed=seed)
    bound = moment_relaxation_bound(R)
    assert bound.upper_bound >= f
    rng = np.random.default_rng(seed)
    for _ in range(50):
        W = _polar(rng.standard_normal((R.shape[1], R.shape[0])))
        assert _objective(R, W) <= bound.upper_bound


def test_common_null_space_is_projected_out_without_changing_the_bound():
    rng = np.random.default_rng(3)
    R = _competing_classes(376)
    K, D, _ = R.shape
    # Embed in D + 3 dimensions with a random rotation: the extra directions are a common null space.
    Q = np.linalg.qr(rng.standard_normal((D + 3, D + 3)))[0][:, :D]
    R_big = np.einsum("id,kde,je->kij", Q, R, Q)
    assert moment_relaxation_size(R_big)["reduced_dim"] == D
    small, big = moment_relaxation_bound(R), moment_relaxation_bound(R_big)
    assert big.reduced_dim == D
    assert abs(big.upper_bound - small.upper_bound) <= 1e-6 * small.upper_bound


def test_refuses_by_size_before_building_anything():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 40, 40))
    R = A @ A.transpose(0, 2, 1)
    size = moment_relaxation_size(R)
    assert size["largest_block"] == 1 + 6 * 40 * 41 // 2
    with pytest.raises(RelaxationTooLarge, match="would need .* moments and a PSD block of size 4921"):
        moment_relaxation_bound(R)


def test_counts_moments_as_built():
    R = _competing_classes(376)
    size = moment_relaxation_size(R)
    bound = moment_relaxation_bound(R)
    assert bound.n_moments == size["n_moments"]
    assert list(bound.block_sizes) == size["block_sizes"]


def test_certificate_moment_level_proves_what_the_dual_cannot():
    R = _competing_classes(376)
    f, W = _best_local_optimum(R, seed=376)
    plain = certify_global_optimum(R, W)
    cert = certify_global_optimum(R, W, moment=True)
    assert not plain.certified
    assert cert.certified and cert.method == "moment" and cert.gap == 0.0
    assert f <= cert.verified_upper_bound <= f * (1 + 1e-6)
    assert "moment relaxation (SCS" in cert.reason


def test_certificate_moment_level_refused_by_size_says_so():
    R = _competing_classes(376)
    f, W = _best_local_optimum(R, seed=376)
    cert = certify_global_optimum(R, W, moment=True,
                                  budget=CertificateBudget(max_moment_block=5))
    assert not cert.certified
    assert "moment relaxation skipped" in cert.reason and "PSD block of size 21" in cert.reason


@pytest.mark.slow
def test_estimator_certify_moment_on_wine_class_origin():
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    from catdask import CategorySpace

    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    est = CategorySpace(origin="class", n_restarts=4, random_state=0, certify="moment").fit(X, y)
    assert est.certificate_.certified and est.certificate_.method == "moment"
    assert est.certificate_.verified_gap <= 1e-6
    from catdask.certificate import verify_certificate

    assert verify_certificate(est).upper_bound == est.certificate_.verified_upper_bound


def test_a_solve_stopped_by_the_time_limit_still_bounds_rigorously():
    """The time limit stops the solver early; the repaired bound stays above every attained value
    (only looser than the full solve's), so a slow solve cannot run unbounded nor lie."""
    R = _competing_classes(376)
    f, _ = _best_local_optimum(R, seed=376)
    full = moment_relaxation_bound(R)
    early = moment_relaxation_bound(R, budget=CertificateBudget(max_solve_seconds=1e-4))
    assert early.upper_bound >= f
    assert early.upper_bound >= full.upper_bound - 1e-9 * f
    rng = np.random.default_rng(376)
    for _ in range(50):
        W = _polar(rng.standard_normal((R.shape[1], R.shape[0])))
        assert _objective(R, W) <= early.upper_bound


# ----------------------------------------------------------------------------- proof from dual data
def test_dual_data_reproduce_the_bound_without_a_solver():
    from catdask.certificate.moment_dual import dual_bound

    R = _competing_classes(376)
    bound = moment_relaxation_bound(R)
    again = dual_bound(R, bound.dual)
    assert again.upper_bound == bound.upper_bound
    assert again.residual_charge == bound.residual_charge


def test_tampered_dual_data_never_give_a_lower_bound():
    """Whatever the numbers, the bound holds: changing a Gram entry or a multiplier moves the
    residual onto the charge, so the proved bound rises; gamma only enters as gamma - rho_0,
    so lowering it changes nothing."""
    import dataclasses

    from catdask.certificate.moment_dual import dual_bound

    R = _competing_classes(376)
    f, _ = _best_local_optimum(R, seed=376)
    bound = moment_relaxation_bound(R)
    d = bound.dual
    gram = [g.copy() for g in d.gram]
    gram[0][1] += 1e-3
    lam = d.multipliers.copy()
    lam[0] += 1e-3
    lowered = dual_bound(R, dataclasses.replace(d, gamma=d.gamma - 1e-3)).upper_bound
    assert abs(lowered - bound.upper_bound) <= 1e-12 * f
    for bad in (dataclasses.replace(d, gram=tuple(gram)),
                dataclasses.replace(d, multipliers=lam)):
        tampered = dual_bound(R, bad).upper_bound
        assert tampered >= f
        assert tampered > bound.upper_bound + 1e-5 * f


def test_residual_group_weights_are_exact_on_unit_columns():
    """Within each group sum_alpha weight_alpha (y^alpha)^2 = 1 at any Y with unit columns (the
    identity behind the weighted l2 charge, docs/design.md 4b), and the charge dominates
    |rho(Y)| for a random residual at random orthonormal Y."""
    from catdask.certificate.moment_sos import Identity

    rng = np.random.default_rng(0)
    ident = Identity(3, 4)
    gid, weight = ident.groups()
    rho = rng.standard_normal(ident.n)
    charge = sum(np.sqrt(np.sum(rho[gid == g] ** 2 / weight[gid == g]))
                 for g in range(gid.max() + 1))
    for _ in range(20):
        Y = _polar(rng.standard_normal((4, 3)))
        m = ident.moment_vector(Y)
        sums = np.bincount(gid, weights=weight * m**2)
        np.testing.assert_allclose(sums, 1.0, rtol=1e-12)
        assert abs(rho @ m) <= charge
    # l1 (the previous charge) is never smaller.
    assert charge <= np.abs(rho).sum()


def test_nearly_common_null_space_is_charged():
    """Directions where sum_k R_k is tiny but not zero are dropped and their eigenvalues charged:
    the bound stays above a brute-force maximum of the full problem."""
    rng = np.random.default_rng(5)
    R = _competing_classes(376)
    K, D, _ = R.shape
    Q = np.linalg.qr(rng.standard_normal((D + 2, D + 2)))[0]
    tiny = 1e-13 * np.linalg.norm(R[0], 2)
    R_big = np.stack([Q[:, :D] @ Rk @ Q[:, :D].T + tiny * np.outer(Q[:, D + k % 2], Q[:, D + k % 2])
                      for k, Rk in enumerate(R)])
    bound = moment_relaxation_bound(R_big)
    assert bound.reduced_dim == D and bound.nullspace_charge > 0
    f, _ = _best_local_optimum(R_big, starts=20, seed=1)
    assert f <= bound.upper_bound <= f * (1 + 1e-5)


def _data_with_class_scatter(R, seed=0):
    """Rows whose class-origin scatter matrices are exactly R_k: c_k +- sqrt(l_i / 2) u_i."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for k, Rk in enumerate(R):
        lam, U = np.linalg.eigh(Rk)
        c = rng.standard_normal(R.shape[1])
        for li, ui in zip(lam, U.T):
            step = np.sqrt(max(li, 0.0) / 2) * ui
            X += [c + step, c - step]
            y += [k, k]
    return np.array(X), np.array(y)


def test_model_keeps_the_moment_dual_data_and_reverifies_them(tmp_path):
    """A moment-certified model carries its dual data through the registry (arrays + JSON);
    verify_certificate reproduces the bound from them without a solver and rejects tampered
    data."""
    from catdask import CategorySpace
    from catdask.certificate import CertificateVerificationError, verify_certificate
    from catdask.model_io import export_model, import_model
    from catdask.store import load_estimator, register_estimator

    R = _competing_classes(376)  # the SDP dual leaves a gap of 6.7e-6 here
    X, y = _data_with_class_scatter(R)
    est = CategorySpace(origin="class", n_restarts=6, random_state=0, certify="moment").fit(X, y)
    cert = est.certificate_
    assert cert.certified and cert.method == "moment"
    np.testing.assert_allclose(cert.moment_dual.class_matrices, R, rtol=1e-10, atol=1e-12)

    register_estimator(tmp_path, "synthetic-cqs", est)
    loaded = load_estimator(tmp_path, "synthetic-cqs")
    checked = verify_certificate(loaded)
    assert checked.certified and checked.upper_bound == cert.verified_upper_bound
    assert checked.gap <= cert.tol
    # Against class matrices recomputed from the data (not the stored ones): same verdict.
    assert verify_certificate(loaded, class_matrices=R).certified

    arrays, meta = export_model(est)
    gram = arrays["certificate.moment.gram"].copy()
    gram[len(gram) // 2] += 1e-2 * np.abs(gram).max()
    with pytest.raises(CertificateVerificationError, match="prove max f <="):
        verify_certificate(import_model({**arrays, "certificate.moment.gram": gram}, meta))
    # The class matrices are part of the claim: other matrices are refused (objective check).
    other = arrays["certificate.moment.class_matrices"] * 1.001
    with pytest.raises(CertificateVerificationError):
        verify_certificate(import_model({**arrays, "certificate.moment.class_matrices": other},
                                        meta))
    key = "certificate.moment.multipliers"
    short = {**arrays, key: arrays[key][:-1]}
    with pytest.raises(CertificateVerificationError, match="malformed"):
        verify_certificate(import_model(short, meta))


def test_anchored_basis_bounds_and_reverifies():
    """The anchored Gram basis (coordinates rotated onto W, block [1, y_ki y_kj] with i < K) is a
    smaller SOS family: its bound is still never below an attained value, and its dual data
    re-prove the same bound."""
    from catdask.certificate.moment_dual import dual_bound
    from catdask.certificate.moment_sos import block_sizes

    R = _competing_classes(376)
    f, W = _best_local_optimum(R, seed=376)
    K, D, _ = R.shape
    bound = moment_relaxation_bound(R, W=W, anchor=K)
    assert bound.dual.anchor == K and bound.block_sizes[0] == block_sizes(K, D, K)[0] < 21
    assert bound.upper_bound >= f
    assert dual_bound(R, bound.dual).upper_bound == bound.upper_bound
    with pytest.raises(ValueError, match="anchor must be in"):
        moment_relaxation_bound(R, W=W, anchor=K - 1)


def test_shared_identity_and_vectorised_moments_match_the_definitions():
    """The per-process identity is one object per (K, r, anchor) and equals a fresh build; its
    moment vector is prod_v y_v over each monomial (brute force), its groups are computed once
    and read-only (a caller cannot corrupt the next proof's charge)."""
    import math

    from catdask.certificate.moment_sos import Identity, identity

    K, r = 3, 4
    shared = identity(K, r, None)
    assert identity(K, r, None) is shared and identity(K, r, K) is not shared
    fresh = Identity(K, r, None)
    assert fresh._monos.keys == shared._monos.keys
    assert (fresh.multipliers != shared.multipliers).nnz == 0
    Y = np.random.default_rng(5).standard_normal((r, K))
    y = Y.T.ravel()
    expected = np.array([math.prod(y[v] for v in mono) for mono in shared._monos.keys])
    np.testing.assert_allclose(shared.moment_vector(Y), expected, rtol=1e-14, atol=0)
    gid, weight = shared.groups()
    assert shared.groups()[0] is gid
    with pytest.raises(ValueError):
        weight[0] = 2.0
    np.testing.assert_array_equal(fresh.groups()[1], weight)


@pytest.mark.parametrize("scale", [1e-3, 0.1, 10.0])
def test_bound_is_valid_whatever_the_solver_scale(scale):
    """SCS's initial scale (chosen per basis) decides how tight the proved bound is, never
    whether it holds: at every scale the bound is >= the best of many local optima."""
    rng = np.random.default_rng(9)
    R = np.stack([a @ a.T for a in rng.standard_normal((3, 5, 5))])
    best, W = _best_local_optimum(R, starts=20)
    mb = moment_relaxation_bound(R, W=W, scs_options={"scale": scale}, max_iters=400)
    assert mb.upper_bound >= best * (1 - 1e-12)


def test_the_sdp_dual_level_says_when_the_moment_level_may_prove_w():
    """A linear fit the SDP dual does not certify says so where the opt-in moment level would
    run (its size), and not where the size guard would refuse it; with the moment level on, W
    is proved and there is nothing to suggest."""
    from catdask.certificate.certifiers import LinearCertifier
    from catdask.certificate.moment import MOMENT_HINT, moment_hint

    R = _competing_classes(376)  # D = 4, K = 2: the SDP dual leaves a gap of 6.7e-6
    _, W = _best_local_optimum(R, seed=376)
    size = moment_relaxation_size(R)
    dual = LinearCertifier(R).certify(W)
    assert not dual.certified
    assert dual.reason.endswith(
        f"the level-2 moment relaxation ({MOMENT_HINT}: {size['n_moments']:,} moments, "
        f"largest PSD block {size['largest_block']}) may prove it")
    proved = LinearCertifier(R).certify(W, moment=True)
    assert proved.certified and MOMENT_HINT not in proved.reason
    rng = np.random.default_rng(0)
    wide = np.stack([a @ a.T for a in rng.standard_normal((5, 50, 60))])  # block 6,376 > 800
    assert moment_hint(wide) == ""
    assert moment_hint(np.zeros((10, 784, 784))) == ""  # no eigendecomposition at this size


def test_the_moment_hint_says_how_to_install_its_solver_when_it_is_missing(monkeypatch):
    """A hint to use the moment level, where SCS is not installed, says how to install it
    (following the hint alone would be refused: `--certify moment` needs SCS)."""
    import sys

    from catdask.certificate.moment import moment_hint, moment_install_note

    R = _competing_classes(376)
    assert moment_install_note() == ""
    assert moment_hint(R).endswith("may prove it")
    monkeypatch.setitem(sys.modules, "scs", None)  # find_spec then answers None
    assert moment_install_note() == " (it needs SCS: pip install 'catdask[sdp]')"
    assert moment_install_note("; {}") == "; it needs SCS: pip install 'catdask[sdp]'"
    assert moment_hint(R).endswith("may prove it (it needs SCS: pip install 'catdask[sdp]')")
