"""benchmarks/certificate_outcomes.py reports the level, the verified margin and the time."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.helpers.paths import REPO


def _script():
    bench = str(REPO / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)  # the script imports its neighbours (_common, certificate_levels)
    spec = importlib.util.spec_from_file_location(
        "certificate_outcomes", REPO / "benchmarks" / "certificate_outcomes.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_certificate_outcomes_on_iris(tmp_path, capsys):
    rows = _script().main(["--only", "iris", "--restarts", "2", "--certify", "sdp",
                           "--markdown", "--json", str(tmp_path / "out.json")])
    out = capsys.readouterr().out
    # CQS both origins, then K-CQS both origins (iris is one of the kernel cases).
    assert [(r["method"], r["origin"]) for r in rows] == [
        ("CQS", "class"), ("CQS", "global"), ("K-CQS", "class"), ("K-CQS", "global")]
    for r in rows:
        assert r["level"] in ("SDP dual", "Rapcsák", "moment", "not certified")
        if r["certified"]:
            # The verified margin, not the rounded gap = 0.
            assert r["gap_kind"] == "verified margin" and 0 <= r["gap"] < 1e-6
        assert r["test_seconds"] >= 0 and r["fit_seconds"] >= r["test_seconds"]
    for r in rows[:2]:  # the class matrices of certificate_levels.py give the same objective
        assert r["objective_check"] == pytest.approx(r["objective"], rel=1e-10)
    assert "| iris | CQS | class | 4 | 3 |" in out and (tmp_path / "out.json").exists()
