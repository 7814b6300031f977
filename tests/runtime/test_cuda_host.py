"""The rendered CUDA C computes what runtime/reference.py computes, checked on the CPU: g++ compiles the kernels as
they are, with host stand-ins for the little they take from CUDA (the thread index, the float16 and bfloat16
conversions, bit casts), and each runs over inputs with the special values of its dtype.

What this checks is the renderer: Python's floor division, modulo, min/max and clip, truthiness, literals,
rounding to float16 after each op, bool results. The math library here is the host's, not CUDA's; the GPU test in
tests/runtime/test_cuda_codegen.py runs the real thing through CuPy with the same comparison.
"""

import ctypes
import subprocess

import numpy as np
import pytest

from jupyter_gpuiter import compile_batch, generate
from jupyter_gpuiter.runtime.cuda import C_TYPES, HEADER, cuda_source
from tests.support.cuda_programs import (
    COMPUTE_OPS,
    CUDA_ON_HOST,
    LITERALS,
    chain_programs,
    const_program,
    disagreements,
    op_program,
)


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
    progs = [p for p in progs if not p.reduces]  # row kernels run on the host in tests/runtime/test_cuda_rows.py
    report = disagreements(progs, _host_kernels(progs, dtype, tmp_path, cxx), dtype)
    assert not report, f"{len(report)} of {len(progs)} programs:\n\n" + "\n\n".join(report[:10])
