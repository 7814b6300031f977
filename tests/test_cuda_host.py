"""The rendered CUDA C computes what runtime/reference.py computes, checked on the CPU: g++ compiles the kernels as
they are, with host stand-ins for the little they take from CUDA (the thread index, the float16 and bfloat16
conversions, bit casts), and each runs over inputs with the special values of its dtype.

What this checks is the renderer: Python's floor division, modulo, min/max and clip, truthiness, literals,
rounding to float16 after each op, bool results. The math library here is the host's, not CUDA's; the GPU test in
tests/test_cuda_codegen.py runs the real thing through CuPy with the same comparison.
"""

import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest
from cuda_programs import COMPUTE_OPS, LITERALS, chain_programs, const_program, disagreements, op_program

from jupyter_gpuiter import compile_batch, generate
from jupyter_gpuiter.runtime.cuda import C_TYPES, HEADER, cuda_source

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


def _host_kernels(progs, dtype, tmp_path, cxx):
    """`run(program, inputs)` for the programs' kernels compiled by g++ into one library, one loop a kernel."""
    storage = C_TYPES[dtype][0]
    parts = [HEADER]
    for k, p in enumerate(progs):
        out = "bool" if p.returns_bool() else storage
        params = [f"const {storage}* x{i}" for i in range(p.n_params)] + [f"{out}* out", "long long n"]
        args = [f"x{i}" for i in range(p.n_params)] + ["out", "n"]
        loop = f"for (long long j = 0; j < n; ++j) {{ blockIdx.x = j; k{k}({', '.join(args)}); }}"
        parts += [cuda_source(p, dtype, f"k{k}", header=False),
                  f'extern "C" void run_k{k}({", ".join(params)}) {{ {loop} }}']
    (tmp_path / "cuda_fp16.h").write_text(CUDA_ON_HOST)
    (tmp_path / "cuda_bf16.h").write_text('#include "cuda_fp16.h"\n')
    (tmp_path / "kernels.cpp").write_text("\n".join(parts))
    lib = tmp_path / f"kernels_{dtype}.so"
    r = subprocess.run([cxx, "-std=c++17", "-O0", "-ffp-contract=off", "-shared", "-fPIC", f"-I{tmp_path}", "-o",
                        str(lib), str(tmp_path / "kernels.cpp")], capture_output=True, text=True, timeout=300,
                       check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    so = ctypes.CDLL(str(lib))
    index = {id(p): k for k, p in enumerate(progs)}

    def run(p, xs):
        n = xs[0].size if xs else 1
        out = np.empty(xs[0].shape if xs else (), bool if p.returns_bool() else dtype)
        fn = getattr(so, f"run_k{index[id(p)]}")
        fn.argtypes = [ctypes.c_void_p] * (len(xs) + 1) + [ctypes.c_longlong]
        fn(*[np.ascontiguousarray(x).ctypes.data for x in xs], out.ctypes.data, n)
        return out

    return run


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_rendered_kernels_agree_with_the_reference(cxx, tmp_path, dtype):
    generated = list(compile_batch(generate.generate_batch(300, 40, params=(0, 4)), mode="serial").results)
    progs = [op_program(op) for op in COMPUTE_OPS] + [const_program(v) for v in LITERALS] + chain_programs() + generated
    report = disagreements(progs, _host_kernels(progs, dtype, tmp_path, cxx), dtype)
    assert not report, f"{len(report)} of {len(progs)} programs:\n\n" + "\n\n".join(report[:10])
