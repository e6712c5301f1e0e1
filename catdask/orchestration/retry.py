"""Task retry policy shared by the flows: retry what can pass on a second try, nothing else."""

from __future__ import annotations

from ..errors import is_transient

__all__ = ["retry_if_transient"]


def retry_if_transient(task, task_run, state) -> bool:
    """Prefect ``retry_condition_fn``: retry lost connections, killed workers, I/O hiccups;
    never bad names, bad data, missing or damaged inputs (``catdask.errors.is_transient``)."""
    return is_transient(state.result(raise_on_failure=False))
