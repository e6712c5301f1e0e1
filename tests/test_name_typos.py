"""A misspelt data-set or model name in Python or in a run started from Prefect (no CLI check
before it): the library's error names the closest stored / registered / catalog name instead of
suggesting to ingest the misspelt one."""

from __future__ import annotations

import pytest

from catdask.errors import DatasetNotFoundError, ModelNotFoundError
from catdask.names import did_you_mean


def test_did_you_mean_picks_the_closest_name_or_none():
    assert did_you_mean("iriss", ["wine", "iris"]) == "; did you mean 'iris'?"
    assert did_you_mean("zoo", ["wine", "iris"]) == ""
    assert did_you_mean("iris", []) == ""


def test_a_misspelt_stored_data_set_gets_the_stored_name(iris_store):
    from catdask.store import read_dataset

    with pytest.raises(DatasetNotFoundError) as info:
        read_dataset(iris_store, "iriss")
    message = str(info.value)  # was: "... Ingest it first, e.g. `catdask ingest iriss`."
    assert message.endswith("(stored: iris); did you mean 'iris'?"), message
    assert "catdask ingest" not in message
    with pytest.raises(DatasetNotFoundError, match=r"\(stored: iris\)\. Ingest it first, e\.g\. "
                                                   r"`catdask ingest wine`\."):
        read_dataset(iris_store, "wine")  # not a typo: ingest it, as before


def test_a_misspelt_registered_model_gets_the_registered_name(iris_store):
    from sklearn.datasets import load_iris

    from catdask import CategorySpace
    from catdask.store import load_estimator, register_estimator

    X, y = load_iris(return_X_y=True)
    register_estimator(iris_store, "iris-cqs", CategorySpace(n_restarts=1).fit(X, y),
                       meta={"dataset": "iris"})
    with pytest.raises(ModelNotFoundError) as info:
        load_estimator(iris_store, "iris-cqss")
    assert str(info.value).endswith("(registered: iris-cqs); did you mean 'iris-cqs'?")
    with pytest.raises(ModelNotFoundError) as info:
        load_estimator(iris_store, "wine-kcqs")
    assert str(info.value).endswith("(registered: iris-cqs).")


def test_a_misspelt_catalog_name_gets_the_catalog_name_and_the_whole_ingest_command():
    from catdask.catalog import get_entry

    with pytest.raises(DatasetNotFoundError) as info:
        get_entry("iriss")
    message = str(info.value)
    assert message.startswith("No data set 'iriss' in the catalog; did you mean 'iris'? "
                              "(known: iris, wine"), message
    # The CLI's --file mode needs --name too (the former hint left it out).
    assert "`catdask ingest --file data.csv --name NAME --label-column COLUMN`" in message
