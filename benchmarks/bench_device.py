"""Issue 27's goals on a machine with one GPU and many cores, in one run.

    python benchmarks/bench_device.py [--quick] [--parts env,agree,passes,large,gpu,dask_gpu,cores]
                                      [--budget SECONDS] [--json PATH]

Parts (each prints its figures as it ends, and the JSON is rewritten after each):

- ``agree``: the GPU operator (fused Triton kernel) against the numpy operator at N = 20,000,
  every product, both precisions; then tests/operators/test_torch_gram.py under pytest.
- ``passes``: one ``G Z`` pass (K = 5 classes, R = 5 restarts) at N = 50,000 / 200,000 /
  1,000,000 in float32 and float64, the unfused PyTorch tiles and the float32 product variants
  at 200,000 as baselines in the same run, peak GPU memory.
- ``gpu``: KernelCategorySpace(device="cuda") to convergence at N = 50,000 (beside the same
  fit with precision="float64" from the same starts) and 200,000; the objective checked against
  an independent float64 evaluation of the model's coordinates.
- ``dask_gpu``: the same N = 50,000 fit on a Dask cluster of one GPU worker.
- ``cores``: one float32 ``G Z`` pass at N = 50,000 on 2 and 16 single-thread workers and on
  the embedded default's shape (8 x 2 on 16 cores), with the default tile (384) and the
  previous one (512) interleaved in one cluster, median of 3; the task stream's busy share;
  what each pass costs outside the tile arithmetic (benchmarks/pass_overhead.py's figures:
  driver CPU per pass, tasks, bytes to the driver, the tail after the last task, the
  straggler share);
  peak RSS of driver + workers; the N = 200,000 fit to convergence on the default shape
  (polish share).
- ``pipeline``: ``fit_on_dataset`` (what ``catdask train --device`` runs) on a zarr data set
  at N = 10,000, in this process and on one GPU worker, objectives compared.
- ``large``: the N = 1,000,000 fit on the GPU, to convergence (certify=False: the certificate's
  cost at that size is issue 26's).
- ``setup`` (not in the default list): ``benchmarks/bench_setup.py`` at N = 200,000 on the
  embedded default's shape, one round: the fit's set-up pieces (float64 centring pass,
  decoupled start, one float32 pass) and set-up phase, the previous code against the current
  one (about 4 minutes on the 16-core host).

Everything is D = 20, K = 5, RBF with the default gamma, blobs from benchmarks/_common.py.
``--quick`` runs every part at toy sizes on the CPU (PyTorch's CPU build stands in for the GPU;
the fused kernel is then not used): the smoke run of run_all.py. Parts whose time would exceed
``--budget`` are skipped and listed.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (PeakRSS, blobs, class_sorted_blobs, default_rbf,  # noqa: E402
                     load_average, local_cluster, parse_args, quiet_warnings, report)

D, K, R = 20, 5, 5
GiB = 1024**3
ROOT = Path(__file__).resolve().parents[1]
RESULTS: dict = {}
#: GPU workers import PyTorch and start CUDA as they start (deploy/gpu-cluster.md).
GPU_WORKER_PRELOAD = "catdask.operators.dask_torch_gram"


def _options(ap):
    ap.add_argument("--parts", default="env,agree,passes,large,gpu,dask_gpu,cores")
    ap.add_argument("--budget", type=float, default=480.0, help="seconds for all parts")
    ap.add_argument("--large-n", type=int, default=1_000_000)
    ap.add_argument("--cores-fit-only", action="store_true",
                    help="part cores: only the fit to convergence, not the per-shape passes "
                         "(benchmarks/cores_ceiling.py times the passes)")
    ap.add_argument("--cores-shapes", default="2x1,allx1,default",
                    help="part cores: the cluster shapes WORKERSxTHREADS whose pass is timed "
                         "('all' = this machine's cores, 'default' = the embedded default's "
                         "shape); 2x1 is the reference of the speed-ups")
    ap.add_argument("--cores-fit-shape", default="default",
                    help="part cores: the shape of the N = 200,000 fit: 'default' (the embedded "
                         "default's), 'fastest' (the shape whose default-tile pass was fastest "
                         "above) or WORKERSxTHREADS")


def _say(*a):
    print(*a, flush=True)


def _sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _device():
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _classes(y):
    from catdask.core.classes import ClassIndex

    return ClassIndex(y, K)


def _kernel():
    return default_rbf(D)


def _sorted_blobs(N, seed=0):
    return class_sorted_blobs(N, D, K, seed=seed)


# ------------------------------------------------------------------------------ parts
def part_env(args):
    import torch

    info = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "cpus": os.cpu_count(), "load": load_average(),
            "python": platform.python_version(), "torch": torch.__version__,
            "numpy": np.__version__}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=torch.cuda.get_device_name(0), gpu_memory_GiB=round(p.total_memory / GiB, 1))
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    return info


def part_agree(args):
    from catdask.operators import NumpyGramOperator, TorchGramOperator

    N = 2_000 if args.quick else 20_000
    X, y = _sorted_blobs(N)
    classes, kernel = _classes(y), _kernel()
    ref = NumpyGramOperator(X, classes, kernel, max_gram_bytes=0)
    op = TorchGramOperator(X, classes, kernel, device=_device())
    rng = np.random.default_rng(1)
    z, V = rng.normal(size=(R, N)), rng.normal(size=(N, 3))
    out = {"N": N, "fused": op.fused}

    def rel(a, b):
        return float(np.abs(a - b).max() / np.abs(b).max())

    B64 = ref.class_matmul(z)
    for precision in ("float64", "float32"):
        op.set_precision(precision)
        out[f"G Z {precision} rel err"] = rel(op.class_matmul(z), B64)
        out[f"class blocks {precision} rel err"] = rel(op.class_block_matmul(V),
                                                       ref.class_block_matmul(V))
    op.set_precision("float64")
    out["G V float64 rel err"] = rel(op.matmul(V), ref.matmul(V))
    out["moments rel err"] = rel(np.array(op.covariance_moments()),
                                 np.array(ref.covariance_moments()))
    op.close()
    if args.quick:  # the test suite runs the test file itself
        return out
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(ROOT), os.environ.get("PYTHONPATH", "")]))}
    t0 = time.perf_counter()
    # On a GPU: the tests that run there (the CPU ones ran in CI); on the CPU: all of them.
    select = ["-k", "cuda or on_the_gpu or dask_gpu"] if _device() == "cuda" else []
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/operators/test_torch_gram.py", *select], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    tail = (done.stdout + done.stderr).strip().splitlines()
    out["pytest tests/operators/test_torch_gram.py"] = tail[-1] if tail else done.returncode
    out["pytest seconds"] = round(time.perf_counter() - t0, 1)
    if done.returncode:
        _say("\n".join(tail[-40:]))
    return out


def _time_pass(op, z, repeats):
    times = []
    for _ in range(repeats):
        _sync()
        t0 = time.perf_counter()
        B = op.class_matmul(z)
        _sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), B


def part_passes(args):
    import torch

    from catdask.operators import TorchGramOperator, fused_rbf

    dev = _device()
    sizes = [2_000, 8_000] if args.quick else [50_000, 200_000, args.large_n]
    out = {}
    for N in sizes:
        X, y = _sorted_blobs(N)
        z = np.random.default_rng(2).normal(size=(R, N))
        if dev == "cuda":
            torch.cuda.reset_peak_memory_stats()
        op = TorchGramOperator(X, _classes(y), _kernel(), device=dev, precision="float32")
        if N == sizes[0]:
            _time_pass(op, z, 1)  # compile / warm up
        reps = 3 if N <= 200_000 else 1
        t32, B32 = _time_pass(op, z, reps)
        op.set_precision("float64")
        t64, B64 = _time_pass(op, z, 1)
        row = {"float32 pass s": round(t32, 3), "float64 pass s": round(t64, 3),
               "float32 rel err vs float64": float(np.abs(B32 - B64).max() / np.abs(B64).max()),
               "entries/s float32": f"{N * N / t32:.3g}", "fused": op.fused}
        if dev == "cuda":
            row["peak GPU GiB"] = round(torch.cuda.max_memory_allocated() / GiB, 2)
        if N == sizes[1] and op.fused:
            op.set_precision("float32")
            for dot in ("ieee", "tf32x3"):
                saved = fused_rbf.FLOAT32_DOT
                fused_rbf.FLOAT32_DOT = dot
                try:
                    _time_pass(op, z, 1)
                    row[f"float32 pass s, dot={dot}"] = round(_time_pass(op, z, 3)[0], 3)
                finally:
                    fused_rbf.FLOAT32_DOT = saved
            for tune in ({"block_m": 128, "block_n": 64, "num_warps": 4},
                         {"block_m": 128, "block_n": 64, "num_warps": 8},
                         {"block_m": 64, "block_n": 128, "num_warps": 4}):
                saved = dict(fused_rbf.TUNING)
                fused_rbf.TUNING.update(tune)
                try:
                    _time_pass(op, z, 1)
                    row[f"float32 pass s, {tune}"] = round(_time_pass(op, z, 3)[0], 3)
                except Exception as exc:  # noqa: BLE001 - a configuration that fails here
                    row[f"float32 pass s, {tune}"] = f"{type(exc).__name__}: {exc}"[:120]
                finally:
                    fused_rbf.TUNING.clear()
                    fused_rbf.TUNING.update(saved)
        if N == sizes[1]:
            plain = TorchGramOperator(X, _classes(y), _kernel(), device=dev, precision="float32",
                                      fused=False)
            row["baseline: unfused PyTorch tiles float32 pass s"] = round(
                _time_pass(plain, z, 1)[0], 3)
            plain.close()
        op.close()
        out[f"N={N}"] = row
        _say(f"  passes N={N}: {row}")
    return out


def _objective_check(model, X, y, dev):
    """The CQS objective from an independent float64 evaluation of the training coordinates
    (``A k(X_fit, X)`` by the device operator's float64 ``G V``, minus the offset), against the
    fit's ``objective_``: ``1/2 sum_i p_{y_i}(x_i)^2``."""
    from catdask.operators import TorchGramOperator

    order = np.argsort(y, kind="stable")
    op = TorchGramOperator(X[order], _classes(y[order]), model.kernel_, device=dev)
    coords = op.matmul(model.dual_coef_[:, order].T) - model.projection_offset_
    op.close()
    own = coords[np.arange(len(y)), model.classes_.searchsorted(y[order])]
    value = 0.5 * float(own @ own)
    return value, abs(value - model.objective_) / abs(model.objective_)


def _gpu_fit(X, y, **params):
    import torch

    from catdask import KernelCategorySpace

    dev = _device()
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    model = KernelCategorySpace(random_state=0, certify=False, device=dev, **params).fit(X, y)
    wall = time.perf_counter() - t0
    row = {"wall s": round(wall, 1), "objective": model.objective_,
           "n_iter": int(model.n_iter_), "n_iter_float32": int(model.n_iter_float32_),
           "converged": bool(model.converged_),
           "phases s": {k: round(v, 1) for k, v in model.fit_seconds_.items()},
           "polish share": round(model.fit_seconds_.get("polish", 0.0) / wall, 3)}
    if dev == "cuda":
        row["peak GPU GiB"] = round(torch.cuda.max_memory_allocated() / GiB, 2)
    return model, row


def part_gpu(args):
    out = {}
    sizes = [3_000] if args.quick else [50_000, 200_000]
    for N in sizes:
        X, y = blobs(N, D, K, seed=0)
        model, row = _gpu_fit(X, y)
        row["independent float64 objective, rel diff"] = _objective_check(
            model, X, y, _device())[1]
        if N == sizes[0]:
            ref, ref_row = _gpu_fit(X, y, precision="float64")
            row["float64-throughout fit (same starts): wall s"] = ref_row["wall s"]
            row["objective rel diff vs float64-throughout fit"] = abs(
                model.objective_ - ref.objective_) / abs(ref.objective_)
        out[f"N={N}"] = row
        _say(f"  gpu fit N={N}: {row}")
    return out


def part_dask_gpu(args):
    import dask.array as da
    import distributed

    from catdask import KernelCategorySpace

    N = 3_000 if args.quick else 50_000
    X, y = blobs(N, D, K, seed=0)
    t0 = time.perf_counter()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, resources={"GPU": 1},
                                  preload=[GPU_WORKER_PRELOAD], dashboard_address=None,
                                  host="127.0.0.1") as cluster, \
            distributed.Client(cluster):
        start = time.perf_counter() - t0
        t1 = time.perf_counter()
        model = KernelCategorySpace(random_state=0, certify=False, device=_device()).fit(
            da.from_array(X, chunks=(10_000, -1)), y)
        wall = time.perf_counter() - t1
    return {"N": N, "cluster start s": round(start, 1), "fit wall s": round(wall, 1),
            "objective": model.objective_, "n_iter": int(model.n_iter_),
            "phases s": {k: round(v, 1) for k, v in model.fit_seconds_.items()}}


#: The tile rows before GRAM_TILE became 384: the baseline of the tile comparison.
PREVIOUS_TILE = 512


#: The figures of benchmarks/pass_overhead.py that part ``cores`` prints for each pass shape:
#: where a 16-worker pass loses against an even split of its compute.
PASS_FIGURES = ("driver CPU s", "driver CPU net of idle s", "driver main-thread CPU s",
                "driver add s", "tasks", "results to driver MB", "submitted to first task start s",
                "last task end to result s", "loss vs even split s",
                "straggler share (max worker busy / mean)", "task max / median")


def _cores_iteration(X, y, n_workers, threads, rounds=3):
    """One float32 ``G Z`` pass on a fresh cluster with the default tile (``GRAM_TILE``) and
    the previous one (512), interleaved round by round: median seconds, the workers' busy
    share and :data:`PASS_FIGURES` (medians) for each; the default tile's pass with empty tasks
    (``pass_overhead.empty_tasks``: results of their real shape, and of no rows); the
    driver's and a worker's idle CPU;
    the operators' set-up; the peak RSS of this process, the workers and their nannies
    (sampled: ``ru_maxrss`` of a spawned worker reports its parent's peak, since Linux keeps
    it across exec)."""
    from pass_overhead import EMPTY_FIGURES, PassProbe, empty_tasks, idle_rates, measure_pass

    from catdask.operators import DaskGramOperator
    from catdask.operators.gram_base import GRAM_TILE

    tiles = {f"tile {GRAM_TILE} (default)": GRAM_TILE,
             f"tile {PREVIOUS_TILE} (previous default)": PREVIOUS_TILE}
    with PeakRSS() as mem:
        t0 = time.perf_counter()
        cluster, client = local_cluster(n_workers, threads_per_worker=threads)
        try:
            ops = {name: DaskGramOperator(X, _classes(y), _kernel(), cache="recompute",
                                          precision="float32", tile_rows=t)
                   for name, t in tiles.items()}
            setup = (time.perf_counter() - t0) / len(ops)
            probes = {name: PassProbe(op) for name, op in ops.items()}
            z = np.random.default_rng(2).normal(size=(R, X.shape[0]))
            passes: dict = {name: [] for name in ops}
            for op in ops.values():
                op.class_matmul(z)  # warm-up
            idle = idle_rates(client)
            for _ in range(rounds):
                for name, op in ops.items():
                    passes[name].append(measure_pass(op, z, client, n_workers * threads,
                                                     probes[name], idle))
            # The default tile's pass with empty tasks (results of their real shape, then of
            # no rows, at once): the driver's, scheduler's and comms' fixed cost on this host.
            default = next(iter(ops))
            empty: dict = {}
            for kind in ("real shapes", "none"):
                with empty_tasks(kind):
                    ops[default].class_matmul(z)  # warm-up
                    empty[kind] = [measure_pass(ops[default], z, client, n_workers * threads,
                                                probes[default], idle) for _ in range(rounds)]
            for op in ops.values():
                op.close()
        finally:
            client.close()
            cluster.close()
    others = [v for (pid, name), v in mem.peaks.items() if name != "driver"]

    def med(name, key):
        return statistics.median(p[key] for p in passes[name])

    out: dict = {}
    for name in ops:
        out[name] = {"iteration s (median)": round(med(name, "wall s"), 3),
                     "busy share": round(statistics.median(
                         p["compute summed s"] / (p["wall s"] * n_workers * threads)
                         for p in passes[name]), 3)}
        out[name].update({k: round(med(name, k), 4) for k in PASS_FIGURES})
    for kind, rows in empty.items():
        out[f"{default}, empty tasks, results: {kind}"] = {
            k: round(statistics.median(p[k] for p in rows), 4) for k in EMPTY_FIGURES}
    out.update({k: round(v, 4) for k, v in idle.items()})
    out.update({"set-up s": round(setup, 1),
                "peak RSS driver+workers+nannies GiB": round(mem.peak / GiB, 2),
                "largest worker/nanny process GiB": round(max(others, default=0) / GiB, 3)})
    return out


def _gram_tile():
    from catdask.operators.gram_base import GRAM_TILE

    return GRAM_TILE


def part_cores(args):
    """One float32 pass per cluster shape and tile size (2 single-thread workers the
    reference), then the fit to convergence on the embedded default's shape."""
    import dask.array as da

    from catdask import KernelCategorySpace
    from catdask.distributed.cluster import default_threads_per_worker

    N = 4_000 if args.quick else 50_000
    X, y = _sorted_blobs(N)
    cpus = os.cpu_count() or 2
    threads = default_threads_per_worker(cpus)
    default_shape = (max(1, cpus // threads), threads)

    def shape(text):
        if text == "default":
            return default_shape
        w, t = text.split("x")
        return (cpus if w == "all" else int(w), int(t))

    shapes = dict.fromkeys(shape(s) for s in args.cores_shapes.split(","))
    out: dict = {"N": N}
    if args.cores_fit_only:
        shapes = {}
    for n_workers, t in shapes:
        key = f"{n_workers} workers x {t} threads"
        out[key] = _cores_iteration(X, y, n_workers, t)
        _say(f"  cores {key}: {out[key]}")
    base = out.get("2 workers x 1 threads", {})
    for key, row in out.items() if base else ():
        if isinstance(row, dict) and key != "2 workers x 1 threads":
            for name, r in row.items():
                if isinstance(r, dict) and "iteration s (median)" in r:
                    r["speed-up vs 2 workers, same tile"] = round(
                        base[name]["iteration s (median)"] / r["iteration s (median)"], 2)
    fit_shape = default_shape
    if args.cores_fit_shape == "fastest" and shapes and not args.cores_fit_only:
        fit_shape = min(shapes, key=lambda wt: out[f"{wt[0]} workers x {wt[1]} threads"]
                        [f"tile {_gram_tile()} (default)"]["iteration s (median)"])
    elif args.cores_fit_shape not in ("default", "fastest"):
        fit_shape = shape(args.cores_fit_shape)
    for n in [N] if args.quick else [200_000]:  # N = 50,000: polish share measured before
        Xn, yn = blobs(n, D, K, seed=0)
        with PeakRSS() as mem:
            cluster, client = local_cluster(fit_shape[0], threads_per_worker=fit_shape[1])
            try:
                t0 = time.perf_counter()
                model = KernelCategorySpace(random_state=0, certify=False).fit(
                    da.from_array(Xn, chunks=(10_000, -1)), yn)
                wall = time.perf_counter() - t0
            finally:
                client.close()
                cluster.close()
        row = {"shape": f"{fit_shape[0]} workers x {fit_shape[1]} threads"
                        + (" (the embedded default)" if fit_shape == default_shape else ""),
               "peak RSS driver+workers+nannies GiB": round(mem.peak / GiB, 2),
               "wall s": round(wall, 1), "objective": model.objective_,
               "n_iter": int(model.n_iter_),
               "phases s": {k: round(v, 1) for k, v in model.fit_seconds_.items()},
               "polish share": round(model.fit_seconds_.get("polish", 0.0) / wall, 3)}
        out[f"fit to convergence N={n}"] = row
        _say(f"  cores fit N={n}: {row}")
    return out


def part_setup(args):
    """bench_setup.py in a fresh process on the embedded default's shape (its own cluster)."""
    import json
    import tempfile

    from catdask.distributed.cluster import default_threads_per_worker

    cpus = os.cpu_count() or 2
    threads = default_threads_per_worker(cpus)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "setup.json"
        cmd = [sys.executable, str(Path(__file__).with_name("bench_setup.py")), "--json",
               str(path), "--workers", str(max(1, cpus // threads)), "--threads", str(threads),
               "--rounds", "1"] + (["--quick"] if args.quick else ["--n", "200000"])
        subprocess.run(cmd, check=True, timeout=max(60, args.budget))
        out = json.loads(path.read_text())
    return {k: out[k] for k in ("tile", "cluster", "pieces", "fit set-up") if k in out}


def part_large(args, remaining):
    N = 3_000 if args.quick else args.large_n
    pass_s = RESULTS.get("passes", {}).get(f"N={N}", {})
    if "float32 pass s" in pass_s:
        # ~45 float32 iterations, ~8 float64 passes (moments, anchors, checks), set-up.
        projected = 45 * pass_s["float32 pass s"] + 8 * pass_s["float64 pass s"] + 30
        if projected > remaining:
            return {"skipped": f"projected {projected:.0f} s > the {remaining:.0f} s left",
                    "N": N}
    X, y = blobs(N, D, K, seed=0)
    model, row = _gpu_fit(X, y)
    value, rel = _objective_check(model, X, y, _device())
    row["independent float64 objective, rel diff"] = rel
    row["N"] = N
    return row


# Parts run in a process of their own, which has not imported PyTorch (the CPU user's driver).
SEPARATE = {"cores"}

def part_gpu_cert(args):
    """The default fit (certificate included) on the device at N = 50,000: what the
    certificate costs there (issue 26's kernel test on the GPU operator)."""
    N = 3_000 if args.quick else 50_000
    X, y = blobs(N, D, K, seed=0)
    from catdask import KernelCategorySpace

    t0 = time.perf_counter()
    model = KernelCategorySpace(random_state=0, device=_device()).fit(X, y)
    wall = time.perf_counter() - t0
    cert = model.certificate_
    return {"N": N, "wall s (fit + certificate)": round(wall, 1),
            "phases s": {k: round(v, 1) for k, v in model.fit_seconds_.items()},
            "certified": bool(cert.certified), "gap": cert.gap,
            "reason": str(getattr(cert, "reason", ""))[:200]}


def part_pipeline(args):
    """The training pipeline with a device (``catdask train --device``, the train flow): a
    data set written to a zarr store and fitted by ``fit_on_dataset`` in this process (the
    products on this device) and on a Dask cluster of one GPU worker (the products there),
    the same spec and starts; the two objectives compared."""
    import tempfile

    import distributed

    from catdask.pipeline import ModelSpec, fit_on_dataset
    from catdask.store import write_dataset

    N = 3_000 if args.quick else 10_000
    X, y = blobs(N, D, K, seed=1)
    out = {"N": N}
    with tempfile.TemporaryDirectory() as tmp:
        write_dataset(tmp, "blobs", X, y)
        spec = ModelSpec(method="kcqs", device=_device())  # the pipeline always certifies
        for where in ("this process", "one GPU worker"):
            t0 = time.perf_counter()
            if where == "this process":
                outcome = fit_on_dataset(tmp, "blobs", spec)
            else:
                with distributed.LocalCluster(n_workers=1, threads_per_worker=1,
                                              resources={"GPU": 1},
                                              preload=[GPU_WORKER_PRELOAD],
                                              dashboard_address=None,
                                              host="127.0.0.1") as cluster, \
                        distributed.Client(cluster) as client:
                    outcome = fit_on_dataset(tmp, "blobs", spec, client=client)
            est = outcome.estimator
            out[where] = {"placement": outcome.device_placement,
                          "wall s": round(time.perf_counter() - t0, 1),
                          "objective": float(est.objective_),
                          "certificate": str(est.certificate_)[:160]}
            outcome.release()
    a, b = (out[w]["objective"] for w in ("this process", "one GPU worker"))
    out["objective rel diff"] = abs(a - b) / abs(a)
    return out


PARTS = {"env": part_env, "agree": part_agree, "passes": part_passes, "gpu": part_gpu,
         "dask_gpu": part_dask_gpu, "cores": part_cores, "large": None,
         "gpu_cert": part_gpu_cert, "pipeline": part_pipeline, "setup": part_setup}


def _separately(name, args):
    """Run part ``name`` in a fresh process (same options) and return its results."""
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "part.json"
        cmd = [sys.executable, __file__, "--parts", name, "--json", str(path),
               "--budget", str(args.budget)] + (["--quick"] if args.quick else [])
        cmd += ["--cores-fit-only"] if args.cores_fit_only else []
        cmd += ["--cores-shapes", args.cores_shapes, "--cores-fit-shape", args.cores_fit_shape]
        subprocess.run(cmd, check=True, timeout=max(60, args.budget))
        return json.loads(path.read_text())[name]


def main():
    args = parse_args(__doc__, _options)
    quiet_warnings()
    t_start = time.perf_counter()
    skipped = []
    for name in args.parts.split(","):
        elapsed = time.perf_counter() - t_start
        if elapsed > args.budget:
            skipped.append(name)
            continue
        _say(f"== {name} (t = {elapsed:.0f} s, load {load_average()})")
        t0 = time.perf_counter()
        try:
            if name in SEPARATE and "torch" in sys.modules:
                RESULTS[name] = _separately(name, args)
            elif name == "large":
                RESULTS[name] = part_large(args, args.budget + 60 - elapsed)
            else:
                RESULTS[name] = PARTS[name](args)
        except Exception as exc:  # noqa: BLE001 - report and go on with the next part
            import traceback

            traceback.print_exc()
            RESULTS[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        RESULTS[name + " seconds"] = round(time.perf_counter() - t0, 1)
        _say(f"   {name}: {RESULTS[name]}")
        if args.json:  # what is measured so far survives a later time-out
            import json

            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(RESULTS, indent=2, default=str))
    RESULTS["skipped (budget)"] = skipped
    RESULTS["load at end"] = load_average()
    report("issue 27 on one GPU and many cores", RESULTS, args)


if __name__ == "__main__":
    main()
