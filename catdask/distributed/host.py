"""What this host lets the process use: cores and memory, as Dask itself counts them.

``os.cpu_count()`` and ``psutil.virtual_memory()`` report the whole machine. In a container
started with ``--cpus=4 --memory=8g`` on a 64-core, 256 GiB host they say 64 and 256 GiB,
and a cluster sized from them would start 32 worker processes that share 4 cores and run out
of memory. Dask's ``dask.system.CPU_COUNT`` takes the least of the host's cores, the process's
CPU affinity (``taskset``) and a cgroup CPU quota, and ``distributed.system.MEMORY_LIMIT`` the
least of the host's memory, a cgroup memory limit and ``RLIMIT_RSS``: LocalCluster sizes its
own defaults from them, and so does catdask.
"""

from __future__ import annotations

__all__ = ["usable_cores", "usable_memory_bytes", "available_memory_bytes", "limit_blas_threads"]


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
