"""What the workers of catdask's local clusters load as they start: the preload and its modules."""

from __future__ import annotations

#: Worker preload of catdask's local clusters (:mod:`.worker_setup`): workers ignore a
#: terminal's Ctrl-C, which the command that owns them handles.
WORKER_PRELOAD = "catdask.distributed.worker_setup"


#: Modules a worker imports as it starts: what catdask's tasks unpickle.
_WORKER_IMPORTS: list[str] = []


def add_worker_imports(*modules: str) -> None:
    """Have the workers of local clusters started from now on import ``modules`` as they
    start (:mod:`catdask.operators` adds its block functions and the kernels on import)."""
    for name in modules:
        if name not in _WORKER_IMPORTS:
            _WORKER_IMPORTS.append(name)


def worker_imports() -> list[str]:
    """The modules a new local cluster's workers import as they start."""
    return list(_WORKER_IMPORTS)


def _configured_preloads():
    """The user's ``distributed.worker.preload`` list and its ``preload-argv``, one list of
    arguments per preload."""
    import dask

    configured = dask.config.get("distributed.worker.preload", default=None) or []
    if isinstance(configured, str):
        configured = [configured]
    argv = dask.config.get("distributed.worker.preload-argv", default=None) or []
    if argv and all(isinstance(a, str) for a in argv):  # one list for every preload
        argv = [list(argv)] * len(configured)
    if len(argv) != len(configured):
        argv = [[] for _ in configured]
    pairs = [(p, list(a)) for p, a in zip(configured, argv) if p != WORKER_PRELOAD]
    return [p for p, _ in pairs], [a for _, a in pairs]


def worker_preloads():
    """The user's ``distributed.worker.preload`` list plus :data:`WORKER_PRELOAD` (passing
    ``preload=`` to a cluster replaces the configured list, so it is carried over)."""
    return [*_configured_preloads()[0], WORKER_PRELOAD]


def worker_preload_argv(modules):
    """The arguments of :func:`worker_preloads`, one list per preload: the user's, then the
    modules for :mod:`.worker_setup` to import."""
    return [*_configured_preloads()[1], [str(m) for m in modules]]
