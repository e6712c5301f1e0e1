"""Train a category-space model, test its best restart for global optimality, then register it.

What it does: load a stored data set, run the restarts as one batch on the Dask cluster
(embedded local cluster by default, or the scheduler at ``scheduler`` / $CATDASK_SCHEDULER),
test the best restart for global optimality (the others are marked tied with it or beaten), and
register the best model only after that test (an uncertified CQS / K-CQS model only when the
caller allows it, marked so; CAS and K-CAS, which have no such test, marked
``certificate-not-applicable``). Publishes the
restart table, metrics and a category-space plot as Prefect artifacts keyed by the model, the
solver's progress in the task log (and a progress artifact for long fits), and logs the Dask
dashboard link.

Run states: a registered model ends the run Completed; a model that was not registered
(CQS / K-CQS not certified, ``allow_uncertified`` off) ends it **Failed**, named ``Rejected``, with the
reason as the state message, so rejected runs stand out in the UI and can be filtered
(state type Failed, state name Rejected). The run's summary is the state's data either way.

Run it:  catdask train iris --method cqs     (or)  python flows/train.py iris
"""

from __future__ import annotations

from datetime import datetime, timezone

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run
from prefect.states import Failed

from ..distributed.cluster import dask_client_context
from ..errors import CatdaskError
from ..names import validate_name
from ..pipeline import ModelSpec, fit_on_dataset, register_outcome, registration_decision
from ..pipeline.reports import (
    metrics_table_rows,
    png_markdown,
    reported_gap,
    restart_rows,
    summary_markdown,
    write_model_plot,
)
from ..pipeline.run_names import TRAIN_RUN_NAME, retrain_run_name
from ..core.progress import CONSOLE_NOTE, solver_progress
from ..store import read_dataset
from .artifacts import SolverProgress, model_artifact_key
from .retry import retry_if_transient
from .served import served_store_and_scheduler

__all__ = ["train", "retrain_registered", "run_train", "ModelRejectedError",
           "REJECTED_STATE_NAME"]

REJECTED_STATE_NAME = "Rejected"
# Fits shorter than this publish no progress artifact (the task log has their progress).
PROGRESS_ARTIFACT_AFTER_SECONDS = 3.0


class ModelRejectedError(CatdaskError):
    """The fitted model was not registered (not certified, uncertified models not allowed).

    Raised by a direct call of the ``catdask-train`` flow; ``summary`` is the run's summary
    (``version`` None). :func:`run_train` returns the summary instead.
    """

    def __init__(self, message, summary=None):
        super().__init__(message)
        self.summary = summary

    def __reduce__(self):  # Prefect persists the state's data: keep the summary
        return type(self), (str(self), self.summary)


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
        description=f"{model_spec.method.upper()} on {dataset}, {model_spec.n_restarts} restarts",
        artifact_after_seconds=PROGRESS_ARTIFACT_AFTER_SECONDS,
    )
    with dask_client_context(scheduler) as client, solver_progress(progress):
        logger.info("Dask dashboard: %s (scheduler %s)", client.dashboard_link,
                    client.scheduler.address, extra={CONSOLE_NOTE: True})  # where to watch
        outcome = fit_on_dataset(store, dataset, model_spec, client=client)
    est = outcome.estimator
    logger.info("best of %d restarts: objective %.10g, %d iterations, %s",
                len(est.restarts_), est.objective_, est.n_iter_, est.certificate_)
    return outcome


@task(cache_policy=NO_CACHE)
def review_certificates(outcome, allow_uncertified: bool) -> tuple[bool, str]:
    """Decide whether the best restart may be registered (the caller's certification policy)."""
    register, status = registration_decision(outcome, allow_uncertified=allow_uncertified)
    get_run_logger().info("registration decision: %s", status)
    return register, status


@task(retries=2, retry_delay_seconds=2, cache_policy=NO_CACHE, retry_condition_fn=retry_if_transient)
def register(store: str | None, model_name: str, outcome, status: str, run_key: str) -> str:
    """Write an immutable registry version (idempotent for the same run_key)."""
    version = register_outcome(store, model_name, outcome, status=status, run_key=run_key)
    get_run_logger().info("registered %s (%s)", version, status)
    return str(version)


@task(cache_policy=NO_CACHE)
def publish_reports(store: str | None, outcome, version: str | None, status: str) -> str:
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
    create_markdown_artifact(summary_markdown(outcome, version, status) + "\n\n" + png_markdown(path),
                             key=keys["summary"], description="Model summary and category space")
    create_table_artifact(metrics_table_rows(outcome.metrics), key=keys["metrics"],
                          description="Training metrics")
    return str(path)


def _rejection_message(summary: dict) -> str:
    # CAS has no test at all (its certificate is "not applicable"): say that, not "gap unknown".
    why = (summary["why_not_certified"] if summary["gap"] is None
           else f"optimality gap <= {summary['gap']:.3g}")
    return (f"rejected: {summary['dataset']} {summary['method']} not certified "
            f"({why}); nothing registered "
            "(allow_uncertified=True registers it marked as uncertified)")


@flow(name="catdask-train", flow_run_name=TRAIN_RUN_NAME, log_prints=True)
def train(
    dataset: str,
    method: str = "cqs",
    origin: str = "global",
    n_restarts: int = 5,
    gamma: float | None = None,
    standardise: bool = True,
    random_state: int | None = 0,
    model_name: str | None = None,
    store: str | None = None,
    scheduler: str | None = None,
    allow_uncertified: bool = False,
    run_key: str | None = None,
    certify: str = "dual",
):
    """Fit, certify, and register a model; returns a summary of the outcome.

    ``run_key`` makes registration idempotent: a rerun with the same key (by default the flow
    run's id, so a retried flow run never registers twice) returns the existing version.

    A model that is not registered ends the run in a Failed state named ``Rejected`` whose
    message says why; a direct call then raises :class:`ModelRejectedError` carrying the
    summary (``run_train`` returns it instead).
    """
    # Under `catdask serve`, serve's store and scheduler, whatever the run's parameters say.
    store, scheduler = served_store_and_scheduler(store, scheduler)
    spec = ModelSpec(method=method, origin=origin, n_restarts=n_restarts, gamma=gamma,
                     standardise=standardise, random_state=random_state, certify=certify)
    # Refuse bad names before spending a cluster on the fit.
    validate_name(dataset, kind="data set")
    model_name = validate_name(model_name or f"{dataset}-{method}", kind="model")
    info = describe_dataset(store, dataset)
    outcome = fit_restarts(store, dataset, spec.to_dict(), scheduler)
    ok, status = review_certificates(outcome, allow_uncertified)
    version = None
    if ok:
        version = register(store, model_name, outcome, status,
                           run_key or f"flow-run:{flow_run.id}")
    plot = publish_reports(store, outcome, version, status)
    cert = outcome.certificate
    summary = {
        "dataset": info["name"], "method": method, "origin": origin, "version": version,
        "status": status, "certified": bool(cert.certified),
        # Certified: the verified margin (``gap`` itself is rounded to 0); else the bound's gap.
        "gap": reported_gap(cert),
        "why_not_certified": None if cert.certified else cert.reason,
        "objective": float(outcome.estimator.objective_),
        "n_iter": int(outcome.estimator.n_iter_), "seconds": outcome.seconds, "plot": plot,
        "metrics": outcome.metrics,
    }
    if version is None:
        message = _rejection_message(summary)
        get_run_logger().warning(message)
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
    return retrain_run_name(_scheduled_night())


@flow(name="catdask-retrain", flow_run_name=_retrain_run_name, log_prints=True)
def retrain_registered(store: str | None = None, scheduler: str | None = None,
                       allow_uncertified: bool = False):
    """Retrain every registered model on its data set with its recorded spec (nightly job).

    The run key is the model name plus the scheduled date, so a rerun of the same night's run
    (after a crash) never registers a second version. Every model is retrained even when one is
    rejected; the run then ends Failed (``Rejected``) naming the rejected models.
    """
    from ..store import list_models

    store, scheduler = served_store_and_scheduler(store, scheduler)
    latest = {}
    for v in list_models(store):
        if v.problem is None and "spec" in v.meta:
            latest[v.name] = v  # list_models is ordered by name, then version
    # The night the run was scheduled for (today for a manual run): a crashed run retried
    # the same night finds its versions; the next night registers new ones.
    day = _scheduled_night().date().isoformat()
    results, rejected = [], []
    for name, v in sorted(latest.items()):
        spec = v.meta["spec"]
        summary = run_train(
            dataset=v.meta["dataset"], method=spec["method"], origin=spec["origin"],
            n_restarts=spec["n_restarts"], gamma=spec["gamma"], standardise=spec["standardise"],
            random_state=spec["random_state"], model_name=name, store=store, scheduler=scheduler,
            allow_uncertified=allow_uncertified, run_key=f"retrain:{name}:{day}",
        )
        results.append(summary)
        if summary["version"] is None:
            rejected.append(name)
    if rejected:
        message = f"rejected (not certified, not registered): {', '.join(rejected)}"
        return Failed(name=REJECTED_STATE_NAME, message=message,
                      data=ModelRejectedError(message, results))
    return results
