"""``catdask demo``: the README's main job (ingest, train linear and kernel models, certify,
register) on the embedded defaults."""

from __future__ import annotations

from catdask import settings

from . import checks, runtime, writable
from .exits import EXIT_OK
from .output import console, print_table, progress

# Data sets the demo always has (shipped with scikit-learn) and the UCI ones it adds when their
# files are found.
DEMO_BUILTIN = ["iris", "wine"]
DEMO_UCI = ["seeds", "vehicle", "segmentation", "satellite"]
# The exact kernel method's demo runs only where N is small enough to take seconds.
DEMO_KERNEL_MAX_SAMPLES = 1000


def _available_datasets(source_dir, notes, quick: bool) -> list[str]:
    """The built-in sets, plus the UCI ones whose files are found (not looked for with
    ``quick``); one note names the missing ones and where to put them."""
    from catdask.catalog import get_entry, locate_sources
    from catdask.errors import SourceNotFoundError

    names = list(DEMO_BUILTIN)
    if quick:
        return names
    missing = []
    for name in DEMO_UCI:
        try:
            locate_sources(get_entry(name), source_dir)
            names.append(name)
        except SourceNotFoundError:
            missing.append(name)
    if missing:
        notes.print(f"skipping {', '.join(missing)}: their UCI files were not found (point "
                    "--source-dir or $CATDASK_SOURCE_DIR at a folder holding them)",
                    highlight=False)
    return names


def _action(r: dict) -> str:
    """What the demo did for one model: fitted it, reused a registered version (nothing
    fitted), or registered a kept fit that an earlier policy rejected."""
    if r["version"] is None:
        return "rejected"
    if not r.get("cached"):
        return "fitted"
    return "reused" if r.get("reused") == "registered" else "kept fit registered"


def _summary_row(r: dict) -> dict:
    # The essential columns first (a narrow terminal leaves out the rightmost ones). train_acc is
    # in-sample; cv_acc the model's predict cross-validated; linsvc_on_coords_cv a LinearSVC
    # cross-validated on the coordinates; fit_s the fit's time, also for a reused version.
    metrics = r["metrics"]
    cv = metrics.get("cv_accuracy_predict")  # None or NaN: the metrics say why (missing)
    return {"model": r["version"] or f"{r['dataset']}-{r['method']} (not registered)",
            "action": _action(r), "certified": r["certified"],
            "gap": r["gap"], "cv_acc": round(cv, 3) if cv is not None and cv == cv else None,
            "train_acc": round(metrics["train_accuracy_predict"], 3),
            "fit_s": round(r["fit_seconds"], 2), "iterations": r["n_iter"],
            "objective": round(r["objective"], 6),
            "linsvc_on_coords_cv": round(metrics["cv_accuracy_linear_svm_on_category_space"], 3),
            "plot": r["plot"]}


def _outcome_line(results: list[dict]) -> str:
    """What the demo registered, reused or refused, and how many are certified."""
    count = {a: sum(_action(r) == a for r in results)
             for a in ("fitted", "reused", "kept fit registered", "rejected")}
    n_cert = sum(r["certified"] for r in results)
    if count["reused"] == len(results):
        head = (f"nothing fitted: all {len(results)} models were registered already with the "
                "same data, spec and code (reused)")
    else:
        parts = [f"{count['fitted']} fitted and registered"]
        parts += [f"{n} {a}" for a, n in count.items() if a != "fitted" and n]
        head = f"{len(results)} models: {', '.join(parts)}"
    others = ("" if n_cert == len(results)
              else "; the others are registered marked uncertified, with their optimality gap")
    return f"{head}; {n_cert} certified globally optimal{others}."


def cmd_demo(args) -> int:
    """Ingest the demo data sets, train CQS on each and K-CQS on the small ones."""
    from catdask.store.root import open_store

    address = runtime.scheduler_address(args.scheduler)
    runtime.check_scheduler(address)
    runtime.check_prefect_api()
    checks.check_source_dir(args.source_dir)
    writable.check_store_writable(args.store, "`catdask demo` ingests, trains and plots",
                                ["datasets", "models", "plots", ".prefect"])
    notes = console()
    names = _available_datasets(args.source_dir, notes, args.quick)
    notes.print(f"store: {open_store(args.store).url}")
    runtime.prepare_prefect(args.store)
    from catdask.orchestration.ingest import ingest
    from catdask.orchestration.train import run_train

    ingest, train = runtime.flow(ingest), runtime.flow(run_train)
    with runtime.dask_client(address) as client:  # the embedded cluster stays up for the flows
        notes.print(f"Dask scheduler: {client.scheduler.address}  "
                    f"dashboard: {client.dashboard_link}")
    notes.print("Prefect: " + (settings.PREFECT_API_URL.get()
                               or "temporary local server (set PREFECT_API_URL, or run "
                                  "`catdask serve`, to keep runs in a UI)"))
    restarts = {} if args.restarts is None else {"n_restarts": args.restarts}
    with runtime.prefect_server("demo"), progress("demo") as bar:
        step = bar.step("ingest", total=len(names))
        reports = []
        for n in names:
            bar.update(step, f"ingest {n}")
            reports += ingest([n], store=args.store, source_dir=args.source_dir)
            bar.advance(step)
        bar.done(step)
        linear_only = [r["name"] for r in reports if r["n_samples"] > DEMO_KERNEL_MAX_SAMPLES]
        jobs = [(r["name"], m) for r in reports for m in ("cqs", "kcqs")
                if m == "cqs" or r["name"] not in linear_only]
        step = bar.step("train", total=len(jobs))
        results = []
        for dataset, method in jobs:
            bar.update(step, f"train {method} on {dataset}")
            # No run key: the train cache makes a second demo reuse every version (any
            # policy, any version of the same data, spec and code), and a changed catdask or
            # data set registers a new version rather than hand back the old one.
            results.append(train(dataset=dataset, method=method, store=args.store,
                                 scheduler=args.scheduler, allow_uncertified=True,
                                 **restarts))
            bar.advance(step)
        bar.done(step)
    print_table([_summary_row(r) for r in results])
    if linear_only:
        notes.print(f"K-CQS not trained on {', '.join(linear_only)} (more than "
                    f"{DEMO_KERNEL_MAX_SAMPLES} samples; the demo keeps to seconds per fit; "
                    "`catdask train <name> --method kcqs` fits it).")
    notes.print(_outcome_line(results) + " Next: `catdask models list`, `catdask plot MODEL`, "
                "`catdask predict MODEL new.csv`, `catdask serve` for the UI.",
                highlight=False)
    return EXIT_OK
