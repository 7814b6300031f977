"""Kernel (runtime/kernel.py): a compiled program called on NumPy arrays and torch tensors."""

import numpy as np
import pytest
import torch

import jupyter_gpuiter as gi


def test_kernel_calls_numpy_and_torch(root):
    k = gi.compile((root / "examples/kernels/softplus.py").read_text(), mode="serial")
    x = np.linspace(-3, 3, 7)
    want = np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)
    np.testing.assert_allclose(k(x), want, rtol=1e-6)
    t = k(torch.tensor(x, dtype=torch.float32))
    assert isinstance(t, torch.Tensor)
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6)


def test_kernel_rejects_bad_calls():
    k = gi.compile("def f(x, y):\n    return x + y\n", mode="serial")
    with pytest.raises(TypeError, match="takes 2 arguments"):
        k(np.ones(3))
    with pytest.raises(ValueError, match="do not broadcast"):
        k(np.ones(3), np.ones(4))
    assert k(np.ones(3), 2.0).tolist() == [3.0, 3.0, 3.0]
