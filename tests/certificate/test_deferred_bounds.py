"""Above ``dense_max_dim`` the test proves a bound only where it could decide something (issue
26): the trivial bound and the SDP-dual bound at nu are held with a proved lower bound and
skipped when that lower bound is already beaten. On small problems, where every bound can be
computed, a skipped bound must never have been the better one, and the lower bounds must be
below the proved values."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import catdask.certificate.resources as resources_module
from catdask.certificate import certify_global_optimum
from catdask.certificate.budget import CertificateBudget
from catdask.certificate.bounds import trivial_bound
from catdask.certificate.point import StationaryPoint, read_inputs
from catdask.certificate.sdp_dual import sdp_dual_test, verify_nu
from tests.helpers.stiefel import random_stiefel, restarts

SKIPPED = {"trivial": "trivial bound not proved", "nu": "SDP-dual bound at nu not proved"}


def _untight(rng, D, K):
    """Low-rank class matrices plus a ridge: the SDP relaxation is often not tight."""
    return np.stack([a @ a.T for a in rng.standard_normal((K, D, 3))]) + 0.05 * np.eye(D)


def test_a_skipped_bound_would_not_have_improved_the_result():
    rng = np.random.default_rng(0)
    seen = {"trivial": 0, "nu": 0, "nu proved": 0}
    for _ in range(8):
        D, K = int(rng.integers(12, 30)), int(rng.integers(3, 7))
        R = _untight(rng, D, K)
        Ws, f = restarts(R, rng, 4)
        W = Ws[int(np.argmax(f))]
        for options in ({"full_sdp": False},
                        {"budget": CertificateBudget(dense_max_dim=8, max_sdp_dim=2)}):
            options = {"budget": CertificateBudget(dense_max_dim=8), **options}
            cert = certify_global_optimum(R, W, rng=0, **options)
            if cert.certified:
                continue
            # Every bound computed in full, by dense eigenvalues (caller's units).
            trivial = 0.5 * sum(np.linalg.eigvalsh(r)[-1] for r in R)
            point = StationaryPoint(read_inputs(R, W, 8), tol=1e-6,
                                    budget=CertificateBudget(dense_max_dim=8),
                                    rng=np.random.default_rng(0))
            nu_bound = verify_nu(point, np.array(cert.nu) / point.unit)["bound"] * point.unit
            assert cert.upper_bound >= f.max() - 1e-9 * abs(f.max())
            for name, value in (("trivial", trivial), ("nu", nu_bound)):
                if SKIPPED[name] in cert.reason:
                    seen[name] += 1
                    assert value >= cert.upper_bound * (1 - 1e-9), (name, value, cert.reason)
            if "no nu passes" in cert.reason and SKIPPED["nu"] not in cert.reason:
                seen["nu proved"] += 1  # it could have won, so it was proved
                assert cert.upper_bound <= nu_bound * (1 + 1e-6)
    assert min(seen.values()) >= 1, seen


def test_lower_bounds_of_pending_bounds_are_below_their_proved_values():
    rng = np.random.default_rng(1)
    deferred = 0
    for _ in range(6):
        D, K = int(rng.integers(14, 28)), int(rng.integers(3, 7))
        R = _untight(rng, D, K)
        Ws, f = restarts(R, rng, 3)
        for W in (Ws[int(np.argmax(f))], random_stiefel(rng, D, K)):
            point = StationaryPoint(read_inputs(R, W, 8), tol=1e-6,
                                    budget=CertificateBudget(dense_max_dim=8),
                                    rng=np.random.default_rng(0))
            low = 0.5 * float(np.sum(point.lam_low_R)) - point.K * point.round_guard()
            assert low <= trivial_bound(point)
            sdp = sdp_dual_test(point)
            if sdp["verify"] is not None:
                deferred += 1
                assert not sdp["passed"] and sdp["bound"] is None
                assert sdp["bound_low"] <= sdp["verify"]()["bound"]
    assert deferred >= 2


def test_size_guard_does_not_probe_when_the_ceiling_fits(monkeypatch):
    def probe(*args, **kwargs):
        raise AssertionError("probed although the nominal ceiling fits max_seconds")

    monkeypatch.setattr(resources_module, "estimated_seconds", probe)
    rng = np.random.default_rng(2)
    R = _untight(rng, 30, 3)
    W = restarts(R, rng, 2)[0][0]
    cert = certify_global_optimum(R, W, budget=CertificateBudget(dense_max_dim=8),
                                  full_sdp=False)
    assert "not attempted" not in cert.reason
    with pytest.raises(AssertionError, match="probed"):  # a ceiling above the limit: probe
        certify_global_optimum(R, W, budget=CertificateBudget(dense_max_dim=8,
                                                              max_seconds=1e-12))


def test_solver_lookup_does_not_import_cvxpy():
    pytest.importorskip("cvxpy")
    code = ("import sys; from catdask.certificate.subspace_dual import have_small_sdp_solver; "
            "assert have_small_sdp_solver(); print('cvxpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
