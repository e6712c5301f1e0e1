"""Catalog, source location, downloads and parsers (real UCI files when ../shared is present)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catdask.catalog import sources as cat_sources
from catdask.catalog import (
    CatalogEntry,
    fetch_sources,
    get_entry,
    load_catalog,
    locate_sources,
    obtain_sources,
    parse_dataset,
    parse_table,
)
from catdask.errors import (
    CatalogError,
    ChecksumMismatchError,
    DatasetNotFoundError,
    ParseError,
    SourceNotFoundError,
)
from catdask.names import is_valid_name

from tests.helpers.paths import REPO, SHARED

UCI = SHARED / "data" / "uci"
TINY = REPO / "data" / "tiny"

# Verified counts from ../shared/data/uci/*/SOURCE.md (and sklearn for iris/wine).
EXPECTED = {
    "iris": (150, 4, {0: 50, 1: 50, 2: 50}),
    "wine": (178, 13, {0: 59, 1: 71, 2: 48}),
    "vehicle": (846, 18, {"bus": 218, "opel": 212, "saab": 217, "van": 199}),
    "seeds": (210, 7, {1: 70, 2: 70, 3: 70}),
    "satellite": (6435, 36, {1: 1533, 2: 703, 3: 1358, 4: 626, 5: 707, 7: 1508}),
    "segmentation": (
        2310,
        19,
        {c: 330 for c in ["BRICKFACE", "CEMENT", "FOLIAGE", "GRASS", "PATH", "SKY", "WINDOW"]},
    ),
}


@pytest.fixture(autouse=True)
def no_env_sources(monkeypatch):
    monkeypatch.delenv("CATDASK_SOURCE_DIR", raising=False)
    monkeypatch.delenv("CATDASK_CATALOG", raising=False)


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def entry(name="tinyset", files=None, parse=None, expected=None):
    """A catalog entry built in the test (not from data/catalog.json)."""
    files = files or [{"name": "t.dat", "url": "https://example.org/t.dat", "sha256": None}]
    parse = parse or {
        "format": "whitespace",
        "delimiter": None,
        "skip_lines": 0,
        "header": False,
        "label_column": -1,
        "feature_columns": None,
        "label_type": "auto",
    }
    return CatalogEntry(name, "test", {"kind": "files", "files": files}, parse, expected or {})


TABLE = "1 2 a\n3 4 a\n5 6 b\n7 8 b\n"


# =========================================================================== the catalog


def test_catalog_lists_every_data_set():
    c = load_catalog()
    assert list(c) == [
        "iris",
        "wine",
        "vehicle",
        "seeds",
        "satellite",
        "segmentation",
        "thyroid",
        "vertebral",
    ]
    for e in c.values():
        assert is_valid_name(e.name) and e.description
        for f in e.files:
            assert f["url"].startswith("https://archive.ics.uci.edu/ml/machine-learning-databases/")
    assert c["iris"].source == {"kind": "sklearn", "loader": "load_iris"}
    assert [f["name"] for f in c["vehicle"].files] == [f"xa{x}.dat" for x in "abcdefghi"]
    assert c["vertebral"].files[0]["member"] == "column_3C.dat"
    assert c["vertebral"].files[0]["url"].endswith("00212/vertebral_column_data.zip")
    assert c["thyroid"].files[0]["url"].endswith("thyroid-disease/new-thyroid.data")
    assert c["thyroid"].parse["label_column"] == 0
    assert c["seeds"].parse["label_names"] == {"1": "Kama", "2": "Rosa", "3": "Canadian"}


def _source_md_hashes(name):
    text = (UCI / name / "SOURCE.md").read_text()
    return dict(re.findall(r"^\|\s*([\w.\-]+)\s*\|.*\|\s*([0-9a-f]{64})\s*\|$", text, re.M))


@pytest.mark.parametrize("name", ["vehicle", "seeds", "satellite", "segmentation"])
def test_catalog_sha256_matches_source_md(name):
    if not (UCI / name / "SOURCE.md").is_file():
        pytest.skip(f"{UCI / name / 'SOURCE.md'} not present")
    recorded = _source_md_hashes(name)
    for f in get_entry(name).files:
        assert f["sha256"] == recorded[f["name"]], f["name"]


def test_unknown_data_set_lists_known_names():
    with pytest.raises(DatasetNotFoundError, match="known: iris, wine, vehicle") as info:
        get_entry("mnist")
    assert isinstance(info.value, KeyError)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (
            lambda d: d["datasets"][2]["source"]["files"][0].update(url="http://x.org/a"),
            "only https",
        ),
        (
            lambda d: d["datasets"][2]["source"]["files"][0].update(url="file:///etc/passwd"),
            "only https",
        ),
        (
            lambda d: d["datasets"][2]["source"]["files"][0].update(sha256="abc"),
            "64 lower-case hex",
        ),
        (
            lambda d: d["datasets"][2]["source"]["files"][0].update(name="../x.dat"),
            "plain file name",
        ),
        (lambda d: d["datasets"].append(dict(d["datasets"][0])), "listed twice"),
        (lambda d: d["datasets"][0].update(name="../iris"), "path separator"),
        (lambda d: d["datasets"][0]["source"].update(loader="__import__"), "sklearn loader"),
        (lambda d: d["datasets"][2]["parse"].update(format="xlsx"), "format must be"),
        (lambda d: d["datasets"][5]["parse"].update(delimiter=";;"), "one-character delimiter"),
        (lambda d: d["datasets"][2].pop("parse"), "'parse' is required"),
        (lambda d: d.pop("datasets"), "'datasets' list"),
    ],
)
def test_malformed_catalog_is_rejected(tmp_path, mutate, match):
    data = json.loads((REPO / "data" / "catalog.json").read_text())
    mutate(data)
    bad = write(tmp_path / "catalog.json", json.dumps(data))
    with pytest.raises(CatalogError, match=match):
        load_catalog(bad)


def test_catalog_path_from_env(tmp_path, monkeypatch):
    with pytest.raises(CatalogError, match="not valid|cannot be read"):
        load_catalog(write(tmp_path / "c.json", "{"))
    monkeypatch.setenv("CATDASK_CATALOG", str(write(tmp_path / "c2.json", '{"datasets": []}')))
    assert load_catalog() == {}


# =========================================================================== real data sets


@pytest.mark.parametrize("name", list(EXPECTED))
def test_parse_catalog_data_sets(name):
    e = get_entry(name)
    if e.kind == "files" and not (UCI / name).is_dir():
        pytest.skip(f"{UCI / name} not present (../shared is not beside the checkout)")
    X, y, label_names, prov = parse_dataset(e)
    n, d, counts = EXPECTED[name]
    assert X.shape == (n, d) and X.dtype == np.float64 and np.all(np.isfinite(X))
    classes, got = np.unique(y, return_counts=True)
    assert dict(zip(classes.tolist(), got.tolist())) == counts
    assert len(label_names) == len(counts)
    assert prov["dataset"] == name and prov["n_samples"] == n
    json.dumps(prov)  # provenance is JSON-safe
    if e.kind == "files":
        recorded = _source_md_hashes(name)
        for f in prov["files"]:
            assert f["sha256"] == recorded[f["name"]] == f["catalog_sha256"]
            assert f["url"].startswith("https://")


def test_real_file_details():
    if not UCI.is_dir():
        pytest.skip(f"{UCI} not present")
    X, y, names, _ = parse_dataset("satellite")
    np.testing.assert_array_equal(X[0, :4], [92, 115, 120, 94])  # first UCI training row
    assert 6 not in set(y.tolist())
    X, y, names, _ = parse_dataset("seeds")
    assert names == ["Kama", "Rosa", "Canadian"] and y.dtype.kind == "i"
    X, y, names, prov = parse_dataset("segmentation")
    assert np.all(X[:, 2] == 9)  # REGION-PIXEL-COUNT is constant
    assert [f["rows"] for f in prov["files"]] == [210, 2100]
    assert len(np.unique(X, axis=0)) == 2086
    X, y, names, prov = parse_dataset("vehicle")
    assert [f["rows"] for f in prov["files"]] == [94] * 9
    assert y.dtype.kind == "U" and set(y) == {"bus", "opel", "saab", "van"}


def test_sklearn_sets_need_no_files():
    assert locate_sources("iris") == []
    X, y, names, prov = parse_dataset("wine")
    assert names == ["class_0", "class_1", "class_2"] and prov["source"] == "sklearn"
    assert len(prov["feature_names"]) == 13


# =========================================================================== locating sources


def test_locate_in_source_dir_flat_subfolder_and_env(tmp_path, monkeypatch):
    e = entry()
    flat = tmp_path / "flat"
    flat.mkdir()
    write(flat / "t.dat", TABLE)
    assert locate_sources(e, flat) == [flat / "t.dat"]
    nested = tmp_path / "nested"
    (nested / "tinyset").mkdir(parents=True)
    write(nested / "tinyset" / "t.dat", TABLE)
    assert locate_sources(e, nested) == [nested / "tinyset" / "t.dat"]
    monkeypatch.setenv("CATDASK_SOURCE_DIR", str(nested))
    assert locate_sources(e) == [nested / "tinyset" / "t.dat"]
    assert locate_sources(e, flat) == [flat / "t.dat"]  # the argument comes first


def test_locate_falls_back_to_shared():
    if not (UCI / "seeds").is_dir():
        pytest.skip(f"{UCI / 'seeds'} not present")
    assert locate_sources("seeds") == [UCI / "seeds" / "seeds_dataset.txt"]


def test_locate_missing_files_says_where_it_looked(tmp_path):
    e = entry(
        files=[
            {"name": "t.dat", "url": "https://example.org/t.dat", "sha256": None},
            {"name": "u.dat", "url": "https://example.org/u.dat", "sha256": None},
        ]
    )
    write(tmp_path / "t.dat", TABLE)
    with pytest.raises(SourceNotFoundError) as info:
        locate_sources(e, tmp_path)
    msg = str(info.value)
    assert str(tmp_path) in msg and "1 of 2 files" in msg and "fetch_sources" in msg
    assert isinstance(info.value, FileNotFoundError)


def test_local_checksum_mismatch(tmp_path):
    good = hashlib.sha256(TABLE.encode()).hexdigest()
    e = entry(files=[{"name": "t.dat", "url": "https://example.org/t.dat", "sha256": good}])
    write(tmp_path / "t.dat", TABLE.replace("8", "9"))
    with pytest.raises(ChecksumMismatchError) as info:
        locate_sources(e, tmp_path)
    err = info.value
    assert err.expected == good and err.actual != good and err.path.endswith("t.dat")
    assert good in str(err) and "t.dat" in str(err) and "verify=False" in str(err)
    assert locate_sources(e, tmp_path, verify=False) == [tmp_path / "t.dat"]


# =========================================================================== downloads


class FakeResponse(io.BytesIO):
    pass


def fake_server(monkeypatch, payloads):
    calls = []

    def open_url(url, timeout):
        calls.append(url)
        cat_sources._check_https(url)
        return FakeResponse(payloads[url])

    monkeypatch.setattr(cat_sources, "_open_url", open_url)
    return calls


def test_fetch_downloads_verifies_and_caches(tmp_path, monkeypatch):
    sha = hashlib.sha256(TABLE.encode()).hexdigest()
    e = entry(files=[{"name": "t.dat", "url": "https://example.org/t.dat", "sha256": sha}])
    calls = fake_server(monkeypatch, {"https://example.org/t.dat": TABLE.encode()})
    [p] = fetch_sources(e, tmp_path / "cache")
    assert p == tmp_path / "cache" / "tinyset" / "t.dat" and p.read_text() == TABLE
    assert fetch_sources(e, tmp_path / "cache") == [p] and len(calls) == 1  # cached
    write(p, "damaged")
    fetch_sources(e, tmp_path / "cache")
    assert len(calls) == 2 and p.read_text() == TABLE  # re-downloaded
    X, y, _, _ = parse_dataset(e, [p])
    assert X.shape == (4, 2)


def test_fetch_checksum_mismatch_leaves_nothing(tmp_path, monkeypatch):
    e = entry(files=[{"name": "t.dat", "url": "https://example.org/t.dat", "sha256": "0" * 64}])
    fake_server(monkeypatch, {"https://example.org/t.dat": TABLE.encode()})
    with pytest.raises(ChecksumMismatchError, match="expected 0{64}, got [0-9a-f]{64}") as info:
        fetch_sources(e, tmp_path)
    assert "https://example.org/t.dat" in str(info.value)
    assert list((tmp_path / "tinyset").iterdir()) == []  # no partial or temporary file


def test_network_error_is_reported(tmp_path, monkeypatch):
    import urllib.error

    def unreachable(url, timeout):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(cat_sources, "_open_url", unreachable)
    with pytest.raises(
        SourceNotFoundError,
        match="Could not download https://example.org/t.dat: Name or service not known",
    ):
        fetch_sources(entry(), tmp_path)
    assert list((tmp_path / "tinyset").iterdir()) == []


@pytest.mark.parametrize(
    "url",
    [
        "http://archive.ics.uci.edu/x.dat",
        "ftp://example.org/x",
        "file:///etc/passwd",
        "//example.org/x",
    ],
)
def test_non_https_downloads_are_refused(tmp_path, url):
    e = entry(files=[{"name": "t.dat", "url": url, "sha256": None}])
    with pytest.raises(ValueError, match="only https"):
        fetch_sources(e, tmp_path)


def test_redirect_to_http_is_refused():
    import urllib.request

    handler = cat_sources._HTTPSOnlyRedirects()
    req = urllib.request.Request("https://example.org/a")
    with pytest.raises(ValueError, match="only https"):
        handler.redirect_request(req, None, 302, "Found", {}, "http://example.org/a")


def test_no_download_when_not_allowed(tmp_path, monkeypatch):
    calls = fake_server(monkeypatch, {})
    with pytest.raises(SourceNotFoundError, match="not cached and downloading is disabled"):
        fetch_sources(entry(), tmp_path, allow_download=False)
    with pytest.raises(SourceNotFoundError):
        obtain_sources(entry(), tmp_path / "none", cache_dir=tmp_path, allow_download=False)
    assert calls == []


def test_zip_member(tmp_path, monkeypatch):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("data/column_3C.dat", "1.5 2.5 DH\n1.0 2.0 DH\n3 4 NO\n3.5 4.5 NO\n")
        zf.writestr("column_2C.dat", "unrelated")
    files = [
        {
            "name": "column_3C.dat",
            "url": "https://example.org/v.zip",
            "archive": "v.zip",
            "member": "column_3C.dat",
            "sha256": None,
        }
    ]
    e = entry(files=files)
    fake_server(monkeypatch, {"https://example.org/v.zip": buf.getvalue()})
    [p] = obtain_sources(e, tmp_path / "nowhere", cache_dir=tmp_path, allow_download=True)
    assert p.name == "v.zip"
    assert locate_sources(e, tmp_path / "tinyset") == [p]  # the archive counts as the source
    X, y, names, prov = parse_dataset(e, [p])
    np.testing.assert_array_equal(X, [[1.5, 2.5], [1, 2], [3, 4], [3.5, 4.5]])
    assert names == ["DH", "NO"] and prov["files"][0]["member"] == "column_3C.dat"
    e2 = entry(files=[dict(files[0], member="nope.dat")])
    with pytest.raises(ParseError, match="no member 'nope.dat'"):
        parse_dataset(e2, [p])
    with pytest.raises(ParseError, match="is a zip archive; say which member"):
        parse_table(p, -1)
    data = bytearray(p.read_bytes())
    i = data.index(b"1.5 2.5")  # damage the member's compressed bytes: CRC check fails
    data[i : i + 3] = b"9.9"
    write(p, bytes(data))
    with pytest.raises(ParseError, match="damaged zip archive"):
        parse_dataset(e, [p])


def test_catalog_expected_counts_are_enforced(tmp_path):
    """The vertebral entry on a file with the right layout but too few rows."""
    write(
        tmp_path / "column_3C.dat",
        "1 2 3 4 5 6 DH\n1 2 3 4 5 7 DH\n1 2 3 4 5 6 SL\n"
        "1 2 3 4 5 6 SL\n1 2 3 4 5 6 NO\n1 2 3 4 5 6 NO\n",
    )
    with pytest.raises(
        ParseError, match="vertebral: parsed n_samples = 6, but the catalog expects 310"
    ):
        parse_dataset("vertebral", [tmp_path / "column_3C.dat"])


def test_catalog_refuses_unknown_labels(tmp_path):
    write(tmp_path / "new-thyroid.data", "1,2,3,4,5,6\n1,2,3,4,5,6\n4,1,1,1,1,1\n4,1,1,1,1,1\n")
    with pytest.raises(ParseError, match=r"line 3: unknown label '4'; the catalog expects one of"):
        parse_dataset("thyroid", [tmp_path / "new-thyroid.data"])


# =========================================================================== the tiny fixtures


def test_tiny_whitespace_trailing_space_crlf():
    X, y, names, prov = parse_table(TINY / "whitespace_crlf.dat", -1)
    assert X.shape == (6, 3) and names == ["bus", "van"]
    np.testing.assert_array_equal(X[0], [1.5, 2, 30])
    np.testing.assert_array_equal(y, ["van"] * 3 + ["bus"] * 3)
    assert prov["parse"]["format"] == "whitespace"


def test_tiny_csv_with_header_and_named_label():
    X, y, names, prov = parse_table(TINY / "header.csv", "species")
    assert X.shape == (6, 3) and names == ["setosa", "versicolor"]
    assert prov["feature_names"] == ["sepal_length", "sepal_width", "petal_length"]
    np.testing.assert_array_equal(X[-1], [6.9, 3.1, 4.9])


def test_tiny_doubled_tabs_no_final_newline():
    X, y, names, _ = parse_table(TINY / "tabs_no_final_newline.txt", -1)
    assert X.shape == (6, 3) and y.dtype.kind == "i" and names == ["1", "2"]
    np.testing.assert_array_equal(X[2], [14.29, 14.09, 0.905])
    np.testing.assert_array_equal(X[5], [16.44, 15.25, 0.888])


def test_tiny_five_header_lines_label_first():
    X, y, names, _ = parse_table(
        TINY / "skip5_label_first.data", 0, ",", header=False, skip_lines=5
    )
    assert X.shape == (4, 3) and names == ["GRASS", "SKY"] and np.all(X[:, 2] == 9)


def test_feature_columns_and_label_type(tmp_path):
    p = write(tmp_path / "t.csv", "a,b,c,label\n1,2,3,x\n4,5,6,x\n7,8,9,y\n1,1,1,y\n")
    X, y, names, prov = parse_table(p, "label", feature_columns=["c", 0])
    np.testing.assert_array_equal(X[:, 0], [3, 6, 9, 1])
    assert prov["feature_names"] == ["c", "a"]
    p2 = write(tmp_path / "u.txt", "1 2 10\n3 4 10\n5 6 20\n7 8 20\n")
    _, y2, _, _ = parse_table(p2, 2, label_type="str")
    assert y2.dtype.kind == "U"
    _, y3, _, _ = parse_table(p2, "2")  # an index given as a string (CLI)
    assert y3.dtype.kind == "i"


# =========================================================================== bad input


def bad(tmp_path, content, match, label=-1, **kw):
    p = write(tmp_path / kw.pop("fname", "bad.txt"), content)
    with pytest.raises(ParseError, match=match) as info:
        parse_table(p, label, **kw)
    assert str(p) in str(info.value)  # the message names the file
    return info.value


def test_truncated_last_line(tmp_path):
    err = bad(
        tmp_path,
        "1 2 3 a\n4 5 6 a\n7 8 9 b\n1 2",
        r"line 4: expected 4 fields, found 2 \(the file looks truncated\)",
    )
    assert err.line == 4 and err.problem.startswith("expected 4 fields")


def test_wrong_column_count_mid_file(tmp_path):
    bad(
        tmp_path,
        "1 2 3 a\n4 5 a\n7 8 9 b\n1 2 3 b\n",
        r"line 2: expected 4 fields, found 3 \(wrong delimiter",
    )


def test_extra_field_in_csv(tmp_path):
    bad(
        tmp_path,
        "1,2,a\n3,4,a,\n5,6,b\n7,8,b\n",
        "line 2: expected 3 fields, found 4",
        fname="x.csv",
    )


def test_non_numeric_cell(tmp_path):
    bad(
        tmp_path,
        "1 2 a\n3 x4 a\n5 6 b\n7 8 b\n",
        "line 2: non-numeric value 'x4' in feature column 1",
    )


def test_nan_cell(tmp_path):
    bad(tmp_path, "1 2 a\n3 4 a\n5 NaN b\n7 8 b\n", "line 3: missing value 'NaN' in column 1")


def test_question_mark_cell(tmp_path):
    bad(tmp_path, "1 2 a\n3 ? a\n5 6 b\n7 8 b\n", r"line 2: missing value '\?'")


def test_empty_csv_cell(tmp_path):
    bad(
        tmp_path,
        "x,y,label\n1,2,a\n3,,a\n5,6,b\n7,8,b\n",
        "line 3: missing value '' in column 1 \\('y'\\)",
        label="label",
        fname="e.csv",
    )


def test_infinite_cell(tmp_path):
    bad(tmp_path, "1 2 a\n3 4 a\n5 inf b\n7 8 b\n", "line 3: non-finite value 'inf'")


def test_empty_file(tmp_path):
    bad(tmp_path, "", "the file is empty")


def test_blank_file(tmp_path):
    bad(tmp_path, "\n  \r\n\t\n", "the file is empty")


def test_only_header_lines(tmp_path):
    bad(
        tmp_path,
        ";;; a\n;;; b\n\nA,B\n\n",
        "no data rows after skipping 5 header line",
        label=0,
        delimiter=",",
        skip_lines=5,
    )


def test_label_column_missing_by_name(tmp_path):
    bad(
        tmp_path,
        "a,b,c\n1,2,x\n3,4,x\n5,6,y\n7,8,y\n",
        r"label column 'species' not found in the header; "
        r"columns are \['a', 'b', 'c'\]",
        label="species",
        fname="h.csv",
    )


def test_label_column_index_out_of_range(tmp_path):
    bad(tmp_path, TABLE, "label column index 5 is out of range for 3 columns", label=5)


def test_label_name_without_header(tmp_path):
    bad(tmp_path, TABLE, "has no header line", label="species")


def test_class_with_one_sample(tmp_path):
    err = bad(
        tmp_path, "1 2 a\n3 4 a\n5 6 b\n7 8 b\n9 9 c\n", r"line 5: class 'c' has only 1 sample"
    )
    assert err.line == 5


def test_single_class(tmp_path):
    bad(tmp_path, "1 2 a\n3 4 a\n", "only one class")


def test_duplicate_header(tmp_path):
    bad(
        tmp_path,
        "x,y,x,label\n1,2,3,a\n1,2,3,a\n1,2,3,b\n1,2,3,b\n",
        r"line 1: duplicate column name 'x' in the header \(columns 0 and 2\)",
        label="label",
        fname="d.csv",
    )


def test_missing_label(tmp_path):
    bad(tmp_path, "1,2,a\n3,4,\n5,6,b\n7,8,b\n", "line 2: missing label ''", fname="m.csv")


def test_not_utf8(tmp_path):
    bad(tmp_path, b"1 2 a\n3 4 \xff\n5 6 b\n7 8 b\n", "line 2: not UTF-8")


def test_binary_file(tmp_path):
    bad(tmp_path, b"\x89PNG\r\n\x1a\n\x00\x00", "NUL bytes")


def _xlsx():
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("xl/workbook.xml", "<workbook/>")
    return out.getvalue()


@pytest.mark.parametrize("fname, content, match", [
    ("t.parquet", b"PAR1\x15\x04\x00", r"is a Parquet file, not a text table: catdask reads CSV "
     r"and whitespace tables; write it as CSV first \(e.g. pandas.read_parquet\('.*t.parquet'\)"
     r".to_csv\('t.csv', index=False\)\)$"),
    ("t.feather", b"ARROW1\x00\x00", r"is an Arrow / Feather file, .* pandas.read_feather"),
    ("t.h5", b"\x89HDF\r\n\x1a\n", r"is an HDF5 file, .* pandas.read_hdf"),
    ("t.xls", b"\xd0\xcf\x11\xe0\xa1\xb1", r"is an Excel workbook, .* pandas.read_excel"),
    ("t.xlsx", _xlsx(), r"is an Excel workbook, .* pandas.read_excel"),
    ("t.npy", b"\x93NUMPY\x01\x00", r"is a NumPy array file, .* \(e.g. with numpy.savetxt\)$"),
    ("t.json", b' [{"a": 1, "label": "x"}]', r"is a JSON file, .* pandas.read_json"),
])
def test_other_data_formats_say_how_to_make_a_csv(tmp_path, fname, content, match):
    """Was: "contains NUL bytes" for Parquet, "is a zip archive; say which member" for Excel,
    "malformed CSV" for JSON: true, but no way on for a user with a Parquet file."""
    bad(tmp_path, content, match, fname=fname)


def test_bad_bytes_past_the_first_block_name_their_line(tmp_path):
    """A file read whole is not line-counted while it is scanned: an error's line is counted
    when the error is found, also past the first read block (1 MiB)."""
    rows = b"1 2 a\n3 4 b\n" * 100_000  # 1.2 MB, lines 1-200,000
    bad(tmp_path, rows + b"5 6 \xff\n", "line 200001: not UTF-8", fname="u.txt")
    bad(tmp_path, rows + b"5 6 a\n7 \x00 b\n", "line 200002: contains NUL bytes", fname="n.txt")


def test_malformed_csv_quote(tmp_path):
    bad(tmp_path, '1,2,a\n3,"4"x,a\n5,6,b\n7,8,b\n', "line 2: malformed CSV", fname="q.csv")


def test_files_with_different_column_counts(tmp_path):
    write(tmp_path / "a.dat", TABLE)
    write(tmp_path / "b.dat", "1 2 3 a\n")
    e = entry(
        files=[
            {"name": "a.dat", "url": "https://e.org/a", "sha256": None},
            {"name": "b.dat", "url": "https://e.org/b", "sha256": None},
        ]
    )
    with pytest.raises(ParseError, match="b.dat: has 4 columns but the previous file"):
        parse_dataset(e, [tmp_path / "a.dat", tmp_path / "b.dat"])


def test_missing_file(tmp_path):
    with pytest.raises(ParseError, match="file not found"):
        parse_table(tmp_path / "nope.csv", 0)


# =========================================================================== property tests


labels_st = st.lists(st.sampled_from(["a", "b", "c"]), min_size=0, max_size=20)
floats_st = st.floats(allow_nan=False, allow_infinity=False, width=64)


@st.composite
def tables(draw):
    d = draw(st.integers(1, 5))
    extra = draw(labels_st)
    y = ["a", "a", "b", "b"] + extra  # every class has at least two rows
    y = [c for c in y if y.count(c) >= 2]
    X = draw(
        st.lists(st.lists(floats_st, min_size=d, max_size=d), min_size=len(y), max_size=len(y))
    )
    return np.array(X, dtype=np.float64).reshape(len(y), d), np.array(y)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=tables(),
    fmt=st.sampled_from(["csv", "csv-header", "whitespace"]),
    crlf=st.booleans(),
    trailing=st.booleans(),
    final_newline=st.booleans(),
    label_first=st.booleans(),
)
def test_round_trip_random_tables(tmp_path, data, fmt, crlf, trailing, final_newline, label_first):
    X, y = data
    eol = "\r\n" if crlf else "\n"
    sep = "," if fmt.startswith("csv") else (" " if not trailing else " \t ")
    rows = []
    for xi, yi in zip(X, y):
        cells = [repr(float(v)) for v in xi]  # repr round-trips float64 exactly
        cells = [yi] + cells if label_first else cells + [yi]
        rows.append(sep.join(cells) + (" " if trailing else ""))
    d = X.shape[1]
    names = [f"f{j}" for j in range(d)]
    label_name = "label"
    if fmt == "csv-header":
        rows.insert(0, ",".join([label_name] + names if label_first else names + [label_name]))
    text = eol.join(rows) + (eol if final_newline else "")
    p = tmp_path / f"t-{fmt}.txt"
    p.write_bytes(text.encode())
    label = label_name if fmt == "csv-header" else (0 if label_first else -1)
    delim = "," if fmt.startswith("csv") else None
    got_X, got_y, got_names, prov = parse_table(p, label, delim, header="infer")
    np.testing.assert_array_equal(got_X, X)
    np.testing.assert_array_equal(got_y, y)
    assert got_names == sorted(set(y.tolist()))
    assert prov["files"][0]["sha256"] == hashlib.sha256(text.encode()).hexdigest()


# ============================================================================ ingest at scale
def _reference_parse(path, label_index=-1):
    """The line-by-line parse (the Python parser pandas replaced): float() of every cell."""
    from catdask.catalog.lines import iter_lines, split_cells

    X, y = [], []
    with open(path, "rb") as fh:
        for i, (_lineno, line) in enumerate(iter_lines(fh)):
            cells = split_cells(line, "csv", ",", None)
            if i == 0 or cells is None:  # header, blank lines
                continue
            label = cells.pop(label_index)
            X.append([float(c) for c in cells])
            y.append(int(label))
    return np.array(X, dtype=np.float64), np.array(y, dtype=np.int64)


@pytest.mark.parametrize("whole_read", [False, True], ids=["streamed", "whole-file"])
def test_chunked_parse_equals_line_parse_on_a_generated_file(tmp_path, monkeypatch, whole_read):
    """Many pandas chunks (a few hundred rows each) give exactly the line-by-line result,
    blank lines, CRLF, odd float spellings and a short last chunk included; so does the one
    whole-file read that small files get (pandas may split it over threads)."""
    from catdask.catalog import tables

    monkeypatch.setattr(tables, "CHUNK_ROWS", 300)
    # 0: stream, as a file over the limit does
    monkeypatch.setattr(tables, "WHOLE_READ_MAX_BYTES", 2**30 if whole_read else 0)
    rng = np.random.default_rng(3)
    n, d = 2_017, 6
    X = rng.standard_normal((n, d)) * 10.0 ** rng.integers(-8, 8, (n, d))
    y = rng.integers(-2, 4, n)
    spellings = [repr, lambda v: f"{v:.3e}", lambda v: f"{v:+.4f}", lambda v: f"{v:g}"]
    lines = [",".join([f"f{j}" for j in range(d)] + ["label"])]
    for i in range(n):
        cells = [spellings[(i + j) % 4](float(v)) for j, v in enumerate(X[i])]
        lines.append(",".join(cells + [str(y[i])]))
        if i % 500 == 7:
            lines.append("")
    path = write(tmp_path / "big.csv", "\r\n".join(lines) + "\r\n")
    want_X, want_y = _reference_parse(path)
    got_X, got_y, names, prov = parse_table(path, "label")
    np.testing.assert_array_equal(got_X, want_X)
    np.testing.assert_array_equal(got_y, want_y)
    assert got_X.dtype == np.float64 and got_y.dtype == np.int64
    assert got_X.flags.c_contiguous  # the store writes and hashes it in row blocks
    assert names == [str(c) for c in sorted(set(want_y.tolist()))]
    assert prov["files"][0]["rows"] == n


def test_bad_cell_deep_in_a_large_file_names_line_and_column(tmp_path, monkeypatch):
    from catdask.catalog import tables

    monkeypatch.setattr(tables, "CHUNK_ROWS", 100)
    monkeypatch.setattr(tables, "WHOLE_READ_MAX_BYTES", 0)
    rows = [f"{i}.5,{i}.25,{i % 3}" for i in range(1000)]
    rows[700] = "700.5,oops,1"
    path = write(tmp_path / "t.csv", "a,b,label\n" + "\n".join(rows) + "\n")
    with pytest.raises(ParseError, match=r"line 702: non-numeric value 'oops' in feature "
                       r"column 1 \('b'\)") as err:
        parse_table(path, "label")
    assert err.value.line == 702


@pytest.mark.parametrize("kind", ["dev_zero", "fifo", "folder"])
def test_non_regular_files_are_refused(tmp_path, kind):
    import os

    if kind == "dev_zero":
        path, what = Path("/dev/zero"), "a device"
        if not path.exists():
            pytest.skip("no /dev/zero")
    elif kind == "fifo":
        path, what = tmp_path / "pipe", "a FIFO"
        os.mkfifo(path)
    else:
        path, what = tmp_path, "a folder"
    with pytest.raises(ParseError, match=f"is {what}.*not a regular file"):
        parse_table(path, -1, ",")


def test_file_over_the_size_limit_is_refused(tmp_path, monkeypatch):
    from catdask.catalog import MAX_TABLE_BYTES_ENV

    path = write(tmp_path / "t.csv", "1,2,a\n3,4,a\n5,6,b\n7,8,b\n")
    monkeypatch.setenv(MAX_TABLE_BYTES_ENV, "10")
    with pytest.raises(ParseError, match=f"over the .* limit .*{MAX_TABLE_BYTES_ENV}"):
        parse_table(path, -1)


def test_table_too_large_for_memory_is_refused(tmp_path, monkeypatch):
    import psutil

    class Tiny:
        available = 16  # bytes: fewer than 5 rows x 2 features x 8

    monkeypatch.setattr(psutil, "virtual_memory", lambda: Tiny)
    path = write(tmp_path / "t.csv", "1,2,a\n3,4,a\n5,6,b\n7,8,b\n")
    with pytest.raises(ParseError, match="need .* GiB as float64, more than the .* available"):
        parse_table(path, -1)


# ============================================================================ labels
def test_labels_mixing_integers_and_text_across_files(tmp_path):
    """One file's labels are integers, the other's text: named, not silently stringified."""
    (tmp_path / "tinyset").mkdir()
    write(tmp_path / "tinyset" / "a.dat", "1 2 1\n3 4 1\n5 6 2\n7 8 2\n")
    write(tmp_path / "tinyset" / "b.dat", "1 2 x\n3 4 x\n")
    files = [
        {"name": n, "url": f"https://example.org/{n}", "sha256": None} for n in ("a.dat", "b.dat")
    ]
    with pytest.raises(ParseError, match=r"labels mix kinds: integers in .*a\.dat.* and text in "
                       r".*b\.dat.*label_type 'str'"):
        parse_dataset(entry(files=files), [tmp_path / "tinyset" / n for n in ("a.dat", "b.dat")])


def test_check_label_types_names_mixed_labels():
    from catdask.catalog import check_label_types

    with pytest.raises(ParseError, match=r"labels mix kinds \(number 1, text 'a'\)"):
        check_label_types(np.array([1, "a", 2], dtype=object))
    check_label_types(np.array(["a", "b"], dtype=object))
    check_label_types(np.array([1, 2]))


@pytest.mark.parametrize(
    "name, names",
    [("iris", ["setosa", "versicolor", "virginica"]), ("wine", ["class_0", "class_1", "class_2"])],
)
def test_sklearn_sets_carry_scikit_learns_class_names(name, names):
    _X, y, label_names, _prov = parse_dataset(name)
    assert label_names == names
    assert sorted(set(y.tolist())) == [0, 1, 2]


# ----------------------------------------------------------------------------- features only
def test_parse_features_reads_a_table_without_labels(tmp_path):
    """Tables to predict on: every column a feature unless a label column is named (then it
    is read as the labels, not a feature); one column is a table too; errors name the line."""
    from catdask.catalog import parse_features

    p = tmp_path / "new.csv"
    p.write_text("a,b,kind\n1.5,2,x\n3,4e1,y\n")
    X, y, names = parse_features(p, label_column="kind")
    np.testing.assert_array_equal(X, [[1.5, 2.0], [3.0, 40.0]])
    assert y.tolist() == ["x", "y"] and names == ["a", "b"]
    p.write_text("a,b,c\n1.5,2,3\n3,4e1,5\n")
    X, y, names = parse_features(p)
    assert X.shape == (2, 3) and y is None and names == ["a", "b", "c"]
    X, y, _ = parse_features(p, label_column=-1)
    assert X.shape == (2, 2) and y.tolist() == [3, 5]
    one = tmp_path / "one.txt"
    one.write_text("0.5\n1.5\n")
    X, y, names = parse_features(one)
    np.testing.assert_array_equal(X, [[0.5], [1.5]])
    assert y is None and names is None
    p.write_text("1,2,3\n4,,6\n")
    with pytest.raises(ParseError, match=r"line 2.*column 1"):
        parse_features(p)


# A spreadsheet user's exports (third new-user pass).
@pytest.mark.parametrize("content", [
    "a;b;label\n1.5;2;x\n3;4.25;x\n5;6;y\n7;8;y\n",     # semicolons (comma-decimal locales)
    "a\tb\tlabel\n1.5\t2\tx\n3\t4.25\tx\n5\t6\ty\n7\t8\ty\n",  # tabs
    "a b label\n1.5 2 x\n3 4.25 x\n5 6 y\n7 8 y\n",      # spaces
])
def test_a_csv_file_separated_otherwise_is_detected(tmp_path, content):
    """Was: a ".csv" was always split on commas: one column, and "label column 'label' not
    found in the header; columns are ['a;b;label']; did you mean 'a;b;label'?"."""
    X, y, _names, _provenance = parse_table(write(tmp_path / "t.csv", content), "label")
    np.testing.assert_array_equal(X, [[1.5, 2], [3, 4.25], [5, 6], [7, 8]])
    assert list(y) == ["x", "x", "y", "y"]


def test_a_decimal_comma_is_named(tmp_path):
    bad(tmp_path, "a;b;label\n1,5;2;x\n3;4;x\n5;6;y\n7;8;y\n",
        r"line 2: non-numeric value '1,5' in feature column 0 \('a'\); numbers need a decimal "
        r"point, not a decimal comma$", label="label", fname="d.csv")


def test_an_unnamed_first_column_suggests_the_pandas_index(tmp_path):
    bad(tmp_path, ",a,label\n0,1,x\n1,2,x\n2,3,y\n3,4,y\n",
        r"line 1: header column 0 has an empty name \(the index column pandas' to_csv writes\? "
        r"write the file with index=False, or name the column\)", label="label", fname="i.csv")


def test_a_header_read_as_one_column_names_the_delimiter(tmp_path):
    """Was: "label column 'kind' not found in the header; columns are ['a,b,kind']; did you
    mean 'a,b,kind'?" for a comma-separated file read with --delimiter ';'."""
    bad(tmp_path, "a,b,kind\n1,2,x\n3,4,x\n5,6,y\n7,8,y\n",
        r"columns are \['a,b,kind'\] \(one column: the file looks delimited by ','; check "
        r"--delimiter\)$", label="kind", delimiter=";", fname="c.csv")


def test_a_header_with_a_numeric_looking_name_is_a_header(tmp_path):
    """Was: the line 'a,b,1.0,label' taken for data ("non-numeric value 'a'"); a data row whose
    only text is its label stays data."""
    p = write(tmp_path / "h.csv", "a,b,1.0,label\n1,2,3,x\n4,5,6,x\n7,8,9,y\n1,1,1,y\n")
    X, _, _, prov = parse_table(p, "label")
    assert X.shape == (4, 3) and prov["feature_names"] == ["a", "b", "1.0"]
    p = write(tmp_path / "d.csv", "1,2,x\n4,5,x\n7,8,y\n1,1,y\n")
    X, _, names, _ = parse_table(p, -1)
    assert X.shape == (4, 2) and names == ["x", "y"]
