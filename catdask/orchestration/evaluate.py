"""Evaluate: the paper's protocol on the stored data sets, tables next to the paper's numbers.

Repeated stratified 2/3 - 1/3 splits on every stored paper data set for each of the paper's
tables; CSV/Markdown/JSON tables under ``out_dir`` (default ``<store>/evaluations/<UTC time>``)
and one artifact per table. Missing data sets are skipped with a message.

Run it:  catdask evaluate --quick        (or)  python flows/evaluate.py
"""

from __future__ import annotations

from typing import Literal

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.runtime import flow_run

from ..core.progress import CONSOLE_NOTE
from ..errors import DatasetNotFoundError
from ..evaluation import (
    PAPER_DATASETS,
    PAPER_TABLES,
    markdown_table,
    paper_experiments,
    run_experiment,
    write_experiment,
)
from ..pipeline.run_names import evaluate_run_name
from ..store import evaluation_dir, list_datasets, read_dataset
from .input_errors import fails_plainly
from .parameters import EVALUATE_HELP, Splits, documented
from .retry import retry_if_transient
from .served import served_output_dir, served_store_and_scheduler

__all__ = ["evaluate", "run_table"]


def _store_loader(store):
    """``name -> (X, y)`` from the store; a missing data set is skipped (FileNotFoundError)."""

    def load(name):
        try:
            ds = read_dataset(store, name)
        except DatasetNotFoundError as exc:
            raise FileNotFoundError(f"{name} is not in the store (run `catdask ingest {name}`)") from exc
        return ds.X, ds.y

    return load


@task(retries=1, retry_delay_seconds=5, retry_condition_fn=retry_if_transient)
def run_table(key: str, datasets: list[str], n_splits: int, store: str | None, out_dir: str) -> dict:
    """One paper table: run the protocol, write the files, publish the Markdown table."""
    logger = get_run_logger()
    experiment = paper_experiments()[key]
    # Each data set and method, as it starts and ends: in the run's log, and on the quiet
    # console of `catdask evaluate` (CONSOLE_NOTE), which showed nothing for minutes.
    result = run_experiment(experiment, datasets, loader=_store_loader(store), n_splits=n_splits,
                            progress=lambda line: logger.info(line, extra={CONSOLE_NOTE: True}))
    paths = write_experiment(result, out_dir, PAPER_TABLES.get(key))
    create_markdown_artifact(markdown_table(result, PAPER_TABLES.get(key)),
                             key=f"evaluation-{key}", description=experiment.title)
    return {"table": key, "files": {k: str(v) for k, v in paths.items()},
            "skipped": result.skipped}


def _run_name() -> str:
    p = flow_run.parameters
    return evaluate_run_name(p.get("datasets"), p.get("tables"), bool(p.get("quick")))


@flow(name="catdask-evaluate", flow_run_name=_run_name, log_prints=True)
@fails_plainly
@documented(EVALUATE_HELP)  # the UI's run form: a description per parameter
def evaluate(
    datasets: list[str] | None = None,
    tables: list[Literal[tuple(PAPER_TABLES)]] | None = None,
    n_splits: Splits = 10,
    quick: bool = False,
    out_dir: str | None = None,
    store: str | None = None,
) -> list[dict]:
    """The paper's experiments on stored data sets (default: every stored paper data set).

    ``quick`` runs two data sets and two splits (the CI version). Tables go to ``out_dir``,
    by default ``<store>/evaluations/<UTC time>`` (a served weekly run gets a folder of its
    own in the store, wherever ``catdask serve`` was started).
    """
    store, _ = served_store_and_scheduler(store, None)
    out_dir = served_output_dir(out_dir, store)
    if out_dir is None:
        out_dir = str(evaluation_dir(store))
        get_run_logger().info("tables go to %s", out_dir)
    if datasets is None:
        stored = {d.name for d in list_datasets(store)}
        datasets = [n for n in PAPER_DATASETS if n in stored]
        missing = [n for n in PAPER_DATASETS if n not in stored]
        if missing:
            get_run_logger().warning("not in the store, skipped: %s", ", ".join(missing))
    if quick:
        datasets, n_splits = datasets[:2], min(n_splits, 2)
    return [run_table(key, datasets, n_splits, store, out_dir)
            for key in (tables or list(paper_experiments()))]

