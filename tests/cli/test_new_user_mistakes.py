"""A new user's mistakes, each answered in one line that names the problem and the fix, with a
non-zero exit and nothing started or written: a typo in ``--store`` on ``train``, a linear
method on a data set with more classes than features, a misspelt command or option."""

from __future__ import annotations

import pytest

from catdask.cli.exits import EXIT_INPUT, EXIT_USAGE

from .test_cli import cli_env, run_cli  # noqa: F401 - fixtures


def test_train_with_a_named_store_that_does_not_exist_says_so(capsys, tmp_path, monkeypatch):
    """Was: "No data set 'iris' in store ... (stored: none); `catdask ingest iris` first", which
    sends the user to ingest into the misspelt folder."""
    missing = tmp_path / "no-store"
    code, out, err = run_cli(capsys, "--store", missing, "train", "iris")
    assert code == EXIT_INPUT, err
    assert err.splitlines() == [f"catdask train: error: store {missing} does not exist (chosen by "
                                "--store; check the path, or run `catdask ingest` there first "
                                "to create it)"]
    monkeypatch.setenv("CATDASK_STORE", str(missing))
    code, out, err = run_cli(capsys, "train", "iris")
    assert code == EXIT_INPUT and "chosen by $CATDASK_STORE" in err, err
    assert out == "" and not missing.exists()


def test_train_in_the_default_store_before_any_ingest_says_ingest_first(capsys, tmp_path):
    code, _, err = run_cli(capsys, "train", "iris")  # cli_env: cwd is tmp_path, no store there
    assert code == EXIT_INPUT, err
    assert "it is in the catalog: `catdask ingest iris` first" in err
    assert not (tmp_path / "catdask-store").exists()
