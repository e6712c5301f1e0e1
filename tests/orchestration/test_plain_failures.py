"""A flow run that fails on a foreseen (catdask) error ends Failed with the error's message and
one ERROR log line naming it, no traceback; a bug still logs its traceback.

Was: one misspelt data set name logged three Prefect tracebacks for one sentence (the task
run's, the flow run's and, in a deployment run, the engine's), and the run's state message
read "Flow run encountered an exception: DatasetNotFoundError: ...".
"""

from __future__ import annotations

import logging
import sys

import pytest

from catdask.errors import ChecksumMismatchError, DatasetNotFoundError, ParameterError

from .test_flows import SEEDS_FILE, _flows, _run_failing_flow, _wait_for

pytestmark = [pytest.mark.usefixtures("prefect_api")]


def _run_logs(run_id):
    """The flow run's log records as the API (the UI) has them, once its final state is in."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    def fetch():
        with get_client(sync_client=True) as client:
            return client.read_logs(LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))

    return _wait_for(fetch, lambda logs: any(
        log.message.startswith("Finished in state Failed") and log.task_run_id is None
        for log in logs))


def _errors_naming(logs, text):
    return [log.message for log in logs if log.level >= logging.ERROR and text in log.message]


def test_a_misspelt_data_set_fails_the_run_in_one_line(iris_store):
    _, train_mod, _ = _flows()
    exc, run_id = _run_failing_flow(train_mod.train, "irs", store=str(iris_store))
    assert isinstance(exc, DatasetNotFoundError)  # a direct call still raises it
    problem = f"No data set 'irs' in store {iris_store} (stored: iris); did you mean 'iris'?"
    state = train_mod.train("irs", store=str(iris_store), return_state=True)
    assert state.is_failed() and state.message == problem, state.message
    logs = _run_logs(run_id)
    assert not [log.message for log in logs if "Traceback" in log.message]
    # The lookup task's "Finished in state Failed(...)": the flow adds no second line.
    assert len(_errors_naming(logs, problem)) == 1, [log.message for log in logs]


def test_a_refused_parameter_fails_the_run_in_one_line_before_any_task(iris_store):
    _, train_mod, _ = _flows()
    exc, run_id = _run_failing_flow(train_mod.train, "iris", method="cqs", device="cuda",
                                    store=str(iris_store))
    assert isinstance(exc, ParameterError) and isinstance(exc, ValueError)
    assert str(exc).startswith("device='cuda' applies only to the kernel methods"), str(exc)
    logs = _run_logs(run_id)
    assert not [log.message for log in logs if "Traceback" in log.message]
    assert _errors_naming(logs, str(exc)) == [str(exc)]  # the flow's own line, once
    assert all(log.task_run_id is None for log in logs)  # refused before any task ran


def test_a_source_file_that_fails_its_checksum_fails_the_ingest_run_in_one_line(
        tmp_path, monkeypatch):
    ingest_mod, _, _ = _flows()
    monkeypatch.delenv("CATDASK_SOURCE_DIR", raising=False)
    (tmp_path / SEEDS_FILE).write_text("15.26\t14.84\tnan\t5.763\t3.312\t2.221\t5.22\t1\n")
    exc, run_id = _run_failing_flow(ingest_mod.ingest, ["seeds"], store=str(tmp_path / "s"),
                                    source_dir=str(tmp_path))
    assert isinstance(exc, ChecksumMismatchError)
    logs = _run_logs(run_id)
    assert not [log.message for log in logs if "Traceback" in log.message]
    assert len(_errors_naming(logs, "sha256 mismatch")) == 1, [log.message for log in logs]


def test_a_bug_still_logs_its_traceback(iris_store, monkeypatch):
    _, train_mod, _ = _flows()

    def broken(*args, **kwargs):
        raise TypeError("a bug in the cache lookup")

    monkeypatch.setattr(train_mod, "look_up_fit", broken)
    exc, run_id = _run_failing_flow(train_mod.train, "iris", store=str(iris_store))
    assert isinstance(exc, TypeError)
    logs = _run_logs(run_id)
    assert any("Traceback" in log.message and "a bug in the cache lookup" in log.message
               for log in logs), [log.message for log in logs]


def test_called_as_a_plain_function_the_flow_raises():
    """``flow.fn(...)`` runs no flow run: nothing to end Failed, so the error is raised."""
    from catdask.errors import InvalidNameError

    _, train_mod, _ = _flows()
    with pytest.raises(InvalidNameError):
        train_mod.train.fn("../iris")


def test_the_filter_drops_only_foreseen_tracebacks():
    from catdask.orchestration.input_errors import NoForeseenTracebacks

    def record(error):
        try:
            raise error
        except Exception:
            return logging.LogRecord("prefect.flow_runs", logging.ERROR, __file__, 1,
                                     "Encountered exception", None, sys.exc_info())

    one_line = NoForeseenTracebacks()
    assert not one_line.filter(record(DatasetNotFoundError("No data set 'irs'")))
    assert one_line.filter(record(KeyError("a bug")))
    assert one_line.filter(logging.LogRecord("prefect.flow_runs", logging.ERROR, __file__, 1,
                                             "No data set 'irs'", None, None))


def test_parameter_checks_turn_value_errors_into_parameter_errors():
    from catdask.errors import InvalidNameError
    from catdask.orchestration.input_errors import parameter_checks

    with pytest.raises(ParameterError, match="^max_gap must be"):
        with parameter_checks():
            raise ValueError("max_gap must be a finite number >= 0.")
    with pytest.raises(InvalidNameError):  # catdask's own: unchanged
        with parameter_checks():
            raise InvalidNameError("bad name")
    with pytest.raises(TypeError):
        with parameter_checks():
            raise TypeError("a bug")


def test_a_flow_script_says_a_foreseen_error_in_one_line(capsys, monkeypatch):
    """``python flows/train.py irs`` ended in Python's traceback of the raised error."""
    from catdask.orchestration.input_errors import run_as_script

    def missing(name):
        raise DatasetNotFoundError(f"No data set {name!r} in store s (stored: iris)")

    def buggy():
        raise RuntimeError("a bug")

    monkeypatch.setattr(sys, "argv", ["flows/train.py", "irs"])
    with pytest.raises(SystemExit) as info:
        run_as_script(missing, "irs")
    assert info.value.code == 3
    assert capsys.readouterr().err.splitlines() == [
        "train.py: error: No data set 'irs' in store s (stored: iris)"]
    with pytest.raises(RuntimeError):  # a bug: its traceback
        run_as_script(buggy)
    run_as_script(lambda: {"version": "iris-cqs:v1"})
    assert capsys.readouterr().out == "{'version': 'iris-cqs:v1'}\n"


TERMINATED_AS_A_TASK_RUN_STARTS = """
import prefect.task_engine
from prefect import flow, task
from prefect.exceptions import TerminationSignal

from catdask.orchestration.input_errors import fails_plainly


def terminated(*args, **kwargs):
    raise TerminationSignal(signal=15)  # what Prefect's SIGTERM handler raises


@task
def review():
    return "reviewed"


@flow(name="terminated-as-a-task-run-starts-{tag}")
@fails_plainly
def train_then_review():
    return review()


prefect.task_engine.dynamic_key_for_task_run = terminated
train_then_review()
"""


def test_a_termination_while_a_task_run_starts_crashes_the_run(prefect_env, tmp_path):
    """SIGTERM (``catdask serve`` stopping its runs) that lands while Prefect creates a task
    run: Prefect's crash handling then raised ``ValueError: Task run is not set``, and the run
    ended Failed with that message and two tracebacks (a flaky serve Ctrl-C test caught it).
    The flow re-raises the signal, so the run ends Crashed as any terminated run does, and the
    process ends by SIGTERM as Prefect's engine ends it. (In a subprocess: Prefect re-sends the
    signal to its own process once the run is reported.)"""
    import subprocess
    import uuid

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    tag = uuid.uuid4().hex[:8]
    script = tmp_path / "terminated.py"
    script.write_text(TERMINATED_AS_A_TASK_RUN_STARTS.replace("{tag}", tag))
    done = subprocess.run([sys.executable, str(script)], env=prefect_env, capture_output=True,
                          text=True, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == -15, output  # not 1: the ValueError of Prefect's crash handling
    assert "Task run is not set" not in output and "Traceback" not in output, output
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_filter=FlowFilter(
            name=FlowFilterName(any_=[f"terminated-as-a-task-run-starts-{tag}"])))
    assert [run.state.type.value for run in runs] == ["CRASHED"], [run.state for run in runs]


def test_other_errors_during_a_termination_are_still_bugs():
    """Only the termination's own context turns an error into the signal."""
    from prefect import flow

    from catdask.orchestration.input_errors import fails_plainly

    @flow
    @fails_plainly
    def buggy():
        try:
            raise KeyError("handled")
        except KeyError:
            raise TypeError("a bug") from None

    with pytest.raises(TypeError, match="a bug"):
        buggy()
