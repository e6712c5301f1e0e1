"""The low-rank augmented Lagrangian for the moment level (benchmarks/lifted/moment_alm.py):
its iterates go through the unchanged proof, so it proves a tight optimum and, at a point that
is not the global maximiser, still bounds max f without certifying the point."""

import numpy as np
import pytest

pytest.importorskip("scs", reason="the moment relaxation needs the sdp extra (SCS)")

from benchmarks.lifted.moment_alm import alm_moment_bound  # noqa: E402

from .test_moment_polish import _random_values  # noqa: E402
from .test_moment_relaxation import (  # noqa: E402
    _best_local_optimum,
    _competing_classes,
    _objective,
    _polar,
)


def test_alm_proves_an_optimum_the_sdp_dual_cannot():
    R = _competing_classes(376)  # D = 4, K = 2; the SDP dual is not tight here
    f, W = _best_local_optimum(R, seed=376)
    out = alm_moment_bound(R, W, rank=12, outer=30, inner=50, target_gap=1e-6)
    assert f <= out.upper_bound <= f * (1 + 1e-6)
    assert max(_random_values(R, 100, 1)) <= out.upper_bound
    assert out.history and out.history[-1][1] <= 1e-6


def test_alm_at_a_planted_point_bounds_max_f_and_does_not_certify_it():
    R = _competing_classes(376)
    f, _ = _best_local_optimum(R, seed=376)
    W = _polar(np.random.default_rng(2).standard_normal((R.shape[1], R.shape[0])))
    assert _objective(R, W) < f * (1 - 1e-3)
    out = alm_moment_bound(R, W, rank=12, outer=5, inner=50, target_gap=1e-6)
    assert out.upper_bound >= f
    assert out.upper_bound - _objective(R, W) > 1e-3 * f
