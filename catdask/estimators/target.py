"""Where a fit computes, resolved once from its input: :class:`ComputeTarget`.

numpy here, Dask workers, a PyTorch device, or Dask workers with GPUs (deploy/gpu-cluster.md):
the target validates the input, owns the Dask client and the operators' lifetimes (but the one a
deferred certificate still reads) and picks the kernel fit's precision schedule.
"""

from __future__ import annotations

import contextlib

import numpy as np
from sklearn.utils.validation import check_array, validate_data

from ..core.classes import ClassIndex
from ..core.precision import FLOAT64, Float32ThenFloat64, PrecisionSchedule
from ..core.validation import check_data_scale, encode_class_labels, explain_invalid_input
from ..distributed.cluster import dask_client_context
from ..distributed.inputs import is_distributed_input, load_training_data
from ..distributed.options import gram_cache_settings
from ..operators import DaskDataOperator, DaskGramOperator, NumpyDataOperator, NumpyGramOperator

#: ``dask.config`` schedulers that keep a fit off the distributed client when chosen explicitly
#: (``dask.config.set(scheduler="threads")``).
_LOCAL_SCHEDULERS = {"threads", "threading", "sync", "synchronous", "single-threaded",
                     "processes", "multiprocessing"}


def _is_tensor(a):
    """True for a PyTorch tensor (checked without importing PyTorch)."""
    return type(a).__module__.split(".")[0] == "torch" and hasattr(a, "device")


class ComputeTarget:
    """Where one fit computes: its heavy products on Dask workers
    (``distributed``), its Gram products with PyTorch on ``device`` (with ``distributed``: the
    workers' own GPUs). A context manager, used once.
    """

    def __init__(self, *, distributed=False, device=None):
        self.distributed = distributed
        self.device = device
        self._scope = contextlib.ExitStack()
        self._kept = None  # the operator a deferred certificate reads

    @classmethod
    def for_fit(cls, estimator, X, y, *, linear, device=None, in_memory=False):
        """Validate a fit's input and resolve where it runs: ``(target, X, classes_, classes)``.

        A PyTorch tensor comes to the host as numpy and, without ``device``, names the device
        (scikit-learn's array API convention: inputs on a device are computed there). Dask and
        zarr inputs make the target distributed; their X stays a row-chunked Dask array unless
        ``in_memory`` (the kernel fit holds its N x D patterns on the driver: only G is
        distributed). Other inputs go through scikit-learn's ``validate_data``. ``classes_``
        are the class labels, ``classes`` the :class:`~catdask.core.classes.ClassIndex` of
        their codes.
        """
        if _is_tensor(X):
            device = str(X.device) if device is None else device
            X = X.detach().cpu().numpy()
        if _is_tensor(y):
            y = y.detach().cpu().numpy()
        distributed = is_distributed_input(X)
        if distributed:
            X, y = load_training_data(X, y)
            estimator.n_features_in_ = int(X.shape[1])
            if hasattr(estimator, "feature_names_in_"):  # set by an earlier fit on a DataFrame
                del estimator.feature_names_in_
            if in_memory:
                X = check_array(np.asarray(X.compute()), dtype=np.float64, ensure_min_samples=2)
        else:
            try:
                X, y = validate_data(estimator, X, y, dtype=np.float64, ensure_min_samples=2)
            except (TypeError, ValueError):  # a missing label or a text column: say which
                explain_invalid_input(X, y)
                raise
            check_data_scale(X)
        classes_, codes = encode_class_labels(y, n_features=X.shape[1], linear=linear,
                                              origin=estimator.origin)
        target = cls(distributed=distributed, device=device)
        return target, X, classes_, ClassIndex(codes, len(classes_))

    # ------------------------------------------------------------------ lifetimes
    def __enter__(self):
        if self.distributed:
            self._scope.enter_context(self._client())
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._kept = None  # the fit failed: no test will read it
        return self._scope.__exit__(exc_type, exc, tb)

    @staticmethod
    def _client():
        """The Dask client of a distributed fit (:func:`catdask.distributed.dask_client_context`),
        unless the user chose a local scheduler explicitly."""
        import dask

        if str(dask.config.get("scheduler", None)).lower() in _LOCAL_SCHEDULERS:
            return contextlib.nullcontext()
        return dask_client_context()

    def driver_blas_threads(self):
        """One BLAS thread on the driver while a distributed kernel fit runs (nothing otherwise):
        the workers use the cores, and spinning BLAS threads beside busy workers made the driver's
        small dense work many times slower.
        """
        if not self.distributed:
            return contextlib.nullcontext()
        from threadpoolctl import threadpool_limits

        return threadpool_limits(limits=1, user_api="blas")

    def _own(self, operator):
        """Close ``operator`` when the fit ends, unless a deferred test keeps it."""
        self._scope.callback(self._close_unless_kept, operator)
        return operator

    def _close_unless_kept(self, operator):
        if operator is not self._kept:
            operator.close()

    def certification(self, certify_at, certifier, reads=None):
        """The ``certify_at`` and ``release`` arguments of ``fit_restarts`` for ``certifier``, which
        reads ``reads`` (an operator of this target; None: driver memory only). A deferred test
        keeps ``reads`` open past the fit, as the fit left it, and closes it once it has run; a
        distributed operator's test always runs in the fit (its client ends with the fit).
        """
        if reads is None:
            return {"certify_at": certify_at}
        if certify_at != "access" or self.distributed or not certifier.applies:
            return {"certify_at": "fit"}
        self._kept = reads
        return {"certify_at": "access", "release": reads.close}

    # ------------------------------------------------------------------ operators
    def data_operator(self, X, classes: ClassIndex):
        """The linear method's data operator of ``X`` (rows in the order of ``classes``)."""
        if self.distributed:
            return self._own(DaskDataOperator(X, classes))
        return self._own(NumpyDataOperator(X, classes))

    def gram_operator(self, X, classes: ClassIndex, kernel, *, max_gram_bytes):
        """The kernel method's Gram operator of ``X`` (in memory, class-sorted).

        Dask: G's row blocks on the workers, cached up to ``max_gram_bytes`` as
        :func:`catdask.distributed.gram_options` says, or the products on the workers' GPUs
        with a device; a device: :class:`~catdask.operators.TorchGramOperator` (G recomputed);
        else numpy, G stored when it fits ``max_gram_bytes``.
        """
        if self.distributed:
            self._scope.enter_context(self.driver_blas_threads())
            if self.device is not None:
                from ..operators.dask_torch_gram import DaskTorchGramOperator  # an optional extra

                return self._own(DaskTorchGramOperator(X, classes, kernel,
                                                       worker_device=self.device))
            return self._own(DaskGramOperator(X, classes, kernel, max_gram_bytes=max_gram_bytes,
                                              **gram_cache_settings()))
        if self.device is not None:
            from ..operators.torch_gram import TorchGramOperator  # PyTorch is an optional extra

            return self._own(TorchGramOperator(X, classes, kernel, device=self.device))
        return self._own(NumpyGramOperator(X, classes, kernel, max_gram_bytes=max_gram_bytes))

    @staticmethod
    def precision_schedule(precision, operator) -> PrecisionSchedule:
        """The schedule of ``KernelCategorySpace(precision=...)`` on ``operator``.

        ``"auto"``: float32 tiles then the float64 polish where the products are recomputed by
        tiles (``operator.uses_tiles``: G not stored, a built-in kernel); float64 otherwise.
        """
        if precision == "auto" and operator.uses_tiles:
            return Float32ThenFloat64(operator)
        return FLOAT64
