"""A new user's store and table mistakes, third pass: a store this process cannot write (a
read-only mount, another user's folder), each refused in one line before Prefect starts while
the commands that only read keep working."""

from __future__ import annotations

import os

import pytest

from catdask.cli.exits import EXIT_INPUT

from .test_cli import cli_env, run_cli  # noqa: F401 - fixtures


@pytest.fixture
def unwritable(monkeypatch):
    """``unwritable(folder)``: from now on this process may not write in ``folder`` (and what
    it holds), as on a read-only mount. As root, ``chmod`` would not stop a write."""
    refused: list[str] = []
    real_access = os.access

    def access(path, mode, *args, **kwargs):
        inside = any(os.path.abspath(path) == f or os.path.abspath(path).startswith(f + os.sep)
                     for f in refused)
        if inside and mode & os.W_OK:
            return False
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    return lambda folder: refused.append(os.path.abspath(folder))


def _tree(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("args, writes", [
    (["ingest", "wine"], "`catdask ingest` writes data sets"),
    (["ingest", "--file", "t.csv", "--name", "t", "--label-column", "y"],
     "`catdask ingest` writes data sets"),
    (["train", "iris", "--refit"], "`catdask train` registers models and writes plots"),
    (["evaluate", "iris"], "`catdask evaluate` writes its tables"),
    (["demo", "--quick"], "`catdask demo` ingests, trains and plots"),
])
def test_a_store_that_cannot_be_written_is_one_line_before_prefect(
        capsys, tmp_path, iris_store, unwritable, args, writes):
    """Was: "catdask ingest: error: OSError: [Errno 30] Read-only file system:
    '<store>/.prefect/temporary-server.log' (run with -v for the traceback)", exit 1, after
    Prefect's imports (the same for train, evaluate and demo)."""
    (tmp_path / "t.csv").write_text("a,y\n1,0\n2,0\n3,1\n4,1\n")
    unwritable(iris_store)
    before = _tree(iris_store)
    code, out, err = run_cli(capsys, "--store", iris_store, *args)
    assert code == EXIT_INPUT and out == "", err
    assert err.splitlines() == [
        f"catdask {args[0]}: error: the store {iris_store} cannot be written (Permission "
        f"denied): {writes} there. Use a writable store (check --store), or run it as the "
        "store's owner; reading it (`catdask models`, `predict`, `plot`, `check`) still works"]
    assert _tree(iris_store) == before  # no .prefect, nothing half-written


def test_a_subfolder_of_another_user_is_named(capsys, iris_store, unwritable):
    unwritable(iris_store / "datasets")
    code, _, err = run_cli(capsys, "--store", iris_store, "ingest", "wine")
    assert code == EXIT_INPUT
    assert (f"cannot be written (Permission denied in {iris_store / 'datasets'}): "
            "`catdask ingest` writes data sets there") in err, err


def test_reading_an_unwritable_store_still_works(capsys, iris_store, unwritable):
    from sklearn.datasets import load_iris

    from catdask import CategorySpace
    from catdask.store import register_estimator

    X, y = load_iris(return_X_y=True)
    register_estimator(iris_store, "iris-cqs", CategorySpace(n_restarts=1).fit(X, y),
                       meta={"dataset": "iris"})
    unwritable(iris_store)
    for args in (["datasets"], ["models", "list"], ["check"], ["predict", "iris-cqs"]):
        code, out, err = run_cli(capsys, "--store", iris_store, *args)
        assert code == 0, (args, err)


def test_an_unwritable_prefect_home_is_named(monkeypatch, tmp_path, unwritable):
    from catdask.cli import runtime
    from catdask.cli.exits import CliError

    home = tmp_path / "prefect-home"
    home.mkdir()
    monkeypatch.setenv("PREFECT_HOME", str(home))
    unwritable(home)
    with pytest.raises(CliError, match=rf"Prefect's home folder {home} cannot be written "
                                       r"\(Permission denied\); .* or set PREFECT_HOME"):
        runtime.prepare_prefect(tmp_path / "store")


def test_a_store_write_error_reads_as_its_sentence():
    """Was: "[Errno 30] the store /s cannot be written (...): gc removes files there, ...:
    '/s'", the sentence wrapped in the errno and the path again."""
    import errno

    from catdask.errors import StoreWriteError

    exc = StoreWriteError(errno.EROFS, "the store /s cannot be written: gc changed nothing.", "/s")
    assert str(exc) == "the store /s cannot be written: gc changed nothing."
    assert exc.errno == errno.EROFS and exc.filename == "/s"
    assert str(StoreWriteError("plain")) == "plain"
