"""Dask worker preload of catdask's local clusters: a terminal's Ctrl-C does not kill workers,
and the worker's messages to the scheduler are batched briefly.

A terminal sends Ctrl-C (SIGINT) to its whole foreground process group: the ``catdask``
command and every process it started, including the worker processes of the embedded Dask
cluster. Left at Python's default, each worker died of ``KeyboardInterrupt`` while the
command was still running its fit (measured: a page of worker tracebacks, and the interrupted
command then waited on a dead cluster). The worker's life belongs to its nanny, which lives in
the command: the command gets the same SIGINT, stops its work and closes the cluster, and a
worker whose parent dies in any other way exits by itself (distributed watches the parent).
So a worker survives SIGINT; SIGTERM and SIGKILL still stop it.

What it does instead: it mutes its logging below CRITICAL for :data:`QUIET_SECONDS`. The
command closes the cluster within a few seconds, and a worker still running a task while the
scheduler closes under it logs lost heartbeats with tracebacks (seen in 1 of 3 interrupted
trains), which would follow the command's "interrupted" on the terminal. A session that goes on
after Ctrl-C (a Python prompt using the embedded cluster) gets its worker logs back after that.

The preload also imports what catdask's Gram tasks unpickle (the block functions of
:mod:`catdask.operators` and the kernels): on a fresh worker the first tasks paid for those
imports in the first fit on a new cluster. ``dask.array`` (70 ms, 25 MiB of RSS) is left to the
workers that read an input chunk (:mod:`catdask.distributed.preloads`, issue 27). The module
names are the preload's arguments, given by the cluster's starter
(:func:`catdask.distributed.preloads.worker_imports`: what the layers above added with
``add_worker_imports``; :mod:`catdask.operators` adds its task modules), so this package
imports no layer above it. And it shortens the worker's
message batching to the scheduler (distributed's 2 ms;
:func:`catdask.distributed.batching.shorten_worker_batching`): a Gram pass waits for its tasks'
"finished" messages.

Loaded by :func:`catdask.distributed.cluster.start_local_cluster` through distributed's worker
``preload`` (``dask_setup`` runs in each worker process, on its main thread, as it starts).
"""

from __future__ import annotations

import importlib
import logging
import signal
import threading

import click

__all__ = ["dask_setup", "survive_interrupts", "import_task_modules", "QUIET_SECONDS"]

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
    """Import the modules catdask's tasks unpickle (see the module docstring)."""
    for name in modules:
        importlib.import_module(name)
