"""Ctrl-C in a ``catdask`` command: one line, ``interrupted``, and exit 130."""

from __future__ import annotations

import _thread
import logging
import signal
import sys
import threading
from contextlib import contextmanager

_STATE: dict = {"interrupted": False, "verbose": False,
                "unraisablehook": sys.unraisablehook}
#: Loggers whose own handlers print to the console besides the root's (distributed installs
#: one when its logging configuration is the old style).
_CONSOLE_LOGGERS = ("", "distributed")


def interrupted() -> bool:
    """Whether SIGINT arrived during the current command."""
    return _STATE["interrupted"]


class _MutedAfterInterrupt(logging.Filter):
    """Drops every record once the command was interrupted."""

    def filter(self, record):
        return not _STATE["interrupted"]


def _mute_console() -> None:
    for name in _CONSOLE_LOGGERS:
        for handler in logging.getLogger(name).handlers:
            if not any(isinstance(f, _MutedAfterInterrupt) for f in handler.filters):
                handler.addFilter(_MutedAfterInterrupt())


def _on_sigint(signum, frame):
    # Python's own handler raises KeyboardInterrupt; so does this one, after noting it.
    if not _STATE["interrupted"]:
        _STATE["interrupted"] = True
        if not _STATE["verbose"]:
            _mute_console()
    raise KeyboardInterrupt


def _redeliver_lost_interrupt(unraisable) -> None:
    """``sys.unraisablehook`` within the block: a ``KeyboardInterrupt`` raised where Python
    drops exceptions (a gc callback such as distributed's, a ``__del__``) is raised again a moment
    later, from another thread (raised at once, it would land in the same callback). Lost, it
    left ``catdask serve`` running after SIGTERM."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        timer = threading.Timer(0.1, _thread.interrupt_main)
        timer.daemon = True
        timer.start()
    else:
        _STATE["unraisablehook"](unraisable)


@contextmanager
def interrupt_handling(verbose: bool = False):
    """Within the block, SIGINT raises ``KeyboardInterrupt`` as usual and mutes console logging
    for the rest of the process (the cluster closes at exit and would log). Does nothing off
    the main thread, or when SIGINT is not at Python's default (ignored, or someone's
    handler)."""
    _STATE.update(interrupted=False, verbose=verbose)
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    previous = signal.signal(signal.SIGINT, _on_sigint)
    _STATE["unraisablehook"], sys.unraisablehook = sys.unraisablehook, _redeliver_lost_interrupt
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = _STATE["unraisablehook"]
