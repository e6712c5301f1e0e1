"""scikit-learn estimators: :class:`CategorySpace` (linear) and :class:`KernelCategorySpace`."""

from .kernel import KernelCategorySpace
from .linear import CategorySpace

__all__ = ["CategorySpace", "ESTIMATOR_CLASSES", "KernelCategorySpace"]

#: The estimator classes by class name, as model files record them (:mod:`catdask.model_io`).
ESTIMATOR_CLASSES = {cls.__name__: cls for cls in (CategorySpace, KernelCategorySpace)}
