"""What a train run shows a person: category-space plots, restart table, summary, run names.

No Prefect here: the functions behind the artifacts and plots (``catdask.pipeline.reports``,
``catdask.plotting``, ``catdask.pipeline.run_names``) are called directly on a real fit of
iris and wine from a tmp store. The flows' use of them is in tests/orchestration/test_flows.py.
"""

from __future__ import annotations

import re
import struct
from datetime import datetime, timezone
from types import SimpleNamespace

import numpy as np
import pytest

from catdask.pipeline import ModelSpec, fit_on_dataset, ingest_dataset
from catdask.pipeline.reports import (
    check_feature_count,
    class_names_of,
    metrics_markdown,
    metrics_table_rows,
    plot_file_name,
    plot_title,
    rejection_note,
    restart_rows,
    restart_verdict,
    save_category_space_plot,
    summary_markdown,
)
from catdask.pipeline.run_names import (
    evaluate_run_name,
    ingest_run_name,
    retrain_run_name,
    train_run_name,
)
from catdask.plotting import plot_category_space, plot_format
from catdask.store import read_dataset

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
IRIS_NAMES = ["setosa", "versicolor", "virginica"]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """iris (CQS, certified) and wine (K-CQS, class origin: not certified) from one store."""
    store = tmp_path_factory.mktemp("reports") / "store"
    out = {"store": store}
    for dataset, method, origin in (("iris", "cqs", "global"), ("wine", "kcqs", "class")):
        ingest_dataset(dataset, store)
        outcome = fit_on_dataset(store, dataset, ModelSpec(method=method, origin=origin,
                                                           n_restarts=3))
        outcome.release()
        out[dataset] = outcome
    return out


def _png_size(path):
    """(width, height) in pixels from the PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    return struct.unpack(">II", data[16:24])


@pytest.fixture
def agg():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield plt
    plt.close("all")


# ----------------------------------------------------------------------------- class names
def test_ingest_stores_the_label_names_of_scikit_learn_sets(fitted):
    iris = read_dataset(fitted["store"], "iris")
    assert iris.label_names == IRIS_NAMES
    assert class_names_of(iris) == dict(zip([0, 1, 2], IRIS_NAMES))
    # wine's names in scikit-learn are themselves class_0..class_2: stored as they are.
    assert read_dataset(fitted["store"], "wine").label_names == ["class_0", "class_1", "class_2"]


def test_plot_names_the_classes_in_the_legend_and_on_the_axes(fitted, agg):
    outcome = fitted["iris"]
    ds = read_dataset(fitted["store"], "iris")
    X = outcome.model[:-1].transform(ds.X)
    ax = plot_category_space(outcome.estimator, X, ds.y, class_names=class_names_of(ds))
    legend = ax.get_legend()
    assert legend.get_title().get_text() == "class"
    assert [t.get_text() for t in legend.get_texts()] == IRIS_NAMES
    # Axis k is the axis of class k.
    assert [ax.get_xlabel(), ax.get_ylabel(), ax.get_zlabel()] == [
        f"axis of {n}" for n in IRIS_NAMES]


def test_plot_without_names_says_class_and_a_list_of_names_works(fitted, agg):
    outcome = fitted["iris"]
    ds = read_dataset(fitted["store"], "iris")
    X = outcome.model[:-1].transform(ds.X)
    ax = plot_category_space(outcome.estimator, X, ds.y)
    assert ax.get_xlabel() == "axis of class 0"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["0", "1", "2"]
    # scikit-learn's target_names: one name per entry of classes_, in order.
    ax = plot_category_space(outcome.estimator, X, ds.y, class_names=IRIS_NAMES)
    assert ax.get_ylabel() == "axis of versicolor"
    with pytest.raises(ValueError, match="class_names has 2 entries for 3 classes"):
        plot_category_space(outcome.estimator, X, ds.y, class_names=IRIS_NAMES[:2])


def test_pairs_plot_of_four_classes_has_one_titled_legend_with_names(agg):
    from catdask import CategorySpace

    from tests.helpers.data import make_blobs

    X, y = make_blobs(n_classes=4, n_features=6)
    est = CategorySpace(n_restarts=1, random_state=0).fit(X, y)
    names = ["a", "b", "c", "d"]
    axes = plot_category_space(est, X, y, class_names=names)
    (legend,) = axes.flat[0].figure.legends
    assert legend.get_title().get_text() == "class"
    assert [t.get_text() for t in legend.get_texts()] == names
    assert axes.flat[0].get_xlabel() == "axis of a" and axes.flat[0].get_ylabel() == "axis of b"


def test_plot_of_a_pipeline_draws_its_category_space(agg):
    """make_pipeline(StandardScaler(), CategorySpace()) as the README builds it: the plot
    was labelled "component 1..3" with no category axes; now as for the estimator itself."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from catdask import CategorySpace

    from tests.helpers.data import make_blobs

    X, y = make_blobs(seed=3)
    pipe = make_pipeline(StandardScaler(), CategorySpace(n_restarts=1, random_state=0)).fit(X, y)
    ax = plot_category_space(pipe, X, y, class_names=["a", "b", "c"])
    assert [ax.get_xlabel(), ax.get_ylabel(), ax.get_zlabel()] == [
        "axis of a", "axis of b", "axis of c"]
    assert [t.get_text() for t in ax.texts] == ["axis of a", "axis of b", "axis of c"]
    # The points are the pipeline's coordinates: the scaler ran first.
    offsets = np.concatenate([c._offsets3d[0] for c in ax.collections])
    np.testing.assert_allclose(np.sort(offsets), np.sort(pipe.transform(X)[:, 0]))


def test_plot_refuses_labels_that_do_not_match_the_points(agg):
    from catdask import CategorySpace

    from tests.helpers.data import make_blobs

    X, y = make_blobs(seed=3)
    est = CategorySpace(n_restarts=1, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match=f"y has {len(y) - 1} labels for {len(y)} points"):
        plot_category_space(est, X, y[:-1])


# ----------------------------------------------------------------------------- plot files
def test_plot_is_large_enough_to_read(fitted, tmp_path):
    outcome = fitted["wine"]
    ds = read_dataset(fitted["store"], "wine")
    path = save_category_space_plot(outcome.model, ds.X, ds.y, tmp_path / "wine.png",
                                    class_names=class_names_of(ds))
    width, height = _png_size(path)
    # Was 370 x 361 px at dpi=90; the 150 dpi figure is about twice that after the crop.
    assert width >= 650 and height >= 650, (width, height)


@pytest.mark.parametrize("name, magic", [
    ("p.png", PNG_MAGIC), ("p.PDF", b"%PDF"), ("p.svg", b"<?xml"),
])
def test_plot_format_follows_the_extension(fitted, tmp_path, name, magic):
    outcome = fitted["iris"]
    ds = read_dataset(fitted["store"], "iris")
    path = save_category_space_plot(outcome.model, ds.X, ds.y, tmp_path / name)
    assert path.read_bytes()[:len(magic)] == magic


@pytest.mark.parametrize("name, what", [("p.jpg", "extension '.jpg'"), ("p", "no extension")])
def test_unknown_plot_extension_is_refused_before_drawing(fitted, tmp_path, name, what):
    outcome = fitted["iris"]
    ds = read_dataset(fitted["store"], "iris")
    with pytest.raises(ValueError, match=re.escape(what)) as info:
        save_category_space_plot(outcome.model, ds.X, ds.y, tmp_path / name)
    assert "\n" not in str(info.value) and ".png, .pdf, .svg" in str(info.value)
    assert list(tmp_path.iterdir()) == []
    assert plot_format("x.Svg") == "svg"


def test_feature_count_mismatch_names_the_model_and_the_data_set(fitted):
    wine = read_dataset(fitted["store"], "wine")
    with pytest.raises(ValueError) as info:
        check_feature_count(fitted["iris"].model, wine.n_features, model_label="iris-cqs:v1",
                            data="data set wine")
    assert str(info.value) == "model iris-cqs:v1 was trained on 4 features; data set wine has 13"
    check_feature_count(fitted["wine"].model, wine.n_features, model_label="wine-kcqs:v1",
                        data="data set wine")  # same count: no error


# ----------------------------------------------------------------------------- titles, names
def test_titles_use_the_papers_method_names_and_mark_rejected_models(fitted):
    assert plot_title("kcqs", "wine", version="wine-kcqs:v2") == "K-CQS on wine (wine-kcqs:v2)"
    assert plot_title("kcas", "iris").startswith("K-CAS on iris")
    assert plot_title("cqs", "iris") == "CQS on iris"
    cert = fitted["wine"].certificate
    assert not cert.certified
    title = plot_title("kcqs", "wine", certificate=cert, status="rejected-uncertified")
    # The gap is the certificate's own (a tighter bound changes it, not the format).
    assert title.splitlines() == ["K-CQS on wine",
                                  f"rejected: not certified, gap <= {cert.gap:.1e}"]
    assert 0 < cert.gap < 1e-2
    from catdask.certificate import not_applicable

    assert rejection_note(not_applicable()) == "rejected: no optimality test (CAS)"
    assert rejection_note(not_applicable("not attempted: the Gram matrix's numerical rank "
                                         "exceeds 1500")) == "rejected: optimality not tested"
    # A registered model, even uncertified, is not marked rejected.
    assert "rejected" not in plot_title("kcqs", "wine", version="wine-kcqs:v1",
                                        certificate=cert, status="uncertified-allowed")


def test_rejected_plots_are_named_by_their_run():
    assert plot_file_name("iris", "cqs", version="iris-cqs:v3") == "iris-cqs-v3.png"
    first = plot_file_name("iris", "cas", run_id="1a2b3c4d-0000")
    second = plot_file_name("iris", "cas", run_id="9f8e7d6c-0000")
    assert first == "iris-cas-rejected-run-1a2b3c4d.png" and first != second
    with pytest.raises(ValueError):
        plot_file_name("iris", "cas")


def test_flow_run_names_say_what_the_run_does():
    assert train_run_name("wine", "kcqs") == "wine-kcqs"
    assert train_run_name("wine", "kcqs", "wine-nightly") == "wine-nightly"
    assert ingest_run_name(["iris", "wine"]) == "ingest-iris-wine"
    assert ingest_run_name(["a", "b", "c", "d", "e"]) == "ingest-a-b-c-and-2-more"
    night = datetime(2026, 11, 24, 2, 0, tzinfo=timezone.utc)
    assert retrain_run_name(night) == "retrain-all-2026-11-24"
    assert evaluate_run_name() == "evaluate-all-tables-stored"
    assert evaluate_run_name(["iris", "wine"], ["table1"], True) == "evaluate-table1-iris-wine-quick"


# ----------------------------------------------------------------------------- artifacts
def test_restart_table_is_formatted_for_a_browser(fitted):
    for outcome in (fitted["iris"], fitted["wine"]):
        rows = restart_rows(outcome)
        assert len(rows) == 3
        for row, restart in zip(rows, outcome.estimator.restarts_):
            assert row["objective"] == f"{restart.objective:.6g}"
            assert float(row["objective"]) == pytest.approx(restart.objective, rel=1e-5)
            assert re.fullmatch(r"\d\.\d\de[-+]\d\d", row["gap"]), row["gap"]
            assert len(row["certificate"]) <= 32, row["certificate"]
    tested = fitted["iris"].estimator.best_restart_
    verdicts = {r["restart"]: r["certificate"] for r in restart_rows(fitted["iris"])}
    assert verdicts.pop(tested) == "certified (sdp-dual)"
    assert set(verdicts.values()) == {f"tied with restart {tested}"}
    wine_tested = fitted["wine"].estimator.best_restart_
    assert restart_rows(fitted["wine"])[wine_tested]["certificate"].startswith("not certified")


def test_restart_verdict_of_a_beaten_and_an_untested_restart(fitted):
    cert = fitted["iris"].certificate
    beaten = SimpleNamespace(index=2, objective=100.0, certificate=cert)
    assert restart_verdict(beaten, 0, 169.3) == "beaten by restart 0"
    from catdask.certificate import not_applicable

    cas = SimpleNamespace(index=0, objective=1.0, certificate=not_applicable())
    assert restart_verdict(cas, 0, 1.0) == "not applicable"
    assert restart_verdict(SimpleNamespace(index=0, objective=1.0, certificate=None), 0, 1.0) == ""


def test_summary_shows_the_metrics_as_a_table_not_a_dict(fitted):
    outcome = fitted["wine"]
    text = summary_markdown(outcome, None, "rejected-uncertified")
    assert text.startswith("## K-CQS on `wine`")
    assert "{'" not in text and "train_accuracy_predict': " not in text
    value = outcome.metrics["train_accuracy_predict"]
    assert f"| train_accuracy_predict | {value:.4g} |" in text
    assert "| metric | value |\n|---|---|" in metrics_markdown(outcome.metrics)
    assert "- why: not certified" in text  # the full reason the restart table leaves out


def test_metric_values_keep_four_significant_digits():
    rows = metrics_table_rows({"a": 0.98314606741573, "b": float("nan"), "c": 3})
    assert rows == [{"metric": "a", "value": "0.9831"}, {"metric": "b", "value": "n/a"},
                    {"metric": "c", "value": 3}]


def test_not_applicable_certificate_is_said_once():
    from catdask.certificate import not_applicable
    from catdask.pipeline.reports import certificate_summary

    text = certificate_summary(not_applicable())
    assert text.startswith("not applicable (") and text.count("not applicable") == 1, text


# ----------------------------------------------------------------------------- demo table
def test_demo_table_names_what_each_accuracy_is():
    from catdask.cli.demo import _summary_row

    row = _summary_row({
        "dataset": "iris", "method": "cqs", "version": "iris-cqs:v1", "certified": True,
        "gap": 2.6e-13, "objective": 169.3116, "n_iter": 14, "fit_seconds": 0.1, "plot": "p.png",
        "metrics": {"train_accuracy_predict": 0.97333, "train_accuracy_angle": 0.44,
                    "cv_accuracy_predict": 0.96, "cv_accuracy_linear_svm_on_category_space": 0.92667},
    })
    assert row["train_acc"] == 0.973  # the model's own predict, not a LinearSVC
    assert row["cv_acc"] == 0.96  # the same predict, held out
    assert row["linsvc_on_coords_cv"] == 0.927
    assert "svm_cv_acc" not in row


# ----------------------------------------------------------------------------- training metrics
def test_training_metrics_cross_validate_the_models_own_predict(monkeypatch):
    """``cv_accuracy_predict`` is the held-out accuracy of a refitted copy of the model on
    stratified folds: the same number as scikit-learn's cross_val_score on those folds, NaN
    above the size limit."""
    from sklearn.datasets import load_iris
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.preprocessing import StandardScaler

    from catdask import CategorySpace
    from catdask.pipeline import training

    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    est = CategorySpace(n_restarts=2, random_state=0).fit(X, y)
    metrics = training.training_metrics(est, X, y)
    expected = cross_val_score(CategorySpace(n_restarts=2, random_state=0, certify=False), X, y,
                               cv=StratifiedKFold(3, shuffle=True, random_state=0)).mean()
    assert metrics["cv_accuracy_predict"] == pytest.approx(expected, abs=1e-12)
    assert 0.8 < metrics["cv_accuracy_predict"] <= metrics["train_accuracy_predict"] + 0.05

    monkeypatch.setitem(training.CV_MAX_SAMPLES, "linear", len(y) - 1)
    assert np.isnan(training.training_metrics(est, X, y)["cv_accuracy_predict"])
