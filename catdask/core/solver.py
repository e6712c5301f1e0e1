"""The alternating solver: one loop for every problem, backend and batch of restarts."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .acceleration import make_stepper
from .problems import put_restarts, take_restarts
from .progress import current_solver_callback


logger = logging.getLogger("catdask.core.solver")


@dataclass
class RestartResult:
    """Outcome of one restart (compare pymanopt's ``OptimizerResult``)."""

    index: int
    start: str  # how it was initialised: "decoupled", "class-means", "random"...
    objective: float
    n_iter: int
    converged: bool
    stopping_reason: str  # "tol", "max_iter", "objective-stalled" or "rank-deficient"
    step: float  # size of the last step
    seconds: float
    history: list = field(default_factory=list, repr=False)  # objective per iteration, start first
    # A catdask.certificate.Certificate, set by the fit engine's certifier (the core imports
    # no certificate: it sits below it).
    certificate: Any = None

    def to_dict(self):
        cert = self.certificate
        return {
            "restart": self.index,
            "start": self.start,
            "objective": float(self.objective),
            "n_iter": int(self.n_iter),
            "converged": bool(self.converged),
            "stopping_reason": self.stopping_reason,
            "step": float(self.step),
            "seconds": float(self.seconds),
            "certified": None if cert is None else bool(cert.certified),
            "gap": None if cert is None or not np.isfinite(cert.gap) else float(cert.gap),
        }


def solve(
    problem,
    state,
    *,
    tol=1e-8,
    max_iter=1000,
    stall_rtol=1e-15,
    stall_patience=25,
    starts=None,
    log_every=50,
    acceleration="auto",
    memory=8,
):
    """Run the alternating iteration on a batch of restarts until each one stops.
    Returns ``(state, results)``: the final state of every restart and one
    :class:`RestartResult` each."""
    callback = current_solver_callback()  # a listener set by the caller's context (progress)
    R = state.objective.shape[0]
    starts = list(starts) if starts is not None else ["given"] * R
    t0 = time.perf_counter()
    active = np.ones(R, dtype=bool)
    n_iter = np.zeros(R, dtype=int)
    steps = np.full(R, np.inf)
    quiet = np.zeros(R, dtype=int)
    reasons = ["max_iter"] * R
    seconds = np.zeros(R)
    history = [[float(f)] for f in state.objective]
    stepper = make_stepper(problem, R, acceleration, memory=memory, tol=tol)

    for it in range(1, max_iter + 1):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        # While every restart runs, the state is replaced, not copied into. The stepper's
        # history may keep views of ``old``: only the latest ``new`` is ever written into below.
        everyone = idx.size == R
        old = state if everyone else take_restarts(state, idx)
        new, step = stepper.step(idx, old)
        f_old, f_new = old.objective, new.objective
        rel = np.abs(f_new - f_old) / np.maximum(np.abs(f_old), np.finfo(float).tiny)
        if np.any(f_new < f_old - 1e-9 * np.abs(f_old)):
            # Both steps are exact block maximisers; a decrease means round-off dominates.
            logger.debug("objective decreased at iteration %d: %s -> %s", it, f_old, f_new)
        if everyone:
            state = new
        else:
            put_restarts(state, idx, new)
        n_iter[idx] += 1
        steps[idx] = step
        for j, r in enumerate(idx):
            history[r].append(float(f_new[j]))
        quiet[idx] = np.where(rel <= stall_rtol, quiet[idx] + 1, 0)
        done_tol = step <= tol
        done_stall = (~done_tol) & (
            (quiet[idx] >= stall_patience) | (new.rank_deficient & (rel <= stall_rtol))
        )
        for j, r in enumerate(idx):
            if done_tol[j]:
                reasons[r] = "tol"
            elif done_stall[j]:
                reasons[r] = "rank-deficient" if new.rank_deficient[j] else "objective-stalled"
        finished = idx[done_tol | done_stall]
        active[finished] = False
        seconds[finished] = time.perf_counter() - t0
        if callback is not None:
            callback(it, state.objective.copy(), steps.copy(), active.copy())
        if log_every and it % log_every == 0:
            logger.info(
                "iteration %d: %d/%d restarts active, best objective %.10g, largest step %.3g",
                it, active.sum(), R, state.objective.max(), steps[active].max(initial=0.0),
            )
    seconds[active] = time.perf_counter() - t0

    results = [
        RestartResult(
            index=r,
            start=starts[r],
            objective=float(state.objective[r]),
            n_iter=int(n_iter[r]),
            converged=reasons[r] == "tol",
            stopping_reason=reasons[r],
            step=float(steps[r]),
            seconds=float(seconds[r]),
            history=history[r],
        )
        for r in range(R)
    ]
    return state, results
