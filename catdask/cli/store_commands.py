"""Commands that read the store and need no flow: ``datasets``, ``check``, ``gc``, ``models``,
``plot``, ``predict``. None of them imports Prefect or Dask.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import checks, writable
from .exits import EXIT_INPUT, EXIT_OK, CliError, usage_error
from .output import note, print_json, print_table


def split_version(spec: str) -> tuple[str, str | None]:
    """``"iris-cqs:v2"`` -> ``("iris-cqs", "v2")``; no version -> None (the latest)."""
    name, _, version = spec.partition(":")
    return name, (version or None)


def cmd_datasets(args) -> int:
    """Catalog entries and stored data sets, one row each."""
    from catdask.catalog import load_catalog
    from catdask.store import list_datasets

    root = checks.require_store(args.store)
    if not root.exists():
        note(f"store {root} does not exist yet (`catdask ingest` creates it): nothing is "
             "stored")
    stored = {d.name: d for d in list_datasets(args.store)}
    rows = []
    # Features and classes beside the samples: what decides the method (the linear ones need
    # K <= D); a catalog set not stored yet shows the shape it will have.
    for name, entry in sorted(load_catalog().items()):
        d = stored.get(name)
        expected = entry.expected or {}
        rows.append({"name": name, "stored": d is not None,
                     **{k: getattr(d, k) if d is not None else expected.get(k)
                        for k in ("n_samples", "n_features", "n_classes")},
                     "description": entry.description})
    rows += [{"name": n, "stored": True, "n_samples": d.n_samples, "n_features": d.n_features,
              "n_classes": d.n_classes,
              "description": "(not in the catalog: ingested from a file)"}
             for n, d in stored.items() if n not in {r["name"] for r in rows}]
    print_table(rows, wrap="description")
    for n, d in stored.items():
        if d.problem is not None:  # listed, not hidden: the user must learn it is damaged
            note(f"data set {n!r} is damaged ({d.problem.rstrip('.')}): `catdask check` says "
                 "more, `catdask check --cleanup` restores its newest committed snapshot that "
                 "verifies")
    return EXIT_OK


def cmd_check(args) -> int:
    """Report every problem of the store (non-zero exit if it is not whole); optionally clean up."""
    from catdask.store import check_store

    root = checks.require_store(args.store)
    if not root.exists():  # the default store, before any ingest (was: "store ... does not exist")
        raise CliError(f"store {root} does not exist yet, so there is nothing to check "
                       "(`catdask ingest` creates it)")
    report = check_store(args.store, cleanup=args.cleanup, older_than_seconds=args.older_than)
    root = report.root
    print_table(check_rows(report), wrap="status")
    if not report.ok:
        print(f"catdask check: {len(report.errors)} problem(s) in {root}", file=sys.stderr)
        return EXIT_INPUT
    return EXIT_OK


def check_rows(report) -> list[dict]:
    """The table of ``catdask check``: what cleanup changed, one row per data set and model version
    (a damaged entry's status is its problem), then the problems of no such entry.
    """
    root = report.root
    rows = [{"kind": "removed", "name": _relative(p, root), "status": "cleanup"}
            for p in report.removed]
    rows += [{"kind": "restored", "name": _relative(p, root), "status": "cleanup"}
             for p in report.restored]
    by_message = {p.message: p for p in report.problems}
    for row in report.checked:
        problem = by_message.get(row["status"])
        rows.append(row if problem is None
                    else {**row, "status": f"{problem.severity}: {problem.message}"})
    statuses = {row["status"] for row in report.checked}
    rows += [{"kind": p.kind, "name": _relative(p.path, root),
              "status": f"{p.severity}: {p.message}"}
             for p in report.problems if p.message not in statuses]
    return rows


def cmd_gc(args) -> int:
    """Remove the rejected fits nothing can use any more, then the data-set snapshots that no
    model version and no running reader refers to."""
    from catdask.pipeline.candidates import gc_candidates
    from catdask.store import gc_store

    root = checks.require_store(args.store)
    if not root.exists():
        note(f"nothing to remove: store {root} does not exist yet")
        return EXIT_OK
    candidates = gc_candidates(root, dry_run=args.dry_run)
    result = gc_store(root, dry_run=args.dry_run, keep_last=args.keep_last)
    verb = "would remove" if args.dry_run else "removed"
    doomed = result.would_remove if args.dry_run else result.removed
    rows = [{"snapshot": _relative(p, root), "action": verb} for p in doomed]
    rows += [{"snapshot": _relative(p, root), "action": f"kept: {why}"} for p, why in result.kept]
    rows += [{"snapshot": _relative(p, root), "action": f"{verb} rejected fit: {why}"}
             for p, why in candidates]
    print_table(rows)
    return EXIT_OK


def _relative(path, root) -> str:
    """``path`` (a local path, or a URL on object storage) relative to the store ``root``."""
    if getattr(root, "backend", None) is not None and root.path is None:
        url = root.url.rstrip("/") + "/"
        return str(path)[len(url):] if str(path).startswith(url) else str(path)
    try:
        return str(Path(path).relative_to(getattr(root, "path", None) or root))
    except ValueError:
        return str(path)


def compared_versions(specs: list[str]) -> tuple[str, str, str]:
    """``(name, v1, v2)`` from ``NAME:V1 NAME:V2`` or ``NAME V1 V2``."""
    if len(specs) == 3 and ":" not in specs[0]:
        return specs[0], specs[1], specs[2]
    if len(specs) == 2 and all(":" in s for s in specs):
        (a, va), (b, vb) = (split_version(s) for s in specs)
        if a != b:
            raise usage_error(f"compare needs two versions of one model, got {a!r} and {b!r}")
        if not (va and vb):
            raise usage_error("give both versions: NAME:V1 NAME:V2")
        return a, va, vb
    if len(specs) == 2:  # NAME V1 without V2
        raise usage_error("the following arguments are required: v2 "
                          "(give NAME:V1 NAME:V2, or NAME V1 V2)")
    raise usage_error(f"compare takes NAME:V1 NAME:V2, or NAME V1 V2; got {' '.join(specs)}")


def method_key(meta: dict) -> str | None:
    """The method as ``train --method`` names it (cqs, cas, kcqs, kcas)."""
    spec = meta.get("spec")
    if isinstance(spec, dict) and spec.get("method"):
        return spec["method"]
    from catdask.method_names import method_name

    params = meta.get("params") if isinstance(meta.get("params"), dict) else {}
    try:
        return method_name(kernel=meta.get("class") == "KernelCategorySpace",
                           objective=params.get("objective"))
    except ValueError:  # no objective recorded, or one the registry does not know
        return meta.get("class")


def _origin(meta: dict) -> str | None:
    for part in ("spec", "params"):
        if isinstance(meta.get(part), dict) and meta[part].get("origin"):
            return meta[part]["origin"]
    return None


def _list_models(args) -> None:
    """``models list [NAME]``: one row per version; a NAME that is not registered is an error
    (with a "did you mean"), not an empty table."""
    from catdask.store import list_models

    root = checks.require_store(args.store)
    if args.name is not None:
        checks.check_registered_model(args.store, args.name)
    # The essential columns first: a narrow terminal leaves out the rightmost ones.
    rows = [{"model": str(v), "status": v.meta.get("registration_status"),
             "gap": v.meta.get("gap"), "method": method_key(v.meta), "origin": _origin(v.meta),
             "dataset": v.meta.get("dataset"), "objective": v.meta.get("objective"),
             "created": v.created, "problem": v.problem}
            for v in list_models(args.store, args.name)]
    if rows:
        print_table(rows)
    else:
        print(f"no models in {root}{checks.missing_store_note(root)}")
    _print_training_now(args.store, args.name)


def _print_training_now(store, name) -> None:
    """One line per model a run is training now (its lease, catdask.store.lease): a version
    may be on its way, and another train of it would wait for that run."""
    from catdask.store.lease import holder_description, models_in_training

    for t in models_in_training(store):
        if name is None or t["model"] == name:
            print(f"training now: {t['model']} by {holder_description(t, 'a run')}")


def cmd_models(args) -> int:
    """``models list`` / ``show`` / ``compare``; ``models`` alone lists."""
    from catdask.store import compare_versions, load_model_version

    if args.models_cmd in (None, "list"):
        _list_models(args)
        return EXIT_OK
    checks.require_store(args.store)
    from .model_summary import comparison_summary, model_summary

    if args.models_cmd == "show":
        name, version = split_version(args.model)
        checks.check_registered_model(args.store, name)
        _, meta = load_model_version(args.store, name, version)
        print_json(meta) if args.json else print(model_summary(meta, f"{name}:v{meta['version']}"))
    else:
        name, v1, v2 = compared_versions(args.versions)
        checks.check_registered_model(args.store, name)
        cmp = compare_versions(args.store, name, v1, v2)
        print_json(cmp) if args.json else print(comparison_summary(cmp))
    return EXIT_OK


def _checked_model_and_data(args) -> tuple[str, str | None]:
    """``plot`` and ``predict``, before any heavy import: the store, the model and
    ``--dataset`` are there (a typo gets "did you mean"). Returns the model's name and
    version."""
    checks.require_store(args.store)
    name, version = split_version(args.model)
    checks.check_registered_model(args.store, name)
    if args.dataset:
        checks.check_stored_dataset(args.store, args.dataset)
    return name, version


def _load_model(store, label):
    """The estimator of ``label`` (NAME:vN); a version that does not load (forged or damaged
    arrays: axes that are not orthonormal, a missing array) is named in its one line."""
    from catdask.errors import StoreCorruptError
    from catdask.store import load_estimator

    name, version = split_version(label)
    try:
        return load_estimator(store, name, version)
    except StoreCorruptError:
        raise
    except ValueError as exc:
        raise StoreCorruptError(f"model {label}", f"does not load: {exc}") from None


def cmd_plot(args) -> int:
    """Save the category-space plot of a registered model (png, pdf or svg, from the
    extension of ``--out``); prints the file's path."""
    from catdask.plotting import plot_format
    from catdask.store import load_model_version, read_dataset

    if args.out:
        try:  # before the model is read: a wrong extension is a command-line mistake
            plot_format(args.out)
        except ValueError as exc:
            raise usage_error(f"--out: {exc}") from None
        writable.check_output_writable(args.out, f"--out {args.out}")
    name, version = _checked_model_and_data(args)
    _, meta = load_model_version(args.store, name, version)
    if not args.out:
        default = f"{name}-v{meta['version']}.png"
        writable.check_output_writable(default, f"the plot {default} (in the current folder; "
                                              "--out names another)")
    _require_training_data(args, meta, "--dataset")
    # matplotlib and the estimators take seconds to import: only once the model is found.
    from catdask.pipeline.reports import (
        check_feature_count,
        class_names_of,
        plot_title,
        save_category_space_plot,
    )

    label = f"{name}:v{meta['version']}"
    model = _load_model(args.store, label)
    # By default the snapshot it was trained on, not what the name holds now.
    ds = (read_dataset(args.store, args.dataset) if args.dataset else
          read_dataset(args.store, meta["dataset"], snapshot=meta.get("dataset_snapshot")))
    check_feature_count(model, ds.n_features, model_label=label, data=f"data set {ds.name}")
    out = args.out or f"{name}-v{meta['version']}.png"
    title = plot_title(meta.get("spec", {}).get("method", ""), ds.name, version=label)
    save_category_space_plot(model, ds.X, ds.y, out, title=title, class_names=class_names_of(ds))
    print(out)
    return EXIT_OK


def _require_training_data(args, meta, options):
    """Without ``--dataset``, the model must name the data set it was trained on (a model
    registered from Python may not)."""
    if not args.dataset and "dataset" not in meta:
        raise usage_error(f"model {args.model} records no training data set: give {options}")


def _parse_predict_file(args, columns=None, *, early=False):
    """``(X, y, names)`` of ``predict --file``, only the feature ``columns`` where given.
    ``early``: parsed before scikit-learn, zarr and matplotlib are imported; returns None where a
    cell of a headed table is not a number: that column may be one the model was not trained
    on, left out once its features are known (:func:`_predict_input`)."""
    from catdask.catalog import parse_features
    from catdask.catalog.assembly import table_columns
    from catdask.errors import ParseError

    from .flow_commands import _label_column

    column = None if args.label_column is None else _label_column(args.label_column)
    try:
        return parse_features(args.file, label_column=column, delimiter=args.delimiter,
                              feature_columns=columns)
    except ParseError as exc:
        if early and exc.non_numeric and table_columns(args.file, delimiter=args.delimiter)[0]:
            return None
        # Most often the table the model was trained from, labels included: say how to skip them.
        if column is None and exc.non_numeric:
            raise CliError(f"{exc}; if that column holds the labels, pass --label-column "
                           "COLUMN (its name or index)") from None
        raise


def _trained_columns(args, trained_names):
    """The model's features by name, where the file's header has them all and other columns
    beside them (a table with the label and columns left out of training): ``(columns,
    note)``, else ``(None, None)``."""
    from catdask.catalog.assembly import table_columns
    from catdask.catalog.lines import resolve_column

    header = table_columns(args.file, delimiter=args.delimiter)[0]
    if not header or not trained_names or not set(trained_names) <= set(header):
        return None, None
    label = (None if args.label_column is None else resolve_column(
        args.label_column, len(header), header, args.file, "label column"))
    others = [c for i, c in enumerate(header) if c not in trained_names and i != label]
    if not others:
        return None, None
    hint = (f" (if it holds the labels, --label-column {others[0]} reports the accuracy)"
            if label is None and len(others) == 1 else "")
    return list(trained_names), (f"left out column{'s' * (len(others) > 1)} "
                                 f"{', '.join(others)} of {args.file}: not a feature the model "
                                 f"was trained on{hint}")


def _predict_input(args, meta, parsed=None):
    """``(X, y, class_names, source, feature_names, trained_feature_names)`` of ``predict``:
    a table file (``parsed``, from :func:`_parse_predict_file`) or a stored snapshot; the
    names are None where not recorded."""
    from catdask.pipeline.reports import class_names_of
    from catdask.pipeline.scoring import feature_names_of
    from catdask.store import read_dataset

    trained_names = meta.get("feature_names_in")  # a model fitted from Python on a DataFrame
    if args.dataset:
        ds = read_dataset(args.store, args.dataset)
        if trained_names is None and "dataset" in meta:
            trained_names = feature_names_of(read_dataset(
                args.store, meta["dataset"], snapshot=meta.get("dataset_snapshot")))
        return (ds.X, ds.y, class_names_of(ds), f"data set {ds.name}", feature_names_of(ds),
                trained_names)
    # The snapshot the model was trained on: the data by default, the display names for a
    # file (which has none). A model registered from Python may record none.
    if not args.file:
        _require_training_data(args, meta, "--dataset or --file")
    trained_on = (read_dataset(args.store, meta["dataset"], snapshot=meta.get("dataset_snapshot"))
                  if "dataset" in meta else None)
    if not args.file:
        return (trained_on.X, trained_on.y, class_names_of(trained_on),
                f"data set {trained_on.name}", None, None)
    if trained_names is None and trained_on is not None:
        trained_names = feature_names_of(trained_on)
    columns, left_out = _trained_columns(args, trained_names)
    if columns is not None:
        note(left_out)
        parsed = _parse_predict_file(args, columns)
    X, y, feature_names = parsed if parsed is not None else _parse_predict_file(args)
    names = class_names_of(trained_on) if trained_on is not None else None
    return X, y, names, f"file {args.file}", feature_names, trained_names


def cmd_predict(args) -> int:
    """Write the predicted class and the category-space coordinates of every row of a table
    file or a stored data set (CSV, to ``--out`` or standard output); the accuracy goes to
    stderr when the labels are known."""
    if args.data is not None:  # `catdask predict MODEL my.csv` or `... MODEL iris`
        if args.file or args.dataset:
            raise usage_error(f"{args.data}: give the data once (as an argument, or with "
                              "--file or --dataset)")
        args.file, args.dataset = ((args.data, None) if checks.names_a_file(args.data)
                                   else (None, args.data))
    if args.file and args.dataset:
        raise usage_error("give --dataset or --file, not both")
    for option in ("label_column", "delimiter"):
        if getattr(args, option) is not None and not args.file:
            raise usage_error(f"--{option.replace('_', '-')} applies to --file only")
    if args.file:
        checks.check_readable_file(args.file)
    if args.out and args.out != "-" and os.path.isdir(args.out):  # before the model is read
        raise usage_error(f"--out {args.out} is a folder; give the file to write, e.g. "
                          f"{os.path.join(args.out, 'predictions.csv')}")
    if args.out and args.out != "-":
        writable.check_output_writable(args.out, f"--out {args.out}")
    name, version = _checked_model_and_data(args)
    parsed = _parse_predict_file(args, early=True) if args.file else None
    from catdask.pipeline.reports import check_feature_count
    from catdask.pipeline.scoring import align_features, predict_table, write_predictions
    from catdask.store import load_model_version

    _, meta = load_model_version(args.store, name, version)
    label = f"{name}:v{meta['version']}"
    X, y, class_names, source, names, trained_names = _predict_input(args, meta, parsed)
    X, aligned = align_features(X, names, trained_names, model_label=label, data=source)
    if aligned:
        note(aligned)
    model = _load_model(args.store, label)
    check_feature_count(model, X.shape[1], model_label=label, data=source)
    table = predict_table(model, X, class_names=class_names, y=y)
    written = write_predictions(table, args.out)
    summary = f"{label} on {source}: {table.n_samples} row{'s' * (table.n_samples != 1)}"
    if table.accuracy is not None:
        summary += f", accuracy {table.accuracy:.4f}"
    note(summary + (f" -> {written}" if written else ""))
    return EXIT_OK
