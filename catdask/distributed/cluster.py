"""Where catdask's Dask work runs: an existing scheduler, or an embedded local cluster."""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import socket
import threading
from contextlib import contextmanager, suppress
from typing import Any

from .. import settings
from .host import limit_blas_threads, usable_cores
from .batching import MESSAGE_BATCH_SECONDS, reduce_message_batching, shorten_worker_batching
from .preloads import (
    WORKER_PRELOAD,
    add_worker_imports,
    worker_imports,
    worker_preload_argv,
    worker_preloads,
)
from .probe import ENV_SCHEDULER, address_problem, connect_scheduler, probe_scheduler
from .spawn_guard import SPAWN_GUARD_HINT, importing_main_in_a_child, started_with_hint

logger = logging.getLogger("catdask.distributed")

# One BLAS thread per worker thread; set before the worker process loads numpy.
BLAS_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# Dask settings of a catdask LocalCluster's worker processes (their nannies hand them over): no
# NVML, which every worker would otherwise load and poll for the dashboard; these workers compute
# on the CPU (GPU workers are started separately, deploy/gpu-cluster.md). An environment variable
# would not do: the nanny sets the worker's whole configuration after the environment.
WORKER_CONFIG = {"distributed.diagnostics.nvml": False}  # dotted: the nanny merges shallowly

_EMBEDDED: dict[str, Any] = {"cluster": None, "client": None, "n_workers": 0}

#: Seconds a nanny gets to bring a killed worker back before the embedded cluster replaces it
#: (a nanny restarts its worker in 1-5 s on 2 cores; a restart that fails is never retried).
WORKER_RESTART_GRACE_SECONDS = 20.0
_LOCK = threading.Lock()


def _port_free(host, port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


#: Scheduler settings for a catdask cluster. The Active Memory Manager's ReduceReplicas policy
#: would drop the copies of X made for a Gram pass (``BlockRunner.put(everywhere=True)``), and
#: the scheduler then runs a pass's tasks next to the one copy left. For a separate cluster, set
#: ``DASK_DISTRIBUTED__SCHEDULER__ACTIVE_MEMORY_MANAGER__START=False`` (deploy/dask/README.md).
SCHEDULER_CONFIG = {"distributed.scheduler.active-memory-manager.start": False}


def _abandon(cluster) -> None:
    """Kill the worker processes of a cluster whose start was interrupted, and mark it closed
    (distributed's exit hook would wait 10 s and print a traceback).
    """
    import signal

    from distributed.core import Status

    for worker in [*getattr(cluster, "_created", ()), *getattr(cluster, "workers", {}).values()]:
        pid = getattr(worker, "pid", None)  # a Nanny's worker process
        if pid:
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    cluster.status = Status.closed


def start_local_cluster(n_workers, *, threads_per_worker=1, processes=True,
                        memory_limit="auto", dashboard_address="127.0.0.1:0",
                        set_as_default=False, worker_modules=None):
    """A LocalCluster set up the way catdask computes (127.0.0.1, one BLAS thread per worker thread,
    :data:`SCHEDULER_CONFIG`), for the embedded cluster and the benchmarks. Returns
    ``(cluster, client)``. Worker processes import ``worker_modules`` as they start.
    """
    import dask
    from distributed import Client, LocalCluster

    modules = worker_imports() if worker_modules is None else list(worker_modules)
    process_kwargs = {"env": dict(BLAS_ENV), "config": WORKER_CONFIG,
                      "preload": worker_preloads(),
                      "preload_argv": worker_preload_argv(modules)} if processes else {}
    from distributed.deploy.spec import SpecCluster

    before = set(SpecCluster._instances)
    try:
        with dask.config.set(SCHEDULER_CONFIG):  # read once, when the scheduler starts
            cluster = LocalCluster(
                n_workers=n_workers,
                threads_per_worker=threads_per_worker,
                processes=processes,
                host="127.0.0.1",
                dashboard_address=dashboard_address,
                memory_limit=memory_limit,
                **process_kwargs,
            )
        client = Client(cluster, set_as_default=set_as_default)
    except BaseException:  # a signal mid start-up (serve's parent died): leave nothing behind
        for half_started in set(SpecCluster._instances) - before:
            _abandon(half_started)
        raise
    client.run(limit_blas_threads, 1)
    reduce_message_batching(client, getattr(cluster, "scheduler", None))
    if not processes:  # in-process workers: no preload ran
        for worker in cluster.workers.values():
            shorten_worker_batching(worker)
    return cluster, client


def default_threads_per_worker(cores=None):
    """Threads per worker process of the embedded cluster on a machine of ``cores`` cores: one up to
    7 cores, 2 from 8 on. The tile tasks release the GIL, so two threads share a process at no cost
    and save a process's memory; four lost speed (docs/benchmarks.md, bench_device).
    """
    cores = usable_cores() if cores is None else cores
    return 1 if cores < 8 else 2


def embedded_cluster(*, n_workers=None, threads_per_worker=None, processes=True,
                     memory_limit="auto", dashboard_port=8787):
    """Start (once per process) and return the embedded LocalCluster's client: by default one worker
    thread per usable core (:func:`.host.usable_cores`), :func:`default_threads_per_worker` threads
    per worker process (``processes=False``: worker threads in this process), ``memory_limit`` per
    worker as :class:`distributed.LocalCluster` takes it, the dashboard on ``dashboard_port`` when
    free (else any free port, logged).
    """
    with _LOCK:
        client = _EMBEDDED["client"]
        if client is not None and client.status == "running":
            return client
        if threads_per_worker is None:
            threads_per_worker = default_threads_per_worker()
        if n_workers is None:
            n_workers = max(1, usable_cores() // threads_per_worker)
        if processes and importing_main_in_a_child():
            # One line in the worker, not a nested cluster's bootstrapping error.
            raise SystemExit(f"catdask: {SPAWN_GUARD_HINT}.")
        dash = (
            f"127.0.0.1:{dashboard_port}" if _port_free("127.0.0.1", dashboard_port)
            else "127.0.0.1:0"
        )
        cluster, client = started_with_hint(lambda: start_local_cluster(
            n_workers, threads_per_worker=threads_per_worker, processes=processes,
            memory_limit=memory_limit, dashboard_address=dash,
        ))
        _EMBEDDED.update(cluster=cluster, client=client, n_workers=n_workers)
        logger.info("started embedded Dask cluster %s, dashboard %s",
                    cluster.scheduler_address, client.dashboard_link)
        return client


async def _close_workers(cluster, timeout):
    await asyncio.gather(*(worker.close(timeout=timeout)
                           for worker in list(cluster.workers.values())),
                         return_exceptions=True)


def quiet_embedded_workers() -> int:
    """Mute the embedded cluster's worker processes as a terminal's Ctrl-C does
    (:mod:`.worker_setup`), for a command that stops on another signal (SIGTERM to ``catdask
    serve``); returns how many.
    """
    import signal

    cluster = _EMBEDDED["cluster"]
    pids = [getattr(worker, "pid", None)
            for worker in list(getattr(cluster, "workers", {}).values())]
    quieted = 0
    for pid in pids:
        if pid:
            try:
                os.kill(pid, signal.SIGINT)
                quieted += 1
            except OSError:  # gone already
                pass
    return quieted


def close_embedded_cluster(worker_timeout=None):
    """Close the embedded cluster started by :func:`dask_client_context` (no-op when none).
    ``worker_timeout`` (seconds): kill a worker still running a task after that long, instead of
    distributed's 4 s.
    """
    with _LOCK:
        client, cluster = _EMBEDDED["client"], _EMBEDDED["cluster"]
        _EMBEDDED.update(cluster=None, client=None, n_workers=0)
    if cluster is not None and worker_timeout is not None and hasattr(cluster, "sync"):
        try:
            cluster.sync(_close_workers, cluster, worker_timeout)
        except Exception:  # noqa: BLE001 - cluster.close() below still closes what is left
            logger.debug("closing the workers early failed", exc_info=True)
    if client is not None:
        client.close()
    if cluster is not None:
        cluster.close()


atexit.register(close_embedded_cluster)


def _worker_names(client):
    """Names of the workers the scheduler has now (asked, not the client's cached info)."""
    return client.run_on_scheduler(
        lambda dask_scheduler: sorted(ws.name for ws in dask_scheduler.workers.values()))


def restore_embedded_workers(timeout=None):
    """Bring the embedded cluster back to the size it was started with: a killed worker whose nanny
    cannot restart it within ``timeout`` seconds (default :data:`WORKER_RESTART_GRACE_SECONDS`) is
    replaced (distributed never retries). Returns ``(n_running, n_expected)``, ``(0, 0)`` without an
    embedded cluster; warns when the cluster stays below its size.
    """
    with _LOCK:
        cluster, client, expected = (_EMBEDDED["cluster"], _EMBEDDED["client"],
                                     _EMBEDDED["n_workers"])
    if cluster is None or client is None or client.status != "running":
        return 0, 0
    timeout = WORKER_RESTART_GRACE_SECONDS if timeout is None else timeout
    present = _worker_names(client)
    if len(present) >= expected:
        return len(present), expected
    try:
        client.wait_for_workers(expected, timeout=timeout)
        return expected, expected
    except TimeoutError:
        pass
    present = set(_worker_names(client))
    lost = [name for name in list(cluster.worker_spec) if name not in present]
    logger.warning("embedded Dask cluster: worker(s) %s lost and not restarted within %g s; "
                   "starting replacements", ", ".join(map(str, lost)), timeout)
    for name in lost:
        # The lost worker's nanny is closed and forgotten; scaling to the spec's size then
        # starts a new nanny and worker under the same name.
        nanny = cluster.workers.pop(name, None)
        if nanny is not None:
            try:
                cluster.sync(nanny.close, reason="catdask: replacing a lost worker")
            except Exception:  # noqa: BLE001 - already dead is what we expect
                logger.debug("closing the lost worker's nanny failed", exc_info=True)
    cluster.scale(expected)
    try:
        client.wait_for_workers(expected, timeout=3 * timeout)  # a new worker's start
    except TimeoutError:
        n = len(_worker_names(client))
        logger.warning("embedded Dask cluster runs degraded: %d of %d workers", n, expected)
        return n, expected
    logger.warning("embedded Dask cluster back at %d workers", expected)
    return expected, expected


def _current_client():
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


@contextmanager
def dask_client_context(address=None, *, security=None, **cluster_kwargs):
    """Context manager yielding the :class:`distributed.Client` that catdask computes on.

    A client connected here is closed on exit; its workers are checked against the driver's
    software before and after the block (:class:`~catdask.errors.WorkerEnvironmentError`).

    Parameters
    ----------
    address : str, optional
        Scheduler address such as ``"tcp://10.0.0.5:8786"``. Default: ``$CATDASK_SCHEDULER``,
        then the current client, then the embedded local cluster.
    security : distributed.security.Security, optional
        TLS settings for ``tls://`` addresses (see ``deploy/dask/README.md``).
    **cluster_kwargs
        Passed to :func:`embedded_cluster` when the embedded cluster is started.

    Examples
    --------
    >>> from catdask.distributed.cluster import dask_client_context
    >>> with dask_client_context() as client:  # doctest: +SKIP
    ...     KernelCategorySpace().fit(dask_X, y)
    """
    from distributed import Client

    address = address or settings.SCHEDULER.get()
    if address:
        from .worker_check import check_worker_software, check_workers_that_joined

        client = connect_scheduler(address, security=security)
        try:
            checked = check_worker_software(client, address)
            with client.as_current():
                yield client
            # Before the caller uses the work's result: workers that joined meanwhile.
            check_workers_that_joined(client, address, checked)
        finally:
            client.close()
        return
    client = _current_client()
    if client is not None:
        yield client
        return
    client = embedded_cluster(**cluster_kwargs)
    restore_embedded_workers()
    with client.as_current():
        yield client
    # Work that lost a worker completed on the others (Dask recomputes what the lost worker
    # held); say so, and restore the cluster for the next fit.
    n, expected = len(_worker_names(client)), _EMBEDDED["n_workers"]
    if n < expected:
        logger.warning("embedded Dask cluster lost a worker during this work: %d of %d "
                       "workers left", n, expected)
        restore_embedded_workers()
