"""Commands that run Prefect flows (``ingest``, ``train``, ``evaluate``, ``demo``) or start
services (``serve``). Each checks its arguments first (:mod:`.checks`, no heavy import), then
prepares Prefect's environment (:mod:`.runtime`), then imports and runs the flow.
"""

from __future__ import annotations

import shlex
import sys
from datetime import datetime, timezone
from pathlib import Path

from . import checks, device_checks, runtime, writable
from .exits import EXIT_OK, EXIT_UNCERTIFIED, CliError, usage_error
from .output import note, print_json, progress


#: What ``ingest`` and ``train`` write in the store, for the error on a store they cannot write.
INGEST_WRITES = "`catdask ingest` writes data sets"
TRAIN_WRITES = "`catdask train` registers models and writes plots"


def _label_column(text: str):
    return int(text) if text.lstrip("-").isdigit() else text


def _ingest_file(args) -> list[dict]:
    """``ingest --file``: one table, no flow (and so no Prefect)."""
    if args.name is not None and not args.name.strip():
        raise usage_error("argument --name: the data-set name is empty")
    args.name = checks.file_dataset_name(args.file, args.name)
    checks.check_table_file(args.file, args.name)
    if args.label_column is None:
        raise usage_error(f"{args.file}: which column holds the class labels? Say it with "
                          f"--label-column ({_columns_hint(args.file, args.delimiter)})")
    features = _feature_columns(args.feature_columns)
    writable.check_store_writable(args.store, INGEST_WRITES, ["datasets"])
    from catdask.errors import ParseError
    from catdask.pipeline import ingest_file

    label = _label_column(args.label_column)
    try:
        return [ingest_file(args.file, args.name, label, args.store, delimiter=args.delimiter,
                            feature_columns=features, replace=args.replace)]
    except ParseError as exc:
        if exc.non_numeric and exc.column is not None:
            raise CliError(f"{exc}; {_leave_out_hint(args, label, features, exc.column)}") \
                from None
        raise


def _feature_columns(text):
    """``--feature-columns a,b,3`` -> ``["a", "b", 3]`` (None when not given)."""
    if text is None:
        return None
    columns = [_label_column(c.strip()) for c in text.split(",")]
    if not all(str(c) for c in columns):
        raise usage_error(f"argument --feature-columns: {text!r} has an empty name; give "
                          "comma-separated column names or 0-based indices, e.g. a,b,c")
    return columns


def _leave_out_hint(args, label, features, column: int) -> str:
    """How to train without a non-numeric column: the --feature-columns that leave it out (by
    name with a header, else by index), or encoding it first."""
    from catdask.catalog.assembly import table_columns
    from catdask.catalog.lines import resolve_column

    header, n_columns = table_columns(args.file, delimiter=args.delimiter)
    names = header or list(range(n_columns))

    def index(c):
        return resolve_column(c, n_columns, header, args.file, "column")

    kept = ([c for c in range(n_columns) if c != index(label)] if features is None
            else [index(c) for c in features])
    rest = shlex.quote(",".join(str(names[c]) for c in kept if c != column))
    return ("catdask trains on numbers only: encode that column as numbers first"
            + (f", or leave it out with --feature-columns {rest}" if rest != "''" else ""))


def _columns_hint(path, delimiter) -> str:
    """``its columns: a, b, species; e.g. --label-column species`` (or indices without a
    header), for the error on a missing --label-column."""
    from catdask.catalog.assembly import table_columns

    header, n_columns = table_columns(path, delimiter=delimiter)
    if header is None:
        return (f"no header: a 0-based index, 0 to {n_columns - 1}; e.g. --label-column "
                f"{n_columns - 1} for the last")
    last = header[-1] if " " not in header[-1] else f"'{header[-1]}'"
    return f"its columns: {', '.join(header)}; e.g. --label-column {last}"


def _ingest_catalog(args) -> list[dict]:
    """``ingest NAME ...`` / ``--all``: one ingest flow run per catalog data set."""
    names = checks.catalog_names() if args.all else args.names
    if not names:
        raise usage_error("name data sets (see `catdask datasets`), or --all, or --file")
    checks.check_catalog_names(names)
    checks.check_sources_available(names, args.source_dir, args.store, args.download)
    writable.check_store_writable(args.store, INGEST_WRITES, ["datasets", ".prefect"])
    runtime.check_prefect_api()
    runtime.prepare_prefect(args.store)
    from catdask.orchestration.ingest import ingest  # Prefect: after the checks

    ingest = runtime.flow(ingest)
    reports = []
    with runtime.prefect_server("ingest"), progress("ingest") as bar:
        step = bar.step("ingest", total=len(names))
        for name in names:
            bar.update(step, f"ingest {name}")
            reports += ingest([name], store=args.store, source_dir=args.source_dir,
                              allow_download=args.download, replace=args.replace)
            bar.advance(step)
        bar.done(step, f"({len(names)} data set{'s' * (len(names) != 1)})")
    return reports


def ingest_summary(report: dict) -> str:
    """One line for a person about one ingested data set, e.g. ``iris: stored as snapshot s1
    (150 x 4, 3 classes)``, ``iris: unchanged (same content as s1)``, or ``iris: replaced: now
    snapshot s1 again, ...`` when a stored snapshot already held the new content."""
    shape = (f"{report['n_samples']} x {report['n_features']}, {report['n_classes']} classes")
    snapshot = report.get("snapshot")
    if not report.get("written") and report.get("replaced"):
        return (f"{report['name']}: replaced: now snapshot {snapshot} again, which already held "
                f"this content (nothing written; {shape})")
    if not report.get("written"):
        return f"{report['name']}: unchanged (same content as {snapshot})"
    verb = "replaced: now snapshot" if report.get("replaced") else "stored as snapshot"
    return f"{report['name']}: {verb} {snapshot} ({shape})"


def cmd_ingest(args) -> int:
    """Catalog data sets through the ingest flow, or one table with ``--file``; the reports
    as JSON on stdout, one line per data set on stderr."""
    from catdask.errors import DatasetExistsError

    checks.check_ingest_mode(args)
    try:
        reports = _ingest_file(args) if args.file else _ingest_catalog(args)
    except DatasetExistsError as exc:  # the library's message names its Python parameter
        raise CliError(exc.describe("Pass --replace")) from exc
    print_json(reports)
    for report in reports:
        note(ingest_summary(report))
    return EXIT_OK


def train_kwargs(args, dataset: str) -> dict:
    """The train flow's arguments; options the user left out are not passed, so the flow's
    (the library's) defaults apply."""
    kwargs = dict(dataset=dataset, method=args.method, standardise=not args.no_standardise,
                  random_state=args.seed, model_name=args.name, store=args.store,
                  scheduler=args.scheduler, allow_uncertified=args.allow_uncertified,
                  run_key=args.run_key, certify=args.certify, refit=args.refit,
                  replace_spec=args.replace_spec)
    optional = {"origin": args.origin, "n_restarts": args.restarts, "gamma": args.gamma,
                "max_gap": args.max_gap, "device": args.device}
    kwargs.update({k: v for k, v in optional.items() if v is not None})
    return kwargs


def _asked_spec(args) -> dict:
    import dataclasses

    from catdask.pipeline.spec import ModelSpec

    fields = {f.name for f in dataclasses.fields(ModelSpec)}
    return ModelSpec(**{k: v for k, v in train_kwargs(args, args.dataset).items()
                        if k in fields}).to_dict()


def _model_name(args) -> str:
    from catdask.pipeline.model_identity import default_model_name

    return args.name or default_model_name(args.dataset, args.method, args.origin)


def _check_spec_agrees(args) -> None:
    """The model's name and spec agree (:mod:`catdask.pipeline.model_identity`): a train
    under a name whose latest version has another spec is refused, naming both (exit 3),
    unless ``--replace-spec``."""
    if args.replace_spec:
        return
    from catdask.pipeline.model_identity import spec_conflict

    conflict = spec_conflict(args.store, _model_name(args), args.dataset, _asked_spec(args))
    if conflict is not None:
        raise CliError(conflict)


def _stored_fit(args):
    """The train cache's answer before Prefect or Dask starts (:mod:`catdask.pipeline.model_cache`):
    a registered version of this content, spec identity and code; or a rejected fit, registered now
    if the policy asked for passes it, else rejected again. None to run the flow (always with
    ``--refit`` and ``--run-key``). Saves the seconds of Prefect's imports and server start.
    """
    if args.refit or args.run_key:
        return None
    from catdask.pipeline.candidates import look_up_fit
    from catdask.pipeline.model_cache import CACHE_MISSES

    try:
        return look_up_fit(args.store, _model_name(args), args.dataset, _asked_spec(args))[1]
    except CACHE_MISSES:  # the flow reports it
        return None


def _stored_fit_note(args, found: dict) -> str:
    what = f"train {args.method} on {args.dataset}"
    if found["version"] is None:
        return f"{what}: this fit was rejected before; not refitted (--refit fits again)"
    if found.get("reused") == "candidate":
        return (f"{what}: registered {found['version']} ({found['status']}) from the fit that "
                "was rejected before; not refitted")
    return (f"{what}: {found['version']} was fitted on this content with this spec and this "
            "catdask; not refitted (--refit fits again)")


def _fit_progress(bar, step, title):
    """Solver listener for the CLI's bar: iteration, best objective, restarts still running
    (a live bar redraws every second; plain log lines come at most every 10 s), then each
    stage of the global-optimality test (:func:`catdask.core.progress.report_stage`)."""
    import time

    from catdask.core.progress import SOLVER_PHASES

    every_seconds = 1.0 if getattr(bar, "live", False) else 10.0
    last = [0.0]
    phase = [""]  # the solver's phase, named beside its iteration count (which restarts)

    def update(iteration, objective, step_sizes, active):
        now = time.monotonic()
        if now - last[0] < every_seconds:
            return
        last[0] = now
        bar.update(step, f"{title}: {phase[0]}iteration {iteration}, best objective "
                         f"{max(objective):.6g}, {int(sum(active))}/{len(active)} restarts "
                         "running")

    def stage(text):
        phase[0] = f"{text}, " if text in SOLVER_PHASES else ""
        last[0] = 0.0  # the next iteration is shown at once, under its phase
        bar.update(step, f"{title}: {text}")

    update.stage = stage  # type: ignore[attr-defined]
    return update


def cmd_train(args) -> int:
    """One fit, its best restart tested for global optimality; registered when certified (or
    allowed), exit 4 when not."""
    checks.check_method_options(args)
    checks.check_certify_level(args.certify)
    device_checks.check_device(args.device, runtime.scheduler_address(args.scheduler))
    checks.check_model_name(args.name)
    checks.require_store(args.store)  # a typo in --store: say so, not "ingest it first"
    checks.check_stored_dataset(args.store, args.dataset)
    checks.check_method_fits_dataset(args.store, args.dataset, args.method)
    _check_spec_agrees(args)
    result = _stored_fit(args)
    if result is not None:
        note(_stored_fit_note(args, result))
        print_json(result)
        return _not_registered(result) if result["version"] is None else EXIT_OK
    # After the cache: a store this process cannot write still answers a repeated train.
    writable.check_store_writable(args.store, TRAIN_WRITES, ["models", "plots", ".prefect"])
    scheduler = runtime.scheduler_address(args.scheduler)
    device_checks.check_gpu_workers(args.device, scheduler,
                                    runtime.check_scheduler(scheduler))
    runtime.check_prefect_api()
    runtime.prepare_prefect(args.store)
    from catdask.core.progress import watch_solvers
    from catdask.orchestration.train import run_train  # a rejected model returns its summary

    train = runtime.flow(run_train)

    with runtime.prefect_server("train"), progress("train") as bar:
        step = bar.step(f"train {args.method} on {args.dataset}")
        with watch_solvers(_fit_progress(bar, step, f"train {args.method} on {args.dataset}")):
            result = train(**train_kwargs(args, args.dataset))
        cached = ", cached: not refitted" if result.get("cached") else ""
        bar.done(step, f"(objective {result['objective']:.6g}, {result['n_iter']} iterations, "
                       f"{result['status']}{cached})")
    print_json(result)
    return _not_registered(result) if result["version"] is None else EXIT_OK


def _not_registered(result: dict) -> int:
    """Say why a fit was not registered and how to register it (no refit needed: the fit is
    kept as a candidate); exit 4."""
    from catdask.certificate.moment import moment_install_note

    gap = (f" ({result['why_not_certified']})" if result["gap"] is None
           else f" (optimality gap <= {result['gap']:.3g})")
    if result.get("max_gap") is not None and result["gap"] is not None:
        gap = gap[:-1] + f" > --max-gap {result['max_gap']:.3g})"
    # The linear test's strongest level is opt-in (slower); say so where it may prove W.
    moment = ("; --certify moment tries the level-2 moment relaxation, which may prove it "
              f"(slower: minutes at tens of features{moment_install_note('; {}')})"
              if result.get("next_level") == "moment" else "")
    print(f"not registered: {result['status']}{gap}; pass --max-gap GAP to register it "
          "when its gap is at most GAP, or --allow-uncertified to register it marked as "
          f"uncertified (the fit is kept: no refit){moment}", file=sys.stderr)
    return EXIT_UNCERTIFIED


def default_evaluation_dir(store) -> str:
    """``<store>/evaluations/<UTC time>``: evaluate never writes into the working directory
    (:func:`catdask.store.evaluation_dir`, also the evaluate flow's default)."""
    from catdask.store import evaluation_dir

    return str(evaluation_dir(store, datetime.now(timezone.utc)))


def cmd_evaluate(args) -> int:
    """The paper's protocol; tables under ``--out`` (default: in the store)."""
    checks.check_evaluation_datasets(args.store, args.datasets)
    if args.out:  # before the evaluation runs, not after it
        writable.check_output_writable(Path(args.out) / "table", f"--out {args.out}")
    else:
        writable.check_store_writable(args.store, "`catdask evaluate` writes its tables",
                                    ["evaluations", ".prefect"])
    out_dir = args.out or default_evaluation_dir(args.store)
    runtime.check_prefect_api()
    runtime.prepare_prefect(args.store)
    from catdask.orchestration.evaluate import evaluate

    evaluate = runtime.flow(evaluate)
    with runtime.prefect_server("evaluate"), progress("evaluate") as bar:
        step = bar.step("evaluate " + (", ".join(args.datasets) or "stored paper data sets"))
        out = evaluate(datasets=args.datasets or None, n_splits=args.splits, quick=args.quick,
                       out_dir=out_dir, store=args.store)
        bar.done(step, f"(results in {out_dir})")
    print_json(out)
    return EXIT_OK


def cmd_serve(args) -> int:
    """Prefect server, served deployments and a Dask cluster (``--scheduler``, else a local
    one) until Ctrl-C; a scheduler that does not answer fails at once (exit 3)."""
    scheduler = runtime.scheduler_address(args.scheduler)
    runtime.check_scheduler(scheduler)
    runtime.check_prefect_api()
    runtime.prepare_prefect(args.store)
    from catdask.serve import serve

    runtime.exit_without_teardown = True  # serve stops all it started (Ctrl-C: within 5 s)
    serve(host=args.host, port=args.port, dask_dashboard_port=args.dask_dashboard_port,
          store=args.store, scheduler=scheduler)
    return EXIT_OK
