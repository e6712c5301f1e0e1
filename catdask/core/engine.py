"""The fit engine: all restarts of one problem run, chosen among and certified.

:func:`fit_restarts` is the one path every fit takes (linear, kernel, the Nystroem features'
linear fit), pymanopt-style: the estimator builds a problem (:mod:`catdask.core.problems`) and
its starts, picks solver options, a certifier (:mod:`catdask.certificate.certifiers`) and a
precision schedule (:mod:`catdask.core.precision`), and gets back a frozen :class:`FitResult`
from which it sets its fitted attributes. Nothing is stored on the estimator during the fit.

Choosing among restarts (issue 2: "ties and near-ties broken by certificate"): the highest
objective wins; restarts within :data:`TIE_RTOL` of it tie, and among those a converged one
wins. The certificate test runs once, on that chosen restart; every other restart is decided
from it without a test of its own, rigorously: a tied restart shares its verdict (to TIE_RTOL),
and a restart below another restart's objective is not a global maximiser, whose gap the chosen
restart's upper bound on the global maximum bounds. The choice never depends on the verdict,
and :func:`certify_restarts` is a pure function of the restarts, the chosen index, the final
state and the certifier, so the test could later run on first access of the certificates
(:attr:`FitResult.certificates`, :attr:`FitResult.certificate`) without changing the choice.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from .precision import FLOAT64, PrecisionSchedule
from .problems import KernelState

__all__ = ["SolverOptions", "Starts", "Certifier", "FitResult", "fit_restarts",
           "choose_restart", "certify_restarts", "ties_with", "TIE_RTOL"]

# Restarts whose objectives agree to this relative tolerance count as ties: one test, of the
# chosen one, speaks for all of them (issue 2: "ties and near-ties broken by certificate").
TIE_RTOL = 1e-9


@dataclass(frozen=True)
class SolverOptions:
    """Settings of every solver run of a fit (:func:`catdask.core.solver.solve`).

    ``log_every``: INFO progress records every that many iterations (0: none). Progress
    listeners come from the caller's context (:mod:`catdask.core.progress`), not from here.
    """

    tol: float = 1e-8
    max_iter: int = 2000
    acceleration: str = "auto"
    log_every: int = 0


@dataclass(frozen=True)
class Starts:
    """The starting points of the restarts: their labels (``"decoupled"``, ``"random"``...)
    and ``evaluate()``, which builds and evaluates them (the engine calls it under the
    precision schedule, so the starts use the first phase's products)."""

    labels: tuple
    evaluate: Callable[[], Any]


class Certifier(Protocol):
    """Tests one restart's axes (W or kernel coefficients A) for global optimality.

    ``applies = False``: no test; ``certify(None)`` gives the certificate every restart gets.
    """

    applies: bool

    def certify(self, point, *, full_sdp="auto", moment=False): ...


@dataclass(frozen=True)
class FitResult:
    """The record of one fit: the restarts, the chosen one, its certificate and the timings.

    Attributes
    ----------
    restarts : tuple of RestartResult
        One record per restart (index = position), each with its ``certificate``.
    best_index : int
        The chosen restart.
    state : LinearState or KernelState
        The solver's final state of every restart (leading axis: restarts).
    phases : dict
        Wall seconds: ``"setup"`` (from ``started_at`` to the first iteration: the caller's
        validation and problem, and the starts), then ``"iterations"``, or ``"float32"`` (every
        iteration on float32 tiles) and ``"polish"`` (the exact float64 iterations;
        :class:`~catdask.core.precision.Float32ThenFloat64`).
    float32_iterations : tuple of int
        Each restart's iterations on float32 tiles (included in its ``n_iter``).
    started_at : float
        ``time.perf_counter()`` when the fit began.
    """

    restarts: tuple
    best_index: int
    state: Any
    phases: dict
    float32_iterations: tuple
    started_at: float

    @property
    def best(self):
        """The chosen restart's :class:`~catdask.core.solver.RestartResult`."""
        return self.restarts[self.best_index]

    @property
    def certificates(self):
        """Each restart's certificate."""
        return tuple(r.certificate for r in self.restarts)

    @property
    def certificate(self):
        """The chosen restart's certificate."""
        return self.best.certificate

    @property
    def n_iter_float32(self):
        """The chosen restart's float32 iterations (0 when every product was float64)."""
        return self.float32_iterations[self.best_index]

    def fit_seconds(self, finished_at):
        """Wall seconds per phase of a fit that ended at ``finished_at`` (perf_counter):
        :attr:`phases`, then ``"finish"`` (everything after the iterations: certificate,
        coordinates, classifier) and ``"total"``."""
        total = finished_at - self.started_at
        out = dict(self.phases)
        out["finish"] = total - sum(out.values())
        out["total"] = total
        return out


def fit_restarts(problem, starts: Starts, *, solver_options: SolverOptions,
                 certifier: Certifier, precision_schedule: PrecisionSchedule = FLOAT64,
                 moment: bool = False, started_at: float | None = None) -> FitResult:
    """Run every restart as one batch, choose one and certify it.

    Parameters
    ----------
    problem : LinearProblem, ClassMatrixProblem or KernelProblem
    starts : Starts
    solver_options : SolverOptions
    certifier : Certifier
        Tests the chosen restart (:mod:`catdask.certificate.certifiers`).
    precision_schedule : Float64Throughout or Float32ThenFloat64, default=FLOAT64
    moment : bool, default=False
        Passed to ``certifier.certify``: also try the level-2 moment relaxation.
    started_at : float, optional
        ``time.perf_counter()`` when the caller's fit began (default: now); the ``"setup"``
        phase runs from it to the first iteration.

    Returns
    -------
    FitResult
    """
    started_at = time.perf_counter() if started_at is None else started_at
    with precision_schedule.starts_precision():
        state0 = starts.evaluate()
    setup = time.perf_counter() - started_at
    run = precision_schedule.run(problem, state0, list(starts.labels), solver_options)
    best = choose_restart(run.restarts)
    certificates = certify_restarts(run.restarts, best, run.state, certifier, moment=moment)
    restarts = tuple(dataclasses.replace(r, certificate=c)
                     for r, c in zip(run.restarts, certificates))
    return FitResult(restarts=restarts, best_index=best, state=run.state,
                     phases={"setup": setup, **run.phases},
                     float32_iterations=tuple(run.float32_iterations), started_at=started_at)


def ties_with(objective, top):
    """Whether ``objective`` reaches ``top`` to :data:`TIE_RTOL` (relative): a restart at the
    best objective level, which the test of the best restart speaks for."""
    return objective >= top - TIE_RTOL * abs(top)


def choose_restart(restarts):
    """Index of the chosen restart: the highest objective; among near-ties (:func:`ties_with`)
    a converged one, then the higher objective."""
    top = max(r.objective for r in restarts)
    near = [r for r in restarts if ties_with(r.objective, top)]
    return max(near, key=lambda r: (r.converged, r.objective)).index


def certify_restarts(restarts, best_index, state, certifier, *, moment=False):
    """Each restart's certificate: one test of the chosen restart, the others derived.

    ``state`` holds every restart's axes (``W``, or ``A`` for a kernel state); only the chosen
    restart's are tested (``full_sdp="auto"``).
    """
    if not certifier.applies:
        cert = certifier.certify(None)
        return tuple(cert for _ in restarts)
    point = state.A[best_index] if isinstance(state, KernelState) else state.W[best_index]
    reference = certifier.certify(point, full_sdp="auto", moment=moment)
    top = max(r.objective for r in restarts)
    out = []
    for res in restarts:
        if res.index == best_index:
            out.append(reference)
        elif ties_with(res.objective, top):
            out.append(_tied_certificate(reference, res.objective, best_index))
        else:
            out.append(_dominated_certificate(reference, res.objective, best_index))
    return tuple(out)


def _tied_certificate(reference, objective, best_index):
    """Certificate of a restart whose objective ties (to TIE_RTOL) with the tested one."""
    verdict = "globally optimal" if reference.certified else "not certified either"
    return dataclasses.replace(
        reference,
        objective=float(objective),
        seconds=0.0,
        reason=(
            f"same objective as restart {best_index} to {TIE_RTOL:g} relative, which was "
            f"tested: {verdict} ({reference.reason})"
        ),
    )


def _dominated_certificate(reference, objective, best_index):
    """Certificate of a restart that another restart beats: provably not global.

    ``reference`` is the best restart's certificate; its upper bound on the global maximum
    (when it has one) also bounds this restart's gap.
    """
    bound = reference.upper_bound
    gap = (bound - objective) / abs(objective) if np.isfinite(bound) and objective else np.nan
    return dataclasses.replace(
        reference,
        certified=False,
        method=None,
        objective=float(objective),
        gap=float(max(gap, 0.0)) if np.isfinite(gap) else np.nan,
        rapcsak=False,
        rapcsak_lambda_max=np.nan,
        sdp_margin=np.nan,
        nu=None,
        first_order=np.nan,
        asymmetry=np.nan,
        stationarity=np.nan,
        seconds=0.0,
        reason=(
            f"not a global maximiser: restart {best_index} reaches a higher objective "
            f"({reference.objective:.10g} > {objective:.10g})"
        ),
    )
