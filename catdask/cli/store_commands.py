"""Commands that read the store and need no flow: ``datasets``, ``check``, ``models``,
``plot``. None of them imports Prefect or Dask."""

from __future__ import annotations

import sys

from .exits import EXIT_INPUT, EXIT_OK, usage_error
from .output import print_json, print_table


def split_version(spec: str) -> tuple[str, str | None]:
    """``"iris-cqs:v2"`` -> ``("iris-cqs", "v2")``; no version -> None (the latest)."""
    name, _, version = spec.partition(":")
    return name, (version or None)


def cmd_datasets(args) -> int:
    """Catalog entries and stored data sets, one row each."""
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
    print_table(rows)
    return EXIT_OK


def cmd_check(args) -> int:
    """Report every problem of the store (non-zero exit if it is not whole); optionally clean up.

    Runs :func:`catdask.store.check_store`: checksums of every snapshot, pointers, crash
    leftovers, stray files, every model version loaded with the real loader, stale lineage.
    """
    from catdask.store import check_store

    report = check_store(args.store, cleanup=args.cleanup, older_than_seconds=args.older_than)
    root = report.root
    rows = [{"kind": "removed", "name": _relative(p, root), "status": "cleanup"}
            for p in report.removed]
    rows += [{"kind": "restored", "name": _relative(p, root), "status": "cleanup"}
             for p in report.restored]
    rows += list(report.checked)
    rows += [{"kind": p.kind, "name": _relative(p.path, root),
              "status": f"{p.severity}: {p.message}"} for p in report.problems]
    print_table(rows)
    if not report.ok:
        print(f"catdask check: {len(report.errors)} problem(s) in {root}", file=sys.stderr)
        return EXIT_INPUT
    return EXIT_OK


def cmd_gc(args) -> int:
    """Remove data-set snapshots that no model version and no running reader refers to."""
    from catdask.store import gc_store, resolve_store

    root = resolve_store(args.store)
    if not root.is_dir():
        raise FileNotFoundError(f"store {root} does not exist")
    result = gc_store(root, dry_run=args.dry_run, keep_last=args.keep_last)
    verb = "would remove" if args.dry_run else "removed"
    doomed = result.would_remove if args.dry_run else result.removed
    rows = [{"snapshot": _relative(p, root), "action": verb} for p in doomed]
    rows += [{"snapshot": _relative(p, root), "action": f"kept: {why}"} for p, why in result.kept]
    print_table(rows)
    return EXIT_OK


def _relative(path, root) -> str:
    try:
        return str(type(root)(path).relative_to(root))
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


def cmd_models(args) -> int:
    """``models list`` / ``show`` / ``compare``."""
    from catdask.store import compare_versions, list_models, load_model_version

    if args.models_cmd == "list":
        rows = [{"model": str(v), "dataset": v.meta.get("dataset"), "method": v.meta.get("class"),
                 "status": v.meta.get("registration_status"), "gap": v.meta.get("gap"),
                 "objective": v.meta.get("objective"), "created": v.created, "problem": v.problem}
                for v in list_models(args.store, args.name)]
        print_table(rows)
    elif args.models_cmd == "show":
        name, version = split_version(args.model)
        _, meta = load_model_version(args.store, name, version)
        print_json(meta)
    else:
        print_json(compare_versions(args.store, *compared_versions(args.versions)))
    return EXIT_OK


def cmd_plot(args) -> int:
    """Save the category-space plot of a registered model (png, pdf or svg, from the
    extension of ``--out``); prints the file's path."""
    from catdask.plotting import plot_format
    from catdask.store import load_estimator, load_model_version, read_dataset

    if args.out:
        try:  # before the model is read: a wrong extension is a command-line mistake
            plot_format(args.out)
        except ValueError as exc:
            raise usage_error(f"--out: {exc}") from None
    name, version = split_version(args.model)
    _, meta = load_model_version(args.store, name, version)
    # matplotlib and the estimators take seconds to import: only once the model is found.
    from catdask.pipeline.reports import (
        check_feature_count,
        class_names_of,
        plot_title,
        save_category_space_plot,
    )

    model = load_estimator(args.store, name, version)
    # By default the snapshot it was trained on, not what the name holds now.
    ds = (read_dataset(args.store, args.dataset) if args.dataset else
          read_dataset(args.store, meta["dataset"], snapshot=meta.get("dataset_snapshot")))
    label = f"{name}:v{meta['version']}"
    check_feature_count(model, ds.n_features, model_label=label, dataset=ds.name)
    out = args.out or f"{name}-v{meta['version']}.png"
    title = plot_title(meta.get("spec", {}).get("method", ""), ds.name, version=label)
    save_category_space_plot(model, ds.X, ds.y, out, title=title, class_names=class_names_of(ds))
    print(out)
    return EXIT_OK
