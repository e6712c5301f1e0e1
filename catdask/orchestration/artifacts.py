"""What a flow run shows in the Prefect UI: per-model artifact keys and the solver's progress.

Artifact keys name the model they belong to (``<dataset>-<method>-<version or run>-<kind>``),
so the Artifacts page keeps every model's restart table, summary and metrics instead of only
the latest model's. :class:`SolverProgress` follows a fit's solver loop
(:mod:`catdask.core.progress`): it logs the iteration, best objective and active restarts to the
task log, and keeps a progress artifact up to date once the fit has run for a few seconds.
"""

from __future__ import annotations

import re
import time

__all__ = ["artifact_slug", "model_artifact_key", "SolverProgress"]

_NOT_KEY = re.compile(r"[^a-z0-9]+")
MAX_KEY_LENGTH = 120


def artifact_slug(text: str) -> str:
    """``text`` in Prefect's artifact-key alphabet: lowercase letters, digits and dashes.

    Every other run of characters becomes one dash (``"Iris_CQS:v1"`` -> ``"iris-cqs-v1"``).
    """
    slug = _NOT_KEY.sub("-", str(text).lower()).strip("-")
    if not slug:
        raise ValueError(f"{text!r} has no letter or digit to build an artifact key from")
    return slug[:MAX_KEY_LENGTH].rstrip("-")


def model_artifact_key(kind: str, dataset: str, method: str, *, version: str | None = None,
                       run_id: str | None = None) -> str:
    """The key of one model's artifact of ``kind`` (``summary``, ``restarts``, ``metrics``...): by
    its registered ``version`` (``"NAME:vN"``; only ``vN`` when NAME is the default, e.g.
    ``iris-cqs-v1-summary``), else by the flow run's ``run_id`` (``iris-cas-run-1a2b3c4d-summary``).
    """
    if version:
        name, _, number = str(version).rpartition(":")
        tag = number if name == f"{dataset}-{method}" else f"{name}-{number}"
    elif run_id:
        tag = f"run-{str(run_id)[:8]}"
    else:
        raise ValueError("a model artifact key needs the registered version or the flow run id")
    return artifact_slug(f"{dataset}-{method}-{tag}-{kind}")


class SolverProgress:
    """Solver listener for a Prefect task: task-log lines and a progress artifact.

    ``logger`` is the task run's logger, ``key`` the progress artifact's key, ``description`` what
    is being fitted. At most one log line per ``log_every_seconds`` (and the first and last
    iterations); no artifact for a fit shorter than ``artifact_after_seconds``, then at most one
    update per ``update_every_seconds`` (each is an API call); ``clock`` is for tests. The progress
    figure is the share of restarts that have stopped; each solver loop of a fit is reported in
    turn. A failing artifact update is logged once and never fails the fit.
    """

    def __init__(self, logger, *, key, description, log_every_seconds=5.0,
                 artifact_after_seconds=3.0, update_every_seconds=2.0, clock=time.monotonic):
        self.logger, self.key, self.description = logger, key, description
        self.log_every, self.artifact_after = log_every_seconds, artifact_after_seconds
        self.update_every, self.clock = update_every_seconds, clock
        self.t0 = clock()
        self.loop, self.last_iteration = 0, 0
        self.last_log = self.last_update = float("-inf")
        self.artifact_id = None
        self.artifact_failed = False
        self.last_text = ""  # the last solver line: the artifact keeps it beside a stage

    def __call__(self, iteration, objective, step, active):
        if iteration <= self.last_iteration or self.loop == 0:
            self.loop += 1  # a new solver loop started
        self.last_iteration = iteration
        n_restarts, n_active = len(active), int(active.sum())
        best = float(objective.max())
        now = self.clock()
        done = n_active == 0
        text = (f"solver loop {self.loop}, iteration {iteration}: best objective {best:.10g}, "
                f"{n_active} of {n_restarts} restarts active")
        self.last_text = text
        if iteration == 1 or done or now - self.last_log >= self.log_every:
            self.logger.info(text)
            self.last_log = now
        if now - self.t0 >= self.artifact_after and (done or now - self.last_update
                                                     >= self.update_every):
            self._publish(100.0 * (n_restarts - n_active) / n_restarts, text)
            self.last_update = now

    def stage(self, text):
        """A stage after the solver loops (the global-optimality test): one log line, and in
        the artifact's description after the solver's last line, when there is an artifact
        (:func:`catdask.core.progress.report_stage`; the train task ends with the verdict)."""
        self.logger.info(text)
        if self.artifact_id is not None:
            self._publish(100.0, f"{self.last_text}; {text}" if self.last_text else text)

    def _publish(self, percent, text):
        if self.artifact_failed:
            return
        from prefect.artifacts import create_progress_artifact, update_progress_artifact

        description = f"{self.description}: {text}"
        try:
            if self.artifact_id is None:
                self.artifact_id = create_progress_artifact(percent, key=self.key,
                                                            description=description)
            else:
                update_progress_artifact(self.artifact_id, percent, description=description)
        except Exception as exc:  # noqa: BLE001 - progress must never fail the fit
            self.artifact_failed = True
            self.logger.warning("progress artifact %s not updated: %s", self.key, exc)
