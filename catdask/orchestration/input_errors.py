"""A flow run that fails on a foreseen error ends Failed with one log line, not tracebacks.

Foreseen errors are catdask's own (:class:`~catdask.errors.CatdaskError`), whose messages name
the problem and what to do. Prefect logs an exception that ends a run with its traceback once
for each run it passes through (task run, flow run, engine). Here:

- :func:`fails_plainly` (under ``@flow``): a foreseen error ends the run Failed, with the
  message as the state message and the exception as the state's data (a direct call still
  raises it); it is logged once, at ERROR, when the flow body raised it.
- :class:`NoForeseenTracebacks`, on Prefect's run and engine loggers while a flow runs, drops
  the records that carry a foreseen error's traceback, for the API and the console alike.

Anything else is a bug: the flow re-raises it with its traceback. An error raised while
Prefect's engine handled a termination signal is the signal's doing: :func:`fails_plainly`
re-raises the :class:`~prefect.exceptions.TerminationSignal` itself, so the run ends as any
terminated run does.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import sys
import typing

from prefect import get_run_logger
from prefect.context import FlowRunContext
from prefect.states import Failed

from ..core.progress import CONSOLE_REPEATED
from ..errors import CatdaskError, ParameterError

__all__ = ["fails_plainly", "parameter_checks", "run_as_script", "NoForeseenTracebacks",
           "FORESEEN_ERRORS", "PREFECT_RUN_LOGGERS"]

#: The errors a flow run reports in one line: catdask's own, whose messages say what is wrong.
FORESEEN_ERRORS = (CatdaskError,)
#: Where Prefect logs a failed run's exception with its traceback (task runs, flow runs, the
#: engine of a deployment run).
PREFECT_RUN_LOGGERS = ("prefect.task_runs", "prefect.flow_runs", "prefect.engine")


class NoForeseenTracebacks(logging.Filter):
    """Drop a log record that carries a foreseen error's traceback (see the module docstring);
    every other record, a bug's traceback included, passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, FORESEEN_ERRORS)


def _install_filter() -> None:
    # Idempotent, and at run time rather than at import: importing a flow changes no logging.
    for name in PREFECT_RUN_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, NoForeseenTracebacks) for f in logger.filters):
            logger.addFilter(NoForeseenTracebacks())


def _raised_in_a_task(exc: BaseException) -> bool:
    """Whether ``exc`` came out of a task run (the flows call their tasks in the flow's own
    thread, so its traceback passes through Prefect's task engine)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_globals.get("__name__") == "prefect.task_engine":
            return True
        tb = tb.tb_next
    return False


def _termination_behind(exc: BaseException) -> BaseException | None:
    """The termination signal ``exc`` was raised while handling, if any (its ``__context__``
    chain; see the module docstring)."""
    from prefect.exceptions import TerminationSignal

    seen: set[int] = set()
    cause = exc.__context__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, TerminationSignal):
            return cause
        seen.add(id(cause))
        cause = cause.__context__
    return None


@contextlib.contextmanager
def parameter_checks():
    """A ``ValueError`` raised inside (a flow's own checks of its parameters: the model spec,
    the data set's shape) becomes a :class:`~catdask.errors.ParameterError` with the same
    message, so the run reports it as a foreseen error; catdask's own errors pass unchanged."""
    try:
        yield
    except CatdaskError:
        raise
    except ValueError as exc:
        raise ParameterError(str(exc)) from exc


def fails_plainly(fn):
    """Decorator (under ``@flow``): a foreseen error of the flow run ends it Failed, in one line.

    Only when ``fn`` runs as the body of its own flow run; called otherwise (``flow.fn(...)``)
    it raises as a plain function would.
    """

    @functools.wraps(fn)
    def run(*args, **kwargs):
        _install_filter()
        try:
            return fn(*args, **kwargs)
        except FORESEEN_ERRORS as exc:
            context = FlowRunContext.get()
            if context is None or context.flow is None or context.flow.fn is not run:
                raise
            message = str(exc)
            if not _raised_in_a_task(exc):
                # The CLI prints the same error in its own words: left off its quiet console.
                get_run_logger().error(message, extra={CONSOLE_REPEATED: True})
            return Failed(message=message, data=exc)
        except Exception as exc:
            signal = _termination_behind(exc)
            if signal is None:
                raise
            raise signal from None

    # Prefect builds the run form and checks the parameters from the signature; the flows'
    # modules postpone annotations (strings), which would be resolved in this module's
    # namespace: give the wrapper the signature with them resolved in ``fn``'s.
    hints = typing.get_type_hints(fn, include_extras=True)
    signature = inspect.signature(fn)
    run.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[p.replace(annotation=hints.get(p.name, p.annotation))
                    for p in signature.parameters.values()],
        return_annotation=hints.get("return", signature.return_annotation))
    run.__annotations__ = hints
    return run


def run_as_script(flow, *args, **kwargs) -> None:
    """``python flows/train.py iris``: run ``flow``, print its result; a foreseen error is one
    line on stderr and exit code 3, as ``catdask`` says it."""
    try:
        print(flow(*args, **kwargs))
    except FORESEEN_ERRORS as exc:
        print(f"{os.path.basename(sys.argv[0])}: error: {exc}", file=sys.stderr)
        raise SystemExit(3) from None
