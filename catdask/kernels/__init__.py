"""Kernel functions and the low-rank Gram factor.

- ``functions``: RBF, linear, polynomial or a user callable, as small picklable objects that are
  shipped to Dask workers.
- ``gram_factor``: ``G ~= L L^T`` by pivoted Cholesky (landmarks and the kernel certificate).
"""

from .functions import Kernel, make_kernel, rbf_gram, rbf_kernel
from .gram_factor import pivoted_cholesky

__all__ = ["Kernel", "make_kernel", "pivoted_cholesky", "rbf_gram", "rbf_kernel"]
