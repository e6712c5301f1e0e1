"""What the checksums of an exported bundle and a stored model catch (issue 44, item 5).

- ``meta.json`` carries the sha256 of everything it says: a changed ``params.classifier``
  (which changes predictions) is refused on load.
- A model whose axes are not orthonormal is refused on load even when every checksum was
  recomputed (a forged or damaged version): ``W^T W = I`` is checked, for kernel models
  ``A G A^T = I`` (G the kernel on the stored training points or landmarks); ``catdask check``,
  which loads every version, reports it, and ``catdask predict`` names the model in one line.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.datasets import load_iris

from catdask import CategorySpace, KernelCategorySpace
from catdask.export.bundle import read_bundle, write_bundle
from catdask.model_io import export_model, import_model


@pytest.fixture(scope="module")
def iris_model():
    X, y = load_iris(return_X_y=True)
    return CategorySpace(n_restarts=1, random_state=0).fit(X, y), X


def test_a_changed_classifier_in_meta_json_is_refused(iris_model, tmp_path):
    model, X = iris_model
    arrays, meta = export_model(model)
    folder = write_bundle(tmp_path / "b", arrays, meta)
    assert read_bundle(folder).meta["params"]["classifier"] == "qda"
    document = json.loads((folder / "meta.json").read_text())
    document["meta"]["params"]["classifier"] = "angle"
    (folder / "meta.json").write_text(json.dumps(document, indent=1))
    with pytest.raises(ValueError, match=r"meta.json does not match its sha256 \(altered\)"):
        read_bundle(folder)


def _forged(model):
    """The model's arrays with its axes scaled by 2: not orthonormal, digests recomputed."""
    arrays, meta = export_model(model)
    arrays["components_"] = arrays["components_"] * 2.0
    return arrays, meta


def test_axes_that_are_not_orthonormal_are_refused_on_load(iris_model, tmp_path):
    model, X = iris_model
    arrays, meta = export_model(model)
    np.testing.assert_allclose(import_model(arrays, meta).transform(X), model.transform(X))
    forged_arrays, forged_meta = _forged(model)
    with pytest.raises(ValueError, match=r"not orthonormal: max \|W\^T W - I\| = 3\.0e\+00"):
        import_model(forged_arrays, forged_meta)
    folder = write_bundle(tmp_path / "forged", forged_arrays, forged_meta)  # digests agree
    with pytest.raises(ValueError, match="not orthonormal"):
        read_bundle(folder)


def test_check_reports_a_forged_version_with_recomputed_checksums(iris_model, tmp_path):
    from catdask.store import check_store, register_model

    model, _ = iris_model
    store = tmp_path / "store"
    register_model(store, "iris-forged", *_forged(model))
    report = check_store(store)
    [problem] = [p for p in report.problems if p.kind == "model"]
    assert "does not load: Model axes (components_) are not orthonormal" in problem.message


@pytest.mark.parametrize("options", [{}, {"origin": "class"},
                                     {"approximation": "nystroem", "n_landmarks": 60}])
def test_kernel_axes_that_are_not_orthonormal_are_refused_on_load(options):
    X, y = load_iris(return_X_y=True)
    model = KernelCategorySpace(n_restarts=1, random_state=0, **options).fit(X, y)
    arrays, meta = export_model(model)
    np.testing.assert_allclose(import_model(arrays, meta).transform(X), model.transform(X))
    arrays["dual_coef_"] = arrays["dual_coef_"] * 1.01  # 2 % off A G A^T = I
    with pytest.raises(ValueError, match=r"^Kernel model axes are not orthonormal: "
                                         r"max \|A G A\^T - I\| = 2\.0e-02 > 1e-06"):
        import_model(arrays, meta)


def test_a_large_kernel_model_gets_the_checks_that_cost_o_kn(monkeypatch):
    """Above the Gram check's size (N^2 kernel entries) what is exactly zero is still checked:
    the global origin's coefficient row sums."""
    import catdask.model_io as model_io

    X, y = load_iris(return_X_y=True)
    arrays, meta = export_model(KernelCategorySpace(n_restarts=1, random_state=0).fit(X, y))
    monkeypatch.setattr(model_io, "KERNEL_AXES_CHECK_MAX_ENTRIES", 0)
    arrays["dual_coef_"][:, 0] += 0.5
    with pytest.raises(ValueError, match=r"row sums of dual_coef_ \(global origin\) are 5\.0e-01"):
        import_model(arrays, meta)


def test_check_and_predict_refuse_a_forged_kernel_version(tmp_path, capsys):
    from catdask.cli import main
    from catdask.pipeline import ingest_dataset
    from catdask.store import register_model

    X, y = load_iris(return_X_y=True)
    arrays, meta = export_model(KernelCategorySpace(n_restarts=1, random_state=0).fit(X, y))
    arrays["dual_coef_"] = arrays["dual_coef_"] * 2.0
    store = tmp_path / "store"
    ingest_dataset("iris", store)
    register_model(store, "iris-kcqs", arrays, meta)  # checksums of the forged arrays
    assert main(["--store", str(store), "check"]) == 3
    assert "iris-kcqs:v1" in capsys.readouterr().out
    assert main(["--store", str(store), "predict", "iris-kcqs", "--dataset", "iris"]) == 3
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("catdask predict: error: model iris-kcqs:v1: does not load: Kernel "
                           "model axes are not orthonormal: max |A G A^T - I| = 3.0e+00"), line
