"""What this host lets the process use: cores and memory, as Dask itself counts them."""

from __future__ import annotations


def usable_cores() -> int:
    """Cores this process may use (``dask.system.CPU_COUNT``; at least 1)."""
    from dask.system import CPU_COUNT

    return max(1, int(CPU_COUNT))


def usable_memory_bytes() -> int:
    """Memory this process may use in all (``distributed.system.MEMORY_LIMIT``)."""
    from distributed.system import MEMORY_LIMIT

    return int(MEMORY_LIMIT)


def available_memory_bytes() -> int:
    """Memory free now: the host's available memory, at most :func:`usable_memory_bytes`."""
    import psutil

    return int(min(psutil.virtual_memory().available, usable_memory_bytes()))


def limit_blas_threads(n=1):
    """Limit BLAS/OpenMP pools of the calling process to ``n`` threads (run on each worker)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n)
    return n
