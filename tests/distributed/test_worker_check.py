"""A user-given cluster whose workers run other software is refused in one line (opspass).

Found by running the deploy docs by hand: a `dask worker` started from an environment without
catdask made `catdask train --scheduler ...` exit 1 with distributed's
``Exception('ModuleNotFoundError(...)')`` after a retry; a worker with edited catdask sources
computed silently with code the model's ``code_version`` does not describe.
"""

import pytest

from catdask.distributed import worker_check
from catdask.errors import WorkerEnvironmentError, is_transient


class _FakeClient:
    """``Client.run(..., on_error="return")``: one reply per worker, exceptions returned."""

    def __init__(self, replies):
        self.replies = replies
        self.calls = []

    def run(self, function, *args, on_error):
        self.calls.append((function, args, on_error))
        return self.replies


def _mine():
    return worker_check.software_versions()


def test_matching_workers_pass_and_get_their_blas_threads_set():
    client = _FakeClient({"tcp://w1:1": _mine(), "tcp://w2:2": _mine()})
    assert worker_check.check_worker_software(client, "tcp://h:8786") == client.replies
    function, args, on_error = client.calls[0]
    assert function is worker_check._set_up_worker and args == (1,) and on_error == "return"


def test_a_worker_without_catdask_is_named_in_one_line():
    error = Exception("ModuleNotFoundError(\"No module named 'catdask'\")")
    client = _FakeClient({"tcp://w1:1": _mine(), "tcp://w2:2": error})
    with pytest.raises(WorkerEnvironmentError) as info:
        worker_check.check_worker_software(client, "tcp://h:8786")
    text = str(info.value)
    assert "1 of the 2 Dask workers of tcp://h:8786 cannot run catdask" in text
    assert "tcp://w2:2" in text and "No module named 'catdask'" in text
    assert "\n" not in text and "Requirements on the workers" in text
    assert not is_transient(info.value)  # the flows do not retry it


@pytest.mark.parametrize("key", ["catdask", "catdask sources sha256", "dask", "numpy",
                                 "python"])
def test_a_worker_with_other_software_is_refused(key):
    other = {**_mine(), key: "9.9.9"}
    client = _FakeClient({"tcp://w1:1": _mine(), "tcp://w2:2": other})
    with pytest.raises(WorkerEnvironmentError,
                       match=f"1 of the 2 Dask workers of tcp://h:8786 run {key} 9.9.9, "
                             f"the driver {_mine()[key]} \\(tcp://w2:2\\)"):
        worker_check.check_worker_software(client, "tcp://h:8786")


@pytest.mark.parametrize("key", ["python", "numpy"])
def test_a_patch_release_of_python_or_numpy_is_not_refused(key):
    major_minor = ".".join(_mine()[key].split(".")[:2])
    other = {**_mine(), key: major_minor + ".99"}
    client = _FakeClient({"tcp://w1:1": _mine(), "tcp://w2:2": other})
    assert worker_check.check_worker_software(client, "tcp://h:8786") == client.replies


def test_a_real_cluster_of_the_same_environment_passes(dask_scheduler):
    from catdask.distributed import dask_client_context

    with dask_client_context(dask_scheduler) as client:
        replies = worker_check.check_worker_software(client, dask_scheduler)
    assert len(replies) == 2
    assert all(v == worker_check.software_versions() for v in replies.values())
