"""Global-optimality certificate for the quadratic objective (CQS, K-CQS).

The problem is ``max f(W) = 1/2 sum_k w_k^T R_k w_k`` over W (D x K) with orthonormal columns,
every R_k symmetric positive semidefinite (paper eqs. (42), (43); docs/design.md section 4).
:func:`certify_global_optimum` climbs an ordered ladder (:mod:`.ladder`, :mod:`.levels`) under a
:class:`CertificateBudget` (:mod:`.budget`): first-order residuals (paper eq. (50),
:mod:`.point`; diagnostic only), Rapcsák's condition (:mod:`.rapcsak`), the verified SDP-dual
test (:mod:`.sdp_dual`; Gilman, Burer & Balzano, arXiv:2205.13653), upper bounds when W is not
certified (:mod:`.bounds`), and optionally (``moment=True``) the level-2 moment relaxation
(:mod:`.moment`), whose dual data :func:`verify_certificate` re-checks. Kernel fits are tested as
the linear problem on a Gram factor's rows (:mod:`.kernel`); the fit engine reaches each
method's test through a certifier (:mod:`.certifiers`).

The result is a :class:`Certificate` (:mod:`.record`), on the estimators' scale; tolerances are
relative to ``scale = max_k ||R_k||_2``.
"""

from .budget import CertificateBudget
from .certify import certify_global_optimum
from .point import ClassMatrixOperator
from .record import Certificate, not_applicable, not_certified
from .verify import CertificateVerificationError, verify_certificate

__all__ = ["Certificate", "CertificateBudget", "CertificateVerificationError",
           "ClassMatrixOperator", "certify_global_optimum", "not_applicable", "not_certified",
           "verify_certificate"]
