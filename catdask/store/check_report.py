"""What ``catdask check`` reports: :class:`StoreProblem`, :class:`StoreReport`, and the
finding for a local temporary an earlier catdask's crashed writer left."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ._atomic import seam_write_in_flight, temporary_age, try_lock


@dataclasses.dataclass(frozen=True)
class StoreProblem:
    """One problem found by :func:`check_store`.

    Attributes
    ----------
    kind : str
        ``temporary`` (left by a crashed writer), ``stray`` (an object the store does
        not write), ``uncommitted`` (a snapshot newer than the current one, or a data set with
        snapshots but no pointer: a write crashed before it committed), ``pointer`` (damaged,
        or naming a missing snapshot), ``corrupt-snapshot`` (fails its checksums),
        ``model`` (a version that does not load), ``unreferenced`` (an old snapshot gc would
        remove; informational), ``stale`` (a model trained on content its data set no longer
        holds; informational).
    path : Path or str
        A local path, or a URL on object storage.
    message : str
    severity : str
        ``"error"`` (the store is not whole) or ``"info"``.
    """

    kind: str
    path: Path | str
    message: str
    severity: str = "error"


@dataclasses.dataclass
class StoreReport:
    """What :func:`check_store` found and did.

    ``checked`` has one row per data set and model version (``kind``, ``name``, ``status``:
    ``"ok"`` or the problem); ``removed`` and ``restored`` list what cleanup changed.
    """

    root: Path | str
    problems: list = dataclasses.field(default_factory=list)
    checked: list = dataclasses.field(default_factory=list)
    removed: list = dataclasses.field(default_factory=list)
    restored: list = dataclasses.field(default_factory=list)

    @property
    def errors(self) -> list:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def ok(self) -> bool:
        """True when the store is whole (informational findings aside)."""
        return not self.errors



def temporary_problem(child: Path):
    """The problem of a local temporary, None while a running writer may own it (locked, or
    a seam write younger than a minute)."""
    if seam_write_in_flight(child):
        return None
    with try_lock(child) as free:
        if not free:
            return None  # a running writer holds it: in use, not a leftover
    try:
        age = temporary_age(child)
    except FileNotFoundError:
        return None
    if age is None:
        return StoreProblem("temporary", child, "left by a crashed writer; its modification "
                            "time lies in the future (a clock set back, or a copied store), so "
                            "its age is unknown: `check --cleanup` removes it (no process "
                            "holds it), whatever --older-than says")
    return StoreProblem("temporary", child, "left by a crashed writer; `check --cleanup` "
                        "removes it")


