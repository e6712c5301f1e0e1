"""Where a store may live: a folder (a path or ``file://``), never a URL taken for a folder."""

from __future__ import annotations

import numpy as np
import pytest

from catdask.store import (
    check_store,
    gc_store,
    list_datasets,
    load_estimator,
    resolve_store,
    write_dataset,
)

URL = "s3://AKIAPLANTED:planted-secret@bucket/store?X-Amz-Signature=planted-sig"


@pytest.mark.parametrize("call", [
    lambda s: write_dataset(s, "d", np.ones((4, 2)), [0, 1, 0, 1]),
    lambda s: check_store(s),
    lambda s: gc_store(s),
    lambda s: list_datasets(s),
])
@pytest.mark.parametrize("by_env", [False, True])
def test_the_library_refuses_an_object_store_url_without_repeating_its_secret(
        tmp_path, monkeypatch, call, by_env):
    monkeypatch.chdir(tmp_path)
    if by_env:
        monkeypatch.setenv("CATDASK_STORE", URL)
    # The data-set side opens s3:// stores since issue 39, and refuses a URL with credentials
    # in it; the model side (not yet ported) refuses every object-store URL.
    with pytest.raises(ValueError, match=r"s3://bucket/store is an object-store URL|"
                       r"credentials and ports do not belong in the URL") as err:
        call(None if by_env else URL)
    assert "planted" not in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []  # no folder named 's3:'


@pytest.mark.parametrize("by_env", [False, True])
def test_the_registry_reads_s3_urls_and_refuses_one_with_a_secret_in_one_line(
        tmp_path, monkeypatch, by_env):
    """The registry's half is ported (issue 39): it opens s3:// URLs, and refuses one that
    carries credentials without repeating them."""
    from catdask.object_store import StoreURLError

    monkeypatch.chdir(tmp_path)
    if by_env:
        monkeypatch.setenv("CATDASK_STORE", URL)
    with pytest.raises(StoreURLError, match="credentials and ports do not belong") as err:
        load_estimator(None if by_env else URL, "m")
    assert "planted" not in str(err.value) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("url", ["s3:/bucket/store", "gs://bucket/store", "ftp://host/x",
                                 " s3://bucket/store"])
def test_any_other_url_is_refused_too(tmp_path, monkeypatch, url):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError):
        resolve_store(url)
    assert list(tmp_path.iterdir()) == []


def test_paths_and_file_urls_name_folders(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_store("st") == (tmp_path / "st").resolve()
    assert resolve_store(f"file://{tmp_path}/st") == (tmp_path / "st").resolve()
    assert resolve_store("C:/not-a-url") == (tmp_path / "C:/not-a-url").resolve()
