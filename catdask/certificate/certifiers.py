"""One certifier per method: how a fit's chosen restart is tested for global optimality.

Only the chosen restart is tested (the others are tied or beaten); the seed is fixed and the
budget the one in force where the certifier was built, so the certificate is a function of the fit.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from .budget import CertificateBudget, current_budget
from .certify import certify_global_optimum
from .kernel import certify_kernel_axes
from .moment import moment_hint
from .record import Certificate, not_applicable

#: Seed of the test's random numbers: a certificate is a function of the fit alone.
CERTIFIER_SEED = 0


@dataclass(frozen=True)
class LinearCertifier:
    """CQS: the class matrices R_k (K, D, D), tested at the axes W (D, K). ``class_matrices``
    None (they did not fit the memory budget): the test is not attempted, for the reason
    ``unavailable``."""

    class_matrices: np.ndarray | None
    unavailable: str = "not attempted: the class matrices exceed the memory budget"
    budget: CertificateBudget = field(default_factory=current_budget)
    applies: ClassVar[bool] = True

    def certify(self, W, *, full_sdp="auto", moment=False) -> Certificate:
        if self.class_matrices is None:
            return not_applicable(self.unavailable)
        cert = certify_global_optimum(self.class_matrices, W, full_sdp=full_sdp, moment=moment,
                                      rng=CERTIFIER_SEED, budget=self.budget)
        if cert.certified or moment or not np.isfinite(cert.gap):
            return cert
        # The strongest level is opt-in (minutes at tens of features): say where it may prove W.
        hint = moment_hint(self.class_matrices, self.budget)
        return dataclasses.replace(cert, reason=f"{cert.reason}; {hint}",
                                   next_level="moment") if hint else cert


@dataclass(frozen=True)
class KernelCertifier:
    """K-CQS: the Gram operator the problem was solved on, tested at the coefficients A (K, N)."""

    operator: Any
    classes: Any
    origin: str
    budget: CertificateBudget = field(default_factory=current_budget)
    applies: ClassVar[bool] = True

    def certify(self, A, *, full_sdp="auto", moment=False) -> Certificate:
        """``A`` (K, N), or a :class:`~catdask.core.problems.KernelPoint` whose projections
        spare the test its one product with G and whose fit time sizes its landmarks."""
        projections = getattr(A, "P", None)
        fit_seconds = getattr(A, "fit_seconds", None)
        A = getattr(A, "A", A)
        return certify_kernel_axes(self.operator, self.classes, self.origin, A,
                                   full_sdp=full_sdp, moment=moment, rng=CERTIFIER_SEED,
                                   projections=projections, fit_seconds=fit_seconds,
                                   budget=self.budget)


@dataclass(frozen=True)
class NoCertifier:
    """No test: CAS (``reason`` None: not applicable), or ``certify=False`` (``reason``)."""

    reason: str | None
    applies: ClassVar[bool] = False

    def certify(self, point=None, *, full_sdp="auto", moment=False) -> Certificate:
        return not_applicable(self.reason)
