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


# ----------------------------------------------------------------- predict: columns by name
def test_align_features_reorders_by_name_and_refuses_a_partial_match():
    import numpy as np

    from catdask.pipeline.scoring import align_features

    X = np.array([[1.0, 2.0, 3.0]])
    kw = dict(model_label="m:v1", data="file f.csv")
    assert align_features(X, ["a", "b", "c"], ["a", "b", "c"], **kw)[1] is None
    assert align_features(X, None, ["a", "b", "c"], **kw)[1] is None  # no header: by position
    assert align_features(X, ["a", "b", "c"], None, **kw)[1] is None  # no names recorded
    out, note = align_features(X, ["c", "a", "b"], ["a", "b", "c"], **kw)
    np.testing.assert_array_equal(out, [[2.0, 3.0, 1.0]])
    assert note == ("the columns of file f.csv were taken by name, in the order m:v1 was "
                    "trained on (the header lists them in another order)")
    out, note = align_features(X, ["x", "y", "z"], ["a", "b", "c"], **kw)
    assert out is X and note == ("the header of file f.csv (x, y, z) names none of the "
                                 "features m:v1 was trained on (a, b, c): its columns are "
                                 "taken in order")
    with pytest.raises(ValueError, match=r"^the header of file f.csv does not match the features "
                                         r"m:v1 was trained on \(missing c; not a training "
                                         r"feature: d\); give the columns a, b, c \(in any "
                                         r"order with a header, in this order without one\)$"):
        align_features(X, ["a", "b", "d"], ["a", "b", "c"], **kw)
    with pytest.raises(ValueError, match=r"\(missing c\)"):
        align_features(X[:, :2], ["b", "a"], ["a", "b", "c"], **kw)


def test_predict_takes_a_reordered_header_by_name(capsys, tmp_path):
    """Was: a header listing the training features in another order was predicted on the
    columns as they stood, silently wrong (the header was read and dropped)."""
    import numpy as np

    from catdask.pipeline import ingest_file
    from catdask.store import load_estimator, register_estimator

    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(c, 0.5, size=(20, 3)) * [1, 3, 9] for c in range(3)]).tolist()
    y = np.repeat(["p", "q", "r"], 20)
    table = tmp_path / "train.csv"
    table.write_text("a,b,c,label\n" + "".join(f"{a!r},{b!r},{c!r},{t}\n"
                                               for (a, b, c), t in zip(X, y)))
    store = tmp_path / "store"
    ingest_file(table, "abc", "label", store)
    from catdask import CategorySpace
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    register_estimator(store, "abc-cqs", make_pipeline(StandardScaler(), CategorySpace(
        n_restarts=1, random_state=0)).fit(X, y), meta={"dataset": "abc"})
    expected = load_estimator(store, "abc-cqs").predict(np.array(X)).tolist()
    swapped = tmp_path / "swapped.csv"
    swapped.write_text("c,a,b\n" + "".join(f"{c!r},{a!r},{b!r}\n" for a, b, c in X))
    code, out, err = run_cli(capsys, "--store", store, "predict", "abc-cqs", "--file", swapped)
    assert code == 0, err
    assert [line.split(",")[0] for line in out.splitlines()[1:]] == expected
    assert err.splitlines()[0].startswith(f"the columns of file {swapped} were taken by name")
    partial = tmp_path / "partial.csv"
    partial.write_text("a,b,d\n1,2,3\n")
    code, out, err = run_cli(capsys, "--store", store, "predict", "abc-cqs", "--file", partial,
                             "--out", tmp_path / "p.csv")
    assert code == EXIT_INPUT and out == "" and not (tmp_path / "p.csv").exists()
    assert err.splitlines() == [
        f"catdask predict: error: the header of file {partial} does not match the features "
        "abc-cqs:v1 was trained on (missing c; not a training feature: d); give the columns "
        "a, b, c (in any order with a header, in this order without one)"]


def test_models_alone_lists_as_datasets_does(capsys, iris_store):
    """Was: "catdask models: error: the following arguments are required: {list,show,compare}"
    (exit 2), where `catdask datasets` alone lists."""
    from sklearn.datasets import load_iris

    from catdask import CategorySpace
    from catdask.store import register_estimator

    X, y = load_iris(return_X_y=True)
    register_estimator(iris_store, "iris-cqs", CategorySpace(n_restarts=1).fit(X, y),
                       meta={"dataset": "iris"})
    code, alone, err = run_cli(capsys, "--store", iris_store, "models")
    assert code == 0, err
    code, listed, _ = run_cli(capsys, "--store", iris_store, "models", "list")
    assert alone == listed and "iris-cqs:v1" in alone
    code, _, err = run_cli(capsys, "models", "--store", iris_store, "lst")
    assert code == 2 and "did you mean 'list'?" in err, err


def test_one_feature_is_not_called_features(capsys, tmp_path):
    """Was: "data set 'd1' has 2 classes and 1 features"."""
    from catdask.pipeline import ingest_file

    table = tmp_path / "d1.csv"
    table.write_text("a,label\n1,x\n2,x\n3,y\n4,y\n")
    ingest_file(table, "d1", "label", tmp_path / "store")
    code, _, err = run_cli(capsys, "--store", tmp_path / "store", "train", "d1")
    assert code == EXIT_INPUT
    assert "data set 'd1' has 2 classes and 1 feature (K orthonormal axes" in err, err


@pytest.fixture
def iris_model_store(iris_store):
    from sklearn.datasets import load_iris

    from catdask import CategorySpace
    from catdask.store import register_estimator

    X, y = load_iris(return_X_y=True)
    register_estimator(iris_store, "iris-cqs", CategorySpace(n_restarts=1).fit(X, y),
                       meta={"dataset": "iris"})
    return iris_store


@pytest.mark.parametrize("args, what", [
    (["predict", "iris-cqs", "--out", "ro/sub/p.csv"], "--out ro/sub/p.csv"),
    (["plot", "iris-cqs", "--out", "ro/p.png"], "--out ro/p.png"),
    (["evaluate", "iris", "--out", "ro/tables"], "--out ro/tables"),
])
def test_an_output_path_that_cannot_be_written_is_refused_first(
        capsys, tmp_path, iris_model_store, unwritable, args, what):
    """Was: "OSError: [Errno 30] Read-only file system: '<folder>/.p.csv.bjd45s_j.tmp' (run
    with -v for the traceback)", exit 1, naming a temporary file; for evaluate after the whole
    evaluation had run."""
    (tmp_path / "ro").mkdir()
    unwritable(tmp_path / "ro")
    code, out, err = run_cli(capsys, "--store", iris_model_store, *args)
    assert code == EXIT_INPUT and out == "", err
    assert err.splitlines() == [f"catdask {args[0]}: error: {what}: cannot write in "
                                f"{tmp_path / 'ro'} (Permission denied); choose a folder you "
                                "can write in"]
    assert list((tmp_path / "ro").iterdir()) == []


def test_plot_into_a_current_folder_that_cannot_be_written_says_so(
        capsys, tmp_path, iris_model_store, unwritable):
    unwritable(tmp_path)  # cli_env: the current folder
    code, _, err = run_cli(capsys, "--store", iris_model_store, "plot", "iris-cqs")
    assert code == EXIT_INPUT
    assert err.splitlines() == [
        "catdask plot: error: the plot iris-cqs-v1.png (in the current folder; --out names "
        f"another): cannot write in {tmp_path} (Permission denied); choose a folder you can "
        "write in"]


def test_datasets_shows_features_and_classes(capsys, tmp_path):
    """What decides the method (linear: K <= D) was not shown: only the samples."""
    from catdask.pipeline import ingest_file

    table = tmp_path / "mine.csv"
    table.write_text("a,label\n1,x\n2,x\n3,y\n4,y\n5,z\n6,z\n")
    ingest_file(table, "mine", "label", tmp_path / "store")
    code, out, err = run_cli(capsys, "--store", tmp_path / "store", "datasets")
    assert code == 0, err
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in out.splitlines() if line.startswith("│") and line.split("│")[1].strip()}
    assert rows["mine"][:4] == ["True", "6", "1", "3"]
    assert rows["mine"][4] == "(not in the catalog: ingested from a file)"
    assert rows["wine"][:4] == ["False", "178", "13", "3"]  # the shape it will have


def test_ingest_file_names_the_data_set_after_the_file(capsys, tmp_path):
    """Was: "--file needs --name and --label-column" (exit 2) without --name."""
    table = tmp_path / "my-plants.csv"
    table.write_text("a,b,label\n1,2,x\n2,1,x\n3,5,y\n4,4,y\n")
    code, out, err = run_cli(capsys, "--store", tmp_path / "store", "ingest", "--file", table,
                             "--label-column", "label")
    assert code == 0, err
    assert err.splitlines()[-1] == "my-plants: stored as snapshot s1 (4 x 2, 2 classes)"


@pytest.mark.parametrize("name_args, message", [
    (["--name", "wine"], "--name wine is a catalog data set's name; give your table another "
                         "--name (the catalog's wine: `catdask ingest wine`)"),
    ([], "--file {file}: its name 'iris' is a catalog data set's name; give your table another "
         "--name (the catalog's iris: `catdask ingest iris`)"),
])
def test_ingest_file_refuses_a_catalog_data_sets_name(capsys, tmp_path, name_args, message):
    """Was: `ingest --file t.csv --name wine` stored the table as 'wine', which `datasets`
    then described as the UCI wine set and `evaluate` ran as the paper's."""
    table = tmp_path / "iris.csv"
    table.write_text("a,b,label\n1,2,x\n2,1,x\n3,5,y\n4,4,y\n")
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "--store", store, "ingest", "--file", table,
                             "--label-column", "label", *name_args)
    assert code == 2 and out == "", err
    assert err.splitlines() == [f"catdask ingest: error: {message.format(file=table)}"]
    assert not store.exists()


@pytest.mark.parametrize("args", [
    ("ingest", "iris"), ("train", "iris"), ("evaluate", "iris"), ("datasets",),
    ("models", "list"), ("check",), ("gc",), ("plot", "iris"), ("demo", "--quick"),
    ("export", "m", "--mlflow", "mlruns"), ("predict", "m", "--dataset", "iris"), ("serve",),
])
@pytest.mark.parametrize("by_env", [False, True])
def test_a_store_url_with_credentials_is_refused_in_one_line_and_writes_nothing(
        capsys, tmp_path, monkeypatch, args, by_env):
    """Was: `CATDASK_STORE=s3://bucket/store catdask ingest iris` exited 0 and wrote a local
    folder named `s3:`. Credentials belong in the AWS variables, not the URL: such a URL is
    refused before anything starts (issue 39 changed the message: s3:// stores are served
    now), in one line that never repeats the credential."""
    url = "s3://AKIAPLANTED:planted-secret@bucket/store?X-Amz-Signature=planted-sig"
    if by_env:
        monkeypatch.setenv("CATDASK_STORE", url)
        code, out, err = run_cli(capsys, *args)
    else:
        code, out, err = run_cli(capsys, "--store", url, *args)
    assert code == EXIT_INPUT, (args, code, err)
    assert len(err.splitlines()) == 1, err
    assert "credentials and ports do not belong in the URL" in err, err
    assert "planted" not in err + out
    assert os.listdir(tmp_path) == [] or "s3:" not in os.listdir(tmp_path)


@pytest.mark.parametrize("url", ["s3:/bucket/store", "gs://bucket/store", "S3://bucket/store"])
def test_other_urls_are_refused_and_never_become_a_folder(capsys, tmp_path, url):
    """`s3:/bucket` (one slash) once became a local folder named `s3:`."""
    code, out, err = run_cli(capsys, "--store", url, "ingest", "iris")
    assert code == EXIT_INPUT and len(err.splitlines()) == 1, err
    assert not any(p.name.endswith(":") for p in tmp_path.iterdir())


def test_a_damaged_pointer_is_flagged_by_datasets_and_refused_by_ingest(capsys, tmp_path):
    """Was: with the pointer truncated to 0 bytes, `catdask datasets` listed the set without a
    word and `catdask ingest` of other content exited 0 ("replaced")."""
    store = tmp_path / "store"
    (tmp_path / "t.csv").write_text("a,b,label\n1,2,x\n3,4,y\n5,6,x\n7,8,y\n")
    (tmp_path / "u.csv").write_text("a,b,label\n1,2,x\n3,4,y\n5,6,x\n7,9,y\n")
    ingest = ("ingest", "--name", "t", "--label-column", "label", "--store", store, "--file")
    assert run_cli(capsys, *ingest, tmp_path / "t.csv")[0] == 0
    (store / "datasets" / "t" / "zarr.json").write_bytes(b"")
    code, _, err = run_cli(capsys, "datasets", "--store", store)
    assert code == 0
    assert [line for line in err.splitlines() if "'t' is damaged" in line and
            "`catdask check --cleanup`" in line], err
    code, _, err = run_cli(capsys, *ingest, tmp_path / "u.csv")
    assert code == EXIT_INPUT, err
    assert err.splitlines()[-1].startswith("catdask ingest: error: ") and \
        "damaged" in err and "`catdask check --cleanup`" in err, err
    assert sorted(p.name for p in (store / "datasets" / "t").iterdir()) == [
        ".newest-snapshot", "s1", "zarr.json"]  # (no name lock since issue 39)


def test_a_text_column_is_left_out_at_ingest_and_at_predict(capsys, tmp_path):
    """Was: a table with a text column (penguins' island) could not be ingested at all, and the
    error did not say how to go on; a model trained without it could not predict on the same
    table. Now the error names the --feature-columns that leave it out, ingest takes them, and
    predict takes the model's columns by name, leaving the others out."""
    import numpy as np

    from catdask import CategorySpace
    from catdask.store import load_estimator, read_dataset, register_estimator

    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(c, 0.5, size=(20, 3)) * [1, 3, 9] for c in range(3)])
    y = np.repeat(["p", "q", "r"], 20)
    islands = np.array(["Biscoe", "Dream", "Torgersen"])[np.arange(60) % 3]
    table = tmp_path / "birds.csv"
    table.write_text("a,island,b,c,species\n" + "".join(
        f"{a!r},{i},{b!r},{c!r},{t}\n" for (a, b, c), i, t in zip(X.tolist(), islands, y)))
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "--store", store, "ingest", table,
                             "--label-column", "species")
    assert code == EXIT_INPUT and out == "" and not (store / "datasets" / "birds").exists()
    assert err.splitlines() == [
        f"catdask ingest: error: {table}, line 2: non-numeric value 'Biscoe' in feature column 1 "
        "('island'); catdask trains on numbers only: encode that column as numbers first, or "
        "leave it out with --feature-columns a,b,c"]
    code, out, err = run_cli(capsys, "--store", store, "ingest", table, "--label-column",
                             "species", "--feature-columns", "a,b,c")
    assert code == 0, err
    ds = read_dataset(store, "birds")
    np.testing.assert_array_equal(ds.X, X)
    assert ds.attrs["provenance"]["feature_names"] == ["a", "b", "c"]
    code, _, err = run_cli(capsys, "--store", store, "ingest", "--file", table, "--label-column",
                           "species", "--feature-columns", "a,,c", "--name", "other")
    assert code == 2 and "--feature-columns: 'a,,c' has an empty name" in err
    for columns, why in [("a,species", "column 4 ('species') is both the label and a feature"),
                         ("b,2", "the feature columns list column 2 ('b') twice")]:
        code, _, err = run_cli(capsys, "--store", store, "ingest", "--file", table,
                               "--label-column", "species", "--feature-columns", columns,
                               "--name", "other")
        assert (code, err.strip()) == (EXIT_INPUT, f"catdask ingest: error: {table}: {why}")

    register_estimator(store, "birds-cqs", CategorySpace(n_restarts=1, random_state=0).fit(X, y),
                       meta={"dataset": "birds"})
    expected = load_estimator(store, "birds-cqs").predict(X).tolist()
    code, out, err = run_cli(capsys, "--store", store, "predict", "birds-cqs", table,
                             "--label-column", "species")
    assert code == 0, err
    assert [line.split(",")[0] for line in out.splitlines()[1:]] == expected
    assert err.splitlines()[0] == (f"left out column island of {table}: not a feature the model "
                                   "was trained on")
    # Without the header's names, a text column stays an error, as before.
    bare = tmp_path / "bare.csv"
    bare.write_text("".join(f"{a!r},{i},{b!r}\n" for (a, b, _), i in zip(X.tolist(), islands)))
    code, out, err = run_cli(capsys, "--store", store, "predict", "birds-cqs", bare)
    assert code == EXIT_INPUT and "non-numeric value 'Biscoe' in feature column 1" in err
