"""How a train run ends when it does not register a new fit: the Rejected and Cached states,
the rejection's message, and keeping a rejected fit as a candidate
(:mod:`catdask.pipeline.candidates`). Used by :mod:`catdask.orchestration.train`."""

from __future__ import annotations

from prefect import get_run_logger
from prefect.states import Completed, Failed

from ..certificate.moment import moment_install_note
from ..core.progress import CONSOLE_REPEATED
from ..errors import CatdaskError
from ..pipeline.candidates import save_candidate

__all__ = ["REJECTED_STATE_NAME", "CACHED_STATE_NAME", "ModelRejectedError",
           "rejection_message", "cached_state", "keep_candidate", "cancelled_if_interrupted"]

#: What Prefect's crashed state says of a KeyboardInterrupt (prefect.states).
INTERRUPT_MESSAGE = "aborted by an interrupt signal"

REJECTED_STATE_NAME = "Rejected"
#: The name of a train run's Completed state when it returned a registered version instead of
#: fitting (Prefect's own name for a cache hit).
CACHED_STATE_NAME = "Cached"


class ModelRejectedError(CatdaskError):
    """The fitted model was not registered (not certified, uncertified models not allowed).

    Raised by a direct call of the ``catdask-train`` flow; ``summary`` is the run's summary
    (``version`` None). :func:`run_train` returns the summary instead.
    """

    def __init__(self, message, summary=None):
        super().__init__(message)
        self.summary = summary

    def __reduce__(self):  # Prefect persists the state's data: keep the summary
        return type(self), (str(self), self.summary)


def rejection_message(summary: dict) -> str:
    """The Rejected state's message: why, and how to register it anyway."""
    # CAS has no test at all (its certificate is "not applicable"): say that, not "gap unknown".
    why = (summary["why_not_certified"] if summary["gap"] is None
           else f"optimality gap <= {summary['gap']:.3g}")
    if summary.get("max_gap") is not None and summary["gap"] is not None:
        why += f" > max_gap = {summary['max_gap']:.3g}"
    # The linear test's strongest level is opt-in (slower); say so where it may prove W.
    moment = ("; certify=moment tries the level-2 moment relaxation, which may prove it"
              + moment_install_note()
              if summary.get("next_level") == "moment" else "")
    return (f"rejected: {summary['dataset']} {summary['method']} not certified "
            f"({why}); nothing registered "
            "(max_gap=G registers it when its gap is at most G; allow_uncertified=True "
            f"whatever the gap, marked as uncertified{moment})")


def cached_state(looked_up: dict, dataset: str):
    """The run's end on a train-cache hit: Completed, named Cached, with the version's
    summary; a rejected candidate rejected again: Failed, named Rejected."""
    cached = looked_up["summary"]
    sha = looked_up["dataset_sha256"][:12]
    if cached["version"] is None:
        message = (f"{rejection_message(cached)}; the same fit of {dataset} (sha256 {sha}) was "
                   "rejected before: not refitted (refit=True fits again)")
        get_run_logger().warning(message, extra={CONSOLE_REPEATED: True})
        return Failed(name=REJECTED_STATE_NAME, message=message,
                      data=ModelRejectedError(message, cached))
    if cached.get("reused") == "candidate":
        message = (f"registered {cached['version']} ({cached['status']}) from the fit of "
                   f"{dataset} (sha256 {sha}) that an earlier run rejected: not refitted")
    else:
        message = (f"cached: {cached['version']} was fitted on {dataset} (sha256 {sha}) with "
                   "the same spec and code; not refitted (refit=True fits again)")
    get_run_logger().info(message)
    return Completed(name=CACHED_STATE_NAME, message=message, data=cached)


def keep_candidate(store, model_name: str, outcome, plot: str) -> None:
    """Keep a rejected fit, so that a rerun with another policy registers it without a refit;
    a failure to keep it is logged, not the run's failure."""
    try:
        kept = save_candidate(store, model_name, outcome, plot=plot)
    except (CatdaskError, OSError, ValueError) as exc:
        get_run_logger().warning("the rejected fit was not kept as a candidate (%s): a rerun "
                                 "with --max-gap or --allow-uncertified refits", exc)
        return
    get_run_logger().info("rejected fit kept as candidate %s: a rerun with max_gap or "
                          "allow_uncertified registers it without a refit", kept.path)


def cancelled_if_interrupted(flow, flow_run, state) -> None:
    """``on_crashed`` hook: a run stopped by Ctrl-C is the user's cancellation, so the UI
    records it Cancelled, not Crashed (Prefect calls a KeyboardInterrupt a crash). Other
    crashes stay Crashed."""
    if INTERRUPT_MESSAGE not in (state.message or ""):
        return
    from prefect.client.orchestration import get_client
    from prefect.states import Cancelled

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(flow_run.id, Cancelled(
            message="interrupted (Ctrl-C): cancelled by the user"), force=True)
