"""The ``catdask`` command line: exit codes, messages, and the ingest -> train -> models path.

Most cases call ``catdask.cli.main`` in-process (flows run against the session's Prefect test
server and the module's LocalCluster via ``$CATDASK_SCHEDULER``); two run the installed console
script in a subprocess.

Exit codes: 0 ok, 2 usage, 3 bad input, store problem or unreachable scheduler, 4 model not
certified, 141 output closed early. Mistakes are refused before Prefect or Dask is imported:
those tests time the console script and check that it printed one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("prefect")
pytest.importorskip("distributed")

# Importing prefect.main configures Prefect's console log handler on the current sys.stderr.
# Do it now, at collection, rather than inside a test whose capsys stream is closed afterwards
# (later flow runs would log to the closed stream and fail).
import prefect.main  # noqa: E402,F401

from catdask.cli import EXIT_INPUT, EXIT_OK, EXIT_UNCERTIFIED, EXIT_USAGE, main  # noqa: E402
from catdask.store import list_models, load_model_version  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CONSOLE_SCRIPT = Path(sys.executable).with_name("catdask")


@pytest.fixture(autouse=True)
def cli_env(monkeypatch, tmp_path):
    """No default store in the checkout, no leaking of the CLI's os.environ defaults."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CATDASK_STORE", raising=False)
    monkeypatch.delenv("CATDASK_SCHEDULER", raising=False)
    # The CLI sets these in os.environ when they are missing: restore them (or their absence)
    # after each test.
    for name in ("PREFECT_HOME", "DO_NOT_TRACK", "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT"):
        value = os.environ.get(name)
        monkeypatch.setenv(name, "restore")
        if value is None:
            monkeypatch.delenv(name)
        else:
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    monkeypatch.setenv("PREFECT_LOGGING_LEVEL", "WARNING")
    monkeypatch.setenv("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    yield
    # In-process runs add a filter to the root log handlers (no run tracebacks without -v):
    # take it off again so other tests' handlers see every record.
    import logging

    from catdask.cli.runtime import _NoRunFailureEchoes

    for handler in logging.getLogger().handlers:
        for f in [f for f in handler.filters if isinstance(f, _NoRunFailureEchoes)]:
            handler.removeFilter(f)


@pytest.fixture
def flows_env(prefect_api, dask_scheduler, monkeypatch):
    """For commands that run flows: the session's Prefect API and the module's cluster."""
    monkeypatch.setenv("CATDASK_SCHEDULER", dask_scheduler)
    return dask_scheduler


def run_cli(capsys, *args):
    """``catdask ARGS`` in-process; returns (exit code, stdout, stderr)."""
    try:
        code = main([str(a) for a in args])
    except SystemExit as exc:  # argparse
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- usage: exit 2
@pytest.mark.parametrize("args, expect", [
    ([], "required: command"),
    (["frobnicate"], "invalid choice"),
    (["train"], "required: dataset"),
    (["train", "iris", "--method", "nope"], "invalid choice: 'nope'"),
    (["train", "iris", "--restarts", "many"], "invalid int value"),
    # A misspelt option before the command (was: "invalid choice: 'x'", "required: command").
    (["--stroe", "x", "models", "list"],
     "catdask: error: unrecognized arguments: --stroe; did you mean '--store'?"),
    (["--verbos"], "catdask: error: unrecognized arguments: --verbos; did you mean '--verbose'?"),
    (["-x", "models", "list"], "catdask: error: unrecognized arguments: -x (see"),
    (["models", "compare", "iris-cqs", "1"], "required: v2"),
    (["models", "compare", "iris-cqs:1", "wine-cqs:2"], "two versions of one model"),
    (["train", "iris", "--restarts", "0"], "argument --restarts: must be >= 1, got 0"),
    # One batch of restarts: a bound, as the estimators' n_restarts (was: a fit of hours).
    (["train", "iris", "--restarts", "100000"],
     "argument --restarts: must be at most 1000, got 100000"),
    (["demo", "--restarts", "1001"], "argument --restarts: must be at most 1000, got 1001"),
    (["train", "iris", "--gamma", "-1"], "argument --gamma: must be > 0, got -1"),
    (["train", "iris", "--gamma", "nan"], "argument --gamma: must be > 0"),
    (["train", "iris", "--name", ""], "the model name is empty"),
    (["evaluate", "--splits", "1"], "argument --splits: must be >= 2"),
    (["ingest"], "name data sets"),
    # Options that do not apply are refused, not silently ignored (and recorded).
    (["train", "iris", "--gamma", "0.5"],
     "argument --gamma: applies only to --method kcqs or kcas"),
    (["train", "iris", "--method", "cas", "--gamma", "0.5"], "not to cas"),
    (["train", "iris", "--method", "cas", "--certify", "moment"],
     "argument --certify moment: applies only to --method cqs or kcqs"),
    (["train", "iris", "--method", "kcas", "--certify", "moment"], "no global-optimality test"),
    (["ingest", "iris", "--file", "good.csv", "--label-column", "label", "--name", "g"],
     "give catalog names (or --all) or --file, not both"),
    (["ingest", "--all", "--file", "good.csv"], "not both"),
    (["ingest", "iris", "--name", "g"], "argument --name: applies only to --file"),
    (["ingest", "iris", "--label-column", "0"], "argument --label-column: applies only to --file"),
    (["ingest", "--file", "x.csv", "--name", "x", "--label-column", "0", "--download"],
     "argument --download: applies only to catalog data sets, not to --file"),
    # Options only by their full names: --restart is not taken as --restarts.
    # ... and reported by the command they were given to, whose --help lists the right ones.
    (["train", "iris", "--restart", "3"],
     "catdask train: error: unrecognized arguments: --restart 3; did you mean '--restarts'? "
     "(see `catdask train --help`)"),
    (["ingest", "iris", "--down"], "catdask ingest: error: unrecognized arguments: --down"),
    (["models", "show", "iris-cqs", "--jsn"], "catdask models show: error: unrecognized"),
    # Was: serve started, then "OverflowError: bind(): port must be 0-65535", exit 1.
    (["serve", "--port", "99999"], "argument --port: must be at most 65535, got 99999"),
    (["serve", "--dask-dashboard-port", "70000"], "must be at most 65535"),
    (["gc", "--keep-last", "-1"], "argument --keep-last: must be >= 0, got -1"),
])
def test_usage_errors_exit_2(capsys, args, expect):
    code, out, err = run_cli(capsys, *args)
    assert code == EXIT_USAGE == 2, (code, err)
    assert expect in err, err


# ----------------------------------------------------------------------------- bad input: exit 3
def test_unknown_dataset_exit_3(capsys, tmp_path, flows_env):
    store = tmp_path / "store"
    code, _, err = run_cli(capsys, "ingest", "no-such-data", "--store", store)
    assert code == EXIT_INPUT == 3
    assert "catdask ingest: error: No data set 'no-such-data' in the catalog" in err
    assert "iris" in err  # lists the known ones
    assert not store.exists()

    store.mkdir()  # a --store that does not exist is its own error (test_new_user_mistakes)
    code, _, err = run_cli(capsys, "train", "no-such-data", "--store", store)
    assert code == EXIT_INPUT
    assert "catdask train: error: No data set 'no-such-data' in store" in err
    assert list(store.iterdir()) == []


@pytest.mark.parametrize("args, expect", [
    (["train", "../iris"], "Invalid data set name '../iris'"),
    (["train", "iris", "--name", "../../evil"], "Invalid model name '../../evil'"),
    (["train", "iris", "--name", "a/b"], "path separator"),
    (["train", "iris;rm", "--name", "ok"], "character(s) ';'"),
    (["models", "show", "../models/iris-cqs"], "Invalid model name"),
    (["models", "list", ".."], "Invalid model name '..'"),
    (["models", "compare", "../x", "1", "2"], "Invalid model name '../x'"),
    (["plot", "/etc/passwd"], "Invalid model name '/etc/passwd'"),
    (["ingest", "../iris"], "../iris: no such file (and no catalog data set of that name)"),
])
def test_names_that_would_escape_the_store_exit_3(capsys, iris_store, flows_env, args, expect):
    before = sorted(p.name for p in iris_store.parent.iterdir())
    code, _, err = run_cli(capsys, *args, "--store", iris_store)
    assert code == EXIT_INPUT, (code, err)
    assert expect in err, err
    assert sorted(p.name for p in iris_store.parent.iterdir()) == before
    assert list_models(iris_store) == []


def test_ingest_file_with_unsafe_name_exit_3(capsys, tmp_path):
    data = tmp_path / "data.csv"
    data.write_text("a,b,label\n1,2,x\n3,4,x\n5,6,y\n7,9,y\n")
    store = tmp_path / "store"
    for name in ("../escape", "a/b", ".hidden", "con"):
        code, _, err = run_cli(capsys, "ingest", "--file", data, "--name", name,
                               "--label-column", "label", "--store", store)
        assert code == EXIT_INPUT, (name, code, err)
        assert f"Invalid data set name {name!r}" in err
    assert not (tmp_path / "escape").exists()
    assert not (store / "datasets").exists() or list((store / "datasets").iterdir()) == []


def test_a_first_ingest_of_ones_own_table(capsys, tmp_path, monkeypatch):
    """``catdask ingest flowers.csv`` (a file, as a new user writes it) is ``--file``; without
    --label-column the error lists the columns to choose from; a mistyped file name is a
    missing file, not an unknown catalog set."""
    monkeypatch.chdir(tmp_path)
    rows = "".join(f"{i % 3 + i / 50},{i % 5},{i % 7 / 3},{'abc'[i % 3]}\n" for i in range(30))
    Path("flowers.csv").write_text("petal length,petal width,sepal length,species\n" + rows)
    Path("bare.csv").write_text(rows)
    code, _, err = run_cli(capsys, "ingest", "flowers.csv", "--store", "s")
    assert code == EXIT_USAGE, err
    assert ("flowers.csv: which column holds the class labels? Say it with --label-column (its "
            "columns: petal length, petal width, sepal length, species; e.g. --label-column "
            "species)") in err
    code, _, err = run_cli(capsys, "ingest", "--file", "bare.csv", "--store", "s")
    assert code == EXIT_USAGE and "(no header: a 0-based index, 0 to 3; e.g. --label-column 3 "\
                                  "for the last)" in err, err
    assert not Path("s").exists()
    code, _, err = run_cli(capsys, "ingest", "flowrs.csv", "--store", "s")
    assert code == EXIT_INPUT, err
    assert "flowrs.csv: no such file; did you mean 'flowers.csv'?" in err
    code, _, err = run_cli(capsys, "ingest", "flowers.csv", "--label-column", "species",
                           "--store", "s")
    assert code == EXIT_OK, err
    assert "flowers: stored as snapshot s1 (30 x 3, 3 classes)" in err


def test_bad_paths_exit_3(capsys, tmp_path, iris_store):
    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    code, _, err = run_cli(capsys, "--store", a_file, "datasets")
    assert code == EXIT_INPUT, (code, err)
    assert "is a file, not a folder" in err and str(a_file) in err

    code, _, err = run_cli(capsys, "ingest", "--file", tmp_path / "missing.csv", "--name", "m",
                           "--label-column", "0", "--store", tmp_path / "store2")
    assert code == EXIT_INPUT, (code, err)
    assert "missing.csv" in err and "not found" in err


def _command_name(args):
    """The command an error line names: ``models`` errors name their subcommand."""
    return " ".join(args[:2]) if args[0] == "models" else args[0]


READ_ONLY_COMMANDS = [["datasets"], ["models", "list"], ["models", "show", "iris-cqs"],
                      ["models", "compare", "iris-cqs", "1", "2"], ["plot", "iris-cqs"], ["gc"],
                      ["check"], ["predict", "iris-cqs"]]


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS, ids=" ".join)
def test_a_named_store_that_does_not_exist_exit_3(capsys, tmp_path, monkeypatch, command):
    """A typo in --store or $CATDASK_STORE is an error, not an empty store."""
    missing = tmp_path / "no-store"
    code, out, err = run_cli(capsys, "--store", missing, *command)
    assert code == EXIT_INPUT, (code, out, err)
    assert err.splitlines() == [f"catdask {_command_name(command)}: error: store {missing} "
                                "does not exist "
                                "(chosen by --store; check the path, or run `catdask ingest` "
                                "there first to create it)"]
    assert out == ""
    monkeypatch.setenv("CATDASK_STORE", str(missing))
    code, _, err = run_cli(capsys, *command)
    assert code == EXIT_INPUT and f"store {missing} does not exist" in err
    assert "chosen by $CATDASK_STORE" in err
    assert not missing.exists()


def test_models_list_says_which_models_are_being_trained(capsys, tmp_path):
    """While a run trains a model (its lease held), ``models list`` says so under the table:
    a version may be on its way, and another ``train`` of it would wait."""
    from catdask.store import training_lease

    store = tmp_path / "store"
    store.mkdir()
    with training_lease(store, "wine-kcqs", holder="flow run 1234"):
        code, out, err = run_cli(capsys, "--store", store, "models", "list")
        assert code == EXIT_OK, err
        assert f"training now: wine-kcqs by flow run 1234 (pid {os.getpid()} on " in out
        # Its first version is on its way: not "no such model, did you mean ...".
        code, _, err = run_cli(capsys, "--store", store, "models", "show", "wine-kcqs")
        assert code == EXIT_INPUT
        assert "No model 'wine-kcqs' in the registry at" in err
        assert "yet: flow run 1234 is training it now (since " in err
    code, out, _ = run_cli(capsys, "--store", store, "models", "list")
    assert "training now" not in out


def test_the_default_store_may_be_missing_and_is_named(capsys, tmp_path):
    """Nothing ingested yet in ./catdask-store: the read-only commands work and say where
    they looked."""
    default = tmp_path / "catdask-store"  # cli_env: the working directory is tmp_path
    code, out, err = run_cli(capsys, "models", "list")
    assert code == EXIT_OK, err
    assert out.strip() == (f"no models in {default} (it does not exist yet; `catdask ingest` "
                           "creates it)")
    code, out, err = run_cli(capsys, "datasets")
    assert code == EXIT_OK and "iris" in out
    assert f"store {default} does not exist yet" in err
    code, out, err = run_cli(capsys, "gc")
    assert code == EXIT_OK and f"nothing to remove: store {default} does not exist yet" in err
    code, _, err = run_cli(capsys, "models", "show", "iris-cqs")
    assert code == EXIT_INPUT
    assert f"No model 'iris-cqs': the store {default} does not exist yet" in err
    code, out, err = run_cli(capsys, "check")  # was: "error: store ... does not exist"
    assert code == EXIT_INPUT and out == ""
    assert err.splitlines() == [f"catdask check: error: store {default} does not exist yet, so "
                                "there is nothing to check (`catdask ingest` creates it)"]
    assert not default.exists()


@pytest.mark.parametrize("args, expect", [
    (["models", "list", "nothing"], "No model 'nothing' in the registry at {store} "
                                    "(registered: iris-cqs)"),
    (["models", "list", "iris-cq"], "No model 'iris-cq' in the registry at {store}; "
                                    "did you mean 'iris-cqs'? (registered: iris-cqs)"),
    (["models", "show", "iris-cq"], "did you mean 'iris-cqs'?"),
    (["models", "compare", "irsi-cqs", "1", "2"], "did you mean 'iris-cqs'?"),
    (["plot", "irsi-cqs"], "did you mean 'iris-cqs'?"),
    (["predict", "irsi-cqs"], "did you mean 'iris-cqs'?"),
    (["plot", "irsi-cqs:v1"], "did you mean 'iris-cqs'?"),
    (["plot", "iris-cqs", "--dataset", "irsi"], "did you mean 'iris'?"),
])
def test_unknown_model_names_list_the_registered_ones(capsys, two_versions, args, expect):
    code, out, err = run_cli(capsys, *args, "--store", two_versions)
    assert code == EXIT_INPUT, (code, out, err)
    (line,) = err.splitlines()
    assert line.startswith(f"catdask {_command_name(args)}: error: ") and out == ""
    assert expect.format(store=two_versions.resolve()) in line


def test_models_list_shows_the_method_key_and_origin(capsys, two_versions):
    from sklearn.datasets import load_iris

    from catdask import KernelCategorySpace
    from catdask.store import register_estimator

    X, y = load_iris(return_X_y=True)
    register_estimator(two_versions, "iris-kcas",
                       KernelCategorySpace(objective="absolute", origin="class", n_restarts=1,
                                           certify=False).fit(X[::3], y[::3]))
    code, out, err = run_cli(capsys, "models", "list", "--store", two_versions)
    assert code == EXIT_OK, err
    rows = {line.split()[1]: line.split() for line in out.splitlines() if ":v" in line}
    assert {"cqs", "global"} <= set(rows["iris-cqs:v1"])
    assert {"kcas", "class"} <= set(rows["iris-kcas:v1"])
    assert "CategorySpace" not in out  # the estimator class is not what the user typed
    # The train flow's spec names the method; it wins over the class and objective.
    from catdask.cli.store_commands import method_key

    assert method_key({"spec": {"method": "kcqs"}, "class": "CategorySpace"}) == "kcqs"
    assert method_key({"class": "Other"}) == "Other"


# ----------------------------------------------------------------------------- uncertified: 4
@pytest.mark.slow
def test_uncertified_model_exit_4_unless_allowed(capsys, iris_store, flows_env, monkeypatch):
    """Issue 43 changed the name (the class origin is wine-cqs-class) and what follows the
    first rejection: the fit is kept, so --max-gap and --allow-uncertified decide again
    without fitting (the fit task is made to fail to prove it)."""
    code, out, err = run_cli(capsys, "ingest", "wine", "--store", iris_store)
    assert code == EXIT_OK, err
    # CQS on wine with the class origin: the SDP dual leaves a gap of 1.6e-3.
    args = ("train", "wine", "--origin", "class", "--restarts", "1", "--store", iris_store)
    code, out, err = run_cli(capsys, *args)
    assert code == EXIT_UNCERTIFIED == 4, err
    assert json.loads(out)["status"] == "rejected-uncertified"
    assert "not registered: rejected-uncertified" in err and "--allow-uncertified" in err
    assert "optimality gap <= 0.00164" in err and "no refit" in err
    assert list_models(iris_store) == []

    import catdask.orchestration.train as train_flow
    import catdask.pipeline.training as training

    def no_fit(*a, **k):
        raise AssertionError("refitted")

    real_fit = train_flow.fit_on_dataset
    for module in (training, train_flow):
        monkeypatch.setattr(module, "fit_on_dataset", no_fit)
    # A stated tolerance below the proved gap (1.64e-3) still rejects, saying so.
    code, out, err = run_cli(capsys, *args, "--max-gap", "1e-4")
    assert code == EXIT_UNCERTIFIED, err
    assert json.loads(out)["max_gap"] == 1e-4
    assert "optimality gap <= 0.00164 > --max-gap 0.0001" in err
    assert "--certify moment tries the level-2 moment relaxation" in err
    assert "rejected before; not refitted" in err
    assert list_models(iris_store) == []

    # At or above the gap it registers, recording why and under which policy: from the kept
    # fit, in about a second.
    start = time.perf_counter()
    code, out, err = run_cli(capsys, *args, "--max-gap", "0.01")
    assert time.perf_counter() - start < 2.0
    assert code == EXIT_OK, err
    result = json.loads(out)
    assert (result["version"], result["status"]) == ("wine-cqs-class:v1", "gap-within-tolerance")
    assert "from the fit that was rejected before; not refitted" in err
    _, meta = load_model_version(iris_store, "wine-cqs-class")
    assert meta["registration_status"] == "gap-within-tolerance"
    assert meta["registration_policy"] == {"max_gap": 0.01, "allow_uncertified": False}
    assert meta["certified"] is False and 1e-3 < meta["gap"] <= 0.01
    code, out, err = run_cli(capsys, "models", "show", "wine-cqs-class", "--store", iris_store)
    assert code == EXIT_OK, err
    assert "NOT certified, optimality gap at most 0.00164 <= --max-gap 0.01" in out
    code, out, err = run_cli(capsys, "models", "list", "--store", iris_store)
    assert "gap-within-tolerance" in out

    # Only the registration policy differs: the registered version, no second one.
    code, out, err = run_cli(capsys, *args, "--allow-uncertified")
    assert code == EXIT_OK, err
    assert json.loads(out)["version"] == "wine-cqs-class:v1"
    assert len(list_models(iris_store, "wine-cqs-class")) == 1
    for module in (training, train_flow):
        monkeypatch.setattr(module, "fit_on_dataset", real_fit)

    # What the rejection suggests: the moment relaxation proves this optimum (the same model,
    # so under the same name).
    code, out, err = run_cli(capsys, *args, "--certify", "moment")
    assert code == EXIT_OK, err
    result = json.loads(out)
    assert (result["version"], result["status"]) == ("wine-cqs-class:v2", "certified")


def test_max_gap_applies_only_to_quadratic_methods(capsys, iris_store):
    code, _, err = run_cli(capsys, "train", "iris", "--method", "cas", "--max-gap", "1e-4",
                           "--store", iris_store)
    assert code == 2 and "--max-gap: applies only to --method" in err
    code, _, err = run_cli(capsys, "train", "iris", "--max-gap", "-1", "--store", iris_store)
    assert code == 2 and "must be >= 0" in err


def test_cas_is_registered_without_allow_uncertified(capsys, iris_store, flows_env):
    code, out, err = run_cli(capsys, "train", "iris", "--method", "cas", "--restarts", "1",
                             "--store", iris_store)
    assert code == EXIT_OK, err
    result = json.loads(out)
    assert result["version"] == "iris-cas:v1"
    assert result["status"] == "certificate-not-applicable"


def test_a_repeated_train_returns_the_registered_version_unless_refit(capsys, iris_store,
                                                                      flows_env):
    """The train cache through the CLI: same data set and spec, same version, nothing fitted;
    ``--refit`` fits again (issue 28 item 4)."""
    args = ("train", "iris", "--restarts", "1", "--store", iris_store)
    results = []
    for extra in ((), (), ("--refit",)):
        code, out, err = run_cli(capsys, *args, *extra)
        assert code == EXIT_OK, err
        results.append(json.loads(out))
    assert [(r["version"], r["cached"]) for r in results] == [
        ("iris-cqs:v1", False), ("iris-cqs:v1", True), ("iris-cqs:v2", False)]
    assert results[1]["objective"] == results[0]["objective"]
    assert [str(v) for v in list_models(iris_store)] == ["iris-cqs:v1", "iris-cqs:v2"]


def test_a_repeated_train_answers_from_the_registry_before_prefect(capsys, iris_store,
                                                                   flows_env, monkeypatch):
    """The cache is asked before Prefect or Dask starts: with the Prefect API unreachable, a
    repeat of a registered fit still answers (exit 0, the same version); a new spec does not."""
    from tests.helpers.procs import free_port

    args = ("train", "iris", "--restarts", "1", "--store", iris_store)
    code, out, err = run_cli(capsys, *args)
    assert code == EXIT_OK, err
    monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{free_port()}/api")
    code, out, err = run_cli(capsys, *args)
    assert code == EXIT_OK, err
    assert json.loads(out)["version"] == "iris-cqs:v1" and json.loads(out)["cached"]
    assert "not refitted" in err
    code, _, err = run_cli(capsys, *args, "--seed", "7")  # another spec: the flow must run
    assert code == 3 and "Prefect" in err


# ----------------------------------------------------------------------------- end to end
@pytest.mark.slow
def test_ingest_train_models_plot_datasets(capsys, tmp_path, flows_env):
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "ingest", "iris", "--store", store)
    assert code == EXIT_OK, err
    (report,) = json.loads(out)
    assert report["name"] == "iris" and report["written"] is True

    versions = []
    for seed in (0, 1):
        code, out, err = run_cli(capsys, "train", "iris", "--store", store, "--restarts", "2",
                                 "--seed", seed)
        assert code == EXIT_OK, err
        result = json.loads(out)
        assert result["status"] == "certified"
        versions.append(result["version"])
    assert versions == ["iris-cqs:v1", "iris-cqs:v2"]

    code, out, _ = run_cli(capsys, "models", "list", "--store", store)
    assert code == EXIT_OK
    assert "iris-cqs:v1" in out and "iris-cqs:v2" in out and "certified" in out

    code, out, _ = run_cli(capsys, "models", "show", "iris-cqs:v1", "--json", "--store", store)
    assert code == EXIT_OK
    meta = json.loads(out)
    assert meta["version"] == 1 and meta["dataset"] == "iris"
    assert meta["registration_status"] == "certified"
    code, out, _ = run_cli(capsys, "models", "show", "iris-cqs", "--json", "--store", store)
    assert json.loads(out)["version"] == 2  # latest
    code, out, _ = run_cli(capsys, "models", "show", "iris-cqs", "--store", store)
    assert code == EXIT_OK  # for a person: the status line first, the verified gap in it
    assert out.startswith("iris-cqs:v2  certified globally optimal (SDP dual; verified gap ")
    assert "data set:    iris (snapshot s1)" in out and "--json" in out

    code, out, _ = run_cli(capsys, "models", "compare", "iris-cqs", "1", "2", "--json",
                           "--store", store)
    assert code == EXIT_OK
    cmp = json.loads(out)
    assert cmp["versions"] == [1, 2] and "run_key" in cmp["changed"]
    code, out, _ = run_cli(capsys, "models", "compare", "iris-cqs", "1", "2", "--store", store)
    assert code == EXIT_OK and out.startswith("iris-cqs: v1 -> v2\n")
    assert "param random_state" in out

    code, _, err = run_cli(capsys, "models", "show", "iris-cqs:v9", "--store", store)
    assert code == EXIT_INPUT and "has no version 'v9'" in err

    png = tmp_path / "plots" / "iris.png"
    code, out, err = run_cli(capsys, "plot", "iris-cqs:v1", "--out", png, "--store", store)
    assert code == EXIT_OK, err
    assert out.strip() == str(png)
    assert png.stat().st_size > 1000 and png.read_bytes()[:8] == PNG_MAGIC
    # The format follows the extension (it was PNG bytes whatever the name).
    for suffix, magic in ((".pdf", b"%PDF"), (".svg", b"<?xml")):
        path = tmp_path / "plots" / f"iris{suffix}"
        code, out, err = run_cli(capsys, "plot", "iris-cqs:v1", "--out", path, "--store", store)
        assert code == EXIT_OK and out.strip() == str(path), err
        assert path.read_bytes()[:len(magic)] == magic
    # Another data set with another feature count: said in the model's and data set's terms.
    code, _, err = run_cli(capsys, "ingest", "wine", "--store", store)
    assert code == EXIT_OK, err
    code, out, err = run_cli(capsys, "plot", "iris-cqs", "--dataset", "wine", "--out",
                             tmp_path / "w.png", "--store", store)
    assert code == EXIT_INPUT and out == "", err
    assert err.strip() == ("catdask plot: error: model iris-cqs:v2 was trained on 4 features; "
                           "data set wine has 13")
    assert not (tmp_path / "w.png").exists()

    code, out, _ = run_cli(capsys, "datasets", "--store", store)
    assert code == EXIT_OK
    iris_row = next(line for line in out.splitlines() if " iris " in line)
    assert "True" in iris_row and "150" in iris_row
    assert "wine" in out  # catalog entries not stored are listed too

    # The global option before the command works as well.
    code, out, _ = run_cli(capsys, "--store", store, "models", "list", "iris-cqs")
    assert code == EXIT_OK and "iris-cqs:v2" in out


@pytest.mark.slow
def test_demo_ingests_trains_certifies_registers_and_plots(capsys, tmp_path, flows_env,
                                                           monkeypatch):
    """The README's main job (``catdask demo``), reduced: iris and wine, 2 restarts."""
    import catdask.cli.demo

    # Wine (178 samples) above the kernel limit: the demo must say it skipped K-CQS there.
    monkeypatch.setattr(catdask.cli.demo, "DEMO_KERNEL_MAX_SAMPLES", 160)
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "demo", "--quick", "--restarts", "2", "--store", store)
    assert code == EXIT_OK, err
    messages = " ".join(err.split())  # progress and notes go to stderr, wrapped by rich
    assert "K-CQS not trained on wine" in messages
    assert "3 models: 3 fitted and registered" in messages  # issue 43: says what it did

    versions = {name: list_models(store, name) for name in ("iris-cqs", "iris-kcqs", "wine-cqs")}
    assert all(len(v) == 1 for v in versions.values()), versions
    assert list_models(store, "wine-kcqs") == []
    n_certified = 0
    for name in versions:
        _, meta = load_model_version(store, name)
        assert meta["dataset"] == name.split("-")[0] and meta["params"]["n_restarts"] == 2
        assert len(meta["restarts"]) >= 2 and all("certified" in r for r in meta["restarts"])
        n_certified += meta["registration_status"] == "certified"
        plot = store / "plots" / f"{name}-v1.png"
        assert plot.read_bytes()[:8] == PNG_MAGIC and f"{name}:v1" in out  # summary table
    assert f"{n_certified} certified globally optimal" in messages


def test_models_show_refuses_an_edited_version(capsys, tmp_path, iris_store, flows_env):
    code, _, err = run_cli(capsys, "train", "iris", "--restarts", "1", "--store", iris_store)
    assert code == EXIT_OK, err
    path = iris_store / "models" / "iris-cqs" / "v1" / "zarr.json"
    node = json.loads(path.read_text())
    node["attributes"]["meta"]["certified"] = "yes"
    path.write_text(json.dumps(node))
    code, _, err = run_cli(capsys, "models", "show", "iris-cqs", "--store", iris_store)
    assert code == EXIT_INPUT
    assert "modified after registration" in err and "v1" in err
    code, _, err = run_cli(capsys, "plot", "iris-cqs", "--out", tmp_path / "p.png",
                           "--store", iris_store)
    assert code == EXIT_INPUT and "modified after registration" in err
    assert not (tmp_path / "p.png").exists()


def test_check_verifies_the_store_and_cleans_up(capsys, tmp_path, iris_store):
    """`catdask check`: exit 0 only on a whole store; exit 3 naming each problem (a crash
    leftover, edited model attributes, a data-set chunk changed on disk); --cleanup removes the
    leftover but never the damaged data."""
    from sklearn.datasets import load_iris

    from catdask import CategorySpace
    from catdask.store import register_estimator

    X, y = load_iris(return_X_y=True)
    register_estimator(iris_store, "iris-cqs", CategorySpace(n_restarts=1).fit(X, y))
    register_estimator(iris_store, "iris-cqs", CategorySpace(n_restarts=1, random_state=1).fit(X, y))
    code, out, err = run_cli(capsys, "check", "--store", iris_store)
    assert code == EXIT_OK, err
    assert out.count(" ok ") >= 3 and "iris-cqs:v2" in out

    leftover = iris_store / "models" / "iris-cqs" / ".tmp-v3-crashed"
    leftover.mkdir()
    code, out, err = run_cli(capsys, "check", "--store", iris_store)
    assert code == EXIT_INPUT and "1 problem(s)" in err and "temporary" in out
    assert leftover.exists()  # only --cleanup touches temporaries

    path = iris_store / "models" / "iris-cqs" / "v1" / "zarr.json"
    node = json.loads(path.read_text())
    node["attributes"]["meta"]["objective"] = 1e9
    path.write_text(json.dumps(node))
    code, out, err = run_cli(capsys, "check", "--store", iris_store)
    assert code == EXIT_INPUT and "2 problem(s)" in err and "iris-cqs:v1" in out

    chunk = next(p for p in (iris_store / "datasets" / "iris" / "s1" / "X").rglob("*")
                 if p.is_file() and p.name != "zarr.json")
    data = bytearray(chunk.read_bytes())
    data[-1] ^= 0xFF
    chunk.write_bytes(bytes(data))
    code, out, err = run_cli(capsys, "check", "--cleanup", "--store", iris_store)
    assert code == EXIT_INPUT and "2 problem(s)" in err  # model v1 and the data set remain
    assert "removed" in out and not leftover.exists()
    assert chunk.exists()  # damaged data is reported, never deleted
    # Each damaged entry is one row, its problem with its severity (was: the entry's row, and
    # the same message again as a problem row).
    from catdask.cli.store_commands import check_rows
    from catdask.store import check_store

    errors = [r for r in check_rows(check_store(iris_store)) if r["status"].startswith("error")]
    assert sorted(r["name"] for r in errors) == ["iris", "iris-cqs:v1"], errors


def test_gc_keeps_snapshots_models_were_trained_on(capsys, tmp_path):
    """`catdask gc`: removes a replaced snapshot no model refers to; --dry-run only lists."""
    import numpy as np

    from catdask.store import write_dataset

    store = tmp_path / "store"
    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 5)
    write_dataset(store, "blobs", rng.normal(size=(10, 3)), y)
    write_dataset(store, "blobs", rng.normal(size=(10, 3)), y, replace=True)
    code, out, _ = run_cli(capsys, "gc", "--dry-run", "--store", store)
    assert code == EXIT_OK and "would remove" in out
    assert (store / "datasets" / "blobs" / "s1").exists()
    code, out, _ = run_cli(capsys, "gc", "--store", store)
    assert code == EXIT_OK and "removed" in out
    assert not (store / "datasets" / "blobs" / "s1").exists()
    assert (store / "datasets" / "blobs" / "s2").exists()


# ----------------------------------------------------------------------------- console script
def _script(args, env, cwd, timeout=180):
    if not CONSOLE_SCRIPT.exists():
        pytest.skip(f"console script not installed at {CONSOLE_SCRIPT}")
    return subprocess.run([str(CONSOLE_SCRIPT), *map(str, args)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_console_script_train(iris_store, tmp_path, prefect_env, dask_scheduler):
    """`catdask train` as installed: a flow run on the given Prefect API and Dask scheduler.

    Its console shows catdask's own progress, not Prefect's run logs ("Beginning flow run",
    a "View at" link to a server that is gone when the command ends, "Finished in state"),
    while those logs still reach the Prefect API whole.
    """
    env = dict(prefect_env, CATDASK_SCHEDULER=dask_scheduler)
    env.pop("PREFECT_LOGGING_LEVEL", None)  # Prefect's default (INFO), as users have it
    r = _script(["train", "iris", "--store", iris_store, "--restarts", "2"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["version"] == "iris-cqs:v1" and result["status"] == "certified"
    assert [str(v) for v in list_models(iris_store)] == ["iris-cqs:v1"]
    assert Path(result["plot"]).is_file()

    lines = r.stderr.splitlines()
    # Where to watch the fit (one line), and otherwise catdask's own progress lines only.
    watch = [line for line in lines if line.startswith("catdask train: Dask dashboard: http")]
    assert len(watch) == 1 and dask_scheduler in watch[0], lines
    assert all(line.startswith("catdask train: train cqs on iris")
               for line in lines if line not in watch), lines
    assert any(": iteration 1, best objective" in line for line in lines), lines  # solver
    assert any(line.endswith("(the best) for global optimality ...") for line in lines), lines
    assert "done in" in lines[-1] and "certified" in lines[-1]

    _, meta = load_model_version(iris_store, "iris-cqs")
    run_id = meta["run_key"].removeprefix("flow-run:")  # the default key: the run's id
    messages = _flow_run_logs(run_id, until="registered iris-cqs:v1")
    assert any(m.startswith("Beginning flow run") for m in messages), messages
    assert any(m.startswith("solver loop 1, iteration 1:") for m in messages), messages
    assert any(m.startswith("Finished in state Completed") for m in messages), messages


def _flow_run_logs(run_id: str, until: str, timeout: float = 30.0) -> list[str]:
    """The messages the Prefect API holds for flow run ``run_id``, once one contains
    ``until`` (a subprocess's last log batch may still be on its way)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    deadline = time.monotonic() + timeout
    while True:
        with get_client(sync_client=True) as client:
            messages = [log.message for log in client.read_logs(
                LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id])))]
        if any(until in m for m in messages) or time.monotonic() > deadline:
            return messages
        time.sleep(0.5)


@pytest.mark.timeout(300)
@pytest.mark.slow
def test_console_script_flow_failure_is_one_line(tmp_path, prefect_env):
    """An error inside a flow run is printed once, by the CLI: not also as Prefect's failed
    task and flow records (each repeated it, with tracebacks)."""
    import numpy as np

    from catdask.store import write_dataset

    store = tmp_path / "store"
    write_dataset(store, "iris", np.arange(12.0).reshape(6, 2), np.repeat([0, 1], 3))
    env = dict(prefect_env)
    env.pop("PREFECT_LOGGING_LEVEL", None)  # Prefect's default (INFO), as users have it
    r = _script(["ingest", "iris", "--store", store], env, tmp_path)
    assert r.returncode == EXIT_INPUT, r.stderr
    lines = [line for line in r.stderr.splitlines()
             if not line.startswith("catdask ingest: ingest")]  # the progress lines
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("catdask ingest: error: Data set 'iris' already holds different")
    assert "Pass --replace to replace it" in lines[0] and "replace=True" not in lines[0]


@pytest.mark.timeout(120)
def test_console_script_exit_codes(tmp_path, prefect_env):
    missing = tmp_path / "no-store"
    r = _script(["models", "show", "iris-cqs", "--store", missing], prefect_env, tmp_path)
    assert r.returncode == 3, r.stderr
    assert f"catdask models show: error: store {missing} does not exist" in r.stderr
    assert "Traceback" not in r.stderr
    r = _script(["models", "show", "iris-cqs"], prefect_env, tmp_path)  # ./catdask-store
    assert r.returncode == 3 and "catdask models show: error: No model 'iris-cqs'" in r.stderr
    r = _script(["frobnicate"], prefect_env, tmp_path)
    assert r.returncode == 2 and "invalid choice" in r.stderr


# ----------------------------------------------------------------------------- fast failures
FAST_EXIT_SECONDS = 2.0  # usage and bad-input errors: console script start to exit
SCHEDULER_EXIT_SECONDS = 10.0
HANG_SECONDS = 30.0  # wall-time bound for the fast failures on a loaded machine


def _closed_port() -> int:
    """A local TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timed_script(args, env, cwd, tmp_path):
    """Run the console script; returns (result, wall seconds, CPU seconds).

    The CPU time (user + system, from ``wait4``) is what the CLI costs; it is what the fast-
    failure tests bound, since the wall time on a machine shared by many jobs says more about
    the other jobs (importing Prefect alone costs more than 2 s of CPU).
    """
    if not CONSOLE_SCRIPT.exists():
        pytest.skip(f"console script not installed at {CONSOLE_SCRIPT}")
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    start = time.perf_counter()
    with open(out, "w") as fout, open(err, "w") as ferr:
        proc = subprocess.Popen([str(CONSOLE_SCRIPT), *map(str, args)], env=env, cwd=cwd,
                                stdout=fout, stderr=ferr, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out.read_text(),
                                         err.read_text())
    return result, wall, usage.ru_utime + usage.ru_stime


@pytest.mark.parametrize("args, code, expect", [
    (["train", "irsi"], EXIT_INPUT, "No data set 'irsi' in store"),
    (["train", "irsi"], EXIT_INPUT, "did you mean 'iris'?"),
    (["train", "wine"], EXIT_INPUT, "`catdask ingest wine` first"),
    (["ingest", "wnie"], EXIT_INPUT, "No data set 'wnie' in the catalog; did you mean 'wine'?"),
    (["evaluate", "irsi"], EXIT_INPUT, "did you mean 'iris'?"),
    (["train", "iris", "--restarts", "0"], EXIT_USAGE, "--restarts: must be >= 1"),
    (["train", "iris", "--gamma", "-1"], EXIT_USAGE, "--gamma: must be > 0"),
    (["train", "iris", "--gamma", "0.5"], EXIT_USAGE, "--gamma: applies only to --method kcqs"),
    (["train", "iris", "--method", "nope"], EXIT_USAGE, "invalid choice: 'nope'"),
    (["train", "iris", "--name", ""], EXIT_USAGE, "the model name is empty"),
    (["train", "iris", "--name", "a/b"], EXIT_INPUT, "path separator"),
    # Refused before the seconds of pipeline / plotting imports.
    (["ingest", "--file", "/dev/zero", "--name", "x", "--label-column", "0"], EXIT_INPUT,
     "/dev/zero: is a device, not a regular file"),
    (["ingest", "--file", "missing.csv", "--name", "x", "--label-column", "0"], EXIT_INPUT,
     "missing.csv: file not found"),
    (["ingest", "--file", "missing.csv", "--name", "", "--label-column", "0"], EXIT_USAGE,
     "the data-set name is empty"),
    (["plot", "nosuch:v9"], EXIT_INPUT, "No model 'nosuch' in the registry"),
    # matplotlib would write PNG bytes into x.jpg: refused before the model is looked up.
    (["plot", "nosuch", "--out", "x.jpg"], EXIT_USAGE,
     "--out: 'x.jpg' has extension '.jpg'; a plot is written as .png, .pdf, .svg"),
    (["models", "show", "nosuch"], EXIT_INPUT, "No model 'nosuch' in the registry"),
    (["models", "list", "nosuch"], EXIT_INPUT, "No model 'nosuch' in the registry"),
    (["ingest", "iris", "--file", "x.csv"], EXIT_USAGE, "or --file, not both"),
])
def test_mistakes_are_refused_at_once_in_one_line(iris_store, tmp_path, args, code, expect):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "CATDASK_"))}
    r, wall, cpu = _timed_script([*args, "--store", iris_store], env, tmp_path, tmp_path)
    assert r.returncode == code, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(f"catdask {_command_name(args)}: error: "), lines
    assert expect in lines[0], lines
    assert r.stdout == ""
    assert cpu < FAST_EXIT_SECONDS and wall < HANG_SECONDS, f"CPU {cpu:.2f} s, wall {wall:.2f} s"
    assert sorted(p.name for p in iris_store.iterdir()) == ["datasets"]  # nothing written


def test_verbose_after_the_command_shows_the_traceback(iris_store, tmp_path):
    r = _script(["train", "irsi", "--store", iris_store, "-v"], dict(os.environ), tmp_path, 60)
    assert r.returncode == EXIT_INPUT
    assert "Traceback" in r.stderr and r.stderr.splitlines()[-1].startswith("catdask train: error:")
    r = _script(["train", "irsi", "--store", iris_store, "--debug"], dict(os.environ), tmp_path, 60)
    assert "Traceback" in r.stderr


def test_unreachable_scheduler_fails_fast_naming_the_address(iris_store, tmp_path):
    address = f"tcp://127.0.0.1:{_closed_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CATDASK_")}
    r, seconds, _ = _timed_script(["train", "iris", "--scheduler", address, "--store", iris_store],
                                  env, tmp_path, tmp_path)
    assert r.returncode == EXIT_INPUT, r.stderr
    assert r.stderr.splitlines() == [r.stderr.strip()] and "Traceback" not in r.stderr
    assert f"cannot reach the Dask scheduler at {address}" in r.stderr
    assert seconds < SCHEDULER_EXIT_SECONDS, f"{seconds:.2f} s"
    # The environment variable is checked the same way.
    r = _script(["train", "iris", "--store", iris_store], dict(env, CATDASK_SCHEDULER=address),
                tmp_path, 60)
    assert r.returncode == EXIT_INPUT and address in r.stderr and "Traceback" not in r.stderr


def test_serve_refuses_an_unreachable_scheduler_at_once(iris_store, tmp_path):
    """`serve --scheduler` / `$CATDASK_SCHEDULER` are probed before anything starts, as for
    train (issue: serve ignored the variable, started its own cluster and overwrote it)."""
    address = f"tcp://127.0.0.1:{_closed_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CATDASK_")}
    for args, run_env in ((["--scheduler", address], env),
                          ([], dict(env, CATDASK_SCHEDULER=address))):
        r, seconds, _ = _timed_script(["serve", *args, "--store", iris_store], run_env,
                                      tmp_path, tmp_path)
        assert r.returncode == EXIT_INPUT, r.stderr
        assert r.stderr.strip() == (f"catdask serve: error: cannot reach the Dask scheduler at "
                                    f"{address}: Connection refused (check --scheduler / "
                                    "$CATDASK_SCHEDULER)")
        assert seconds < SCHEDULER_EXIT_SECONDS, f"{seconds:.2f} s"


def test_serve_computes_on_the_given_scheduler(dask_scheduler, monkeypatch):
    """With a scheduler, serve connects to it and starts no cluster of its own."""
    from catdask.distributed import cluster
    from catdask.serve import _dask_client

    monkeypatch.setattr(cluster, "embedded_cluster",
                        lambda **kw: pytest.fail("serve started its own cluster"))
    client, owned = _dask_client(dask_scheduler, dashboard_port=0)
    try:
        assert owned and client.scheduler.address == dask_scheduler
    finally:
        client.close()


def test_bad_scheduler_address_is_named(capsys, iris_store):
    code, _, err = run_cli(capsys, "train", "iris", "--scheduler", "tcp://host:port",
                           "--store", iris_store)
    assert code == EXIT_INPUT and "bad Dask scheduler address 'tcp://host:port'" in err


def test_closed_stdout_exits_quietly(iris_store, tmp_path):
    """`catdask datasets | head -0`: no BrokenPipeError traceback, the SIGPIPE exit code."""
    if not CONSOLE_SCRIPT.exists():
        pytest.skip(f"console script not installed at {CONSOLE_SCRIPT}")
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write
    try:
        r = subprocess.run([str(CONSOLE_SCRIPT), "datasets", "--store", str(iris_store)],
                           stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert r.returncode == 141 and r.stderr == "", r.stderr


# ----------------------------------------------------------------------------- store commands
@pytest.fixture
def two_versions(iris_store):
    from sklearn.datasets import load_iris

    from catdask import CategorySpace
    from catdask.store import register_estimator

    X, y = load_iris(return_X_y=True)
    for seed in (0, 1):
        register_estimator(iris_store, "iris-cqs",
                           CategorySpace(n_restarts=1, random_state=seed).fit(X, y),
                           meta={"dataset": "iris"})
    return iris_store


@pytest.mark.parametrize("versions", [["iris-cqs:1", "iris-cqs:2"], ["iris-cqs:v1", "iris-cqs:v2"],
                                      ["iris-cqs", "1", "2"]])
def test_models_compare_accepts_name_version(capsys, two_versions, versions):
    code, out, err = run_cli(capsys, "models", "compare", *versions, "--json",
                             "--store", two_versions)
    assert code == EXIT_OK, err
    assert json.loads(out)["versions"] == [1, 2]


@pytest.mark.slow
def test_store_commands_never_import_prefect_or_dask(two_versions, tmp_path):
    """datasets, models, check and plot read the store only: no Prefect, no Dask."""
    script = (
        "import sys\n"
        "from catdask.cli import main\n"
        "codes = [main(a.split('|')) for a in sys.argv[1:]]\n"
        "print(codes, [m for m in ('prefect', 'distributed', 'dask') if m in sys.modules])\n"
    )
    store = str(two_versions)
    commands = [f"datasets|--store|{store}", f"models|list|--store|{store}",
                f"models|show|iris-cqs:1|--store|{store}",
                f"models|compare|iris-cqs:1|iris-cqs:2|--store|{store}",
                f"check|--store|{store}",
                f"plot|iris-cqs|--out|{tmp_path / 'p.png'}|--store|{store}"]
    r = subprocess.run([sys.executable, "-c", script, *commands], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120, env=dict(os.environ, MPLBACKEND="Agg"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "[0, 0, 0, 0, 0, 0] []", r.stdout[-500:]


# ----------------------------------------------------------------------------- environment
def test_prefect_home_is_store_local_unless_the_user_chose():
    from catdask.cli.runtime import prefect_environment

    store = Path("/data/store")
    env = prefect_environment({}, store)
    assert env["PREFECT_HOME"] == "/data/store/.prefect"
    assert env["DO_NOT_TRACK"] == "1" and env["PREFECT_SERVER_ANALYTICS_ENABLED"] == "false"
    assert "PREFECT_HOME" not in prefect_environment({"PREFECT_HOME": "/mine"}, store)
    assert "PREFECT_HOME" not in prefect_environment({"PREFECT_API_URL": "http://x/api"}, store)
    opted_in = prefect_environment({"DO_NOT_TRACK": "0",
                                    "PREFECT_SERVER_ANALYTICS_ENABLED": "true"}, store)
    assert "DO_NOT_TRACK" not in opted_in and "PREFECT_SERVER_ANALYTICS_ENABLED" not in opted_in


def test_a_server_set_in_the_users_prefect_profile_is_used(tmp_path, monkeypatch):
    """`prefect config set PREFECT_API_URL=...` writes the active profile; the store-local
    PREFECT_HOME used to hide it, and the runs went to a temporary server instead."""
    from catdask.cli.exits import CliError
    from catdask.cli.runtime import check_prefect_api, prefect_environment, profile_api_url

    profiles = tmp_path / "profiles.toml"
    profiles.write_text('active = "local"\n'
                        '[profiles.local]\nPREFECT_API_URL = "http://127.0.0.1:9/api"\n'
                        '[profiles.other]\nPREFECT_API_URL = "http://10.0.0.5:4200/api"\n'
                        '[profiles.bare]\n')
    store = Path("/data/store")
    env = {"PREFECT_PROFILES_PATH": str(profiles)}
    assert profile_api_url(env) == ("http://127.0.0.1:9/api",
                                    f"Prefect profile 'local' in {profiles}")
    updates = prefect_environment(env, store)
    assert updates["PREFECT_API_URL"] == "http://127.0.0.1:9/api"
    assert "PREFECT_HOME" not in updates  # Prefect reads the user's own home and profile
    assert prefect_environment({**env, "PREFECT_PROFILE": "other"},
                               store)["PREFECT_API_URL"] == "http://10.0.0.5:4200/api"
    for no_url in ({**env, "PREFECT_PROFILE": "bare"}, {**env, "PREFECT_PROFILE": "nosuch"},
                   {"PREFECT_PROFILES_PATH": str(tmp_path / "missing.toml")}):
        assert profile_api_url(no_url) is None
        assert prefect_environment(no_url, store)["PREFECT_HOME"] == "/data/store/.prefect"
    # The default place: ~/.prefect/profiles.toml, or $PREFECT_HOME/profiles.toml.
    (tmp_path / ".prefect").mkdir()
    (tmp_path / ".prefect" / "profiles.toml").write_text(profiles.read_text())
    assert profile_api_url({"HOME": str(tmp_path)})[0] == "http://127.0.0.1:9/api"
    assert profile_api_url({"PREFECT_HOME": str(tmp_path / ".prefect")}) is not None
    broken = tmp_path / "broken.toml"
    broken.write_text("active = [")
    assert profile_api_url({"PREFECT_PROFILES_PATH": str(broken)}) is None

    # The probe checks the profile's server like $PREFECT_API_URL's, and says where it is set.
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_PROFILES_PATH", str(profiles))
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    with pytest.raises(CliError, match=r"cannot reach the Prefect API at http://127\.0\.0\.1:9/api"
                       r".*PREFECT_API_URL of the Prefect profile 'local'.*prefect config unset"):
        check_prefect_api(timeout=2)


class _FakeFlows:
    """Stands in for the flows (``catdask.cli.runtime.flow``): records the calls."""

    def __init__(self, monkeypatch):
        self.calls = []
        monkeypatch.setattr("catdask.cli.runtime.flow", self.flow)
        monkeypatch.setattr("catdask.cli.runtime.prefect_server", contextlib.nullcontext)

    def flow(self, function):
        name = {"run_train": "train"}.get(function.__name__, function.__name__)

        def run(*args, **kwargs):
            self.calls.append((name, args, kwargs))
            if name == "train":
                return {"version": "x:v1", "status": "certified", "objective": 1.0, "n_iter": 3,
                        "gap": 0.0}
            return [{"name": n, "n_samples": 150, "n_features": 4, "n_classes": 3,
                     "written": True, "replaced": False, "snapshot": "s1"}
                    for n in (args[0] if args else [])]
        return run


def test_flow_arguments_defaults_replace_and_evaluation_dir(capsys, iris_store, monkeypatch):
    flows = _FakeFlows(monkeypatch)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_HOME", raising=False)  # cli_env restores it (or its absence)
    code, _, err = run_cli(capsys, "train", "iris", "--store", iris_store)
    assert code == EXIT_OK, err
    assert os.environ["PREFECT_HOME"] == str(iris_store.absolute() / ".prefect")
    (_, _, kwargs), = flows.calls
    # origin, restarts and gamma not given: the library's defaults apply.
    assert not {"origin", "n_restarts", "gamma"} & set(kwargs)
    assert "catdask train: train cqs on iris" in err  # plain progress lines (not a TTY)
    run_cli(capsys, "train", "iris", "--origin", "class", "--restarts", "3", "--store", iris_store)
    assert flows.calls[-1][2]["origin"] == "class" and flows.calls[-1][2]["n_restarts"] == 3

    run_cli(capsys, "ingest", "iris", "--store", iris_store)
    assert flows.calls[-1][2]["replace"] is False
    run_cli(capsys, "ingest", "iris", "--replace", "--store", iris_store)
    assert flows.calls[-1][2]["replace"] is True

    code, _, err = run_cli(capsys, "evaluate", "--quick", "--store", iris_store)
    assert code == EXIT_OK, err
    out_dir = Path(flows.calls[-1][2]["out_dir"])
    assert out_dir.parent == iris_store.resolve() / "evaluations"


def test_kernel_options_reach_the_kernel_methods(capsys, iris_store, monkeypatch):
    flows = _FakeFlows(monkeypatch)
    code, _, err = run_cli(capsys, "train", "iris", "--method", "kcqs", "--gamma", "0.5",
                           "--certify", "moment", "--no-standardize", "--store", iris_store)
    assert code == EXIT_OK, err
    kwargs = flows.calls[-1][2]
    assert kwargs["gamma"] == 0.5 and kwargs["certify"] == "moment"
    assert kwargs["standardise"] is False  # --no-standardize is --no-standardise


def test_method_specific_options_match_the_methods():
    """The CLI's method lists (kept import-free) are the library's."""
    from catdask.cli import checks, parser
    from catdask.methods import METHODS

    assert sorted(parser.METHODS) == sorted(METHODS)
    assert set(checks.KERNEL_METHODS) == {m for m, e in METHODS.items() if e.kernel}
    assert set(checks.QUADRATIC_METHODS) == {m for m, e in METHODS.items()
                                             if e.objective == "quadratic"}


def test_method_choices_come_from_the_registry_without_importing_the_estimators():
    """The parser's --method and --certify choices and the method checks are read from the
    light registry (catdask.method_names): parsing and checking a train command loads neither
    scikit-learn nor SciPy."""
    script = (
        "import sys\n"
        "from catdask.cli import build_parser, checks\n"
        "from catdask.cli.exits import CliError\n"
        "args = build_parser().parse_args(['train', 'iris', '--method', 'kcas', '--gamma', '1'])\n"
        "checks.check_method_options(args)\n"
        "args = build_parser().parse_args(['train', 'iris', '--method', 'cas', "
        "'--certify', 'moment'])\n"
        "try:\n"
        "    checks.check_method_options(args)\n"
        "except CliError as exc:\n"
        "    print(exc)\n"
        "print([m for m in ('sklearn', 'scipy', 'prefect', 'dask') if m in sys.modules])\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    refusal, imported = r.stdout.splitlines()[-2:]
    assert refusal == ("argument --certify moment: applies only to --method cqs or kcqs "
                       "(CAS has no global-optimality test), not to cas"), refusal
    assert imported == "[]", imported


def test_version(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"catdask {version('catdask')}"


def test_ingest_says_what_it_stored_and_names_the_replace_flag(capsys, tmp_path):
    """One line per data set on stderr besides the JSON; a conflicting table names the CLI's
    --replace, not the library's replace=True."""
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text("a,b,label\n1,2,x\n3,4,x\n5,6,y\n7,9,y\n")
    second.write_text("a,b,label\n1,2,x\n3,4,x\n5,6,y\n7,8,y\n")
    store = tmp_path / "store"
    ingest = ["ingest", "--name", "t", "--label-column", "label", "--store", store, "--file"]
    code, out, err = run_cli(capsys, *ingest, first)
    assert code == EXIT_OK, err
    assert json.loads(out)[0]["snapshot"] == "s1"
    assert err.splitlines() == ["t: stored as snapshot s1 (4 x 2, 2 classes)"]
    code, _, err = run_cli(capsys, *ingest, first)
    assert err.splitlines() == ["t: unchanged (same content as s1)"]

    code, out, err = run_cli(capsys, *ingest, second)
    assert code == EXIT_INPUT and out == ""
    (line,) = err.splitlines()
    assert line.startswith("catdask ingest: error: Data set 't' already holds different content")
    assert "Pass --replace to replace it" in line and "replace=True" not in line
    code, _, err = run_cli(capsys, *ingest, second, "--replace")
    assert code == EXIT_OK and err.splitlines() == ["t: replaced: now snapshot s2 (4 x 2, 2 classes)"]


def test_ingest_catalog_sets_prints_one_line_each(capsys, iris_store, monkeypatch):
    _FakeFlows(monkeypatch)
    code, _, err = run_cli(capsys, "ingest", "iris", "wine", "--store", iris_store)
    assert code == EXIT_OK, err
    assert err.splitlines()[-2:] == ["iris: stored as snapshot s1 (150 x 4, 3 classes)",
                                     "wine: stored as snapshot s1 (150 x 4, 3 classes)"]


def test_missing_uci_files_are_reported_before_prefect_starts(capsys, tmp_path, monkeypatch):
    """`catdask ingest vehicle` without its files: one line, with the CLI's flags and the
    folders searched, and no flow run (the Prefect server took ~20 s to start first)."""
    import catdask.catalog.sources as sources

    flows = _FakeFlows(monkeypatch)
    shared = tmp_path / "shared-uci"  # as if no ../shared beside the checkout
    monkeypatch.setattr(sources, "SHARED_UCI_DIR", shared)
    monkeypatch.delenv("CATDASK_SOURCE_DIR", raising=False)
    mine = tmp_path / "mine"
    mine.mkdir()
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "ingest", "vehicle", "--source-dir", mine, "--store", store)
    assert code == EXIT_INPUT and out == "" and flows.calls == []
    (line,) = err.splitlines()
    assert line.startswith("catdask ingest: error: the original files of 'vehicle' (xaa.dat")
    for folder in (mine, mine / "vehicle", store / ".downloads" / "vehicle"):
        assert f"{folder}," in line or f"{folder};" in line, (folder, line)
    assert str(shared) not in line  # no ../shared beside an installed catdask: not listed
    assert "--source-dir DIR or $CATDASK_SOURCE_DIR" in line and "--download" in line
    assert "source_dir" not in line and "allow downloads" not in line

    code, _, err = run_cli(capsys, "ingest", "vehicle", "--source-dir", tmp_path / "typo",
                           "--store", store)
    assert code == EXIT_INPUT and f"argument --source-dir: {tmp_path / 'typo'} is not a folder" in err
    # --download lets the flow fetch them; the files found in a given folder are enough.
    code, _, err = run_cli(capsys, "ingest", "vehicle", "--download", "--store", store)
    assert code == EXIT_OK and flows.calls[-1][2]["allow_download"] is True, err
    for n in "abcdefghi":
        (mine / f"xa{n}.dat").write_text("")
    code, _, err = run_cli(capsys, "ingest", "vehicle", "--source-dir", mine, "--store", store)
    assert code == EXIT_OK and flows.calls[-1][2]["allow_download"] is False, err


def test_a_one_sample_class_says_why_without_pointing_at_the_repository(capsys, tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("a,b,label\n1,2,x\n3,4,x\n5,6,y\n")
    code, _, err = run_cli(capsys, "ingest", "--file", table, "--name", "t", "--label-column",
                           "label", "--store", tmp_path / "store")
    assert code == EXIT_INPUT
    assert "class 'y' has only 1 sample(s)" in err and "one sample has none" in err
    assert "docs/" not in err  # installed users have no docs/ folder


@pytest.mark.parametrize("command", [["train", "iris"], ["ingest", "iris"], ["evaluate", "iris"]],
                         ids=" ".join)
def test_unreachable_prefect_api_fails_fast_naming_the_url(capsys, iris_store, monkeypatch,
                                                           command):
    flows = _FakeFlows(monkeypatch)
    url = f"http://127.0.0.1:{_closed_port()}/api"
    monkeypatch.setenv("PREFECT_API_URL", url)
    code, out, err = run_cli(capsys, *command, "--store", iris_store)
    assert code == EXIT_INPUT and out == "" and flows.calls == [], (code, err)
    assert err.splitlines() == [
        f"catdask {command[0]}: error: cannot reach the Prefect API at {url}: Connection "
        "refused (check PREFECT_API_URL, or unset it to use a temporary local server)"]
    monkeypatch.setenv("PREFECT_API_URL", "127.0.0.1:4200/api")
    code, _, err = run_cli(capsys, *command, "--store", iris_store)
    assert code == EXIT_INPUT and "is not an http(s) URL" in err


def test_prefect_api_probe_passes_a_live_server(prefect_api, monkeypatch):
    from catdask.cli.runtime import check_prefect_api

    monkeypatch.setenv("PREFECT_API_URL", prefect_api)
    check_prefect_api()  # no error


def test_every_option_has_help_and_the_epilog_lists_exit_codes(capsys):
    import argparse

    from catdask.cli import build_parser

    parser = build_parser()
    subparsers = [parser]
    while subparsers:
        p = subparsers.pop()
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                subparsers += action.choices.values()
            elif not isinstance(action, argparse._HelpAction):
                assert action.help, (p.prog, action.dest)
                # Was: "MLflow experiment (default: catdask) (default: catdask)".
                shown = p._get_formatter()._get_help_string(action)
                assert shown.count("(default:") <= 1, (p.prog, action.dest, shown)
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "exit codes:" in out and "141" in out and "unreachable Dask scheduler" in out
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 0)" in text  # --seed
    # The library's defaults the help names are the estimators' defaults.
    from catdask import CategorySpace, KernelCategorySpace

    defaults = CategorySpace().get_params()
    assert f"(default: the library's, {defaults['origin']})" in text
    from catdask.method_names import MAX_RESTARTS

    # The bound the help names is the estimators' (their n_restarts constraint).
    assert CategorySpace._parameter_constraints["n_restarts"][0].right == MAX_RESTARTS
    assert (f"1 to {MAX_RESTARTS}, run as one batch (default: the library's, "
            f"{defaults['n_restarts']})") in text
    assert KernelCategorySpace().get_params()["gamma"] is None  # None = 0.05 / n_features
    assert "(default: the library's, 0.05 / n_features)" in text


def test_serve_summary_names_this_server_and_runnable_deployments():
    """What ``catdask serve`` prints: this server's API for the other shell, and commands that
    name served deployments and parameters their flows take."""
    import inspect
    import shlex

    from catdask.orchestration import ingest, train
    from catdask.serve import served_deployments, serving_summary
    from catdask.store import resolve_store

    deployments = {f"{d.flow_name}/{d.name}": d for d in served_deployments()}
    # Every run gets the store as an absolute path (not null), so the UI shows it and a run
    # process started elsewhere uses the same store; the evaluation writes inside it.
    store = str(resolve_store())
    assert {d.parameters["store"] for d in deployments.values()} == {store}
    assert "out_dir" not in deployments["catdask-evaluate/weekly-evaluation"].parameters
    text = serving_summary("http://127.0.0.1:4311/api", "http://127.0.0.1:8799/status",
                           "tcp://127.0.0.1:1", "/store", 2, list(deployments))
    assert "export PREFECT_API_URL=http://127.0.0.1:4311/api" in text
    assert "being served" in text and "Stop with Ctrl-C" in text  # test_deployment waits on it
    flows = {"catdask-ingest/ingest": ingest.ingest, "catdask-train/train": train.train}
    commands = [shlex.split(line) for line in text.splitlines()
                if line.strip().startswith("prefect deployment run")]
    assert {c[3] for c in commands} == set(flows)
    for command in commands:
        assert command[3] in deployments
        accepted = inspect.signature(flows[command[3]].fn).parameters
        params = [command[i + 1].split("=")[0] for i, a in enumerate(command) if a == "--param"]
        assert params and set(params) <= set(accepted), (command, list(accepted))


def test_prepare_prefect_creates_the_home_make_chose(tmp_path, monkeypatch):
    """``make demo`` on a fresh clone sets PREFECT_HOME inside a store that does not exist
    yet; Prefect creates only the last folder and its server exited with code 3."""
    from catdask.cli.runtime import prepare_prefect

    home = tmp_path / "new-store" / ".prefect"
    monkeypatch.setenv("PREFECT_HOME", str(home))
    prepare_prefect(tmp_path / "new-store")
    assert home.is_dir()


def test_console_notes_show_each_line_once(capsys):
    """A run log record marked CONSOLE_NOTE is one `catdask CMD:` line on a quiet console,
    shown once however many runs log it (the demo's ten trains share one dashboard)."""
    import logging

    from catdask.cli.main import _ConsoleNotes
    from catdask.core.progress import CONSOLE_NOTE

    handler = _ConsoleNotes("demo")
    logger = logging.getLogger("test.console_notes")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # root may hold an earlier in-process command's handler
    try:
        for _ in range(3):
            logger.info("Dask dashboard: %s", "http://127.0.0.1:8787/status",
                        extra={CONSOLE_NOTE: True})
        logger.info("not a note")
    finally:
        logger.removeHandler(handler)
    assert capsys.readouterr().err.splitlines() == [
        "catdask demo: Dask dashboard: http://127.0.0.1:8787/status"]


def test_python_dash_m_catdask_is_the_command():
    """``python -m catdask`` works where the console script is not on PATH."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "catdask", "train", "iris", "--restart", "3"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("catdask train: error: unrecognized arguments: --restart 3")


# ----------------------------------------------------------------------------- predict
def _read_csv(text):
    import csv
    import io

    rows = list(csv.reader(io.StringIO(text)))
    return rows[0], rows[1:]


def test_predict_writes_predictions_and_coordinates(capsys, tmp_path, two_versions):
    """`catdask predict`: the model's own predict and transform on a stored data set (by
    default the snapshot it was trained on) or on a table file with or without labels; CSV
    to a file or stdout, the accuracy on stderr when the labels are known."""
    import numpy as np
    from sklearn.datasets import load_iris

    from catdask.store import load_estimator

    X, y = load_iris(return_X_y=True)
    model = load_estimator(two_versions, "iris-cqs")  # v2
    names = ["setosa", "versicolor", "virginica"]
    out = tmp_path / "new" / "p.csv"  # missing folders are made, as for plots
    code, stdout, err = run_cli(capsys, "predict", "iris-cqs", "--out", out,
                                "--store", two_versions)
    assert code == EXIT_OK and stdout == "", err
    accuracy = float(np.mean(model.predict(X) == y))
    assert err.strip() == (f"iris-cqs:v2 on data set iris: 150 rows, accuracy {accuracy:.4f} "
                           f"-> {out}")
    header, rows = _read_csv(out.read_text())
    assert header == ["prediction", "class_name", "label"] + [f"axis_{n}" for n in names]
    assert [int(r[0]) for r in rows] == model.predict(X).tolist()
    assert [r[1] for r in rows] == [names[int(r[0])] for r in rows]
    assert [int(r[2]) for r in rows] == y.tolist()
    np.testing.assert_allclose([[float(v) for v in r[3:]] for r in rows], model.transform(X),
                               rtol=1e-15)
    assert [p.name for p in out.parent.iterdir()] == ["p.csv"]  # no temporary file left

    # A table file without labels (a header of feature names), to stdout, version 1.
    features = tmp_path / "new.csv"
    features.write_text("a,b,c,d\n" + "".join(",".join(map(repr, row.tolist())) + "\n"
                                               for row in X[:5]))
    code, stdout, err = run_cli(capsys, "predict", "iris-cqs:v1", "--file", features,
                                "--store", two_versions)
    assert code == EXIT_OK, err
    v1 = load_estimator(two_versions, "iris-cqs", 1)
    header, rows = _read_csv(stdout)
    assert header == ["prediction", "class_name"] + [f"axis_{n}" for n in names]
    assert [int(r[0]) for r in rows] == v1.predict(X[:5]).tolist()
    assert err.splitlines() == [  # iris was stored with scikit-learn's feature names
        f"the header of file {features} (a, b, c, d) names none of the features iris-cqs:v1 "
        "was trained on (sepal length (cm), sepal width (cm), petal length (cm), petal width "
        "(cm)): its columns are taken in order",
        f"iris-cqs:v1 on file {features}: 5 rows"]

    # Labels given as display names in a named column: matched to the predicted names.
    labelled = tmp_path / "labelled.csv"
    labelled.write_text("species,a,b,c,d\n" + "\n".join(
        names[t] + "," + ",".join(map(repr, row.tolist())) for row, t in zip(X, y)) + "\n")
    code, stdout, err = run_cli(capsys, "predict", "iris-cqs", "--file", labelled,
                                "--label-column", "species", "--store", two_versions)
    assert code == EXIT_OK, err
    assert f"150 rows, accuracy {accuracy:.4f}" in err
    assert _read_csv(stdout)[0][:3] == ["prediction", "class_name", "label"]
    # The data as an argument: a file (--file), then a stored data set (--dataset).
    code, again, err = run_cli(capsys, "predict", "iris-cqs", labelled, "--label-column",
                               "species", "--store", two_versions)
    assert (code, again) == (EXIT_OK, stdout), err
    code, stored, err = run_cli(capsys, "predict", "iris-cqs", "iris", "--store", two_versions)
    assert code == EXIT_OK and f"on data set iris: 150 rows, accuracy {accuracy:.4f}" in err
    code, _, err = run_cli(capsys, "predict", "iris-cqs", "iris", "--dataset", "iris",
                           "--store", two_versions)
    assert code == EXIT_USAGE and "give the data once" in err, err


def test_a_file_given_where_a_name_goes_says_what_to_do(capsys, tmp_path, two_versions):
    """Was: "Invalid data set name 'mydata/flowers.csv': it contains a path separator ..." for
    `train FILE` and for `predict FILE MODEL` (arguments swapped), and no word of the label
    column for `predict MODEL TRAINING.csv`."""
    from sklearn.datasets import load_iris

    iris = load_iris()
    table = tmp_path / "iris.csv"
    table.write_text(",".join(iris.feature_names) + ",species\n" + "\n".join(
        ",".join(map(repr, row.tolist())) + f",{t}" for row, t in zip(iris.data, iris.target)))
    mine = tmp_path / "mine.csv"
    mine.write_text("a,b\n1,x\n")
    for args, expect in [
        (["train", str(table)], f"Invalid data set name {str(table)!r}: it is a file, not a "
         "name; the store holds a data set 'iris' (ingested from a file of that name?): use "
         "'iris'"),
        (["train", str(mine)], f"ingest it first (`catdask ingest {mine} --label-column "
         "COLUMN`), then use its name ('mine')"),
        (["predict", str(table), "iris-cqs"], f"Invalid model name {str(table)!r}: it is a "
         "file, not a name; give a registered model's name (`catdask models list`)"),
    ]:
        code, out, err = run_cli(capsys, *args, "--store", two_versions)
        assert code == EXIT_INPUT and out == "" and expect in err, err
        assert len(err.strip().splitlines()) == 1, err
    code, out, err = run_cli(capsys, "predict", "iris-cqs", str(table), "--store", two_versions)
    assert code == EXIT_OK, err
    assert ("left out column species of " f"{table}: not a feature the model was trained on "
            "(if it holds the labels, --label-column species reports the accuracy)") in err


@pytest.mark.parametrize("args, code, expect", [
    (["--label-column", "0"], EXIT_USAGE, "--label-column applies to --file only"),
    (["--dataset", "iris", "--file", "x.csv"], EXIT_USAGE, "give --dataset or --file, not both"),
    (["--file", "missing.csv"], EXIT_INPUT, "missing.csv: file not found"),
    (["--file", "three.csv"], EXIT_INPUT,
     "model iris-cqs:v2 was trained on 4 features; file three.csv has 3"),
    (["--file", "bad.csv"], EXIT_INPUT, "bad.csv, line 3"),
    (["--dataset", "irsi"], EXIT_INPUT, "did you mean 'iris'?"),
])
def test_predict_refuses_bad_input_in_one_line(capsys, tmp_path, two_versions, args, code,
                                               expect):
    (tmp_path / "three.csv").write_text("1,2,3\n4,5,6\n")
    (tmp_path / "bad.csv").write_text("1,2,3,4\n5,6,7,8\n5,x,7,8\n")
    out = tmp_path / "p.csv"
    got, stdout, err = run_cli(capsys, "predict", "iris-cqs", "--out", out, *args,
                               "--store", two_versions)
    assert got == code and stdout == "", err
    assert expect in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_predict_leaves_no_partial_file(capsys, tmp_path, two_versions, monkeypatch):
    """A failure while writing leaves neither the output nor its temporary file."""
    from catdask.pipeline import scoring

    def broken(stream, table):
        stream.write("prediction\n")
        raise OSError("disk full")

    monkeypatch.setattr(scoring, "_write_rows", broken)
    out = tmp_path / "p.csv"
    code, _, err = run_cli(capsys, "predict", "iris-cqs", "--out", out, "--store", two_versions)
    assert code != EXIT_OK and "disk full" in err
    assert list(tmp_path.glob("*p.csv*")) == []


def test_a_model_without_a_training_data_set_needs_one_named(capsys, tmp_path, iris_store):
    """A model registered from Python without a ``dataset`` in its metadata: plot and
    predict ask for the data (exit 2) instead of failing on the missing key."""
    from sklearn.datasets import load_iris

    from catdask import CategorySpace
    from catdask.store import register_estimator

    X, y = load_iris(return_X_y=True)
    register_estimator(iris_store, "bare", CategorySpace(n_restarts=1).fit(X, y))
    for command, options in (("plot", "--dataset"), ("predict", "--dataset or --file")):
        code, out, err = run_cli(capsys, command, "bare", "--store", iris_store)
        assert code == EXIT_USAGE and out == "", err
        assert err.strip().endswith(f"model bare records no training data set: give {options}")
    code, out, err = run_cli(capsys, "predict", "bare", "--dataset", "iris", "--store",
                             iris_store)
    assert code == EXIT_OK and out.count("\n") == 151, err
