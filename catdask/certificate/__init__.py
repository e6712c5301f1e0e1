"""Global-optimality certificate for the quadratic objective (CQS, K-CQS).

The problem is ``max f(W) = 1/2 sum_k w_k^T R_k w_k`` over W (D x K) with orthonormal columns,
every R_k symmetric positive semidefinite (paper eqs. (42), (43); docs/design.md section 4).
At a point W returned by a solver, :func:`certify_global_optimum` runs, in order:

1. **First-order residuals** (paper eq. (50); :mod:`.point`): ``Lambda = W^T [R_k
   w_k]_k`` symmetric and ``[R_k w_k]_k = W Lambda``. Diagnostic only: the tests below already
   account for an inexact stationary point.
2. **Rapcsák's condition** (:mod:`.rapcsak`): sufficient, and vacuous in practice.
3. **The SDP-dual test** (:mod:`.sdp_dual`; Gilman, Burer & Balzano, arXiv:2205.13653): a nu
   found by Kelley cutting planes, then verified by eigenvalue upper bounds (:mod:`.eigen`).
4. **An upper bound** on ``max f`` and the relative gap when not certified (:mod:`.bounds`).
5. **Optionally** (``moment=True``), when the SDP dual is not tight: the level-2 moment relaxation
   (:mod:`.moment`), whose rigorous bound proves most of the remaining optima; its dual data
   are kept with the certificate and :func:`verify_certificate` re-checks the bound from them.

These are the levels of an ordered ladder (:mod:`.ladder`, :mod:`.levels`) walked under a
:class:`CertificateBudget` (:mod:`.budget`: every threshold, with its measurement). Kernel fits
are tested as the linear problem on a Gram factor's rows (:mod:`.kernel`); the fit engine
reaches each method's test through a certifier (:mod:`.certifiers`).

The result is a :class:`Certificate` (:mod:`.record`). All objective values and bounds are on the
estimators' scale ``1/2 sum_k w_k^T R_k w_k``; tolerances are relative to
``scale = max_k ||R_k||_2``.
"""

from .budget import CertificateBudget
from .certify import certify_global_optimum
from .point import ClassMatrixOperator
from .record import Certificate, not_applicable, not_certified
from .verify import CertificateVerificationError, verify_certificate

__all__ = ["Certificate", "CertificateBudget", "CertificateVerificationError",
           "ClassMatrixOperator", "certify_global_optimum", "not_applicable", "not_certified",
           "verify_certificate"]
