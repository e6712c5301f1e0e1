"""One fused GPU kernel for the RBF Gram products: ``G[I, J] V`` with G never in memory."""

from __future__ import annotations

import functools

#: Products of the float32 phase: "tf32x3" (tensor cores) or "ieee" (FMA); chosen by
#: benchmarks/bench_device.py.
FLOAT32_DOT = "tf32x3"

#: Rows per program, columns per step, warps and pipeline stages of a launch. 64 x 64 keeps the
#: (64, BLOCK_V) accumulator, its compensation and one (64, 64) tile in registers at
#: BLOCK_V <= 64; benchmarks/bench_device.py measures the alternatives.
TUNING = {"block_m": 64, "block_n": 64, "num_warps": 4, "num_stages": 3}
#: V columns per launch (wider V is split into launches: each recomputes the entries).
MAX_V_COLUMNS = 64


def fused_available(device) -> bool:
    """True when the fused kernel can run for tensors on ``device``: a CUDA device with
    Triton importable, or any device under Triton's interpreter (tests)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    from ..settings import TRITON_INTERPRET

    return device.type == "cuda" or TRITON_INTERPRET.get() == "1"


def padded_width(n, least=16):
    """The power of two >= ``max(n, least)``: the width factors and V are padded to (Triton's
    block shapes are powers of two, and its products need at least 16)."""
    p = least
    while p < n:
        p *= 2
    return p


@functools.cache
def _kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def rbf_matmul_kernel(L, R, V, Out, n_rows, n_cols,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                          BLOCK_V: tl.constexpr, DOT: tl.constexpr, SQUARE: tl.constexpr,
                          COMPENSATE: tl.constexpr):
        # L (n_rows, BLOCK_D), R (n_cols, BLOCK_D), V (n_cols, BLOCK_V), Out (n_rows, BLOCK_V),
        # all contiguous and padded: only rows and columns beyond n_rows / n_cols are masked.
        pid = tl.program_id(0)
        rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
        dims = tl.arange(0, BLOCK_D)
        vcols = tl.arange(0, BLOCK_V)
        row_ok = rows < n_rows
        left = tl.load(L + rows[:, None] * BLOCK_D + dims[None, :], mask=row_ok[:, None],
                       other=0.0)
        acc = tl.zeros((BLOCK_M, BLOCK_V), dtype=Out.dtype.element_ty)
        comp = tl.zeros((BLOCK_M, BLOCK_V), dtype=Out.dtype.element_ty)
        for c0 in range(0, n_cols, BLOCK_N):
            cols = c0 + tl.arange(0, BLOCK_N)
            col_ok = cols < n_cols
            right = tl.load(R + cols[None, :] * BLOCK_D + dims[:, None], mask=col_ok[None, :],
                            other=0.0)
            # -gamma ||x - y||^2 <= 0; rounding can cross zero (as on the CPU tiles).
            t = tl.exp(tl.minimum(tl.dot(left, right, input_precision=DOT), 0.0))
            if SQUARE:
                t = t * t
            # Masked columns give t = 1 (a zero exponent) but read zero rows of V.
            v = tl.load(V + cols[:, None] * BLOCK_V + vcols[None, :], mask=col_ok[:, None],
                        other=0.0)
            part = tl.dot(t.to(v.dtype), v, input_precision=DOT)
            if COMPENSATE:  # Kahan: the lost low part of each addition goes into the next
                y = part - comp
                total = acc + y
                comp = (total - acc) - y
                acc = total
            else:
                acc += part
        tl.store(Out + rows[:, None] * BLOCK_V + vcols[None, :], acc, mask=row_ok[:, None])

    return rbf_matmul_kernel


def rbf_matmul(left, right, V, *, square=False, dot=None):
    """``T V`` with ``T[i, j] = exp(min(0, left[i] . right[j]))`` (``T**2`` when ``square``: the row
    sums of the squared kernel give ``||G||_F^2``)."""
    import torch
    import triton

    n, P = left.shape
    m, q = V.shape
    if right.shape != (m, P) or q > MAX_V_COLUMNS or left.dtype != V.dtype:
        raise ValueError(f"rbf_matmul: shapes/dtypes {tuple(left.shape)} {tuple(right.shape)} "
                         f"{tuple(V.shape)} {left.dtype} {V.dtype} do not fit.")
    block_v = padded_width(q)
    Vp = V if q == block_v else torch.nn.functional.pad(V, (0, block_v - q))
    out = torch.empty((n, block_v), dtype=V.dtype, device=V.device)
    if n == 0:
        return out[:, :q]
    double = V.dtype == torch.float64
    grid = (triton.cdiv(n, TUNING["block_m"]),)
    _kernel()[grid](left.contiguous(), right.contiguous(), Vp.contiguous(), out, n, m,
                    BLOCK_M=TUNING["block_m"], BLOCK_N=TUNING["block_n"], BLOCK_D=P,
                    BLOCK_V=block_v, DOT="ieee" if double else (dot or FLOAT32_DOT),
                    SQUARE=bool(square), COMPENSATE=not double,
                    num_warps=TUNING["num_warps"], num_stages=TUNING["num_stages"])
    return out[:, :q]
