"""catdask: category-space supervised dimensionality reduction on numpy or Dask."""

# First, so that ``versions.IMPORTED_AT_NS`` is when this process imported catdask (the Dask
# workers' check that their sources were not upgraded under them, ``distributed.worker_check``).
from .versions import installed_version

from .lazy import lazy_attributes


__version__ = installed_version()

# The public names load on first use (PEP 562), so `import catdask.catalog` (the CLI's fast
# path: argument checks before any heavy import) does not pay for scikit-learn and SciPy.
_LAZY = {
    "CategorySpace": ".estimators",
    "KernelCategorySpace": ".estimators",
    "Certificate": ".certificate",
    "certify_global_optimum": ".certificate",
    "plot_category_space": ".plotting",
}
__all__ = [*_LAZY, "__version__"]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, globals())
