"""Precision schedules: in which precision the fit engine's solver runs evaluate the Gram tiles."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace
from typing import Any, NamedTuple, Union

import numpy as np

from .problems import put_restarts, take_restarts
from .progress import SOLVER_PHASES, report_stage
from .solver import solve

# precision="auto": the float32 phase stops at this RKHS step (never below ``tol``), then the
# polish iterates on anchored products to ``tol``. The float32 map's fixed point is about 1e-6
# from the float64 one and Anderson stalls near it, while the anchored map's error grows only
# with the distance travelled after the hand-over (docs/design.md §3d).
FLOAT32_PHASE_TOL = 1e-4


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


class AnchoredProducts:
    """A kernel ``problem`` whose ``G Z`` is ``G Z0 + G32 (Z - Z0)``: an exact anchor ``B0 = G Z0``
    (float64; anchors ``z0``, one per restart of the batch it serves) plus a float32 correction (the
    polish of :class:`Float32ThenFloat64`)."""

    #: ``lift`` takes the batch's restart indices (catdask.core.acceleration).
    per_restart_products = True
    point_is_free = True

    def __init__(self, problem, z0, B0):
        self.problem, self.z0, self.B0 = problem, z0, B0
        self.objective = problem.objective
        self.coordinates = problem.coordinates
        self.point = problem.point
        self.distance = problem.distance
        self.solver_history = problem.solver_history

    def lift(self, coords, restarts):
        """``G Z0 + G32 (Z - Z0)`` for restarts ``restarts`` (in the operator's precision,
        float32 during the polish); no pass where every ``dz`` is 0 (the anchor itself)."""
        dz = coords - self.z0[restarts]
        if not np.any(dz):
            B0 = self.B0[restarts]
            return np.ascontiguousarray(np.swapaxes(B0, 1, 2)).swapaxes(1, 2)
        out = self.problem.lift(dz)
        out += self.B0[restarts]
        return out


@dataclass(frozen=True)
class Float32ThenFloat64:
    """Float32 Gram tiles to a step of ``float32_tol`` (never below the solver's ``tol``), then the
    polish to ``tol`` (docs/design.md §3d); ``operator``'s tiles switch precision, float64 again
    after the run."""

    operator: Any
    float32_tol: float = FLOAT32_PHASE_TOL

    @contextlib.contextmanager
    def _precision(self, precision):
        self.operator.set_precision(precision)
        try:
            yield
        finally:
            self.operator.set_precision("float64")

    def starts_precision(self):
        """The starts (decoupled Lanczos, first W-step) in float32 too: the float32 phase
        iterates from them. The centring pass is float64 whatever the precision
        (``gram_base._gram_moments``)."""
        return self._precision("float32")

    def run(self, problem, state, labels, options) -> ScheduledRun:
        t0 = time.perf_counter()
        report_stage(SOLVER_PHASES[0])
        with self._precision("float32"):
            fast, first = _solve(problem, state, labels, options,
                                 tol=max(options.tol, self.float32_tol),
                                 max_iter=max(1, options.max_iter - 2))
        budget = max(2, options.max_iter - max(a.n_iter for a in first))
        report_stage(SOLVER_PHASES[1])
        final, restarts, exact_iterations, exact_seconds = self._polish(
            problem, fast, first, labels, options, budget)
        # "polish": the float64 work that makes the result exact (the anchor and check
        # iterations); "float32": every iteration on float32 tiles, before the hand-over and
        # anchored after it.
        phases = {"float32": time.perf_counter() - t0 - exact_seconds, "polish": exact_seconds}
        return ScheduledRun(final, restarts, phases,
                            tuple(r.n_iter - e for r, e in zip(restarts, exact_iterations)))

    def _polish(self, problem, fast, first, labels, options, budget):
        """The anchored float32 iteration between exact float64 iterations, in rounds (see
        the class docstring). Returns the final state, the restart records, each restart's
        exact iterations and the seconds they took."""
        R = len(first)
        n_iter = [a.n_iter for a in first]
        seconds = [a.seconds for a in first]
        history = [list(a.history) for a in first]
        reasons, steps = [a.stopping_reason for a in first], [a.step for a in first]
        exact_iterations = [0] * R
        # The anchor: one exact float64 iteration from every restart's float32 point; its
        # product anchors the corrected map and its point, exactly evaluated, starts the polish.
        t = time.perf_counter()
        z0 = fast.z
        with self._precision("float64"):
            B0 = problem.lift(z0)
        state = problem.point(z0, B0)
        for r in range(R):
            n_iter[r] += 1
            exact_iterations[r] += 1
            history[r].append(float(state.objective[r]))
        rows, used, final = np.arange(R), 1, None
        elapsed = exact_seconds = time.perf_counter() - t
        while True:
            room = budget - used - 1  # one iteration is kept for the exact check
            t = time.perf_counter()
            ran = [0] * rows.size
            ended = ["tol"] * rows.size  # nothing ran: the check decides
            if room > 0:
                with self._precision("float32"):
                    state, part = _solve(AnchoredProducts(problem, z0, B0), state,
                                         [labels[r] for r in rows.tolist()], options,
                                         max_iter=room)
                ran = [b.n_iter for b in part]
                ended = [b.stopping_reason for b in part]
                for j, r in enumerate(rows.tolist()):
                    history[r] += part[j].history[1:]
            # The exact check: one float64 iteration from every restart's point. Its plain
            # point is what the restart reports; its step is the stopping test.
            t_check = time.perf_counter()
            with self._precision("float64"):
                B = problem.lift(state.z)
            exact = problem.point(state.z, B)
            step = problem.distance(exact, state)
            elapsed += time.perf_counter() - t
            exact_seconds += time.perf_counter() - t_check
            used += max(ran) + 1
            if final is None:
                final = exact
            else:
                put_restarts(final, rows, exact)
            again = []
            for j, r in enumerate(rows.tolist()):
                n_iter[r] += ran[j] + 1
                exact_iterations[r] += 1
                seconds[r] += elapsed
                history[r].append(float(exact.objective[j]))
                steps[r] = float(step[j])
                if ended[j] != "tol":
                    reasons[r] = ended[j]
                elif step[j] <= options.tol:
                    reasons[r] = "tol"
                else:
                    reasons[r] = "max_iter"
                    again.append(j)
            if not again or budget - used < 1:
                break
            # Not yet within tol in float64: anchor again at the check's exact product (no
            # pass) and go on from its exact point.
            keep = np.asarray(again)
            z0, B0 = state.z[keep], B[keep]
            state, rows, elapsed = take_restarts(exact, keep), rows[keep], 0.0
        restarts = [replace(a, objective=float(final.objective[r]), n_iter=n_iter[r],
                            converged=reasons[r] == "tol", stopping_reason=reasons[r],
                            step=steps[r], seconds=seconds[r], history=history[r])
                    for r, a in enumerate(first)]
        return final, restarts, exact_iterations, exact_seconds


#: Either schedule (both have ``starts_precision()`` and ``run(problem, state, labels,
#: options)``).
PrecisionSchedule = Union[Float64Throughout, Float32ThenFloat64]

