"""The training spec's restart bound, and whose solver loops the progress of a training run
shows (the model's fit, not the training metrics' cross-validation folds)."""

from __future__ import annotations

import numpy as np
import pytest

from catdask.core.progress import solver_progress, watch_solvers
from catdask.method_names import MAX_RESTARTS
from catdask.pipeline import ModelSpec, fit_on_dataset


@pytest.mark.parametrize("n_restarts", [0, MAX_RESTARTS + 1, 2.5, True, "5"])
def test_the_spec_refuses_restarts_outside_the_bound(n_restarts):
    """Checked in the spec, so a deployment run or a recorded version fails before the data
    set is read (the estimator would refuse it only inside the fit task)."""
    with pytest.raises(ValueError, match=rf"n_restarts must be an integer from 1 to "
                                         rf"{MAX_RESTARTS} .*Got {n_restarts!r} instead"):
        ModelSpec(n_restarts=n_restarts)
    assert ModelSpec(n_restarts=np.int64(MAX_RESTARTS)).n_restarts == MAX_RESTARTS


def test_the_progress_follows_the_models_fit_not_the_cv_folds(iris_store):
    """Was: the fit task's log showed four solver loops (the model's and three CV folds') and
    the progress artifact ended on a fold's best objective (110.86 for a model of 169.31)."""
    seen, watched = [], []

    def loop_starts(into):
        def listen(iteration, objective, step, active):
            if iteration == 1:
                into.append([])
            into[-1].append(float(objective.max()))
        return listen

    with solver_progress(loop_starts(seen)), watch_solvers(loop_starts(watched)):
        outcome = fit_on_dataset(iris_store, "iris", ModelSpec(n_restarts=2))
    assert not np.isnan(outcome.metrics["cv_accuracy_predict"])  # the folds did run
    assert len(seen) == len(watched) == 1
    assert seen[0][-1] == pytest.approx(outcome.estimator.objective_, rel=1e-12)
