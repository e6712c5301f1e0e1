"""Kernel functions and the low-rank Gram factor.

- ``functions``: RBF, linear, polynomial or a user callable, as small picklable objects that are
  shipped to Dask workers.
- ``gram_factor``: ``G ~= L L^T`` by pivoted Cholesky (landmarks and the kernel certificate).
"""

from .functions import Kernel, make_kernel

__all__ = ["Kernel", "make_kernel"]
