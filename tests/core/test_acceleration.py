"""Safeguarded Anderson acceleration of the alternating iteration (catdask.core.acceleration)."""

from __future__ import annotations

import numpy as np
import pytest

from catdask.core.acceleration import AndersonStepper, PlainStepper, make_stepper
from catdask.core.classes import ClassIndex
from catdask.kernels import make_kernel
from catdask.operators import CentredGramOperator, NumpyDataOperator, NumpyGramOperator
from catdask.core.problems import (
    CategoryObjective,
    ClassMatrixProblem,
    KernelProblem,
    LinearProblem,
)
from catdask.core.solver import solve
from catdask.core.starts import kernel_decoupled_z, kernel_random_z, linear_starts

from tests.helpers.data import make_blobs

TOL = 1e-8


def _sorted_blobs(n_per_class=40, n_features=4, n_classes=3, seed=0):
    X, y = make_blobs(n_per_class=n_per_class, n_features=n_features, n_classes=n_classes,
                      seed=seed)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]
    # Anisotropic classes, so the CQS optimum is isolated (docs/design.md §3c).
    X = X * np.linspace(1.0, 2.5, n_features)
    return X, ClassIndex(y, n_classes)


def _kernel_problem(origin="class", kind="quadratic", n_starts=3, seed=0, **blob_kw):
    X, classes = _sorted_blobs(**blob_kw)
    base = NumpyGramOperator(X, classes, make_kernel("rbf", n_features=X.shape[1], gamma=0.2))
    op = CentredGramOperator(base) if origin == "global" else base
    eps = 0.1 if kind == "absolute" else 0.0
    problem = KernelProblem(op, CategoryObjective(kind, origin, eps))
    z0 = kernel_random_z(n_starts, classes, origin, np.random.default_rng(seed))
    z0[0] = kernel_decoupled_z(op, classes, origin)
    return problem, z0


def _linear_problem(origin="class", n_starts=4, seed=0):
    X, classes = _sorted_blobs(n_features=6)
    op = NumpyDataOperator(X, classes)
    problem = ClassMatrixProblem(op.class_second_moments(origin))
    labels = ["decoupled", "class-means"] + ["random"] * (n_starts - 2)
    W0 = linear_starts(labels, class_matrices=problem.class_matrices,
                       class_means=op.class_means(), n_features=X.shape[1],
                       rng=np.random.default_rng(seed))
    return problem, W0


def _non_decreasing(results):
    return all(np.all(np.diff(r.history) >= -1e-12 * abs(r.history[-1])) for r in results)


def _run(problem, start, acceleration, **kw):
    kw.setdefault("max_iter", 5000)
    return solve(problem, start(), tol=TOL, acceleration=acceleration, **kw)[1]


# ----------------------------------------------------------------------------- the safeguard
def _random_input(problem, shape, seed):
    """An input far from the iterates, with its product computed honestly."""
    bad = np.random.default_rng(seed).standard_normal(shape)
    return bad, None if isinstance(problem, ClassMatrixProblem) else problem.lift(bad[None])[0]


def _sabotaged_mixtures(self, restarts, weights):
    """The stepper's mixtures (of restarts with history to mix) replaced by random inputs."""
    shape = self._history[restarts[0]].g.shape[1:]
    mixed = [_random_input(self.problem, shape, len(self._history[r])) for r in restarts]
    lifted = None if mixed[0][1] is None else np.stack([m[1] for m in mixed])
    return np.stack([m[0] for m in mixed]), lifted


@pytest.mark.parametrize("kind", ["kernel", "linear"])
def test_safeguard_falls_back_to_the_plain_step(kind, monkeypatch):
    if kind == "kernel":
        problem, z0 = _kernel_problem()
        start = lambda: problem.start_from_z(z0)  # noqa: E731
    else:
        problem, W0 = _linear_problem()
        start = lambda: problem.start(W0)  # noqa: E731
    plain = _run(problem, start, "none")

    # The sabotaged mixture really would lower the objective below the plain step's...
    stepper = AndersonStepper(problem, len(plain), memory=3)
    state = start()
    idx = np.arange(len(plain))
    for _ in range(3):
        state, _ = stepper.step(idx, state)
    g = problem.coordinates(state)
    mixed = [_random_input(problem, g.shape[1:], 2) for _ in idx]
    cand = problem.point(np.stack([m[0] for m in mixed]),
                         None if mixed[0][1] is None else np.stack([m[1] for m in mixed]))
    plain_next = problem.step(state)
    assert np.all(cand.objective < plain_next.objective)

    # ...so the safeguard refuses every one and the iteration is exactly the plain one.
    monkeypatch.setattr(AndersonStepper, "_mixtures", _sabotaged_mixtures)
    made = []
    real_make = make_stepper

    def spy(*args, **kw):
        made.append(real_make(*args, **kw))
        return made[-1]

    monkeypatch.setattr("catdask.core.solver.make_stepper", spy)
    guarded = _run(problem, start, "anderson")
    assert _non_decreasing(guarded)
    assert made[0].accepted.sum() == 0 and made[0].rejected.sum() > 0
    assert [r.n_iter for r in guarded] == [r.n_iter for r in plain]
    np.testing.assert_allclose([r.objective for r in guarded], [r.objective for r in plain],
                               rtol=1e-12)


@pytest.mark.parametrize("kind", ["kernel", "linear"])
def test_safeguard_acts_per_restart(kind, monkeypatch):
    """One restart's mixtures sabotaged, the others' real: in every iteration the batch
    keeps some mixed points and some plain ones (both ways of assembling the batch's next
    state), and each restart follows exactly its own run: the plain one for the sabotaged
    restart, the unsabotaged accelerated one for the others."""
    if kind == "kernel":
        problem, z0 = _kernel_problem(n_starts=4)
        start = lambda: problem.start_from_z(z0)  # noqa: E731
    else:
        problem, W0 = _linear_problem(n_starts=4)
        start = lambda: problem.start(W0)  # noqa: E731
    plain = _run(problem, start, "none")
    fast = _run(problem, start, "anderson")
    real = AndersonStepper._mixtures
    sabotaged = {1} if kind == "kernel" else {0, 1, 3}  # 1 of 4 and 3 of 4 refused

    def partly(self, restarts, weights):
        x, lifted = real(self, restarts, weights)
        bad = [i for i, r in enumerate(restarts) if r in sabotaged]
        if bad:
            fake_x, fake_lifted = _sabotaged_mixtures(self, [restarts[i] for i in bad], None)
            x[bad] = fake_x
            if lifted is not None:
                lifted[bad] = fake_lifted
        return x, lifted

    monkeypatch.setattr(AndersonStepper, "_mixtures", partly)
    mixed = _run(problem, start, "anderson")
    for r, result in enumerate(mixed):
        ref = plain[r] if r in sabotaged else fast[r]
        assert result.n_iter == ref.n_iter
        np.testing.assert_allclose(result.history, ref.history, rtol=1e-12)


# ----------------------------------------------------------------------------- same optimum
@pytest.mark.parametrize("origin", ["class", "global"])
def test_kernel_same_optimum_fewer_iterations(origin):
    problem, z0 = _kernel_problem(origin, n_starts=3)
    start = lambda: problem.start_from_z(z0)  # noqa: E731
    plain = _run(problem, start, "none")
    fast = _run(problem, start, "anderson")
    assert all(r.converged for r in plain + fast)
    assert _non_decreasing(fast)
    best_plain = max(r.objective for r in plain)
    assert max(r.objective for r in fast) == pytest.approx(best_plain, rel=1e-9)
    # Each restart reaches the same optimum as its plain run, in fewer iterations in total.
    np.testing.assert_allclose([r.objective for r in fast], [r.objective for r in plain],
                               rtol=1e-9)
    assert sum(r.n_iter for r in fast) < sum(r.n_iter for r in plain)


def test_kernel_class_origin_at_least_twice_fewer_iterations():
    problem, z0 = _kernel_problem("class", n_starts=3, n_per_class=60)
    start = lambda: problem.start_from_z(z0)  # noqa: E731
    plain = _run(problem, start, "none")
    fast = _run(problem, start, "anderson")
    assert max(r.n_iter for r in plain) >= 2 * max(r.n_iter for r in fast)


@pytest.mark.parametrize("origin", ["class", "global"])
def test_linear_same_optimum(origin):
    problem, W0 = _linear_problem(origin)
    start = lambda: problem.start(W0)  # noqa: E731
    plain = _run(problem, start, "none")
    fast = _run(problem, start, "auto")  # the class-matrix problem accelerates by default
    assert all(r.converged for r in plain + fast)
    assert _non_decreasing(fast)
    np.testing.assert_allclose(max(r.objective for r in fast), max(r.objective for r in plain),
                               rtol=1e-9)
    assert sum(r.n_iter for r in fast) < sum(r.n_iter for r in plain)


# ----------------------------------------------------------------------------- batches
def test_batched_restarts_accelerate_independently():
    problem, z0 = _kernel_problem("class", n_starts=4)
    batch = _run(problem, lambda: problem.start_from_z(z0), "anderson")
    for r in range(len(z0)):
        alone = _run(problem, lambda: problem.start_from_z(z0[r:r + 1]), "anderson")[0]
        assert abs(alone.n_iter - batch[r].n_iter) <= 1
        assert alone.objective == pytest.approx(batch[r].objective, rel=1e-10)
    assert _non_decreasing(batch)


# ----------------------------------------------------------------------------- CAS
def test_kernel_cas_plain_by_default_and_monotone_when_forced():
    problem, z0 = _kernel_problem("class", kind="absolute", n_starts=2)
    start = lambda: problem.start_from_z(z0)  # noqa: E731
    # CAS keeps the plain iteration by default, the same iteration as linear CAS.
    assert isinstance(make_stepper(problem, 2, "auto"), PlainStepper)
    plain = _run(problem, start, "auto")
    fast = _run(problem, start, "anderson")
    assert all(r.converged for r in plain + fast)
    assert _non_decreasing(fast)
    np.testing.assert_allclose([r.objective for r in fast], [r.objective for r in plain],
                               rtol=1e-9)
    assert sum(r.n_iter for r in fast) < sum(r.n_iter for r in plain)


def test_linear_cas_keeps_the_plain_iteration_by_default():
    X, classes = _sorted_blobs()
    problem = LinearProblem(NumpyDataOperator(X, classes), CategoryObjective("absolute", "class", 0.1))
    assert isinstance(make_stepper(problem, 2, "auto"), PlainStepper)
    W0 = linear_starts(["class-means", "random"], class_matrices=None,
                       class_means=NumpyDataOperator(X, classes).class_means(),
                       n_features=X.shape[1], rng=np.random.default_rng(0))
    # Forced, it stays monotone: the safeguard does not depend on the objective.
    forced = _run(problem, lambda: problem.start(W0), "anderson")
    assert _non_decreasing(forced)


# ----------------------------------------------------------------------------- bad input
def test_bad_acceleration_options_are_named():
    problem, W0 = _linear_problem()
    with pytest.raises(ValueError, match="acceleration must be one of"):
        solve(problem, problem.start(W0), acceleration="fast")
    with pytest.raises(ValueError, match="memory"):
        solve(problem, problem.start(W0), acceleration="anderson", memory=0)


@pytest.mark.parametrize("acceleration", ["none", "anderson"])
def test_one_gram_pass_per_iteration(acceleration):
    problem, z0 = _kernel_problem("global", n_starts=3)
    state = problem.start_from_z(z0)
    before = problem.op.gram_passes
    results = solve(problem, state, tol=TOL, acceleration=acceleration)[1]
    # The batch runs as long as its slowest restart, one pass over G per iteration.
    assert problem.op.gram_passes - before == max(r.n_iter for r in results)


@pytest.mark.parametrize("transposed", [True, False])
def test_history_mixtures_are_the_weighted_sums_in_the_products_memory_order(transposed):
    """The history keeps each product in the memory order the operator gave it (the (N, K)
    view of a (K, N) array: a straight copy), and a mixture of inputs and products is the
    same weighted sum of the pushed entries, restart by restart."""
    from catdask.core.acceleration import _History

    rng = np.random.default_rng(5)
    R, N, K, n = 3, 50, 4, 4
    stepper = AndersonStepper.__new__(AndersonStepper)
    stepper._history = [_History(n) for _ in range(R)]
    pushed = {r: ([], []) for r in range(R)}
    for _ in range(n + 2):  # wraps around: the oldest slots are overwritten
        g = rng.standard_normal((R, N))
        lifted = rng.standard_normal((R, K, N)).transpose(0, 2, 1) if transposed else \
            rng.standard_normal((R, N, K))
        for r in range(R):
            stepper._history[r].push(g[r], lifted[r], g[r])
            pushed[r][0].append(g[r].copy())
            pushed[r][1].append(lifted[r].copy())
    hist = stepper._history[0]
    assert hist.lifted_base.flags.c_contiguous
    assert hist.lifted_base.shape[1:] == ((K, N) if transposed else (N, K))
    restarts = [2, 0]
    weights = [rng.standard_normal(n) for _ in restarts]
    x, mixed = stepper._mixtures(restarts, weights)
    assert mixed.shape == (2, N, K)
    for i, r in enumerate(restarts):
        h = stepper._history[r]
        by_slot = {slot: age for age, slot in enumerate(h.order)}  # slot -> age (oldest 0)
        last = pushed[r][0][-n:], pushed[r][1][-n:]
        want_x = sum(weights[i][s] * last[0][by_slot[s]] for s in range(n))
        want_lifted = sum(weights[i][s] * last[1][by_slot[s]] for s in range(n))
        np.testing.assert_allclose(x[i], want_x, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(mixed[i], want_lifted, rtol=1e-12, atol=1e-12)

