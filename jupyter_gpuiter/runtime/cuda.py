"""Native CUDA kernels: a Program rendered as CUDA C (one thread per element; a row kernel, a team per row),
compiled through CuPy.

The renderer is data, tinygrad-style: one format string per IR op; Python's semantics where C differs
(floor division, modulo and min/max follow Python and NumPy; clip propagates nan as torch does) live
in a small device preamble. float16 and bfloat16 compute each op in float and round its result to the
kernel dtype, as torch does (but for the ops whose result is exact anyway); a literal is rounded once,
from the float64 the IR holds, to the kernel dtype. The source needs nothing from the host's C library
(NVRTC has none: nan and inf are spelled by their bits), and it is compiled with FMA contraction off
(`NVRTC_OPTIONS`), so `a * b + c` rounds twice, as in NumPy and torch. NVRTC compiles it to a cubin for the
device with exactly those options (`load_module`), never through `cupy.RawModule(code=...)`, which appends
`-ftz=true` to every compile: float32 subnormals would flush to zero (`-x` of one gives -0, `x != 0` is false),
as they never do in NumPy, torch or the CPU evaluator (the first run on a GPU, 2026-12-04, caught it). Compiled
kernels are cached by name (a hash of the program and dtype) in memory; `compile_kernels` compiles many in one
NVRTC call. `nvrtc_compile` compiles a source to PTX, or to a cubin for an `sm_` arch, with NVRTC alone, no
GPU needed (tests/runtime/test_cuda_nvrtc.py).

Row kernels (a program with a reduction, docs/language.md "Row kernels") render as one team of threads per
row, the blocks striding over the rows when there are more rows than blocks; the threads of a team stride over
the row's elements, so a row may have any length (`row_geometry`: a row of up to 32 elements goes to the next
power of two of lanes of a warp, several rows a block; a longer one to a whole block of 64 to `ROW_THREADS`
threads, as many as the row fills). Every value the program needs after a reduction is *recomputed*, not kept: the reductions
are grouped into passes by how many reductions deep they are (`sum(x) + sum(x * x)` is one pass, layer
norm's `mean((x - mean(x)) ** 2)` two), and each pass runs over the row again, recomputing from the inputs
the elementwise instructions its reductions' operands need, with the per-row values of the earlier passes
in registers. A last pass computes the per-element result and writes it; a per-row result is written once,
by the team's first lane. Recomputing costs a re-read of the row per pass (from L2 for rows that fit) and the
elementwise arithmetic again, and needs no scratch memory, no limit on the row's length and no second
launch; keeping the registers instead would need a [rows, n, live registers] buffer in global memory, written
and read back, which costs more memory traffic than the re-read for every kernel here (the inputs are a
few values per element). Only the instructions the result depends on are rendered (a reduction bound to
a name never read costs no pass). Each thread accumulates its elements in double; a block reduction (warp
shuffles within the team; for a whole block then one double per warp in shared memory, folded in the same order by every thread, so all hold
the same value) gives the row's total, which is rounded once to the kernel dtype (for float16 and bfloat16
through float rounded to odd, so never twice), `mean` dividing by n in double first. `max` and `min` fold
exactly, a nan anywhere giving nan as np.max does; between +0 and -0, max takes +0 and min -0 (NumPy's
choice there depends on the order and the SIMD path). Inputs are given with a row stride and an element
stride each, so a row-broadcast parameter (layer norm's gamma of shape [n]) is read in place, not copied.
A team per row keeps the GPU busy when there are many rows (the first GPU run, with a block per row, moved
rows of 8 at 25 GB/s: three quarters of each warp idle, a million one-warp blocks; the teams are unmeasured
yet); a few very long rows (16 rows of 10^6) use as many blocks, a few SMs, and would need a row split across
blocks (a second reduction level) to go faster.
"""

from __future__ import annotations

import hashlib
import math
import tempfile
import warnings
from pathlib import Path

from ..ir import Program
from ..lang.spec import IR_OP_BY_NAME, REDUCTION_OPS

C_TYPES = {"float16": ("__half", "float"), "bfloat16": ("__nv_bfloat16", "float"), "float32": ("float", "float"),
           "float64": ("double", "double")}
ROUND = {"float16": "py_round_f16({})", "bfloat16": "py_round_bf16({})", "float32": "{}", "float64": "{}"}
LOAD = {"float16": "__half2float({})", "bfloat16": "__bfloat162float({})", "float32": "{}", "float64": "{}"}
STORE = {"float16": "__float2half_rn({})", "bfloat16": "__float2bfloat16_rn({})", "float32": "{}", "float64": "{}"}

#: IR op -> C expression over operands {a} {b} {c} of the compute type C.
C_OPS = {
    "neg": "(-{a})", "pos": "({a})", "not": "(({a}) == 0 ? (C)1 : (C)0)",
    "add": "({a} + {b})", "sub": "({a} - {b})", "mul": "({a} * {b})", "div": "({a} / {b})",
    "floordiv": "py_floordiv({a}, {b})", "mod": "py_mod({a}, {b})", "pow": "pow({a}, {b})",
    "lt": "(({a} < {b}) ? (C)1 : (C)0)", "le": "(({a} <= {b}) ? (C)1 : (C)0)", "gt": "(({a} > {b}) ? (C)1 : (C)0)",
    "ge": "(({a} >= {b}) ? (C)1 : (C)0)", "eq": "(({a} == {b}) ? (C)1 : (C)0)", "ne": "(({a} != {b}) ? (C)1 : (C)0)",
    "and": "(({a}) != 0 ? ({b}) : ({a}))", "or": "(({a}) != 0 ? ({a}) : ({b}))",
    "select": "(({a}) != 0 ? ({b}) : ({c}))",
    "abs": "fabs({a})", "min": "(({b}) < ({a}) ? ({b}) : ({a}))", "max": "(({b}) > ({a}) ? ({b}) : ({a}))",
    "sqrt": "sqrt({a})", "exp": "exp({a})", "expm1": "expm1({a})", "log": "log({a})", "log1p": "log1p({a})",
    "log2": "log2({a})", "log10": "log10({a})", "sin": "sin({a})", "cos": "cos({a})", "tan": "tan({a})",
    "asin": "asin({a})", "acos": "acos({a})", "atan": "atan({a})", "atan2": "atan2({a}, {b})",
    "sinh": "sinh({a})", "cosh": "cosh({a})", "tanh": "tanh({a})", "erf": "erf({a})", "floor": "floor({a})",
    "ceil": "ceil({a})", "clip": "py_clip({a}, {b}, {c})", "sigmoid": "((C)1 / ((C)1 + exp(-({a}))))",
    "copysign": "copysign({a}, {b})", "hypot": "py_hypot({a}, {b})", "isnan": "(isnan({a}) ? (C)1 : (C)0)",
    "isinf": "(isinf({a}) ? (C)1 : (C)0)", "float": "({a})",
}

#: Ops whose result is exact in the kernel dtype when their operands are (one of them, 0 or 1, an integer
#: no wider than they are, or nan): float16 and bfloat16 need not round it.
EXACT_OPS = frozenset({"neg", "pos", "not", "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "select", "abs", "min",
                       "max", "floor", "ceil", "clip", "copysign", "isnan", "isinf", "float"})

#: Device helpers for the ops whose Python semantics C lacks, and nan and inf by their bits (NVRTC has no
#: host <math.h>, so no NAN or INFINITY). Diagnostic 177, "variable declared but never referenced", is off:
#: the IR keeps the register of a name that is bound but never read.
PREAMBLE = r"""
#pragma nv_diag_suppress 177
__device__ __forceinline__ float py_round_f16(float x) { return __half2float(__float2half_rn(x)); }
__device__ __forceinline__ float py_round_bf16(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }
template <typename C> __device__ __forceinline__ C py_nan();
template <> __device__ __forceinline__ float py_nan<float>() { return __int_as_float(0x7fc00000); }
template <> __device__ __forceinline__ double py_nan<double>() { return __longlong_as_double(0x7ff8000000000000LL); }
template <typename C> __device__ __forceinline__ C py_inf();
template <> __device__ __forceinline__ float py_inf<float>() { return __int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double py_inf<double>() { return __longlong_as_double(0x7ff0000000000000LL); }
template <typename C> __device__ __forceinline__ C py_mod(C a, C b) {
    C m = fmod(a, b);
    if (b == 0) return m;
    if (m != 0) { if ((b < 0) != (m < 0)) m += b; } else { m = copysign((C)0, b); }
    return m;
}
template <typename C> __device__ __forceinline__ C py_floordiv(C a, C b) {
    if (b == 0) return a / b;
    C m = fmod(a, b);
    C d = (a - m) / b;
    if (m != 0 && ((b < 0) != (m < 0))) d -= 1;
    if (d == 0) return copysign((C)0, a / b);
    C f = floor(d);
    if (d - f > (C)0.5) f += 1;
    return f;
}
/* CUDA's hypot, but where it overflows for finite operands (it is 1-2 ULP off: hypot(3, DBL_MAX) gave inf),
   max * sqrt(1 + (min / max)^2), which overflows only when the true result does */
template <typename C> __device__ __forceinline__ C py_hypot(C a, C b) {
    const C h = hypot(a, b);
    if (!isinf(h) || isinf(a) || isinf(b)) return h;
    const C x = fabs(a), y = fabs(b), m = x > y ? x : y, q = (x > y ? y : x) / m;
    return m * sqrt((C)1 + q * q);
}
template <typename C> __device__ __forceinline__ C py_clip(C x, C lo, C hi) {
    C m = (isnan(x) || isnan(lo)) ? py_nan<C>() : (x > lo ? x : lo);
    return (isnan(m) || isnan(hi)) ? py_nan<C>() : (m < hi ? m : hi);
}
"""

#: NVRTC's options for every rendered kernel: no FMA contraction (each op rounds, as in NumPy and torch);
#: IEEE division and square root and subnormals kept, which are NVRTC's defaults, spelled out.
NVRTC_OPTIONS = ("--std=c++17", "--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true")

#: (significand bits, exponent of the smallest subnormal, largest finite) of the kernel dtypes narrower than
#: the float64 an IR literal holds.
_FORMATS = {"float16": (11, -24, 65504.0), "bfloat16": (8, -133, 3.3895313892515355e38),
            "float32": (24, -149, 3.4028234663852886e38)}


def round_to_dtype(v: float, dtype: str) -> float:
    """`v` rounded once, to nearest with ties to even, to `dtype` (returned as a Python float, exact in that
    dtype): what NumPy's `np.float16(v)` does, where a cast through float32 would round twice."""
    if dtype not in _FORMATS or not math.isfinite(v) or v == 0:
        return v
    bits, min_exp, top = _FORMATS[dtype]
    quantum = math.ldexp(1.0, max(math.frexp(v)[1] - bits, min_exp))
    r = round(v / quantum) * quantum
    return math.copysign(math.inf, v) if abs(r) > top else float(r)


def _literal(v: float, dtype: str) -> str:
    """A literal of the compute type C holding `v` rounded to the kernel dtype (exact in C)."""
    v = round_to_dtype(float(v), dtype)
    if math.isnan(v):
        return "py_nan<C>()"
    if math.isinf(v):
        return "py_inf<C>()" if v > 0 else "(-py_inf<C>())"
    return f"((C){v!r})"


HEADER = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" + PREAMBLE

#: Row kernels: per reduction, the fold gi_fold and gi_reduce run (0 sum, 1 max, 2 min) and a thread's start value.
REDUCE_FOLDS = {"sum": 0, "mean": 0, "amax": 1, "amin": 2}
REDUCE_START = {0: "0.0", 1: "(-py_inf<double>())", 2: "py_inf<double>()"}
#: A reduction's float64 total rounded once to the kernel dtype (a value of the compute type C).
ROUND_ONCE = {"float16": "py_round_f16(py_odd_f32({}))", "bfloat16": "py_round_bf16(py_odd_f32({}))",
              "float32": "((float)({}))", "float64": "({})"}

#: What row kernels add to HEADER (after it; guarded, so every row kernel of a file may carry it): rounding a
#: double once to float16 or bfloat16, the folds of the reductions, and the reduction over a team of threads.
ROW_HELPERS = r"""
#ifndef GI_ROW_HELPERS
#define GI_ROW_HELPERS
#ifndef GI_WARP
#define GI_WARP 32
#endif
/* d rounded to float, to odd where inexact: rounding that to float16 or bfloat16 (to nearest even) is d rounded
   once, since float keeps more than two bits beyond theirs */
__device__ __forceinline__ float py_odd_f32(double d) {
    float c = (float)d;
    if (fabsf(c) < py_inf<float>() && (double)c != d) {
        const unsigned int u = __float_as_uint(c) - (fabs((double)c) > fabs(d) ? 1u : 0u);
        c = __uint_as_float(u | 1u);
    }
    return c;
}
/* a fold step: 0 sum; 1 max, 2 min, where a nan wins (np.max) and +0 beats -0 for max, -0 beats +0 for min, so
   the result depends on no order */
template <int OP> __device__ __forceinline__ double gi_fold(double a, double b) {
    if (OP == 0 || isnan(a) || isnan(b)) return a + b;
    if (OP == 1) return (b > a || (b == a && signbit(a))) ? b : a;
    return (b < a || (b == a && signbit(b))) ? b : a;
}
/* one double per warp of the block, for gi_reduce */
__shared__ double gi_row_sh[32];
/* v folded over a team of `team` threads, the same value returned to each: a power of two up to GI_WARP (aligned
   lanes of one warp: shuffles only), or the whole block (blockDim.x a multiple of GI_WARP: shuffles, then the
   warps' partial folds through shared memory, folded in the same order by every thread). Every thread of the
   team calls it (a thread with no elements passes the fold's start value). */
template <int OP> __device__ double gi_reduce(double v, int team) {
    const int w = team < GI_WARP ? team : GI_WARP;
    for (int o = w / 2; o > 0; o >>= 1) v = gi_fold<OP>(v, __shfl_down_sync(0xffffffffu, v, o, w));
    if (team <= GI_WARP) return __shfl_sync(0xffffffffu, v, 0, w);
    __syncthreads();  /* every thread has read gi_row_sh since the last reduction */
    if (threadIdx.x % GI_WARP == 0) gi_row_sh[threadIdx.x / GI_WARP] = v;
    __syncthreads();
    v = gi_row_sh[0];
    for (int k = 1; k < team / GI_WARP; ++k) v = gi_fold<OP>(v, gi_row_sh[k]);
    return v;
}
#endif
"""


def cuda_source(program: Program, dtype: str = "float32", name: str = "kernel", header: bool = True) -> str:
    """CUDA C for `program`: one thread per element, inputs and output of the kernel dtype (with the
    includes and the preamble unless header=False, for putting several kernels in one file); a row kernel
    renders as `row_source` does."""
    if program.reduces:
        return row_source(program, dtype, name, header)
    storage, ctype = C_TYPES[dtype]
    params = ", ".join(f"const {storage}* __restrict__ x{i}" for i in range(program.n_params))
    out_type = "bool" if program.returns_bool() else storage
    lines = [HEADER if header else "",
             (f'extern "C" __global__ void {name}({params}{", " if params else ""}{out_type}* __restrict__ out, '
              "long long n) {"),
             f"    typedef {ctype} C;",
             "    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
             "    if (i >= n) return;"]
    for k, (op, (a, b, c), imm) in enumerate(zip(program.ops, program.args, program.imms)):
        if op == "ret":
            value = f"r{a}"
            stored = f"({value} != 0)" if program.returns_bool() else STORE[dtype].format(value)
            lines.append(f"    out[i] = {stored};")
            break
        expr = _expression(op, (a, b, c), imm, dtype, lambda j: f"x{j}[i]")
        lines.append(f"    const C r{k} = {expr};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _expression(op: str, args: tuple[int, int, int], imm: float, dtype: str, load) -> str:
    """The C expression of one elementwise instruction (its value in the compute type C); load(j) is how the
    kernel reads its parameter j."""
    if op == "param":
        return LOAD[dtype].format(load(int(imm)))
    if op in ("const", "bool"):
        return _literal(imm, dtype)
    a, b, c = args
    assert IR_OP_BY_NAME[op].nargs <= 3 and op in C_OPS, op
    expr = C_OPS[op].format(a=f"r{a}", b=f"r{b}", c=f"r{c}")
    return expr if op in EXACT_OPS else ROUND[dtype].format(expr)


def _operands(program: Program) -> list[tuple[int, ...]]:
    return [args[: IR_OP_BY_NAME[op].nargs] for op, args in zip(program.ops, program.args)]


def row_source(program: Program, dtype: str = "float32", name: str = "kernel", header: bool = True) -> str:
    """CUDA C for a row kernel (see the module's note): a team of `team` threads per row (a power of two within a
    warp, or the whole block), the blocks striding over the rows; parameter j
    is (x{j}, its row stride, its element stride) in elements; `out` is [rows, n] for a per-element result,
    [rows] for a per-row one. With header=False, ROW_HELPERS is still included (it is guarded), HEADER not."""
    storage, ctype = C_TYPES[dtype]
    ops, imms = program.ops, program.imms
    operands = _operands(program)
    ret = operands[-1][0]
    assert ops[-1] == "ret", "a program ends with ret"
    live = [False] * len(ops)  # what the result depends on
    live[ret] = True
    for k in range(ret, -1, -1):
        if live[k]:
            for j in operands[k]:
                live[j] = True
    per_row = program.per_row()
    depth = []  # how many passes a value waits for: a reduction is one pass deeper than its operand
    for op, ks in zip(ops, operands):
        d = max((depth[j] for j in ks), default=0)
        depth.append(d + 1 if op in REDUCTION_OPS else d)
    reductions = [k for k in range(len(ops) - 1) if live[k] and ops[k] in REDUCTION_OPS]
    passes = max((depth[k] for k in reductions), default=0)

    def instruction(k: int, indent: str) -> str:
        load = lambda i: f"x{i}[row * x{i}_rs + j * x{i}_es]"  # parameter i at element j of the row
        return f"{indent}const C r{k} = {_expression(ops[k], program.args[k], imms[k], dtype, load)};"

    def per_row_values(p: int) -> list[str]:
        """The per-row instructions (not reductions) whose last operand is ready after pass p."""
        return [instruction(k, " " * 8) for k in range(len(ops) - 1)
                if live[k] and per_row[k] and depth[k] == p and ops[k] not in REDUCTION_OPS]

    def per_element(roots: list[int]) -> list[str]:
        """The per-element instructions `roots` need, in program order (per-row ones are ready in registers)."""
        need, todo = set(), [k for k in roots if not per_row[k]]
        while todo:
            k = todo.pop()
            if k not in need:
                need.add(k)
                todo += [j for j in operands[k] if not per_row[j]]
        return [instruction(k, " " * 12) for k in sorted(need)]

    params = "".join(f"const {storage}* __restrict__ x{i}, long long x{i}_rs, long long x{i}_es, "
                     for i in range(program.n_params))
    out_type = "bool" if program.returns_bool() else storage
    lines = [HEADER if header else "", ROW_HELPERS,
             (f'extern "C" __global__ void {name}({params}{out_type}* __restrict__ out, long long rows, long long n, '
             "int team) {"),
             f"    typedef {ctype} C;",
             "    const int lane = threadIdx.x % team;",
             "    const long long teams = blockDim.x / team;",
             "    /* every thread of the block runs every round (the shuffles and barriers need them all); a team past",
             "       the last row has no elements (m = 0) and writes nothing */",
             "    for (long long first = (long long)blockIdx.x * teams; first < rows; first += (long long)gridDim.x * teams) {",
             "        const long long row = first + threadIdx.x / team, m = row < rows ? n : 0;",
             *per_row_values(0)]
    for p in range(1, passes + 1):
        now = [k for k in reductions if depth[k] == p]
        lines += [f"        double g{k} = {REDUCE_START[REDUCE_FOLDS[ops[k]]]};" for k in now]
        lines += ["        for (long long j = lane; j < m; j += team) {",
                  *per_element([operands[k][0] for k in now])]
        for k in now:
            fold = REDUCE_FOLDS[ops[k]]
            value = f"(double)r{operands[k][0]}"
            lines.append(f"            g{k} += {value};" if fold == 0 else f"            g{k} = gi_fold<{fold}>(g{k}, {value});")
        lines.append("        }")
        for k in now:
            total = f"gi_reduce<{REDUCE_FOLDS[ops[k]]}>(g{k}, team)"
            if ops[k] == "mean":
                total = f"{total} / (double)n"
            value = ROUND_ONCE[dtype].format(total) if ops[k] in ("sum", "mean") else f"(C){total}"
            lines.append(f"        const C r{k} = {value};")
        lines += per_row_values(p)
    store = (lambda v: f"({v} != 0)") if program.returns_bool() else STORE[dtype].format
    if per_row[ret]:
        lines.append(f"        if (lane == 0 && m) out[row] = {store(f'r{ret}')};")
    else:
        lines += ["        for (long long j = lane; j < m; j += team) {", *per_element([ret]),
                  f"            out[row * n + j] = {store(f'r{ret}')};", "        }"]
    lines += ["    }", "}"]
    return "\n".join(lines) + "\n"


#: Compiled kernels by name (a hash of the program and dtype): a name holds one source, so it never goes stale.
_KERNELS: dict = {}
_MAX_KERNELS = 4096


def _kernel_name(program: Program, dtype: str) -> str:
    return "k_" + source_hash(program.text() + dtype)


def compile_kernels(programs: list[Program], dtype: str = "float32") -> list:
    """The native kernels of `programs`, compiled together in one NVRTC call (one CuPy module) where they are
    not compiled yet: a batch of candidates pays NVRTC's start-up and the header once. `launch` uses them."""
    names = [_kernel_name(p, dtype) for p in programs]
    todo = {n: p for n, p in zip(names, programs) if n not in _KERNELS}
    if todo:
        if len(_KERNELS) + len(todo) > _MAX_KERNELS:
            _KERNELS.clear()
            todo = dict(zip(names, programs))
        source = HEADER + "\n".join(cuda_source(p, dtype, n, header=False) for n, p in todo.items())
        module = load_module(source)
        _KERNELS.update({n: module.get_function(n) for n in todo})
    return [_KERNELS[n] for n in names]


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


#: The CuPy dtype of each kernel dtype (CuPy has no bfloat16).
CUPY_DTYPES = {"float16": "float16", "float32": "float32", "float64": "float64"}


#: Threads of a row kernel's block, at most; any kernel launches with 256 threads, whatever registers it needs.
#: A row of at most ROW_WARP elements goes to a team of the next power of two of lanes within a warp (ROW_THREADS
#: / team rows a block: shuffles only); a longer one to a whole block of ROW_WARP * ceil(n / ROW_WARP) threads, up
#: to ROW_THREADS. Blocks, at most: they stride over the rows beyond.
ROW_THREADS = 256
ROW_WARP = 32
ROW_BLOCKS = 1 << 20


def row_geometry(rows: int, n: int) -> tuple[int, int, int]:
    """(blocks, threads a block, team: threads a row) of a row kernel's launch over `rows` rows of `n`."""
    if n <= ROW_WARP:
        team = 1 << max(0, n - 1).bit_length()
        threads = ROW_THREADS
    else:
        team = threads = min(ROW_THREADS, ROW_WARP * -(-n // ROW_WARP))
    return min(-(-rows // (threads // team)), ROW_BLOCKS), threads, team


def launch(program: Program, inputs: list, dtype: str = "float32"):
    """Run the native kernel on CuPy arrays of one shape and dtype; returns a CuPy array. A row kernel takes
    arrays that broadcast together (the last axis is the row; a row-broadcast one is read in place) and
    raises ValueError when the rows are empty; its result drops the last axis when it is per row."""
    if dtype not in CUPY_DTYPES:
        raise ValueError(f"native CUDA kernels run on float16, float32 or float64 CuPy arrays, not {dtype} "
                         "(CuPy has no bfloat16: use torch tensors for bfloat16)")
    if program.reduces:
        return _launch_rows(program, inputs, dtype)
    import cupy

    (kernel,) = compile_kernels([program], dtype)
    n = inputs[0].size if inputs else 1
    # the output starts poisoned (nan / True), so a kernel that skips elements cannot pass for one that ran
    out = cupy.full(inputs[0].shape if inputs else (), True if program.returns_bool() else float("nan"),
                    dtype=bool if program.returns_bool() else CUPY_DTYPES[dtype])
    if n == 0:  # an empty grid is not a launch CUDA accepts
        return out
    threads = 256
    kernel(((n + threads - 1) // threads,), (threads,), (*[cupy.ascontiguousarray(x) for x in inputs], out,
                                                         cupy.int64(n)))
    return out


def row_layout(program: Program, inputs: list, dtype: str, xp) -> tuple[tuple, int, int, list]:
    """A row kernel's launch geometry: (broadcast shape, rows, row length n, per input (a [rows, n] view of the
    kernel dtype, its row stride, its element stride), strides in elements). xp is numpy or cupy; a view is the
    input itself where the broadcast allows (strides 0 along broadcast axes), else a copy. ValueError (from
    reference.check_rows) when the rows are empty or there are none."""
    import numpy as np

    from .reference import check_rows

    shape = np.broadcast_shapes(*[np.shape(x) for x in inputs]) if inputs else ()
    check_rows(program.name, shape)
    n = shape[-1]
    rows = math.prod(shape[:-1])
    views = []
    for x in inputs:
        v = xp.broadcast_to(xp.asarray(x, dtype=CUPY_DTYPES[dtype]), shape).reshape(rows, n)
        views.append((v, v.strides[0] // v.itemsize, v.strides[1] // v.itemsize))
    return shape, rows, n, views


def _launch_rows(program: Program, inputs: list, dtype: str):
    import numpy as np

    shape = np.broadcast_shapes(*[np.shape(x) for x in inputs]) if inputs else ()
    from .reference import check_rows

    check_rows(program.name, shape)  # before anything touches the GPU
    import cupy

    shape, rows, n, views = row_layout(program, inputs, dtype, cupy)
    is_bool = program.returns_bool()
    out = cupy.full(shape[:-1] if program.returns_per_row() else shape, True if is_bool else float("nan"),
                    dtype=bool if is_bool else CUPY_DTYPES[dtype])  # poisoned, as for elementwise kernels
    if rows == 0:
        return out
    (kernel,) = compile_kernels([program], dtype)
    args = [a for v, rs, es in views for a in (v, cupy.int64(rs), cupy.int64(es))]
    blocks, threads, team = row_geometry(rows, n)
    kernel((blocks,), (threads,), (*args, out, cupy.int64(rows), cupy.int64(n), cupy.int32(team)))
    return out


class NvrtcError(RuntimeError):
    """NVRTC refused a source; `.log` holds its diagnostics."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(f"{message}\n{log}" if log else message)
        self.log = log


def nvrtc_compile(source: str, arch: str = "compute_80", options: tuple[str, ...] = NVRTC_OPTIONS,
                  name: str = "kernels.cu") -> tuple[str | bytes, str]:
    """Compile CUDA C with NVRTC alone, no GPU or driver needed; returns (code, log): PTX text for a virtual
    arch (`compute_80`), the cubin's bytes for a real one (`sm_90`).

    The check that rendered kernels compile as CuPy would compile them, on any machine: it needs the
    packages cuda-bindings, nvidia-cuda-nvrtc and nvidia-cuda-runtime (its cuda_fp16.h and cuda_bf16.h),
    which the `test` extra installs. Raises NvrtcError, with NVRTC's log, when the source does not compile.
    """
    try:
        from cuda.bindings import nvrtc
        from cuda.pathfinder import find_nvidia_header_directory
    except ImportError as e:
        raise ImportError("compiling CUDA C without a GPU needs NVRTC: pip install cuda-bindings "
                          "nvidia-cuda-nvrtc nvidia-cuda-runtime (or this project's `test` extra)") from e
    include = find_nvidia_header_directory("cudart")
    if include is None:
        raise NvrtcError("cuda_fp16.h was not found: pip install nvidia-cuda-runtime")

    def call(result):
        err, *rest = result
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise NvrtcError(f"NVRTC: {nvrtc.nvrtcGetErrorString(err)[1].decode()}")
        return rest[0] if rest else None

    prog = call(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []))
    try:
        opts = [o.encode() for o in (*options, f"--gpu-architecture={arch}", f"--include-path={include}")]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        # NVRTC writes into the buffer: a bytearray, never a bytes object (b" " * 1 is CPython's shared
        # one-byte b" ", and overwriting it made every later read of that byte, e.g. pickled ints of 32, read 0)
        log = bytearray(call(nvrtc.nvrtcGetProgramLogSize(prog)))
        call(nvrtc.nvrtcGetProgramLog(prog, log))
        log = bytes(log).rstrip(b"\0 ").decode(errors="replace")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise NvrtcError(f"NVRTC could not compile {name} for {arch}", log)
        if arch.startswith("sm_"):
            cubin = bytearray(call(nvrtc.nvrtcGetCUBINSize(prog)))
            call(nvrtc.nvrtcGetCUBIN(prog, cubin))
            return bytes(cubin), log
        ptx = bytearray(call(nvrtc.nvrtcGetPTXSize(prog)))
        call(nvrtc.nvrtcGetPTX(prog, ptx))
        return bytes(ptx).rstrip(b"\0").decode(), log
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


_CUBIN_DIR: tempfile.TemporaryDirectory | None = None  # the cubins of this process (CuPy loads a module from a file)


def load_module(source: str, options: tuple[str, ...] = NVRTC_OPTIONS):
    """A CuPy module of `source` compiled by NVRTC with exactly `options`, to a cubin for the current device.

    Without NVRTC's Python bindings it falls back to `cupy.RawModule(code=...)`, with a warning: CuPy adds
    `-ftz=true` there, so float32 subnormals flush to zero on the GPU."""
    import cupy

    arch = f"sm_{cupy.cuda.Device().compute_capability}"
    try:
        cubin, _ = nvrtc_compile(source, arch, options)
    except ImportError as e:
        warnings.warn(f"{e}; compiling through CuPy instead, which flushes float32 subnormals to zero",
                      RuntimeWarning, stacklevel=2)
        return cupy.RawModule(code=source, options=options)
    global _CUBIN_DIR
    if _CUBIN_DIR is None:
        _CUBIN_DIR = tempfile.TemporaryDirectory(prefix="gpuiter-cubin-")
    path = Path(_CUBIN_DIR.name) / f"{source_hash(source + repr(options))}-{arch}.cubin"
    path.write_bytes(cubin)
    return cupy.RawModule(path=str(path))
