"""Issue 43: a run stopped by Ctrl-C (KeyboardInterrupt) is recorded Cancelled, not Crashed;
any other crash stays Crashed. The train and retrain flows carry the hook; here it runs on a
small flow against the session's Prefect test server."""

from __future__ import annotations

import pytest

pytest.importorskip("prefect")

from prefect import flow  # noqa: E402
from prefect.client.orchestration import get_client  # noqa: E402
from prefect.runtime import flow_run  # noqa: E402

from catdask.orchestration.train import retrain_registered, train  # noqa: E402
from catdask.orchestration.train_states import cancelled_if_interrupted  # noqa: E402

pytestmark = pytest.mark.usefixtures("prefect_api")


class _PowerCut(BaseException):
    """A crash that is not the user's Ctrl-C."""


def _state_of_run_raising(exc_type):
    ids = []

    @flow(on_crashed=[cancelled_if_interrupted])
    def stopped():
        ids.append(flow_run.id)
        raise exc_type()

    with pytest.raises(exc_type):
        stopped()
    with get_client(sync_client=True) as client:
        return client.read_flow_run(ids[0]).state


def test_ctrl_c_is_cancelled_and_another_crash_stays_crashed():
    state = _state_of_run_raising(KeyboardInterrupt)
    assert state.type.value == "CANCELLED" and "Ctrl-C" in state.message
    assert _state_of_run_raising(_PowerCut).type.value == "CRASHED"


def test_the_train_flows_carry_the_hook():
    assert cancelled_if_interrupted in train.on_crashed_hooks
    assert cancelled_if_interrupted in retrain_registered.on_crashed_hooks
