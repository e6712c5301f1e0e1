"""What a Dask worker costs before it holds data: its imports, and the embedded cluster's shape.

Measured on a 16-core host (benchmarks/bench_device.py, 2026-11-27, N = 50,000): 16
single-thread worker processes with their nannies held 2.92 GiB, 8 processes of 2 threads
1.78 GiB at the same speed (4 of 4: 1.20 GiB, 25% slower); an idle worker that imported scikit-learn (with SciPy's stats and pandas) was 226 MiB,
without it 95 MiB.
"""

from __future__ import annotations

import subprocess
import sys

from catdask.distributed.cluster import default_threads_per_worker


def test_worker_imports_leave_out_scikit_learn():
    """The modules a worker imports as it starts (catdask.operators adds them) and unpickles
    in every Gram task do not import scikit-learn or pandas, nor SciPy's linear algebra or
    dask.array (issue 27: 6 and 25 MiB of RSS in every worker process)."""
    code = ("import sys, catdask.kernels, catdask.operators.blocks, catdask.operators.dask_gram;"
            "print(sorted(m for m in ('sklearn', 'pandas', 'torch', 'scipy.linalg', "
            "'dask.array') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.strip()
    assert out == "[]"


def test_default_threads_per_worker():
    assert [default_threads_per_worker(c) for c in (1, 2, 7, 8, 16, 64)] == [1, 1, 1, 2, 2, 2]
