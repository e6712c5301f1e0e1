"""Running one pass: a handful of block tasks as one small Dask graph."""

from __future__ import annotations

import collections
import itertools
import uuid

from .host import available_memory_bytes, usable_cores

_COUNTER = itertools.count()

#: Bytes of task results a :meth:`BlockRunner.reduce` may gather to the driver to combine
#: there instead of in a tree on the workers.
DRIVER_COMBINE_BYTES = 64 * 1024**2

#: A per-pass input (z, V) is copied into every task of a pass up to this many bytes in all
#: (saves a worker-to-worker hop per pass); a larger one goes once, as a graph key the tasks
#: share.
INLINE_BYTES = 8 * 1024**2

#: Tries of :func:`scatter_everywhere` when workers are lost while it copies.
SCATTER_ATTEMPTS = 3


def current_client():
    """The current distributed client, or None (then the threaded scheduler is used)."""
    import dask

    if str(dask.config.get("scheduler", "")).lower() not in ("", "none", "distributed",
                                                             "dask.distributed"):
        return None
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def _identity(x):
    return x


def _untokenized(graph):
    """``graph`` as the expression ``Client.get`` makes of a dict, with a random token: hashing the
    whole graph (per-pass inputs included) costs the driver time, and the keys here are unique
    already (:meth:`BlockRunner.new_key`). A Dask without this expression class gets the dict.
    """
    try:
        from dask._expr import LLGExpr

        return LLGExpr(graph, _determ_token=uuid.uuid4().hex)
    except (ImportError, TypeError):
        return graph


def _keep_no_sent_messages(client):
    """Stop ``client`` keeping the messages it sent the scheduler. distributed logs the last 1000
    under 1 MB each (``recent_message_log``, ``distributed.admin.low-level-log-length``, a log for
    its developers), and a pass's graph carries its inputs (z, Anderson's history entries): on
    the driver, up to 1000 of them for the rest of the fit (measured: every iteration's z and
    history entries at N = 10,000, benchmarks/driver_memory.py)."""
    stream = getattr(client, "scheduler_comm", None)
    if stream is not None and hasattr(stream, "recent_message_log"):
        stream.recent_message_log = collections.deque(maxlen=0)


def scatter_everywhere(client, data: dict) -> dict:
    """``client.scatter(data, broadcast=True, hash=False)`` (``data``: key -> value; returns
    key -> future) that a worker lost on the way cannot hang.

    distributed's broadcast copies to the list of workers it started with and loops until each
    holds a copy: a worker killed during the copies hung a fit for good (the multi-host test's
    train, past 600 s, in CI). Here one copy is scattered, then replicated to the workers alive
    (the scheduler's live set: a lost worker ends the copying with an error); on that error a
    key still held somewhere is fine (tasks fetch what their worker lacks), one whose only copy
    was lost is scattered again. A lost scheduler is not retried: its own error is raised.
    """
    last: BaseException | None = None
    for _ in range(SCATTER_ATTEMPTS):
        futures = None
        try:
            futures = client.scatter(data, hash=False)
            client.replicate(list(futures.values()))
            return futures
        except Exception as exc:  # noqa: BLE001 - distributed raises OSError, ValueError or
            last = exc            # AssertionError when a worker goes during the copies
        if client.status != "running":  # the scheduler, not a worker, is gone (CI, 12-03:
            raise last                  # 'workers were lost' was said of a killed scheduler)
        if futures is not None:
            held = client.who_has(list(futures.values()))
            if all(held.get(key) for key in data):
                return futures
    raise RuntimeError(f"could not place {len(data)} value(s) on the Dask workers: workers "
                       f"were lost {SCATTER_ATTEMPTS} times in a row ({last!r})") from last


class BlockRunner:
    """Submit graphs of block tasks to the current client (or local threads)."""

    def __init__(self):
        self.client = current_client()
        if self.client is not None:
            _keep_no_sent_messages(self.client)
        self._data = {}  # persisted: key -> Future (distributed) or value (local)
        self._graphs = {}  # tasks of lazily read arrays (e.g. zarr chunks), merged per pass

    @staticmethod
    def new_key(name):
        return f"catdask-{name}-{next(_COUNTER)}-{uuid.uuid4().hex[:12]}"

    def _get(self, dsk, keys, sync=True, resources=None):
        graph = {**self._data, **self._graphs, **dsk}
        if self.client is not None:
            return self.client.get(_untokenized(graph), keys, sync=sync, resources=resources)
        import dask.threaded

        return dask.threaded.get(graph, keys)

    def put(self, value, name="data", *, everywhere=False):
        """Hold ``value`` on the cluster (recomputable); returns its key. ``everywhere=True`` copies
        it to every worker, for an input every block task reads: the scheduler places tasks next to
        their data, so a single copy put nearly every task on one worker.
        """
        (key,) = self.put_many({name: value}, everywhere=everywhere)
        return key

    def put_many(self, values, *, everywhere=False):
        """:meth:`put` for several values (a dict name -> value) in one round trip (and one
        replication); returns their keys in order."""
        keys = [self.new_key(name) for name in values]
        if self.client is not None and everywhere:
            # Scattered to every worker, not sent inside a graph (a large graph makes Dask warn);
            # the copies on every worker stand in for the graph's recomputability.
            scattered = scatter_everywhere(self.client, dict(zip(keys, values.values())))
            self._data.update((key, scattered[key]) for key in keys)
        elif self.client is not None:
            graph = {key: (_identity, value) for key, value in zip(keys, values.values())}
            futures = self.client.get(graph, keys, sync=False)
            self._data.update(zip(keys, futures))
        else:
            self._data.update(zip(keys, values.values()))
        return keys

    def persist(self, tasks, name="block"):
        """Compute ``tasks`` (a list of task tuples) and keep the results; returns their keys."""
        keys = [self.new_key(name) for _ in tasks]
        dsk = dict(zip(keys, tasks))
        values = self._get(dsk, keys, sync=self.client is None)
        self._data.update(zip(keys, values))
        return keys

    def array_keys(self, X, persist=False):
        """Keys of the row blocks of a 2-D Dask array (one column block)."""
        if persist:
            if self.client is not None:
                from distributed import futures_of

                X = self.client.persist(X)
                self._data.update({f.key: f for f in futures_of(X)})
            else:
                X = X.persist(scheduler="threads")
                self._data.update(dict(X.__dask_graph__()))
        else:
            self._graphs.update(dict(X.__dask_graph__()))
        return [(X.name, i, 0) for i in range(X.numblocks[0])]

    def forget(self, keys):
        """Drop the persisted values of ``keys`` (None entries are skipped)."""
        for key in keys:
            self._data.pop(key, None)

    def run(self, tasks, name="task", extra=None, resources=None):
        """Run a list of task tuples as one graph; returns their results in order."""
        keys = [self.new_key(name) for _ in tasks]
        return list(self._get({**(extra or {}), **dict(zip(keys, tasks))}, keys,
                              resources=resources))

    def accumulate(self, tasks, add, name="task", extra=None):
        """Run ``tasks`` and call ``add(result)`` on the driver for each result as it finishes. For
        sums whose parts are large next to the adding (the tile pass's row bands): each part travels
        once, as soon as its task ends, where a tree on the workers (:meth:`reduce`) would start
        only after the slowest task.
        """
        keys = [self.new_key(name) for _ in tasks]
        dsk = {**(extra or {}), **dict(zip(keys, tasks))}
        if self.client is None:
            for part in self._get(dsk, keys):
                add(part)
            return
        from distributed import as_completed

        futures = self._get(dsk, keys, sync=False)
        for _, part in as_completed(futures, with_results=True):
            add(part)

    def reduce(self, tasks, combine, name="task", fanin=8, extra=None, part_nbytes=None):
        """Run ``tasks`` and combine their results with ``combine(*parts)`` in a tree on the workers
        (``extra``: graph entries the tasks refer to); the driver gets one result. Few, small parts
        (``part_nbytes`` given, at most ``fanin``, :data:`DRIVER_COMBINE_BYTES` in all) are combined
        on the driver instead, which is cheaper than the tree's extra hop.
        """
        if (part_nbytes is not None and len(tasks) <= fanin
                and len(tasks) * part_nbytes <= DRIVER_COMBINE_BYTES):
            return combine(*self.run(tasks, name, extra=extra))
        dsk = dict(extra or {})
        level = []
        for t in tasks:
            key = self.new_key(name)
            dsk[key] = t
            level.append(key)
        while len(level) > 1:
            nxt = []
            for i in range(0, len(level), fanin):
                key = self.new_key(f"{name}-combine")
                dsk[key] = (combine, *level[i : i + fanin])
                nxt.append(key)
            level = nxt
        return self._get(dsk, level)[0]

    def release(self):
        """Drop every persisted value (futures are released on the cluster)."""
        self._data.clear()
        self._graphs.clear()


def cluster_resources():
    """``(threads, memory_bytes)`` of the cluster the current Dask client talks to."""
    try:
        from distributed import default_client

        info = default_client().scheduler_info(n_workers=-1)["workers"]
    except (ImportError, ValueError, TypeError):
        info = None
    if info:
        threads = sum(w.get("nthreads", 1) for w in info.values())
        memory = sum(w.get("memory_limit") or 0 for w in info.values())
        if memory:
            return max(threads, 1), int(memory)
        return max(threads, 1), available_memory_bytes()
    return usable_cores(), available_memory_bytes()


def workers_with_resource(client, resource):
    """How many of ``client``'s workers declare the Dask worker resource ``resource``
    (``dask worker --resources GPU=1``); 0 without a client."""
    if client is None:
        return 0
    return count_with_resource(client.scheduler_info(n_workers=-1)["workers"], resource)


def count_with_resource(workers, resource):
    """How many of ``workers`` (a scheduler's ``identity()["workers"]``: address -> worker
    identity) declare the resource ``resource``."""
    return sum(1 for w in workers.values() if (w.get("resources") or {}).get(resource))


