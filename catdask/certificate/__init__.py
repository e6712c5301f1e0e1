"""Global-optimality certificate for the quadratic objective (CQS, K-CQS; docs/design.md §4).

Why each bound and its rounding allowance are sound: docs/certificate-arguments.md, by function.
"""

from .budget import CertificateBudget
from .certify import certify_global_optimum
from .point import ClassMatrixOperator
from .record import Certificate, not_applicable, not_certified
from .verify import CertificateVerificationError, verify_certificate

__all__ = ["Certificate", "CertificateBudget", "CertificateVerificationError",
           "ClassMatrixOperator", "certify_global_optimum", "not_applicable", "not_certified",
           "verify_certificate"]
