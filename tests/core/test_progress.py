"""Solver progress reaches listeners several layers up: a context's and process-wide watchers."""

import threading

import numpy as np

from catdask import CategorySpace
from catdask.core.progress import solver_progress, watch_solvers

from tests.helpers.data import make_blobs


def test_watchers_see_fits_in_other_threads_and_context_listeners_only_their_own():
    X, y = make_blobs(seed=3)
    watched, context_seen = [], []

    def fit_in_thread():
        CategorySpace(n_restarts=2, random_state=0).fit(X, y)

    with watch_solvers(lambda it, obj, step, active: watched.append((it, obj.max(), active.sum()))):
        with solver_progress(lambda *a: context_seen.append(a[0])):
            thread = threading.Thread(target=fit_in_thread)  # a flow task's thread
            thread.start()
            thread.join()
    assert watched and context_seen == []  # a ContextVar does not reach the thread
    iterations = [w[0] for w in watched]
    assert iterations == sorted(iterations)
    best = [w[1] for w in watched]
    assert np.all(np.diff(best) >= -1e-9 * abs(best[-1]))  # monotone ascent, seen from outside
    watched.clear()
    CategorySpace(n_restarts=1, random_state=0).fit(X, y)
    assert watched == []  # the watcher is gone after its block
