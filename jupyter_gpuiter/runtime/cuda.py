"""Native CUDA kernels: a Program rendered as CUDA C (one thread per element), compiled through CuPy.

The renderer is data, tinygrad-style: one format string per IR op; Python's semantics where C differs
(floor division, modulo and min/max follow Python and NumPy; clip propagates nan as torch does) live
in a small device preamble. float16 and bfloat16 compute each op in float and round its result to the
kernel dtype, as torch does (but for the ops whose result is exact anyway); a literal is rounded once,
from the float64 the IR holds, to the kernel dtype. The source needs nothing from the host's C library
(NVRTC has none: nan and inf are spelled by their bits), and it is compiled with FMA contraction off
(`NVRTC_OPTIONS`), so `a * b + c` rounds twice, as in NumPy and torch. Compiled kernels are cached by
name (a hash of the program and dtype) in memory, and on disk by CuPy's own kernel cache;
`compile_kernels` compiles many in one NVRTC call. `nvrtc_compile` compiles a source to PTX with NVRTC
alone, no GPU needed (tests/runtime/test_cuda_nvrtc.py).
"""

from __future__ import annotations

import hashlib
import math

from ..ir import Program
from ..lang.spec import IR_OP_BY_NAME

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
    "copysign": "copysign({a}, {b})", "hypot": "hypot({a}, {b})", "isnan": "(isnan({a}) ? (C)1 : (C)0)",
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


def cuda_source(program: Program, dtype: str = "float32", name: str = "kernel", header: bool = True) -> str:
    """CUDA C for `program`: one thread per element, inputs and output of the kernel dtype (with the
    includes and the preamble unless header=False, for putting several kernels in one file)."""
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
        if op == "param":
            expr = LOAD[dtype].format(f"x{int(imm)}[i]")
        elif op in ("const", "bool"):
            expr = _literal(imm, dtype)
        elif op == "ret":
            value = f"r{a}"
            stored = f"({value} != 0)" if program.returns_bool() else STORE[dtype].format(value)
            lines.append(f"    out[i] = {stored};")
            break
        else:
            operands = {"a": f"r{a}", "b": f"r{b}", "c": f"r{c}"}
            expr = C_OPS[op].format(**operands)
            expr = expr if op in EXACT_OPS else ROUND[dtype].format(expr)
            assert IR_OP_BY_NAME[op].nargs <= 3
        lines.append(f"    const C r{k} = {expr};")
    lines.append("}")
    return "\n".join(lines) + "\n"


#: Compiled kernels by name (a hash of the program and dtype): a name holds one source, so it never goes stale.
_KERNELS: dict = {}
_MAX_KERNELS = 4096


def _kernel_name(program: Program, dtype: str) -> str:
    return "k_" + source_hash(program.text() + dtype)


def compile_kernels(programs: list[Program], dtype: str = "float32") -> list:
    """The native kernels of `programs`, compiled together in one NVRTC call (one CuPy module) where they are
    not compiled yet: a batch of candidates pays NVRTC's start-up and the header once. `launch` uses them."""
    import cupy

    names = [_kernel_name(p, dtype) for p in programs]
    todo = {n: p for n, p in zip(names, programs) if n not in _KERNELS}
    if todo:
        if len(_KERNELS) + len(todo) > _MAX_KERNELS:
            _KERNELS.clear()
            todo = dict(zip(names, programs))
        source = HEADER + "\n".join(cuda_source(p, dtype, n, header=False) for n, p in todo.items())
        module = cupy.RawModule(code=source, options=NVRTC_OPTIONS)
        _KERNELS.update({n: module.get_function(n) for n in todo})
    return [_KERNELS[n] for n in names]


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


#: The CuPy dtype of each kernel dtype (CuPy has no bfloat16).
CUPY_DTYPES = {"float16": "float16", "float32": "float32", "float64": "float64"}


def launch(program: Program, inputs: list, dtype: str = "float32"):
    """Run the native kernel on CuPy arrays of one shape and dtype; returns a CuPy array."""
    if dtype not in CUPY_DTYPES:
        raise ValueError(f"native CUDA kernels run on float16, float32 or float64 CuPy arrays, not {dtype} "
                         "(CuPy has no bfloat16: use torch tensors for bfloat16)")
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


class NvrtcError(RuntimeError):
    """NVRTC refused a source; `.log` holds its diagnostics."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(f"{message}\n{log}" if log else message)
        self.log = log


def nvrtc_compile(source: str, arch: str = "compute_80", options: tuple[str, ...] = NVRTC_OPTIONS,
                  name: str = "kernels.cu") -> tuple[str, str]:
    """Compile CUDA C to PTX with NVRTC alone, no GPU or driver needed; returns (ptx, log).

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
        ptx = bytearray(call(nvrtc.nvrtcGetPTXSize(prog)))
        call(nvrtc.nvrtcGetPTX(prog, ptx))
        return bytes(ptx).rstrip(b"\0").decode(), log
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
