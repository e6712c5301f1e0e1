"""Re-verify a stored moment certificate from its dual data, without re-solving anything."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .moment_dual import DualBound, dual_bound


class CertificateVerificationError(ValueError):
    """The stored certificate does not prove what it claims (tampered or inconsistent data)."""


@dataclass(frozen=True)
class VerifiedBound:
    """Outcome of :func:`verify_certificate` (units of f, the estimators' objective)."""

    objective: float
    upper_bound: float
    gap: float
    certified: bool
    stored_upper_bound: float
    detail: DualBound


def verify_certificate(model, class_matrices=None, *, rtol=1e-9):
    """Recompute a model's moment-level bound from its stored dual data and check its claim.
    Returns a :class:`VerifiedBound`. Raises :class:`CertificateVerificationError` when the
    recomputed bound is above the stored one, a certified model's gap exceeds its tolerance,
    or the data do not fit the model; ``ValueError`` when it carries no moment dual data."""
    steps = getattr(model, "steps", None)
    est = steps[-1][1] if steps else model
    cert = getattr(est, "certificate_", None)
    dual = getattr(cert, "moment_dual", None)
    if cert is None or dual is None:
        raise ValueError("the model carries no moment-relaxation dual data (its certificate did "
                         "not come from the moment relaxation, or it was stored without it)")
    R = dual.class_matrices if class_matrices is None else np.asarray(class_matrices, float)
    if R is None:
        raise ValueError("no class matrices: pass class_matrices= (none were stored)")
    components = getattr(est, "components_", None)
    if R.ndim != 3 or R.shape[1] != R.shape[2]:
        raise CertificateVerificationError(f"class matrices of shape {R.shape} are not (K, D, D)")
    if components is not None:  # linear: f at the model's own axes
        W = np.asarray(components, dtype=float).T
        if R.shape[0] != W.shape[1] or R.shape[1] != W.shape[0]:
            raise CertificateVerificationError(
                f"class matrices of shape {R.shape} do not fit the model's axes {W.shape}")
        f = 0.5 * float(np.einsum("dk,kde,ek->", W, R, W))
    else:  # kernel: the axes live in the Gram factor's space, f as the certificate recorded it
        f = float(cert.objective)
    try:
        detail = dual_bound(R, dual)
    except ValueError as exc:
        raise CertificateVerificationError(f"the stored dual data are malformed: {exc}") from exc
    upper = max(detail.upper_bound, f)
    gap = (upper - f) / abs(f) if f else math.inf
    stored = cert.verified_upper_bound
    if not (math.isfinite(upper) and upper <= stored + rtol * abs(stored)):
        raise CertificateVerificationError(
            f"the dual data prove max f <= {upper:.12g}, not the stored {stored:.12g}")
    if abs(f - cert.objective) > 1e-9 * abs(f) + 1e-300:
        raise CertificateVerificationError(
            f"f at the model's axes is {f:.12g}, the certificate says {cert.objective:.12g}")
    certified = bool(gap <= cert.tol)
    if cert.certified and not certified:
        raise CertificateVerificationError(
            f"the recomputed gap {gap:.2e} exceeds the tolerance {cert.tol:.0e}")
    return VerifiedBound(objective=f, upper_bound=upper, gap=gap, certified=certified,
                         stored_upper_bound=stored, detail=detail)
