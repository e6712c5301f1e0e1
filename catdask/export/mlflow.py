"""``catdask export NAME[:VERSION] --mlflow URI``: a registered model as an MLflow model.

Logged as a *models-from-code* pyfunc (:mod:`catdask.export.mlflow_pyfunc`) whose artifact is a
:mod:`catdask.export.bundle` folder, so no pickle is written or read. One MLflow run per export
holds the spec and data set as params, the objective, certificate and training metrics as
metrics, ``catdask.*`` tags, and the model with a signature, registered under the same name; the
alias ``certified`` names the newest version whose certificate proves global optimality.
Exporting is idempotent: a version already in MLflow's registry is not logged again.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
import math
import os
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CERTIFIED_ALIAS", "MlflowExport", "export_to_mlflow", "check_tracking_server"]

logger = logging.getLogger(__name__)

#: MLflow alias of the newest exported version whose certificate proves global optimality.
CERTIFIED_ALIAS = "certified"
#: Seconds to wait for the tracking server's health answer before giving up.
PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class MlflowExport:
    """What :func:`export_to_mlflow` did."""

    model_uri: str
    run_id: str
    registered_name: str
    mlflow_version: int
    certified: bool
    alias: str | None
    seconds: float
    #: Why the version got its alias, or none ("certified and the newest certified catdask
    #: version", "not certified", ...).
    alias_reason: str = ""
    #: True when this catdask version was exported before: nothing new was logged.
    already_exported: bool = False


def check_tracking_server(uri: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Fail in seconds, with one line, when ``uri`` is not a reachable MLflow tracking server.

    MLflow's own client retries a dead address for minutes; a local path or a database URI
    (``sqlite:///...``) needs no server and is not probed.
    """
    if not uri.startswith(("http://", "https://")):
        return
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            body = reply.read(64)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConnectionError(f"no MLflow tracking server answers at {uri} ({reason})") from None
    if body.strip() != b"OK":
        raise ConnectionError(f"{uri} answered /health with {body[:40]!r}: not an MLflow "
                              "tracking server")


def _metrics(meta: dict) -> dict:
    """Finite numbers of the certificate and the training metrics, as MLflow metrics."""
    cert = meta.get("certificate", {})
    out = {"objective": meta.get("objective")}
    for key in ("gap", "verified_gap", "upper_bound", "sdp_margin", "seconds"):
        out[f"certificate_{key}"] = cert.get(key)
    for key, value in (meta.get("metrics") or {}).items():
        out[key] = value
    return {k: float(v) for k, v in out.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def _params(meta: dict) -> dict:
    spec = dict(meta.get("spec") or {})
    spec.update({k: meta[k] for k in ("dataset", "dataset_snapshot") if k in meta})
    return {k: ("" if v is None else str(v))[:500] for k, v in spec.items()}


def _input_names(recorded, n_features):
    """The signature's input columns: the names the model was fitted with (a DataFrame's
    columns) or its data set recorded (a table's header, the catalog's names, as ``catdask
    predict`` matches them), else ``x0, x1, ...`` (also when recorded names are not one
    distinct name per feature)."""
    names = [str(n) for n in recorded or ()]
    if len(names) == n_features and len(set(names)) == n_features:
        return names
    return [f"x{j}" for j in range(n_features)]


def _signature(feature_names, class_names, model):
    """Inputs: one double column per feature; outputs: the predict table's columns."""
    import numpy as np
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    classes = list(model.classes_)
    kind = np.asarray(classes).dtype.kind
    outputs = [ColSpec("long" if kind in "iu" else "string", "prediction")]
    axis_names = [str(c) for c in classes]
    if class_names:
        outputs.append(ColSpec("string", "class_name"))
        axis_names = [str(class_names.get(c, c)) for c in classes]
    outputs += [ColSpec("double", f"axis_{name}") for name in axis_names]
    return ModelSignature(inputs=Schema([ColSpec("double", f) for f in feature_names]),
                          outputs=Schema(outputs))


def export_to_mlflow(store, name: str, version=None, *, tracking_uri: str,
                     experiment: str = "catdask", registered_name: str | None = None,
                     set_alias: bool = True) -> MlflowExport:
    """Log a registered catdask model version to MLflow and register it there.

    Parameters
    ----------
    store : path or None
        The catdask store (None: the default store).
    name : str
        The registered model; ``version`` None means the latest.
    tracking_uri : str
        MLflow tracking URI (``http://127.0.0.1:5000``, or ``sqlite:///mlflow.db``).
    experiment : str, default="catdask"
    registered_name : str, default=None
        Name in MLflow's model registry (default: ``name``).
    set_alias : bool, default=True
        Point the alias ``certified`` at this version when its certificate proves global
        optimality and no newer catdask version is already exported under that alias.

    Returns
    -------
    MlflowExport
    """
    check_tracking_server(tracking_uri)
    t0 = time.perf_counter()
    # catdask's telemetry policy (off unless the user opts in) for MLflow's client too; it
    # would otherwise try to reach the internet on every call.
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param

    from ..pipeline.reports import class_names_of
    from ..pipeline.scoring import feature_names_of
    from ..store import load_estimator, load_model_version, read_dataset
    from .bundle import ARTIFACT_KEY, write_bundle

    arrays, meta = load_model_version(store, name, version)
    model = load_estimator(store, name, version)
    class_names = dataset_features = None
    if "dataset" in meta:
        try:
            ds = read_dataset(store, meta["dataset"], snapshot=meta.get("dataset_snapshot"))
            class_names = class_names_of(ds)
            dataset_features = feature_names_of(ds)
        except (FileNotFoundError, LookupError):  # the snapshot was collected: no names
            class_names = None
    n_features = int(meta["n_features_in"])
    features = _input_names(meta.get("feature_names_in") or dataset_features, n_features)
    label = f"{name}:v{meta['version']}"
    registered_name = registered_name or name
    certified = bool(meta.get("certificate", {}).get("certified"))

    mlflow.set_tracking_uri(tracking_uri)
    created = str(meta.get("created", ""))
    existing = _exported_version(MlflowClient(), registered_name, label, created)
    if existing is not None:
        alias, why = _decide_alias(MlflowClient(), registered_name, existing.version, meta,
                                   certified, set_alias)
        return MlflowExport(model_uri=f"models:/{registered_name}/{existing.version}",
                            run_id=existing.run_id, registered_name=registered_name,
                            mlflow_version=int(existing.version), certified=certified,
                            alias=alias, seconds=time.perf_counter() - t0,
                            alias_reason=why, already_exported=True)
    cert = meta.get("certificate", {})
    tags = {
        "catdask.model": label,
        "catdask.certified": str(certified).lower(),
        "catdask.certificate_method": str(cert.get("method")),
        "catdask.certificate_reason": str(cert.get("reason", ""))[:5000],
        "catdask.dataset_sha256": str(meta.get("dataset_sha256", "")),
    }
    # MLflow prints "View run ... at: URL" and registration lines on standard output and logs
    # INFO records; the caller's stdout (the CLI's --json document) and console stay theirs.
    chatter = io.StringIO()
    with tempfile.TemporaryDirectory() as tmp, contextlib.redirect_stdout(chatter), \
            contextlib.redirect_stderr(chatter), _quiet_mlflow():
        mlflow.set_experiment(experiment)
        bundle = write_bundle(Path(tmp) / "bundle", arrays, meta, class_names=class_names,
                              feature_names=features)
        # Tags at creation, then the model, then params + metrics in one batch: each call is
        # a round trip, and metrics logged before the model would be fetched back one by one
        # (10 requests) to be linked to it.
        with mlflow.start_run(run_name=f"export {label}", tags=tags) as run:
            info = mlflow.pyfunc.log_model(
                name="model",
                # The path, not the module: importing it would run its set_model.
                python_model=str(Path(__file__).with_name("mlflow_pyfunc.py")),
                artifacts={ARTIFACT_KEY: str(bundle)},
                signature=_signature(features, class_names, model),
                registered_model_name=registered_name,
                pip_requirements=["catdask", "mlflow", "pandas"],
            )
            MlflowClient().log_batch(
                run.info.run_id,
                metrics=[Metric(k, v, int(time.time() * 1000), 0)
                         for k, v in _metrics(meta).items()],
                params=[Param(k, v) for k, v in _params(meta).items()],
            )
    logger.debug("MLflow said: %s", chatter.getvalue().strip())
    client = MlflowClient()
    mv = int(info.registered_model_version)
    client.set_model_version_tag(registered_name, str(mv), "catdask.model", label)
    client.set_model_version_tag(registered_name, str(mv), "catdask.certified",
                                 str(certified).lower())
    client.set_model_version_tag(registered_name, str(mv), "catdask.created", created)
    alias, why = _decide_alias(client, registered_name, mv, meta, certified, set_alias)
    return MlflowExport(model_uri=f"models:/{registered_name}/{mv}", run_id=run.info.run_id,
                        registered_name=registered_name, mlflow_version=mv,
                        certified=certified, alias=alias,
                        seconds=time.perf_counter() - t0, alias_reason=why)


def _exported_version(client, registered_name: str, label: str, created: str):
    """The MLflow version that holds catdask version ``label`` (created at ``created``)
    already, or None (also when the registered model does not exist yet)."""
    try:
        versions = client.search_model_versions(f"name = '{registered_name}'")
    except Exception as exc:  # MLflow's RestException: no such registered model yet
        if "RESOURCE_DOES_NOT_EXIST" in str(exc) or "not found" in str(exc).lower():
            return None
        raise
    for mv in sorted(versions, key=lambda v: int(v.version)):
        if (mv.tags.get("catdask.model") == label
                and mv.tags.get("catdask.created", "") == created):
            return mv
    return None


def _decide_alias(client, registered_name: str, mlflow_version, meta: dict, certified: bool,
                  set_alias: bool) -> tuple[str | None, str]:
    """Point ``@certified`` at this version when it is due; ``(alias or None, why)``."""
    if not set_alias:
        return None, "aliases not set (set_alias=False)"
    if not certified:
        return None, (f"no @{CERTIFIED_ALIAS}: not certified globally optimal "
                      f"({meta.get('registration_status', 'not certified')})")
    held = _alias_holder(client, registered_name)
    if held is not None and int(held.version) == int(mlflow_version):
        return CERTIFIED_ALIAS, f"@{CERTIFIED_ALIAS} already names it"
    held_label = "" if held is None else held.tags.get("catdask.model", "")
    held_version = int(held_label.rpartition(":v")[2]) if ":v" in held_label else -1
    if meta["version"] < held_version:
        return None, (f"no @{CERTIFIED_ALIAS}: it stays on MLflow version {held.version} "
                      f"({held_label}, a newer certified catdask version)")
    client.set_registered_model_alias(registered_name, CERTIFIED_ALIAS, str(mlflow_version))
    return CERTIFIED_ALIAS, ("certified globally optimal, and the newest certified catdask "
                             "version exported")


@contextlib.contextmanager
def _quiet_mlflow():
    """MLflow's INFO records and advice warnings (type hints, input example) held back: the
    model has an explicit signature, and the CLI answers in one line."""
    log = logging.getLogger("mlflow")
    level = log.level
    log.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=UserWarning, module=r"mlflow\..*")
            yield
    finally:
        log.setLevel(level)


def _alias_holder(client, registered_name: str):
    """The MLflow version ``@certified`` names, or None when the alias is unset."""
    try:
        return client.get_model_version_by_alias(registered_name, CERTIFIED_ALIAS)
    except Exception as exc:  # MLflow raises its RestException when the alias is unset
        if "RESOURCE_DOES_NOT_EXIST" in str(exc) or "not found" in str(exc).lower():
            return None
        raise
