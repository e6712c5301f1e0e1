"""The package as a user installs it: the project's wheel in a new virtual environment.

:func:`build_wheel` builds the wheel from a copy of the checkout (``pip wheel --no-deps
--no-build-isolation``, about 2 s; the checkout gets no build/ or egg-info). :func:`wheel_venv`
installs it (no dependencies) into a new venv whose dependencies are this environment's
packages, and returns that venv's python with an environment in which nothing points back at
the checkout: no PYTHONPATH, no CATDASK_* setting, and this environment's editable catdask out
of sight (its ``.pth`` file is not run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from .paths import REPO

# Not copied into the build folder: environments, stores and caches (large, or not source).
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "venv", "catdask-store", ".prefect",
                                     "build", "dist", "*.egg-info", "__pycache__",
                                     ".pytest_cache", ".hypothesis", "*.png", "results")


def setuptools_builds_this_project() -> bool:
    try:
        import setuptools
    except ImportError:
        return False
    major = int(setuptools.__version__.split(".")[0])
    return major >= 77  # the SPDX license string in pyproject.toml


def build_wheel(root: Path) -> Path:
    """The project's wheel, built in ``root`` from a copy of the checkout."""
    source = root / "src"
    shutil.copytree(REPO, source, ignore=_NOT_SOURCE, symlinks=True)
    out = root / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(source)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    (path,) = out.glob("catdask-*.whl")
    return path


def wheel_venv(wheel: Path, venv: Path) -> tuple[Path, Path, dict]:
    """Install ``wheel`` into a new venv at ``venv``: ``(python, site-packages, environment)``."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHONPATH", "CATDASK_", "PREFECT_API_URL"))}
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                    "--no-deps", "--no-index", str(wheel)],
                   check=True, capture_output=True, text=True, timeout=300, env=env)
    # Then the dependencies: this environment's packages, after the venv's own (a venv made
    # from a venv would see the base interpreter's with --system-site-packages, not these).
    # Added after the install, or pip would take this environment's catdask for the wheel's;
    # their .pth files are not run, so an editable catdask installed here stays out of sight.
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_catdask_test_deps.pth").write_text("\n".join(sorted(ours)) + "\n")
    return python, site, env
