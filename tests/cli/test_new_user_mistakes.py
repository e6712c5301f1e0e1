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


@pytest.fixture
def wide_classes_store(tmp_path):
    """A stored data set with 3 classes and 2 features (K > D), ingested without a flow."""
    from catdask.pipeline import ingest_file

    table = tmp_path / "k3d2.csv"
    rows = [(0, 1, "x"), (1, 2, "y"), (2, 0, "z"), (1, 1, "x"), (2, 2, "y"), (0, 2, "z")]
    table.write_text("a,b,label\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows))
    store = tmp_path / "store"
    ingest_file(table, "k3d2", "label", store)
    return store


@pytest.mark.parametrize("method", ["cqs", "cas"])
def test_a_linear_method_on_more_classes_than_features_names_the_kernel_options(
        capsys, wide_classes_store, method):
    """Was: the flow started, the cluster started, then the estimator's ValueError "... Use
    KernelCategorySpace instead" (a Python class, not an option of the command)."""
    before = sorted(p.name for p in wide_classes_store.iterdir())
    code, out, err = run_cli(capsys, "train", "k3d2", "--method", method,
                             "--store", wide_classes_store)
    assert code == EXIT_INPUT, err
    assert err.splitlines() == [
        f"catdask train: error: --method {method} needs at most as many classes as features, "
        "and data set 'k3d2' has 3 classes and 2 features (K orthonormal axes do not fit in D "
        "dimensions); use --method kcqs or kcas"]
    assert out == "" and sorted(p.name for p in wide_classes_store.iterdir()) == before


def test_model_spec_refuses_a_linear_method_on_more_classes_than_features():
    from catdask.pipeline import ModelSpec

    with pytest.raises(ValueError, match=r"method 'cqs' needs at most as many classes as "
                                         r"features, and data set 'k3d2' has K = 3 classes and "
                                         r"D = 2 features .*use a kernel method \('kcqs' or "
                                         r"'kcas'\) instead\."):
        ModelSpec(method="cqs").check_data_shape("k3d2", n_features=2, n_classes=3)
    ModelSpec(method="cqs").check_data_shape("iris", n_features=4, n_classes=3)
    ModelSpec(method="cqs").check_data_shape("square", n_features=3, n_classes=3)  # K = D fits
    ModelSpec(method="kcqs").check_data_shape("k3d2", n_features=2, n_classes=3)


def test_model_spec_refuses_a_kernel_fit_whose_class_covariances_exceed_memory():
    """The train flow's check before its cluster (runs started from the UI or the API)."""
    from catdask.pipeline import ModelSpec

    with pytest.raises(ValueError, match=r"K = 10,000 classes need about .* GiB for a K x K "
                                         r"covariance per class"):
        ModelSpec(method="kcqs").check_data_shape("many", n_features=1, n_classes=10_000,
                                                  n_samples=20_000)
    ModelSpec(method="kcqs").check_data_shape("iris", n_features=4, n_classes=3, n_samples=150)


@pytest.mark.parametrize("args, expect", [
    (["trian", "iris"], "catdask: error: argument command: invalid choice: 'trian' (choose from "
                        "'ingest', 'train', 'evaluate', 'datasets', 'check', 'gc', 'models', "
                        "'plot', 'predict', 'export', 'serve', 'demo'); did you mean 'train'? "
                        "(see `catdask --help`)"),
    (["train", "iris", "--method", "cqss"],
     "catdask train: error: argument --method: invalid choice: 'cqss' (choose from 'cqs', "
     "'cas', 'kcqs', 'kcas'); did you mean 'cqs'? (see `catdask train --help`)"),
    (["train", "iris", "--mehtod=kcqs"], "catdask train: error: unrecognized arguments: "
                                         "--mehtod=kcqs; did you mean '--method'? (see "
                                         "`catdask train --help`)"),
    (["demo", "--quik"], "catdask demo: error: unrecognized arguments: --quik; did you mean "
                         "'--quick'? (see `catdask demo --help`)"),
    (["models", "lst"], "did you mean 'list'?"),
    # Nothing close: no guess.
    (["train", "iris", "--method", "xyz"], "invalid choice: 'xyz' (choose from 'cqs', 'cas', "
                                           "'kcqs', 'kcas') (see `catdask train --help`)"),
    (["train", "iris", "--frobnicate"], "unrecognized arguments: --frobnicate (see "),
], ids=lambda a: " ".join(a) if isinstance(a, list) else None)
def test_a_misspelt_command_option_or_choice_gets_the_closest_one(capsys, args, expect):
    code, out, err = run_cli(capsys, *args)
    assert code == EXIT_USAGE, err
    assert len(err.splitlines()) == 1 and expect in err, err
    assert out == ""


def test_evaluate_refuses_what_it_would_only_skip(capsys, tmp_path, iris_store, monkeypatch):
    """Was: exit 0 with empty tables ("skipping wine: wine is not in the store") and, for a
    misspelt --store, a new store folder created to hold them."""
    from .test_cli import _FakeFlows

    flows = _FakeFlows(monkeypatch)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    missing = tmp_path / "no-store"
    code, out, err = run_cli(capsys, "evaluate", "iris", "--store", missing)
    assert code == EXIT_INPUT and f"store {missing} does not exist (chosen by --store" in err, err
    assert not missing.exists()
    code, out, err = run_cli(capsys, "evaluate", "wine", "--store", iris_store)
    assert code == EXIT_INPUT, err
    assert err.strip() == (f"catdask evaluate: error: No data set 'wine' in store "
                           f"{iris_store.resolve()} (stored: iris); it is in the catalog: "
                           "`catdask ingest wine` first")
    code, out, err = run_cli(capsys, "evaluate")  # cli_env: cwd tmp_path, no store there
    assert code == EXIT_INPUT, err
    assert err.strip() == (f"catdask evaluate: error: nothing to evaluate: store "
                           f"{tmp_path / 'catdask-store'} does not exist yet; `catdask ingest "
                           "iris wine` (or `catdask ingest --all`) first")
    assert flows.calls == [] and not (tmp_path / "catdask-store").exists()
    code, out, err = run_cli(capsys, "evaluate", "iris", "--store", iris_store)
    assert code == 0 and len(flows.calls) == 1, err  # a stored data set still runs


@pytest.fixture
def iris_table(tmp_path):
    """iris as a user exports it: a header, the four features, then the species names."""
    from sklearn.datasets import load_iris

    data = load_iris()
    path = tmp_path / "iris.csv"
    lines = ["sepal_length,sepal_width,petal_length,petal_width,species"]
    lines += [",".join([*map(str, x), data.target_names[t]]) for x, t in zip(data.data, data.target)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_predict_on_a_table_with_its_labels_says_to_name_the_label_column(capsys, iris_store,
                                                                         iris_table):
    from sklearn.datasets import load_iris

    from catdask import CategorySpace
    from catdask.store import register_estimator

    X, y = load_iris(return_X_y=True)
    register_estimator(iris_store, "iris-cqs", CategorySpace(n_restarts=1).fit(X, y),
                       meta={"dataset": "iris"})
    code, out, err = run_cli(capsys, "predict", "iris-cqs", "--file", iris_table,
                             "--store", iris_store)
    assert code == EXIT_INPUT, err
    assert err.strip() == (f"catdask predict: error: {iris_table}, line 2: non-numeric value "
                           "'setosa' in feature column 4 ('species'); if that column holds the "
                           "labels, pass --label-column COLUMN (its name or index)")
    code, out, err = run_cli(capsys, "predict", "iris-cqs", "--file", iris_table,
                             "--label-column", "species", "--store", iris_store)
    assert code == 0 and "150 rows, accuracy" in err, err


def test_a_misspelt_label_column_gets_the_closest_header_name(capsys, tmp_path, iris_table):
    code, out, err = run_cli(capsys, "ingest", "--file", iris_table, "--name", "t",
                             "--label-column", "specis", "--store", tmp_path / "store")
    assert code == EXIT_INPUT, err
    assert err.strip().endswith("label column 'specis' not found in the header; columns are "
                                "['sepal_length', 'sepal_width', 'petal_length', 'petal_width', "
                                "'species']; did you mean 'species'?"), err
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("args, expect", [
    # Was: the whole fit, then "error: Out of range float values are not JSON compliant".
    (["train", "iris", "--max-gap", "inf"], "argument --max-gap: must be a finite number, got inf"),
    (["train", "iris", "--method", "kcqs", "--gamma", "inf"],
     "argument --gamma: must be a finite number, got inf"),
    (["train", "iris", "--max-gap", "nan"], "argument --max-gap: must be >= 0, got nan"),
])
def test_infinite_or_nan_numbers_are_refused_by_the_parser(capsys, args, expect):
    code, out, err = run_cli(capsys, *args)
    assert code == EXIT_USAGE and expect in err and len(err.splitlines()) == 1, err


def test_model_spec_refuses_an_infinite_max_gap():
    """The flow's parameter (a Python or Prefect caller): refused before the fit, not when the
    version's record is written as JSON."""
    from catdask.pipeline import ModelSpec

    for bad in (float("inf"), float("nan"), -1.0):
        with pytest.raises(ValueError, match="max_gap must be a finite number >= 0"):
            ModelSpec(max_gap=bad)
    assert ModelSpec(max_gap=0.0).max_gap == 0.0


def test_predict_out_a_folder_is_refused_and_a_file_gets_the_usual_permissions(
        capsys, tmp_path, iris_store):
    import os

    from sklearn.datasets import load_iris

    from catdask import CategorySpace
    from catdask.store import register_estimator

    X, y = load_iris(return_X_y=True)
    register_estimator(iris_store, "iris-cqs", CategorySpace(n_restarts=1).fit(X, y),
                       meta={"dataset": "iris"})
    folder = tmp_path / "out"
    folder.mkdir()
    code, out, err = run_cli(capsys, "predict", "iris-cqs", "--out", folder, "--store", iris_store)
    assert code == EXIT_USAGE, err  # was exit 3: "[Errno 21] Is a directory: '<tmp name>' -> ..."
    assert err.strip() == (f"catdask predict: error: --out {folder} is a folder; give the file "
                           f"to write, e.g. {folder / 'predictions.csv'}")
    assert list(folder.iterdir()) == []
    umask = os.umask(0o022)
    try:
        written = folder / "p.csv"
        code, out, err = run_cli(capsys, "predict", "iris-cqs", "--out", written,
                                 "--store", iris_store)
    finally:
        os.umask(umask)
    assert code == 0, err
    assert written.stat().st_mode & 0o777 == 0o644  # was 0600 (mkstemp's)


def test_write_predictions_into_a_folder_names_the_folder(tmp_path):
    from catdask.pipeline.scoring import Predictions, write_predictions

    table = Predictions(["prediction"], [[0, 1]], 2, None)
    with pytest.raises(IsADirectoryError, match=f"{tmp_path} is a folder; give the file to write"):
        write_predictions(table, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_without_shared_files_the_source_error_lists_no_made_up_folder(tmp_path, monkeypatch):
    """An installed catdask has no ../shared beside it: the error listed
    ".venv/lib/python3.11/shared/data/uci/vehicle" as searched."""
    import catdask.catalog.sources as sources
    from catdask.catalog import locate_sources, source_folders
    from catdask.errors import SourceNotFoundError

    monkeypatch.setattr(sources, "SHARED_UCI_DIR", tmp_path / "no-shared")
    monkeypatch.delenv("CATDASK_SOURCE_DIR", raising=False)
    assert source_folders("vehicle") == []
    assert source_folders("vehicle", tmp_path) == [tmp_path, tmp_path / "vehicle"]
    with pytest.raises(SourceNotFoundError) as info:
        locate_sources("vehicle")
    assert "not found (no folder to look in). Pass source_dir=" in str(info.value)
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setattr(sources, "SHARED_UCI_DIR", shared)
    assert source_folders("vehicle") == [shared / "vehicle"]  # beside a checkout: searched


def test_certify_moment_without_scs_says_what_to_install(capsys, iris_store, monkeypatch):
    """Was: the fit ran and, where the SDP dual is not tight, the model was rejected with only
    that gap on the console ("moment relaxation skipped" was in the certificate's reason)."""
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "scs" else find_spec(name, *a))
    code, out, err = run_cli(capsys, "train", "iris", "--certify", "moment",
                             "--store", iris_store)
    assert code == EXIT_INPUT, err
    assert err.strip() == ("catdask train: error: argument --certify moment: the moment "
                           "relaxation needs SCS, which is not installed here: pip install "
                           "'catdask[sdp]'")
    assert sorted(p.name for p in iris_store.iterdir()) == ["datasets"]


@pytest.mark.parametrize("command, verbose, shown", [
    ("train", False, False), ("demo", False, False), ("evaluate", False, False),
    ("ingest", False, False), ("train", True, True)])
def test_the_console_leaves_off_the_flows_repeat_of_its_own_line(command, verbose, shown):
    """A rejected model printed the flow's warning ("2026-11-26 14:24:31,883 prefect.flow_runs
    rejected: ... (max_gap=G ...; allow_uncertified=True ...)") right above the command's own
    "not registered: ... pass --max-gap GAP ..." line; a flow's one-line error (a misspelt
    name) would likewise precede "catdask ingest: error: ...", for every flow command. With
    -v everything is shown. In a fresh process: pytest's own handlers on the root logger would
    make the CLI's logging set-up a no-op here."""
    import subprocess
    import sys

    script = (
        "import logging\n"
        "from catdask.cli.main import _configure_logging\n"
        "from catdask.core.progress import CONSOLE_REPEATED\n"
        f"_configure_logging({verbose!r}, {command!r})\n"
        "log = logging.getLogger('prefect.flow_runs')\n"
        "log.warning('repeated line', extra={CONSOLE_REPEATED: True})\n"
        "log.warning('other warning')\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert ("repeated line" in r.stderr) is shown, r.stderr
    assert "other warning" in r.stderr  # other warnings still shown


def test_a_store_folder_that_cannot_be_created_is_named(capsys, tmp_path):
    """Was: "catdask ingest: error: [Errno 20] Not a directory: '.../a-file/store'" (the
    Prefect home inside the store could not be created), naming neither what nor why; with a
    Prefect API already set, the ingest task failed after two retries, Prefect's lines and
    all. Now one line before Prefect starts, whatever Prefect's settings."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    store = blocker / "store"
    for args in (("ingest", "iris"),
                 ("ingest", "--file", str(tmp_path / "t.csv"), "--name", "t",
                  "--label-column", "y")):
        if args[1] == "--file":
            (tmp_path / "t.csv").write_text("a,y\n1,0\n2,0\n3,1\n4,1\n")
        code, out, err = run_cli(capsys, "--store", store, *args)
        assert code == EXIT_INPUT and out == "", err
        assert err.splitlines() == [
            f"catdask ingest: error: cannot create the store {store}: {blocker} is a file, not "
            "a folder (check --store)"], err
    code, _, err = run_cli(capsys, "--store", blocker, "ingest", "iris")
    assert code == EXIT_INPUT
    assert err.splitlines() == [f"catdask ingest: error: store {blocker} is a file, not a "
                                "folder (a store is the folder that holds datasets/ and "
                                "models/)"], err


def test_a_store_that_is_a_file_or_a_folder_holding_no_store_is_said_so(capsys, tmp_path):
    """Was: "Store root ... exists but is not a directory." and, for an existing folder that
    holds no store (a mistyped --store), only "no models in /home/me"."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    code, _, err = run_cli(capsys, "--store", a_file, "models", "list")
    assert code == EXIT_INPUT
    assert err.splitlines() == [f"catdask models list: error: store {a_file} is a file, not a "
                                "folder (a store is the folder that holds datasets/ and models/)"]
    folder = tmp_path / "not-a-store"
    folder.mkdir()
    code, out, _ = run_cli(capsys, "--store", folder, "models", "list")
    assert code == 0
    assert out.strip() == (f"no models in {folder} (no catdask store there yet: the folder "
                           "holds no datasets/ or models/; check --store / $CATDASK_STORE, or "
                           "`catdask ingest` creates one)")


def test_kcqs_on_ten_thousand_classes_is_refused_before_any_cluster(capsys, tmp_path,
                                                                    monkeypatch):
    """Was: the Prefect flow and the Dask cluster started, and the estimator's memory guard
    refused the fit only then. Now the CLI refuses it from the data set's metadata (N, K)."""
    import time

    import distributed

    from catdask.pipeline import ingest_file

    k = 10_000
    table = tmp_path / "many.csv"
    table.write_text("a,label\n" + "".join(f"{i % 7},c{i % k}\n" for i in range(2 * k)))
    store = tmp_path / "store"
    ingest_file(table, "many", "label", store)

    def no_cluster(*args, **kwargs):
        raise AssertionError("a Dask cluster was started")

    monkeypatch.setattr(distributed.LocalCluster, "__init__", no_cluster)
    start = time.monotonic()
    code, out, err = run_cli(capsys, "train", "many", "--method", "kcqs", "--store", store)
    seconds = time.monotonic() - start
    assert code == EXIT_INPUT, err
    (line,) = err.splitlines()
    assert line.startswith("catdask train: error: --method kcqs on data set 'many': K = 10,000 "
                           "classes need about "), line
    assert "for a K x K covariance per class" in line and "N = 20,000" in line, line
    assert out == "" and seconds < 10, seconds
