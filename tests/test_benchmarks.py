"""The benchmark scripts still run: ``benchmarks/run_all.py --quick`` end to end.

Timings are not checked here (benchmarks print ratios; a test on a shared CI machine cannot
judge them). What is checked is what the scripts themselves assert and record: each exits 0,
writes its JSON, and the measured quantities that must hold at any speed do hold (the kernel
update reaches the paper's objective, numpy and Dask backends agree).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("bench_*.py"))


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run_all.py"), "--quick", "--json-dir", str(out)],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_benchmark_runs_and_reports(quick_results):
    assert SCRIPTS, "no benchmark scripts found"
    assert sorted(quick_results) == SCRIPTS
    for name, result in quick_results.items():
        assert result["quick"] is True, name


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_benchmarks_measure_the_same_optimum_on_every_path(quick_results):
    for row in quick_results["bench_kernel_vs_paper"]["rows"]:
        assert row["iterations"]["numpy"] == row["iterations"]["paper"]
        assert row["objective_rel_diff_paper"] <= 1e-9
        assert row["objective_rel_diff_dask"] <= 1e-9
        assert row["objective_rel_diff_accelerated"] <= 1e-9
        assert row["accelerated_iterations"] < row["iterations"]["numpy"]
    # Issue 40: the fit from an S3 store and from a local store on the same workers.
    assert quick_results["bench_cluster_s3_vs_local"]["objectives_agree_to_1e-9"]
    linear = quick_results["bench_linear"]["in_memory"]
    assert linear["objective_rel_diff_numpy_dask"] <= 1e-9
    for row in quick_results["bench_warm_start"]["rows"]:
        # The warm start is a start: it must reach the same optimum, whatever it saves.
        assert row["objective rel diff"] <= 1e-9
        assert row["residual/trG"] <= 1e-3
