"""Benchmark: table ingest (parse a CSV to X, y) against ``pandas.read_csv`` on the same file.

Generates a CSV of 200 000 rows x 31 columns (30 float features with 5 decimals and an
integer label, a header line; about 50 MB) in a temporary folder, then times
``pandas.read_csv(path)`` and catdask's ``parse_table(path, "label")`` (the parse behind
``catdask ingest --file``: a streaming checksum and UTF-8 scan, then pandas' C parser, in one
read of the path for a file up to 256 MiB (which pandas 3.1 splits over threads, as it does
for the baseline) or in bounded chunks beyond, checks, line/column errors),
each in a fresh interpreter, alternating, three times each (imports happen before the clock
starts, pandas' included, which catdask imports lazily on its first parse). Reports the
medians of the wall time of the call and of the peak RSS of the child (``resource.getrusage``
maxrss), both as a whole and above the child's RSS after its imports (catdask imports more than
pandas), the ratios catdask / pandas and the load average. Goal (issue 12 item 9): both
ratios <= 2 (issue figures before: 16.2 s / 777 MiB against 1.45 s / 218 MiB).

    python benchmarks/bench_ingest.py [--quick] [--json PATH]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from _common import REPO, load_average, parse_args, report

N_ROWS, N_FEATURES, N_CLASSES = 200_000, 30, 5
REPEATS = 3

# Run in a child: import, note the peak RSS so far, run the parse, print the figures as JSON.
CHILD = """
import json, resource, sys, time
which, path = sys.argv[1], sys.argv[2]
if which == "pandas":
    import pandas as pd
    run = lambda: pd.read_csv(path)
else:
    import pandas, psutil  # catdask imports them lazily, on the first parse: not parse time
    from catdask.catalog import parse_table
    run = lambda: parse_table(path, "label")
after_import = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
run()
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": seconds, "peak_kib": peak, "import_kib": after_import}))
"""


def write_csv(path: Path, n_rows: int) -> None:
    """Random features (5 decimals) and integer labels, with a header, written in blocks."""
    rng = np.random.default_rng(0)
    header = ",".join([f"f{i}" for i in range(N_FEATURES)] + ["label"])
    with open(path, "w") as out:
        out.write(header + "\n")
        for start in range(0, n_rows, 50_000):
            rows = min(50_000, n_rows - start)
            block = np.column_stack(
                [rng.standard_normal((rows, N_FEATURES)), rng.integers(0, N_CLASSES, rows)]
            )
            np.savetxt(out, block, delimiter=",", fmt=["%.5f"] * N_FEATURES + ["%d"])


def run_child(which: str, path: Path) -> dict:
    cmd = [sys.executable, "-c", CHILD, which, str(path)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's catdask
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    args = parse_args(__doc__)
    n_rows = N_ROWS // 10 if args.quick else N_ROWS
    results = {"n_rows": n_rows, "n_columns": N_FEATURES + 1, "load_average_start": load_average()}
    runs = {"pandas": [], "catdask": []}
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        path = Path(tmp) / "table.csv"
        write_csv(path, n_rows)
        results["file_MB"] = round(path.stat().st_size / 1e6, 1)
        for _ in range(REPEATS):  # interleaved, so load changes hit both sides alike
            for which in runs:
                runs[which].append(run_child(which, path))
    for which, rs in runs.items():
        results[f"{which}_s"] = round(statistics.median(r["seconds"] for r in rs), 3)
        results[f"{which}_peak_MiB"] = round(statistics.median(r["peak_kib"] for r in rs) / 1024, 1)
        results[f"{which}_above_import_MiB"] = round(
            statistics.median((r["peak_kib"] - r["import_kib"]) for r in rs) / 1024, 1
        )
    results["time_ratio"] = round(results["catdask_s"] / results["pandas_s"], 2)
    results["peak_ratio"] = round(results["catdask_peak_MiB"] / results["pandas_peak_MiB"], 2)
    results["above_import_ratio"] = round(
        results["catdask_above_import_MiB"] / max(results["pandas_above_import_MiB"], 1e-9), 2
    )
    print(
        f"{n_rows} x {N_FEATURES + 1} CSV ({results['file_MB']} MB), medians of {REPEATS}: "
        f"pandas.read_csv {results['pandas_s']:.2f} s / {results['pandas_peak_MiB']} MiB; "
        f"catdask parse_table {results['catdask_s']:.2f} s / {results['catdask_peak_MiB']} MiB "
        f"(time x{results['time_ratio']}, peak x{results['peak_ratio']}, "
        f"above imports x{results['above_import_ratio']})"
    )
    report("table ingest vs pandas.read_csv", results, args)


if __name__ == "__main__":
    main()
