"""The wheel a user installs with ``pip install .``: what it holds and that it runs alone.

The fast test builds the wheel (``pip wheel --no-deps --no-build-isolation``, about 2 s) from a
copy of the checkout and reads its file list: the data-set catalog ships as package data, the
only top-level package is ``catdask`` (no ``flows``, ``tests`` or ``benchmarks``), and the
``catdask`` console script points at the CLI. The slow test installs that wheel (no
dependencies: they come from this environment through ``--system-site-packages``) into a new
virtual environment and runs the CLI from an empty folder, with the checkout off the path.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from .helpers.installed import build_wheel, setuptools_builds_this_project, wheel_venv

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    not setuptools_builds_this_project(),
    reason="needs setuptools >= 77 in this environment (the `test` extra installs it)",
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The project's wheel, built from a copy so the checkout gets no build/ or egg-info."""
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def _names(wheel_path: Path) -> list[str]:
    with zipfile.ZipFile(wheel_path) as z:
        return z.namelist()


def test_wheel_ships_the_catalog(wheel):
    names = _names(wheel)
    assert "catdask/catalog/catalog.json" in names
    with zipfile.ZipFile(wheel) as z:
        assert b'"iris"' in z.read("catdask/catalog/catalog.json")
    # The launcher the Prefect servers run under is started by path, so it must be there.
    assert "catdask/orchestration/parent_death.py" in names


def test_wheel_installs_only_the_catdask_package(wheel):
    names = _names(wheel)
    top_level = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top_level == {"catdask"}, f"generic top-level names would be installed: {top_level}"
    (record,) = [n for n in names if n.endswith(".dist-info/top_level.txt")] or [None]
    if record:  # older setuptools write it; it must agree
        with zipfile.ZipFile(wheel) as z:
            assert z.read(record).decode().split() == ["catdask"]
    # Every subpackage of the source tree made it in (a missing __init__.py drops one).
    packages = {str(p.parent.relative_to(REPO)) for p in (REPO / "catdask").rglob("__init__.py")}
    shipped = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    assert packages <= shipped, f"missing from the wheel: {sorted(packages - shipped)}"


def test_wheel_declares_the_console_script(wheel):
    names = _names(wheel)
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    with zipfile.ZipFile(wheel) as z:
        text = z.read(entry_points).decode()
    assert "[console_scripts]" in text
    assert "catdask = catdask.cli:run" in text


@pytest.mark.slow
def test_installed_wheel_runs_without_the_checkout(wheel, tmp_path):
    """``pip install`` the wheel into a fresh venv (dependencies from this environment) and
    use it from an empty folder: the catalog, ``datasets``, a refused typo, ``ingest``,
    ``train`` (Prefect's temporary server, a local Dask cluster) and ``predict``."""
    venv = tmp_path / "venv"
    python, site, env = wheel_venv(wheel, venv)
    work = tmp_path / "empty"
    work.mkdir()
    env.update(PREFECT_HOME=str(tmp_path / "prefect-home"), MPLBACKEND="Agg")
    script = venv / "bin" / "catdask"

    def catdask(*argv, timeout=300):
        return subprocess.run([str(script), *argv], cwd=work, env=env, capture_output=True,
                              text=True, timeout=timeout)

    where = subprocess.run([str(python), "-c", "import catdask; print(catdask.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True)
    assert str(venv) in where.stdout, f"catdask imported from {where.stdout!r}, not the wheel"
    assert not (site / "flows").exists()

    listed = catdask("datasets")
    assert listed.returncode == 0, listed.stderr
    assert "iris" in listed.stdout and "vehicle" in listed.stdout  # the packaged catalog
    typo = catdask("ingest", "irs")
    assert typo.returncode == 3 and "did you mean 'iris'?" in typo.stderr
    ingested = catdask("ingest", "iris")
    assert ingested.returncode == 0, ingested.stderr
    assert (work / "catdask-store" / "datasets" / "iris").is_dir()
    trained = catdask("train", "iris", "--restarts", "1")
    assert trained.returncode == 0, trained.stderr
    assert json.loads(trained.stdout)["version"] == "iris-cqs:v1"
    predicted = catdask("predict", "iris-cqs", "--out", "p.csv")
    assert predicted.returncode == 0, predicted.stderr
    assert "iris-cqs:v1 on data set iris: 150 rows, accuracy" in predicted.stderr
    lines = (work / "p.csv").read_text().splitlines()
    assert len(lines) == 151 and lines[0].startswith("prediction,class_name,label,axis_setosa")
