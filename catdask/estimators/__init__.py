"""scikit-learn estimators: :class:`CategorySpace` (linear) and :class:`KernelCategorySpace`."""

from .kernel import KernelCategorySpace
from .linear import CategorySpace

__all__ = ["CategorySpace", "KernelCategorySpace"]
