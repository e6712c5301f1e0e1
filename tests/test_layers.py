"""The package's layers (docs/architecture.md): every import between catdask's packages points
down, so no two packages import each other.

Read from the source with ``ast``, not by importing: every import statement counts, at module
level, inside functions (a deferred import is still a dependency) and under ``TYPE_CHECKING``.
A unit is a subpackage (``catdask/core/``) or a module at the package root (``catdask/names.py``).
``from catdask import CategorySpace`` counts as an import of the unit the package root loads the
name from (its ``_LAZY`` table); a bare ``import catdask`` (the facade) is not followed.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "catdask"

#: Bottom to top. A unit may import only units of lower layers (docs/architecture.md draws it).
LAYERS = [
    {"errors", "settings", "lazy", "versions"},  # settings: every environment variable read, stdlib only
    {"names", "method_names"},
    {"kernels", "catalog", "plotting"},
    {"object_store"},  # a store's bytes on a folder or S3: distributed/ reads data sets through it
    {"dataset_pointer"},  # a stored data set's pointer and the readers' hold, read by distributed/
    {"core"},  # the solver core and the operator interfaces it is written against
    {"distributed"},  # how a pass runs on Dask; knows no operator
    {"operators"},  # numpy and Dask implementations of core's interfaces
    {"certificate"},  # the test on class matrices, and the certifiers that build them
    {"estimators"},
    {"methods"},
    {"model_io"},
    {"store"},
    {"pipeline"},
    {"evaluation", "export"},
    {"orchestration"},
    {"serve"},
    {"cli"},
    {"__main__"},
]


def _units():
    units = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    units |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return units


def _facade_names():
    """``catdask.<name>`` -> unit, for the names the package root loads lazily (``_LAZY``)."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets):
            lazy = ast.literal_eval(node.value)
            return {name: module.lstrip(".").split(".")[0] for name, module in lazy.items()}
    return {}


def _module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return parts, is_package


def _imported_modules(node, parts, is_package):
    """Dotted names one import statement refers to (``from a import b`` gives ``a.b``: b may
    be a module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = parts if is_package else parts[:-1]
        base = base[: len(base) - (node.level - 1)]
        module = ".".join(base + ([node.module] if node.module else []))
    else:
        module = node.module or ""
    return [f"{module}.{a.name}" for a in node.names] + [module]


def package_imports():
    """``[(from_unit, to_unit, "file:line")]`` for every import between two catdask units."""
    units, facade = _units(), _facade_names()
    edges = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts, is_package = _module_name(path)
        source = parts[1] if len(parts) > 1 else None
        if source is None:
            continue  # the package root: a facade of lazily loaded names
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            targets = set()
            for name in _imported_modules(node, parts, is_package):
                dotted = name.split(".")
                if dotted[0] != "catdask" or len(dotted) < 2:
                    continue
                if dotted[1] in units:
                    targets.add(dotted[1])
                elif dotted[1] in facade:
                    targets.add(facade[dotted[1]])
            where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
            edges += [(source, t, where) for t in targets if t != source]
    return edges


def test_every_unit_has_a_layer():
    placed = set().union(*LAYERS)
    missing = _units() - placed
    assert not missing, f"place these in LAYERS (and docs/architecture.md): {sorted(missing)}"
    assert not placed - _units(), f"LAYERS names units that no longer exist: {placed - _units()}"


def test_imports_between_packages_point_down():
    level = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}
    upward = [f"{a} -> {b} ({where})" for a, b, where in package_imports()
              if a in level and b in level and level[b] >= level[a]]
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_the_walk_sees_the_imports_it_must_see():
    """The walk itself: module-level, deferred, relative and type-only imports."""
    edges = {(a, b) for a, b, _ in package_imports()}
    assert ("operators", "distributed") in edges  # relative, module level
    assert ("operators", "core") in edges
    assert ("serve", "operators") in edges  # `from . import operators`, inside a function
    assert ("certificate", "operators") in edges  # the kernel certifier's class matrices
    assert ("distributed", "operators") not in edges


def test_lower_layers_load_no_operator_at_run_time():
    """The core and ``distributed`` (its worker preload included) run without loading
    catdask.operators: the preload gets the modules to import from its caller."""
    import subprocess
    import sys

    code = ("import sys, catdask.core.solver, catdask.core.starts, catdask.distributed.cluster, "
            "catdask.distributed.worker_setup; print('catdask.operators' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=PACKAGE.parent, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
