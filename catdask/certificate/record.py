"""The result of the global-optimality test: :class:`Certificate` and its constructors."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

_BOOL_FIELDS = ("applicable", "certified", "rapcsak")
_OPTIONAL_STR_FIELDS = ("method", "bound_method", "eigen_check", "status", "next_level")
#: The reason of :func:`not_applicable` by default: the CAS objective has no test.
_NOT_QUADRATIC = "not applicable: the absolute-value objective (CAS) is not quadratic"


@dataclass(frozen=True)
class Certificate:
    """Outcome of the global-optimality test for one point W (docs/design.md section 4)."""

    #: False for the absolute-value objective (CAS), which is never certified, and for a test
    #: that was not attempted.
    applicable: bool
    #: True only if a verified sufficient condition for global optimality holds.
    certified: bool
    #: The condition that certified W: "sdp-dual" (preferred when both hold), "rapcsak",
    #: "moment", or None.
    method: str | None
    objective: float  # f(W); nan if not applicable
    #: A valid upper bound on ``max f`` over the Stiefel manifold (nan if none). Equal to
    #: ``objective`` when certified (the test's tolerance is in ``verified_upper_bound``).
    upper_bound: float
    #: Where ``upper_bound`` comes from: "certificate" (``upper_bound = objective``), "sdp" (the
    #: full SDP relaxation solved with cvxpy), "reduced" (the cheap dual-feasible bound),
    #: "moment", or None.
    bound_method: str | None
    #: ``(upper_bound - objective) / |objective|``, clipped at 0; 0.0 when certified (the
    #: certified point is optimal to the test's tolerance; see :attr:`verified_gap`).
    gap: float
    #: Whether Rapcsák's condition ``lambda_max(blockdiag(R_k) - Lambda (x) I_D) <= tol * scale``
    #: held; ``rapcsak_lambda_max`` is that eigenvalue divided by ``scale``.
    rapcsak: bool
    rapcsak_lambda_max: float
    #: Verified margin of the nu-test divided by ``scale``: ``min(lambda_min(S(nu)),
    #: -max_k lambda_max(M_k(nu)))``; ``>= -tol`` means pass. Near 0 at best, since each
    #: M_k(nu) has a (near) zero eigenvalue along w_k. Above ``dense_max_dim``, when the search
    #: proved that no nu passes and the dual bound at nu could not improve the reported bound,
    #: the verification is skipped (the reason says "SDP-dual bound at nu not proved") and
    #: this is the Lanczos estimate of the margin, not a verified one.
    sdp_margin: float
    nu: tuple[float, ...] | None  # the nu used by the SDP-dual test
    #: ``max(asymmetry, stationarity)``: ``||Lambda - Lambda^T||_F / ||Lambda||_F`` and
    #: ``||[R_k w_k]_k - W sym(Lambda)||_F / ||[R_k w_k]_k||_F``.
    first_order: float
    asymmetry: float
    stationarity: float
    tol: float  # relative tolerance of the verification (relative to scale)
    seconds: float  # wall time of the test
    #: One sentence: why W is certified, not certified (including an internal failure of the
    #: test, named), or why the test does not apply.
    reason: str
    #: The rigorous upper bound on ``max f`` that the verification proved, including the
    #: tolerance: when certified it is ``f(W)`` plus the verified slack (so it shows what
    #: ``gap = 0`` rounds away); otherwise ``upper_bound``. nan if none.
    verified_upper_bound: float = math.nan
    #: How the largest eigenvalues behind the verified bounds were obtained, the weakest used:
    #: "dense" (LAPACK ``eigh``), "lanczos+cholesky" (a Lanczos estimate proved an upper bound
    #: by a Cholesky factorisation of ``mu I - A``, independent of Lanczos converging) or
    #: "lanczos" alone (trusting ARPACK; only for operators too large to materialise).
    eigen_check: str | None = None
    #: The ladder's verdict (:mod:`.ladder`): ``certified``, ``refuted`` (a better point
    #: exists), ``gap`` (a bound, no proof), ``failed`` (the test could not run),
    #: ``not_attempted`` or ``not_applicable`` (CAS: no test exists). What code decides on,
    #: never ``reason``.
    status: str | None = None
    #: A stronger level that may prove W where this one did not (``"moment"``: the opt-in
    #: moment relaxation fits its size guard), else None.
    next_level: str | None = None
    #: The dual data a moment-level bound was proved from (:mod:`.moment_dual`), with the class
    #: matrices it was proved for: :func:`catdask.certificate.verify_certificate` re-checks the
    #: bound from them without re-solving. Stored with a model as arrays (``model_io``), not in
    #: :meth:`to_dict`.
    moment_dual: object = field(default=None, compare=False, repr=False)

    @property
    def verified_gap(self):
        """``(verified_upper_bound - objective) / |objective|`` clipped at 0 (nan if unknown)."""
        bound, f = self.verified_upper_bound, self.objective
        if not (math.isfinite(bound) and math.isfinite(f)):
            return math.nan
        excess = max(0.0, bound - f)
        if f != 0:
            return excess / abs(f)
        return 0.0 if excess == 0 else math.inf

    def __str__(self):
        if not self.applicable:
            reason = self.reason.removeprefix("not applicable: ")  # the default reason has it
            return f"Certificate(not applicable: {reason})"
        how = f" ({self.method})" if self.certified else ""
        bound = "" if self.bound_method is None else f" ({self.bound_method})"
        verified = ""
        if self.certified and math.isfinite(self.verified_gap):
            verified = f", verified gap<={self.verified_gap:.1e}"
        # Not certified: the reason is what a reader needs (which test failed, or why none ran).
        reason = "" if self.certified else f", reason={self.reason!r}"
        return (
            f"Certificate(certified={self.certified}{how}, gap<={self.gap:.2g}{bound}{verified}, "
            f"rapcsak={self.rapcsak}, first_order={self.first_order:.1e}{reason})"
        )

    __repr__ = __str__

    def to_dict(self):
        """JSON-serialisable dict (nan becomes None, ``nu`` a list) for the model registry."""
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "moment_dual"}
        d["verified_gap"] = self.verified_gap
        for key, value in d.items():
            if isinstance(value, float) and not math.isfinite(value):
                d[key] = None if math.isnan(value) else ("inf" if value > 0 else "-inf")
        if d["nu"] is not None:
            d["nu"] = [float(v) for v in d["nu"]]
        return d

    @classmethod
    def from_dict(cls, d):
        """Inverse of :meth:`to_dict` (unknown keys are ignored, so old records still load)."""
        kwargs = {}
        for field_ in fields(cls):
            if field_.name == "moment_dual":
                continue  # arrays, restored by model_io
            value = d.get(field_.name)
            if field_.name == "nu":
                value = None if value is None else tuple(float(v) for v in value)
            elif field_.name in _BOOL_FIELDS:
                value = bool(value)
            elif field_.name in _OPTIONAL_STR_FIELDS:
                value = None if value is None else str(value)
            elif field_.name == "reason":
                value = "" if value is None else str(value)
            else:
                value = math.nan if value is None else float(value)
            kwargs[field_.name] = value
        if kwargs["status"] is None:  # a record from before the field: from the flags
            kwargs["status"] = _status_of(kwargs)
        return cls(**kwargs)


def _status_of(fields_):
    """The status of a record without one, from its flags and bound (never its prose)."""
    if fields_["certified"]:
        return "certified"
    if not fields_["applicable"]:
        return "not_attempted"
    return "gap" if math.isfinite(fields_["upper_bound"]) else "failed"


def _empty(*, applicable, reason, status, objective=math.nan, tol=math.nan, seconds=0.0):
    nan = math.nan
    return Certificate(
        applicable=applicable, certified=False, method=None, objective=float(objective),
        upper_bound=nan, bound_method=None, gap=nan, rapcsak=False, rapcsak_lambda_max=nan,
        sdp_margin=nan, nu=None, first_order=nan, asymmetry=nan, stationarity=nan,
        tol=float(tol), seconds=float(seconds), reason=str(reason), status=status,
    )


def not_applicable(reason=None):
    """A certificate that never certifies: ``reason`` why the test was not attempted (status
    ``not_attempted``), or None for CAS, whose objective is not quadratic (``not_applicable``)."""
    if reason is None:
        return _empty(applicable=False, reason=_NOT_QUADRATIC, status="not_applicable")
    return _empty(applicable=False, reason=reason, status="not_attempted")


def not_certified(reason, *, objective=math.nan, tol=math.nan, seconds=0.0, status="failed"):
    """A test that ran without a verdict (``applicable=True``, no bound): ``reason`` names what
    failed; ``status`` is ``failed``, or ``not_attempted`` for a test refused by its budget."""
    return _empty(applicable=True, reason=reason, status=status, objective=objective, tol=tol,
                  seconds=seconds)
