"""Benchmark 4: the linear method at scale.

(a) In memory, N = 1e6, D = 50, K = 10 (float64): ``CategorySpace().fit`` (defaults: 5
    restarts; the certificate in the fit, ``certify_at="fit"``) on the numpy backend and on
    the Dask backend (the same array as a Dask array, 8 row chunks, 2 workers), against
    ``LinearDiscriminantAnalysis().fit``.
    CQS needs one pass over X (class scatter matrices); every iteration then runs on the
    driver in O(K D^2).
(b) Out of core: N = 2e7, D = 50, float32 in a zarr group (X chunked by rows, y codes, class
    labels in the attributes), written chunk by chunk; ``CategorySpace().fit(path, None)`` on a
    fresh 2-worker LocalCluster, with the peak summed RSS of driver + workers.

    python benchmarks/bench_linear.py [--quick]
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import GiB, PeakRSS, blob_params, blobs, local_cluster, parse_args, quiet_warnings, report

D, K = 50, 10


def in_memory(N):
    import dask.array as da
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    from catdask import CategorySpace

    X, y = blobs(N, D, K, seed=4)
    out = {"N": N}
    t0 = time.perf_counter()
    LinearDiscriminantAnalysis().fit(X, y)
    out["lda_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    est = CategorySpace(random_state=0, certify_at="fit").fit(X, y)
    out["catdask_numpy_s"] = time.perf_counter() - t0
    out["certified"] = bool(est.certificate_.certified)
    t0 = time.perf_counter()
    CategorySpace(random_state=0, certify=False).fit(X, y)
    out["catdask_numpy_nocert_s"] = time.perf_counter() - t0
    cluster, client = local_cluster(2)
    try:
        Xd = da.from_array(X, chunks=(N // 8, D))
        t0 = time.perf_counter()
        est_d = CategorySpace(random_state=0, certify_at="fit").fit(Xd, y)
        out["catdask_dask_s"] = time.perf_counter() - t0
        Xp = Xd.persist()
        from distributed import wait

        wait(Xp)
        t0 = time.perf_counter()
        CategorySpace(random_state=0, certify_at="fit").fit(Xp, y)
        out["catdask_dask_persisted_s"] = time.perf_counter() - t0
    finally:
        client.close()
        cluster.close()
    out["objective_rel_diff_numpy_dask"] = abs(est.objective_ - est_d.objective_) / abs(est.objective_)
    out["ratio_numpy_over_lda"] = out["catdask_numpy_s"] / out["lda_s"]
    out["ratio_dask_over_lda"] = out["catdask_dask_s"] / out["lda_s"]
    out["ratio_dask_persisted_over_lda"] = out["catdask_dask_persisted_s"] / out["lda_s"]
    return out


def write_zarr(path, N, chunk_rows):
    import zarr

    g = zarr.open_group(str(path), mode="w")
    Xa = g.create_array("X", shape=(N, D), chunks=(chunk_rows, D), dtype="float32")
    ya = g.create_array("y", shape=(N,), chunks=(chunk_rows,), dtype="int32")
    g.attrs["classes"] = [f"class-{k}" for k in range(K)]
    means, factors = blob_params(D, K, seed=4)
    for i, a in enumerate(range(0, N, chunk_rows)):
        b = min(a + chunk_rows, N)
        rng = np.random.default_rng(1000 + i)
        y = rng.integers(0, K, b - a).astype(np.int32)
        X = np.empty((b - a, D), dtype=np.float32)
        for k in range(K):
            idx = np.flatnonzero(y == k)
            X[idx] = rng.standard_normal((idx.size, D)) @ factors[k] + means[k]
        Xa[a:b] = X
        ya[a:b] = y


def out_of_core(N, chunk_rows):
    from catdask import CategorySpace

    tmp = Path(tempfile.mkdtemp(prefix="catdask-bench-"))
    path = tmp / "big.zarr"
    out = {"N": N, "D": D, "dtype": "float32", "chunk_rows": chunk_rows}
    try:
        t0 = time.perf_counter()
        write_zarr(path, N, chunk_rows)
        out["write_s"] = time.perf_counter() - t0
        out["bytes_on_disk_GB"] = round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e9, 2)
        cluster, client = local_cluster(2, memory_limit="4GiB")
        try:
            with PeakRSS() as mem:
                t0 = time.perf_counter()
                est = CategorySpace(random_state=0, certify_at="fit").fit(str(path), None)
                out["fit_s"] = time.perf_counter() - t0
        finally:
            client.close()
            cluster.close()
        out["peak_rss_total_GiB"] = round(mem.peak / GiB, 3)
        out["peak_rss_by_process_GiB"] = {str(k): round(v / GiB, 3) for k, v in mem.peaks.items()}
        out["rows_per_s"] = f"{N / out['fit_s']:.3g}"
        out["n_iter"], out["certified"] = est.n_iter_, bool(est.certificate_.certified)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main():
    args = parse_args(__doc__)
    quiet_warnings()
    results = {
        "in_memory": in_memory(100_000 if args.quick else 1_000_000),
        "out_of_core": out_of_core(2_000_000 if args.quick else 20_000_000, 200_000),
    }
    r = results["in_memory"]
    print(f"in memory N={r['N']}: LDA {r['lda_s']:.2f} s; catdask numpy {r['catdask_numpy_s']:.2f} s "
          f"({r['ratio_numpy_over_lda']:.2f}x), dask {r['catdask_dask_s']:.2f} s "
          f"({r['ratio_dask_over_lda']:.2f}x), dask on persisted X {r['catdask_dask_persisted_s']:.2f} s")
    r = results["out_of_core"]
    print(f"out of core N={r['N']}: fit {r['fit_s']:.1f} s, peak RSS {r['peak_rss_total_GiB']} GiB")
    report("linear method at scale", results, args)


if __name__ == "__main__":
    main()
