"""Reading written result tables back and merging runs over different data sets."""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import json

import numpy as np
import pytest

from catdask.evaluation.data import load_xy
from catdask.evaluation.experiments import Experiment, run_experiment
from catdask.evaluation.results_io import merge_experiments, read_experiment
from catdask.evaluation.tables import write_experiment

from tests.helpers.paths import REPO

EXP = Experiment("table1", "Linear", ("PCA", "MC-FLD"))


def _run(names, n_splits=2):
    def loader(name):
        if name == "thyroid":
            raise FileNotFoundError("thyroid is not here")
        return load_xy(name)

    return run_experiment(EXP, names, loader=loader, n_splits=n_splits, progress=None)


def test_read_experiment_inverts_write(tmp_path):
    res = _run(["iris", "thyroid"])
    write_experiment(res, tmp_path)
    back = read_experiment(tmp_path / "table1.json", EXP)
    assert back.skipped == res.skipped and back.settings == res.settings
    for a, b in zip(res.results, back.results):
        assert (a.dataset, a.method, a.n_features, a.n_classes) == (
            b.dataset, b.method, b.n_features, b.n_classes)
        np.testing.assert_array_equal(a.accuracies, b.accuracies)
    # Written again, the tables are the same files.
    first = {p: (tmp_path / p).read_text() for p in ("table1.csv", "table1.md")}
    write_experiment(back, tmp_path)
    assert first == {p: (tmp_path / p).read_text() for p in ("table1.csv", "table1.md")}
    with pytest.raises(ValueError, match="holds experiment 'table1', not 'table2'"):
        read_experiment(tmp_path / "table1.json", dataclasses.replace(EXP, key="table2"))


def test_merge_replaces_skipped_rows_in_paper_order(tmp_path):
    base = _run(["wine", "thyroid"])
    update = _run(["iris"])
    merged = merge_experiments(base, update)
    # Paper order is vehicle, wine, iris, ...; thyroid stays skipped, wine's rows are kept.
    assert [r.dataset for r in merged.results] == ["wine", "wine", "iris", "iris"]
    assert merged.results[0] is base.results[0]
    assert set(merged.skipped) == {"thyroid"}
    runs = merged.settings["runs"]
    assert [r["datasets"] for r in runs] == [["wine"], ["iris"]]
    assert merged.settings["seconds"] == pytest.approx(
        base.settings["seconds"] + update.settings["seconds"], abs=0.11)
    md = write_experiment(merged, tmp_path)["md"].read_text()
    assert "in 2 runs of one process (wine: " in md and "; iris: " in md
    # A data set that was run replaces its earlier rows; one that is skipped now replaces them
    # with the skip note.
    again = merge_experiments(merged, _run(["wine"]))
    assert [r.dataset for r in again.results].count("wine") == 2
    dropped = merge_experiments(merged, _run(["thyroid"]))
    assert set(dropped.skipped) == {"thyroid"}


def test_merge_refuses_a_different_protocol():
    base, update = _run(["iris"]), _run(["wine"], n_splits=3)
    with pytest.raises(ValueError, match=r"different protocol settings \(n_splits: 2 vs 3\)"):
        merge_experiments(base, update)
    other = dataclasses.replace(EXP, key="table2")
    update.experiment = other
    with pytest.raises(ValueError, match="Cannot merge 'table2' into 'table1'"):
        merge_experiments(base, update)


@pytest.mark.slow
def test_reproduce_paper_merge_cli(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location(
        "reproduce_paper", REPO / "benchmarks" / "reproduce_paper.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    common = ["--quick", "--tables", "table1", "--no-figures", "--out", str(tmp_path)]
    assert mod.main(common + ["--datasets", "iris"]) == 0
    assert mod.main(common + ["--datasets", "wine", "--merge"]) == 0
    assert "table1: merged wine into table1.json" in capsys.readouterr().out
    with open(tmp_path / "table1.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["dataset"] for r in rows][::7] == ["wine", "iris"]  # paper order, 7 methods each
    data = json.loads((tmp_path / "table1.json").read_text())
    assert [r["datasets"] for r in data["settings"]["runs"]] == [["iris"], ["wine"]]


@pytest.mark.parametrize("name, shape, counts", [
    ("thyroid", (215, 5), [150, 35, 30]),
    ("vertebral", (310, 6), [60, 100, 150]),
])
def test_thyroid_and_vertebral_load(name, shape, counts, shared_dir):
    X, y = load_xy(name)
    assert X.shape == shape and np.isfinite(X).all()
    assert np.unique(y, return_counts=True)[1].tolist() == counts
