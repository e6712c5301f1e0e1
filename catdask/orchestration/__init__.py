"""Prefect orchestration of the catdask pipeline: flows, tasks, serving, the temporary server.

The flows only orchestrate (retries, artifacts, logging, run states); every computation is a
``catdask`` function (:mod:`catdask.pipeline`). Modules:

- :mod:`.ingest`, :mod:`.train`, :mod:`.evaluate`: the flows ``catdask-ingest``,
  ``catdask-train`` / ``catdask-retrain`` and ``catdask-evaluate``;
- :mod:`.retry`: the task retry policy (retry transient failures only);
- :mod:`.input_errors`: a run that fails on a foreseen (catdask) error ends Failed in one log
  line, no traceback; a bug keeps its traceback;
- :mod:`.artifacts`: per-model artifact keys and the solver-progress reporter;
- :mod:`.server`: a Prefect API server that dies with the process that started it;
- :mod:`.prefect_server`: the Prefect server of ``catdask serve`` (SQLite lock conflicts
  replayed inside the server instead of answered 503);
- :mod:`.preloaded_runs`: served flow runs forked from a process that preloaded Prefect and
  the flows (``catdask serve``'s runner);
- :mod:`.parent_death`: the launcher that ties a child process's life to its parent.

Nothing is imported here, so ``import catdask.orchestration.server`` does not import Prefect.
``deploy/prefect.yaml``'s entry points are the flows' module paths here
(``catdask.orchestration.train.train``): a Prefect worker needs only the installed package.
The top-level ``flows/`` folder of the repository holds thin scripts that import from here;
the library never imports it.
"""
