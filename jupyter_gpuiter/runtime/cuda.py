"""Native CUDA kernels: a Program rendered as CUDA C (one thread per element), compiled through CuPy.

The renderer is data, tinygrad-style: one format string per IR op; Python's semantics where C differs
(floor division, modulo and min/max follow Python and NumPy; clip propagates nan as torch does) live
in a small device preamble. float16 and bfloat16 compute each op in float and round its result to the
kernel dtype, as torch does. Compiled kernels are cached by source hash in memory, and on disk by
CuPy's own kernel cache.
"""

from __future__ import annotations

import functools
import hashlib
import math

from ..ir import Program
from ..lang.spec import IR_OP_BY_NAME

C_TYPES = {"float16": ("__half", "float"), "bfloat16": ("__nv_bfloat16", "float"), "float32": ("float", "float"),
           "float64": ("double", "double")}
ROUND = {"float16": "__half2float(__float2half_rn({}))", "bfloat16": "__bfloat162float(__float2bfloat16_rn({}))",
         "float32": "{}", "float64": "{}"}
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

PREAMBLE = r"""
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
    C m = (isnan(x) || isnan(lo)) ? (C)NAN : (x > lo ? x : lo);
    return (isnan(m) || isnan(hi)) ? (C)NAN : (m < hi ? m : hi);
}
"""


def _literal(v: float) -> str:
    if math.isnan(v):
        return "(C)NAN"
    if math.isinf(v):
        return "(C)INFINITY" if v > 0 else "(C)(-INFINITY)"
    return f"(C){float(v)!r}"


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
            expr = ROUND[dtype].format(_literal(imm))
        elif op == "ret":
            value = f"r{a}"
            stored = f"({value} != 0)" if program.returns_bool() else STORE[dtype].format(value)
            lines.append(f"    out[i] = {stored};")
            break
        else:
            operands = {"a": f"r{a}", "b": f"r{b}", "c": f"r{c}"}
            expr = ROUND[dtype].format(C_OPS[op].format(**operands))
            assert IR_OP_BY_NAME[op].nargs <= 3
        lines.append(f"    const C r{k} = {expr};")
    lines.append("}")
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=256)
def _compiled(source: str, name: str):
    import cupy

    return cupy.RawKernel(source, name, options=("--std=c++17",))


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def launch(program: Program, inputs: list, dtype: str = "float32"):
    """Run the native kernel on CuPy arrays of one shape and dtype; returns a CuPy array."""
    import cupy

    name = "k_" + source_hash(program.text() + dtype)
    kernel = _compiled(cuda_source(program, dtype, name), name)
    n = inputs[0].size if inputs else 1
    # the output starts poisoned (nan / True), so a kernel that skips elements cannot pass for one that ran
    out = cupy.full(inputs[0].shape if inputs else (), True if program.returns_bool() else float("nan"),
                    dtype=bool if program.returns_bool() else
                    {"float16": cupy.float16, "float32": cupy.float32, "float64": cupy.float64}[dtype])
    threads = 256
    kernel(((n + threads - 1) // threads,), (threads,), (*[cupy.ascontiguousarray(x) for x in inputs], out,
                                                         cupy.int64(n)))
    return out
