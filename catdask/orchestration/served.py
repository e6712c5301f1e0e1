"""What a served flow run may choose: nothing that points it at another store or Dask scheduler.

``catdask serve`` fixes the store and scheduler of its runs and hands them to every run process
through the environment (:data:`ENV_SERVED_STORE`, :data:`ENV_SERVED_SCHEDULER`), which the
Prefect API cannot change; each flow calls :func:`served_store_and_scheduler` first. Dask
messages carry pickles, so a run connected to someone else's scheduler runs their code as the
serve user; a run pointed at another store writes wherever the parameter says.

The code a served run executes is serve's too (:func:`served_entrypoint_env`), never the
deployment's pull steps or entry point, which an API user can PATCH. Unknown parameter names are
refused by the API (:func:`close_parameter_schema`) and again by the run process
(:func:`unknown_parameters_message`).
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import settings
from ..errors import CatdaskError

__all__ = ["ENV_SERVED_STORE", "ENV_SERVED_SCHEDULER", "ServedParameterError",
           "served_store_and_scheduler", "served_output_dir", "pin_served_runs",
           "served_entrypoint_env", "close_parameter_schema", "unknown_parameters_message"]

#: Set by ``catdask serve`` in its own environment (and so in every run process it starts).
ENV_SERVED_STORE = settings.SERVED_STORE.name
ENV_SERVED_SCHEDULER = settings.SERVED_SCHEDULER.name


class ServedParameterError(CatdaskError, ValueError):
    """A served run's parameter names a store, scheduler or folder other than ``catdask
    serve``'s; the run is refused before it reads or connects to anything."""


def pin_served_runs(store, scheduler, environ=None):
    """Record in ``environ`` (default ``os.environ``) the store and the scheduler that the
    runs of this ``catdask serve`` must use (called by serve before any run starts)."""
    environ = os.environ if environ is None else environ
    environ[ENV_SERVED_STORE] = str(store)
    environ[ENV_SERVED_SCHEDULER] = str(scheduler)


def _same_path(a, b) -> bool:
    """Whether ``a`` and ``b`` name one store (a folder however spelt, or one ``s3://`` URL)."""
    from ..store.root import open_store

    return open_store(str(a)).url == open_store(str(b)).url


def served_store_and_scheduler(store, scheduler, environ=None):
    """``(store, scheduler)`` a flow run uses: its arguments outside ``catdask serve``; under serve,
    serve's own, after checking the arguments name them or nothing (else
    :class:`ServedParameterError`).
    """
    pinned_store = settings.SERVED_STORE.get(environ)
    pinned_scheduler = settings.SERVED_SCHEDULER.get(environ)
    if pinned_store is None and pinned_scheduler is None:
        return store, scheduler
    if pinned_store is not None:
        if store not in (None, "") and not _same_path(store, pinned_store):
            raise ServedParameterError(
                f"refused: this run is served by `catdask serve`, whose store is "
                f"{pinned_store}; a run parameter cannot choose another store (got "
                f"store={store!r}). Leave `store` unset, or start your own `catdask serve "
                f"--store ...`")
        store = pinned_store
    if pinned_scheduler is not None:
        if scheduler not in (None, "") and str(scheduler).strip() != pinned_scheduler:
            raise ServedParameterError(
                f"refused: this run is served by `catdask serve`, which computes on the Dask "
                f"scheduler {pinned_scheduler}; a run parameter cannot choose another "
                f"scheduler (got scheduler={scheduler!r}). Leave `scheduler` unset, or start "
                f"`catdask serve --scheduler ...`")
        scheduler = pinned_scheduler
    return store, scheduler


def served_output_dir(out_dir, store, environ=None):
    """``out_dir`` of a served evaluation, which must lie inside ``<store>/evaluations`` (None: the
    flow's default there; outside it :class:`ServedParameterError`). Outside ``catdask serve``,
    ``out_dir`` as given.
    """
    if settings.SERVED_STORE.get(environ) is None or out_dir in (None, ""):
        return out_dir
    from ..store.root import open_store

    allowed = Path(os.path.realpath(open_store(str(store)).local_folder)) / "evaluations"
    target = Path(os.path.realpath(os.path.expanduser(str(out_dir))))
    if target != allowed and allowed not in target.parents:
        raise ServedParameterError(
            f"refused: a run served by `catdask serve` writes its tables inside {allowed}; "
            f"out_dir={str(out_dir)!r} is outside it. Leave `out_dir` unset")
    return str(target)


def served_entrypoint_env(entrypoint):
    """The run-process environment that makes Prefect's engine import ``entrypoint`` (what
    serve registered) instead of loading the flow from the deployment: with
    ``PREFECT__FLOW_ENTRYPOINT`` set, ``prefect.flow_engine.load_flow`` neither reads the
    deployment's entry point nor runs its pull steps or storage (Prefect 3.8)."""
    return {"PREFECT__FLOW_ENTRYPOINT": str(entrypoint)}


def close_parameter_schema(deployment):
    """Make the API refuse (HTTP 409) a run of ``deployment`` with a parameter its flow does
    not take (``Store``, ``store_``): the schema gets ``additionalProperties: false``."""
    from prefect.utilities.callables import ParameterSchema

    class ClosedParameterSchema(ParameterSchema):
        additionalProperties: bool = False  # noqa: N815 (the JSON schema's name)

    schema = deployment._parameter_openapi_schema
    # Set explicitly: the deployment sends the schema with exclude_unset=True.
    deployment._parameter_openapi_schema = ClosedParameterSchema(
        **schema.model_dump(exclude_unset=True), additionalProperties=False)
    return deployment


def unknown_parameters_message(flow, parameters):
    """One line refusing the ``parameters`` that ``flow`` does not take, or None when all are
    its own (Prefect's engine would crash on them with two tracebacks instead)."""
    import inspect

    taken = inspect.signature(flow.fn).parameters
    unknown = sorted(set(parameters) - set(taken))
    if not unknown:
        return None
    return (f"refused: flow {flow.name} takes no parameter "
            f"{', '.join(repr(name) for name in unknown)} (its parameters: "
            f"{', '.join(taken)})")
