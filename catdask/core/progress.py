"""The solver's progress listener for the current context (a CLI bar, a Prefect task's log)."""

from __future__ import annotations

import contextlib
import contextvars

#: The stages :class:`catdask.core.precision.Float32ThenFloat64` reports as its phases begin
#: (the polish's loop counts its iterations from 1 again).
SOLVER_PHASES = ("float32 phase", "float64 polish")

#: A run log record with ``extra={CONSOLE_NOTE: True}`` is also shown on the CLI's quiet
#: console, as one of the command's own lines (e.g. where the Dask dashboard is while a fit
#: runs); every other INFO record goes to the Prefect API only.
CONSOLE_NOTE = "catdask_console_note"
#: A run log record with ``extra={CONSOLE_REPEATED: True}`` is left off the CLI's quiet
#: console, where the command reports the same outcome in its own words; the API still gets it.
CONSOLE_REPEATED = "catdask_console_repeated"

_SOLVER_CALLBACK: contextvars.ContextVar = contextvars.ContextVar("catdask_solver_callback",
                                                                 default=None)


@contextlib.contextmanager
def solver_progress(callback):
    """Within the block, every solver loop calls ``callback(iteration, objective, step,
    active)`` (or None) after every iteration of the batch of restarts, with arrays over all
    restarts (:func:`catdask.core.solver.solve`). A callback with a ``stage(text)`` attribute
    also hears :func:`report_stage`.
    """
    token = _SOLVER_CALLBACK.set(callback)
    try:
        yield callback
    finally:
        _SOLVER_CALLBACK.reset(token)


# Process-wide watchers (the CLI's progress bar): they see every solver loop of this process,
# also those run in a flow's task threads, whose context a ContextVar does not reach.
_WATCHERS: list = []


@contextlib.contextmanager
def watch_solvers(callback):
    """Within the block, every solver loop of this process also reports to ``callback``
    (same arguments as for :func:`solver_progress`)."""
    _WATCHERS.append(callback)
    try:
        yield callback
    finally:
        _WATCHERS.remove(callback)


_QUIET: contextvars.ContextVar = contextvars.ContextVar("catdask_solvers_quiet", default=False)


@contextlib.contextmanager
def quiet_solvers():
    """Within the block (this thread or task), solver loops report to no listener, watchers
    included: fits that are not the one being followed (the training metrics' cross-validation
    folds) must not show in its progress. Their loops' best objectives are a fold's, not the
    model's: the train run's progress artifact ended on a fold's 110.86 for a model of 169.31."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


def current_solver_callback():
    """The listener of the innermost :func:`solver_progress` block plus any watchers, or None
    (always None inside :func:`quiet_solvers`)."""
    listeners = _listeners()
    if not listeners:
        return None
    if len(listeners) == 1:
        return listeners[0]

    def notify(*args):
        for listener in listeners:
            listener(*args)

    return notify


def report_stage(text):
    """Tell the current listeners that a long stage after the solver loops began or moved on (the
    certificate can take minutes after the last iteration). Listeners with a ``stage(text)``
    attribute get ``text`` (what is running now, in a few words); the others, and every
    listener inside :func:`quiet_solvers`, get nothing.
    """
    for listener in _listeners():
        stage = getattr(listener, "stage", None)
        if stage is not None:
            stage(text)


def _listeners():
    """The innermost :func:`solver_progress` block's listener and the watchers; none inside
    :func:`quiet_solvers`."""
    if _QUIET.get():
        return []
    return [c for c in (_SOLVER_CALLBACK.get(), *_WATCHERS) if c is not None]
