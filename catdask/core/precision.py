"""Precision schedules: in which precision the fit engine's solver runs evaluate the Gram tiles.

A schedule owns the whole iteration of a fit (:func:`catdask.core.engine.fit_restarts`): the
evaluation of the starts and the solver runs. :data:`FLOAT64` is one run with exact products;
:class:`Float32ThenFloat64` iterates with float32 Gram tiles (float64 accumulation) to a step of
``float32_tol``, then polishes with exact float64 iterations from that point until the step is
below ``tol`` (``KernelCategorySpace(precision="auto")`` when G is recomputed by tiles).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Union

from .solver import solve

__all__ = ["FLOAT32_PHASE_TOL", "FLOAT64", "Float64Throughout", "Float32ThenFloat64",
           "PrecisionSchedule", "ScheduledRun", "precision_schedule"]

# precision="auto": the float32 phase stops at this RKHS step (never below ``tol``), then the
# float64 polish iterates to ``tol``. The float32 map is deterministic and converged to a fixed
# point (step exactly 0) on blobs, about 1e-6 from the float64 one; the total iterations were
# the same for 1e-4 to 1e-7 (N = 1500, 3 restarts) while the float32 share grew from 24 to 32 of
# 43 at 1e-6. Stopping above 0 keeps a float32 limit cycle from running to max_iter.
FLOAT32_PHASE_TOL = 1e-6


class ScheduledRun(NamedTuple):
    """What a schedule's run returns: the solver's final state and restart records, the wall
    seconds of each phase, and each restart's iterations in float32 (zeros in float64)."""

    state: Any
    restarts: list
    phases: dict
    float32_iterations: tuple


def _solve(problem, state, labels, options, *, tol=None, max_iter=None):
    """One solver run with ``options`` (a :class:`catdask.core.engine.SolverOptions`); the
    progress listener is the caller's context's (:mod:`catdask.core.progress`)."""
    return solve(problem, state, tol=options.tol if tol is None else tol,
                 max_iter=options.max_iter if max_iter is None else max_iter, starts=labels,
                 log_every=options.log_every, acceleration=options.acceleration)


@dataclass(frozen=True)
class Float64Throughout:
    """Every product in float64: the starts and one solver run to ``tol``."""

    def starts_precision(self):
        """The context the starts are evaluated in (nothing to switch)."""
        return contextlib.nullcontext()

    def run(self, problem, state, labels, options) -> ScheduledRun:
        t0 = time.perf_counter()
        final, restarts = _solve(problem, state, labels, options)
        return ScheduledRun(final, restarts, {"iterations": time.perf_counter() - t0},
                            (0,) * len(restarts))


#: The default schedule: float64 throughout.
FLOAT64 = Float64Throughout()


@dataclass(frozen=True)
class Float32ThenFloat64:
    """Float32 Gram tiles to a step of ``float32_tol``, then the float64 polish to ``tol``.

    The objective, the coefficients and the certificate are the float64 ones: the polish
    re-evaluates the float32 phase's auxiliary variables z exactly. Both phases share
    ``max_iter``; the polish gets at least one exact iteration. Kernel problems only (the
    polish restarts from ``problem.start_from_z``).

    Parameters
    ----------
    operator : GramOperator
        The operator whose tiles switch (``set_precision``); float64 again after the run.
    float32_tol : float
        The float32 phase's step tolerance (never below the solver's ``tol``).
    """

    operator: Any
    float32_tol: float = FLOAT32_PHASE_TOL

    @contextlib.contextmanager
    def starts_precision(self):
        """The starts (decoupled Lanczos, first W-step) in float32 too: the float32 phase
        iterates from them. The centring pass is float64 whatever the precision
        (``gram_base._gram_moments``)."""
        self.operator.set_precision("float32")
        try:
            yield
        finally:
            self.operator.set_precision("float64")

    def run(self, problem, state, labels, options) -> ScheduledRun:
        t0 = time.perf_counter()
        self.operator.set_precision("float32")
        try:
            fast, first = _solve(problem, state, labels, options,
                                 tol=max(options.tol, self.float32_tol),
                                 max_iter=max(1, options.max_iter - 1))
        finally:
            self.operator.set_precision("float64")
        float32_seconds = time.perf_counter() - t0
        # Polish: re-evaluate the float32 optimum's z exactly, iterate in float64 to tol.
        budget = max(1, options.max_iter - max(a.n_iter for a in first))
        final, polished = _solve(problem, problem.start_from_z(fast.z), labels, options,
                                 max_iter=budget)
        phases = {"float32": float32_seconds,
                  "polish": time.perf_counter() - t0 - float32_seconds}
        restarts = [replace(b, n_iter=a.n_iter + b.n_iter, seconds=a.seconds + b.seconds,
                            history=a.history + b.history[1:])
                    for a, b in zip(first, polished)]
        return ScheduledRun(final, restarts, phases, tuple(a.n_iter for a in first))


#: Either schedule (both have ``starts_precision()`` and ``run(problem, state, labels,
#: options)``).
PrecisionSchedule = Union[Float64Throughout, Float32ThenFloat64]


def precision_schedule(precision, operator) -> PrecisionSchedule:
    """The schedule of ``KernelCategorySpace(precision=...)`` on ``operator``.

    ``"auto"``: float32 tiles then the float64 polish where the products are recomputed by
    tiles (``operator.uses_tiles``: G not stored, a built-in kernel); float64 otherwise.
    """
    if precision == "auto" and operator.uses_tiles:
        return Float32ThenFloat64(operator)
    return FLOAT64
