"""The fused evaluator's CUDA kernel on rows (runtime/fused_cuda.py, `row=n`) against the CPU one (runtime/fused.py)
and the NumPy reference (runtime/reference.py).

Without a GPU: g++ compiles fused_cuda.source() with tests/runtime/test_cuda_rows.py's SIMT stand-ins (a block's
threads are real threads, warps of 4), and runs it on row kernels with teams of 1, 2 and 4 lanes (several rows a
block, shuffles only) and of the whole block (shuffles and shared memory): its outputs agree with fused.py's
(bit for bit where no sum's order or math library can tell them apart) and with the reference, and its Comparison
counts rows exactly as its own outputs say (failing rows, the first of them, rows evaluated, errors over
elements), and as fused.compare does where the outputs are the same. With a GPU: the same through CuPy, on rows of
1, 2, 31, 32, 33, 1000 and 100,000, and the early exit.
"""

import ctypes
import functools

import numpy as np
import pytest
import torch

from jupyter_gpuiter import compile_batch, generate
from jupyter_gpuiter.compilers.serial import compile_source
from jupyter_gpuiter.lang import spec
from jupyter_gpuiter.runtime import fused, fused_cuda, reference
from jupyter_gpuiter.verification.compare import default_tolerances
from tests.runtime.test_cuda_rows import EXTRA, build, row_mismatches
from tests.support.cuda_programs import DTYPES, LIBRARY_OPS
from tests.support.row_kernels import REAL

_DRIVER = r"""
#define GI_ARGS const int* ops, const int* args, const double* imm, const int* lengths, int B, int L, const C* x
extern "C" int host_evaluate_rows(GI_ARGS, long long n, long long width, int team, C* out, long long blocks,
                                  long long block) {
    return gi_launch(blocks, block, [&] { gi_evaluate_rows(ops, args, imm, lengths, B, L, x, n, width, team, out); });
}
extern "C" int host_compare_rows(GI_ARGS, const C* want, long long n, long long width, int team, double rtol,
                                 double atol, int stop, unsigned long long* f, long long* first,
                                 unsigned long long* a, unsigned long long* r, unsigned long long* u,
                                 unsigned long long* e, long long blocks, long long block) {
    return gi_launch(blocks, block, [&] {
        gi_compare_rows(ops, args, imm, lengths, B, L, x, want, n, width, team, rtol, atol, stop, f, first, a, r, u, e);
    });
}
"""

BLOCK = 16  # threads of an emulated block: 4 warps of 4
TEAMS = (1, 2, 4, BLOCK)


def _host(dtype, tmp_path, cxx):
    """(evaluate, compare) of the row kernels compiled by g++, blocks of BLOCK threads, teams as asked."""
    so = build(tmp_path, cxx, "#define GI_MAX_REGS 1024\n" + fused_cuda.source(dtype) + _DRIVER, f"fused_{dtype}")
    p = lambda a: ctypes.c_void_p(a.ctypes.data)

    def common(arrays, x):
        return (p(arrays.ops), p(arrays.args), p(arrays.imm), p(arrays.lengths), ctypes.c_int(len(arrays)),
                ctypes.c_int(arrays.ops.shape[1]), p(x))

    def blocks(arrays, n, row, team):
        return ctypes.c_longlong(len(arrays) * -(-(n // row) // (BLOCK // team)))

    def evaluate(arrays, x, row, team):
        out = np.full((len(arrays), x.shape[1]), 7.0, x.dtype)  # every output is written
        hung = so.host_evaluate_rows(*common(arrays, x), ctypes.c_longlong(x.shape[1]), ctypes.c_longlong(row),
                                     ctypes.c_int(team), p(out), blocks(arrays, x.shape[1], row, team),
                                     ctypes.c_longlong(BLOCK))
        assert hung == 0
        return out

    def compare(arrays, x, want, row, team, rtol, atol, stop_early):
        n = x.shape[1]
        rows = n // row
        fails, abs_err, rel_err, ulp_err, evaluated = (np.zeros(len(arrays), np.uint64) for _ in range(5))
        first = np.full(len(arrays), rows, np.int64)
        hung = so.host_compare_rows(*common(arrays, x), p(want), ctypes.c_longlong(n), ctypes.c_longlong(row),
                                    ctypes.c_int(team), ctypes.c_double(rtol), ctypes.c_double(atol),
                                    ctypes.c_int(stop_early), p(fails), p(first), p(abs_err), p(rel_err), p(ulp_err),
                                    p(evaluated), blocks(arrays, n, row, team), ctypes.c_longlong(BLOCK))
        assert hung == 0
        return fused.Comparison(fails.astype(np.int64), np.where(first >= rows, -1, first), abs_err.view(np.float64),
                                rel_err.view(np.float64), ulp_err.view(np.float64), evaluated.astype(np.int64))

    return evaluate, compare


@functools.cache
def _programs(seed: int) -> tuple:
    """Row kernels: the real ones, the extra ones of test_cuda_rows, generated ones; an elementwise one (a row
    kernel evaluator runs those too) and one that does not compile (length 0: nan, never compared)."""
    named = [compile_source(s) for s, _, _ in REAL.values()] + [compile_source(s) for s in EXTRA.values()]
    generated = [p for p in compile_batch(generate.generate_batch(60, seed, params=(1, 3)), mode="serial").results
                 if p.reduces]
    bad = compile_batch(["def f(x):\n    return y\n"], mode="serial").results
    elementwise = [compile_source("def f(x, y, z):\n    return x * y - z\n")]
    return tuple(named + generated + elementwise + bad)


def _inputs(rng, dtype, rows, row, params=3):
    """x [params, rows * row]: normal(0, 3) rows, positive in the first parameter's odd rows (the logs), of the
    kernel dtype, as registers."""
    x = rng.normal(0, 3, (params, rows, row))
    x[0, 1::2] = np.abs(x[0, 1::2]) + 0.01
    x = torch.from_numpy(x.reshape(params, -1)).to(getattr(torch, dtype)).to(torch.float64).numpy()
    return fused.as_registers(x, dtype)


def _ok(got, want, rtol, atol):
    """compare.py's rule, elementwise."""
    g, e = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.isfinite(g) & np.isfinite(e) & (np.abs(g - e) <= atol + rtol * np.abs(e))
    return (g == e) | (np.isnan(g) & np.isnan(e)) | close


def _expected(arrays, got, want, row, rtol, atol) -> fused.Comparison:
    """The Comparison that outputs `got` [B, n] make against `want` [n] on rows of `row`, without early exit
    (ULP error left at 0: compared separately)."""
    B, n = got.shape
    valid = arrays.lengths > 0
    ok = (_ok(got, want[None, :], rtol, atol) | ~valid[:, None]).reshape(B, n // row, row).all(axis=2)
    g, e = got.astype(np.float64), want.astype(np.float64)[None, :]
    finite = np.isfinite(g) & np.isfinite(e) & valid[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.where(finite, np.abs(g - e), 0.0)
        rel = np.where(finite & (e != 0), diff / np.abs(e), 0.0)
    return fused.Comparison((~ok).sum(axis=1), np.where(ok.all(axis=1), -1, (~ok).argmax(axis=1)), diff.max(axis=1),
                            rel.max(axis=1), np.zeros(B), np.where(valid, n // row, 0))


def _same(a, b) -> np.ndarray:
    """Per program: bit for bit, but any nan for any nan."""
    u = a.dtype.str.replace("f", "u")
    return np.all((a.view(u) == b.view(u)) | (np.isnan(a) & np.isnan(b)), axis=1)


def _wants(out, valid, dtype, row, rng):
    """(programs, reference) pairs from outputs: every program against the first valid one's outputs (most rows
    of most programs fail), then each valid program alone against its own outputs nudged within the tolerance,
    every other one with one element of a random row off (that row, and only it, fails)."""
    rtol = default_tolerances(dtype)[0]
    yield np.arange(len(out)), out[np.flatnonzero(valid)[0]].astype(np.float64)
    for b in np.flatnonzero(valid):
        with np.errstate(over="ignore", invalid="ignore"):
            w = out[b].astype(np.float64) * (1 + rtol / 4)
            if b % 2:
                finite = np.flatnonzero(np.isfinite(w))
                if finite.size:
                    i = rng.choice(finite)
                    w[i] += 1.5 + abs(w[i])
        yield np.array([b]), w


def _check(progs, x, dtype, row, team, evaluate, compare, rng, exact_programs=True):
    """Outputs against fused.py's, then the Comparison against the outputs and against fused.compare."""
    arrays = fused.ProgramArrays.from_programs(progs)
    n_named = len(REAL) + len(EXTRA)
    rtol, atol = default_tolerances(dtype)
    got = evaluate(arrays, x, row, team)
    cpu = fused.evaluate(arrays, x, dtype, row=row)
    valid = arrays.lengths > 0
    same = _same(got, cpu)
    assert np.isnan(got[~valid]).all()
    # near fused.py's everywhere: the order of a float64 sum and the math library only
    for b in np.flatnonzero(valid & ~same):
        wide = fused.evaluate(arrays.select([b]), x.astype(np.float64), "float64", row=row)[0]
        g, c = got[b].astype(np.float64), cpu[b].astype(np.float64)
        tol = {"float16": 4e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-9}[dtype]
        with np.errstate(invalid="ignore", over="ignore"):
            near = ((g == c) | (np.isnan(g) & np.isnan(c)) | (np.abs(g - c) <= tol * (1 + np.abs(c)))
                    | (np.abs(g - wide) <= 4 * np.abs(c - wide) + tol * (1 + np.abs(wide))))
        assert near.reshape(-1, row).all(axis=1).mean() >= (0.95 if b >= n_named else 1.0), b
    if exact_programs:  # the named kernels in float16 and float32 (their sums are exact in float64 here)
        named = np.arange(len(arrays)) < n_named
        lib = np.array([bool(set(getattr(p, "ops", ())) & LIBRARY_OPS) for p in progs])
        assert same[named & ~lib].all(), np.flatnonzero(named & ~lib & ~same)
    for which, want in _wants(got, valid, dtype, row, rng):
        want = want.astype(x.dtype)
        part, part_got, part_same = arrays.select(which), got[which], same[which]
        for stop_early in (False, True):
            cmp = compare(part, x, want, row, team, rtol, atol, stop_early)
            exp = _expected(part, part_got, want, row, rtol, atol)
            assert np.array_equal(cmp.first_failure, exp.first_failure), stop_early
            assert np.array_equal(cmp.failures == 0, exp.failures == 0)
            if not stop_early:
                for field in ("failures", "evaluated", "max_abs_err", "max_rel_err"):
                    assert np.array_equal(getattr(cmp, field), getattr(exp, field)), field
                c = fused.compare(part, x, want, dtype, rtol, atol, stop_early=False, row=row)
                for field in ("failures", "first_failure", "max_abs_err", "max_rel_err", "max_ulp_err", "evaluated"):
                    assert np.array_equal(getattr(cmp, field)[part_same], getattr(c, field)[part_same]), field
            else:  # a failing program ran at least up to its first failing row, and not past the rows there are
                failing = exp.failures > 0
                assert np.all(cmp.evaluated[failing] > cmp.first_failure[failing])
                assert np.all(cmp.failures <= exp.failures) and np.all(cmp.evaluated <= exp.evaluated)
                assert np.array_equal(cmp.evaluated[~failing], exp.evaluated[~failing])


HOST_ROWS = (1, 2, 3, 5, 31, 33, 100)


@pytest.mark.parametrize("dtype", DTYPES)
def test_host_compiled_row_kernel_agrees_with_fused(cxx, tmp_path, dtype):
    evaluate, compare = _host(dtype, tmp_path, cxx)
    rng = np.random.default_rng(DTYPES.index(dtype))
    for row, team in zip(HOST_ROWS, (1, 2, 4, BLOCK, 4, BLOCK, 2)):
        x = _inputs(rng, dtype, 7, row)
        _check(list(_programs(0)), x, dtype, row, team, evaluate, compare, rng,
               exact_programs=dtype in ("float16", "float32"))


def test_host_row_kernel_agrees_with_the_reference(cxx, tmp_path):
    """The outputs of the named kernels, on rows of 1,000, against runtime/reference.py (not fused.py)."""
    evaluate, _ = _host("float32", tmp_path, cxx)
    progs = list(_programs(0))[: len(REAL) + len(EXTRA)]
    arrays = fused.ProgramArrays.from_programs(progs)
    rng = np.random.default_rng(5)
    row, rows = 1000, 3
    for team in (4, BLOCK):
        x = _inputs(rng, "float32", rows, row)
        got = evaluate(arrays, x, row, team)
        for b, p in enumerate(progs):
            xs = [x[i].reshape(rows, row) for i in range(p.n_params)]
            out = got[b].reshape(rows, row)
            out = out[:, 0] if p.returns_per_row() else out
            out = out != 0 if p.returns_bool() else out
            assert not row_mismatches(p, out, xs, "float32").any(), p.text()


def test_rows_are_checked_like_fused():
    arrays = fused.ProgramArrays.from_programs([compile_source(REAL["softmax"][0])])
    x = torch.zeros(1, 12)
    with pytest.raises(ValueError, match="pass row=n"):
        fused_cuda.compare(arrays, x, torch.zeros(12), "float32", 0.0, 0.0)
    with pytest.raises(ValueError, match="not whole rows of 5"):
        fused_cuda.compare(arrays, x, torch.zeros(12), "float32", 0.0, 0.0, row=5)
    assert [fused_cuda.row_team(n) for n in (1, 2, 3, 31, 32, 33, 256, 257, 100_000)] == \
        [1, 2, 4, 32, 32, 32, 32, fused_cuda.THREADS, fused_cuda.THREADS]
    assert spec.REDUCTION_OPS == ("sum", "mean", "amax", "amin")


# ---------------------------------------------------------------------------------------------- on a GPU

GPU_ROWS = (1, 2, 31, 32, 33, 1000, 100_000)


def _gpu(arrays, x, row, team, dtype):
    assert team == fused_cuda.row_team(row)
    return fused_cuda.evaluate(arrays, torch.from_numpy(x).cuda(), dtype, row=row).cpu().numpy()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_gpu_row_kernel_agrees_with_fused(dtype):
    if not fused_cuda.available():
        pytest.skip("CuPy sees no CUDA device")
    rng = np.random.default_rng(11)

    def evaluate(a, x, row, team):
        return _gpu(a, x, row, team, dtype)

    def compare(a, x, want, row, team, rtol, atol, stop_early):
        return fused_cuda.compare(a, torch.from_numpy(x).cuda(), torch.from_numpy(want).cuda(), dtype, rtol, atol,
                                  stop_early, row=row)

    for row in GPU_ROWS if dtype == "float32" else (1, 33, 1000):  # (within gpu-check.sh's time)
        rows = 2 if row == 100_000 else 40
        x = _inputs(rng, dtype, rows, row)
        _check(list(_programs(0)), x, dtype, row, fused_cuda.row_team(row), evaluate, compare, rng,
               exact_programs=dtype in ("float16", "float32"))


@pytest.mark.gpu
def test_gpu_row_kernel_agrees_with_the_reference():
    if not fused_cuda.available():
        pytest.skip("CuPy sees no CUDA device")
    progs = list(_programs(0))[: len(REAL) + len(EXTRA)]
    arrays = fused.ProgramArrays.from_programs(progs)
    rng = np.random.default_rng(12)
    for row in GPU_ROWS:
        rows = 2 if row == 100_000 else 9
        x = _inputs(rng, "float32", rows, row)
        got = _gpu(arrays, x, row, fused_cuda.row_team(row), "float32")
        for b, p in enumerate(progs):
            xs = [x[i].reshape(rows, row) for i in range(p.n_params)]
            out = got[b].reshape(rows, row)
            out = out[:, 0] if p.returns_per_row() else out
            out = out != 0 if p.returns_bool() else out
            assert not row_mismatches(p, out, xs, "float32").any(), (row, p.text())
    assert reference.check_rows is not None


@pytest.mark.gpu
def test_gpu_row_early_exit_skips_later_rows():
    if not fused_cuda.available():
        pytest.skip("CuPy sees no CUDA device")
    arrays = fused.ProgramArrays.from_programs([compile_source("def f(x):\n    return x - mean(x) + 1\n")] * 2)
    row, rows = 64, 1 << 16
    x = torch.arange(row * rows, dtype=torch.float32, device="cuda")[None, :] % 7
    want = (x[0].reshape(rows, row) - x[0].reshape(rows, row).mean(-1, keepdim=True)).reshape(-1)  # off by 1
    cmp = fused_cuda.compare(arrays, x, want, "float32", 0.0, 0.0, row=row)
    assert list(cmp.first_failure) == [0, 0] and np.all(cmp.evaluated < rows // 4), cmp.evaluated
    assert np.all(cmp.failures >= 1) and np.all(cmp.failures <= cmp.evaluated)
    full = fused_cuda.compare(arrays, x, want, "float32", 0.0, 0.0, stop_early=False, row=row)
    assert list(full.failures) == [rows, rows] and list(full.evaluated) == [rows, rows]
