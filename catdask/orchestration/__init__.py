"""Prefect orchestration of the catdask pipeline: flows, tasks, serving, the temporary server.

The flows only orchestrate (retries, artifacts, logging, run states); every computation is a
:mod:`catdask.pipeline` function. The flows are :mod:`.ingest`, :mod:`.train` and
:mod:`.evaluate`; ``deploy/prefect.yaml``'s entry points are their module paths here, so a
Prefect worker needs only the installed package (the repository's ``flows/`` scripts import
from here). Nothing is imported here, so ``import catdask.orchestration.server`` does not
import Prefect.
"""
