"""catdask: category-space supervised dimensionality reduction on numpy or Dask.

Implements Smith & Rangarajan, "A Category Space Approach to Supervised Dimensionality
Reduction" (CQS, CAS and their kernel versions) with a global-optimality certificate for
every fit. See ``README.md`` and ``docs/``.
"""

from importlib.metadata import PackageNotFoundError, version

from .estimators import CategorySpace, KernelCategorySpace

try:
    __version__ = version("catdask")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = ["CategorySpace", "KernelCategorySpace", "__version__"]
