"""Cores and memory are counted as Dask counts them: a container's CPU quota and memory limit,
not the whole host (catdask/distributed/host.py)."""

from __future__ import annotations

import os

import dask.system
import distributed
import distributed.system

from catdask.distributed import host
from catdask.distributed.cluster import default_threads_per_worker
from catdask.distributed.execute import cluster_resources
from catdask.serve import default_run_limit


def _container(monkeypatch, cores, memory_bytes):
    """A process limited to ``cores`` and ``memory_bytes`` on a 64-core, 256 GiB host."""
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(dask.system, "CPU_COUNT", cores)
    monkeypatch.setattr(distributed.system, "MEMORY_LIMIT", memory_bytes)


def _no_client():
    raise ValueError("No clients found")


def test_a_container_limit_sizes_the_defaults(monkeypatch):
    GiB = 2**30
    _container(monkeypatch, 4, 6 * GiB)
    assert host.usable_cores() == 4
    assert default_threads_per_worker() == 1  # 4 cores: single-thread processes, not 64's 2
    assert host.usable_memory_bytes() == 6 * GiB
    assert host.available_memory_bytes() <= 6 * GiB
    assert default_run_limit() == 3  # min(4 cores, 6 GiB // 2 GiB per run), not 64
    monkeypatch.setattr(distributed, "default_client", _no_client)
    threads, memory = cluster_resources()  # no Dask client: this process's share
    assert threads == 4 and memory <= 6 * GiB
    _container(monkeypatch, 16, 256 * GiB)
    assert default_threads_per_worker() == 2 and default_run_limit() == 16
