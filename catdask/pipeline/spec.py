"""What to train and on what terms to register it: :class:`ModelSpec`."""

from __future__ import annotations

import dataclasses
import math
from numbers import Integral

from ..method_names import CERTIFY_LEVELS, KERNEL_METHODS, MAX_RESTARTS, METHOD_NAMES


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """What to train and on what terms to register it (JSON round-trippable)."""

    method: str = "cqs"
    origin: str = "global"
    n_restarts: int = 5
    standardise: bool = True
    gamma: float | None = None
    eps: float = 0.1
    tol: float = 1e-8
    max_iter: int = 2000
    random_state: int | None = 0
    certify: str = "dual"
    allow_uncertified: bool = False
    max_gap: float | None = None
    device: str | None = None

    def __post_init__(self):
        # NaN fails too; inf would fail only after the fit, when the record is written as JSON
        if self.max_gap is not None and not 0 <= self.max_gap < float("inf"):
            raise ValueError(f"max_gap must be a finite number >= 0. Got {self.max_gap!r} "
                             "instead.")
        if self.method not in METHOD_NAMES:
            raise ValueError(f"Unknown method {self.method!r}; use one of {sorted(METHOD_NAMES)}.")
        # Checked here, not only by the estimator: a spec from a deployment run or a recorded
        # version fails before the data set is read and the cluster started.
        if (isinstance(self.n_restarts, bool) or not isinstance(self.n_restarts, Integral)
                or not 1 <= self.n_restarts <= MAX_RESTARTS):
            raise ValueError(f"n_restarts must be an integer from 1 to {MAX_RESTARTS} (the "
                             f"restarts run as one batch). Got {self.n_restarts!r} instead.")
        if self.certify not in CERTIFY_LEVELS:
            raise ValueError(f"certify must be one of {', '.join(map(repr, CERTIFY_LEVELS))}. "
                             f"Got {self.certify!r} instead.")
        if self.device is not None:
            if not isinstance(self.device, str):  # recorded as JSON with the version
                raise ValueError(f"device must be a string such as 'cuda', 'cuda:1' or 'cpu'. "
                                 f"Got {self.device!r} instead.")
            if not self.is_kernel:
                # As CategorySpace, which has no device: its products are N x D passes, with
                # no Gram matrix to put on a GPU.
                raise ValueError(
                    f"device={self.device!r} applies only to the kernel methods "
                    f"({', '.join(KERNEL_METHODS)}), whose Gram products run on it; "
                    f"{self.method} runs on the CPU (or the Dask workers): leave device unset.")

    @property
    def is_kernel(self):
        return METHOD_NAMES[self.method].kernel

    def check_data_shape(self, dataset: str, n_features: int, n_classes: int,
                         n_samples: int | None = None) -> None:
        """Raise ``ValueError`` when the method cannot fit a data set of this shape: the linear
        methods need K <= D; a kernel fit whose K x K per-class covariances exceed memory is refused
        (:func:`~catdask.estimators.classify.check_class_count_memory`). Checked from the metadata,
        before a cluster is started.
        """
        if self.is_kernel and n_samples is not None:
            from ..estimators.classify import check_class_count_memory

            check_class_count_memory(n_samples, n_classes)
        if not self.is_kernel and n_classes > n_features:
            raise ValueError(
                f"method {self.method!r} needs at most as many classes as features, and data "
                f"set {dataset!r} has K = {n_classes} classes and D = {n_features} features (K "
                f"orthonormal axes do not fit in D dimensions); use a kernel method "
                f"({' or '.join(map(repr, KERNEL_METHODS))}) instead.")

    def registration_decision(self, cert) -> tuple[bool, str]:
        """Whether this spec's policy registers a fit with certificate ``cert``, and the
        status recorded (:func:`catdask.pipeline.training.registration_decision` says what
        each means). Needs only the certificate: a rejected candidate's recorded one is
        decided again under a new policy without a refit."""
        if cert.certified:
            return True, "certified"
        if not METHOD_NAMES[self.method].certifiable:
            return True, "certificate-not-applicable"
        if self.max_gap is not None and cert.applicable and math.isfinite(cert.gap) \
                and cert.gap <= self.max_gap:
            return True, "gap-within-tolerance"
        if self.allow_uncertified:
            return True, "uncertified-allowed"
        return False, "rejected-uncertified"

    def estimator(self):
        kw = dict(origin=self.origin, eps=self.eps, n_restarts=self.n_restarts, tol=self.tol,
                  max_iter=self.max_iter, random_state=self.random_state,
                  certify="moment" if self.certify == "moment" else True,
                  # The registration decision reads the certificate anyway; in the fit, its
                  # time is part of the recorded fit_seconds and of the fit task's log.
                  certify_at="fit")
        if self.is_kernel:
            kw.update(gamma=self.gamma, device=self.device)
        from ..methods import make_estimator  # the estimators: imported when a fit needs them

        return make_estimator(self.method, **kw)

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d):
        """The spec ``to_dict`` wrote; fields a record predates take their defaults."""
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - fields
        if unknown:
            raise ValueError(f"Unknown model-spec fields {sorted(unknown)}; known: {sorted(fields)}.")
        return cls(**d)

    @classmethod
    def recorded(cls, meta):
        """The spec a registered version was trained with (``meta["spec"]``)."""
        spec = dict(meta["spec"])
        if "allow_uncertified" not in spec:
            spec["allow_uncertified"] = meta.get("registration_status") == "uncertified-allowed"
        return cls.from_dict(spec)
