"""Linear CQS at high D against scikit-learn's LDA (issue 26, item 2).

    python benchmarks/bench_linear_highd.py            # N = 5,000, D = 784, K = 10
    python benchmarks/bench_linear_highd.py --quick    # N = 1,500, D = 784, K = 10

The data set: scikit-learn's digits (8 x 8, 1,797 images, 10 classes, offline) upsampled to
28 x 28 = 784 pixels by bilinear zoom (scipy.ndimage.zoom, factor 3.5), each copy shifted by a
random sub-pixel offset in [-1.5, 1.5]^2 and given Gaussian pixel noise (sd 0.05 on [0, 1]
intensities), drawn with replacement to N rows (seed 0): an image-like, full-rank set.

Goals printed (not asserted): fit (certificate excluded) <= 3x LDA (``solver="lsqr",
shrinkage="auto"``) in the same run; the certificate <= the fit's time; certified or a rigorous
gap <= 1e-3. Fits are interleaved with LDA, medians of 3; the load average is printed.
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np
from _common import load_average, parse_args, quiet_warnings, report


def digits784(n_samples, seed=0):
    """The image set of the module docstring: (X (N, 784), y (N,))."""
    from scipy.ndimage import shift, zoom
    from sklearn.datasets import load_digits

    X8, y8 = load_digits(return_X_y=True)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(y8), n_samples)
    out = np.empty((n_samples, 28, 28))
    for i, image in enumerate(X8[idx].reshape(-1, 8, 8) / 16.0):
        dy, dx = rng.uniform(-1.5, 1.5, 2)
        out[i] = shift(zoom(image, 3.5, order=1), (dy, dx), order=1, mode="constant")
    out += 0.05 * rng.standard_normal(out.shape)
    return out.reshape(n_samples, 784), y8[idx]


def main():
    args = parse_args(__doc__.splitlines()[0])
    quiet_warnings()
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    from catdask import CategorySpace
    from catdask.certificate import certify_global_optimum

    n = 1500 if args.quick else 5000
    repeats = 1 if args.quick else 3
    X, y = digits784(n)
    load_start = load_average()
    lda_times, fit_times, cert_times = [], [], []
    cert = model = None
    for _ in range(repeats):  # interleaved: LDA, then CQS, then its certificate
        t = time.perf_counter()
        LinearDiscriminantAnalysis(solver="lsqr", shrinkage="auto").fit(X, y)
        lda_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        model = CategorySpace(certify=False, random_state=0).fit(X, y)
        fit_times.append(time.perf_counter() - t)
        # The certificate the estimator runs, on the same class matrices.
        Xc = X - model.mean_
        R = np.stack([Xc[y == k].T @ Xc[y == k] for k in model.classes_])
        t = time.perf_counter()
        cert = certify_global_optimum(R, model.components_.T)
        cert_times.append(time.perf_counter() - t)
    lda, fit, crt = (statistics.median(v) for v in (lda_times, fit_times, cert_times))
    gap = 0.0 if cert.certified else cert.gap
    results = {
        "data": f"digits upsampled to 28x28 with shifts and noise: N = {n}, D = 784, K = 10",
        "threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
        "load_average_start": load_start,
        "lda_seconds": round(lda, 3),
        "fit_seconds": round(fit, 3),
        "fit_over_lda": round(fit / lda, 2),
        "certificate_seconds": round(crt, 3),
        "certificate_over_fit": round(crt / fit, 2),
        "certified": bool(cert.certified),
        "gap": float(gap),
        "bound_method": cert.bound_method,
        "reason": cert.reason,
        "goals": {
            "fit <= 3x LDA": fit <= 3 * lda,
            "certificate <= fit": crt <= fit,
            "certified or gap <= 1e-3": bool(cert.certified or gap <= 1e-3),
        },
        "objective": float(model.objective_),
        "iterations": int(model.n_iter_),
    }
    report("bench_linear_highd", results, args)


if __name__ == "__main__":
    main()
