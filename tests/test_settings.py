"""catdask/settings.py is the one place catdask reads environment variables (issue 25)."""

from __future__ import annotations

import ast
import re

import pytest

from catdask import settings

from .helpers.paths import REPO

PACKAGE = REPO / "catdask"

#: Reads of the environment outside settings.py that are not settings, with the reason.
NOT_A_SETTING = {
    # The temporary Prefect server exports PREFECT_API_URL for its children and restores the
    # previous value (None or not) when it stops: saved for a write, not read as a setting.
    ("orchestration/server.py", "PREFECT_API_URL"),
    # Other programs' conventions, read where they are used, never catdask settings: the
    # terminal's width and kind (no bold on a dumb one), and the AWS SDKs' credential and endpoint variables (an S3 store takes
    # them as every S3 client does; docs/operations.md, Object storage).
    ("cli/output.py", "COLUMNS"),
    ("cli/output.py", "TERM"),
    ("object_store/s3.py", "env_key"),  # AWS_ACCESS_KEY_ID ... AWS_ENDPOINT_URL_S3, one loop
    ("object_store/s3.py", "AWS_ALLOW_HTTP"),
    ("object_store/s3.py", "AWS_PROFILE"),
}


def _is_os_environ(node):
    return (isinstance(node, ast.Attribute) and node.attr == "environ"
            and isinstance(node.value, ast.Name) and node.value.id == "os")


def _environ_aliases(tree):
    """Names bound to ``os.environ`` itself (``env = os.environ``, ``env = os.environ if e is
    None else e``): a read through one is a read of the environment too. A copy
    (``dict(os.environ)``) is not an alias."""
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            branches = (value.body, value.orelse) if isinstance(value, ast.IfExp) else (value,)
            if any(_is_os_environ(branch) for branch in branches):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                aliases |= {t.id for t in targets if isinstance(t, ast.Name)}
    return aliases


def _environment_reads(tree):
    """``(line, variable)`` for each ``os.environ.get(X)``, ``os.getenv(X)`` and
    ``os.environ[X]`` read in ``tree``, and the same reads through a name bound to
    ``os.environ`` (X as written: a literal or a name)."""
    aliases = _environ_aliases(tree)

    def is_environ(node):
        return _is_os_environ(node) or (isinstance(node, ast.Name) and node.id in aliases)

    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            if ((isinstance(func, ast.Attribute) and func.attr == "get"
                 and is_environ(func.value))
                    or (isinstance(func, ast.Attribute) and func.attr == "getenv"
                        and isinstance(func.value, ast.Name) and func.value.id == "os")):
                key = node.args[0]
        elif (isinstance(node, ast.Subscript) and is_environ(node.value)
              and isinstance(node.ctx, ast.Load)):
            key = node.slice
        if key is not None:
            yield node.lineno, (key.value if isinstance(key, ast.Constant) else ast.unparse(key))


@pytest.mark.parametrize("source, expected", [
    ("import os\nos.environ.get('A')", [(2, "A")]),
    ("import os\nos.getenv('A')", [(2, "A")]),
    ("import os\nos.environ['A']", [(2, "A")]),
    ("import os\nenv = os.environ\nenv.get('A')", [(3, "A")]),
    ("import os\ndef f(e=None):\n    e = os.environ if e is None else e\n    return e[K]",
     [(4, "K")]),
    ("import os\nenv = dict(os.environ)\nenv['A'] = '1'\nenv.get('A')", []),
    ("import os\nenv = os.environ\nenv['A'] = '1'", []),
])
def test_the_check_sees_direct_reads_and_reads_through_an_alias(source, expected):
    """The scan below would miss a slip it cannot see: it must find reads through an alias of
    ``os.environ`` (served.py read one that way) and leave copies and writes alone."""
    assert sorted(_environment_reads(ast.parse(source))) == expected


def test_no_module_but_settings_reads_the_environment():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative == "settings.py":
            continue
        for line, variable in _environment_reads(ast.parse(path.read_text(encoding="utf-8"))):
            if (relative, variable) not in NOT_A_SETTING:
                found.append(f"catdask/{relative}:{line} reads {variable}")
    assert found == [], "read these through catdask.settings:\n" + "\n".join(found)


def test_every_catdask_variable_is_a_documented_setting():
    """Each CATDASK_* variable the package names is a Setting, listed in the module's table
    and in docs/operations.md; each Setting is listed in both."""
    named = set()
    for path in PACKAGE.rglob("*.py"):
        named |= set(re.findall(r"\bCATDASK_[A-Z_]+\b", path.read_text(encoding="utf-8")))
    names = {s.name for s in settings.SETTINGS}
    assert named <= names, named - names
    operations = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    for setting in settings.SETTINGS:
        assert f"``{setting.name}``" in settings.__doc__, setting.name
        assert f"`{setting.name}`" in operations, setting.name


def test_the_settings_module_imports_the_standard_library_only():
    """The CLI's checks read it before anything heavy is imported."""
    tree = ast.parse((PACKAGE / "settings.py").read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"__future__", "dataclasses", "os"}, imported


def test_a_setting_is_read_when_needed_and_empty_means_unset(monkeypatch, tmp_path):
    from catdask.store import resolve_store

    monkeypatch.setenv("CATDASK_STORE", str(tmp_path / "env-store"))
    assert settings.STORE.get() == str(tmp_path / "env-store")
    assert resolve_store() == (tmp_path / "env-store").resolve()
    monkeypatch.setenv("CATDASK_STORE", "")
    assert settings.STORE.get() is None
    monkeypatch.chdir(tmp_path)
    assert resolve_store() == (tmp_path / "catdask-store").resolve()
    # An explicit mapping (the CLI's Prefect set-up reads a copy of the environment).
    assert settings.PREFECT_HOME.get({"PREFECT_HOME": "/h"}) == "/h"
    assert settings.PREFECT_HOME.get({"PREFECT_HOME": ""}) is None
    assert str(settings.SCHEDULER) == "CATDASK_SCHEDULER"


@pytest.mark.parametrize("owner, constant, setting", [
    ("catdask.store.layout", "STORE_ENV", settings.STORE),
    ("catdask.catalog.entries", "CATALOG_ENV", settings.CATALOG),
    ("catdask.catalog.sources", "SOURCE_ENV", settings.SOURCE_DIR),
    ("catdask.catalog.tables", "MAX_TABLE_BYTES_ENV", settings.MAX_TABLE_BYTES),
    ("catdask.distributed.cluster", "ENV_SCHEDULER", settings.SCHEDULER),
    ("catdask.cli.runtime", "ENV_SCHEDULER", settings.SCHEDULER),
    ("catdask.serve", "ENV_RUN_LIMIT", settings.SERVE_LIMIT),
])
def test_the_old_names_of_the_variables_are_the_settings(owner, constant, setting):
    import importlib

    assert getattr(importlib.import_module(owner), constant) == setting.name
