"""Issue 43: Dask's "Sending large graph" warning during a kernel train, handled at its cause.

A kernel model holds its training rows (30,000 x 40: 9.6 MB); the training metrics' transform
and predict put the model in each graph, and Dask warned once per graph. The model now goes to
the workers once (scattered). Here the warning's threshold is lowered to 50 kB so that a small
kernel fit (400 x 40: 128 kB of training rows) would trip it the old way.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("distributed")

import dask  # noqa: E402
import dask.array  # noqa: E402
from distributed import Client  # noqa: E402

from catdask.pipeline import ModelSpec, fit_on_dataset  # noqa: E402
from catdask.pipeline.training import (  # noqa: E402
    _coordinates_and_predictions, training_metrics)
from catdask.store import write_dataset  # noqa: E402

from tests.helpers.data import make_blobs  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _large_graph_warnings(caught):
    return [str(w.message)[:60] for w in caught if "large graph" in str(w.message)]


@pytest.mark.slow
def test_a_kernel_fit_on_the_cluster_sends_no_large_graph(tmp_path, dask_scheduler):
    store = tmp_path / "store"
    X, y = make_blobs(n_per_class=100, n_features=40, n_classes=4)
    write_dataset(store, "blobs", X, y)
    spec = ModelSpec(method="kcqs", n_restarts=1, max_iter=30)
    with Client(dask_scheduler) as client, \
            dask.config.set({"distributed.admin.large-graph-warning-threshold": "50kB"}), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = fit_on_dataset(store, "blobs", spec, client=client)
        outcome.release()
        est = outcome.estimator
        assert _large_graph_warnings(caught) == []
        # The cause, shown: the model inside a graph trips the lowered threshold.
        Xd = dask.array.from_array(X, chunks=(100, 40))
        client.compute(Xd.map_blocks(lambda b, m: b[:, :1] * 0, est, dtype=float,
                                     chunks=(Xd.chunks[0], (1,))), sync=True)
        assert _large_graph_warnings(caught) != []
    # The metrics of a set this small predict on the driver; a large one's on the workers,
    # with the model scattered once: the same coordinates and classes.
    Xs = outcome.model[:-1].transform(X)
    with Client(dask_scheduler):
        P, predicted = _coordinates_and_predictions(est, dask.array.from_array(Xs, chunks=100))
    np.testing.assert_allclose(P, est.transform(Xs), rtol=1e-12, atol=1e-12)
    assert (predicted == est.predict(Xs)).all()
    # The metrics are those of the in-memory model on the same (standardised) rows.
    local = training_metrics(est, outcome.model[:-1].transform(X), y)
    assert local["train_accuracy_predict"] == pytest.approx(
        outcome.metrics["train_accuracy_predict"], abs=1e-9)
    assert np.isfinite(outcome.metrics["cv_accuracy_predict"])
