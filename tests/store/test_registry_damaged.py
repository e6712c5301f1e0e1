"""Model registry: crafted or damaged versions are refused by the loader (no pickles, no
object arrays, no edited metadata or values, no unsafe names)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr

from catdask.errors import StoreCorruptError
from catdask.store import list_models, load_model_version, register_model
from catdask.store.model_check import check_models

from tests.store.test_registry import arrays


@pytest.fixture
def v1(store):
    register_model(store, "m", arrays(), {"objective": 1.0})
    return Path(store) / "models" / "m" / "v1"


def corrupt(store, match, **kw):
    with pytest.raises(StoreCorruptError, match=match):
        load_model_version(store, "m", 1, **kw)


def edit_json(path: Path, fn):
    meta = json.loads(path.read_text())
    fn(meta)
    path.write_text(json.dumps(meta))


def test_pickle_file_is_rejected(store, v1):
    import pickle

    (v1 / "model.pkl").write_bytes(pickle.dumps({"W": np.eye(2)}))
    corrupt(store, "unexpected file 'model.pkl'.*never unpickles")


def test_object_dtype_array_is_rejected(store, v1):
    g = zarr.open_group(str(v1), mode="r+")
    s = g.create_array("names", shape=(2,), dtype=str)
    s[:] = np.array(["a", "b"])

    def list_it(m):
        m["attributes"]["arrays"]["names"] = {"dtype": "|O", "shape": [2], "sha256": ""}

    edit_json(v1 / "zarr.json", list_it)
    corrupt(store, "only numeric arrays", verify=False)


def test_array_json_claiming_object_dtype_is_rejected(store, v1):
    edit_json(v1 / "W" / "zarr.json", lambda m: m.update(data_type="object"))
    corrupt(store, "data type 'object'")


def test_corrupt_json(store, v1):
    (v1 / "zarr.json").write_text('{"attributes": ')
    corrupt(store, "not valid JSON")
    # A listing reads the listing index, not every zarr.json (issue 39: 1,000 versions in
    # under 2 s on S3): the damage is check's to find; a listing without the index shows it.
    [problem] = check_models(store).problems
    assert "does not load" in problem.message and "not valid JSON" in problem.message
    shutil.rmtree(v1.parent / ".index")
    [mv] = list_models(store)
    assert mv.problem and "not valid JSON" in mv.problem


def test_missing_array(store, v1):
    shutil.rmtree(v1 / "mean")
    corrupt(store, "array 'mean' listed in the metadata is missing")


def test_edited_meta(store, v1):
    edit_json(v1 / "zarr.json", lambda m: m["attributes"]["meta"].update(objective=99.0))
    corrupt(store, "modified after registration")


def test_edited_array_values(store, v1):
    zarr.open_group(str(v1), mode="r+")["W"][0, 0] = 42.0
    corrupt(store, "array 'W' does not match its sha256")


def test_truncated_chunk(store, v1):
    chunk = next(p for p in (v1 / "W" / "c").rglob("*") if p.is_file())
    chunk.write_bytes(chunk.read_bytes()[:5])
    corrupt(store, "truncated or corrupt chunk")


def test_renamed_version_directory(store, v1):
    os.rename(v1, v1.with_name("v5"))
    with pytest.raises(StoreCorruptError, match="directory v5 holds metadata for version 1"):
        load_model_version(store, "m", 5)


def test_unsafe_array_name_in_metadata(store, v1):
    def escape(m):
        m["attributes"]["arrays"]["../../W"] = m["attributes"]["arrays"].pop("W")

    edit_json(v1 / "zarr.json", escape)
    corrupt(store, "unsafe name", verify=False)


def test_missing_meta_attribute(store, v1):
    edit_json(v1 / "zarr.json", lambda m: m["attributes"].pop("meta"))
    corrupt(store, "'meta' is missing")
