"""``catdask export``: a registered model to another platform (MLflow), never as a pickle."""

from __future__ import annotations

from . import checks
from .exits import EXIT_OK, CliError
from .output import note, print_json


def cmd_export(args) -> int:
    """Log a registered model version to an MLflow tracking server and its model registry."""
    from .store_commands import split_version

    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise CliError("the MLflow export needs the mlflow package: pip install "
                       "'catdask[mlflow]'") from None
    checks.require_store(args.store)
    name, version = split_version(args.model)
    checks.check_registered_model(args.store, name)
    from catdask.export.mlflow import check_tracking_server, export_to_mlflow

    try:
        check_tracking_server(args.mlflow)
    except ConnectionError as exc:
        raise CliError(str(exc)) from None
    done = export_to_mlflow(args.store, name, version, tracking_uri=args.mlflow,
                            experiment=args.experiment, registered_name=args.registered_name)
    if args.json:
        print_json({"model_uri": done.model_uri, "run_id": done.run_id,
                    "registered_name": done.registered_name,
                    "mlflow_version": done.mlflow_version, "certified": done.certified,
                    "alias": done.alias, "alias_reason": done.alias_reason,
                    "already_exported": done.already_exported,
                    "seconds": round(done.seconds, 3)})
    else:
        alias = f"alias @{done.alias}: " if done.alias else ""
        where = (f"{args.mlflow} as {done.registered_name} version {done.mlflow_version} "
                 f"({alias}{done.alias_reason}; run {done.run_id}, {done.seconds:.1f} s)")
        print(done.model_uri)
        note(f"{args.model} was exported before: nothing logged again; it is at {where}"
             if done.already_exported else f"exported {args.model} to {where}")
    return EXIT_OK
