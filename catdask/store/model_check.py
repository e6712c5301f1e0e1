"""Check's model part: every committed version loads with the real loader (arrays, JSON, the
estimator rebuilt; never a pickle), nothing stray lies in ``models/``, no uncommitted version
of a dead registration is left, the listing index agrees with the versions' metadata, and
models whose data set now holds other content are flagged (stale lineage). On any store :func:`~catdask.store.root.open_store` opens."""

from __future__ import annotations

from ..errors import StoreCorruptError
from ..names import is_valid_name
from ._atomic import is_temporary
from .check_report import StoreProblem, StoreReport, temporary_problem
from .layout import MODEL_COUNTER, models_dir
from ..dataset_pointer import location
from ._json import json_sha256
from .model_entries import (
    INDEX,
    LEGACY_NAMES,
    RUNS,
    WRITING,
    checked_attrs,
    is_dead_leftover,
    model_listing,
    read_version_node,
    version_folders,
    version_key,
)
from .model_index import entries_without_version, indexed_meta
from .pointer import read_pointer
from .root import StoreRoot, open_store


def check_models(store=None) -> StoreReport:
    """Check's model part alone, on any store :func:`~catdask.store.root.open_store` opens
    (a path, ``s3://bucket/prefix``, a StoreRoot): every version loads, no stray object, no
    uncommitted version of a dead registration."""
    root = open_store(store)
    report = StoreReport(root.path if root.path is not None else root.url)
    check_models_into(root, report)
    return report


def check_models_into(store, report: StoreReport) -> None:
    """Load every committed version with the real loader; report what the models' prefixes
    hold besides versions and their bookkeeping, and uncommitted versions of dead writers."""
    from .registry_read import load_estimator

    root = open_store(store)
    listing = model_listing(root)

    def problem(kind, key, message):
        report.problems.append(StoreProblem(kind, location(root.backend, key), message))

    for key in listing.other_top:
        problem("stray", key, "an object the store does not write, in models/; move or "
                "delete it by hand")
    for name in sorted(set(listing.versions) | set(listing.other)):
        if not is_valid_name(name):
            problem("stray", f"models/{name}", "a folder the store does not write, in "
                    "models/; move or delete it by hand")
            continue
        for rest in listing.other.get(name, []):
            if rest not in (MODEL_COUNTER, *LEGACY_NAMES) and rest.partition("/")[0] not in (
                    RUNS, WRITING, INDEX):
                problem("stray", f"models/{name}/{rest}", f"an object the store does not "
                        f"write, in model {name!r}; move or delete it by hand")
        for v in listing.uncommitted(name):
            if is_dead_leftover(root, name, v):
                problem("temporary", version_key(name, v), "an uncommitted version left by a "
                        "crashed registration; `check --cleanup` removes it")
        indexed = indexed_meta(root, name, listing.committed(name))
        for v in entries_without_version(root, name, version_folders(root, name),
                                         listing.committed(name)):
            problem("model", StoreRoot.model_key(name, INDEX), f"the listing index names "
                    f"{name}:v{v}, which is not committed (deleted by hand?); delete this "
                    "folder (a cache: the next listing writes it again)")
        for v in listing.committed(name):
            path = location(root.backend, version_key(name, v))
            status = "ok"
            try:
                load_estimator(root, name, v)
                meta = checked_attrs(read_version_node(root, name, v), path)["meta"]
            except Exception as exc:  # any failure of the real loader means "does not load"
                status = f"does not load: {exc}"
                report.problems.append(StoreProblem("model", path, status))
            else:
                _check_lineage(root, path, meta, report)
                if v in indexed and json_sha256(indexed[v]) != json_sha256(meta):
                    problem("model", StoreRoot.model_key(name, INDEX), f"the listing index "
                            f"holds other metadata for {name}:v{v} than its zarr.json; delete "
                            "this folder (a cache: the next listing writes it again)")
            report.checked.append({"kind": "model", "name": f"{name}:v{v}", "status": status})
    if root.path is not None:  # temporaries of an earlier catdask's registrations
        for folder in sorted(models_dir(root.path).glob("*/")):
            for child in sorted(folder.iterdir()):
                found = temporary_problem(child) if is_temporary(child) else None
                if found is not None:
                    report.problems.append(found)


def _check_lineage(root: StoreRoot, path, meta: dict, report: StoreReport) -> None:
    dataset, sha = meta.get("dataset"), meta.get("dataset_sha256")
    if not (isinstance(dataset, str) and isinstance(sha, str) and is_valid_name(dataset)):
        return
    try:
        pointer = read_pointer(root.backend, f"datasets/{dataset}")
    except StoreCorruptError:
        return  # reported with the data set
    if pointer is None:
        msg = f"trained on data set {dataset!r}, which is no longer stored"
    elif pointer.content_sha256 != sha:
        msg = (f"stale: trained on content {sha[:12]} of data set {dataset!r}, which now holds "
               f"{pointer.content_sha256[:12]} (snapshot {pointer.snapshot})")
    else:
        return
    report.problems.append(StoreProblem("stale", path, msg, "info"))
