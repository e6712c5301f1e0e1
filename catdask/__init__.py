"""catdask: category-space supervised dimensionality reduction on numpy or Dask.

Implements Smith & Rangarajan, "A Category Space Approach to Supervised Dimensionality
Reduction" (CQS, CAS and their kernel versions) with a global-optimality certificate for
every fit. See ``README.md`` and ``docs/``.
"""

from importlib.metadata import PackageNotFoundError, version

from .certificate import Certificate, certify_global_optimum
from .estimators import CategorySpace, KernelCategorySpace
from .plotting import plot_category_space

try:
    __version__ = version("catdask")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"

__all__ = [
    "CategorySpace",
    "KernelCategorySpace",
    "Certificate",
    "certify_global_optimum",
    "plot_category_space",
    "__version__",
]
