"""Prefect events the flows emit, for automations and deployment triggers.

=============================  =============================================================
event                          when (resource: ``prefect.resource.id``; payload)
=============================  =============================================================
``catdask.snapshot.created``   the ingest flow wrote a new snapshot of a data set
                               (``catdask.dataset.<name>``; checksum, snapshot, shape)
``catdask.snapshot.reused``    a re-ingest pointed the data set at a snapshot already stored
                               (same resource and payload)
``catdask.model.registered``   the train flow registered a version
                               (``catdask.model.<name>``; version, data-set checksum and
                               snapshot, certificate outcome, spec)
``catdask.model.rejected``     the train flow fitted a model it did not register: same
                               resource without a version; the gap and why
=============================  =============================================================

A re-ingest of the current content and a cached train emit nothing. Every resource carries
``catdask.store`` (the store's absolute path), and model events name the data set as a related
resource (role ``dataset``). Emitting never fails a run: without ``PREFECT_API_URL`` nothing is
sent, and an error while emitting is logged and ignored.
"""

from __future__ import annotations

import logging
import math

__all__ = ["SNAPSHOT_CREATED", "SNAPSHOT_REUSED", "MODEL_REGISTERED", "MODEL_REJECTED",
           "dataset_resource", "model_resource", "snapshot_event_name", "emit_snapshot_event",
           "emit_model_event", "retrain_trigger"]

SNAPSHOT_CREATED = "catdask.snapshot.created"
SNAPSHOT_REUSED = "catdask.snapshot.reused"
MODEL_REGISTERED = "catdask.model.registered"
MODEL_REJECTED = "catdask.model.rejected"

logger = logging.getLogger("catdask.events")


def _store_label(store) -> str:
    from ..store.root import open_store

    return open_store(store).url


def dataset_resource(name: str, store=None) -> dict:
    """The Prefect resource of a stored data set (``catdask.dataset.<name>``)."""
    return {"prefect.resource.id": f"catdask.dataset.{name}", "prefect.resource.name": name,
            "catdask.dataset": name, "catdask.store": _store_label(store)}


def model_resource(name: str, version: str | None = None, store=None) -> dict:
    """The Prefect resource of a registered model (``catdask.model.<name>``); ``version``
    (``NAME:vN``) adds ``catdask.version`` (``vN``)."""
    resource = {"prefect.resource.id": f"catdask.model.{name}", "prefect.resource.name": name,
                "catdask.model": name, "catdask.store": _store_label(store)}
    if version:
        resource["catdask.version"] = str(version).rpartition(":")[2]
    return resource


def snapshot_event_name(report: dict) -> str | None:
    """The event an ingest report calls for: a written snapshot, the pointer moved to a stored
    one (``written`` False, ``replaced`` True), or None (the content was already current)."""
    if report.get("written"):
        return SNAPSHOT_CREATED
    if report.get("replaced"):
        return SNAPSHOT_REUSED
    return None


def _json_number(value):
    """A float that JSON can carry (NaN and infinities become None)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _emit(event: str, resource: dict, payload: dict, related=None):
    """``prefect.events.emit_event``, never raising; the event, or None when not sent."""
    payload = {k: _json_number(v) for k, v in payload.items()}
    try:
        from prefect.events import emit_event
        from prefect.settings import get_current_settings

        if not get_current_settings().api.url:
            # No API configured: Prefect would start an ephemeral server just for this event.
            return None

        return emit_event(event=event, resource=resource, payload=payload, related=related)
    except Exception as exc:  # noqa: BLE001 - an event must never fail the run
        logger.warning("event %s not emitted: %s", event, exc)
        return None


def emit_snapshot_event(report: dict, store=None):
    """Emit the snapshot event an ingest report calls for (:func:`snapshot_event_name`)."""
    event = snapshot_event_name(report)
    if event is None:
        return None
    payload = {k: report.get(k) for k in ("content_sha256", "snapshot", "n_samples",
                                          "n_features", "n_classes", "replaced")}
    return _emit(event, dataset_resource(report["name"], store), payload)


def emit_model_event(summary: dict, model_name: str, *, dataset_sha256: str | None,
                     snapshot: str | None, spec: dict, store=None):
    """``catdask.model.registered`` (a version in ``summary``) or ``catdask.model.rejected``,
    with the certificate outcome in the payload."""
    version = summary.get("version")
    payload = {
        "version": version, "dataset": summary["dataset"], "dataset_sha256": dataset_sha256,
        "dataset_snapshot": snapshot, "status": summary["status"],
        "certified": summary["certified"], "gap": summary["gap"],
        "why_not_certified": summary["why_not_certified"], "objective": summary["objective"],
        "spec": spec,
    }
    related = [{**dataset_resource(summary["dataset"], store), "prefect.resource.role": "dataset"}]
    return _emit(MODEL_REGISTERED if version else MODEL_REJECTED,
                 model_resource(model_name, version, store), payload, related)


#: The trigger's parameter: the data set named by the event's resource (a Jinja template that
#: Prefect's automation renders when the event arrives).
DATASET_FROM_EVENT = "{{ event.resource['catdask.dataset'] }}"


def retrain_trigger(store=None, *, name="catdask: retrain on a new snapshot"):
    """A ``DeploymentEventTrigger`` for the ``catdask-retrain`` flow: each
    ``catdask.snapshot.created`` / ``catdask.snapshot.reused`` event starts one run retraining
    the models of that data set (parameter ``dataset`` from the event's resource).

    ``store`` given: only events of that store (label ``catdask.store``) fire it, so a store
    ingested through the same API elsewhere does not retrain this one's models.
    """
    from prefect.events import DeploymentEventTrigger

    match = {"prefect.resource.id": "catdask.dataset.*"}
    if store is not None:
        match["catdask.store"] = _store_label(store)
    return DeploymentEventTrigger(name=name, expect={SNAPSHOT_CREATED, SNAPSHOT_REUSED},
                                  match=match, parameters={"dataset": DATASET_FROM_EVENT})
