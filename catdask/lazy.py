"""Names a package loads on first use (PEP 562), so importing the package stays cheap."""

from __future__ import annotations

from importlib import import_module


def lazy_attributes(package: str, table: dict, namespace: dict):
    """``(__getattr__, __dir__)`` for a package whose names ``table`` maps to the relative
    module that defines them (``{"CategorySpace": ".estimators"}``); a name loaded once is
    stored in ``namespace`` (the package's ``globals()``)."""

    def __getattr__(name):
        if name in table:
            value = getattr(import_module(table[name], package), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
