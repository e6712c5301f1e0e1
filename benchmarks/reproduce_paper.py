"""Regenerate every table and figure of Smith & Rangarajan's experiments.

    python benchmarks/reproduce_paper.py            # Tables 1-3 on all data sets, 10 splits, figures
    python benchmarks/reproduce_paper.py --quick    # wine + iris, 2 splits (under a minute)
    python benchmarks/reproduce_paper.py --datasets thyroid vertebral --merge
                                                    # add/redo data sets in the written tables

Writes, under --out (default docs/results/): table1/2/3 .csv/.md/.json (ours mean ± std, the
paper's number, the difference); the paper's Figures 1-3 as PNGs under --figures-dir (default
docs/figures/; with --quick or --out: <out>/figures/). docs/reproduction.md holds the
hand-written explanations and is never written. Data sets whose files are not available are
skipped with a printed message and listed in the tables. With ``--merge`` the data sets run
replace their rows (or skip notes) in the tables already under --out, which must have been made
with the same protocol settings; the figures are then drawn for every paper data set, since
each figure is one grid over all of them.

Wall time on 2 shared cores (10 splits): Table 1 about 3.5 min for the six larger sets and
0.5 min for thyroid + vertebral; Tables 2 and 3 about 16 min each for the six, plus several
minutes for the two (see each table's Settings line, which records every run's time).
The protocol is documented in catdask/evaluation/protocol.py, the methods in
catdask/evaluation/compared_methods.py, the tables' settings in catdask/evaluation/experiments.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from catdask.evaluation.data import PAPER_DATASETS  # noqa: E402
from catdask.evaluation.figures import SIGMAS, paper_figures  # noqa: E402
from catdask.evaluation.compared_methods import (  # noqa: E402
    PROTOCOL_TOL,
    SELECT_RESTARTS,
    paper_methods,
)
from catdask.evaluation.experiments import paper_experiments, run_experiment  # noqa: E402
from catdask.evaluation.results_io import merge_experiments, read_experiment  # noqa: E402
from catdask.evaluation.tables import repository_relative, write_experiment  # noqa: E402

QUICK_DATASETS = ("wine", "iris")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help=f"smoke run: {', '.join(QUICK_DATASETS)} with 2 splits, 2 restarts "
                        "(1 in the inner CV), one sigma")
    p.add_argument("--datasets", nargs="+", default=None,
                   help=f"data sets (default: all of {', '.join(PAPER_DATASETS)})")
    p.add_argument("--tables", nargs="+", default=["table1", "table2", "table3"],
                   choices=["table1", "table2", "table3"])
    p.add_argument("--splits", type=int, default=None, help="outer splits (default 10; quick 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--inner-folds", type=int, default=3)
    p.add_argument("--n-restarts", type=int, default=None,
                   help="category-space restarts in the final refit on each training part "
                        "(default 5; quick 2)")
    p.add_argument("--select-restarts", type=int, default=None,
                   help="category-space restarts per fit inside the inner CV (default "
                        f"{SELECT_RESTARTS}; quick 1; 0 means --n-restarts)")
    p.add_argument("--tol", type=float, default=PROTOCOL_TOL,
                   help=f"category-space stopping tolerance (default {PROTOCOL_TOL:g}; the "
                        "paper's is 1e-8)")
    p.add_argument("--kernel-splits", type=int, default=None,
                   help="outer splits for the kernel tables 2-3 (default: --splits)")
    p.add_argument("--kernel-max-samples", type=int, default=2000,
                   help="subsample larger data sets in the kernel tables (satellite)")
    p.add_argument("--n-jobs", type=int, default=1, help="outer splits in parallel (default 1)")
    p.add_argument("--preprocessing", default=None,
                   choices=["none", "centre", "standardise", "minmax"],
                   help="override every table's preprocessing (default: per table, see "
                        "catdask.evaluation.experiments.paper_experiments)")
    p.add_argument("--merge", action="store_true",
                   help="merge the data sets run into the tables already under --out "
                        "(replacing their rows) instead of overwriting the tables")
    p.add_argument("--no-figures", action="store_true")
    p.add_argument("--figures-dir", type=Path, default=None,
                   help="PNG folder (default docs/figures; --quick or --out: <out>/figures)")
    p.add_argument("--out", type=Path, default=None,
                   help="results folder (default docs/results; --quick: docs/results/quick)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    datasets = args.datasets or (QUICK_DATASETS if args.quick else PAPER_DATASETS)
    n_splits = args.splits or (2 if args.quick else 10)
    default_out = REPO / "docs" / "results"
    out = args.out or (default_out / "quick" if args.quick else default_out)
    print(f"Reproducing {', '.join(args.tables)} on {', '.join(datasets)}: {n_splits} splits, "
          f"seed {args.seed}, results in {out}", flush=True)
    start = time.perf_counter()

    def progress(msg):
        print(f"[{time.perf_counter() - start:8.1f} s] {msg}", flush=True)

    n_restarts = args.n_restarts or (2 if args.quick else 5)
    select_restarts = (1 if args.quick else SELECT_RESTARTS) if args.select_restarts is None \
        else (args.select_restarts or n_restarts)
    methods = paper_methods(n_restarts=n_restarts, select_restarts=select_restarts,
                            tol=args.tol)
    experiments = paper_experiments(kernel_max_samples=args.kernel_max_samples)
    settings = dict(tol=args.tol, n_restarts=n_restarts, select_restarts=select_restarts)
    for key in args.tables:
        exp = experiments[key]
        if args.preprocessing:
            exp = dataclasses.replace(exp, preprocessing=args.preprocessing)
        splits = n_splits if key == "table1" else (args.kernel_splits or n_splits)
        progress(f"{key}: {exp.title} (preprocessing: {exp.preprocessing}, {splits} splits)")
        res = run_experiment(exp, datasets, methods=methods, n_splits=splits,
                             random_state=args.seed, inner_folds=args.inner_folds,
                             n_jobs=args.n_jobs, progress=progress, settings=settings)
        previous = out / f"{key}.json"
        if args.merge and previous.exists():
            res = merge_experiments(read_experiment(previous, exp), res)
            progress(f"{key}: merged {', '.join(datasets)} into {previous.name}")
        paths = write_experiment(res, out)
        progress(f"{key}: {res.settings['seconds']:.0f} s; wrote "
                 f"{repository_relative(str(paths['csv'].resolve()))} and "
                 f"{repository_relative(str(paths['md'].resolve()))}")

    figures = []
    if not args.no_figures:
        sigmas = {"medium": SIGMAS["medium"]} if args.quick else SIGMAS
        custom = args.quick or out.resolve() != default_out.resolve()
        fig_dir = args.figures_dir or (out / "figures" if custom else REPO / "docs" / "figures")
        t0 = time.perf_counter()
        figure_sets = PAPER_DATASETS if args.merge else datasets
        figures = paper_figures(figure_sets, fig_dir, sigmas=sigmas, progress=progress,
                                random_state=args.seed, n_restarts=1 if args.quick else 3)
        progress(f"figures: {time.perf_counter() - t0:.0f} s")

    for path in figures:
        progress(f"figure: {repository_relative(str(Path(path).resolve()))}")
    progress("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
