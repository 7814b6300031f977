"""The fused evaluator's CUDA kernel (runtime/fused_cuda.py) against the CPU one (runtime/fused.py).

Without a GPU: the source compiles with NVRTC for two GPU generations in every kernel dtype, and g++ compiles the
very same kernels for the host (tests/runtime/test_cuda_host.py's stand-ins for CUDA, plus one-thread blocks: atomics,
barriers and warp shuffles become plain code) and runs them block after block on generated programs: exact-op
programs give fused.py's outputs and Comparison bit for bit (the serial block order stops where fused.compare
does); with library ops, outputs within a few ULP and counts consistent with those outputs. With a GPU: the same
through CuPy on torch tensors, and the early exit on a long input.
"""

import ctypes
import functools
import itertools
import subprocess

import numpy as np
import pytest
import torch

from jupyter_gpuiter import compile_batch, generate
from jupyter_gpuiter.lang import spec
from jupyter_gpuiter.runtime import fused, fused_cuda
from jupyter_gpuiter.runtime.cuda import NVRTC_OPTIONS, nvrtc_compile
from jupyter_gpuiter.verification.compare import default_tolerances
from tests.support.cuda_programs import (
    ARCHS,
    COMPUTE_OPS,
    CUDA_ON_HOST,
    DTYPES,
    LIBRARY_OPS,
    LITERALS,
    const_program,
    inputs,
    op_program,
)

N = 3100  # four tiles, the last of 28 inputs


@pytest.mark.parametrize("dtype", DTYPES)
def test_source_compiles_to_ptx(nvrtc, dtype):
    for arch, cap in zip(ARCHS, (64, fused_cuda.MAX_REGS)):
        ptx, log = nvrtc_compile(fused_cuda.source(dtype), arch, (*NVRTC_OPTIONS, f"-DGI_MAX_REGS={cap}"))
        assert log.strip() == "", log[:3000]
        assert ".entry gi_compare(" in ptx and ".entry gi_evaluate(" in ptx
        assert ".entry gi_compare_rows(" in ptx and ".entry gi_evaluate_rows(" in ptx  # tests/runtime/test_cuda_rows_fused.py


def test_long_programs_are_refused_and_no_gpu_is_no_error():
    assert isinstance(fused_cuda.available(), bool)
    n = fused_cuda.MAX_REGS + 1
    arrays = fused.ProgramArrays(np.zeros((1, n), np.int32), np.zeros((1, n, 3), np.int32), np.zeros((1, n)),
                                 np.array([n], np.int32))
    with pytest.raises(ValueError, match=f"at most {fused_cuda.MAX_REGS} instructions"):
        fused_cuda.compare(arrays, torch.zeros(1, 4), torch.zeros(4), "float32", 0.0, 0.0)


_UNARY = ("sqrt", "floor", "abs", "neg", "ceil")  # correctly rounded everywhere
_BINARY = ("div", "mod", "floordiv", "mul", "sub")


def _exact(arrays: fused.ProgramArrays) -> fused.ProgramArrays:
    """The programs with every library op replaced by an exact op of the same arity."""
    ops = arrays.ops.copy()
    for i, k in zip(*np.nonzero(np.isin(ops, [spec.IR_OP_INDEX[o] for o in LIBRARY_OPS]))):
        choice = _UNARY if spec.IR_OPS[ops[i, k]].nargs == 1 else _BINARY
        ops[i, k] = spec.IR_OP_INDEX[choice[(i + k) % len(choice)]]
    return fused.ProgramArrays(ops, arrays.args, arrays.imm, arrays.lengths)


@functools.cache
def _programs(seed: int) -> fused.ProgramArrays:
    sources = generate.generate_batch(160, seed, params=(0, 4)) + ["def f(x):\n    return y\n"]
    results = compile_batch(sources, mode="serial").results  # row kernels: tests/runtime/test_cuda_rows_fused.py
    return fused.ProgramArrays.from_programs([r for r in results if not getattr(r, "reduces", False)])


def _case(dtype: str, seed: int):
    """Generated programs (one that does not compile), inputs [4, N] and the exact-op programs' outputs (register
    dtype arrays)."""
    arrays = _programs(seed)
    rng = np.random.default_rng(seed)
    x = torch.tensor(np.stack([inputs(rng, "float32" if dtype == "bfloat16" else dtype, N) for _ in range(4)]))
    x = fused.as_registers(x.to(getattr(torch, dtype)).to(torch.float64).numpy(), dtype)
    return arrays, x, fused.evaluate(_exact(arrays), x, dtype)


def _wants(out, dtype, seed=0):
    """A reference for each program from its outputs: as they are, nudged within the tolerance, or nudged and one
    of them off (a failure in a random tile); rounded to the kernel dtype."""
    rng = np.random.default_rng(seed)
    rtol = default_tolerances(dtype)[0]
    for b, o in enumerate(out):
        with np.errstate(over="ignore"):
            w = o.astype(np.float64) * (1 + rtol / 2 * (b % 3 > 0))
        finite = np.flatnonzero(np.isfinite(w))
        if b % 3 == 2 and finite.size:
            i = rng.choice(finite)
            w[i] = w[i] * 1.5 + 1
        yield torch.from_numpy(w).to(getattr(torch, dtype)).to(torch.from_numpy(o).dtype).numpy()


def _same(a, b) -> bool:
    """Bit for bit, but any nan for any nan."""
    u = a.dtype.str.replace("f", "u")
    return a.shape == b.shape and bool(np.all((a.view(u) == b.view(u)) | (np.isnan(a) & np.isnan(b))))


def _ok(got, want, rtol, atol):
    """compare.py's rule, elementwise."""
    g, e = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isfinite(g) & np.isfinite(e) & (np.abs(g - e) <= atol + rtol * np.abs(e))
    return (g == e) | (np.isnan(g) & np.isnan(e)) | close


def _check_library(arrays, x, want, dtype, got, cmp, rtol, atol):
    """With library ops: outputs `got` near fused.py's (on at least 99% of each program's inputs: as near as fused.py's
    from a float64 evaluation, four times over, or within a loose tolerance, since a few ULP can decide where a
    program is ill-conditioned), and `cmp` (run without early exit) counting its own outputs' failures."""
    ref = fused.evaluate(arrays, x, dtype).astype(np.float64)
    wide = ref if dtype == "float64" else fused.evaluate(arrays, x.astype(np.float64), "float64")
    tol = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12}[dtype]
    g = got.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        near = _ok(g, ref, tol, tol) | (np.abs(g - wide) <= 4 * np.abs(ref - wide) + tol * (1 + np.abs(wide)))
    assert np.all(np.mean(~near, axis=1) <= 0.01), np.flatnonzero(np.mean(~near, axis=1) > 0.01)
    ok = _ok(got, want[None, :], rtol, atol) | (arrays.lengths[:, None] == 0)
    assert np.array_equal(cmp.failures, (~ok).sum(axis=1))
    assert np.array_equal(cmp.first_failure, np.where(ok.all(axis=1), -1, (~ok).argmax(axis=1)))
    assert np.array_equal(cmp.evaluated, np.where(arrays.lengths > 0, x.shape[1], 0))


#: Every exact op alone, and literals at the edges of every dtype (rounded once, from float64, to the kernel dtype).
EDGES = fused.ProgramArrays.from_programs(
    [op_program(op) for op in COMPUTE_OPS if op not in LIBRARY_OPS and op not in spec.REDUCTION_OPS] + [const_program(v) for v in LITERALS]
    + [const_program(float(b), "bool") for b in (0, 1)])

_FIELDS = ("failures", "first_failure", "max_abs_err", "max_rel_err", "max_ulp_err", "evaluated")


def _check_exact(arrays, x, out, dtype, got, compare, tiles_in_order=True):
    """Exact ops: outputs `got` as fused.py's `out` bit for bit, and `compare(arrays, want, stop_early)` as
    fused.compare: the same Comparison when tiles run in order, else (a GPU) the same first failure and verdict,
    and, having run as many tiles or more, as many failures, evaluated inputs and as large errors."""
    assert _same(got, out)
    rtol, atol = default_tolerances(dtype)
    shared = out[int(np.isfinite(out).sum(axis=1).argmax())].copy()
    shared[::50] = 0  # zeros: no relative error there
    cases = [(arrays, shared)]  # every program against the most finite outputs
    cases += [(arrays.select([b]), want) for b, want in enumerate(_wants(out, dtype))]  # each against its own
    seen = set()
    for (a, want), stop_early in itertools.product(cases, (True, False)):
        cpu, cmp = fused.compare(a, x, want, dtype, rtol, atol, stop_early), compare(a, want, stop_early)
        seen |= {(bool(f), int(k)) for f, k in zip(cpu.failures > 0, -(-cpu.evaluated // fused_cuda.TILE))}
        seen |= {"passed, off by some ULP"} if ((cpu.failures == 0) & (cpu.max_ulp_err > 0)).any() else set()
        if tiles_in_order or not stop_early:
            for field in _FIELDS:
                assert np.array_equal(getattr(cmp, field), getattr(cpu, field)), (field, stop_early)
            continue
        passed = cpu.failures == 0
        assert np.array_equal(cmp.first_failure, cpu.first_failure) and np.array_equal(cmp.failures == 0, passed)
        for field in _FIELDS[2:]:
            g, c = getattr(cmp, field), getattr(cpu, field)
            assert np.array_equal(g[passed], c[passed]) and np.all(g >= c), (field, stop_early)
    assert {(True, 1), (True, 2), (True, 3), (True, 4), (False, 4), "passed, off by some ULP"} <= seen, seen


_HOST = CUDA_ON_HOST + r"""
#define __shared__
#define GI_WARP 1
inline void __syncthreads() {}
inline int __syncthreads_or(int p) { return p; }
template <class T> T __shfl_down_sync(unsigned, T v, int, int = 1) { return v; }
template <class T> T __shfl_sync(unsigned, T v, int, int = 1) { return v; }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { auto o = *p; *p += v; return o; }
inline long long atomicMin(long long* p, long long v) { auto o = *p; if (v < o) *p = v; return o; }
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) { auto o = *p; if (v > o) *p = v; return o; }
inline long long __double_as_longlong(double d) { long long i; memcpy(&i, &d, 8); return i; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
double gi_smem[1 << 16];
"""
_DRIVER = r"""
#define GI_ARGS const int* ops, const int* args, const double* imm, const int* lengths, int B, int L, const C* x
extern "C" void host_evaluate(GI_ARGS, long long n, int tile, C* out, long long blocks) {
    for (long long w = 0; w < blocks; ++w) { blockIdx.x = w; gi_evaluate(ops, args, imm, lengths, B, L, x, n, tile, out); }
}
extern "C" void host_compare(GI_ARGS, const C* want, long long n, int tile, double rtol, double atol, int stop,
                             unsigned long long* f, long long* first, unsigned long long* a, unsigned long long* r,
                             unsigned long long* u, unsigned long long* e, long long blocks) {
    for (long long w = 0; w < blocks; ++w) {
        blockIdx.x = w;
        gi_compare(ops, args, imm, lengths, B, L, x, want, n, tile, rtol, atol, stop, f, first, a, r, u, e);
    }
}
"""


def _host(dtype, tmp_path, cxx):
    """(evaluate, compare) of the kernels compiled by g++, run block after block, one thread a block."""
    (tmp_path / "cuda_fp16.h").write_text(_HOST)
    (tmp_path / "cuda_bf16.h").write_text('#include "cuda_fp16.h"\n')
    (tmp_path / "k.cpp").write_text(fused_cuda.source(dtype) + _DRIVER)
    lib = tmp_path / f"k_{dtype}.so"
    r = subprocess.run([cxx, "-std=c++17", "-O2", "-ffp-contract=off", "-shared", "-fPIC", f"-I{tmp_path}", "-o",
                        str(lib), str(tmp_path / "k.cpp")], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    so = ctypes.CDLL(str(lib))
    p = lambda a: ctypes.c_void_p(a.ctypes.data)

    def common(arrays, x):
        return (p(arrays.ops), p(arrays.args), p(arrays.imm), p(arrays.lengths), ctypes.c_int(len(arrays)),
                ctypes.c_int(arrays.ops.shape[1]), p(x))

    def evaluate(arrays, x):
        out = np.empty((len(arrays), x.shape[1]), x.dtype)
        so.host_evaluate(*common(arrays, x), ctypes.c_longlong(x.shape[1]), ctypes.c_int(fused_cuda.TILE), p(out),
                         ctypes.c_longlong(len(arrays) * -(-x.shape[1] // fused_cuda.TILE)))
        return out

    def compare(arrays, x, want, rtol, atol, stop_early):
        n = x.shape[1]
        fails, abs_err, rel_err, ulp_err, evaluated = (np.zeros(len(arrays), np.uint64) for _ in range(5))
        first = np.full(len(arrays), n, np.int64)
        so.host_compare(*common(arrays, x), p(want), ctypes.c_longlong(n), ctypes.c_int(fused_cuda.TILE),
                        ctypes.c_double(rtol), ctypes.c_double(atol), ctypes.c_int(stop_early), p(fails), p(first),
                        p(abs_err), p(rel_err), p(ulp_err), p(evaluated),
                        ctypes.c_longlong(len(arrays) * -(-n // fused_cuda.TILE)))
        return fused.Comparison(fails.astype(np.int64), np.where(first >= n, -1, first), abs_err.view(np.float64),
                                rel_err.view(np.float64), ulp_err.view(np.float64), evaluated.astype(np.int64))

    return evaluate, compare


@pytest.mark.parametrize("dtype", DTYPES)
def test_host_compiled_kernel_agrees_with_fused(cxx, tmp_path, dtype):
    evaluate, compare = _host(dtype, tmp_path, cxx)
    arrays, x, out = _case(dtype, 30)
    rtol, atol = default_tolerances(dtype)
    exact = _exact(arrays)
    assert _same(evaluate(EDGES, x), fused.evaluate(EDGES, x, dtype))
    _check_exact(exact, x, out, dtype, evaluate(exact, x),
                 lambda a, want, stop_early: compare(a, x, want, rtol, atol, stop_early))
    want = out[0]
    _check_library(arrays, x, want, dtype, evaluate(arrays, x), compare(arrays, x, want, rtol, atol, False), rtol,
                   atol)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_kernel_agrees_with_fused(dtype):
    if not fused_cuda.available():
        pytest.skip("CuPy sees no CUDA device")
    arrays, x, out = _case(dtype, 30)
    rtol, atol = default_tolerances(dtype)
    xd = torch.from_numpy(x).cuda()
    exact = _exact(arrays)
    assert _same(fused_cuda.evaluate(EDGES, xd, dtype).cpu().numpy(), fused.evaluate(EDGES, x, dtype))
    _check_exact(exact, x, out, dtype, fused_cuda.evaluate(exact, xd, dtype).cpu().numpy(),
                 lambda a, want, stop_early: fused_cuda.compare(a, xd, torch.from_numpy(want).cuda(), dtype, rtol,
                                                                atol, stop_early), tiles_in_order=False)
    want = out[0]
    got = fused_cuda.evaluate(arrays, xd, dtype).cpu().numpy()
    _check_library(arrays, x, want, dtype, got, fused_cuda.compare(arrays, xd, want, dtype, rtol, atol, False), rtol,
                   atol)


@pytest.mark.gpu
def test_gpu_early_exit_skips_later_tiles():
    if not fused_cuda.available():
        pytest.skip("CuPy sees no CUDA device")
    arrays = fused.ProgramArrays.from_programs(compile_batch(["def f(x):\n    return x + 1\n"] * 2, mode="serial")
                                               .results)
    n = 1 << 24
    x = torch.arange(n, dtype=torch.float32, device="cuda")[None, :]
    cmp = fused_cuda.compare(arrays, x, x[0], "float32", 0.0, 0.0)  # x + 1 != x from the first input
    assert list(cmp.first_failure) == [0, 0] and np.all(cmp.evaluated < n // 4), cmp.evaluated
    assert np.all(cmp.failures >= fused_cuda.TILE) and np.all(cmp.failures <= cmp.evaluated)
