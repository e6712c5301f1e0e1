"""Bad input: every case raises an error whose message names the problem."""

from __future__ import annotations

import dask
import numpy as np
import pytest
from sklearn.base import clone

from catdask import CategorySpace, KernelCategorySpace

from tests.helpers.data import make_blobs

ESTIMATORS = [CategorySpace(n_restarts=1), KernelCategorySpace(n_restarts=1)]
IDS = ["linear", "kernel"]


@pytest.fixture
def Xy():
    return make_blobs(n_per_class=6, seed=0)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
@pytest.mark.parametrize("where, value, match", [((3, 1), np.nan, "NaN"),
                                                 ((0, 0), np.inf, "infinity")],
                         ids=["nan", "inf"])
def test_non_finite(est, Xy, where, value, match):
    X, y = Xy
    X = X.copy()
    X[where] = value
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_single_class(est, Xy):
    X, _ = Xy
    with pytest.raises(ValueError, match="at least 2 classes"):
        est.fit(X, np.zeros(len(X)))


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_class_with_one_sample_needs_the_global_origin(est, Xy):
    """origin="class" centres each class (one sample: nothing left, the axis undetermined);
    with the global origin a class of one is well defined (issue 28: stratified folds on
    small classes raised where LDA fits)."""
    X, y = Xy
    y = y.copy()
    y[0] = 99
    with pytest.raises(ValueError, match=r"origin='class' every class needs at least 2 "
                                         r"samples.*origin='global' fits a class of one.*99"):
        clone(est).set_params(origin="class").fit(X, y)
    model = clone(est).set_params(origin="global").fit(X, y)
    assert 99 in model.classes_ and model.certificate_.certified
    assert model.predict(X[:1])[0] == 99  # its own sample lies on its axis


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_stratified_folds_with_classes_of_two_samples_fit_as_lda_does(est):
    """Two classes of 2 samples: 5 stratified folds leave each with 1 training sample."""
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    rng = np.random.default_rng(0)
    y = np.repeat([0, 1, 2, 3], [20, 20, 2, 2])
    X = rng.normal(size=(44, 6)) + 2.0 * np.eye(6)[y]
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    with pytest.warns(UserWarning, match="members"):  # scikit-learn: fewer members than folds
        scores = cross_val_score(clone(est), X, y, cv=cv, error_score="raise")
    assert scores.mean() > 0.7, scores


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
@pytest.mark.parametrize("distributed", [False, True], ids=["numpy", "dask"])
def test_constant_X(est, distributed, Xy):
    """Every sample the same point: there is nothing to project (a fit used to succeed with
    all-zero coordinates, one predicted class, and a linear "certificate")."""
    X, y = Xy
    X = np.full_like(X, 3.5)
    if distributed:
        import dask.array as da

        X = da.from_array(X, chunks=(7, X.shape[1]))
        with dask.config.set(scheduler="threads"):
            with pytest.raises(ValueError, match="no variation.*same point"):
                est.fit(X, y)
        return
    with pytest.raises(ValueError, match="no variation.*same point"):
        est.fit(X, y)


def test_a_constant_feature_is_fine(Xy):
    X, y = Xy
    X = X.copy()
    X[:, 0] = 1.0
    assert CategorySpace(n_restarts=1).fit(X, y).score(X, y) > 0.5


def test_more_classes_than_features_linear_only(Xy):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = np.repeat(np.arange(4), 10)
    with pytest.raises(ValueError, match=r"K <= D.*KernelCategorySpace"):
        CategorySpace().fit(X, y)
    KernelCategorySpace(n_restarts=1).fit(X, y)  # fine for the kernel method


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_mismatched_lengths(est, Xy):
    X, y = Xy
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        est.fit(X, y[:-1])


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_empty_input(est):
    with pytest.raises(ValueError, match="0 sample"):
        est.fit(np.empty((0, 3)), np.empty(0))


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_non_numeric_X(est, Xy):
    X, y = Xy
    Xs = X.astype(str)
    Xs[0, 0] = "abc"
    with pytest.raises(ValueError, match="could not convert|numeric"):
        est.fit(Xs, y)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_path_that_is_not_a_zarr_store(est, Xy, tmp_path):
    """A str X is read as a zarr path: a CSV gave zarr's 'No group found in store
    StorePath(LocalStore, ...)'; now the error says what a path X must be."""
    X, y = Xy
    csv = tmp_path / "data.csv"
    np.savetxt(csv, X, delimiter=",")
    with pytest.raises(ValueError, match=r"zarr array or data set.*data\.csv' is not one"):
        est.fit(str(csv), y)
    with pytest.raises(FileNotFoundError, match=r"missing\.zarr' does not exist"):
        est.fit(tmp_path / "missing.zarr", y)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_continuous_targets_rejected(est, Xy):
    X, _ = Xy
    with pytest.raises(ValueError, match="Unknown label type"):
        est.fit(X, np.linspace(0, 1, len(X)))


def test_kernel_returning_non_finite_values(Xy):
    X, y = Xy

    def bad_kernel(a, b):  # pairwise_kernels calls a callable once per pair
        return np.nan

    with pytest.raises(ValueError, match="non-finite"):
        KernelCategorySpace(kernel=bad_kernel, n_restarts=1).fit(X, y)


def test_overflowing_kernel_parameters(Xy):
    X, y = Xy
    with pytest.raises(ValueError, match="non-finite"):
        KernelCategorySpace(kernel="poly", degree=400, gamma=10.0, n_restarts=1).fit(X * 1e3, y)


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_transform_feature_count_mismatch(est, Xy):
    X, y = Xy
    est.fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.transform(X[:, :2])


@pytest.mark.parametrize("param, value, match", [
    ("objective", "cubic", "objective"),
    ("origin", "somewhere", "origin"),
    ("eps", -1.0, "eps"),
    ("n_restarts", 0, "n_restarts"),
])
def test_invalid_parameters_are_named(param, value, match, Xy):
    X, y = Xy
    with pytest.raises(ValueError, match=match):
        CategorySpace(**{param: value}).fit(X, y)


# ============================================================================ ingest
def test_ingest_file_refuses_dev_zero_without_reading_it(tmp_path):
    """`catdask ingest --file /dev/zero` used to read until MemoryError; now refused at once."""
    import os
    import time
    from pathlib import Path

    from catdask.errors import ParseError
    from catdask.pipeline import ingest_file

    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    t0 = time.perf_counter()
    with pytest.raises(ParseError, match="/dev/zero: is a device, not a regular file"):
        ingest_file("/dev/zero", "zeros", -1, tmp_path / "store")
    assert time.perf_counter() - t0 < 5
    assert not (tmp_path / "store").exists() or "zeros" not in os.listdir(tmp_path / "store")


def test_ingest_file_names_a_bad_cell_by_line_and_column(tmp_path):
    from catdask.errors import ParseError
    from catdask.pipeline import ingest_file

    path = tmp_path / "t.csv"
    path.write_text("a,b,label\n1,2,x\n3,4,x\n5,?,y\n7,8,y\n")
    with pytest.raises(ParseError, match=r"t\.csv, line 4: missing value '\?' in column 1 \('b'\)"):
        ingest_file(path, "t", "label", tmp_path / "store")


_MAKERS = pytest.mark.parametrize(
    "make", [lambda: CategorySpace(n_restarts=1),
             lambda: KernelCategorySpace(kernel="linear", n_restarts=1),
             lambda: KernelCategorySpace(n_restarts=1)],
    ids=["linear", "linear-kernel", "rbf"])


@pytest.mark.parametrize("scale, message", [(1e77, "too large"), (1e200, "too large"),
                                            (1e-80, "too small"), (1e-150, "too small")])
@_MAKERS
def test_values_out_of_float64_range_are_refused_naming_the_scale(make, scale, message):
    """Too large overflows the Gram and class matrices; too small (`X * 1e-150`) raised
    "LinAlgError: Singular matrix": now the error names the scale."""
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 4)) * scale, np.repeat([0, 1, 2], 10)
    with pytest.raises(ValueError, match=f"{message} for float64.*Standardise X"):
        make().fit(X, y)


def test_large_but_safe_values_still_fit_and_certify():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 4)) * 1e70, np.repeat([0, 1, 2], 10)
    assert CategorySpace(n_restarts=1).fit(X, y).certificate_.certified


def test_labels_mixing_numbers_and_strings_are_named():
    rng = np.random.default_rng(0)
    y = np.array([1, 1, "a", "a", 2, 2, 1, "a"], dtype=object)
    with pytest.raises(ValueError, match="mix numbers and strings .*1.*'a'"):
        CategorySpace().fit(rng.normal(size=(8, 4)), y)


def test_small_but_safe_values_still_fit_and_certify():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 4)) * 1e-70, np.repeat([0, 1, 2], 10)
    assert CategorySpace(n_restarts=1).fit(X, y).certificate_.certified


def test_a_kernel_that_cannot_see_the_variation_says_to_standardise():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 4)) * 1e-40, np.repeat([0, 1, 2], 10)
    with pytest.raises(ValueError, match="far less than the kernel's length scale"):
        KernelCategorySpace(n_restarts=1).fit(X, y)


def test_one_long_line_is_refused_with_bounded_memory(tmp_path):
    """A 10 MB CSV on one line took 2.2 GB (>4 GB, >300 s measured) and gave a misleading
    error; now refused by its column count before the cells are made, in a subprocess whose
    peak memory is bounded."""
    import subprocess
    import sys

    from tests.helpers.paths import REPO

    path = tmp_path / "one-line.csv"
    path.write_text(",".join(["1.5"] * 2_500_000) + "\n")
    # The child's own peak: VmHWM of its address space. ru_maxrss would start at this
    # pytest process's RSS (Linux keeps it across fork and exec: 666-1066 MiB in the full
    # suite, 79 MiB alone).
    code = ("import re, resource, sys\nfrom catdask.pipeline import ingest_file\n"
            "try:\n    ingest_file(sys.argv[1], 'one', 0, sys.argv[2])\n"
            "except ValueError as exc:\n    print(exc)\n"
            "try:\n    status = open('/proc/self/status').read()\n"
            "    print(int(re.search(r'VmHWM:\\s+(\\d+) kB', status).group(1)) // 1024)\n"
            "except OSError:\n"
            "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)\n")
    r = subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "store")],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    message, peak_mib = r.stdout.splitlines()
    assert "line 1: 2,500,000 columns; catdask reads at most 100,000" in message, r.stdout
    assert "one long line" in message
    # Against the 2.2-4.1 GB the old parser took.
    assert int(peak_mib) < 512, f"peak {peak_mib} MiB"
    assert not (tmp_path / "store" / "datasets" / "one").exists()


def test_a_line_longer_than_the_limit_is_refused(tmp_path, monkeypatch):
    from catdask.catalog import lines
    from catdask.errors import ParseError
    from catdask.pipeline import ingest_file

    monkeypatch.setattr(lines, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "t.csv"
    path.write_text("1,2,0\n" + "1," * 600 + "0\n")
    with pytest.raises(ParseError, match=r"t\.csv, line 2: a line longer than"):
        ingest_file(path, "t", -1, tmp_path / "store")


@pytest.mark.parametrize("est", ESTIMATORS, ids=IDS)
def test_more_restarts_than_the_bound_are_refused_before_the_fit(est, Xy):
    """The restarts run as one batch: 100,000 of them on digits ask for about 40 minutes
    (catdask.method_names.MAX_RESTARTS), now refused by the parameter check, as the CLI's
    ``--restarts`` and the train flow's ``n_restarts`` are."""
    from catdask.method_names import MAX_RESTARTS

    X, y = Xy
    with pytest.raises(ValueError, match=rf"'n_restarts' parameter of {type(est).__name__} "
                                         rf"must be an int in the range \[1, {MAX_RESTARTS}\]\. "
                                         r"Got 100000 instead"):
        clone(est).set_params(n_restarts=100_000).fit(X, y)


@pytest.mark.parametrize("missing", ["None", "nan", "pd.NA"])
@pytest.mark.parametrize("make", [CategorySpace, KernelCategorySpace])
def test_a_missing_label_is_named_with_its_index(make, missing):
    """Was: TypeError "'<' not supported between instances of 'NoneType' and 'str'" (None),
    TypeError "boolean value of NA is ambiguous" (pandas' NA), "Input contains NaN" (NaN)."""
    import pandas as pd

    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 4))
    y = pd.Series(np.repeat(["a", "b", "c"], 4), dtype="string" if missing == "pd.NA" else object)
    y[5] = {"None": None, "nan": np.nan, "pd.NA": pd.NA}[missing]
    with pytest.raises(ValueError, match=r"^y has a missing label \((None|nan|<NA>) at index 5\); "
                                         r"every sample needs its class"):
        make(n_restarts=1).fit(X, y if missing == "pd.NA" else y.to_numpy())


def test_kernel_params_with_a_built_in_kernel_are_refused():
    """Was ignored silently: kernel_params={"gamma": 0.5} with kernel="rbf" fitted the
    default gamma."""
    X, y = np.random.default_rng(0).normal(size=(12, 3)), np.repeat([0, 1, 2], 4)
    with pytest.raises(ValueError, match=r"kernel_params=\{'gamma': 0.5\} is for a callable "
                                         r"kernel; kernel='rbf' takes its parameters as the "
                                         r"estimator's own \(gamma\)"):
        KernelCategorySpace(kernel_params={"gamma": 0.5}).fit(X, y)
    KernelCategorySpace(n_restarts=1, kernel=lambda A, B, scale: A @ B.T * scale,
                        kernel_params={"scale": 0.5}).fit(X, y)


@pytest.mark.parametrize("make", [CategorySpace, KernelCategorySpace])
def test_a_text_column_of_a_dataframe_is_named(make):
    """Was scikit-learn's "could not convert string to float: 'red'" (fit) and the same in
    predict, naming neither the column nor what to do."""
    import pandas as pd

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(12, 3)), columns=["a", "b", "c"])
    y = np.repeat([0, 1, 2], 4)
    bad = X.assign(color="red", kind=pd.Categorical(["p", "q"] * 6))
    with pytest.raises(ValueError, match=r"^X has non-numeric column\(s\) 'color', 'kind': the "
                                         r"category space needs numbers; encode them"):
        make(n_restarts=1).fit(bad, y)
    model = make(n_restarts=1).fit(X, y)
    with pytest.raises(ValueError, match=r"^X has non-numeric column\(s\) 'b'"):
        model.predict(X.assign(b="x"))
