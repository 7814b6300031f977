"""The fused tile evaluator on a GPU: fused.py's interpreter of the IR as one CUDA kernel (EvoGP's layout).

A block runs one (program, tile of TILE inputs): its threads copy the program's instructions into shared memory,
then each evaluates inputs of the tile one at a time (threadIdx.x, + blockDim.x, ...) with its registers in a
per-thread local array of GI_MAX_REGS values (SSA: register k is instruction k's result; local memory, which the
L1 cache holds), compares the output with the reference by compare.py's rule in double, and the block folds its
counts into per-program counters with atomics: failures (atomicAdd), first failing index (atomicMin), max abs /
rel / ULP error (atomicMax on the bits of non-negative doubles, which order like the values), inputs evaluated.
Early exit: a block whose program already failed at an earlier tile skips its work. Blocks are numbered tile-major,
so the first tiles of every program run first; `first_failure` is exact, and a failing program's failures, errors
and `evaluated` cover every tile up to its first failing one plus whatever later tiles had started by then (on
the CPU, fused.compare stops exactly there; on the host, serial block by block, this kernel does too).

Semantics are fused.py's (the ops of runtime/cuda.py, whose preamble this reuses): float registers for float16
and bfloat16, rounded after every op (a literal once, from float64; sigmoid's three steps each), no FMA
contraction. One kernel source per kernel dtype (`source`); the register cap is a macro, compiled at 64, 256 or
1024 as the longest program needs (longer programs are refused with a ValueError).

Row kernels (`row=n`, as fused.evaluate and fused.compare take it: the inputs are consecutive rows of n): a team of
threads runs one (program, row) — a block for rows longer than ROW_WARP_MAX, else the lanes of a warp (as many
as the row fills, a power of two up to 32, several rows a block), so that short rows do not leave most of a
block idle. The team walks the row once per reduction, in program order: each thread re-runs the instructions
before the reduction on its elements (the earlier reductions' values already in its registers) and accumulates
the operand in double; runtime/cuda.py's gi_reduce folds the team's partial results (warp shuffles, shared
memory across warps) and every thread keeps the value, rounded once to the kernel dtype (sum and mean; max and
min are exact, nan winning and -0 below +0, IEEE 754-2019's maximum and minimum, as fused.py), in the
reduction's register. A last walk runs the whole program per element and compares it with `want` (per element,
a per-row value repeated along its row); a row fails where one of its elements does, and the counters count rows
(failures, first failing row, rows evaluated) while the errors stay over elements. The early exit skips a block
whose rows all come after its program's first failing row. The float64 sum adds in another order than fused.py's
(NumPy's pairwise order): float64 row results may differ from fused.py's in the last bits; float32, float16 and
bfloat16 ones are the same wherever the float64 sum is exact (float32 values whose magnitudes span fewer than
29 - log2(n) binades) or rounds the same way in both orders, and may differ where the order of the float64
sum decides (1e38 + 1 - 1e38). `row_team` says how many threads run a row.
"""

from __future__ import annotations

import numpy as np

from ..lang.spec import IR_OP_INDEX as _OP
from ..lang.spec import REDUCTION_OPS
from . import fused
from .cuda import C_OPS, C_TYPES, HEADER, NVRTC_OPTIONS, ROUND, ROUND_ONCE, ROW_HELPERS, load_module
from .reference import check_row_length

TILE = 1024  # inputs per block, as fused.TILE: the early exit's granularity
THREADS = 256
MAX_REGS = 1024  # longest program (instructions, ret included)
_CAPS = (64, 256, MAX_REGS)
_MODE = {"float32": 0, "float64": 0, "float16": 1, "bfloat16": 2}
#: Row kernels: rows up to this long run on the lanes of a warp (a team of the next power of two up to 32 lanes),
#: longer ones on a whole block
ROW_WARP_MAX = 256

#: Ops whose C expression differs from runtime/cuda.py's: sigmoid rounds each of its three steps, as fused.py does
_OPS = {**C_OPS, "sigmoid": "((C)1 / GI_ROUND((C)1 + GI_ROUND(exp(-({a})))))"}

_KERNEL = r"""
#ifndef GI_MAX_REGS
#define GI_MAX_REGS 256
#endif
#ifndef GI_WARP
#define GI_WARP 32
#endif
typedef %(ctype)s C;
#define GI_MODE %(mode)d
#define GI_ROUND(v) %(round)s

/* Instructions in shared memory: imm[len] (double), ops[len], args[3 * len] (int, negative ones made 0). */
__device__ __forceinline__ int gi_load(const int* ops, const int* args, const double* imm, const int* lengths,
                                       int L, int b, double* s) {
    const int len = lengths[b];
    int* s_ops = (int*)(s + len);
    for (int k = threadIdx.x; k < len; k += blockDim.x) {
        s[k] = imm[(long long)b * L + k];
        s_ops[k] = ops[(long long)b * L + k];
#if GI_MODE
        /* a literal rounds once to the kernel dtype: to float rounded to odd here, to nearest even in gi_run */
        float c = (float)s[k];
        if ((s_ops[k] == %(const)d || s_ops[k] == %(bool)d) && fabsf(c) < py_inf<float>() && (double)c != s[k]) {
            const unsigned int u = __float_as_uint(c) - (fabs((double)c) > fabs(s[k]) ? 1u : 0u);
            s[k] = (double)__uint_as_float(u | 1u);
        }
#endif
        for (int j = 0; j < 3; ++j) {
            const int a = args[((long long)b * L + k) * 3 + j];
            s_ops[len + 3 * k + j] = a < 0 ? 0 : a;
        }
    }
    return len;
}

/* Instructions [0, end) of one program (len >= 1 instructions, the last ret) on input i of x [P, n]; r: the
   thread's registers. A reduction keeps its register: gi_reduce_row has put its row's value there. */
__device__ void gi_exec(const double* s, int len, int end, const C* __restrict__ x, long long n, long long i, C* r) {
    const int* ops = (const int*)(s + len);
    const int* args = ops + len;
    for (int k = 0; k < end; ++k) {
        const C a = r[args[3 * k]], b = r[args[3 * k + 1]], c = r[args[3 * k + 2]];
        C v;
        switch (ops[k]) {
        case %(param)d: v = x[(long long)s[k] * n + i]; break;
        case %(const)d: case %(bool)d: v = (C)s[k]; break;
%(cases)s
        case %(sum)d: case %(mean)d: case %(amax)d: case %(amin)d: v = r[k]; break;
        default: v = py_nan<C>();
        }
        r[k] = GI_ROUND(v);
    }
}

/* The whole program on input i: its result. */
__device__ __forceinline__ C gi_run(const double* s, int len, const C* __restrict__ x, long long n, long long i, C* r) {
    gi_exec(s, len, len - 1, x, n, i, r);
    return r[((const int*)(s + len))[len + 3 * (len - 1)]];
}

/* Row mode: every reduction of the program over the row of x [P, n] at base.. base + count (count 0: a team
   without a row, which still takes part in the folds), by a team of `team` threads (`lane` this thread's place in
   it): one walk over the row per reduction, in program order, re-running the instructions before it; the value,
   rounded once to the kernel dtype, goes to the reduction's register in every thread of the team. */
__device__ void gi_reduce_row(const double* s, int len, const C* __restrict__ x, long long n, long long base,
                              long long count, long long width, int lane, int team, C* r) {
    const int* ops = (const int*)(s + len);
    const int* args = ops + len;
    for (int k = 0; k < len - 1; ++k) {
        const int op = ops[k];
        if (op != %(sum)d && op != %(mean)d && op != %(amax)d && op != %(amin)d) continue;
        const int a = args[3 * k];
        double acc = op == %(amax)d ? -py_inf<double>() : op == %(amin)d ? py_inf<double>() : 0.0;
        for (long long j = lane; j < count; j += team) {
            gi_exec(s, len, k, x, n, base + j, r);
            const double v = (double)r[a];
            acc = op == %(amax)d ? gi_fold<1>(acc, v) : op == %(amin)d ? gi_fold<2>(acc, v) : acc + v;
        }
        if (op == %(amax)d || op == %(amin)d) {
            r[k] = (C)(op == %(amax)d ? gi_reduce<1>(acc, team) : gi_reduce<2>(acc, team));
        } else {
            acc = gi_reduce<0>(acc, team);
            if (op == %(mean)d) acc /= (double)width;
            r[k] = %(round_once)s;
        }
    }
}

extern "C" __global__ void gi_evaluate(const int* __restrict__ ops, const int* __restrict__ args,
                                       const double* __restrict__ imm, const int* __restrict__ lengths, int B,
                                       int L, const C* __restrict__ x, long long n, int tile, C* __restrict__ out) {
    extern __shared__ double gi_smem[];
    const int b = blockIdx.x %% B;
    const long long lo = (long long)(blockIdx.x / B) * tile, hi = lo + tile < n ? lo + tile : n;
    const int len = gi_load(ops, args, imm, lengths, L, b, gi_smem);
    __syncthreads();
    C r[GI_MAX_REGS];
    for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x)
        out[b * n + i] = len < 1 ? py_nan<C>() : gi_run(gi_smem, len, x, n, i, r);
}

/* Position of a finite value on the grid of the kernel dtype (neighbours 1 apart; +0 and -0 both 0). */
__device__ __forceinline__ long long gi_key(C v) {
#if GI_MODE == 0 && %(is_double)d
    long long k = __double_as_longlong(v);
    return k >= 0 ? k : (-9223372036854775807LL - 1) - k;
#else
    const unsigned int bits = __float_as_uint(v);
    long long mag = bits & 0x7fffffffu;
#if GI_MODE == 2
    mag >>= 16;
#elif GI_MODE == 1
    const long long e = mag >> 23;
    mag = e >= 113 ? ((e - 112) << 10) | ((mag & 0x7fffff) >> 13) : (long long)(__uint_as_float(mag) * 16777216.0f);
#endif
    return bits >> 31 ? -mag : mag;
#endif
}

/* compare.py's rule for one output (rtol/atol; nan equals nan), folding the finite errors into the maxima of
   absolute, relative and ULP error */
__device__ __forceinline__ bool gi_close(C got, C want, double rtol, double atol, double& ea, double& er, double& eu) {
    const double g = (double)got, e = (double)want, diff = fabs(g - e), ae = fabs(e);
    const bool finite = fabs(g) < py_inf<double>() && ae < py_inf<double>();
    if (finite) {
        ea = diff > ea ? diff : ea;
        if (ae > 0) er = diff / ae > er ? diff / ae : er;
        const long long ka = gi_key(got), kb = gi_key(want);
        const double u = (ka >= 0) == (kb >= 0) ? (double)(ka > kb ? ka - kb : kb - ka)
                                                : fabs((double)ka) + fabs((double)kb);
        eu = u > eu ? u : eu;
    }
    return g == e || (isnan(g) && isnan(e)) || (finite && diff <= atol + rtol * ae);
}

/* the error maxima folded with those of the lane o further down the warp */
__device__ __forceinline__ void gi_max_from(double& ea, double& er, double& eu, int o) {
    const double a = __shfl_down_sync(0xffffffffu, ea, o), q = __shfl_down_sync(0xffffffffu, er, o),
                 u = __shfl_down_sync(0xffffffffu, eu, o);
    ea = a > ea ? a : ea;
    er = q > er ? q : er;
    eu = u > eu ? u : eu;
}

__device__ __forceinline__ void gi_atomic_max(unsigned long long* p, double v) {
    const unsigned long long u = (unsigned long long)__double_as_longlong(v);  /* v >= 0: bits order as values */
    if (u > *(volatile unsigned long long*)p) atomicMax(p, u);
}

extern "C" __global__ void gi_compare(const int* __restrict__ ops, const int* __restrict__ args,
                                      const double* __restrict__ imm, const int* __restrict__ lengths, int B, int L,
                                      const C* __restrict__ x, const C* __restrict__ want, long long n, int tile,
                                      double rtol, double atol, int stop_early, unsigned long long* fails,
                                      long long* first, unsigned long long* abs_err, unsigned long long* rel_err,
                                      unsigned long long* ulp_err, unsigned long long* evaluated) {
    extern __shared__ double gi_smem[];
    const int b = blockIdx.x %% B;
    const long long lo = (long long)(blockIdx.x / B) * tile, hi = lo + tile < n ? lo + tile : n;
    const int len = gi_load(ops, args, imm, lengths, L, b, gi_smem);
    /* the barrier after the load; skip when the program failed at an earlier tile (first[] starts at n) */
    if (len < 1 || __syncthreads_or(threadIdx.x == 0 && stop_early && *(volatile long long*)&first[b] < lo)) return;
    C r[GI_MAX_REGS];
    unsigned long long f = 0;
    long long fst = n;
    double ea = 0, er = 0, eu = 0;
    for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const C got = gi_run(gi_smem, len, x, n, i, r);
        if (!gi_close(got, want[i], rtol, atol, ea, er, eu)) {
            if (fst == n) fst = i;
            ++f;
        }
    }
    for (int o = GI_WARP / 2; o > 0; o >>= 1) {
        f += __shfl_down_sync(0xffffffffu, f, o);
        const long long fo = __shfl_down_sync(0xffffffffu, fst, o);
        fst = fo < fst ? fo : fst;
        gi_max_from(ea, er, eu, o);
    }
    if (threadIdx.x %% GI_WARP == 0) {
        if (f) {
            atomicAdd(&fails[b], f);
            atomicMin(&first[b], fst);
        }
        gi_atomic_max(&abs_err[b], ea);
        gi_atomic_max(&rel_err[b], er);
        gi_atomic_max(&ulp_err[b], eu);
    }
    if (threadIdx.x == 0) atomicAdd(&evaluated[b], (unsigned long long)(hi - lo));
}

/* Row mode: block w runs program w %% B on rows (w / B) * (blockDim.x / team) .. , a row of `width` inputs per
   team of `team` threads; x [P, n] holds n / width rows. */
#define GI_ROW_SETUP \
    extern __shared__ double gi_smem[]; \
    const int b = blockIdx.x %% B; \
    const long long rows = n / width, lo = (long long)(blockIdx.x / B) * (blockDim.x / team); \
    const long long row = lo + threadIdx.x / team; \
    const int lane = threadIdx.x %% team; \
    const long long count = row < rows ? width : 0, base = row * width; \
    const int len = gi_load(ops, args, imm, lengths, L, b, gi_smem)

extern "C" __global__ void gi_evaluate_rows(const int* __restrict__ ops, const int* __restrict__ args,
                                            const double* __restrict__ imm, const int* __restrict__ lengths, int B,
                                            int L, const C* __restrict__ x, long long n, long long width, int team,
                                            C* __restrict__ out) {
    GI_ROW_SETUP;
    __syncthreads();
    if (len < 1) {
        for (long long j = lane; j < count; j += team) out[b * n + base + j] = py_nan<C>();
        return;
    }
    C r[GI_MAX_REGS];
    gi_reduce_row(gi_smem, len, x, n, base, count, width, lane, team, r);
    for (long long j = lane; j < count; j += team) out[b * n + base + j] = gi_run(gi_smem, len, x, n, base + j, r);
}

extern "C" __global__ void gi_compare_rows(const int* __restrict__ ops, const int* __restrict__ args,
                                           const double* __restrict__ imm, const int* __restrict__ lengths, int B,
                                           int L, const C* __restrict__ x, const C* __restrict__ want, long long n,
                                           long long width, int team, double rtol, double atol, int stop_early,
                                           unsigned long long* fails, long long* first, unsigned long long* abs_err,
                                           unsigned long long* rel_err, unsigned long long* ulp_err,
                                           unsigned long long* evaluated) {
    GI_ROW_SETUP;
    /* the barrier after the load; skip when the program failed at an earlier row (first[] starts at the rows) */
    if (len < 1 || __syncthreads_or(threadIdx.x == 0 && stop_early && *(volatile long long*)&first[b] < lo)) return;
    C r[GI_MAX_REGS];
    gi_reduce_row(gi_smem, len, x, n, base, count, width, lane, team, r);
    double ea = 0, er = 0, eu = 0, bad = 0;
    for (long long j = lane; j < count; j += team) {
        const long long i = base + j;
        const C got = gi_run(gi_smem, len, x, n, i, r);
        if (!gi_close(got, want[i], rtol, atol, ea, er, eu)) bad = 1;
    }
    bad = gi_reduce<1>(bad, team);  /* whether any element of the row failed */
    if (lane == 0 && count) {
        atomicAdd(&evaluated[b], 1ull);
        if (bad != 0) {
            atomicAdd(&fails[b], 1ull);
            atomicMin(&first[b], row);
        }
    }
    for (int o = GI_WARP / 2; o > 0; o >>= 1) {
        gi_max_from(ea, er, eu, o);
    }
    if (threadIdx.x %% GI_WARP == 0) {
        gi_atomic_max(&abs_err[b], ea);
        gi_atomic_max(&rel_err[b], er);
        gi_atomic_max(&ulp_err[b], eu);
    }
}
"""


def source(dtype: str = "float32") -> str:
    """The CUDA C of the evaluator for a kernel dtype: kernels gi_compare and gi_evaluate, and on rows
    gi_compare_rows and gi_evaluate_rows."""
    cases = "\n".join(f"        case {_OP[op]}: v = {expr.format(a='a', b='b', c='c')}; break;"
                      for op, expr in _OPS.items())
    return HEADER + ROW_HELPERS + _KERNEL % {
        "ctype": C_TYPES[dtype][1], "mode": _MODE[dtype], "round": ROUND[dtype].format("(v)"), "cases": cases,
        "param": _OP["param"], "const": _OP["const"], "bool": _OP["bool"], "is_double": int(dtype == "float64"),
        "round_once": ROUND_ONCE[dtype].format("acc"), **{op: _OP[op] for op in REDUCTION_OPS}}


_AVAILABLE: bool | None = None
_KERNELS: dict = {}


def available() -> bool:
    """A CUDA device that torch and CuPy both see (CuPy installed without a driver raises on first use)."""
    global _AVAILABLE
    if _AVAILABLE is None:
        try:
            import torch

            if not torch.cuda.is_available():
                _AVAILABLE = False
            else:
                import cupy

                _AVAILABLE = cupy.cuda.runtime.getDeviceCount() > 0
        except Exception:  # noqa: BLE001 - no CuPy, no driver, a broken install: no GPU evaluator
            _AVAILABLE = False
    return _AVAILABLE


def _cap(arrays: fused.ProgramArrays) -> int:
    longest = int(arrays.lengths.max(initial=0))
    if longest > MAX_REGS:
        raise ValueError(f"the GPU evaluator runs programs of at most {MAX_REGS} instructions; the longest here "
                         f"has {longest} (use the CPU evaluator, runtime/fused.py)")
    return next(c for c in _CAPS if c >= longest)


_NAMES = ("gi_compare", "gi_evaluate", "gi_compare_rows", "gi_evaluate_rows")


def _kernel(dtype: str, cap: int, name: str):

    key = (dtype, cap, name)
    if key not in _KERNELS:
        module = load_module(source(dtype), (*NVRTC_OPTIONS, f"-DGI_MAX_REGS={cap}"))
        _KERNELS.update({(dtype, cap, k): module.get_function(k) for k in _NAMES})
    return _KERNELS[key]


def _on(x):
    """CuPy on x's device and torch's current stream there: allocations, copies and launches stay in order."""
    import contextlib

    import cupy
    import torch

    stack = contextlib.ExitStack()
    stack.enter_context(cupy.cuda.Device(x.device.index))
    stack.enter_context(cupy.cuda.ExternalStream(torch.cuda.current_stream(x.device).cuda_stream, x.device.index))
    return stack


def row_team(row: int) -> int:
    """Threads that run one row of `row` inputs: the next power of two up to a warp's 32, a whole block of THREADS
    beyond ROW_WARP_MAX."""
    return THREADS if row > ROW_WARP_MAX else min(32, 1 << max(0, row - 1).bit_length())


def _launch(name, arrays, x, dtype, *rest, row: int = 0) -> None:
    """Run kernel `name` over every (program, tile), or with row > 0 every (program, group of rows) (inside
    _on(x)); the row kernels take (width, team) after n, which is rest[0] (want comes before it in compare)."""
    import cupy

    cap = _cap(arrays)
    B, n = len(arrays), x.shape[1]
    if row:
        team = row_team(row)
        blocks = B * -(-(n // row) // (THREADS // team))
    else:
        blocks = B * -(-n // TILE)
    if blocks == 0:
        return
    if blocks >= 2**31:
        raise ValueError(f"{B} programs x {n} inputs is more than one launch holds: split the inputs")
    dev = [cupy.asarray(np.ascontiguousarray(a, t)) for a, t in
           zip((arrays.ops, arrays.args, arrays.imm, arrays.lengths), (np.int32, np.int32, np.float64, np.int32))]
    shared = 24 * max(1, int(arrays.lengths.max(initial=0)))
    _kernel(dtype, cap, name)((blocks,), (THREADS,), (*dev, np.int32(B), np.int32(arrays.ops.shape[1]),
                                                     cupy.from_dlpack(x), *rest), shared_mem=shared)


def _registers(t, dtype: str, device=None):
    import torch

    reg = torch.float64 if dtype == "float64" else torch.float32
    return torch.as_tensor(t, device=device).to(reg).contiguous()


def _on_cuda(x) -> None:
    if x.device.type != "cuda" or x.ndim != 2:
        raise ValueError(f"the GPU evaluator takes inputs [P, n] on a CUDA device, not {tuple(x.shape)} on {x.device}")


def evaluate(arrays: fused.ProgramArrays, x, dtype: str = "float32", row: int = 0):
    """Outputs [B, n] (a torch tensor of the register dtype, on x's device) of every program over x [P, n]; with
    row > 0 row kernels over the n / row rows of x (a per-row value repeated along its row), as fused.evaluate."""
    _cap(arrays)  # refuse long programs and rows that are not (or are, for a row kernel) first
    check_row_length(x.shape[1], row, arrays.reduces)
    import cupy
    import torch

    x = _registers(x, dtype)
    _on_cuda(x)
    out = torch.empty((len(arrays), x.shape[1]), dtype=x.dtype, device=x.device)
    with _on(x):
        if row:
            _launch("gi_evaluate_rows", arrays, x, dtype, np.int64(x.shape[1]), np.int64(row),
                    np.int32(row_team(row)), cupy.from_dlpack(out), row=row)
        else:
            _launch("gi_evaluate", arrays, x, dtype, np.int64(x.shape[1]), np.int32(TILE), cupy.from_dlpack(out))
    return out


def compare(arrays: fused.ProgramArrays, x, want, dtype: str, rtol: float, atol: float,
            stop_early: bool = True, row: int = 0) -> fused.Comparison:
    """fused.compare on a GPU: x [P, n] a torch CUDA tensor, want [n] a tensor or array (both of the register
    dtype, else converted: float64 for float64, float32 holding the kernel dtype's values for the others);
    returns NumPy arrays (see the module's note on early exit). With row > 0, row kernels over the n / row rows of
    x, `want` still per element, and the Comparison counting rows (failures, first failing row, rows evaluated),
    as fused.compare."""
    _cap(arrays)  # refuse long programs and rows that are not (or are, for a row kernel) first
    check_row_length(x.shape[1], row, arrays.reduces)
    import cupy

    x = _registers(x, dtype)
    _on_cuda(x)
    want = _registers(want, dtype, x.device)
    B, n = len(arrays), x.shape[1]
    units = n // row if row else n  # what the counters count: rows or inputs
    with _on(x):
        fails, abs_err, rel_err, ulp_err, evaluated = (cupy.zeros(B, dtype=cupy.uint64) for _ in range(5))
        first = cupy.full(B, units, dtype=cupy.int64)
        counters = (np.float64(rtol), np.float64(atol), np.int32(bool(stop_early)), fails, first, abs_err, rel_err,
                    ulp_err, evaluated)
        if row:
            _launch("gi_compare_rows", arrays, x, dtype, cupy.from_dlpack(want), np.int64(n), np.int64(row),
                    np.int32(row_team(row)), *counters, row=row)
        else:
            _launch("gi_compare", arrays, x, dtype, cupy.from_dlpack(want), np.int64(n), np.int32(TILE), *counters)
        first = first.get()
        return fused.Comparison(fails.get().astype(np.int64), np.where(first >= units, -1, first),
                                abs_err.get().view(np.float64), rel_err.get().view(np.float64),
                                ulp_err.get().view(np.float64), evaluated.get().astype(np.int64))


__all__ = ["MAX_REGS", "ROW_WARP_MAX", "THREADS", "TILE", "available", "compare", "evaluate", "row_team", "source"]
