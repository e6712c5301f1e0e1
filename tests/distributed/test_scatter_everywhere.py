"""Values put on every worker survive a worker lost while they are copied."""

import threading

import numpy as np
import pytest

pytest.importorskip("distributed")


@pytest.fixture
def client_losing_a_worker_mid_copy(monkeypatch):
    """A two-worker in-process cluster whose scheduler loses the first worker it asks to fetch
    a copy, just before asking (as a host killed during the copies)."""
    from distributed import Client, LocalCluster
    from distributed.scheduler import Scheduler

    original = Scheduler.gather_on_worker
    lost = []

    async def gather_on_worker(self, worker_address, who_has):
        if not lost:
            lost.append(worker_address)
            await self.remove_worker(worker_address, stimulus_id="test-lost", close=False)
        return await original(self, worker_address, who_has)

    monkeypatch.setattr(Scheduler, "gather_on_worker", gather_on_worker)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client, lost


def test_a_worker_lost_during_the_copies_does_not_hang_the_put(client_losing_a_worker_mid_copy):
    from catdask.distributed.execute import scatter_everywhere

    client, lost = client_losing_a_worker_mid_copy
    value = np.arange(1000.0)
    outcome = {}
    # distributed's own broadcast (client.scatter(..., broadcast=True)) loops here for good.
    thread = threading.Thread(target=lambda: outcome.update(
        futures=scatter_everywhere(client, {"catdask-test-value": value})), daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the put hung after a worker was lost"
    assert lost, "no copy was made: the test did not lose a worker"
    (future,) = outcome["futures"].values()
    holders = client.who_has([future])["catdask-test-value"]
    assert holders and lost[0] not in holders
    np.testing.assert_array_equal(client.submit(lambda x: x, future).result(timeout=30), value)


class _ClientWithoutScheduler:
    """What ``distributed.Client`` is once its scheduler died: every call fails, status not
    running."""

    status = "closed"

    def __init__(self):
        self.scatters = 0

    def scatter(self, data, hash=False):
        from distributed.comm.core import CommClosedError

        self.scatters += 1
        raise CommClosedError("ConnectionPool closing.")


def test_a_lost_scheduler_is_raised_at_once_not_retried_as_lost_workers():
    from distributed.comm.core import CommClosedError

    from catdask.distributed.execute import scatter_everywhere

    client = _ClientWithoutScheduler()
    with pytest.raises(CommClosedError, match="closing"):
        scatter_everywhere(client, {"catdask-test-value": np.zeros(3)})
    assert client.scatters == 1
