"""The batched VM and the single-kernel torch renderer against the NumPy reference evaluator."""

import numpy as np
import pytest
import torch

from jupyter_gpuiter import compile_batch, generate
from jupyter_gpuiter.ir import ProgramBatch
from jupyter_gpuiter.runtime import reference, vm
from jupyter_gpuiter.runtime.render import torch_function
from tests.runtime.test_fused import ELEMENTWISE


def _close(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    same_inf = np.isinf(want) & (got == want)
    # sinh/cosh/exp of arguments near 710: torch's float64 kernels overflow to inf slightly before NumPy's
    # (1.1e308 there); both are IEEE-valid roundings at the edge of the range, not a VM bug.
    edge = np.isinf(got) & (np.abs(want) > 1e307) & (np.sign(got) == np.sign(want))
    return np.isclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True) | same_inf | edge


def _programs(n, seed):
    # copysign(x, nan) copies the sign bit of a nan, which differs between math libraries: left out
    progs = [p for p in compile_batch(generate.generate_batch(n, seed, params=(1, 4), **ELEMENTWISE), mode="traditional").results]
    return [p for p in progs if "copysign" not in p.ops]


def test_vm_matches_the_reference_evaluator():
    progs = _programs(150, 3)
    x = torch.randn(4, 300, dtype=torch.float64, generator=torch.Generator().manual_seed(29)) * 3
    x[:, :5] = torch.tensor([0.0, -0.0, float("inf"), float("nan"), 1.0], dtype=torch.float64)[:, None].T[0]
    out = vm.run(ProgramBatch.from_results(progs), x, "float64")
    for i, p in enumerate(progs):
        want = reference.evaluate(p, [x[j].numpy() for j in range(p.n_params)], "float64")
        assert _close(out[i].numpy(), want).all(), p.text()


def test_renderer_matches_the_reference_evaluator():
    x = torch.linspace(-5, 5, 257, dtype=torch.float64)
    for p in _programs(80, 4):
        got = torch_function(p, "float64")(*([x] * p.n_params))
        want = reference.evaluate(p, [x.numpy()] * p.n_params, "float64")
        assert _close(got.numpy(), want).all(), p.text()


def test_vm_chunks_inputs_under_a_memory_budget():
    progs = _programs(20, 5)
    batch = ProgramBatch.from_results(progs)
    x = torch.randn(4, 1000, dtype=torch.float64)
    whole = vm.run(batch, x, "float64")
    small = vm.run(batch, x, "float64", budget=4096)
    assert torch.equal(whole.isnan(), small.isnan())
    assert torch.equal(whole.nan_to_num(), small.nan_to_num())


def test_programs_that_did_not_compile_give_nan():
    res = compile_batch(["def f(x):\n    return x + 1\n", "def f(x):\n    return y\n"], mode="traditional")
    out = vm.run(ProgramBatch.from_results(res.results), torch.ones(1, 3), "float32")
    assert out[0].tolist() == [2.0, 2.0, 2.0] and out[1].isnan().all()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_vm_computes_in_the_kernel_dtype(dtype):
    res = compile_batch(["def f(x):\n    return x / 3 + 0.1\n"], mode="traditional")
    out = vm.run(ProgramBatch.from_results(res.results), torch.tensor([[1.0, 2.0]]), dtype)
    tdt = getattr(torch, dtype)
    want = torch.tensor([1.0, 2.0], dtype=tdt) / 3 + torch.tensor(0.1, dtype=tdt)
    assert out.dtype == tdt and torch.equal(out[0], want)
