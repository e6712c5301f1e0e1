"""Run every ``benchmarks/bench_*.py`` in its own process and print the results.

    python benchmarks/run_all.py            # full sizes (about 9 minutes on 2 cores)
    python benchmarks/run_all.py --quick    # small sizes, a few minutes
    python benchmarks/run_all.py --only kernel_vs_paper linear
    python benchmarks/run_all.py --json-dir benchmarks/results

Each benchmark runs in a fresh interpreter (clean peak-memory figures, its own Dask cluster).
The machine's load average is printed before and after each: the benchmarks measure ratios
within one run, but a busy machine still adds noise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="*", help="names without the bench_ prefix")
    ap.add_argument("--json-dir", type=Path)
    args = ap.parse_args()
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.only:
        scripts = [s for s in scripts if s.stem.removeprefix("bench_") in args.only]
    failed = []
    for script in scripts:
        cmd = [sys.executable, str(script)] + (["--quick"] if args.quick else [])
        if args.json_dir:
            cmd += ["--json", str(args.json_dir / f"{script.stem}.json")]
        print(f"\n### {script.name}  (load average {os.getloadavg()[0]:.2f})", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd, cwd=HERE)
        print(f"### {script.name}: exit {rc} after {time.perf_counter() - t0:.0f} s", flush=True)
        if rc:
            failed.append(script.name)
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
