"""Programs and inputs for the native CUDA tests: one program per IR op, one per literal, and input vectors with the
special values of a dtype; the compilers they run through without a GPU (fixtures `cxx`: g++ with CUDA_ON_HOST's
stand-ins, `nvrtc`: NVRTC; the root conftest registers this module as a plugin)."""

import math
import os
import shutil

import numpy as np
import pytest

from jupyter_gpuiter import compile_batch
from jupyter_gpuiter.ir import Program
from jupyter_gpuiter.lang import spec

#: The IR ops that compute (all but parameters, constants and ret).
COMPUTE_OPS = [op.name for op in spec.IR_OPS if op.name not in ("param", "const", "bool", "ret")]

#: Literals at the edges: subnormals, the largest finite values and the first that round to inf in each dtype,
#: a value that rounds differently when cast through float32 first (1 + 2**-11 + 2**-40 in float16), nan, inf.
LITERALS = (0.0, -0.0, 1.0, 0.1, 1e-3, 3.0, math.pi, 1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40, 65504.0, 65519.0,
            65520.0, 2.0**-24, 2.0**-25, 2.0**-133, 3.3895313892515355e38, 3.4028234663852886e38, 1e39, 1e-45,
            1e-50, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e300, 1e16, 123456789.0,
            math.nan, math.inf, -math.inf, -1e-300, -65504.0)

#: Chains of exact ops, where float16 and bfloat16 must round after each op and nothing may fuse.
CHAINS = ["def f(x, y, z):\n    return (x + y) * z\n", "def f(x, y, z):\n    return x * y + z\n",
          "def f(x, y):\n    return x * x - y * y\n", "def f(x, y, z):\n    return (x - y) / z + x\n",
          "def f(x, y):\n    return (x + y) // y + (x * y) % 3\n", "def f(x, y):\n    return sqrt(x * y) * 7.1\n",
          "def f(x, y, z):\n    return min(x + y, z) * 0.1 > max(x, y - z)\n",
          "def f(x, y, z):\n    return clip(x * 3, y, z) - floor(x / 3) + ceil(y * z)\n",
          "def f(x, y):\n    return where(x > y, x / y, y - 0.3) + (x and y) - (x or 2.5) * (not y)\n"]


def chain_programs() -> list[Program]:

    return list(compile_batch(CHAINS, mode="serial").results)


def op_program(op: str) -> Program:
    """`def f(x0, ...): return op(x0, ...)` for one IR op."""
    n = spec.IR_OP_BY_NAME[op].nargs
    operands = tuple(range(n)) + (-1,) * (3 - n)
    return Program(["param"] * n + [op, "ret"], [(-1, -1, -1)] * n + [operands, (n, -1, -1)],
                   [float(i) for i in range(n)] + [0.0, 0.0], n, [f"x{i}" for i in range(n)], op)


def const_program(v: float, op: str = "const") -> Program:
    """`def f(): return v` (op "bool" for True/False)."""
    return Program([op, "ret"], [(-1, -1, -1), (0, -1, -1)], [v, 0.0], 0, [], "lit")


def inputs(rng: np.random.Generator, dtype: str, n: int) -> np.ndarray:
    """`n` values of `dtype`: its special values (±0, ±1, ±inf, nan, the smallest subnormal and normal, the
    largest finite), small integers and halves (ties for floor division and modulo), then uniform in [-10, 10];
    shuffled, so that several parameters meet in every combination."""
    info = np.finfo(dtype)
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, -3.0, 7.0, 1e-3, 100.0, -100.0, np.inf, -np.inf, np.nan,
               float(info.smallest_subnormal), float(info.tiny), float(info.max), -float(info.max)]
    small = rng.integers(-8, 9, n // 4) / rng.choice([1, 2], n // 4)
    x = np.concatenate([special * 8, small, rng.uniform(-10, 10, n)])[:n]
    return rng.permutation(x).astype(dtype)


#: Ops whose results come from a math library: CUDA's, the host's and NumPy's differ by a few units in the last
#: place (copysign too: the sign of a nan made by 0/0 is not portable). Every other op is exact in all of them.
LIBRARY_OPS = {"pow", "exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan",
               "atan2", "sinh", "cosh", "tanh", "erf", "sigmoid", "hypot", "copysign"}
#: (rtol, atol) for programs with library ops.
TOLERANCES = {"float16": (4e-3, 1e-4), "float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14)}


def mismatches(p, got, want, dtype, exact) -> tuple[np.ndarray, float]:
    """Per element: whether `got` differs from the reference `want`, and the share of elements allowed to.

    A program of exact ops must agree bit for bit (nan with nan). With library ops, `got` may be at most 4 times
    as far as `want` from `exact` (the program evaluated wider), give or take the dtype's tolerance: a few units in
    the last place can decide where the program is ill-conditioned (sin(cosh(x)), a comparison on the edge). A
    bool may differ where `want` differs from `exact`. One op alone may differ on 0.1% of its elements, a
    generated program on 1%."""
    library = bool(set(p.ops) & LIBRARY_OPS)
    if want.dtype == bool:
        return (got != want) & (want == exact) if library else got != want, 0.01 if library else 0.0
    g, w, e = got.astype(exact.dtype), want.astype(exact.dtype), exact
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    if not library:
        return ~same, 0.0
    rtol, atol = TOLERANCES[dtype]
    with np.errstate(invalid="ignore", over="ignore"):
        near = np.abs(g - e) <= 4 * np.abs(w - e) + atol + rtol * np.abs(e)
    return ~(same | near), 0.001 if len(p.ops) <= 5 else 0.01


def disagreements(progs, run, dtype: str, n: int = 4099, seed: int = 0) -> list[str]:
    """Run each program by `run(program, inputs) -> np.ndarray` and by the reference on the same `n` inputs
    (default: not a multiple of a block size); one line and the program for each that disagrees."""
    from jupyter_gpuiter.runtime import reference

    rng = np.random.default_rng(seed)
    report = []
    for p in progs:
        xs = [inputs(rng, dtype, n) for _ in range(p.n_params)]
        got, want = run(p, xs), reference.evaluate(p, xs, dtype)
        if got.shape != want.shape or got.dtype != want.dtype:
            report.append(f"got {got.dtype}{got.shape}, want {want.dtype}{want.shape}\n{p.text()}")
            continue
        wide = "longdouble" if dtype == "float64" else "float64"  # (80 bits on x86, 128 on Arm)
        exact = np.atleast_1d(reference.evaluate(p, [x.astype(wide) for x in xs], wide))
        got, want = np.atleast_1d(got), np.atleast_1d(want)
        bad, allowed = mismatches(p, got, want, dtype, exact)
        if bad.mean() > allowed:
            i = int(np.flatnonzero(bad)[0])
            report.append(f"{bad.sum()}/{bad.size} differ; the first at inputs {[float(x[i]) for x in xs]}: "
                          f"got {got[i]!r}, want {want[i]!r} (float64: {exact[i]!r})\n{p.text()}")
    return report


#: What the kernels take from cuda_fp16.h, cuda_bf16.h and CUDA itself, for the host (float16 through GCC's
#: _Float16, which converts with one rounding to nearest even, as __float2half_rn does).
CUDA_ON_HOST = r"""
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
using namespace std;
#define __device__
#define __global__
#define __forceinline__ inline
struct py_dim3 { unsigned long long x; };
inline py_dim3 blockIdx{0}, blockDim{1}, threadIdx{0};
struct __half { _Float16 v; };
inline float __half2float(__half h) { return (float)h.v; }
inline __half __float2half_rn(float f) { return __half{(_Float16)f}; }
struct __nv_bfloat16 { uint16_t bits; };
inline float __bfloat162float(__nv_bfloat16 b) { uint32_t u = (uint32_t)b.bits << 16; float f; memcpy(&f, &u, 4); return f; }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if (isnan(f)) return {(uint16_t)((u >> 16) | 0x40)};
    u += 0x7fff + ((u >> 16) & 1);
    return {(uint16_t)(u >> 16)};
}
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
"""


CXX = shutil.which("g++")


@pytest.fixture(scope="module")
def cxx():
    if CXX is None and os.environ.get("CI"):
        pytest.fail("g++ is not installed (CI's machine has it)")
    if CXX is None:
        pytest.skip("g++ is not installed")
    return CXX


DTYPES = ("float16", "bfloat16", "float32", "float64")


#: The oldest architecture NVRTC 13 targets (software bfloat16 conversions) and the H100/H200's.
ARCHS = ("compute_75", "compute_90")


def nvrtc_missing() -> str | None:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError as e:
        return f"NVRTC is not installed ({e}): pip install -e '.[test]' brings cuda-bindings and nvidia-cuda-nvrtc"
    if find_nvidia_header_directory("cudart") is None:
        return "cuda_fp16.h is not installed: pip install -e '.[test]' brings nvidia-cuda-runtime"
    return None


@pytest.fixture(scope="module")
def nvrtc():
    reason = nvrtc_missing()
    if reason and os.environ.get("CI"):
        pytest.fail(f"{reason} (CI installs the test extra, so NVRTC must be there)")
    if reason:
        pytest.skip(reason)
