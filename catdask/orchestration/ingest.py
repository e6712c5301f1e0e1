"""Ingest data sets into the zarr store.

What it does: for each named catalog data set (iris, wine, vehicle, ...), find or download the
original files, verify checksums, parse and validate, and write a zarr data set atomically.
Idempotent: unchanged content is not rewritten. A new snapshot emits the Prefect event
``catdask.snapshot.created`` (:mod:`.events`), which the retrain trigger listens to.

Run it:  catdask ingest iris wine        (or)  python flows/ingest.py iris wine
"""

from __future__ import annotations

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.runtime import flow_run

from ..pipeline import ingest_dataset
from ..pipeline.run_names import ingest_run_name
from .events import emit_snapshot_event
from .input_errors import fails_plainly
from .parameters import INGEST_HELP, DatasetNames, documented
from .retry import retry_if_transient
from .served import served_store_and_scheduler

__all__ = ["ingest", "ingest_one"]


@task(
    retries=2,
    retry_delay_seconds=5,
    # Bad data is not transient: retry only network / file-system hiccups.
    retry_condition_fn=retry_if_transient,
)
def ingest_one(name: str, store: str | None, source_dir: str | None, allow_download: bool,
               replace: bool = False) -> dict:
    """Ingest one catalog data set; returns its summary (written=False when unchanged)."""
    report = ingest_dataset(name, store, source_dir=source_dir, allow_download=allow_download,
                            replace=replace)
    emit_snapshot_event(report, store)  # created / reused; nothing when unchanged
    get_run_logger().info(
        "%s: %s (N=%s, D=%s, K=%s, sha256 %s)", name,
        "written" if report["written"] else "unchanged", report["n_samples"],
        report["n_features"], report["n_classes"], report["content_sha256"][:12],
    )
    return report


def _run_name() -> str:
    return ingest_run_name(flow_run.parameters.get("names") or [])


@flow(name="catdask-ingest", flow_run_name=_run_name, log_prints=True)
@fails_plainly  # a misspelt name, a file that does not parse: Failed, one line, no traceback
@documented(INGEST_HELP)  # the UI's run form: a description per parameter
def ingest(
    names: DatasetNames,
    store: str | None = None,
    source_dir: str | None = None,
    allow_download: bool = False,
    replace: bool = False,
) -> list[dict]:
    """Ingest catalog data sets into the store (see ``data/catalog.json``); different content
    under an existing name is refused unless ``replace``."""
    store, _ = served_store_and_scheduler(store, None)
    reports = [ingest_one(n, store, source_dir, allow_download, replace) for n in names]
    create_table_artifact(
        [{k: r[k] for k in ("name", "n_samples", "n_features", "n_classes", "written", "content_sha256")}
         for r in reports],
        key="ingest-summary",
        description="Data sets ingested into the zarr store",
    )
    return reports

