"""A user-given cluster whose workers run other software is refused in one line (opspass).

Found by running the deploy docs by hand: a `dask worker` started from an environment without
catdask made `catdask train --scheduler ...` exit 1 with distributed's
``Exception('ModuleNotFoundError(...)')`` after a retry; a worker with edited catdask sources
computed silently with code the model's ``code_version`` does not describe. Review then found
that a long-lived worker whose sources were upgraded on disk after it imported catdask hashed
the new files and passed while running the old code: it is refused now (stalecheck).
"""

import os
import shutil
import subprocess
import sys
import time

import pytest

from catdask import versions

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


_STALE = "catdask sources changed since import"


def test_catdask_notes_its_import_time_as_it_is_imported():
    # The import time must be taken at ``import catdask``, not when the check first asks.
    code = "import sys, catdask; print('catdask.versions' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.strip() == "True"


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    """A copy of the catdask sources as ``versions._PACKAGE`` (the real files are never
    touched), imported "now": after the copy was written, as a worker started right after
    ``pip install``."""
    copy = tmp_path / "catdask"
    shutil.copytree(versions._PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(versions, "_PACKAGE", copy)
    monkeypatch.setattr(versions, "IMPORTED_AT_NS", time.time_ns())
    return copy


def test_sources_written_before_the_import_are_not_changed(package_copy):
    assert versions.sources_changed_since_import() is False
    # A writer's clock 1 s ahead (an NFS server) is within the tolerance.
    second_ahead = versions.IMPORTED_AT_NS + 1_000_000_000
    os.utime(package_copy / "versions.py", ns=(second_ahead, second_ahead))
    assert versions.sources_changed_since_import() is False


def test_a_source_modified_after_the_import_is_changed(package_copy):
    later = versions.IMPORTED_AT_NS + 60 * 1_000_000_000
    os.utime(package_copy / "core" / "solver.py", ns=(later, later))
    assert versions.sources_changed_since_import() is True


def test_a_copy_that_keeps_old_modification_times_is_changed(package_copy, monkeypatch):
    # ``rsync -a`` / ``cp -p`` after the import: old mtimes, but the kernel's ctime is now.
    monkeypatch.setattr(versions, "IMPORTED_AT_NS", time.time_ns() - 60 * 1_000_000_000)
    hour_ago = time.time_ns() - 3600 * 1_000_000_000
    for path in package_copy.rglob("*.py"):
        os.utime(path, ns=(hour_ago, hour_ago))
    assert versions.sources_changed_since_import() is True


def test_a_worker_whose_sources_changed_after_import_is_refused():
    client = _FakeClient({"tcp://w1:1": _mine(), "tcp://w2:2": {**_mine(), _STALE: True}})
    with pytest.raises(WorkerEnvironmentError) as info:
        worker_check.check_worker_software(client, "tcp://h:8786")
    text = str(info.value)
    assert text.startswith("1 of the 2 Dask workers of tcp://h:8786 had their catdask sources "
                           "changed on disk after they imported catdask (tcp://w2:2)")
    assert "restart those workers" in text and "tcp://w1:1" not in text and "\n" not in text
    assert not is_transient(info.value)


def test_only_the_workers_staleness_is_checked(monkeypatch):
    client = _FakeClient({"tcp://w1:1": _mine(), "tcp://w2:2": _mine()})
    assert not any(v[_STALE] for v in client.replies.values())
    monkeypatch.setattr(versions, "sources_changed_since_import", lambda: True)  # the driver
    assert worker_check.check_worker_software(client, "tcp://h:8786") == client.replies


# ------------------------------------------------------------- workers that join during work
def test_no_worker_joined_asks_nothing():
    class _Client(_FakeClient):
        def scheduler_info(self, n_workers):
            assert n_workers == -1  # every worker, not the first five
            return {"workers": {"tcp://w1:1": {}, "tcp://w2:2": {}}}

    client = _Client({})
    assert worker_check.check_workers_that_joined(client, "tcp://h:8786",
                                                  {"tcp://w1:1": {}, "tcp://w2:2": {}}) == {}
    assert client.calls == []


def _joining_cluster():
    """A one-worker cluster in this process: its workers run the check's function here, where
    the test can give a joining worker other software."""
    from distributed import LocalCluster

    return LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                        dashboard_address=None)


@pytest.mark.timeout(120)
def test_a_worker_that_joins_during_the_work_is_checked_when_it_ends(monkeypatch):
    """An autoscaling cluster adds a worker mid-fit; it runs other software (here: another
    catdask, reported on that worker only). The work's ``with`` block ends in the refusal,
    before its result is used; the same join with the driver's software is accepted, and
    the joined worker was asked."""
    from catdask.distributed import host as host_module
    from catdask.distributed import dask_client_context

    # In-process workers: the check must not set this test process's BLAS threads.
    monkeypatch.setattr(host_module, "limit_blas_threads", lambda n: None)
    real = worker_check.software_versions
    asked = {}

    def spy(*args, **kwargs):
        asked.update(joined_check(*args, **kwargs))
        return asked

    joined_check = worker_check.check_workers_that_joined
    monkeypatch.setattr(worker_check, "check_workers_that_joined", spy)
    with _joining_cluster() as cluster:
        address = cluster.scheduler_address
        with pytest.raises(WorkerEnvironmentError) as info:
            with dask_client_context(address) as client:
                # From here on a worker answers with another catdask: only a worker that
                # joins is asked again.
                monkeypatch.setattr(worker_check, "_set_up_worker",
                                    lambda n: {**real(), "catdask": "0.0.1-other"})
                cluster.scale(2)  # the autoscaler, mid-fit
                client.wait_for_workers(2, timeout=60)
        text = str(info.value)
        assert text.startswith("1 of the 1 Dask workers that joined ") and \
            "during this work (its result is not used) run catdask 0.0.1-other" in text, text
        assert "\n" not in text and not is_transient(info.value)

        monkeypatch.undo()  # the driver's software everywhere again; the spy is gone too
        monkeypatch.setattr(host_module, "limit_blas_threads", lambda n: None)
        monkeypatch.setattr(worker_check, "check_workers_that_joined", spy)
        asked.clear()
        with dask_client_context(address) as client:
            before = set(client.scheduler_info()["workers"])
            cluster.scale(3)
            client.wait_for_workers(3, timeout=60)
        assert len(asked) == 1 and set(asked).isdisjoint(before)
        assert list(asked.values())[0] == real()
