"""The ``catdask`` command line: ingest, train, evaluate, models, plot, serve, demo.

Exit codes: 0 success; 2 bad command line; 3 bad input or store problem (the message names it);
4 a model was not registered because it could not be certified; 1 anything unexpected.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

EXIT_OK, EXIT_UNEXPECTED, EXIT_USAGE, EXIT_INPUT, EXIT_UNCERTIFIED = 0, 1, 2, 3, 4

# Data sets the demo always has (they ship with scikit-learn) and the UCI ones it adds when
# their files are present (../shared/data/uci or $CATDASK_SOURCE_DIR).
DEMO_BUILTIN = ["iris", "wine"]
DEMO_UCI = ["seeds", "vehicle", "segmentation", "satellite"]
# The exact kernel method's demo runs only where N is small enough to take seconds.
DEMO_KERNEL_MAX_SAMPLES = 1000


def _console():
    from rich.console import Console

    return Console(stderr=True)


def _progress():
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                    TextColumn("{task.completed}/{task.total}"), TimeElapsedColumn(),
                    console=_console(), transient=False)


def _quiet_prefect():
    """Defaults for Prefect's embedded server (used when no PREFECT_API_URL is set)."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # The temporary local server needs 6-10 s to start (STACK.md); more on a loaded machine.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")


# ----------------------------------------------------------------------------- commands
def cmd_ingest(args):
    _quiet_prefect()
    from flows.ingest import ingest

    if args.file:
        from catdask.pipeline import ingest_file

        if not args.name or args.label_column is None:
            _usage_error("ingest", "--file needs --name and --label-column")
        label = int(args.label_column) if args.label_column.lstrip("-").isdigit() else args.label_column
        report = ingest_file(args.file, args.name, label, args.store, delimiter=args.delimiter)
        _print_json([report])
        return EXIT_OK
    from catdask.catalog import load_catalog

    names = sorted(load_catalog()) if args.all else args.names
    if not names:
        _usage_error("ingest", "name data sets (see `catdask datasets`), or --all, or --file")
    reports = ingest(names, store=args.store, source_dir=args.source_dir,
                     allow_download=args.download)
    _print_json(reports)
    return EXIT_OK


def _train_kwargs(args, dataset):
    return dict(dataset=dataset, method=args.method, origin=args.origin, n_restarts=args.restarts,
                gamma=args.gamma, standardise=not args.no_standardise, random_state=args.seed,
                model_name=args.name, store=args.store, scheduler=args.scheduler,
                allow_uncertified=args.allow_uncertified, run_key=args.run_key)


def cmd_train(args):
    _quiet_prefect()
    from flows.train import train

    result = train(**_train_kwargs(args, args.dataset))
    _print_json(result)
    if result["version"] is None:
        gap = "" if result["gap"] is None else f" (optimality gap <= {result['gap']:.3g})"
        print(f"not registered: {result['status']}{gap}; pass "
              "--allow-uncertified to register it marked as uncertified", file=sys.stderr)
        return EXIT_UNCERTIFIED
    return EXIT_OK


def cmd_evaluate(args):
    _quiet_prefect()
    from flows.evaluate import evaluate

    out = evaluate(datasets=args.datasets or None, n_splits=args.splits, quick=args.quick,
                   out_dir=args.out, store=args.store)
    _print_json(out)
    return EXIT_OK


def cmd_datasets(args):
    from catdask.catalog import load_catalog
    from catdask.store import list_datasets

    stored = {d.name: d for d in list_datasets(args.store)}
    rows = []
    for name, entry in sorted(load_catalog().items()):
        d = stored.get(name)
        rows.append({"name": name, "stored": d is not None,
                     "n_samples": getattr(d, "n_samples", None), "description": entry.description})
    rows += [{"name": n, "stored": True, "n_samples": d.n_samples, "description": "(not in catalog)"}
             for n, d in stored.items() if n not in {r["name"] for r in rows}]
    _print_table(rows)
    return EXIT_OK


def cmd_check(args):
    """Verify every stored data set and model version (checksums); optionally clean up first."""
    from catdask.errors import CatdaskError
    from catdask.store import (
        cleanup_temporaries,
        list_datasets,
        list_models,
        load_model_version,
        resolve_store,
        verify_dataset,
    )

    root = resolve_store(args.store)
    if not root.is_dir():
        raise FileNotFoundError(f"store {root} does not exist")
    rows = []
    if args.cleanup:
        for path in cleanup_temporaries(root, older_than_seconds=args.older_than):
            rows.append({"kind": "temporary", "name": str(path.relative_to(root)),
                         "status": "removed"})
    for d in list_datasets(root):
        try:
            problem = verify_dataset(root, d.name).problem
        except (CatdaskError, OSError, ValueError) as exc:
            problem = str(exc)
        rows.append({"kind": "data set", "name": d.name, "status": problem or "ok"})
    for v in list_models(root):
        problem = v.problem
        if problem is None:
            try:
                load_model_version(root, v.name, v.version, verify=True)
            except (CatdaskError, OSError, ValueError) as exc:
                problem = str(exc)
        rows.append({"kind": "model", "name": str(v), "status": problem or "ok"})
    _print_table(rows)
    bad = [r for r in rows if r["status"] not in ("ok", "removed")]
    if bad:
        print(f"catdask check: {len(bad)} damaged entries in {root}", file=sys.stderr)
        return EXIT_INPUT
    return EXIT_OK


def cmd_models(args):
    from catdask.store import compare_versions, list_models, load_model_version

    if args.models_cmd == "list":
        rows = [{"model": str(v), "dataset": v.meta.get("dataset"), "method": v.meta.get("class"),
                 "status": v.meta.get("registration_status"), "gap": v.meta.get("gap"),
                 "objective": v.meta.get("objective"), "created": v.created, "problem": v.problem}
                for v in list_models(args.store, args.name)]
        _print_table(rows)
    elif args.models_cmd == "show":
        name, version = _split_version(args.model)
        _, meta = load_model_version(args.store, name, version)
        _print_json(meta)
    else:
        _print_json(compare_versions(args.store, args.name, args.v1, args.v2))
    return EXIT_OK


def cmd_plot(args):
    from catdask.pipeline.reports import save_category_space_plot
    from catdask.store import load_estimator, load_model_version, read_dataset

    name, version = _split_version(args.model)
    _, meta = load_model_version(args.store, name, version)
    model = load_estimator(args.store, name, version)
    ds = read_dataset(args.store, args.dataset or meta["dataset"])
    out = args.out or f"{name}-v{meta['version']}.png"
    save_category_space_plot(model, ds.X, ds.y, out, title=f"{name} v{meta['version']} on {ds.name}")
    print(out)
    return EXIT_OK


def cmd_serve(args):
    from catdask.serve import serve

    serve(host=args.host, port=args.port, dask_dashboard_port=args.dask_dashboard_port,
          store=args.store)
    return EXIT_OK


def cmd_demo(args):
    """The README's main job: ingest, train linear and kernel models, certify, register."""
    _quiet_prefect()
    from catdask.catalog import locate_sources, get_entry
    from catdask.errors import SourceNotFoundError
    from flows.ingest import ingest
    from flows.train import train

    console = _console()
    names = list(DEMO_BUILTIN)
    for name in DEMO_UCI:
        try:
            locate_sources(get_entry(name), args.source_dir)
            names.append(name)
        except SourceNotFoundError as exc:
            console.print(f"[yellow]skipping {name}: {exc}[/yellow]")
    if args.quick:
        names = names[:2]
    console.print(f"store: {Path(args.store or os.environ.get('CATDASK_STORE', 'catdask-store')).resolve()}")
    from catdask.distributed import get_client

    with get_client(args.scheduler) as client:  # the embedded cluster stays up for the flows
        console.print(f"Dask scheduler: {client.scheduler.address}  "
                      f"dashboard: {client.dashboard_link}")
    console.print("Prefect: " + (os.environ.get("PREFECT_API_URL")
                                 or "temporary local server (set PREFECT_API_URL, or run "
                                    "`catdask serve`, to keep runs in a UI)"))
    with _progress() as progress:
        t = progress.add_task("ingest", total=len(names))
        reports = []
        for n in names:
            progress.update(t, description=f"ingest {n}")
            reports += ingest([n], store=args.store, source_dir=args.source_dir)
            progress.advance(t)
        linear_only = [r["name"] for r in reports if r["n_samples"] > DEMO_KERNEL_MAX_SAMPLES]
        jobs = [(r["name"], m) for r in reports for m in ("cqs", "kcqs")
                if m == "cqs" or r["name"] not in linear_only]
        t = progress.add_task("train", total=len(jobs))
        results = []
        for dataset, method in jobs:
            progress.update(t, description=f"train {method} on {dataset}")
            results.append(train(dataset=dataset, method=method, origin="global",
                                 n_restarts=args.restarts, store=args.store,
                                 scheduler=args.scheduler, allow_uncertified=True,
                                 run_key=f"demo:{dataset}:{method}"))
            progress.advance(t)
    rows = [{"dataset": r["dataset"], "method": r["method"], "version": r["version"],
             "certified": r["certified"], "gap": r["gap"], "objective": round(r["objective"], 6),
             "iterations": r["n_iter"], "fit_s": round(r["seconds"], 2),
             "svm_cv_acc": round(r["metrics"]["cv_accuracy_linear_svm_on_category_space"], 3),
             "plot": r["plot"]} for r in results]
    _print_table(rows)
    n_cert = sum(r["certified"] for r in results)
    if linear_only:
        console.print(f"K-CQS not trained on {', '.join(linear_only)} (more than "
                      f"{DEMO_KERNEL_MAX_SAMPLES} samples; the demo keeps to seconds per fit; "
                      "`catdask train <name> --method kcqs` fits it).")
    console.print(f"{len(results)} models registered, {n_cert} certified globally optimal; "
                  "the others are marked uncertified with their optimality gap.")
    return EXIT_OK


# ----------------------------------------------------------------------------- helpers
def _usage_error(command, message):
    """A command-line mistake found after parsing: exit code 2, as argparse's own errors."""
    print(f"catdask {command}: error: {message}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _split_version(spec):
    name, _, version = spec.partition(":")
    return name, (version or None)


def _print_json(obj):
    print(json.dumps(obj, indent=2, default=str))


def _print_table(rows):
    from rich.console import Console
    from rich.table import Table

    if not rows:
        print("(none)")
        return
    table = Table(show_lines=False)
    for col in rows[0]:
        table.add_column(str(col))
    for r in rows:
        table.add_row(*["" if v is None else (f"{v:.3g}" if isinstance(v, float) else str(v))
                        for v in r.values()])
    Console(width=200).print(table)


def build_parser():
    p = argparse.ArgumentParser(prog="catdask", description=__doc__.splitlines()[0])
    p.add_argument("--store", default=None,
                   help="store folder (default $CATDASK_STORE or ./catdask-store)")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress of long fits")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("ingest", help="ingest catalog data sets (or a CSV) into the store")
    s.add_argument("names", nargs="*")
    s.add_argument("--all", action="store_true", help="every catalog data set")
    s.add_argument("--source-dir", help="folder with the original files (offline use)")
    s.add_argument("--download", action="store_true", help="allow HTTPS downloads")
    s.add_argument("--file", help="a CSV/whitespace table to ingest instead of a catalog set")
    s.add_argument("--name", help="data-set name for --file")
    s.add_argument("--label-column", help="label column (name or index) for --file")
    s.add_argument("--delimiter", default=None)
    s.set_defaults(func=cmd_ingest)

    def add_train_options(s):
        s.add_argument("--method", default="cqs", choices=["cqs", "cas", "kcqs", "kcas"])
        s.add_argument("--origin", default="global", choices=["global", "class"])
        s.add_argument("--restarts", type=int, default=8)
        s.add_argument("--gamma", type=float, default=None, help="RBF gamma (kernel methods)")
        s.add_argument("--no-standardise", action="store_true")
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--name", default=None, help="model name (default DATASET-METHOD)")
        s.add_argument("--scheduler", default=None,
                       help="Dask scheduler address (default $CATDASK_SCHEDULER or a local cluster)")
        s.add_argument("--allow-uncertified", action="store_true",
                       help="register a model even if it cannot be certified (marked so)")
        s.add_argument("--run-key", default=None, help="idempotency key for the registration")

    s = sub.add_parser("train", help="fit with certified restarts and register the best model")
    s.add_argument("dataset")
    add_train_options(s)
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("evaluate", help="the paper's protocol on stored/catalog data sets")
    s.add_argument("datasets", nargs="*")
    s.add_argument("--splits", type=int, default=10)
    s.add_argument("--quick", action="store_true", help="two data sets, two splits")
    s.add_argument("--out", default="docs/results")
    s.set_defaults(func=cmd_evaluate)

    s = sub.add_parser("datasets", help="catalog and stored data sets")
    s.set_defaults(func=cmd_datasets)

    s = sub.add_parser("check", help="verify every data set and model version in the store "
                                     "(checksums); exit 3 if any is damaged")
    s.add_argument("--cleanup", action="store_true",
                   help="first remove temporaries left by crashed writers (and restore a data "
                        "set caught between two renames)")
    s.add_argument("--older-than", type=float, default=3600.0, metavar="SECONDS",
                   help="with --cleanup: only temporaries at least this old (default 3600; 0 "
                        "when no writer can be running)")
    s.set_defaults(func=cmd_check)
    s = sub.add_parser("models", help="list, show or compare registered models")
    msub = s.add_subparsers(dest="models_cmd", required=True)
    m = msub.add_parser("list")
    m.add_argument("name", nargs="?")
    m = msub.add_parser("show")
    m.add_argument("model", help="NAME or NAME:VERSION")
    m = msub.add_parser("compare")
    m.add_argument("name")
    m.add_argument("v1")
    m.add_argument("v2")
    s.set_defaults(func=cmd_models)

    s = sub.add_parser("plot", help="category-space plot of a registered model")
    s.add_argument("model", help="NAME or NAME:VERSION")
    s.add_argument("--dataset", default=None)
    s.add_argument("--out", default=None)
    s.set_defaults(func=cmd_plot)

    s = sub.add_parser("serve", help="Prefect server + served deployments + local Dask cluster")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=int, default=4200)
    s.add_argument("--dask-dashboard-port", type=int, default=8787)
    s.set_defaults(func=cmd_serve)

    s = sub.add_parser("demo", help="the main job end to end on the embedded defaults")
    s.add_argument("--source-dir", default=None)
    s.add_argument("--restarts", type=int, default=8)
    s.add_argument("--scheduler", default=None)
    s.add_argument("--quick", action="store_true", help="iris and wine only")
    s.set_defaults(func=cmd_demo)
    # --store also after the command (`catdask ingest iris --store X`); SUPPRESS keeps a
    # --store given before the command when it is not repeated.
    for s in [*sub.choices.values(), *msub.choices.values()]:
        s.add_argument("--store", default=argparse.SUPPRESS,
                       help="store folder (default $CATDASK_STORE or ./catdask-store)")
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    if not args.verbose:  # distributed logs every worker start and stop at INFO on its own;
        # read when distributed is imported, and inherited by the worker processes
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")
    from catdask.errors import CatdaskError

    try:
        return args.func(args)
    except (CatdaskError, ValueError, FileNotFoundError, KeyError,
            NotADirectoryError, IsADirectoryError, FileExistsError, PermissionError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"catdask {args.command}: error: {msg}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


def run():
    """Console-script entry point."""
    sys.exit(main())
