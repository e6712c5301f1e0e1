"""Issue 43 through the command line: a new user's sequence keeps every model its identity
(demo, a train with the CLI defaults, alternating origins; a second demo fits nothing), and
tables fit 80 columns without cutting a model version."""

from __future__ import annotations

import json

import pytest

from catdask.cli import EXIT_INPUT, EXIT_OK
from catdask.store import list_models, load_model_version

from .test_cli import cli_env, flows_env, run_cli  # noqa: F401 - fixtures

pytestmark = [
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


def _fits(store) -> list[tuple]:
    """(model, data set content, spec identity, code) of every registered version."""
    from catdask.pipeline.model_identity import identity

    return [(v.name, v.meta["dataset_sha256"], json.dumps(identity(v.meta["spec"]),
                                                          sort_keys=True),
             json.dumps(v.meta["code_version"], sort_keys=True)) for v in list_models(store)]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_new_users_sequence_keeps_every_model_its_identity(capsys, tmp_path, flows_env,
                                                             monkeypatch):
    import catdask.cli.demo

    monkeypatch.setattr(catdask.cli.demo, "DEMO_KERNEL_MAX_SAMPLES", 160)  # K-CQS on iris only
    store = tmp_path / "store"
    code, out, err = run_cli(capsys, "demo", "--quick", "--store", store)
    assert code == EXIT_OK, err
    messages = " ".join(err.split())
    assert "3 models: 3 fitted and registered" in messages
    demo_versions = sorted(str(v) for v in list_models(store))
    assert demo_versions == ["iris-cqs:v1", "iris-kcqs:v1", "wine-cqs:v1"]

    # The CLI's defaults (allow_uncertified off) after the demo's (on): the same model.
    code, out, err = run_cli(capsys, "train", "iris", "--method", "kcqs", "--store", store)
    assert code == EXIT_OK, err
    assert json.loads(out)["version"] == "iris-kcqs:v1" and "not refitted" in err

    # Alternating origins: each origin is its own model, fitted once.
    for extra in ((), ("--origin", "class", "--allow-uncertified")) * 2:
        code, out, err = run_cli(capsys, "train", "wine", *extra, "--store", store)
        assert code == EXIT_OK, err
        expected = "wine-cqs-class:v1" if extra else "wine-cqs:v1"
        assert json.loads(out)["version"] == expected
    fits = _fits(store)
    assert len(fits) == len(set(fits)) == 4, fits  # no duplicate of data, spec and code
    # Another origin under an existing name: refused, naming both, nothing registered.
    code, _, err = run_cli(capsys, "train", "wine", "--origin", "class", "--name", "wine-cqs",
                           "--store", store)
    assert code == EXIT_INPUT and "origin='global'" in err and "origin='class'" in err
    assert len(list_models(store, "wine-cqs")) == 1

    # predict NAME answers with the spec it was asked for: the global origin.
    code, out, err = run_cli(capsys, "predict", "wine-cqs", "--store", store)
    assert code == EXIT_OK, err
    assert "wine-cqs:v1 on " in err
    assert load_model_version(store, "wine-cqs")[1]["spec"]["origin"] == "global"
    assert load_model_version(store, "wine-cqs-class")[1]["spec"]["origin"] == "class"

    # A second demo fits nothing and says so; the plots of v1 are not rewritten.
    plot = store / "plots" / "iris-cqs-v1.png"
    written = plot.stat().st_mtime_ns
    code, out, err = run_cli(capsys, "demo", "--quick", "--store", store)
    assert code == EXIT_OK, err
    assert "nothing fitted: all 3 models were registered already" in " ".join(err.split())
    assert len(list_models(store)) == 4 and plot.stat().st_mtime_ns == written
    assert out.count("reused") == 3


def test_tables_at_80_columns_print_every_model_version_whole(capsys, monkeypatch):
    from catdask.cli.output import print_table

    rows = [{"model": f"a-rather-long-model-name-for-a-users-table:v{i}", "status": "certified",
             "gap": 1e-12, "created": "2026-12-01T22:53:05+00:00",
             "plot": "/a/long/path/" * 8 + "plot.png"} for i in (1, 2, 10)]
    monkeypatch.setenv("COLUMNS", "80")
    print_table(rows)
    out, err = capsys.readouterr()
    assert all(len(line) <= 80 for line in out.splitlines())
    for r in rows:
        assert r["model"] in out
    assert "left out to fit 80 columns: created, plot" in err and "…" not in out
    # Redirected (no terminal, no COLUMNS): every column whole, the plot path uncut.
    monkeypatch.delenv("COLUMNS")
    print_table(rows)
    out, err = capsys.readouterr()
    assert rows[0]["plot"] in out and err == "" and "…" not in out


def test_models_show_puts_one_certificate_clause_a_line():
    from catdask.cli.model_summary import model_summary

    reason = ("certified by the level-2 moment relaxation <= tol = 1e-06; solver status "
              "stopped early; not certified: no nu passes the SDP-dual test")
    text = model_summary({"registration_status": "certified", "certificate": {
        "reason": reason, "certified": True, "applicable": True}}, "wine-cqs:v1")
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  certificate: "))
    assert lines[start].endswith("certified by the level-2 moment relaxation <= tol = 1e-06")
    assert lines[start + 1].strip() == "solver status stopped early"
    assert lines[start + 2].strip() == "not certified: no nu passes the SDP-dual test"


def test_the_pairs_plot_says_how_many_axis_pairs_it_left_out():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from catdask.plotting import plot_coordinates

    P = np.random.default_rng(0).normal(size=(70, 7))  # K = 7: 21 axis pairs, 15 drawn
    axes = plot_coordinates(P, np.repeat(np.arange(7), 10), kind="pairs", title="K = 7")
    title = axes.flat[0].figure._suptitle.get_text()
    assert "K = 7" in title and "first 15 of 21 axis pairs shown; 6 left out" in title
    plt.close("all")
    axes = plot_coordinates(P[:, :4], np.repeat(np.arange(7), 10), kind="pairs", title="K = 4")
    assert "left out" not in axes.flat[0].figure._suptitle.get_text()  # all 6 drawn
    plt.close("all")


def test_progress_names_the_solver_phase():
    """The float64 polish counts its iterations from 1 again: the line says which phase."""
    from catdask.cli.flow_commands import _fit_progress
    from catdask.core.progress import report_stage, watch_solvers

    shown = []

    class Bar:
        live = True

        def update(self, step, text):
            shown.append(text)

    listener = _fit_progress(Bar(), "s", "train kcqs on big")
    with watch_solvers(listener):
        report_stage("float32 phase")
        listener(15, [1.0, 2.0], None, [1, 1])
        report_stage("float64 polish")
        listener(1, [2.5, 2.0], None, [1, 0])
        report_stage("global-optimality test: SDP dual")
    assert shown[1].startswith("train kcqs on big: float32 phase, iteration 15, ")
    assert shown[3].startswith("train kcqs on big: float64 polish, iteration 1, ")
    assert shown[4] == "train kcqs on big: global-optimality test: SDP dual"
