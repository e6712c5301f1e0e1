"""The certificate test on first access: ``certificate_`` and ``restarts_``.

The first access (or pickling) runs the pending test once and keeps its result as ordinary
attributes; it is the certificate ``fit`` would have given.
"""

from __future__ import annotations

#: The fitted attributes that report the certificate test: set when it has run.
CERTIFIED_ATTRIBUTES = ("certificate_", "restarts_")


class CertificateOnAccess:
    """Mixin of the estimators: ``certificate_`` / ``restarts_`` from a certification that
    may still be pending (before ``BaseEstimator`` in the MRO, for ``__getstate__``)."""

    def _store_certification(self, certification):
        """Keep ``certification`` (a fit's): its certificates now when its test has run,
        else pending until first access. An earlier fit's certificates are dropped."""
        for attr in (*CERTIFIED_ATTRIBUTES, "_certification"):
            self.__dict__.pop(attr, None)
        if certification.done:
            self._take_certificates(certification, deferred=False)
        else:
            self._certification = certification

    def _take_certificates(self, certification, *, deferred):
        """Set ``restarts_`` and ``certificate_`` from ``certification`` (running its test if
        pending). ``deferred``: the test ran now, after the fit: its wall seconds go to
        ``fit_seconds_["certificate"]`` where the fit reports its phases (the fit's own
        ``"total"`` stays what it was), and ``verbose`` reports it."""
        restarts = certification.restarts()
        self.restarts_ = list(restarts)
        self.certificate_ = restarts[certification.best_index].certificate
        self.__dict__.pop("_certification", None)
        if deferred:
            if isinstance(self.__dict__.get("fit_seconds_"), dict):
                self.fit_seconds_ = {**self.fit_seconds_, "certificate": certification.seconds}
            self._log_deferred_certificate(certification.seconds)

    def _log_deferred_certificate(self, seconds):
        """Report a test run on first access (the estimator's verbose logging)."""

    def __getattr__(self, name):
        # Only reached when normal lookup fails: a certificate attribute of a fit whose test
        # is pending runs the test now, once.
        if name in CERTIFIED_ATTRIBUTES:
            pending = self.__dict__.get("_certification")
            if pending is not None:
                self._take_certificates(pending, deferred=True)
            if name in self.__dict__:  # set here, or by another thread meanwhile
                return self.__dict__[name]
        # A class attribute whose descriptor refused (``available_if``: ``predict_proba`` with
        # ``classifier="angle"``) lands here too, and Python drops its reason: ask it again so
        # the error says why ("classifier='angle' gives no probabilities; ..."), not only
        # "no attribute 'predict_proba'".
        # Only the classes' own attributes (not the metaclass's: `__name__` is type's).
        descriptor = next((k.__dict__[name] for k in type(self).__mro__ if name in k.__dict__),
                          None)
        if descriptor is not None and hasattr(descriptor, "__get__"):
            try:
                return descriptor.__get__(self, type(self))
            except AttributeError as exc:  # scikit-learn keeps the check's reason as the cause
                if isinstance(exc.__cause__, AttributeError):
                    raise AttributeError(f"{type(self).__name__!r} object has no attribute "
                                         f"{name!r}: {exc.__cause__}", name=name,
                                         obj=self) from None
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __getstate__(self):
        # A pickle (and copy.copy / deepcopy) holds the certificate, never the pending test's
        # certifier and the operator it reads: run the test first.
        pending = self.__dict__.get("_certification")
        if pending is not None:
            self._take_certificates(pending, deferred=True)
        return super().__getstate__()
