"""The Gram operator on a PyTorch device (a GPU, or the CPU): G recomputed, never stored.

Every product is a batch of range products ``G[I, J] V`` on class-sorted samples, run by the fused
Triton kernel (:mod:`.fused_rbf`) for RBF on a GPU, else by PyTorch tiles in the numpy operator's
precisions. Device memory: O(N (D + K R)) plus one tile of :data:`TILE_ENTRIES`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.classes import ClassIndex
from ..core.protocols import GramOperator
from . import fused_rbf
from .gram_base import GRAM_PRECISIONS

if TYPE_CHECKING:
    from ..kernels import Kernel

logger = logging.getLogger("catdask.operators")

# (precision, square) -> whether the fused kernel compiled and ran in this process.
_FUSED_VARIANTS: dict[tuple[str, bool], bool] = {}

#: Entries of one PyTorch tile (the unfused path): 2^26 float64 entries = 512 MiB.
TILE_ENTRIES = 1 << 26


def import_torch():
    """PyTorch, or an ImportError that says how to get it."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "device=... needs PyTorch: pip install 'catdask[gpu]' (or any torch build with "
            "your GPU's CUDA)."
        ) from exc
    return torch


def torch_device(device, *, here=True):
    """``device`` ("cuda", "cuda:1", "cpu", a torch.device) as a torch.device, checked.
    Raises a ValueError naming the problem when the device does not exist here (no CUDA build
    of PyTorch, no GPU, an index beyond the GPUs present). ``here=False`` checks only that
    PyTorch is installed and knows the form: for a device of other machines (the GPU workers
    of a Dask cluster, which compute on their own ``cuda``)."""
    torch = import_torch()
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={device!r} is not a device PyTorch knows ({exc}); use e.g. "
                         "'cuda', 'cuda:0' or 'cpu'.") from None
    if here and dev.type == "cuda":
        if not torch.cuda.is_available():
            if torch.version.cuda is None:  # a CPU-only build: installing it again is no fix
                raise ValueError(
                    f"device={device!r}: PyTorch sees no CUDA GPU here: torch "
                    f"{torch.__version__} is a build without CUDA; install a CUDA build "
                    "(pip install 'catdask[gpu]' in an environment without a CPU-only torch, "
                    "or the CUDA wheel from pytorch.org), or use device='cpu' or None.")
            raise ValueError(f"device={device!r}: PyTorch sees no CUDA GPU here (torch "
                             f"{torch.__version__}, CUDA {torch.version.cuda}): check the "
                             "NVIDIA driver (nvidia-smi) and CUDA_VISIBLE_DEVICES, or use "
                             "device='cpu' or None.")
        index = dev.index or 0
        if index >= torch.cuda.device_count():
            raise ValueError(f"device={device!r}: only {torch.cuda.device_count()} CUDA "
                             "device(s) here.")
    elif here and dev.type != "cpu":
        # "mps", "xpu", "meta" on a build without them passed a type check and the fit failed
        # later (RuntimeError, AssertionError): one tiny tensor there says whether PyTorch
        # can use it here.
        try:
            if dev.type == "meta":
                raise RuntimeError("a meta tensor holds no data")
            torch.empty(1, device=dev)
        except Exception as exc:  # noqa: BLE001 - PyTorch raises several kinds here
            # its first sentence: PyTorch's MPS message runs to 60 lines
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0].split(". ")[0]
            raise ValueError(f"device={device!r}: PyTorch cannot use it here ({reason[:200]}); "
                             "use e.g. 'cuda', 'cuda:0' or 'cpu'.") from None
    return dev


class TorchGramOperator(GramOperator):
    """Gram products on a PyTorch ``device`` (range products on class-sorted samples), for X (N, D) in the order
    of ``classes`` and a built-in ``kernel``. ``precision`` is that of ``G Z`` and the class-block
    products (:meth:`set_precision`); ``fused`` ("auto": where it runs, a CUDA device with Triton)
    uses the fused RBF kernel. ``gram_passes`` counts full passes over G (``G Z``, ``G V``, the two
    moment passes).
    """

    matvec_without_class_block = True
    uses_tiles = True
    gram_passes = 0
    precision = "float64"

    def __init__(self, X: np.ndarray, classes: ClassIndex, kernel: Kernel, *, device="cuda",
                 precision: str = "float64", fused: Any = "auto"):
        if not kernel.builtin:
            raise ValueError(f"device=... needs a built-in kernel (rbf, linear, poly); got "
                             f"{kernel.name}: use device=None for a callable kernel.")
        torch = import_torch()
        self._torch = torch
        self.device = torch_device(device)
        self.kernel = kernel
        self.classes = classes
        X = np.ascontiguousarray(X, dtype=np.float64)
        self.n_samples = X.shape[0]
        self._Xs = classes.sort_rows(X)
        self._offsets = tuple(int(o) for o in classes.offsets)
        can_fuse = kernel.metric == "rbf" and fused_rbf.fused_available(self.device)
        if fused is True and not can_fuse:
            raise ValueError("fused=True needs the RBF kernel and Triton on a CUDA device.")
        self.fused = can_fuse if fused == "auto" else bool(fused)
        self._factors: dict[str, tuple[Any, Any]] = {}
        self._moments: tuple[np.ndarray, float] | None = None
        self.gram_passes = 0
        self.set_precision(precision)

    # ------------------------------------------------------------------ set-up
    def set_precision(self, precision: str) -> None:
        """Evaluate ``G Z`` and the class-block products in ``"float32"`` or ``"float64"``;
        every other product is float64 (as :class:`~catdask.operators.NumpyGramOperator`)."""
        if precision not in GRAM_PRECISIONS:
            raise ValueError(f"precision must be one of {GRAM_PRECISIONS}; got {precision!r}.")
        self.precision = precision

    def _dtype(self, precision):
        return self._torch.float64 if precision == "float64" else self._torch.float32

    def _tile_factors(self, precision):
        """``(left, right)`` on the device, zero-padded to a power of two >= 16 columns (the
        fused kernel's block width; the padding adds zeros to the exponent)."""
        if precision not in self._factors:
            left, right = self.kernel.tile_factors(self._Xs, precision)
            width = fused_rbf.padded_width(left.shape[1])
            pad = ((0, 0), (0, width - left.shape[1]))
            self._factors[precision] = tuple(
                self._torch.from_numpy(np.ascontiguousarray(np.pad(f, pad))).to(self.device)
                for f in (left, right))
        return self._factors[precision]

    def _to_device(self, a, precision):
        return self._torch.from_numpy(np.ascontiguousarray(a)).to(
            device=self.device, dtype=self._dtype(precision))

    # ------------------------------------------------------------------ the primitive
    def _range_product(self, rows, cols, V, precision, *, square=False):
        """``G[rows, cols] @ V`` (sorted positions; V a device tensor (n_cols, q) in the
        precision's dtype) as a float64 device tensor (n_rows, q); ``square``: ``G**2``."""
        torch = self._torch
        (a, b), (c, d) = rows, cols
        left, right = self._tile_factors(precision)
        out = torch.zeros((b - a, V.shape[1]), dtype=torch.float64, device=self.device)
        if b <= a or d <= c:
            return out
        if self.fused and self._fused_works(precision, square):
            for j in range(0, V.shape[1], fused_rbf.MAX_V_COLUMNS):
                part = fused_rbf.rbf_matmul(left[a:b], right[c:d],
                                            V[:, j : j + fused_rbf.MAX_V_COLUMNS], square=square)
                out[:, j : j + part.shape[1]] = part
            return out
        step_c = max(1, min(d - c, TILE_ENTRIES // max(1, min(b - a, 4096))))
        step_r = max(1, TILE_ENTRIES // step_c)
        for r0 in range(a, b, step_r):
            r1 = min(r0 + step_r, b)
            for c0 in range(c, d, step_c):
                c1 = min(c0 + step_c, d)
                T = left[r0:r1] @ right[c0:c1].T
                self._finish(T)
                if square:
                    T.square_()
                out[r0 - a : r1 - a] += (T @ V[c0 - c : c1 - c]).to(torch.float64)
        return out

    def _fused_works(self, precision, square):
        """True once the fused kernel of this variant has compiled and run (a tiny launch the
        first time); False, with a warning, where this GPU / Triton cannot compile it: the
        products then use PyTorch tiles (same results, slower)."""
        variant = (precision, square)
        if variant not in _FUSED_VARIANTS:
            dtype = self._dtype(precision)
            probe = self._torch.zeros((16, 16), dtype=dtype, device=self.device)
            try:
                fused_rbf.rbf_matmul(probe, probe, probe, square=square)
                _FUSED_VARIANTS[variant] = True
            except Exception as exc:  # noqa: BLE001 - any compiler failure means: not here
                logger.warning("the fused Gram kernel (%s%s) does not run here (%s: %s); "
                               "using PyTorch tiles", precision, ", squared" if square else "",
                               type(exc).__name__, exc)
                _FUSED_VARIANTS[variant] = False
        return _FUSED_VARIANTS[variant]

    def _finish(self, T):
        """The kernel's elementwise finish of a tile, in place (``Kernel.finish_tile``)."""
        if self.kernel.metric == "rbf":
            T.clamp_(max=0.0).exp_()
        elif self.kernel.metric == "poly":
            T.pow_(self.kernel.params["degree"])
        return T

    def _products(self, requests, V, precision, v_offset=0):
        """One batch of range products with one V: for each ``(rows, cols, square)``,
        ``G[rows, cols] @ V[cols - v_offset]`` (``G**2`` when ``square``) as a float64 tensor
        (n_rows, q); ``V`` is a host array. A subclass may run a batch elsewhere in one round trip.
        """
        Vd = self._to_device(V, precision)
        return [self._range_product(rows, (c, d), Vd[c - v_offset : d - v_offset], precision,
                                    square=square)
                for rows, (c, d), square in requests]

    # ------------------------------------------------------------------ the products
    def class_matmul(self, z: np.ndarray) -> np.ndarray:
        """``B[r] = G Z_r``: (R, N) -> (R, N, K), one range product per class."""
        self.gram_passes += 1
        zs = self.classes.sort(np.asarray(z, dtype=np.float64))  # (R, N) sorted
        R, N = zs.shape
        K = len(self._offsets) - 1
        out = self._torch.zeros((K, N, R), dtype=self._torch.float64, device=self.device)
        filled = [k for k in range(K) if self._offsets[k + 1] > self._offsets[k]]
        parts = self._products([((0, N), self._class_range(k), False) for k in filled], zs.T,
                               self.precision)
        for k, part in zip(filled, parts):
            out[k] = part
        B = out.permute(2, 1, 0).cpu().numpy()  # (R, N, K) sorted
        return self.classes.unsort(B, 1)

    def matmul(self, V: np.ndarray) -> np.ndarray:
        """``G V`` for a dense (N, m) V, float64 (``G 1`` from the moments)."""
        V = np.asarray(V, dtype=np.float64)
        if V.shape[1] == 1 and np.all(V == 1.0):
            return self._gram_moments()[0][:, None].copy()
        self.gram_passes += 1
        N = self.n_samples
        (out,) = self._products([((0, N), (0, N), False)], self.classes.sort_rows(V), "float64")
        return self.classes.unsort(out.cpu().numpy(), 0)

    def _gram_moments(self):
        """``(G 1, ||G||_F^2)`` from two float64 products with ones, one batch (cached)."""
        if self._moments is None:
            N = self.n_samples
            whole = ((0, N), (0, N))
            sums, squares = self._products([(*whole, False), (*whole, True)], np.ones((N, 1)),
                                           "float64")
            self.gram_passes += 2
            self._moments = (self.classes.unsort(sums[:, 0].cpu().numpy(), 0),
                             float(squares.sum()))
        return self._moments

    def _class_range(self, k):
        return self._offsets[k], self._offsets[k + 1]

    def class_gram(self, k: int) -> np.ndarray:
        """The dense class block ``G[C_k, C_k]`` (float64, in the class's sorted order)."""
        a, b = self._class_range(k)
        left, right = self._tile_factors("float64")
        return self._finish(left[a:b] @ right[a:b].T).cpu().numpy()

    def class_matvec(self, k: int, V: np.ndarray) -> np.ndarray:
        """``G[C_k, C_k] @ V`` in float64, V of shape (n_k,) or (n_k, m)."""
        ck = self._class_range(k)
        V = np.asarray(V, dtype=np.float64)
        (out,) = self._products([(ck, ck, False)], V.reshape(ck[1] - ck[0], -1), "float64",
                                v_offset=ck[0])
        return out.cpu().numpy().reshape(V.shape)

    def class_block_matmul(self, V: np.ndarray) -> np.ndarray:
        """``diag(G_11, ..., G_KK) V`` for V (N, m), in :attr:`precision` (the decoupled
        start's Lanczos, :func:`catdask.core.class_eigen.class_block_top_eigenpairs`): the K
        class-diagonal products, one batch (one round trip on Dask workers)."""
        Vs = self.classes.sort_rows(np.asarray(V, dtype=np.float64))
        out = np.zeros_like(Vs)
        ranges = [ck for ck in map(self._class_range, range(len(self._offsets) - 1))
                  if ck[1] > ck[0]]
        parts = self._products([(ck, ck, False) for ck in ranges], Vs, self.precision)
        for (a, b), part in zip(ranges, parts):
            out[a:b] = part.cpu().numpy()
        return self.classes.unsort(out, 0)

    def diagonal(self) -> np.ndarray:
        """The diagonal of G (N,), without a pass."""
        return self.kernel.diagonal(self.classes.unsort(self._Xs, 0))

    def columns(self, idx: np.ndarray) -> np.ndarray:
        """``G[:, idx]`` (N, len(idx)) in float64, caller's order; computed on the device."""
        idx = np.asarray(idx)
        pos = idx if self.classes.order is None else np.argsort(self.classes.order)[idx]
        left, right = self._tile_factors("float64")
        cols = right[self._torch.from_numpy(pos).to(self.device)]
        out = np.empty((self.n_samples, len(idx)))
        step = max(1, TILE_ENTRIES // max(1, len(idx)))
        for a in range(0, self.n_samples, step):
            out[a : a + step] = self._finish(left[a : a + step] @ cols.T).cpu().numpy()
        return self.classes.unsort(out, 0)

    def covariance_moments(self) -> tuple[float, float]:
        N = self.n_samples
        return float(self.diagonal().sum()) / N, self._gram_moments()[1] / N**2

    def close(self) -> None:
        """Free the device tensors."""
        self._factors = {}
        if self.device.type == "cuda":
            self._torch.cuda.empty_cache()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
