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
#: The library (what ``fit`` needs) comes first; the platform above it (the store, the data-set
#: catalog, the flows, the CLI) may use the library, never the other way round.
LIBRARY_LAYERS = [
    {"errors", "settings", "lazy", "versions"},  # settings: every environment variable read, stdlib only
    {"names", "method_names"},
    {"kernels", "plotting"},
    {"object_store"},  # a store's bytes on a folder or S3: distributed/ reads data sets through it
    # a stored data set's pointer and the readers' hold; its arrays read with every chunk checked
    {"dataset_pointer", "stored_arrays"},
    {"core"},  # the solver core and the operator interfaces it is written against
    {"distributed"},  # how a pass runs on Dask; knows no operator
    {"operators"},  # numpy and Dask implementations of core's interfaces
    {"certificate"},  # the test on class matrices, and the certifiers that build them
    {"estimators"},
    {"methods", "model_io"},  # the method registry; a model as arrays and JSON
]
PLATFORM_LAYERS = [
    {"store", "catalog"},
    {"pipeline"},
    {"evaluation", "export"},
    {"orchestration"},
    {"serve"},
    {"cli"},
    {"__main__"},
]
LAYERS = LIBRARY_LAYERS + PLATFORM_LAYERS


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


# ------------------------------------------------------------------ cycles inside a package
def module_imports():
    """``{module: {modules it imports}}`` over catdask's modules (dotted names; a package is its
    ``__init__``). ``from a import b`` counts as an import of ``a.b`` where that is a module,
    else of ``a``."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts, is_package = _module_name(path)
        modules[".".join(parts)] = (path, parts, is_package)
    graph = {}
    for name, (path, parts, is_package) in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                *names, base = _imported_modules(node, parts, is_package)
                found = {n for n in names if n in modules}
                targets |= found
                if len(found) < len(names) and base in modules:
                    targets.add(base)
        graph[name] = targets - {name}
    return graph


def _package(module, graph):
    """The package a module belongs to (a package's ``__init__`` belongs to itself)."""
    is_package = any(m.startswith(module + ".") for m in graph)
    return module if is_package else module.rpartition(".")[0]


def import_cycles(graph, same_group=lambda a, b: True):
    """The strongly connected sets of more than one module (Tarjan), following only the edges
    for which ``same_group(a, b)``; sorted lists."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if not same_group(v, w):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                cycles.append(sorted(members))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycle_inside_a_package():
    """No two modules of one package import each other, directly or round a loop (every import
    statement counts, as above; no exceptions)."""
    graph = module_imports()
    assert "catdask.distributed.probe" in graph["catdask.distributed.cluster"]  # the walk sees
    cycles = import_cycles(graph, lambda a, b: _package(a, graph) == _package(b, graph))
    assert not cycles, "import cycles inside a package:\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


# ------------------------------------------------------------------ the diagram of the layers
DIAGRAM_DOC = PACKAGE.parent / "docs" / "architecture.md"
DIAGRAM_BEGIN, DIAGRAM_END = "<!-- layers: begin -->", "<!-- layers: end -->"


def layer_diagram():
    """The layers as docs/architecture.md draws them: top to bottom, a unit imports only from
    the lines below its own."""
    def rows(name, layers):
        lines = [" ".join(sorted(layer)) for layer in reversed(layers)]
        return [f"{name if i == 0 else '':<10}{line}" for i, line in enumerate(lines)]

    return "\n".join(["```text", *rows("platform", PLATFORM_LAYERS),
                      "-" * 10 + "  (nothing below this line imports anything above it)",
                      *rows("library", LIBRARY_LAYERS), "```"])


def test_the_architecture_diagram_is_the_layer_order():
    """docs/architecture.md's diagram is :func:`layer_diagram` of ``LAYERS`` (regenerate it with
    ``python tests/test_layers.py``)."""
    text = DIAGRAM_DOC.read_text()
    assert DIAGRAM_BEGIN in text and DIAGRAM_END in text, (
        f"docs/architecture.md draws no layer diagram between {DIAGRAM_BEGIN} and {DIAGRAM_END}")
    drawn = text.split(DIAGRAM_BEGIN, 1)[1].split(DIAGRAM_END, 1)[0].strip()
    assert drawn == layer_diagram(), ("docs/architecture.md's layer diagram differs from LAYERS; "
                                      "replace it with:\n" + layer_diagram())


if __name__ == "__main__":
    print(layer_diagram())
