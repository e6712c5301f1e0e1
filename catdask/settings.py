"""The one place catdask reads environment variables: each one, what it sets, who reads it.

catdask is configured by estimator parameters (and, for the pipeline, the ``ModelSpec`` a model
is trained and retrained with) and by the environment variables below. Every read of one goes
through its :class:`Setting` here, at the moment it is needed (never at import, so a variable
exported or monkeypatched later still applies). An empty value counts as unset. Standard
library only: the CLI's argument checks read it before anything heavy is imported.

=============================  ===============================================================
Variable                       What it sets (when unset or empty) -- read by
=============================  ===============================================================
``CATDASK_STORE``              The store: a folder or ``s3://bucket/prefix``
                               (``./catdask-store``) -- ``store.root.open_store``,
                               ``store.layout.resolve_store``, ``cli.checks``
``CATDASK_SCHEDULER``          The Dask scheduler the fits and flows compute on (an embedded
                               local cluster) -- ``distributed.cluster.dask_client_context``,
                               ``cli.runtime.scheduler_address``, ``serve.serve``
``CATDASK_SERVE_LIMIT``        Flow runs ``catdask serve`` runs at once, a whole number >= 1
                               (from the cores and memory) -- ``serve.resolve_run_limit``
``CATDASK_CATALOG``            The data-set catalog file (the one shipped in the package) --
                               ``catalog.entries.load_catalog``
``CATDASK_SOURCE_DIR``         A folder with the original UCI files, flat or one subfolder per
                               data set (only ``source_dir`` and ``../shared/data/uci``) --
                               ``catalog.sources.source_folders``
``CATDASK_MAX_TABLE_BYTES``    The largest table file read, in bytes (16 GiB) --
                               ``catalog.tables``
``CATDASK_SERVED_STORE``       Set by ``catdask serve`` for its run processes: the only store
                               a served run may use (unset: any) --
                               ``orchestration.served.served_store_and_scheduler``
``CATDASK_SERVED_SCHEDULER``   Likewise, the only Dask scheduler a served run may use --
                               ``orchestration.served.served_store_and_scheduler``
``PREFECT_API_AUTH_STRING``    The Prefect API's credentials for clients; Prefect reads it too
                               (none) -- ``serve.serve`` hands it to its runner
``PREFECT_API_URL``            The Prefect API the flows report to; Prefect reads it too (a
                               temporary local server; ``catdask serve`` starts its own) --
                               ``cli.runtime``, ``cli.demo``, ``serve.serve``
``PREFECT_HOME``               Prefect's home; Prefect reads it too (``<store>/.prefect`` for
                               the CLI) -- ``cli.runtime``
``PREFECT_PROFILES_PATH``      Prefect's profiles file, read as Prefect reads it for a
                               profile's ``PREFECT_API_URL`` (``$PREFECT_HOME/profiles.toml``)
                               -- ``cli.runtime.profile_api_url``
``PREFECT_PROFILE``            The active Prefect profile, likewise (the file's ``active``) --
                               ``cli.runtime.profile_api_url``
``HOME``                       Where ``~/.prefect`` is, likewise (the user's home) --
                               ``cli.runtime.profile_api_url``
``XDG_CACHE_HOME``             Where an object store's local-only files go (plots, evaluation
                               tables, the Prefect home) (``~/.cache``) --
                               ``store.root.StoreRoot.local_folder``
``TRITON_INTERPRET``           ``1``: Triton runs its kernels on the CPU interpreter, so the
                               fused GPU kernel may serve CPU tensors (tests) --
                               ``operators.fused_rbf.fused_available``
=============================  ===============================================================

What catdask *writes* for Prefect, Dask and child processes, and the three places it reads
Dask's configuration (``dask.config``), are listed in docs/operations.md beside this table.
"""

from __future__ import annotations

import dataclasses
import os


@dataclasses.dataclass(frozen=True)
class Setting:
    """One environment variable catdask reads.

    Parameters
    ----------
    name : str
        The variable, e.g. ``"CATDASK_STORE"``.
    meaning : str
        What it sets (one line, as in the module's table).
    """

    name: str
    meaning: str

    def get(self, environ=None) -> str | None:
        """The value in ``environ`` (default: the process's environment), or None when the
        variable is unset or empty."""
        value = (os.environ if environ is None else environ).get(self.name)
        return value or None

    def __str__(self):
        return self.name


STORE = Setting("CATDASK_STORE", "the store: a folder or s3://bucket/prefix")
SCHEDULER = Setting("CATDASK_SCHEDULER", "the Dask scheduler address the fits and flows use")
SERVE_LIMIT = Setting("CATDASK_SERVE_LIMIT", "flow runs `catdask serve` runs at once")
CATALOG = Setting("CATDASK_CATALOG", "the data-set catalog file")
SOURCE_DIR = Setting("CATDASK_SOURCE_DIR", "a folder with the original UCI files")
MAX_TABLE_BYTES = Setting("CATDASK_MAX_TABLE_BYTES", "the largest table file read, in bytes")
SERVED_STORE = Setting("CATDASK_SERVED_STORE", "the only store a served run may use")
SERVED_SCHEDULER = Setting("CATDASK_SERVED_SCHEDULER",
                           "the only Dask scheduler a served run may use")
PREFECT_API_AUTH_STRING = Setting("PREFECT_API_AUTH_STRING", "the Prefect API's credentials")
PREFECT_API_URL = Setting("PREFECT_API_URL", "the Prefect API the flows report to")
PREFECT_HOME = Setting("PREFECT_HOME", "Prefect's home folder")
PREFECT_PROFILES_PATH = Setting("PREFECT_PROFILES_PATH", "Prefect's profiles file")
PREFECT_PROFILE = Setting("PREFECT_PROFILE", "the active Prefect profile")
HOME = Setting("HOME", "where ~/.prefect is")
XDG_CACHE_HOME = Setting("XDG_CACHE_HOME", "where an object store's local files go")
TRITON_INTERPRET = Setting("TRITON_INTERPRET", "Triton's CPU interpreter (tests of the GPU kernel)")

#: Every variable catdask reads, in the order of the module's table.
SETTINGS = (STORE, SCHEDULER, SERVE_LIMIT, CATALOG, SOURCE_DIR, MAX_TABLE_BYTES, SERVED_STORE,
            SERVED_SCHEDULER, PREFECT_API_AUTH_STRING, PREFECT_API_URL, PREFECT_HOME, PREFECT_PROFILES_PATH, PREFECT_PROFILE, HOME, XDG_CACHE_HOME, TRITON_INTERPRET)
