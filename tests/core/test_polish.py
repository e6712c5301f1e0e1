"""precision="auto"'s polish (catdask.core.precision): the anchored float32 products and the
exact float64 iterations that end every restart."""

from __future__ import annotations

import numpy as np
import pytest

from catdask.certificate.certifiers import NoCertifier
from catdask.core.classes import ClassIndex
from catdask.core.engine import SolverOptions, Starts, fit_restarts
from catdask.core.precision import AnchoredProducts, Float32ThenFloat64
from catdask.core.problems import CategoryObjective, KernelProblem
from catdask.core.starts import kernel_random_z
from catdask.kernels import make_kernel
from catdask.operators import CentredGramOperator, NumpyGramOperator

from ..helpers.data import make_blobs


def _operator(n_per_class=60, seed=3, gamma=0.1):
    X, y = make_blobs(n_per_class=n_per_class, n_features=4, n_classes=3, seed=seed)
    order = np.argsort(y, kind="stable")
    classes = ClassIndex(y[order], 3)
    kernel = make_kernel("rbf", n_features=4, gamma=gamma)
    op = NumpyGramOperator(X[order], classes, kernel, max_gram_bytes=0, tile_rows=32)
    return op, kernel(X[order], X[order])


def _dense_product(G, classes, z):
    """``G Z_r`` by brute force: Z_r (N, K) with z[r, i] in column y_i."""
    Z = np.zeros((z.shape[0], G.shape[0], classes.n_classes))
    for r in range(z.shape[0]):
        Z[r, np.arange(G.shape[0]), classes.codes] = z[r]
    return G @ Z


def _counting(op):
    """Record the precision of every full tile pass of ``G Z`` on ``op``."""
    seen = []
    tiled = op._tiled_class_matmul

    def counted(zs, pairs=None):
        if pairs is None:
            seen.append(op.precision)
        return tiled(zs, pairs)

    op._tiled_class_matmul = counted
    return seen


def test_anchored_product_error_scales_with_the_distance_to_the_anchor():
    op, G = _operator()
    problem = KernelProblem(op, CategoryObjective("quadratic", "class"))
    rng = np.random.default_rng(0)
    z0 = rng.standard_normal((2, op.n_samples))
    anchored = AnchoredProducts(problem, z0, op.class_matmul(z0))  # float64 anchor
    z = z0 + 1e-4 * rng.standard_normal(z0.shape)
    exact = _dense_product(G, op.classes, z)
    scale = np.abs(exact).max()
    op.set_precision("float32")
    passes = op.gram_passes
    plain32 = np.abs(op.class_matmul(z) - exact).max() / scale
    got = anchored.lift(z, np.array([0, 1]))
    anchored_err = np.abs(got - exact).max() / scale
    assert plain32 > 1e-9  # float32 tiles really in use: plain float32 is this far off
    assert anchored_err < 1e-4 * plain32 * 10  # the anchored error is float32's times |dz|
    np.testing.assert_allclose(anchored.lift(z[::-1], np.array([1, 0])), got[::-1])
    assert op.gram_passes == passes + 3
    # at the anchor itself: the float64 product, without a pass
    np.testing.assert_array_equal(anchored.lift(z0[1:], np.array([1])), anchored.B0[1:])
    assert op.gram_passes == passes + 3


@pytest.mark.parametrize("origin", ["class", "global"])
def test_polish_equals_the_float64_fit_with_two_float64_passes(origin):
    """Same starts: the objective equals the float64 fit's to 1e-9; the polish paid two
    float64 passes (the anchor and the check), where the plain float64 polish paid one per
    iteration, and the result's products are exact (its state is the plain point of an exact
    float64 product)."""
    base, G = _operator(n_per_class=80, seed=5)
    op = CentredGramOperator(base) if origin == "global" else base
    problem = KernelProblem(op, CategoryObjective("quadratic", origin))
    z0 = kernel_random_z(3, base.classes, origin, np.random.default_rng(2))
    options = SolverOptions(tol=1e-9, max_iter=500)
    exact = fit_restarts(problem, Starts(("random",) * 3, lambda: problem.start_from_z(z0)),
                         solver_options=options, certifier=NoCertifier("off"))
    seen = _counting(base)
    mixed = fit_restarts(problem, Starts(("random",) * 3, lambda: problem.start_from_z(z0)),
                         solver_options=options, certifier=NoCertifier("off"),
                         precision_schedule=Float32ThenFloat64(base))
    assert all(r.converged for r in mixed.restarts)
    for a, b in zip(mixed.restarts, exact.restarts):
        assert a.objective == pytest.approx(b.objective, rel=1e-9)
    assert seen.count("float64") == 2  # the anchor and the check, all restarts batched
    assert seen.count("float32") == len(seen) - 2 > 0
    assert all(r.n_iter - n == 2 for r, n in zip(mixed.restarts, mixed.float32_iterations))
    assert exact.best.n_iter > 2  # the float64 fit needed more float64 passes than that
    # the reported state is exact: the W-step of its own z's float64 product gives it back
    state = mixed.state
    again = problem.point(state.z, op.class_matmul(state.z))
    np.testing.assert_allclose(again.objective, state.objective, rtol=1e-12)
    Gc = G if origin == "class" else (lambda H: H @ G @ H)(np.eye(len(G)) - 1.0 / len(G))
    for r in range(3):  # A G A^T = I_K in float64
        A = problem.axes(state, r)[0]
        np.testing.assert_allclose(A @ Gc @ A.T, np.eye(3), atol=1e-9)


def test_a_restart_failing_the_exact_check_is_anchored_again():
    """A hand-over far from the optimum and a tight tol: the anchored map's fixed point is
    off by float32 rounding times the distance travelled, the exact check fails, and the
    restart goes on from the check's exact product (a third float64 pass at least) to the
    float64 fit's objective. Whether a given start's check fails depends on the CPU's float32
    rounding (the check passed on one machine and failed on another), so several starts are
    fitted: every one must reach the float64 optimum, and at least one must be anchored again."""
    passes = []
    for n_per_class, seed, z_seed in [(80, 5, 4), (80, 5, 1), (120, 5, 4), (80, 7, 2)]:
        op, _ = _operator(n_per_class=n_per_class, seed=seed)
        problem = KernelProblem(op, CategoryObjective("quadratic", "class"))
        z0 = kernel_random_z(1, op.classes, "class", np.random.default_rng(z_seed))
        options = SolverOptions(tol=1e-13, max_iter=500)
        exact = fit_restarts(problem, Starts(("random",), lambda: problem.start_from_z(z0)),
                             solver_options=options, certifier=NoCertifier("off"))
        seen = _counting(op)
        mixed = fit_restarts(problem, Starts(("random",), lambda: problem.start_from_z(z0)),
                             solver_options=options, certifier=NoCertifier("off"),
                             precision_schedule=Float32ThenFloat64(op, float32_tol=1.0))
        passes.append(seen.count("float64"))
        assert mixed.best.converged and mixed.best.step <= 1e-13
        assert mixed.best.objective == pytest.approx(exact.best.objective, rel=1e-12)
    assert max(passes) >= 3, passes