"""Input the arithmetic or the memory cannot carry is refused before the work starts (issue 44).

- Values near 1e308 (their squares overflow float64): ``catdask ingest`` exits 3 with the
  estimators' own sentence and stores nothing; a data set stored before this check is refused
  by ``train`` before the fit, in memory and on Dask alike (was: ~10 s, then "no variation" or
  "contains NaN").
- K-CQS on 10,000 classes: refused at once with the memory its K x K class covariances and
  N x K coordinates would take (was: 5 GB after 150 s of set-up).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from catdask.cli.exits import EXIT_INPUT
from catdask.cli.main import main

TOO_LARGE = "too large for float64 here: sums of their squares"


def test_ingest_of_values_whose_squares_overflow_exits_3_in_one_line(capsys, tmp_path):
    data = tmp_path / "huge.csv"
    data.write_text("a,b,label\n1,2,x\n3,1.5e308,x\n5,6,y\n7,9,y\n")
    store = tmp_path / "store"
    code = main(["ingest", "--file", str(data), "--name", "huge", "--label-column", "label",
                 "--store", str(store)])
    err = capsys.readouterr().err
    assert code == EXIT_INPUT, err
    assert err.splitlines() == [
        f"catdask ingest: error: X has values up to 1.5e+308 in absolute value, {TOO_LARGE} "
        "(class matrices, inner products, distances) and the products the solver forms from "
        "them overflow. Standardise X first, e.g. make_pipeline(StandardScaler(), ...)."], err
    assert not (store / "datasets" / "huge").exists()


def test_values_a_standardisation_survives_are_still_ingested(tmp_path):
    from catdask.pipeline import ingest_file

    data = tmp_path / "large.csv"
    data.write_text("a,b,label\n1,2,x\n3,1e150,x\n5,6,y\n7,9,y\n")
    report = ingest_file(data, "large", "label", tmp_path / "store")
    assert report["written"] is True


@pytest.fixture
def stored_huge(tmp_path):
    """A data set whose squares overflow, stored directly (as an ingest before the check)."""
    from catdask.store import write_dataset

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 4)) * 1e307
    y = np.repeat(["a", "b", "c"], 20)
    write_dataset(tmp_path / "store", "huge", X, y)
    return tmp_path / "store"


@pytest.mark.parametrize("standardise", [True, False])
def test_train_refuses_stored_overflowing_values_before_the_fit(stored_huge, standardise):
    from catdask.pipeline import ModelSpec, fit_on_dataset

    started = time.perf_counter()
    with pytest.raises(ValueError, match=TOO_LARGE):
        fit_on_dataset(stored_huge, "huge", ModelSpec(n_restarts=1, standardise=standardise))
    assert time.perf_counter() - started < 5.0


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the workers' moments overflow
def test_train_on_dask_refuses_them_too(stored_huge, dask_scheduler):
    from distributed import Client

    from catdask.pipeline import ModelSpec, fit_on_dataset

    with Client(dask_scheduler) as client:
        for standardise in (True, False):
            with pytest.raises(ValueError, match=TOO_LARGE):
                fit_on_dataset(stored_huge, "huge", ModelSpec(n_restarts=1,
                                                              standardise=standardise),
                               client=client)


def test_kcqs_on_10000_classes_is_refused_before_its_set_up():
    from catdask.estimators.kernel import KernelCategorySpace

    X = np.random.default_rng(0).standard_normal((20_000, 5))
    y = np.arange(20_000) % 10_000
    started = time.perf_counter()
    with pytest.raises(ValueError) as refused:
        KernelCategorySpace().fit(X, y)
    seconds = time.perf_counter() - started
    message = str(refused.value)
    assert message.startswith("K = 10,000 classes need about 7,462.5 GiB to fit: 7,450.6 GiB "
                              "for a K x K covariance per class and 11.9 GiB for N x K "
                              "coordinates (N = 20,000), more than the ")
    assert "\n" not in message
    assert seconds < 10.0, seconds


def test_the_class_count_guard_lets_a_fitting_size_pass():
    from catdask.estimators.classify import check_class_count_memory

    check_class_count_memory(4_000, 400, available=2 * 2**30)  # ~0.5 + 0.1 GiB
    with pytest.raises(ValueError, match="K = 800 classes need about 4."):
        check_class_count_memory(4_000, 800, available=2 * 2**30)  # measured peak: 4.5 GB
