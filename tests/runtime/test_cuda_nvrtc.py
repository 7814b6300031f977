"""The CUDA C of runtime/cuda.py compiles with NVRTC, the compiler CuPy runs it through, on a machine with no GPU:
every IR op and literals at the edges of every kernel dtype to PTX for two GPU generations, and thousands of
generated programs (all through NVRTC's front end, a sample of them to PTX).

NVRTC comes from PyPI (cuda-bindings, nvidia-cuda-nvrtc, nvidia-cuda-runtime for cuda_fp16.h and cuda_bf16.h),
in the `test` extra. Without them these tests skip with that reason, except in CI (CI set), where they fail.
"""

import math
import random
import re

import numpy as np
import pytest
import torch

from jupyter_gpuiter import compile_batch, generate
from jupyter_gpuiter.ir import Program
from jupyter_gpuiter.runtime.cuda import (
    C_OPS,
    HEADER,
    NVRTC_OPTIONS,
    REDUCE_FOLDS,
    NvrtcError,
    cuda_source,
    nvrtc_compile,
    round_to_dtype,
)
from tests.support.cuda_programs import ARCHS, COMPUTE_OPS, DTYPES, LITERALS, const_program, op_program


def _entries(ptx: str) -> set[str]:
    return set(re.findall(r"\.entry\s+(\w+)\(", ptx))


def _compile(kernels: dict[str, str], arch: str, options=NVRTC_OPTIONS) -> str:
    """One translation unit (the header once) for many kernels; its PTX. NVRTC must say nothing at all."""
    ptx, log = nvrtc_compile(HEADER + "\n".join(kernels.values()), arch, options)
    assert log.strip() == "", log[:3000]
    return ptx


def test_every_ir_op_has_a_cuda_rendering():
    assert set(C_OPS) | set(REDUCE_FOLDS) == set(COMPUTE_OPS)  # reductions: runtime/cuda.py's row kernels


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_ir_op_and_edge_literal_compiles_to_ptx(nvrtc, dtype):
    kernels = {f"op_{op}": cuda_source(op_program(op), dtype, f"op_{op}", header=False) for op in COMPUTE_OPS}
    kernels |= {f"lit_{i}": cuda_source(const_program(v), dtype, f"lit_{i}", header=False)
                for i, v in enumerate(LITERALS)}
    kernels |= {f"bool_{b}": cuda_source(const_program(float(b), "bool"), dtype, f"bool_{b}", header=False)
                for b in (0, 1)}
    for arch in ARCHS:
        assert _entries(_compile(kernels, arch)) == set(kernels), arch
    ptx, log = nvrtc_compile(cuda_source(op_program("clip"), dtype, "alone"))  # a source with its own header
    assert _entries(ptx) == {"alone"} and log.strip() == ""


def test_nan_and_inf_literals_need_no_host_header():
    # NVRTC has no host <math.h>: NAN and INFINITY are undefined there (nvcc's host headers hid that)
    src = HEADER + "".join(cuda_source(const_program(v), "float32", f"k{i}", header=False)
                           for i, v in enumerate((math.nan, math.inf, -math.inf)))
    src += cuda_source(op_program("clip"), "float32", "clip", header=False)
    assert "NAN" not in src and "INFINITY" not in src


def test_a_literal_is_rounded_once_to_the_kernel_dtype():
    v = 1 + 2**-11 + 2**-40  # through float32 first: 1 + 2**-11, a tie, then 1.0 in float16
    assert f"((C){1 + 2**-10!r})" in cuda_source(const_program(v), "float16", "k")
    v = 1 + 2**-8 + 2**-40  # likewise for bfloat16
    assert f"((C){1 + 2**-7!r})" in cuda_source(const_program(v), "bfloat16", "k")
    assert "py_inf<C>()" in cuda_source(const_program(65520.0), "float16", "k")
    assert "((C)65504.0)" in cuda_source(const_program(65519.0), "float16", "k")
    assert f"((C){2.0**-24!r})" in cuda_source(const_program(2.0**-24 * 0.75), "float16", "k")
    assert "((C)0.0)" in cuda_source(const_program(2.0**-26), "float16", "k")
    assert "((C)1e-300)" in cuda_source(const_program(1e-300), "float64", "k")


def _doubles(n: int, seed: int) -> list[float]:
    """Random doubles over every binade, with ties and near-ties of the narrow dtypes."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        kind = rng.random()
        m = rng.uniform(1, 2) * rng.choice((-1, 1))
        if kind < 0.5:
            out.append(math.ldexp(m, rng.randint(-160, 140)))
        else:  # a value with few significant bits, nudged by one unit of the double
            bits = rng.choice((8, 9, 11, 12, 24, 25))
            q = math.ldexp(round(math.ldexp(m, bits)), rng.randint(-150, 130) - bits)
            out.append(rng.choice((q, math.nextafter(q, math.inf), math.nextafter(q, -math.inf))))
    return out


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_round_to_dtype_agrees_with_numpy(dtype):
    cast = {"float16": np.float16, "float32": np.float32}[dtype]
    with np.errstate(over="ignore"):
        for v in _doubles(20000, 1):
            assert round_to_dtype(v, dtype) == float(cast(v)), v


def test_round_to_dtype_agrees_with_torch_bfloat16_from_float32():
    # torch rounds float32 -> bfloat16 once (to nearest even): exact for values that float32 holds
    values = [float(np.float32(v)) for v in _doubles(20000, 2) if abs(v) < 3e38]
    want = torch.tensor(values, dtype=torch.float32).to(torch.bfloat16).double().tolist()
    assert [round_to_dtype(v, "bfloat16") for v in values] == want


def test_products_are_not_fused_into_fma(nvrtc):
    # `x * y + z` rounds twice in Python, NumPy and torch; an FMA rounds once (x * x - x * x would not be 0)
    prog = compile_batch(["def f(x, y, z):\n    return x * y + z\n"], mode="serial").results[0]
    for dtype in ("float32", "float64"):
        kernels = {"k": cuda_source(prog, dtype, "k", header=False)}
        assert "fma" not in _compile(kernels, "compute_90")
        fused = _compile(kernels, "compute_90", tuple(o for o in NVRTC_OPTIONS if not o.startswith("--fmad")))
        assert "fma.rn" in fused  # the check would see a contraction: NVRTC's default is --fmad=true


def test_an_nvrtc_error_carries_the_log(nvrtc):
    with pytest.raises(NvrtcError, match="undefined") as e:
        nvrtc_compile(HEADER + 'extern "C" __global__ void k(float* o) { o[0] = NAN; }')
    assert 'identifier "NAN" is undefined' in e.value.log


#: Generated programs per kernel dtype (each dtype its own), and how many of them go through to PTX: the front
#: end (where a literal, a name or an overload can go wrong) takes ~2 ms a kernel, PTX ~10-30 ms.
N_PROGRAMS, N_PTX = 800, 100


@pytest.mark.parametrize("dtype", DTYPES)
def test_generated_programs_compile(nvrtc, dtype):
    sources = generate.generate_batch(N_PROGRAMS, 100 + DTYPES.index(dtype), params=(0, 4))
    progs = compile_batch(sources, mode="serial").results
    assert all(isinstance(p, Program) for p in progs)
    kernels = {f"g{i}": cuda_source(p, dtype, f"g{i}", header=False) for i, p in enumerate(progs)}
    _, log = nvrtc_compile(HEADER + "\n".join(kernels.values()), "compute_80",
                           NVRTC_OPTIONS + ("--fdevice-syntax-only",))
    assert log.strip() == "", log[:3000]
    sample = dict(list(kernels.items())[:N_PTX])
    assert _entries(_compile(sample, "compute_80", NVRTC_OPTIONS + ("-Ofc=max",))) == set(sample)


def _ftz_instructions(ptx: str) -> set[str]:
    """The PTX instructions that flush float32 subnormals to zero, but the approximations inside libdevice's
    functions (which scale their operands first)."""
    found = re.findall(r"(?<![\w.])[a-z]+[0-9]*(?:\.[a-z0-9]+)*\.ftz(?:\.[a-z0-9]+)*", ptx)
    return {i for i in found if ".approx." not in i}


def test_kernels_keep_float32_subnormals(nvrtc):
    """With NVRTC_OPTIONS no float32 op flushes subnormals; with CuPy's `-ftz=true` after them, as
    cupy.RawModule(code=...) compiles, every one does (what the first run on a GPU showed)."""
    kernels = {f"op_{op}": cuda_source(op_program(op), "float32", f"op_{op}", header=False) for op in COMPUTE_OPS}
    assert _ftz_instructions(_compile(kernels, "compute_90")) == set()
    flushed, log = nvrtc_compile(HEADER + "\n".join(kernels.values()), "compute_90", (*NVRTC_OPTIONS, "-ftz=true"))
    assert '"--ftz(-ftz)=false" followed by "--ftz(-ftz)=true"' in log  # the later one wins
    assert {"neg.ftz.f32", "mul.rn.ftz.f32", "setp.neu.ftz.f32"} <= _ftz_instructions(flushed)


class _FakeCupy:
    """As much of CuPy as load_module touches: the device's compute capability and RawModule."""

    def __init__(self):
        self.modules = []
        fake = self

        class Device:
            compute_capability = "90"

        class RawModule:
            def __init__(self, code=None, options=(), path=None):
                fake.modules.append({"code": code, "options": options, "path": path})

            def get_function(self, name):
                return name

        self.cuda = type("cuda", (), {"Device": Device})
        self.RawModule = RawModule


def test_load_module_loads_an_nvrtc_cubin_not_cupys_compile(nvrtc, monkeypatch):
    import sys
    from pathlib import Path

    from jupyter_gpuiter.runtime import cuda, fused_cuda

    fake = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    cuda.load_module(cuda_source(op_program("neg"), "float32", "k"))
    fused_cuda._KERNELS.clear()
    fused_cuda._kernel("float32", 64, "gi_evaluate")
    fused_cuda._KERNELS.clear()
    assert len(fake.modules) == 2 and all(m["code"] is None for m in fake.modules)
    for m in fake.modules:
        assert m["path"].endswith("-sm_90.cubin") and Path(m["path"]).read_bytes()[:4] == b"\x7fELF"
