"""The fused GPU kernel's checks under Triton's CPU interpreter, in a process of their own.

Triton decides at import whether its ``@triton.jit`` functions (its own standard library
included) are interpreted (``TRITON_INTERPRET=1``), so the interpreter needs a process that
sets the variable before Triton is first imported: ``python -m tests.helpers.triton_cpu``
(tests/operators/test_torch_gram.py runs it). It exits 0 when every check passes.

Triton 3.x's interpreter also passes a scalar kernel argument as a one-element array and
converts it with ``int(array)``, which numpy 2.x refuses for arrays of one dimension ("only
0-dimensional arrays can be converted to Python scalars", raised by ``range(0, n, BLOCK)``);
:func:`_patch_interpreter` converts the one element instead. It touches only the interpreter.
"""

from __future__ import annotations

import os
import sys


def _patch_interpreter():
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interpreter._patch_lang_tensor = patched


def relative_error(a, b):
    """Largest entry of ``|a - b|`` relative to the largest of ``|b|``."""
    import numpy as np

    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


def main():
    assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"
    import numpy as np
    import torch

    _patch_interpreter()
    from catdask.core.classes import ClassIndex
    from catdask.kernels import make_kernel
    from catdask.operators import NumpyGramOperator, TorchGramOperator
    from catdask.operators.fused_rbf import MAX_V_COLUMNS, rbf_matmul

    rng = np.random.default_rng(0)
    N, D, K = 150, 6, 3
    y = rng.integers(0, K, N)
    X = rng.normal(size=(N, D)) + 1.5 * y[:, None] + 4.0
    classes = ClassIndex(y, K)
    kernel = make_kernel("rbf", n_features=D)
    ref = NumpyGramOperator(X, classes, kernel)
    op = TorchGramOperator(X, classes, kernel, device="cpu")
    assert op.fused, "the interpreter serves CPU tensors"
    z, V = rng.normal(size=(3, N)), rng.normal(size=(N, 4))
    for precision, rtol in (("float64", 1e-12), ("float32", 2e-5)):
        op.set_precision(precision)
        err = relative_error(op.class_matmul(z), ref.class_matmul(z))
        assert err < rtol, f"G Z in {precision}: relative error {err:.2e} >= {rtol}"
        err = relative_error(op.class_block_matmul(V), ref.class_block_matmul(V))
        assert err < rtol, f"class blocks in {precision}: relative error {err:.2e}"
    op.set_precision("float64")
    assert relative_error(op.matmul(V), ref.matmul(V)) < 1e-12
    moments, expected = op.covariance_moments(), ref.covariance_moments()
    assert np.allclose(moments, expected, rtol=1e-12), (moments, expected)

    # V wider than one launch, and the squared kernel of the moments.
    left, right = (torch.from_numpy(np.pad(f, ((0, 0), (0, 16 - f.shape[1]))))
                   for f in kernel.tile_factors(X[:70], "float64"))
    G = kernel(X[:70], X[:70])
    W = rng.normal(size=(70, MAX_V_COLUMNS + 3))
    Xs = classes.sort_rows(X)
    wide = op._range_product((0, 70), (0, 70), torch.from_numpy(W), "float64").numpy()
    assert relative_error(wide, kernel(Xs[:70], Xs[:70]) @ W) < 1e-12
    squares = rbf_matmul(left, right, torch.ones(70, 1, dtype=torch.float64), square=True)
    assert relative_error(squares.numpy()[:, 0], (G * G).sum(1)) < 1e-12
    try:
        rbf_matmul(left, right, torch.from_numpy(W))
    except ValueError as exc:
        assert "do not fit" in str(exc)
    else:
        raise AssertionError("a V wider than MAX_V_COLUMNS was accepted")
    print("fused kernel: all checks passed")


if __name__ == "__main__":
    sys.exit(main())
