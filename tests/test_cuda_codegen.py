"""Native CUDA kernels: the generated CUDA C compiles with nvcc (no GPU needed); on a GPU, CuPy runs it and
it agrees with the torch path."""

import shutil
import subprocess

import numpy as np
import pytest
import torch

from jupyter_gpuiter import compile_batch
from jupyter_gpuiter.lang import generate
from jupyter_gpuiter.runtime.cuda import HEADER, cuda_source
from jupyter_gpuiter.runtime.render import torch_function

NVCC = shutil.which("nvcc")


def _programs(n, seed):
    return [p for p in compile_batch(generate.generate_batch(n, seed, params=(1, 3)), mode="traditional").results]


@pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")
def test_generated_cuda_compiles_with_nvcc(tmp_path):
    progs = _programs(30, 8)
    kernels = [cuda_source(p, dtype, f"k_{dtype}_{i}", header=False)
               for dtype in ("float16", "bfloat16", "float32", "float64")
               for i, p in enumerate(progs if dtype == "float32" else progs[:10])]
    (tmp_path / "k.cu").write_text(HEADER + "\n".join(kernels))  # one translation unit, one nvcc run
    r = subprocess.run([NVCC, "-std=c++17", "-c", "-o", str(tmp_path / "k.o"), str(tmp_path / "k.cu")],
                       capture_output=True, text=True, check=False, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]


def test_source_shape():
    p = _programs(1, 1)[0]
    src = cuda_source(p, "float32", "my_kernel")
    assert 'extern "C" __global__ void my_kernel(' in src and "out[i] =" in src
    assert src.count("const C r") == len(p.ops) - 1


@pytest.mark.gpu
def test_cupy_kernels_agree_with_torch():
    cupy = pytest.importorskip("cupy")
    from jupyter_gpuiter.runtime.cuda import launch

    for p in _programs(40, 9):
        x = [torch.linspace(-3, 3, 1001, device="cuda", dtype=torch.float64) + i for i in range(p.n_params)]
        want = torch_function(p, "float64")(*x).double().cpu().numpy()
        got = cupy.asnumpy(launch(p, [cupy.asarray(t) for t in x], "float64")).astype(np.float64)
        close = np.isclose(got, want, rtol=1e-9, atol=1e-12, equal_nan=True) | (got == want)
        assert close.mean() > 0.999, p.text()
