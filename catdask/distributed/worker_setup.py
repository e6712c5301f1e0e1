"""Dask worker preload of catdask's local clusters: a terminal's Ctrl-C does not kill workers.

A worker's life belongs to its nanny, which gets the same SIGINT and closes the cluster; the
preload also imports what catdask's tasks unpickle and shortens the worker's message batching.
"""

from __future__ import annotations

import importlib
import logging
import signal
import threading

import click

#: Seconds a worker's logging stays muted after SIGINT.
QUIET_SECONDS = 60.0


def _quiet_for_a_while(signum, frame):
    """SIGINT handler: mute logging below CRITICAL, restored after :data:`QUIET_SECONDS`."""
    logging.disable(logging.ERROR)
    restore = threading.Timer(QUIET_SECONDS, logging.disable, (logging.NOTSET,))
    restore.daemon = True
    restore.start()


def survive_interrupts() -> bool:
    """Make SIGINT mute this process's logging for a while instead of raising
    ``KeyboardInterrupt``; returns False (and does nothing) off the main thread, where Python
    cannot change signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        return False
    signal.signal(signal.SIGINT, _quiet_for_a_while)
    return True


@click.command()
@click.argument("modules", nargs=-1)
def dask_setup(worker, modules: tuple[str, ...] = ()) -> None:
    """Distributed's preload hook, called once in each worker process as it starts; its
    arguments (``preload_argv``) are the modules to import."""
    from .batching import shorten_worker_batching

    survive_interrupts()
    shorten_worker_batching(worker)
    import_task_modules(modules)


def import_task_modules(modules) -> None:
    """Import the modules catdask's tasks unpickle (named by the preload's arguments)."""
    for name in modules:
        importlib.import_module(name)
