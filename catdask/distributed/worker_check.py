"""Check that a user-given cluster's workers run the driver's software, before any work."""

from __future__ import annotations

#: What must match between the driver and every worker.
_COMPARED = ("python", "catdask", "catdask sources sha256", "dask", "distributed", "numpy")
#: Compared by major.minor only: a patch release of Python or NumPy changes neither what a task
#: pickles nor the arithmetic catdask relies on, and clusters built from images of different
#: dates often differ there (distributed itself only warns about it).
_MINOR_ONLY = ("python", "numpy")
#: A worker's ``True`` here refuses it whatever the driver's value (see check_worker_software).
_STALE = "catdask sources changed since import"


def _compared(key, version):
    if key in _MINOR_ONLY and isinstance(version, str):
        return ".".join(version.split(".")[:2])
    return version


def software_versions() -> dict:
    """The versions :func:`check_worker_software` compares, for this process."""
    import platform

    import dask
    import distributed
    import numpy

    from ..versions import installed_version, source_sha256, sources_changed_since_import

    return {"python": platform.python_version(), "catdask": installed_version(),
            "catdask sources sha256": source_sha256()[:12], "dask": dask.__version__,
            "distributed": distributed.__version__, "numpy": numpy.__version__,
            _STALE: sources_changed_since_import()}


def _set_up_worker(n_threads):
    # Runs on each worker; unpickling it imports catdask there, which is the first check.
    from .host import limit_blas_threads

    limit_blas_threads(n_threads)
    return software_versions()


def _short(exc: BaseException) -> str:
    text = str(exc).strip()
    return text if len(text) <= 200 else text[:197] + "..."


def check_worker_software(client, address, n_threads=1, workers=None) -> dict:
    """Set every worker of ``client`` (or those in ``workers``: the ones that joined during
    the work) to ``n_threads`` BLAS threads and check that each runs the driver's Python and
    numpy (major.minor), catdask (version and sources), dask and distributed.
    Returns ``{worker address: versions}``. Raises
    :class:`catdask.errors.WorkerEnvironmentError` naming the workers that cannot import
    catdask, whose catdask sources changed on disk after they imported it, or the first
    differing version and the workers that have it."""
    from ..errors import WorkerEnvironmentError

    where = (f"the {{}} Dask workers of {address}" if workers is None else
             f"the {{}} Dask workers that joined {address} during this work (its result is "
             "not used)")
    hint = ("every worker needs the driver's Python environment: the same catdask, dask, "
            "distributed and numpy (deploy/dask/README.md, Requirements on the workers)")
    some = {} if workers is None else {"workers": list(workers)}
    replies = client.run(_set_up_worker, n_threads, on_error="return", **some)
    failed = {w: r for w, r in replies.items() if isinstance(r, BaseException)}
    if failed:
        worker, exc = sorted(failed.items())[0]
        raise WorkerEnvironmentError(
            f"{len(failed)} of {where.format(len(replies))} cannot run catdask's set-up task "
            f"({worker}: {_short(exc)}); {hint}")
    # Before the versions: a stale worker's versions describe its files, not the code it runs.
    # Only the workers: this check asks whether they compute with the driver's code; whether
    # the driver runs what its own files say is not a property of the cluster it connects to.
    stale = sorted(w for w, v in replies.items() if v.get(_STALE) is True)
    if stale:
        workers = ", ".join(stale[:3]) + (" ..." if len(stale) > 3 else "")
        raise WorkerEnvironmentError(
            f"{len(stale)} of {where.format(len(replies))} had their catdask sources changed "
            f"on disk after they imported catdask ({workers}); restart those workers: they run "
            "the catdask they imported before the change, not the one installed now")
    mine = software_versions()
    for key in _COMPARED:
        other = sorted({(v.get(key), w) for w, v in replies.items()
                        if _compared(key, v.get(key)) != _compared(key, mine[key])})
        if other:
            theirs = sorted({v for v, _ in other})
            workers = ", ".join(w for _, w in other[:3]) + (" ..." if len(other) > 3 else "")
            raise WorkerEnvironmentError(
                f"{len(other)} of {where.format(len(replies))} run {key} "
                f"{' / '.join(map(str, theirs))}, the driver {mine[key]} ({workers}); {hint}")
    return replies


def check_workers_that_joined(client, address, checked, n_threads=1) -> dict:
    """Check, as :func:`check_worker_software` does, the workers ``client``'s scheduler has now that
    are not in ``checked``: called when the work ends, so a worker that joined with other software
    fails the work. Returns their versions (``{}`` when none joined).
    """
    joined = sorted(set(client.scheduler_info(n_workers=-1)["workers"]) - set(checked))
    if not joined:
        return {}
    return check_worker_software(client, address, n_threads, workers=joined)
