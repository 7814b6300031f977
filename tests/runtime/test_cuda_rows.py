"""Row kernels as native CUDA C (runtime/cuda.py, `row_source`): a team per row (lanes of a warp, or a block), reductions in double.

Without a GPU: NVRTC compiles the rendered row kernels (the real ones of tests/support/row_kernels.py, nested
reductions, bools, per-row constants, generated row kernels) for every kernel dtype and two GPU generations; and
g++ compiles the very same kernels for the host with SIMT stand-ins (`SIMT_HOST`: a block's threads are real
threads, __syncthreads a barrier, warp shuffles an exchange between the threads of a "warp" of GI_WARP = 4, so
multi-warp blocks, blocks striding over rows and threads striding over rows longer than the block all run), and
they are checked against runtime/reference.py on rows of 1 to 100,000 elements, broadcast inputs included. With a
GPU: CuPy runs them through `launch` against the reference on rows of 1, 2, 31, 32, 33, 1000 and 100,000.
"""

import ctypes
import re
import subprocess

import numpy as np
import pytest

from jupyter_gpuiter import compile_batch, generate
from jupyter_gpuiter.compilers.serial import compile_source
from jupyter_gpuiter.lang.spec import REDUCTION_OPS
from jupyter_gpuiter.runtime import reference
from jupyter_gpuiter.runtime.cuda import (
    C_TYPES,
    HEADER,
    NVRTC_OPTIONS,
    ROW_THREADS,
    cuda_source,
    launch,
    nvrtc_compile,
    row_layout,
    row_source,
)
from tests.support.cuda_programs import ARCHS, CUDA_ON_HOST, DTYPES, LIBRARY_OPS, op_program
from tests.support.row_kernels import REAL, WRONG

#: Row kernels beyond the real ones: nesting, bools, per-row constants and results, passes of several
#: reductions, a dead reduction, a result that is a parameter, broadcasting per-row values back along the row.
EXTRA = {
    "nested_max": "def f(x):\n    return max(x - max(x))\n",
    "nested_mean": "def f(x):\n    return x - mean(x - mean(x)) * sum(x * mean(x))\n",
    "deep": "def f(x):\n    a = sum(x)\n    b = max(x * a)\n    c = mean(x - b)\n    return min(x + c) * a\n",
    "one_pass_two_sums": "def f(x, y):\n    return sum(x) + sum(x * y) * 0.5 - mean(y)\n",
    "count": "def f(x):\n    return sum(x > 0)\n",
    "any_all": "def f(x):\n    return max(x > 1) and not min(x > -1)\n",
    "share_positive": "def f(x):\n    return mean(x > 0) > 0.5\n",
    "per_element_bool": "def f(x):\n    return x > mean(x)\n",
    "isnan_any": "def f(x):\n    return max(isnan(x))\n",
    "constants": "def f(x):\n    return sum(2.0) + 10 * max(3.0) + 100 * mean(sum(x)) + min(x) * 0\n",
    "dead_reduction": "def f(x):\n    s = sum(x)\n    return x * 2\n",
    "returns_param": "def f(x, y):\n    s = max(y)\n    return x\n",
    "per_row_constant": "def f(x):\n    s = sum(x)\n    return 2.5\n",
    "mixed": "def f(x, y):\n    m = max(x)\n    return where(x > m - 1, y, m) + min(y * m)\n",
}

PROGRAMS = {**{k: v[0] for k, v in REAL.items()}, **{k: v[0] for k, v in WRONG.items()}, **EXTRA}


def row_programs() -> dict:
    return {name: compile_source(src) for name, src in PROGRAMS.items()}


def generated_row_programs(n: int, seed: int) -> list:
    """Generated programs that reduce (about a third of them do)."""
    results = compile_batch(generate.generate_batch(n, seed, params=(1, 4)), mode="serial").results
    return [p for p in results if p.reduces]


def _entries(ptx: str) -> set[str]:
    return set(re.findall(r"\.entry\s+(\w+)\(", ptx))


# ---------------------------------------------------------------------------------------------- the source


def test_row_kernels_render_a_team_per_row():
    p = compile_source(REAL["logsumexp"][0])
    src = cuda_source(p, "float32", "lse")
    assert src == row_source(p, "float32", "lse")
    assert "long long rows, long long n, int team)" in src
    assert "for (long long first = (long long)blockIdx.x * teams; first < rows;" in src
    assert src.count("for (long long j = lane; j < m; j += team)") == 2  # max, then sum(exp(x - m))
    assert "if (lane == 0 && m) out[row] = " in src  # a per-row result, written once, by a team with a row
    assert re.search(r"gi_reduce<1>\(g\d+, team\)", src) and "gi_reduce<0>" in src
    softmax = cuda_source(compile_source(REAL["softmax"][0]), "float32", "sm")
    assert softmax.count("j += team") == 3 and "out[row * n + j] = " in softmax


def test_reductions_of_one_depth_share_a_pass_and_dead_ones_cost_none():
    p = compile_source(EXTRA["one_pass_two_sums"])
    assert row_source(p, "float32", "k").count("j += team") == 1  # sum(x), sum(x*y), mean(y): one pass
    assert row_source(compile_source(EXTRA["dead_reduction"]), "float32", "k").count("j += team") == 1
    assert row_source(compile_source(EXTRA["deep"]), "float32", "k").count("j += team") == 4  # per-row result


def test_sum_rounds_once_to_narrow_dtypes():
    p = compile_source("def f(x):\n    return sum(x) + mean(x)\n")
    assert "py_round_f16(py_odd_f32(gi_reduce<0>" in row_source(p, "float16", "k")
    assert "py_round_bf16(py_odd_f32(gi_reduce<0>" in row_source(p, "bfloat16", "k")
    assert "((float)(gi_reduce<0>" in row_source(p, "float32", "k")
    assert "/ (double)n" in row_source(p, "float64", "k")


def test_elementwise_kernels_render_as_before():
    p = compile_source("def f(x, y):\n    return x * y + 1\n")
    src = cuda_source(p, "float32", "k")
    assert "GI_ROW_HELPERS" not in src and "out[i] = " in src and "rows" not in src


def test_empty_rows_are_refused_before_the_gpu():
    p = compile_source(REAL["softmax"][0])
    for shape in [(3, 0), (0,), ()]:
        with pytest.raises(ValueError, match="row kernel"):
            launch(p, [np.zeros(shape, np.float32)], "float32")
    with pytest.raises(ValueError, match="row kernel"):
        launch(compile_source("def f():\n    return sum(1.0)\n"), [], "float32")


# ---------------------------------------------------------------------------------------------- NVRTC


@pytest.mark.parametrize("dtype", DTYPES)
def test_row_kernels_compile_to_ptx(nvrtc, dtype):
    progs = row_programs() | {f"op_{op}": op_program(op) for op in REDUCTION_OPS}
    kernels = {name: cuda_source(p, dtype, name, header=False) for name, p in progs.items()}
    source = HEADER + "\n".join(kernels.values())
    for arch in ARCHS:
        ptx, log = nvrtc_compile(source, arch)
        assert log.strip() == "", log[:3000]
        assert _entries(ptx) == set(kernels), arch
    ptx, log = nvrtc_compile(cuda_source(progs["softmax"], dtype, "alone"))  # with its own header
    assert _entries(ptx) == {"alone"} and log.strip() == ""


@pytest.mark.parametrize("dtype", DTYPES)
def test_generated_row_kernels_compile(nvrtc, dtype):
    progs = generated_row_programs(600, 200 + DTYPES.index(dtype))
    assert len(progs) > 100
    kernels = {f"g{i}": cuda_source(p, dtype, f"g{i}", header=False) for i, p in enumerate(progs)}
    _, log = nvrtc_compile(HEADER + "\n".join(kernels.values()), "compute_80", NVRTC_OPTIONS + ("--fdevice-syntax-only",))
    assert log.strip() == "", log[:3000]
    sample = dict(list(kernels.items())[:40])
    ptx, log = nvrtc_compile(HEADER + "\n".join(sample.values()), "compute_90")
    assert log.strip() == "" and _entries(ptx) == set(sample)


# ---------------------------------------------------------------------------------------------- on the host

#: CUDA's execution model on the host, for CUDA_ON_HOST's kernels: gi_launch runs `grid` blocks one after the
#: other, each by `block` real threads (threadIdx and blockIdx thread-local); __syncthreads is a barrier of the
#: block, a warp shuffle an exchange through memory between the GI_WARP threads of a warp (behind a barrier of the
#: warp: every lane must take part, as on a GPU); atomics are atomic. A barrier that waits 20 s for a thread
#: that never comes (a divergent __syncthreads or shuffle) sets gi_hung and lets the others go, so a wrong kernel
#: fails the test instead of hanging it. Its state is static, and `build` compiles with -fno-gnu-unique, so that the
#: libraries of several tests in one process share nothing (CUDA_ON_HOST's inline variables would otherwise be one
#: process-wide symbol, and another test's blockIdx, not thread-local, would be this one's).
SIMT_HOST = r"""
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>
#ifndef GI_WARP
#define GI_WARP 4
#endif
#define __shared__
static py_dim3 blockDim{1}, gridDim{1};
static thread_local py_dim3 blockIdx{0}, threadIdx{0};
static int gi_hung = 0;
struct gi_barrier {
    std::mutex m;
    std::condition_variable cv;
    int size = 1, count = 0;
    long long generation = 0;
    void wait() {
        std::unique_lock<std::mutex> lock(m);
        const long long g = generation;
        if (++count >= size) { count = 0; ++generation; cv.notify_all(); return; }
        if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return generation != g; })) {
            gi_hung = 1; count = 0; ++generation; cv.notify_all();
        }
    }
};
static gi_barrier gi_block_barrier, gi_warp_barrier[1024];
static unsigned char gi_lane_value[1024][8];
static int gi_or_value;
inline void __syncthreads() { gi_block_barrier.wait(); }
inline int __syncthreads_or(int p) {
    __syncthreads();
    if (threadIdx.x == 0) __atomic_store_n(&gi_or_value, 0, __ATOMIC_SEQ_CST);
    __syncthreads();
    if (p) __atomic_store_n(&gi_or_value, 1, __ATOMIC_SEQ_CST);
    __syncthreads();
    const int r = __atomic_load_n(&gi_or_value, __ATOMIC_SEQ_CST);
    __syncthreads();
    return r;
}
template <class T> T gi_shuffle(T v, int source_lane) {
    const int warp = threadIdx.x / GI_WARP;
    memcpy(gi_lane_value[threadIdx.x], &v, sizeof(T));
    gi_warp_barrier[warp].wait();
    T r;
    memcpy(&r, gi_lane_value[warp * GI_WARP + source_lane], sizeof(T));
    gi_warp_barrier[warp].wait();
    return r;
}
template <class T> T __shfl_down_sync(unsigned, T v, int delta, int width = GI_WARP) {
    const int lane = threadIdx.x % GI_WARP;
    return gi_shuffle(v, lane % width + delta < width ? lane + delta : lane);
}
template <class T> T __shfl_sync(unsigned, T v, int source, int width = GI_WARP) {
    const int lane = threadIdx.x % GI_WARP;
    return gi_shuffle(v, lane / width * width + source % width);
}
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline long long atomicMin(long long* p, long long v) {
    long long o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v < o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return o;
}
inline unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
    unsigned long long o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (v > o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
    return o;
}
inline long long __double_as_longlong(double d) { long long i; memcpy(&i, &d, 8); return i; }
inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static double gi_smem[1 << 16];
/* body() over `grid` blocks of `block` threads (a multiple of GI_WARP, at most 1024); returns whether a barrier hung */
inline int gi_launch(long long grid, long long block, const std::function<void()>& body) {
    blockDim.x = block;
    gridDim.x = grid;
    gi_hung = 0;
    gi_block_barrier.size = (int)block;
    for (int w = 0; w < block / GI_WARP; ++w) gi_warp_barrier[w].size = GI_WARP;
    std::vector<std::thread> threads;
    for (long long t = 0; t < block; ++t)
        threads.emplace_back([&, t] {
            threadIdx.x = t;
            for (long long b = 0; b < grid; ++b) {
                blockIdx.x = b;
                body();
                __syncthreads();  /* the block's shared memory is the next one's */
            }
        });
    for (auto& t : threads) t.join();
    return gi_hung;
}
"""

_DIMS = "inline py_dim3 blockIdx{0}, blockDim{1}, threadIdx{0};\n"
assert _DIMS in CUDA_ON_HOST


def simt_headers(tmp_path) -> None:
    """cuda_fp16.h and cuda_bf16.h in tmp_path: CUDA_ON_HOST's stand-ins with SIMT_HOST's threads."""
    (tmp_path / "cuda_fp16.h").write_text(CUDA_ON_HOST.replace(_DIMS, "") + SIMT_HOST)
    (tmp_path / "cuda_bf16.h").write_text('#include "cuda_fp16.h"\n')


def build(tmp_path, cxx, source: str, name: str) -> ctypes.CDLL:
    simt_headers(tmp_path)
    (tmp_path / f"{name}.cpp").write_text(source)
    lib = tmp_path / f"{name}.so"
    r = subprocess.run([cxx, "-std=c++20", "-O1", "-pthread", "-ffp-contract=off", "-fno-gnu-unique", "-shared", "-fPIC",
                        f"-I{tmp_path}", "-o", str(lib), str(tmp_path / f"{name}.cpp")], capture_output=True,
                       text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return ctypes.CDLL(str(lib))


def host_row_kernels(progs: list, dtype: str, tmp_path, cxx):
    """`run(program, inputs, grid, block, team) -> output` for the programs' row kernels, compiled by g++ into one
    library (inputs broadcast to [rows, n] views, read in place through their strides, as `launch` does); team:
    threads a row, a power of two up to the host's warp of 4, or the whole block (the default)."""
    storage = C_TYPES[dtype][0]
    parts = [HEADER]
    for k, p in enumerate(progs):
        out = "bool" if p.returns_bool() else storage
        params = [f"const {storage}* x{i}, long long x{i}_rs, long long x{i}_es" for i in range(p.n_params)]
        args = [f"x{i}, x{i}_rs, x{i}_es" for i in range(p.n_params)]
        call = f"k{k}({', '.join(args + ['out', 'rows', 'n', 'team'])})"
        signature = ", ".join([*params, f"{out}* out", "long long rows", "long long n", "long long grid",
                               "long long block", "int team"])
        parts += [cuda_source(p, dtype, f"k{k}", header=False),
                  f'extern "C" int run_k{k}({signature}) {{ return gi_launch(grid, block, [&] {{ {call}; }}); }}']
    so = build(tmp_path, cxx, "\n".join(parts), f"rows_{dtype}")
    index = {id(p): k for k, p in enumerate(progs)}

    def run(p, xs, grid=3, block=16, team=None):
        shape, rows, n, views = row_layout(p, xs, dtype, np)  # as `launch` lays them out, in NumPy
        out = np.full(shape[:-1] if p.returns_per_row() else shape, np.nan if not p.returns_bool() else True,
                      bool if p.returns_bool() else dtype)
        args = []
        for v, rs, es in views:
            args += [ctypes.c_void_p(v.ctypes.data), ctypes.c_longlong(rs), ctypes.c_longlong(es)]
        fn = getattr(so, f"run_k{index[id(p)]}")
        hung = fn(*args, ctypes.c_void_p(out.ctypes.data), ctypes.c_longlong(rows), ctypes.c_longlong(n),
                  ctypes.c_longlong(min(grid, rows)), ctypes.c_longlong(block), ctypes.c_int(team or block))
        assert hung == 0, "a barrier or a shuffle waited for a thread that never came"
        return out

    return run


def row_inputs(rng, p, rows: int, n: int, dtype: str, domains=None) -> list:
    """Inputs of a row kernel: normal(0, 3) rows (probability rows where the kernel takes them), of the kernel
    dtype; the second and third parameters of layer norm broadcast along the rows ([n] and a scalar)."""
    if domains:
        return [rng.uniform(0.01, 1, (rows, n)).astype(dtype) for _ in range(p.n_params)]
    xs = [rng.normal(0, 3, (rows, n)).astype(dtype) for _ in range(p.n_params)]
    if p.n_params == 3:
        xs[1], xs[2] = rng.normal(1, 0.1, n).astype(dtype), np.asarray(0.5, dtype)
    return xs


def row_mismatches(p, got, xs, dtype: str) -> np.ndarray:
    """Per element of the result: whether `got` differs from runtime/reference.py's output beyond what the
    order of a float64 sum and the math library may change: the same (nan for nan, +0 for -0) or no further from
    the reference evaluated wider than 4 times the reference itself, give or take a few units of the dtype. A
    float64 kernel accumulates in float64 too, so there the order of the sum is worth more than a few units where
    terms cancel (`sum(x - mean(x))`): within 1e-9 of the largest value of the row."""
    want = reference.evaluate(p, xs, dtype)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    if want.dtype == bool:
        return got != want
    wide = "longdouble" if dtype == "float64" else "float64"
    exact = reference.evaluate(p, [np.asarray(x).astype(wide) for x in xs], wide)
    g, w = got.astype(wide), want.astype(wide)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    eps = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 2e-7, "float64": 4e-16}[dtype]
    with np.errstate(invalid="ignore", over="ignore"):
        near = np.abs(g - exact) <= 4 * np.abs(w - exact) + 8 * eps * (np.abs(exact) + 1e-30)
        if dtype == "float64" and exact.ndim:
            finite = np.where(np.isfinite(exact), np.abs(exact), 0)
            scale = finite.max(axis=-1, keepdims=True) if not p.returns_per_row() else finite
            near |= np.abs(g - exact) <= 1e-9 * (np.abs(exact) + scale)
    return ~(same | near)


HOST_DTYPES = ("float16", "float32", "float64")  # NumPy, and so the reference, has no bfloat16


@pytest.mark.parametrize("dtype", HOST_DTYPES)
def test_host_row_kernels_agree_with_the_reference(cxx, tmp_path, dtype):
    named = row_programs()
    generated = generated_row_programs(150, 7)
    run = host_row_kernels(list(named.values()) + generated, dtype, tmp_path, cxx)
    rng = np.random.default_rng(1)
    report = []
    for n in (1, 2, 3, 4, 5, 15, 16, 17, 31, 32, 33, 1000):
        for (name, p), block in zip(named.items(), [4, 8, 16, 32] * 10):
            domains = REAL[name][2] if name in REAL else None
            xs = row_inputs(rng, p, 5, n, dtype, domains)
            bad = row_mismatches(p, run(p, xs, grid=2, block=block), xs, dtype)
            if bad.any():
                report.append(f"{name}, rows of {n}, {block} threads: {bad.sum()} of {bad.size} differ")
            # short rows as launch runs them: a team of lanes a row, several rows a block of 16, the last
            # block's teams past the 5 rows idle (they must still take part in every shuffle)
            for team in {1 << max(0, n - 1).bit_length(), 4} if n <= 4 else ():
                bad = row_mismatches(p, run(p, xs, grid=1, block=16, team=team), xs, dtype)
                if bad.any():
                    report.append(f"{name}, rows of {n}, teams of {team}: {bad.sum()} of {bad.size} differ")
    assert not report, "\n".join(report)
    # generated row kernels, on the special values of the dtype: ill-conditioned, with sums whose float64 order
    # matters (1e38 + 1 - 1e38): most rows agree
    from tests.support.cuda_programs import inputs

    rows_off = []
    for p in generated:
        for n in (1, 33):
            xs = [inputs(rng, dtype, 40 * n).reshape(40, n) for _ in range(p.n_params)]
            bad = row_mismatches(p, run(p, xs, grid=3, block=8), xs, dtype)
            rows_off.append(bad.reshape(40, -1).any(axis=1).mean())
    assert np.mean(rows_off) < 0.05 and np.median(rows_off) == 0, sorted(rows_off)[-10:]


def test_host_row_kernels_on_long_rows_and_broadcasts(cxx, tmp_path):
    names = ("softmax", "layernorm", "logsumexp", "variance", "max_abs", "nested_max", "count", "share_positive")
    progs = {name: compile_source(PROGRAMS[name]) for name in names}
    run = host_row_kernels(list(progs.values()), "float32", tmp_path, cxx)
    rng = np.random.default_rng(2)
    for name, p in progs.items():
        xs = row_inputs(rng, p, 2, 100_000, "float32")
        assert not row_mismatches(p, run(p, xs, grid=1, block=32), xs, "float32").any(), name
    # a row-broadcast parameter [n] and a per-row one [rows, 1], read in place
    p = progs["layernorm"]
    x = rng.normal(0, 3, (4, 3, 33)).astype(np.float32)
    for gamma, beta in [(rng.normal(size=33), np.float32(0.5)), (rng.normal(size=(4, 3, 1)), rng.normal(size=33))]:
        xs = [x, np.asarray(gamma, np.float32), np.asarray(beta, np.float32)]
        got = run(p, xs, grid=5, block=8)
        assert got.shape == (4, 3, 33) and not row_mismatches(p, got, xs, "float32").any()
    xs = [x[:, ::-1, ::-2]]  # negative and wide strides
    assert not row_mismatches(progs["softmax"], run(progs["softmax"], xs), xs, "float32").any()


def test_host_nan_inf_and_signed_zeros(cxx, tmp_path):
    progs = {name: compile_source(src) for name, src in {
        "max": "def f(x):\n    return max(x)\n", "min": "def f(x):\n    return min(x)\n",
        "sum": "def f(x):\n    return sum(x)\n", "inv_max": "def f(x):\n    return 1 / max(x)\n",
        "inv_min": "def f(x):\n    return 1 / min(x)\n"}.items()}
    run = host_row_kernels(list(progs.values()), "float32", tmp_path, cxx)
    nan, inf = np.nan, np.inf
    x = np.array([[1, nan, 3, 4, 5, 6, 7, 8, 9], [1, 2, 3, 4, 5, 6, 7, 8, nan], [-inf] * 9, [inf, -inf] + [0] * 7,
                  [-0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -0.0], [-0.0] * 9, [0.0] * 9], np.float32)
    assert np.array_equal(run(progs["max"], [x], block=4), [nan, nan, -inf, inf, 0, 0, 0], equal_nan=True)
    assert np.array_equal(run(progs["min"], [x], block=4), [nan, nan, -inf, -inf, 0, 0, 0], equal_nan=True)
    assert np.array_equal(run(progs["sum"], [x], block=4), [nan, nan, -inf, nan, 0, 0, 0], equal_nan=True)
    # +0 wins max and -0 wins min, whatever the order (1 / max: inf where a +0 is in the row)
    assert run(progs["inv_max"], [x], block=4)[4:].tolist() == [inf, -inf, inf]
    assert run(progs["inv_min"], [x], block=4)[4:].tolist() == [-inf, -inf, inf]


def test_host_sum_rounds_once(cxx, tmp_path):
    """A float16 row whose float64 sum lies just above a tie of float16: rounding through float first would
    land on the tie and round it to even (down); rounding once goes up."""
    p = compile_source("def f(x):\n    return sum(x)\n")
    run = host_row_kernels([p], "float16", tmp_path, cxx)
    x = np.array([[1.0, 2.0**-11, 2.0**-24, 0.0]], np.float16)  # 1 + 2^-11 + 2^-24: float: 1 + 2^-11 (a tie)
    assert float(np.float32(np.float64(x.astype(np.float64).sum()))) == 1 + 2.0**-11
    got = run(p, [x], block=4)
    assert got.tolist() == [1 + 2.0**-10] == reference.evaluate(p, [x], "float16").tolist()


# ---------------------------------------------------------------------------------------------- on a GPU

GPU_LENGTHS = (1, 2, 31, 32, 33, 1000, 100_000)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", HOST_DTYPES)
def test_native_row_kernels_agree_with_the_reference(dtype):
    cupy = pytest.importorskip("cupy")
    from jupyter_gpuiter.runtime.cuda import compile_kernels

    named = row_programs()
    compile_kernels(list(named.values()), dtype)  # one NVRTC call for all of them
    rng = np.random.default_rng(3)
    report = []
    for n in GPU_LENGTHS:
        rows = 6 if n < 100_000 else 2
        for name, p in named.items():
            xs = row_inputs(rng, p, rows, n, dtype, REAL[name][2] if name in REAL else None)
            got = cupy.asnumpy(launch(p, [cupy.asarray(x) for x in xs], dtype))
            bad = row_mismatches(p, got, xs, dtype)
            if bad.any():
                report.append(f"{name}, rows of {n}: {bad.sum()} of {bad.size} differ")
    assert not report, "\n".join(report)


@pytest.mark.gpu
def test_native_row_kernels_many_rows_broadcasts_and_empty():
    cupy = pytest.importorskip("cupy")
    p = compile_source(REAL["layernorm"][0])
    rng = np.random.default_rng(4)
    # more rows than blocks: they stride. In float64, whose check measures an error against the row's scale: in
    # float32 (the first GPU run, 2026-12-04) some of 4.4 million elements land near 0 as `... * gamma + beta`
    # cancels, where an ULP of difference between CUDA's powf and the host's (before the cancellation) is a large
    # relative error, beyond the float32 check's few units of the result
    x = rng.normal(0, 3, (1_100_000, 4))
    gamma, beta = rng.normal(size=4), np.float64(0.25)
    got = cupy.asnumpy(launch(p, [cupy.asarray(x), cupy.asarray(gamma), cupy.asarray(beta)], "float64"))
    assert not row_mismatches(p, got, [x, gamma, beta], "float64").any()
    lse = compile_source(REAL["logsumexp"][0])
    assert launch(lse, [cupy.zeros((0, 5), cupy.float32)], "float32").shape == (0,)
    with pytest.raises(ValueError, match="must not be empty"):
        launch(lse, [cupy.zeros((5, 0), cupy.float32)], "float32")
    generated = [q for q in generated_row_programs(120, 9) if not set(q.ops) & LIBRARY_OPS]
    from tests.support.cuda_programs import inputs

    rows_off = []
    for q in generated:  # as on the host (test_host_row_kernels_agree_with_the_reference): most rows agree
        xs = [inputs(rng, "float32", 33 * 40).reshape(40, 33) for _ in range(q.n_params)]
        got = cupy.asnumpy(launch(q, [cupy.asarray(v) for v in xs], "float32"))
        rows_off.append(row_mismatches(q, got, xs, "float32").reshape(40, -1).any(axis=1).mean())
    assert np.mean(rows_off) < 0.05 and np.median(rows_off) == 0, sorted(rows_off)[-10:]
    assert ROW_THREADS % 32 == 0


def test_row_geometry():
    from jupyter_gpuiter.runtime.cuda import ROW_BLOCKS, row_geometry

    # short rows: a team of the next power of two of lanes, ROW_THREADS / team rows a block
    assert [row_geometry(1000, n)[2] for n in (1, 2, 3, 5, 8, 9, 17, 32)] == [1, 2, 4, 8, 8, 16, 32, 32]
    assert row_geometry(1024, 8) == (1024 // (ROW_THREADS // 8), ROW_THREADS, 8)
    assert row_geometry(1025, 8)[0] == 1024 // (ROW_THREADS // 8) + 1
    # longer ones: a block of as many warps as the row fills, up to ROW_THREADS
    assert row_geometry(10, 33) == (10, 64, 64) and row_geometry(10, 100_000) == (10, ROW_THREADS, ROW_THREADS)
    assert row_geometry(10**9, 8)[0] == row_geometry(10**9, 1000)[0] == ROW_BLOCKS  # beyond: the blocks stride
