"""Train a category-space model, test its best restart for global optimality, then register it.

Runs the restarts as one batch on the Dask cluster (embedded, or the scheduler at
``scheduler`` / $CATDASK_SCHEDULER), tests the best restart, and registers the model only after
that test (an uncertified CQS / K-CQS model only within ``max_gap`` or with
``allow_uncertified``; CAS and K-CAS marked ``certificate-not-applicable``). Publishes the
restart table, metrics and a plot as artifacts keyed by the model, and the solver's progress.

A cache hit (:mod:`catdask.pipeline.model_cache`: same data content, spec identity and code)
fits nothing and ends Completed named ``Cached``; ``refit=True`` fits regardless. A model that
is not registered ends the run **Failed**, named ``Rejected``, with the reason as the state
message, and is kept as a candidate. Events: :mod:`.events`.

Run it:  catdask train iris --method cqs     (or)  python flows/train.py iris
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timezone

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run
from prefect.states import Failed

from ..distributed.cluster import dask_client_context
from ..errors import CatdaskError, DatasetNotFoundError
from ..method_names import METHOD_NAMES
from ..names import validate_name
from ..pipeline import ModelSpec, fit_on_dataset, register_outcome, registration_decision
from ..pipeline.device import check_device
from ..pipeline.candidates import look_up_fit
from ..pipeline.model_cache import CACHE_MISSES, current_content_sha256
from ..pipeline.model_identity import default_model_name, spec_conflict
from ..pipeline.reports import (certificate_summary, metrics_table_rows, png_markdown,
                                reported_gap, restart_rows, summary_markdown, write_model_plot)
from ..pipeline.run_names import retrain_run_name, train_run_name
from ..core.progress import CONSOLE_NOTE, CONSOLE_REPEATED, solver_progress
from ..store import read_dataset, training_lease
from ..store.lease import holder_description
from .artifacts import SolverProgress, model_artifact_key
from .events import emit_model_event
from .input_errors import fails_plainly, parameter_checks
from .parameters import (
    RETRAIN_HELP,
    TRAIN_HELP,
    CertifyLevel,
    Eps,
    Gamma,
    MaxGap,
    MaxIter,
    MethodName,
    Origin,
    Restarts,
    Seed,
    Tol,
    documented,
)
from .retry import retry_if_transient
from .served import served_store_and_scheduler
from .train_states import (
    CACHED_STATE_NAME,
    REJECTED_STATE_NAME,
    ModelRejectedError,
    cached_state,
    cancelled_if_interrupted,
    keep_candidate,
    rejection_message,
)

__all__ = ["train", "retrain_registered", "run_train", "ModelRejectedError", "RetrainFailedError",
           "REJECTED_STATE_NAME", "CACHED_STATE_NAME"]

# Fits shorter than this publish no progress artifact (the task log has their progress).
PROGRESS_ARTIFACT_AFTER_SECONDS = 3.0


class RetrainFailedError(CatdaskError):
    """A retrain run could not retrain some models (an error, not a rejection); ``results``
    holds every model's summary, ``{"model", "version": None, "error"}`` for those."""

    def __init__(self, message, results=None):
        super().__init__(message)
        self.results = results

    def __reduce__(self):  # Prefect persists the state's data: keep the results
        return type(self), (str(self), self.results)


@task(cache_policy=NO_CACHE)
def find_registered(store: str | None, model_name: str, dataset: str, spec: dict) -> dict:
    """The train cache's lookup (:mod:`catdask.pipeline.model_cache`): the data set's current
    checksum and, on a hit, the cached version's summary. A data set not in the store fails the run
    here; any other lookup that cannot be made is a miss (``describe_dataset`` reports it).
    """
    try:
        sha, summary = look_up_fit(store, model_name, dataset, spec)
    except DatasetNotFoundError:
        raise
    except CACHE_MISSES as exc:
        get_run_logger().info("cache lookup skipped (%s): fitting", exc)
        return {"dataset_sha256": None, "summary": None}
    return {"dataset_sha256": sha, "summary": summary}


@task(retries=2, retry_delay_seconds=2, retry_condition_fn=retry_if_transient)
def describe_dataset(store: str | None, dataset: str) -> dict:
    """Check the data set is present and intact before spending a cluster on it."""
    ds = read_dataset(store, dataset)
    return {"name": ds.name, "n_samples": ds.n_samples, "n_features": ds.n_features,
            "n_classes": ds.n_classes, "content_sha256": ds.attrs.get("content_sha256")}


@task(retries=1, retry_delay_seconds=5, cache_policy=NO_CACHE,
      retry_condition_fn=retry_if_transient)
def fit_restarts(store: str | None, dataset: str, spec: dict, scheduler: str | None):
    """All restarts as one batch on the Dask cluster; each restart certified by the fit.

    The solver's progress goes to this task's log and, for a long fit, to a progress artifact.
    """
    logger = get_run_logger()
    model_spec = ModelSpec.from_dict(spec)
    progress = SolverProgress(
        logger,
        key=model_artifact_key("progress", dataset, model_spec.method, run_id=str(flow_run.id)),
        # The paper's name ("K-CQS"), as the summary artifact writes it.
        description=(f"{METHOD_NAMES[model_spec.method].paper_name} on {dataset}, "
                     f"{model_spec.n_restarts} restarts"),
        artifact_after_seconds=PROGRESS_ARTIFACT_AFTER_SECONDS,
    )
    if model_spec.device is not None and scheduler is None:
        # The embedded cluster's workers declare no GPU, so the products would run in this
        # process anyway (catdask.pipeline.device): no cluster to start and wait for.
        cluster = contextlib.nullcontext(None)
    else:
        cluster = dask_client_context(scheduler)
    with cluster as client, solver_progress(progress):
        if client is not None:
            logger.info("Dask dashboard: %s (scheduler %s)", client.dashboard_link,
                        client.scheduler.address, extra={CONSOLE_NOTE: True})  # where to watch
        outcome = fit_on_dataset(store, dataset, model_spec, client=client)
    est = outcome.estimator
    if outcome.device_placement is not None:
        logger.info("Gram products on device %s: %s", model_spec.device, outcome.device_placement)
    logger.info("best of %d restarts: objective %.10g, %d iterations, %s",
                len(est.restarts_), est.objective_, est.n_iter_, est.certificate_)
    # The artifact's last stage was the test's; it ends on the test's outcome.
    progress.stage(f"global-optimality test: {certificate_summary(est.certificate_)}")
    return outcome


@task(cache_policy=NO_CACHE)
def review_certificates(outcome, allow_uncertified: bool,
                        max_gap: float | None = None) -> tuple[bool, str]:
    """Decide whether the best restart may be registered (the caller's certification policy)."""
    register, status = registration_decision(outcome, allow_uncertified=allow_uncertified,
                                             max_gap=max_gap)
    get_run_logger().info("registration decision: %s", status)
    return register, status


@task(retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE, retry_condition_fn=retry_if_transient)
def register(store: str | None, model_name: str, outcome, status: str, run_key: str,
             policy: dict | None = None) -> str:
    """Write an immutable registry version (idempotent for the same run_key); ``policy`` (the
    registration policy that admitted it) is recorded in its metadata."""
    version = register_outcome(store, model_name, outcome, status=status, run_key=run_key,
                               extra={"registration_policy": policy} if policy else None)
    get_run_logger().info("registered %s (%s)", version, status)
    return str(version)


@task(cache_policy=NO_CACHE)
def publish_reports(store: str | None, outcome, version: str | None, status: str,
                    max_gap: float | None = None) -> str:
    """Restart table, metrics, category-space plot (PNG in the store) and a summary, as
    artifacts keyed by the model (its version, or this run when it was not registered)."""
    method = outcome.spec.method
    keys = {kind: model_artifact_key(kind, outcome.dataset, method, version=version,
                                     run_id=str(flow_run.id))
            for kind in ("restarts", "summary", "metrics")}
    create_table_artifact(restart_rows(outcome), key=keys["restarts"],
                          description="Every restart: objective, iterations, certificate, gap")
    path = write_model_plot(store, outcome, version=version, status=status,
                            run_id=str(flow_run.id))
    create_markdown_artifact(summary_markdown(outcome, version, status, max_gap) + "\n\n"
                             + png_markdown(path),
                             key=keys["summary"], description="Model summary and category space")
    create_table_artifact(metrics_table_rows(outcome.metrics), key=keys["metrics"],
                          description="Training metrics")
    return str(path)


def _waiting_for_lease(model_name: str):
    """``on_wait`` for :func:`~catdask.store.training_lease`: says, on the run's log and the
    CLI's console, which run trains the model and that this one waits for it."""
    def on_wait(other: dict, waited: float) -> None:
        get_run_logger().info(
            "model %s is being trained by %s; waiting for it to finish (%.0f s so far), then "
            "the train cache decides whether to fit again", model_name,
            holder_description(other), waited, extra={CONSOLE_NOTE: True})
    return on_wait


def _train_run_name() -> str:
    p = flow_run.parameters or {}
    return train_run_name(p.get("dataset"), p.get("method", ModelSpec.method),
                          p.get("model_name"), p.get("origin"))


@flow(name="catdask-train", flow_run_name=_train_run_name, log_prints=True,
      on_crashed=[cancelled_if_interrupted])  # Ctrl-C: Cancelled in the UI, not Crashed
@fails_plainly  # a misspelt data set, a refused parameter: Failed, one line, no traceback
@documented(TRAIN_HELP)  # the UI's run form: a description per parameter
def train(
    dataset: str,
    method: MethodName = ModelSpec.method,
    origin: Origin = ModelSpec.origin,
    n_restarts: Restarts = ModelSpec.n_restarts,
    gamma: Gamma = ModelSpec.gamma,
    standardise: bool = ModelSpec.standardise,
    random_state: Seed = ModelSpec.random_state,
    model_name: str | None = None,
    store: str | None = None,
    scheduler: str | None = None,
    allow_uncertified: bool = ModelSpec.allow_uncertified,
    run_key: str | None = None,
    certify: CertifyLevel = ModelSpec.certify,
    eps: Eps = ModelSpec.eps,
    tol: Tol = ModelSpec.tol,
    max_iter: MaxIter = ModelSpec.max_iter,
    max_gap: MaxGap = ModelSpec.max_gap,
    refit: bool = False,
    device: str | None = ModelSpec.device,
    replace_spec: bool = False,
):
    """Fit, certify, and register a model; returns a summary of the outcome.

    When the model's latest version was fitted on the data set's current content with this
    spec and this catdask code, that version is returned instead (``cached`` True in the
    summary, run state ``Cached``); ``refit`` fits anyway. A run that would fit holds the
    model's training lease (:func:`~catdask.store.training_lease`) until it has registered: a
    second run of the same model meanwhile waits, saying for which run, and then returns the
    first one's version the same way.

    The parameters named like :class:`~catdask.pipeline.ModelSpec`'s fields make the spec
    recorded with the version (the nightly retrain passes it back whole). ``run_key`` makes
    registration idempotent: a rerun with the same key (by default the flow run's id, so a
    retried flow run never registers twice) returns the existing version.

    A model that is not registered ends the run in a Failed state named ``Rejected`` whose
    message says why; a direct call then raises :class:`ModelRejectedError` carrying the
    summary (``run_train`` returns it instead).

    ``device`` (kernel methods; ``"cuda"``, ``"cuda:1"``, ``"cpu"``) runs the Gram products
    with PyTorch: on the cluster's GPU workers (``--resources GPU=1``) when it has some, else in
    the fit task's process on the data set read into memory (:mod:`catdask.pipeline.device`).
    A misspelt device or a missing PyTorch fails the run before the cache lookup; a device
    this process lacks, before the data set is read.
    """
    # Under `catdask serve`, serve's store and scheduler, whatever the run's parameters say.
    store, scheduler = served_store_and_scheduler(store, scheduler)
    # Refuse bad parameters, names and devices before spending a cluster on the fit.
    with parameter_checks():
        spec = ModelSpec(method=method, origin=origin, n_restarts=n_restarts, gamma=gamma,
                         standardise=standardise, random_state=random_state, certify=certify,
                         eps=eps, tol=tol, max_iter=max_iter,
                         allow_uncertified=allow_uncertified, max_gap=max_gap, device=device)
        validate_name(dataset, kind="data set")
        if spec.device is not None:  # whether this process needs it: known with the client
            check_device(spec.device, here=False)
    model_name = validate_name(model_name or default_model_name(dataset, method, origin),
                               kind="model")
    if not replace_spec:
        with parameter_checks():
            conflict = spec_conflict(store, model_name, dataset, spec.to_dict())
            if conflict is not None:
                raise ValueError(conflict)
    if not refit:
        looked_up = find_registered(store, model_name, dataset, spec.to_dict())
        if looked_up["summary"] is not None:
            return cached_state(looked_up, dataset)
    info = describe_dataset(store, dataset)
    with parameter_checks():  # before the cluster
        spec.check_data_shape(dataset, info["n_features"], info["n_classes"],
                              info["n_samples"])
    # One training of a model at a time, fit to registration (store/lease.py says why): a
    # second run waits here, then looks the cache up again and finds the first one's version.
    # Taken once the data set is known to be there: a run refused above leaves no trace.
    with training_lease(store, model_name, holder=f"flow run {flow_run.id}",
                        on_wait=_waiting_for_lease(model_name)):
        if not refit:
            # The same lookup, not a task run of its own this time: a run that trained the
            # model since the first lookup has registered it by now.
            looked_up = find_registered.fn(store, model_name, dataset, spec.to_dict())
            if looked_up["summary"] is not None:
                return cached_state(looked_up, dataset)
        outcome = fit_restarts(store, dataset, spec.to_dict(), scheduler)
        ok, status = review_certificates(outcome, spec.allow_uncertified, spec.max_gap)
        version = None
        if ok:
            policy = {"max_gap": spec.max_gap, "allow_uncertified": spec.allow_uncertified}
            version = register(store, model_name, outcome, status,
                               run_key or f"flow-run:{flow_run.id}", policy)
    plot = publish_reports(store, outcome, version, status, max_gap)
    if version is None:
        keep_candidate(store, model_name, outcome, plot)
    cert = outcome.certificate
    summary = {
        "dataset": info["name"], "method": method, "origin": origin, "version": version,
        "status": status, "certified": bool(cert.certified),
        # Certified: the verified margin (``gap`` itself is rounded to 0); else the bound's gap.
        "gap": reported_gap(cert),
        "why_not_certified": None if cert.certified else cert.reason,
        "next_level": cert.next_level,  # "moment": the opt-in level that may prove it
        "objective": float(outcome.estimator.objective_),
        "n_iter": int(outcome.estimator.n_iter_), "fit_seconds": outcome.seconds, "plot": plot,
        "metrics": outcome.metrics, "max_gap": spec.max_gap, "cached": False, "reused": None,
        "device": spec.device, "device_placement": outcome.device_placement,
    }
    emit_model_event(summary, model_name, dataset_sha256=outcome.dataset_sha256,
                     snapshot=outcome.dataset_snapshot, spec=spec.to_dict(), store=store)
    if version is None:
        message = rejection_message(summary)
        get_run_logger().warning(message, extra={CONSOLE_REPEATED: True})
        return Failed(name=REJECTED_STATE_NAME, message=message,
                      data=ModelRejectedError(message, summary))
    return summary


def run_train(**parameters) -> dict:
    """Run the ``catdask-train`` flow; the summary, also for a rejected model.

    A rejected model (run state ``Rejected``, type Failed) is a policy outcome, not an error
    of the caller's: its summary is returned with ``version`` None. Any other failure raises.
    """
    try:
        return train(**parameters)
    except ModelRejectedError as exc:
        return exc.summary


def _scheduled_night() -> datetime:
    """The night a retrain run is for: its scheduled start (now for a manual run)."""
    return flow_run.scheduled_start_time or datetime.now(timezone.utc)


def _retrain_run_name() -> str:
    return retrain_run_name(_scheduled_night(), (flow_run.parameters or {}).get("dataset"))


@flow(name="catdask-retrain", flow_run_name=_retrain_run_name, log_prints=True,
      on_crashed=[cancelled_if_interrupted])
@fails_plainly
@documented(RETRAIN_HELP)
def retrain_registered(store: str | None = None, scheduler: str | None = None,
                       allow_uncertified: bool = False, dataset: str | None = None,
                       refit: bool = False):
    """Retrain every registered model on its data set with its recorded spec (nightly job;
    with ``dataset``, only the models of that data set: the run a new snapshot triggers).

    A model whose latest version was fitted on its data set's current content with that spec
    and the same code is not refitted (a cache hit: the train run returns that version);
    ``refit`` refits every model.

    The spec recorded with the model's latest version (:meth:`ModelSpec.recorded`: method, origin,
    restarts, tolerances, certificate level, its own ``allow_uncertified``) is passed to the
    ``catdask-train`` flow whole. ``allow_uncertified`` here also registers the models whose spec
    does not allow it; their new versions then record it on. The run key is the model name plus the
    scheduled date, so a rerun of the same night's run (after a crash) never registers a second
    version. Every model is retrained even when one is rejected or its retrain fails; the run then
    ends Failed (``Rejected`` when models were only rejected) naming those models.
    """
    from ..store import list_models

    store, scheduler = served_store_and_scheduler(store, scheduler)
    latest = {}
    for v in list_models(store):
        if v.problem is None and "spec" in v.meta:
            latest[v.name] = v  # list_models is ordered by name, then version
    # The night the run was scheduled for (today for a manual run): a crashed run retried
    # the same night finds its versions; the next night registers new ones. The key also names
    # the content: a second snapshot the same day (a triggered retrain) is a new fit, not the
    # morning's version found again by its key.
    day = _scheduled_night().date().isoformat()
    results, rejected = [], []
    if dataset is not None:
        latest = {name: v for name, v in latest.items() if v.meta.get("dataset") == dataset}
        get_run_logger().info("retraining the %d model(s) of data set %s: %s", len(latest),
                              dataset, ", ".join(sorted(latest)) or "none registered")
    failed = []
    for name, v in sorted(latest.items()):
        try:
            spec = ModelSpec.recorded(v.meta).to_dict()
            spec["allow_uncertified"] = spec["allow_uncertified"] or allow_uncertified
            content = current_content_sha256(store, v.meta["dataset"])[:16]
            summary = run_train(dataset=v.meta["dataset"], **spec, model_name=name,
                                store=store, scheduler=scheduler,
                                run_key=f"retrain:{name}:{day}:{content}", refit=refit)
        except Exception as exc:  # noqa: BLE001 - one model's fault must not stop the others
            # e.g. a model trained with device="cuda" retrained where there is no GPU, or its
            # data set removed: the others are still retrained, and the run ends Failed.
            reason = f"{type(exc).__name__}: {exc}"
            get_run_logger().error("retraining %s failed: %s", name, reason)
            failed.append(f"{name} ({reason})")
            results.append({"model": name, "dataset": v.meta.get("dataset"), "version": None,
                            "error": reason})
            continue
        results.append(summary)
        if summary["version"] is None:
            rejected.append(name)
    if failed:
        message = f"failed: {'; '.join(failed)}"
        if rejected:
            message += f"; rejected (not certified, not registered): {', '.join(rejected)}"
        return Failed(message=message, data=RetrainFailedError(message, results))
    if rejected:
        message = f"rejected (not certified, not registered): {', '.join(rejected)}"
        return Failed(name=REJECTED_STATE_NAME, message=message,
                      data=ModelRejectedError(message, results))
    return results
