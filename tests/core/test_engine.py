"""The fit engine (catdask.core.engine): FitResult contents, the restart choice, the derived
certificates of the other restarts, and the precision schedules' phases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from catdask.certificate import Certificate
from catdask.certificate.certifiers import LinearCertifier, NoCertifier
from catdask.core.classes import ClassIndex
from catdask.core.engine import (
    TIE_RTOL,
    SolverOptions,
    Starts,
    certify_restarts,
    choose_restart,
    fit_restarts,
)
from catdask.core.manifold import random_stiefel
from catdask.core.precision import FLOAT64, Float32ThenFloat64
from catdask.estimators.target import ComputeTarget
from catdask.core.problems import CategoryObjective, ClassMatrixProblem, KernelProblem
from catdask.core.progress import solver_progress
from catdask.core.solver import RestartResult
from catdask.core.starts import kernel_random_z
from catdask.kernels import make_kernel
from catdask.operators import NumpyGramOperator

from tests.helpers.data import make_blobs


def _restart(index, objective, converged=True):
    return RestartResult(index=index, start="random", objective=objective, n_iter=3,
                         converged=converged, stopping_reason="tol" if converged else "max_iter",
                         step=0.0, seconds=0.0)


def _certificate(certified, objective, upper_bound):
    return Certificate(
        applicable=True, certified=certified, method="sdp-dual" if certified else None,
        objective=objective, upper_bound=upper_bound, bound_method="reduced", gap=0.0,
        rapcsak=False, rapcsak_lambda_max=0.1, sdp_margin=0.0, nu=(1.0,), first_order=0.0,
        asymmetry=0.0, stationarity=0.0, tol=1e-6, seconds=1.0, reason="tested")


class _RecordingCertifier:
    """Returns a fixed certificate and records the points it was asked about."""

    applies = True

    def __init__(self, certificate, operator=None):
        self.certificate, self.operator, self.calls = certificate, operator, []

    def certify(self, point, *, full_sdp="auto", moment=False):
        precision = None if self.operator is None else self.operator.precision
        self.calls.append((point, full_sdp, moment, precision))
        return self.certificate


class _State:  # a linear state's axes: W (R, D, K)
    def __init__(self, R):
        self.W = np.arange(R, dtype=float)[:, None, None] * np.ones((R, 2, 1))


# ------------------------------------------------------------------------------ the choice
def test_choice_prefers_the_converged_restart_among_near_ties():
    top = 10.0
    restarts = [_restart(0, top, converged=False), _restart(1, top * (1 - TIE_RTOL / 2)),
                _restart(2, 9.0)]
    assert choose_restart(restarts) == 1
    # Outside the tie tolerance the higher objective wins, converged or not.
    restarts[1] = _restart(1, top * (1 - 2 * TIE_RTOL))
    assert choose_restart(restarts) == 0


def test_one_test_speaks_for_the_ties_and_bounds_the_beaten():
    restarts = [_restart(0, 8.0), _restart(1, 10.0), _restart(2, 10.0 * (1 - TIE_RTOL / 2))]
    certifier = _RecordingCertifier(_certificate(True, 10.0, upper_bound=11.0))
    certs = certify_restarts(restarts, 1, _State(3).W[1], certifier, moment=True)
    assert len(certifier.calls) == 1  # only the chosen restart is tested ...
    point, full_sdp, moment, _ = certifier.calls[0]
    np.testing.assert_array_equal(point, np.ones((2, 1)))  # ... at its own axes
    assert full_sdp == "auto" and moment is True
    assert certs[1] is certifier.certificate
    tied, beaten = certs[2], certs[0]
    assert tied.certified and tied.objective == restarts[2].objective and tied.seconds == 0.0
    assert tied.reason.startswith("same objective as restart 1")
    assert "globally optimal" in tied.reason
    assert not beaten.certified and beaten.method is None and beaten.nu is None
    assert beaten.gap == pytest.approx((11.0 - 8.0) / 8.0)  # the chosen one's bound bounds it
    assert "restart 1 reaches a higher objective" in beaten.reason


def test_a_tie_with_an_uncertified_test_is_not_certified_either():
    restarts = [_restart(0, 5.0), _restart(1, 5.0)]
    certs = certify_restarts(restarts, 0, _State(2).W[0],
                             _RecordingCertifier(_certificate(False, 5.0, math.inf)))
    assert not certs[1].certified and "not certified either" in certs[1].reason


def test_no_certifier_gives_every_restart_the_same_record_without_a_test():
    restarts = [_restart(0, 5.0), _restart(1, 4.0)]
    certs = certify_restarts(restarts, 0, None, NoCertifier("not requested (certify=False)"))
    assert certs[0] is certs[1]
    assert not certs[0].applicable and certs[0].reason == "not requested (certify=False)"


# ------------------------------------------------------------------------------ fit_restarts
def _class_matrices(seed=0, D=6, K=3):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((K, D, D))
    return np.einsum("kij,klj->kil", A, A)


def test_fit_result_records_the_restarts_the_choice_and_the_phases():
    R = _class_matrices()
    problem = ClassMatrixProblem(R)
    W0 = random_stiefel(4, 6, 3, np.random.default_rng(1))
    calls = []
    with solver_progress(lambda it, *args: calls.append(it)):  # the listener, no hook
        result = fit_restarts(problem, Starts(("a", "b", "c", "d"), lambda: problem.start(W0)),
                              solver_options=SolverOptions(tol=1e-10, max_iter=500),
                              certifier=LinearCertifier(R), started_at=None)
    assert calls and calls[0] == 1
    assert [r.index for r in result.restarts] == [0, 1, 2, 3]
    assert [r.start for r in result.restarts] == ["a", "b", "c", "d"]
    objectives = [r.objective for r in result.restarts]
    assert result.best_index == choose_restart(result.restarts)
    assert result.best.objective == max(objectives)
    assert result.state.W.shape == (4, 6, 3)
    np.testing.assert_allclose(result.best.objective, 0.5 * np.einsum(
        "dk,kde,ek->", result.state.W[result.best_index], R, result.state.W[result.best_index]))
    assert result.certificate is result.best.certificate
    assert result.certificate.applicable and result.certificate.objective == pytest.approx(
        result.best.objective, rel=1e-12)
    # The test ran in the fit (certify_at="fit", the engine's default): its own phase.
    assert list(result.phases) == ["setup", "iterations", "certificate"]
    assert result.phases["certificate"] == result.certification.seconds > 0
    assert result.float32_iterations == (0, 0, 0, 0) and result.n_iter_float32 == 0
    seconds = result.fit_seconds(result.started_at + 100.0)
    assert list(seconds) == ["setup", "iterations", "certificate", "finish", "total"]
    assert seconds["total"] == pytest.approx(100.0, rel=1e-12)
    assert sum(v for k, v in seconds.items() if k != "total") == pytest.approx(100.0)
    with pytest.raises(AttributeError):
        result.best_index = 0  # frozen


def _kernel_problem(n_per_class=40, seed=3):
    X, y = make_blobs(n_per_class=n_per_class, n_features=4, n_classes=3, seed=seed)
    order = np.argsort(y, kind="stable")
    classes = ClassIndex(y[order], 3)
    op = NumpyGramOperator(X[order], classes, make_kernel("rbf", n_features=4, gamma=0.1),
                           max_gram_bytes=0, tile_rows=32)
    return op, KernelProblem(op, CategoryObjective("quadratic", "class"))


def test_float32_schedule_runs_starts_and_first_phase_in_float32_then_polishes():
    op, problem = _kernel_problem()
    precision_schedule = ComputeTarget.precision_schedule
    assert op.uses_tiles and isinstance(precision_schedule("auto", op), Float32ThenFloat64)
    assert precision_schedule("float64", op) is FLOAT64
    z0 = kernel_random_z(2, op.classes, "class", np.random.default_rng(0))
    seen = []

    def evaluate():
        seen.append(op.precision)
        return problem.start_from_z(z0)

    options = SolverOptions(tol=1e-9, max_iter=400)
    certifier = _RecordingCertifier(_certificate(True, 0.0, 0.0), operator=op)
    mixed = fit_restarts(problem, Starts(("random", "random"), evaluate),
                         solver_options=options, certifier=certifier,
                         precision_schedule=Float32ThenFloat64(op))
    assert seen == ["float32"] and op.precision == "float64"
    assert certifier.calls[0][3] == "float64"  # the certificate reads float64 products
    # The chosen restart's coefficients and its projections, both from that exact product.
    point = certifier.calls[0][0]
    A, P = problem.axes(mixed.state, mixed.best_index)
    np.testing.assert_array_equal(point.A, A)
    np.testing.assert_array_equal(point.P, P)
    assert list(mixed.phases) == ["setup", "float32", "polish", "certificate"]
    assert all(n > 0 for n in mixed.float32_iterations)
    assert mixed.n_iter_float32 == mixed.float32_iterations[mixed.best_index]
    assert all(r.n_iter > n for r, n in zip(mixed.restarts, mixed.float32_iterations))
    assert all(r.converged for r in mixed.restarts)
    exact = fit_restarts(problem, Starts(("random", "random"), lambda: problem.start_from_z(z0)),
                         solver_options=options, certifier=NoCertifier("off"))
    assert list(exact.phases) == ["setup", "iterations"]
    assert exact.best.objective == pytest.approx(mixed.best.objective, rel=1e-9)


def test_float32_phase_shares_max_iter_with_the_polish():
    op, problem = _kernel_problem()
    z0 = kernel_random_z(1, op.classes, "class", np.random.default_rng(1))
    result = fit_restarts(problem, Starts(("random",), lambda: problem.start_from_z(z0)),
                          solver_options=SolverOptions(tol=1e-14, max_iter=6),
                          certifier=NoCertifier("off"),
                          precision_schedule=Float32ThenFloat64(op, float32_tol=0.0))
    # max_iter - 2: the polish keeps its two exact float64 iterations (the anchor, the check)
    assert result.float32_iterations == (4,)
    assert result.best.n_iter == 6 and not result.best.converged
