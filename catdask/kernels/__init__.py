"""Kernel functions and the low-rank Gram factor."""

from .functions import Kernel, make_kernel

__all__ = ["Kernel", "make_kernel"]
