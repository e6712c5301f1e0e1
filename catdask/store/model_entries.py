"""Where a model's versions live on the store's backend, and which of them are committed.

::

    models/<name>/v<N>/zarr.json     version N's group document: written last, create-only;
                                     the version exists exactly when this key does
    models/<name>/v<N>/<array>/...   its arrays (root arrays of their own prefix)
    models/<name>/.newest-version    the highest N ever given (catdask.store.ids)
    models/<name>/.writing/v<N>      the lease of the registration writing v<N>
    models/<name>/.runs/<sha256>     the run key's claim: which version its run registers
    models/<name>/.index/<P>         the listing index: committed versions' metadata
                                     (a cache, :mod:`catdask.store.model_index`)

A version prefix without its ``zarr.json`` is uncommitted: a registration writing it (its
lease is live) or one that died (its lease expired or was released). Nothing reads it;
:func:`remove_uncommitted_versions` removes a dead one once it is older than a grace period.
Stores written by earlier versions read the same (their versions have a ``zarr.json`` and
nothing else marks them; their ``.registry.lock`` and ``.tmp-*`` folders are legacy).
"""

from __future__ import annotations

import dataclasses
import re
from collections import defaultdict

from ..dataset_pointer import location
from ..errors import StoreCorruptError
from ..names import is_valid_name
from ._parallel import in_parallel
from ._zarr_io import read_node
from .lease import lease_is_live
from .model_index import INDEX, forget_version
from .root import StoreRoot

FORMAT = 1
#: The writers' leases and the run keys' claims, inside a model's prefix.
WRITING = ".writing"
RUNS = ".runs"
#: Names an earlier catdask kept in a model folder (the registry lock, the counter).
LEGACY_NAMES = (".registry.lock",)
_VERSION = re.compile(r"v([1-9][0-9]*)")


def version_number(part: str) -> int | None:
    """N of a version's name ``v<N>``, None for anything else."""
    m = _VERSION.fullmatch(part)
    return int(m.group(1)) if m else None


def version_key(name: str, version: int, *parts: str) -> str:
    """``models/<name>/v<N>/<parts...>`` (the name validated)."""
    return StoreRoot.model_key(name, f"v{version}", *parts)


@dataclasses.dataclass
class ModelListing:
    """One listing of ``models/``: per model, per version number, its objects' names below
    ``v<N>/`` (with their ``last_modified``), and every other key of the model."""

    versions: dict[str, dict[int, dict[str, float]]] = dataclasses.field(
        default_factory=lambda: defaultdict(dict))
    other: dict[str, list[str]] = dataclasses.field(default_factory=lambda: defaultdict(list))
    other_top: list[str] = dataclasses.field(default_factory=list)

    def committed(self, name: str) -> list[int]:
        """The committed versions of ``name``, lowest first."""
        return sorted(v for v, objs in self.versions.get(name, {}).items() if "zarr.json" in objs)

    def names(self) -> list[str]:
        """The models with at least one committed version, by name."""
        return sorted(n for n in self.versions if self.committed(n))

    def uncommitted(self, name: str) -> list[int]:
        return sorted(v for v, objs in self.versions.get(name, {}).items()
                      if "zarr.json" not in objs)


def model_listing(root: StoreRoot, name: str | None = None) -> ModelListing:
    """List ``models/`` (or only ``models/<name>/``) in one recursive listing."""
    prefix = StoreRoot.model_key(name) + "/" if name is not None else "models/"
    out = ModelListing()
    for meta in root.backend.list(prefix):
        parts = meta.key.split("/")
        if len(parts) < 3:
            out.other_top.append(meta.key)
            continue
        model, rest = parts[1], parts[2:]
        number = version_number(rest[0]) if len(rest) > 1 else None
        if number is not None and is_valid_name(model):
            out.versions[model].setdefault(number, {})["/".join(rest[1:])] = meta.last_modified
        else:
            out.other[model].append("/".join(rest))
    return out


def model_names(root: StoreRoot) -> list[str]:
    """The valid names under ``models/`` (with or without a committed version), by name."""
    return sorted(n for n in root.backend.list_folders("models/") if is_valid_name(n))


def version_folders(root: StoreRoot, name: str) -> list[int]:
    """The numbers of the version prefixes of ``name``, committed or not, lowest first."""
    found = (version_number(f) for f in root.backend.list_folders(
        StoreRoot.model_key(name) + "/"))
    return sorted(n for n in found if n is not None)


def committed_versions(root: StoreRoot, name: str) -> list[int]:
    """The committed versions of ``name`` (their ``zarr.json`` exists), lowest first."""
    numbers = version_folders(root, name)
    heads = in_parallel(lambda v: root.backend.head(version_key(name, v, "zarr.json")),
                        numbers)
    return [v for v, head in zip(numbers, heads) if head is not None]


def read_version_node(root: StoreRoot, name: str, version: int) -> dict:
    """The parsed group document of a version (``StoreCorruptError`` if damaged)."""
    key = version_key(name, version)
    return read_node(root.backend, key, key)


def checked_attrs(node: dict, entry) -> dict:
    """A version's attributes from its group document, after checking their shape."""
    if node.get("node_type") != "group":
        raise StoreCorruptError(entry, "zarr.json does not describe a group")
    attrs = node.get("attributes")
    if not isinstance(attrs, dict):
        raise StoreCorruptError(entry, "the group has no attributes")
    if attrs.get("catdask_model_format") != FORMAT:
        raise StoreCorruptError(
            entry,
            f"unknown model format {attrs.get('catdask_model_format')!r} "
            f"(this catdask reads format {FORMAT})",
        )
    if not isinstance(attrs.get("meta"), dict):
        raise StoreCorruptError(entry, "attribute 'meta' is missing or not an object")
    if not isinstance(attrs.get("arrays"), dict):
        raise StoreCorruptError(entry, "attribute 'arrays' is missing or not an object")
    return attrs


def writer_lease_key(name: str, version: int) -> str:
    return StoreRoot.model_key(name, WRITING, f"v{version}")


def remove_version(root: StoreRoot, name: str, version: int) -> None:
    """Remove a version: a committed one leaves the listing index first, then its
    ``zarr.json`` goes (it stops existing for every reader), then the rest of its prefix.
    Idempotent."""
    backend = root.backend
    if backend.head(version_key(name, version, "zarr.json")) is not None:
        forget_version(root, name, version)
    backend.delete(version_key(name, version, "zarr.json"))
    for meta in list(backend.list(version_key(name, version) + "/")):
        backend.delete(meta.key)


def is_dead_leftover(root: StoreRoot, name: str, version: int) -> bool:
    """Whether the uncommitted prefix of ``name:v<version>`` is a dead writer's: no live lease
    names it, it is still uncommitted after the lease was judged (a writer commits before it
    lets its lease go), and it still holds objects (a failing writer removes its own)."""
    backend = root.backend
    if lease_is_live(backend, writer_lease_key(name, version)):
        return False
    if backend.head(version_key(name, version, "zarr.json")) is not None:
        return False
    return next(iter(backend.list(version_key(name, version) + "/")), None) is not None


def remove_uncommitted_versions(root: StoreRoot, older_than_seconds: float = 3600.0,
                                now: float | None = None) -> list:
    """Remove the uncommitted version prefixes of dead registrations whose newest object is at
    least ``older_than_seconds`` old (by the backend's clock); returns their locations."""
    from ..object_store.lease import server_now

    listing = model_listing(root)
    removed: list = []
    for name in sorted(listing.versions):
        for version in listing.uncommitted(name):
            newest = max(listing.versions[name][version].values())
            if now is None:
                now = server_now(root.backend)
            if now - newest < older_than_seconds or not is_dead_leftover(root, name, version):
                continue
            remove_version(root, name, version)
            root.backend.delete(writer_lease_key(name, version))
            removed.append(location(root.backend, version_key(name, version)))
    return removed
