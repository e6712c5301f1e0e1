"""Solver progress reaches listeners several layers up: a context's and process-wide watchers."""

import threading

import numpy as np

from catdask import CategorySpace
from catdask.core.progress import quiet_solvers, report_stage, solver_progress, watch_solvers

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


class _Listener:
    """A listener with a ``stage`` attribute, as the CLI's and the flow task's are."""

    def __init__(self):
        self.iterations, self.stages = [], []

    def __call__(self, iteration, objective, step, active):
        self.iterations.append(iteration)

    def stage(self, text):
        self.stages.append((len(self.iterations), text))


def test_the_test_after_the_last_iteration_is_announced_as_a_stage():
    """The global-optimality test runs after the solver loops; a listener hears that it began
    (not a stale "restarts running"), and only after the last iteration."""
    X, y = make_blobs(seed=3)
    listener = _Listener()
    with solver_progress(listener):
        est = CategorySpace(n_restarts=3, random_state=0, certify_at="fit").fit(X, y)
    assert [t for _, t in listener.stages] == [
        f"testing restart {est.best_restart_} (the best) for global optimality"]
    assert listener.stages[0][0] == len(listener.iterations)  # after every iteration


def test_stages_reach_only_listeners_that_take_them_and_none_when_quiet():
    plain_seen, listener = [], _Listener()
    with watch_solvers(lambda *a: plain_seen.append(a)), solver_progress(listener):
        report_stage("a stage")  # the plain callable has no stage(): nothing, no error
        with quiet_solvers():
            report_stage("a fold's stage")
    assert listener.stages == [(0, "a stage")] and plain_seen == []


def test_the_kernel_fit_announces_its_set_up_before_the_first_iteration():
    """The kernel fit's set-up passes over G (about 30 s at N = 200,000) come before any solver
    iteration: a listener hears a stage first, naming N."""
    from catdask import KernelCategorySpace

    X, y = make_blobs(seed=3)
    listener = _Listener()
    with solver_progress(listener):
        KernelCategorySpace(n_restarts=2, random_state=0, certify_at="fit").fit(X, y)
    assert listener.stages[0] == (
        0, f"kernel fit set-up, N = {len(y):,}: the Gram matrix's scale and the starts")
    assert listener.stages[-1][1].endswith("(the best) for global optimality")
    assert listener.stages[-1][0] == len(listener.iterations)
