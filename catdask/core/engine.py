"""The fit engine: all restarts of one problem run, chosen among and certified."""

from __future__ import annotations

import dataclasses
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

import numpy as np

from .precision import FLOAT64, PrecisionSchedule
from .problems import KernelPoint, KernelState
from .progress import report_stage

# Restarts whose objectives agree to this relative tolerance count as ties: one test, of the
# chosen one, speaks for all of them.
TIE_RTOL = 1e-9

#: When the certificate test runs: inside the fit, or on first use of the certificates.
CERTIFY_AT = ("access", "fit")


@dataclass(frozen=True)
class SolverOptions:
    """Settings of every solver run of a fit (:func:`catdask.core.solver.solve`)."""

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
    """Tests one restart's axes (W or kernel coefficients A) for global optimality."""

    applies: bool

    def certify(self, point, *, full_sdp="auto", moment=False): ...


class RestartCertification:
    """Each restart's certificate (:func:`certify_restarts`), computed at most once."""

    def __init__(self, runs, best_index, point, certifier, *, moment=False, release=None):
        self.runs = tuple(runs)
        self.best_index = int(best_index)
        self._point = point
        self._certifier = certifier
        self._moment = bool(moment)
        self._release = release
        self._certified = None
        self.seconds = None
        self._lock = threading.Lock()  # two threads reading the certificate: one test

    @property
    def done(self):
        """Whether the test has run."""
        return self._certified is not None

    def restarts(self):
        """Every restart's record with its certificate; runs the test on first call."""
        with self._lock:
            return self._run_once()

    def _run_once(self):
        if self._certified is None:
            t0 = time.perf_counter()
            certificates = certify_restarts(self.runs, self.best_index, self._point,
                                            self._certifier, moment=self._moment)
            self._certified = tuple(dataclasses.replace(r, certificate=c)
                                    for r, c in zip(self.runs, certificates))
            self.seconds = time.perf_counter() - t0
            release, self._release = self._release, None
            self._point = self._certifier = None
            if release is not None:
                release()
        return self._certified

    def __getstate__(self):
        self.restarts()  # a pickle holds certificates, never a certifier or its operator
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()


@dataclass(frozen=True)
class FitResult:
    """The record of one fit: the restarts, the chosen one, its certificate and the timings."""

    certification: RestartCertification
    best_index: int
    state: Any
    phases: dict
    float32_iterations: tuple
    started_at: float

    @property
    def runs(self):
        """The solver's record of every restart, without certificates (no test runs)."""
        return self.certification.runs

    @property
    def best_run(self):
        """The chosen restart's solver record, without its certificate (no test runs)."""
        return self.runs[self.best_index]

    @property
    def restarts(self):
        """One :class:`~catdask.core.solver.RestartResult` per restart (index = position),
        each with its ``certificate`` (runs the test if it has not run)."""
        return self.certification.restarts()

    @property
    def best(self):
        """The chosen restart's :class:`~catdask.core.solver.RestartResult`, certified."""
        return self.restarts[self.best_index]

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
        :attr:`phases`, then ``"finish"`` (everything after the iterations and a certificate
        run in the fit: coordinates, classifier) and ``"total"``."""
        total = finished_at - self.started_at
        out = dict(self.phases)
        out["finish"] = total - sum(out.values())
        out["total"] = total
        return out


def fit_restarts(problem, starts: Starts, *, solver_options: SolverOptions,
                 certifier: Certifier, precision_schedule: PrecisionSchedule = FLOAT64,
                 moment: bool = False, started_at: float | None = None,
                 certify_at: str = "fit", release: Callable[[], Any] | None = None) -> FitResult:
    """Run every restart of ``problem`` from ``starts`` as one batch under ``precision_schedule``,
    choose one and certify it with ``certifier`` (``moment``: also the level-2 moment relaxation).
    """
    if certify_at not in CERTIFY_AT:
        raise ValueError(f"certify_at must be one of {CERTIFY_AT}; got {certify_at!r}.")
    started_at = time.perf_counter() if started_at is None else started_at
    with precision_schedule.starts_precision():
        state0 = starts.evaluate()
    setup = time.perf_counter() - started_at
    run = precision_schedule.run(problem, state0, list(starts.labels), solver_options)
    best = choose_restart(run.restarts)
    point = (_chosen_point(problem, run.state, best, time.perf_counter() - started_at)
             if certifier.applies else None)
    deferred = certify_at == "access" and certifier.applies
    certification = RestartCertification(run.restarts, best, point, certifier, moment=moment,
                                         release=release if deferred else None)
    phases = {"setup": setup, **run.phases}
    if not deferred:
        certification.restarts()
        if certifier.applies:
            phases["certificate"] = certification.seconds
    return FitResult(certification=certification, best_index=best, state=run.state,
                     phases=phases, float32_iterations=tuple(run.float32_iterations),
                     started_at=started_at)


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


def _chosen_point(problem, state, best_index, fit_seconds=None):
    """The chosen restart's axes: ``W`` (D, K), or a :class:`~.problems.KernelPoint` (kernel
    coefficients ``A`` and projections ``P``, (K, N) each, and the fit's seconds); copies, so
    a deferred test does not keep every restart's state alive."""
    if isinstance(state, KernelState):
        A, P = problem.axes(state, best_index)
        return KernelPoint(A, P, fit_seconds)
    return np.array(state.W[best_index])


def certify_restarts(restarts, best_index, point, certifier, *, moment=False):
    """Each restart's certificate: one test of the chosen restart's axes ``point``
    (``full_sdp="auto"``; None when the certifier does not apply), the others derived."""
    if not certifier.applies:
        cert = certifier.certify(None)
        return tuple(cert for _ in restarts)
    report_stage(f"testing restart {best_index} (the best) for global optimality")
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
    """Certificate of a restart that another restart beats: provably not global."""
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
        status="refuted",
        reason=(
            f"not a global maximiser: restart {best_index} reaches a higher objective "
            f"({reference.objective:.10g} > {objective:.10g})"
        ),
    )
