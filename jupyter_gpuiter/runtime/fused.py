"""The fused tile evaluator: an interpreter of the IR that runs each program over tiles of inputs with its
registers in cache, and compares each output with the reference in the same pass.

The batched VM (vm.py) executes one torch op per instruction over a [programs x inputs] register file, so
each op streams tens of MB through memory; here work item (program, lane) walks its tiles of `TILE`
inputs, running every instruction over a tile of registers ([length, TILE], a few tens of KB, resident in
L1/L2), then folds the tile's comparison into per-program counters (failures, first failing index, max
abs / rel / ULP error). Nothing of size [programs x inputs] exists. A lane stops at its first failing
tile (the verdict needs the first failure, not all of them). One dispatch per instruction per tile: an
interpreter, compiled once by numba (`cache=True` keeps it on disk across processes), never a compile
per candidate.

Semantics are the language's (reference.py's NumPy ops) and the torch ops' (torch_ops.py, the VM this is
tested against in tests/runtime/test_fused.py, which lists where torch departs from them): registers hold the
kernel dtype (float32 registers for float16 and bfloat16, rounded to the kernel dtype after every op, as
NumPy and torch compute half-precision ops on the CPU; a literal is rounded once, from float64), bools are
0/1, nan is truthy, min/max are Python's. No fastmath, so nan, inf and signed zeros stay exact. Arithmetic
(+ - * / // % and comparisons, sqrt, abs, floor, ceil, copysign, min, max, clip) is bit-identical to
NumPy's, and to torch's but where torch is off (its sqrt is not correctly rounded, its float16/bfloat16 //
rounds every step, its % is nan where a / b overflows); transcendental functions come from the C library
here (but float32 exp, tanh and sigmoid: through _exp_f32, a float64 exp that vectorises) and from SLEEF in
torch, all within about 1 ULP, so they may differ by an ULP. The sign of a nan an op produces is the CPU's
(and unspecified by IEEE 754): copysign(x, nan) shows it.

Row kernels (row=n, docs/language.md "Row kernels"): the inputs are rows of n (row r is x[:, r*n:(r+1)*n]) and
a tile is whole rows (TILE // n of them, or one row longer than TILE, with registers sized for it). A
reduction reduces each row of its operand and repeats the row's value along the row, so a per-row value is
held broadcast and every output is per element. sum and mean accumulate in float64 in NumPy's pairwise
order (np.sum's: a float64 row sums bit for bit as the reference evaluator's, float32 and 16-bit rows too up
to NumPy's 8,192-element cast buffer) and round once to the kernel dtype (16-bit: through float32 rounded to
odd); max and min are IEEE 754-2019's maximum and minimum (the row's first nan if it has one; -0 < +0, where
np.max keeps whichever of equal zeros its loop meets last). compare then counts rows: a row fails when one of
its elements does.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from ..ir import Program
from ..lang.spec import IR_OP_INDEX as _OP
from .reference import check_row_length

TILE = 1024  # inputs per tile: 1024 float32 registers of a 30-instruction program are 120 KB, within L2

# opcodes as globals (numba freezes them as compile-time constants)
PARAM, CONST, BOOL = _OP["param"], _OP["const"], _OP["bool"]
NEG, POS, NOT = _OP["neg"], _OP["pos"], _OP["not"]
ADD, SUB, MUL, DIV, FLOORDIV, MOD, POW = (_OP[n] for n in ("add", "sub", "mul", "div", "floordiv", "mod", "pow"))
LT, LE, GT, GE, EQ, NE = (_OP[n] for n in ("lt", "le", "gt", "ge", "eq", "ne"))
AND, OR, SELECT = _OP["and"], _OP["or"], _OP["select"]
ABS, MIN, MAX, SQRT, EXP, EXPM1, LOG, LOG1P, LOG2, LOG10 = (
    _OP[n] for n in ("abs", "min", "max", "sqrt", "exp", "expm1", "log", "log1p", "log2", "log10"))
SIN, COS, TAN, ASIN, ACOS, ATAN, ATAN2, SINH, COSH, TANH = (
    _OP[n] for n in ("sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh"))
ERF, FLOOR, CEIL, CLIP, SIGMOID, COPYSIGN, HYPOT, ISNAN, ISINF, FLOAT = (
    _OP[n] for n in ("erf", "floor", "ceil", "clip", "sigmoid", "copysign", "hypot", "isnan", "isinf", "float"))
SUM, MEAN, AMAX, AMIN = _OP["sum"], _OP["mean"], _OP["amax"], _OP["amin"]
FIRST_REDUCTION = min(SUM, MEAN, AMAX, AMIN)  # the reductions are the last opcodes (spec.IR_OPS)
assert FIRST_REDUCTION > max(v for k, v in _OP.items() if k not in ("sum", "mean", "amax", "amin"))

#: how registers are rounded after each op: none (float32, float64 registers), to float16, to bfloat16
ROUNDING = {"float32": 0, "float64": 0, "float16": 1, "bfloat16": 2}
REGISTER_DTYPE = {"float32": np.float32, "float64": np.float64, "float16": np.float32, "bfloat16": np.float32}

_JIT = {"cache": True, "nogil": True, "error_model": "numpy"}


@njit(**_JIT)
def _round_tile(row, m, mode):
    """Round row[:m] (float32 registers) to float16 (mode 1) or bfloat16 (mode 2), to nearest even."""
    u = row.view(np.uint32)
    for t in range(m):
        bits = u[t]
        mag = bits & np.uint32(0x7FFFFFFF)
        if mag >= np.uint32(0x7F800000):  # inf or nan stay
            continue
        sign = bits & np.uint32(0x80000000)
        if mode == 2:
            u[t] = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
        elif mag >= np.uint32(0x477FF000):  # 65520 and above round to inf
            u[t] = sign | np.uint32(0x7F800000)
        elif mag >= np.uint32(0x38800000):  # float16 normal range: keep 10 mantissa bits
            mag = (mag + np.uint32(0xFFF) + ((mag >> np.uint32(13)) & np.uint32(1))) & np.uint32(0xFFFFE000)
            u[t] = sign | mag
        else:  # float16 subnormals: multiples of 2^-24 (the scaling is exact)
            row[t] = np.float32(np.rint(row[t] * np.float32(16777216.0)) * np.float32(5.9604644775390625e-08))


@njit(**_JIT)
def _floordiv(a, b):
    """Python's float //, as torch.floor_divide computes it."""
    if b == 0:
        return a / b
    mod = np.fmod(a, b)
    div = (a - mod) / b
    if mod != 0 and (b < 0) != (mod < 0):
        div -= 1
    if div != 0:
        fl = np.floor(div)
        if div - fl > 0.5:
            fl += 1
        return fl
    return np.copysign(div * 0, a / b)


@njit(**_JIT)
def _mod(a, b):
    """Python's float % (torch.remainder, with a zero taking the divisor's sign)."""
    r = np.fmod(a, b)
    if r != 0 and (b < 0) != (r < 0):
        r += b
    if r == 0:
        r = np.copysign(r * 0, b)
    return r


@intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c rounded once (llvm.fma: one instruction where the CPU has FMA, vectorised with the loop)."""
    if not (a == b == c == types.float64):
        return None

    def codegen(context, builder, sig, args):
        return builder.fma(*args)
    return types.float64(types.float64, types.float64, types.float64), codegen


@intrinsic
def _bits(typingctx, v):
    """The bits of a float64 as an int64 (a register bitcast)."""
    if v != types.float64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))
    return types.int64(types.float64), codegen


@intrinsic
def _from_bits(typingctx, i):
    """The float64 whose bits are the int64 i."""
    if i != types.int64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return types.float64(types.int64), codegen


@intrinsic
def _bits32(typingctx, v):
    """The bits of a float32 as an int32."""
    if v != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.int32))
    return types.int32(types.float32), codegen


@intrinsic
def _from_bits32(typingctx, i):
    """The float32 whose bits are the int32 i."""
    if i != types.int32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))
    return types.float32(types.int32), codegen


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 in two parts (fdlibm's): k * _LN2_HI is exact for |k| < 2^20
_LN2_LO = 1.90821492927058770002e-10
_SHIFTER = 6755399441055744.0  # 1.5 * 2^52: v + _SHIFTER is v rounded to an integer, held in the low bits
_SHIFTER_BITS = 0x4338000000000000
# e^r on [-0.35, 0.35] (|r| <= ln2 / 2 after the reduction): degree-10 near-minimax polynomial
# (mpmath.chebyfit), 3.7e-16 relative with its coefficients rounded to float64
_E10, _E9, _E8, _E7, _E6, _E5, _E4, _E3, _E2, _E1, _E0 = (
    2.762773069846965e-07, 2.7641829585335596e-06, 2.4801501014878055e-05, 0.00019841166270355944,
    0.001388888893514123, 0.008333333388852152, 0.04166666666656548, 0.16666666666545207, 0.5000000000000007,
    1.0000000000000075, 1.0)


@njit(inline="always", **_JIT)
def _exp_f32(v):
    """exp(v) in float64 for the float32 register paths, within 1e-15 relative, or 0 / inf: exact once
    rounded to float32 but where rounding twice moves it (at most 1 ULP; not one of 6e7 float32 inputs
    tested). Branch-free, so that a tile loop calling it vectorises (the C library's exp is a call per
    element): v is clamped to [-110, 100], where float32 exp is 0 and inf beyond (nan stays nan), then
    v = k ln2 + r, e^r by a polynomial and 2^k (a normal float64 for such k) built from its exponent bits.
    Not for float64 registers: below -110 and above 100 it is wrong in float64."""
    v = -110.0 if v < -110.0 else v  # noqa: FURB136 - a select that keeps nan
    v = 100.0 if v > 100.0 else v  # noqa: FURB136
    s = _fma(v, _LOG2E, _SHIFTER)  # k in the low bits of s
    k = s - _SHIFTER
    r = _fma(k, -_LN2_HI, v)
    r = _fma(k, -_LN2_LO, r)
    p = _fma(_E10, r, _E9)
    p = _fma(p, r, _E8)
    p = _fma(p, r, _E7)
    p = _fma(p, r, _E6)
    p = _fma(p, r, _E5)
    p = _fma(p, r, _E4)
    p = _fma(p, r, _E3)
    p = _fma(p, r, _E2)
    p = _fma(p, r, _E1)
    p = _fma(p, r, _E0)
    return p * _from_bits((_bits(s) - _SHIFTER_BITS + 1023) << 52)


@njit(inline="always", **_JIT)
def _tanh_f32(v):
    """tanh(v) in float64 for the float32 register paths (v holds a float32), through _exp_f32 (the C
    library's tanhf costs eight of its exp): the quotient is within 1e-12 relative of tanh, so the result
    rounded to float32 is tanh correctly rounded but where rounding twice moves it (at most 1 ULP, as tanhf
    and SLEEF are). Selects, no branches: e stays finite for every v, so the unused quotient is never what
    turns nan or inf into the result."""
    e = _exp_f32(2.0 * v)  # nan stays nan
    q = (e - 1.0) / (e + 1.0)
    q = (1.0 if v > 0 else -1.0) if abs(v) > 10.0 else q  # rounds to ±1
    return v if abs(v) < 0.000244140625 else q  # |v| < 2^-12: tanh(v) rounds to v (±0 and subnormals too)


@njit(**_JIT)
def _maximum(a, b):  # torch.maximum: nan if either is nan
    if np.isnan(a) or np.isnan(b):
        return a + b
    return a if a > b else b  # noqa: FURB136 - torch.maximum's order, not the builtin's


@njit(**_JIT)
def _minimum(a, b):
    if np.isnan(a) or np.isnan(b):
        return a + b
    return a if a < b else b  # noqa: FURB136 - torch.minimum's order, not the builtin's


# --- reductions over rows (row kernels, docs/language.md "Row kernels") ----------------------------------------

#: NumPy's pairwise summation: rows up to this long are summed by 8 accumulators, longer ones split in halves
_PW_BLOCK = 128

# (The loops below index views from 0: an index numba cannot prove non-negative, a[lo + t], gets a
# wraparound check that keeps LLVM from vectorising the loop, ten times slower for a max.)


@njit(inline="always", **_JIT)
def _pairwise_block(a):
    """The float64 sum of a (at most _PW_BLOCK terms) in NumPy's order: fewer than 8 one after the other from
    0.0, else 8 interleaved accumulators, combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)),
    then the terms past the last multiple of 8."""
    n = a.shape[0]
    if n < 8:
        res = 0.0
        for i in range(n):
            res += np.float64(a[i])
        return res
    r0 = np.float64(a[0])
    r1 = np.float64(a[1])
    r2 = np.float64(a[2])
    r3 = np.float64(a[3])
    r4 = np.float64(a[4])
    r5 = np.float64(a[5])
    r6 = np.float64(a[6])
    r7 = np.float64(a[7])
    end = n - n % 8
    for i in range(8, end, 8):
        r0 += np.float64(a[i])
        r1 += np.float64(a[i + 1])
        r2 += np.float64(a[i + 2])
        r3 += np.float64(a[i + 3])
        r4 += np.float64(a[i + 4])
        r5 += np.float64(a[i + 5])
        r6 += np.float64(a[i + 6])
        r7 += np.float64(a[i + 7])
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(end, n):
        res += np.float64(a[i])
    return res


@njit(**_JIT)
def _pairwise(a):
    """The float64 sum of the view a in NumPy's order (the pairwise_sum of its add.reduce: _pairwise_block up
    to 128 terms, longer rows as the sum of two halves split at a multiple of 8), so that a float64 row sums
    bit for bit as np.sum does (float32 rows too, up to NumPy's 8,192-element cast buffer). Error O(log n)
    ulps; every term is read as a float64."""
    n = a.shape[0]
    if n <= _PW_BLOCK:
        return _pairwise_block(a)
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(a[:n2]) + _pairwise(a[n2:])


@njit(inline="always", **_JIT)
def _round_sum(d, r0, v, mode):
    """d[r0] = the float64 v rounded once to the kernel dtype: itself (float64 registers), to nearest
    (float32), or (mode 1, 2) to float32 rounded to odd and then to nearest even by _round_tile, which is v
    rounded once to float16 / bfloat16 (never twice to nearest)."""
    if d.itemsize == 8 or mode == 0:
        d[r0] = v
        return
    f = np.float32(v)
    if abs(f) < np.inf and np.float64(f) != v:
        i = _bits32(f)
        if abs(np.float64(f)) > abs(v):
            i = np.int32(i - 1)  # toward zero: the truncation of v
        f = _from_bits32(np.int32(i | 1))
    d[r0] = f
    _round_tile(d[r0:], 1, mode)


_MASK32 = 0x7FFFFFFF
_MASK64 = 0x7FFFFFFFFFFFFFFF


@njit(inline="always", **_JIT)
def _extreme(a, ai, flip, mask, inf_bits):
    """The bits of the maximum (flip 0) or minimum (flip the sign bit) of the row a, ai its bits as signed
    integers: IEEE 754-2019's maximum and minimum, which no order changes: the row's first nan if it has
    one, and -0 < +0. With the sign bit flipped a value stands for its negation (min(v) = -max(-v)); then
    non-negative values compare as their bits and negative ones in reverse, so the maximum is the largest
    bits where some are non-negative, else the smallest. Integer max and min, which vectorise. mask: all bits
    but the sign bit; inf_bits: +inf's bits (a larger magnitude is a nan)."""
    ty = ai.dtype.type
    first = ty(ai[0] ^ flip)
    hi = first
    lo = first
    mag = ty(first & mask)
    for t in range(ai.shape[0]):
        v = ty(ai[t] ^ flip)
        hi = max(hi, v)
        lo = min(lo, v)
        mag = max(mag, ty(v & mask))
    if mag > inf_bits:  # a nan
        for t in range(a.shape[0]):
            if a[t] != a[t]:
                return ai[t]
    return ty((hi if hi >= 0 else lo) ^ flip)


@njit(inline="always", **_JIT)
def _extreme_short(a, ai, r0, row, flip, mask, inf_bits):
    """_extreme of the short row a[r0:r0+row] (fewer than 8), without taking views (a row's overhead)."""
    first = ai[r0] ^ flip
    hi = first
    lo = first
    mag = first & mask
    for t in range(r0, r0 + row):
        v = ai[t] ^ flip
        hi = max(hi, v)
        lo = min(lo, v)
        mag = max(mag, v & mask)
    if mag > inf_bits:
        for t in range(r0, r0 + row):
            if a[t] != a[t]:
                return ai[t]
    return (hi if hi >= 0 else lo) ^ flip


@njit(**_JIT)
def _reduce(op, a, d, m, row, mode):
    """d[:m] = the reduction `op` of a[:m] over each of its rows of `row` elements, filling the row: sum and
    mean accumulate in float64 (_pairwise) and round once; max and min are exact (_extreme). Rows shorter
    than 8 take loops of their own (a view per row costs more than such a row's work)."""
    if op == SUM or op == MEAN:
        for r0 in range(0, m, row):
            if row < 8:  # _pairwise_block's order: one after the other from 0.0
                v = 0.0
                for t in range(r0, r0 + row):
                    v += np.float64(a[t])
            else:
                seg = a[r0:r0 + row]
                v = _pairwise_block(seg) if row <= _PW_BLOCK else _pairwise(seg)
            v = 0.0 + v  # add.reduce starts from its identity: a row of -0.0 sums to +0.0
            if op == MEAN:
                v = v / row
            _round_sum(d, r0, v, mode)
    elif a.itemsize == 8:
        ai = a.view(np.int64)
        di = d.view(np.int64)
        flip = np.int64(0) if op == AMAX else np.int64(-9223372036854775808)
        for r0 in range(0, m, row):
            if row < 8:
                di[r0] = _extreme_short(a, ai, r0, row, flip, np.int64(_MASK64), np.int64(0x7FF0000000000000))
            else:
                di[r0] = _extreme(a[r0:r0 + row], ai[r0:r0 + row], flip, np.int64(_MASK64),
                                  np.int64(0x7FF0000000000000))
    else:
        ai = a.view(np.int32)
        di = d.view(np.int32)
        flip = np.int32(0) if op == AMAX else np.int32(-2147483648)
        for r0 in range(0, m, row):
            if row < 8:
                di[r0] = _extreme_short(a, ai, r0, row, flip, np.int32(_MASK32), np.int32(0x7F800000))
            else:
                di[r0] = _extreme(a[r0:r0 + row], ai[r0:r0 + row], flip, np.int32(_MASK32), np.int32(0x7F800000))
    if row < 8:
        for r0 in range(0, m, row):
            c = d[r0]
            for t in range(r0 + 1, r0 + row):
                d[t] = c
    else:
        for r0 in range(0, m, row):
            seg = d[r0:r0 + row]
            c = seg[0]
            for t in range(1, row):
                seg[t] = c


@njit(**_JIT)
def _exec(ops, args, imm, length, x, lo, m, regs, mode, row):
    """Run one program (row of the batch arrays) over inputs x[:, lo:lo+m]; registers regs[k, :m]. In a row
    kernel (row > 0) the tile holds whole rows of `row` inputs (lo and m multiples of it), and a reduction
    fills each row with its row's value: a per-row value is held broadcast along its row."""
    one = regs.dtype.type(1.0)
    zero = regs.dtype.type(0.0)
    for k in range(length - 1):
        op = ops[k]
        d = regs[k]
        if op == PARAM:
            src = x[int(imm[k]), lo:lo + m]  # a view indexed from 0: the copy vectorises
            for t in range(m):
                d[t] = src[t]
            continue
        if op == CONST or op == BOOL:
            c = regs.dtype.type(imm[k])
            if mode and abs(c) < np.inf and c != imm[k]:
                # a literal rounds once to the kernel dtype (as NumPy's np.float16(v) and the CUDA renderer):
                # float64 -> float32 rounded to odd, then to nearest even below, never twice to nearest
                d[0] = c
                du = d.view(np.uint32)
                if abs(np.float64(c)) > abs(imm[k]):
                    du[0] -= np.uint32(1)
                du[0] |= np.uint32(1)
                c = d[0]
            for t in range(m):
                d[t] = c
            if mode:
                _round_tile(d, m, mode)
            continue
        a = regs[args[k, 0]]
        if op == ADD:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = a[t] + b[t]
        elif op == MUL:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = a[t] * b[t]
        elif op == SUB:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = a[t] - b[t]
        elif op == DIV:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = a[t] / b[t]
        elif op == NEG:
            for t in range(m):
                d[t] = -a[t]
        elif op == POS or op == FLOAT:
            for t in range(m):
                d[t] = a[t]
        elif op == NOT:
            for t in range(m):
                d[t] = one if a[t] == 0 else zero
        elif op == FLOORDIV:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = _floordiv(a[t], b[t])
        elif op == MOD:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = _mod(a[t], b[t])
        elif op == POW:
            e = args[k, 1]
            if ops[e] == CONST and imm[e] == 2.0:
                # x ** 2, as in a variance: the product rounded once, which a correctly rounded pow also
                # gives, without a library call an element (a layer norm ran 2.7x slower than torch's ops)
                for t in range(m):
                    d[t] = a[t] * a[t]
            else:
                b = regs[e]
                for t in range(m):
                    d[t] = np.power(a[t], b[t])
        elif op == LT:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = one if a[t] < b[t] else zero
        elif op == LE:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = one if a[t] <= b[t] else zero
        elif op == GT:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = one if a[t] > b[t] else zero
        elif op == GE:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = one if a[t] >= b[t] else zero
        elif op == EQ:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = one if a[t] == b[t] else zero
        elif op == NE:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = one if a[t] != b[t] else zero
        elif op == AND:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = b[t] if a[t] != 0 else a[t]
        elif op == OR:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = a[t] if a[t] != 0 else b[t]
        elif op == SELECT:
            b = regs[args[k, 1]]
            c = regs[args[k, 2]]
            for t in range(m):
                d[t] = b[t] if a[t] != 0 else c[t]
        elif op == ABS:
            for t in range(m):
                d[t] = np.abs(a[t])
        elif op == MIN:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = b[t] if b[t] < a[t] else a[t]  # noqa: FURB136 - Python's min(a, b) with nan
        elif op == MAX:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = b[t] if b[t] > a[t] else a[t]  # noqa: FURB136 - Python's max(a, b) with nan
        elif op == SQRT:
            for t in range(m):
                d[t] = np.sqrt(a[t])
        elif op == EXP:
            if regs.itemsize == 4:
                for t in range(m):
                    d[t] = np.float32(_exp_f32(np.float64(a[t])))
            else:
                for t in range(m):
                    d[t] = np.exp(a[t])
        elif op == EXPM1:
            for t in range(m):
                d[t] = np.expm1(a[t])
        elif op == LOG:
            for t in range(m):
                d[t] = np.log(a[t])
        elif op == LOG1P:
            for t in range(m):
                d[t] = np.log1p(a[t])
        elif op == LOG2:
            for t in range(m):
                d[t] = np.log2(a[t])
        elif op == LOG10:
            for t in range(m):
                d[t] = np.log10(a[t])
        elif op == SIN:
            for t in range(m):
                d[t] = np.sin(a[t])
        elif op == COS:
            for t in range(m):
                d[t] = np.cos(a[t])
        elif op == TAN:
            for t in range(m):
                d[t] = np.tan(a[t])
        elif op == ASIN:
            for t in range(m):
                d[t] = np.arcsin(a[t])
        elif op == ACOS:
            for t in range(m):
                d[t] = np.arccos(a[t])
        elif op == ATAN:
            for t in range(m):
                d[t] = np.arctan(a[t])
        elif op == ATAN2:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = np.arctan2(a[t], b[t])
        elif op == SINH:
            for t in range(m):
                d[t] = np.sinh(a[t])
        elif op == COSH:
            for t in range(m):
                d[t] = np.cosh(a[t])
        elif op == TANH:
            if regs.itemsize == 4:
                for t in range(m):
                    d[t] = np.float32(_tanh_f32(np.float64(a[t])))
            else:
                for t in range(m):
                    d[t] = np.tanh(a[t])
        elif op == ERF:
            for t in range(m):
                d[t] = math.erf(a[t])
        elif op == FLOOR:
            for t in range(m):
                d[t] = np.floor(a[t])
        elif op == CEIL:
            for t in range(m):
                d[t] = np.ceil(a[t])
        elif op == CLIP:
            b = regs[args[k, 1]]
            c = regs[args[k, 2]]
            for t in range(m):
                d[t] = _minimum(_maximum(a[t], b[t]), c[t])
        elif op == SIGMOID:  # 1 / (1 + exp(-x)), each step rounded like the torch ops it stands for
            if regs.itemsize == 4:
                for t in range(m):
                    d[t] = np.float32(_exp_f32(-np.float64(a[t])))
            else:
                for t in range(m):
                    d[t] = np.exp(-a[t])
            if mode:
                _round_tile(d, m, mode)
            for t in range(m):
                d[t] = one + d[t]
            if mode:
                _round_tile(d, m, mode)
            for t in range(m):
                d[t] = one / d[t]
        elif op == COPYSIGN:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = np.copysign(a[t], b[t])
        elif op == HYPOT:
            b = regs[args[k, 1]]
            for t in range(m):
                d[t] = np.hypot(a[t], b[t])
        elif op == ISNAN:
            for t in range(m):
                d[t] = one if np.isnan(a[t]) else zero
        elif op == ISINF:
            for t in range(m):
                d[t] = one if np.isinf(a[t]) else zero
        elif op >= FIRST_REDUCTION and row > 0:
            _reduce(op, a, d, m, row, mode)
            continue  # rounded once, in _reduce
        else:
            for t in range(m):
                d[t] = np.nan
        if mode:
            _round_tile(d, m, mode)


@njit(**_JIT)
def _evaluate_items(ops, args, imm, lengths, x, out, mode, span, row, w0, w1):
    """out[b, :] = program b over inputs x [P, n] (register dtype) for work items w0..w1 (a work item is
    (program, tile of `span` inputs); in a row kernel a tile is whole rows of `row`); programs of length 0
    give nan."""
    n = x.shape[1]
    n_tiles = (n + span - 1) // span
    width = max(1, ops.shape[1])
    regs = np.empty((width + 1, span), dtype=x.dtype)
    for w in range(w0, w1):
        b = w // n_tiles
        lo = (w % n_tiles) * span
        m = min(span, n - lo)
        length = lengths[b]
        o = out[b, lo:lo + m]
        if length < 1:
            for t in range(m):
                o[t] = np.nan
            continue
        _exec(ops[b], args[b], imm[b], length, x, lo, m, regs, mode, row)
        res = regs[args[b, length - 1, 0]]
        for t in range(m):
            o[t] = res[t]


@njit(**_JIT)
def _compare_tile(res, want, lo, m, rtol, atol):
    """compare.py's rule over one tile of outputs res[:m] against want[lo:lo+m] (in float64): failures,
    first failing index (-1 none), max abs and rel error over finite pairs (rel: nonzero expected).
    Branch-free (the first failure is looked for only in a tile that has one; the error maxima, never
    negative nor nan, as the maxima of their bits), so that the loop vectorises."""
    f = 0
    ea = np.int64(0)
    er = np.int64(0)
    w = want[lo:lo + m]
    for t in range(m):
        g = np.float64(res[t])
        e = np.float64(w[t])
        diff = abs(g - e)
        ae = abs(e)
        finite = (abs(g) < np.inf) & (ae < np.inf)
        ok = (g == e) | (np.isnan(g) & np.isnan(e)) | (finite & (diff <= atol + rtol * ae))
        f += 0 if ok else 1
        d = diff if finite else 0.0
        ea = max(ea, _bits(d))
        er = max(er, _bits(d / ae if ae > 0 else 0.0))
    fst = -1
    if f:
        for t in range(m):
            g = np.float64(res[t])
            e = np.float64(w[t])
            diff = abs(g - e)
            ae = abs(e)
            finite = abs(g) < np.inf and ae < np.inf
            if not (g == e or (np.isnan(g) and np.isnan(e)) or (finite and diff <= atol + rtol * ae)):
                fst = lo + t
                break
    return f, fst, _from_bits(ea), _from_bits(er)


@njit(**_JIT)
def _ulp_tile(res, want, lo, m, mode):
    """Max distance in values of the kernel dtype between res[:m] and want[lo:lo+m] over finite pairs
    (+0 and -0 are 0 apart); compare.ulp_distance's rule."""
    u = 0.0
    if res.itemsize == 8:
        ri = res.view(np.int64)
        w = want[lo:lo + m]
        wi = w.view(np.int64)
        imin = np.int64(-9223372036854775808)
        for t in range(m):
            if abs(res[t]) < np.inf and abs(w[t]) < np.inf:
                ka = ri[t]
                kb = wi[t]
                ka = ka if ka >= 0 else imin - ka
                kb = kb if kb >= 0 else imin - kb
                if (ka >= 0) == (kb >= 0):
                    d = np.float64(abs(ka - kb))
                else:
                    d = np.float64(abs(ka)) + np.float64(abs(kb))
                u = max(u, d)
        return u
    ru = res.view(np.uint32)
    w = want[lo:lo + m]
    wu = w.view(np.uint32)
    k = np.int64(0)  # the distances are exact int64s: their max, converted once
    for t in range(m):
        both = (abs(res[t]) < np.inf) & (abs(w[t]) < np.inf)
        k = max(k, abs(_ulp_key32(ru[t], mode) - _ulp_key32(wu[t], mode)) if both else np.int64(0))
    return np.float64(k)


@njit(**_JIT)
def _ulp_key32(bits, mode):
    """Signed position of a float32 register value on the grid of the kernel dtype (mode 0: float32,
    1: float16, 2: bfloat16), for finite values: neighbouring values of that dtype are 1 apart."""
    mag = np.int64(bits & np.uint32(0x7FFFFFFF))
    if mode == 2:
        mag = mag >> 16
    elif mode == 1:
        e = mag >> 23
        if e >= 113:
            mag = ((e - 112) << 10) | ((mag & 0x7FFFFF) >> 13)
        else:
            f = np.uint32(mag).view(np.float32)
            mag = np.int64(f * np.float32(16777216.0))
    return -mag if bits & np.uint32(0x80000000) else mag


@njit(**_JIT)
def _compare_rows(res, want, lo, m, rtol, atol, row):
    """_compare_tile over a tile of whole rows, counting rows: failing rows (a row fails where one of its
    elements does), the first failing row's index (-1 none), max abs and rel error over its elements."""
    f = 0
    fst = -1
    ea = 0.0
    er = 0.0
    for r0 in range(0, m, row):
        rf, _, rea, rer = _compare_tile(res[r0:], want, lo + r0, row, rtol, atol)
        if rf:
            if fst < 0:
                fst = (lo + r0) // row
            f += 1
        ea = max(ea, rea)
        er = max(er, rer)
    return f, fst, ea, er


@njit(**_JIT)
def _verify_items(ops, args, imm, lengths, x, want, settings, out, w0, w1):
    """Run every program over x [P, n] and compare with want [n] (the reference rounded to the kernel
    dtype, in register dtype). settings = (rtol, atol, rounding mode, lanes, stop early, tile span, row).
    Per work item w = b * lanes + lane (lane = a contiguous range of tiles), out[w] = (failures, first
    failing index or -1, max abs, rel and ULP error over finite pairs, inputs evaluated); in a row kernel
    (row > 0) failures, first failure and evaluated count rows. With stop early a lane stops after its
    first tile holding a failure. (Few arguments: numba's call overhead grows fast past ~12.)"""
    rtol = settings[0]
    atol = settings[1]
    mode = int(settings[2])
    lanes = int(settings[3])
    stop_early = settings[4] != 0
    span = int(settings[5])
    row = int(settings[6])
    n = x.shape[1]
    n_tiles = (n + span - 1) // span
    per_lane = (n_tiles + lanes - 1) // lanes
    width = max(1, ops.shape[1])
    regs = np.empty((width + 1, span), dtype=x.dtype)
    for w in range(w0, w1):
        b = w // lanes
        lane = w % lanes
        length = lengths[b]
        f = 0
        fst = -1
        ea = 0.0
        er = 0.0
        eu = 0.0
        done = 0
        if length >= 1:
            ret = args[b, length - 1, 0]
            t_end = min(n_tiles, (lane + 1) * per_lane)
            for tile in range(lane * per_lane, t_end):
                lo = tile * span
                m = min(span, n - lo)
                _exec(ops[b], args[b], imm[b], length, x, lo, m, regs, mode, row)
                res = regs[ret]
                if row > 0:
                    tf, tfst, tea, ter = _compare_rows(res, want, lo, m, rtol, atol, row)
                    done += m // row
                else:
                    tf, tfst, tea, ter = _compare_tile(res, want, lo, m, rtol, atol)
                    done += m
                if tf:
                    if fst < 0:
                        fst = tfst
                    f += tf
                ea = max(ea, tea)
                er = max(er, ter)
                eu = max(eu, _ulp_tile(res, want, lo, m, mode))
                if stop_early and f:
                    break
        out[w, 0] = f
        out[w, 1] = fst
        out[w, 2] = ea
        out[w, 3] = er
        out[w, 4] = eu
        out[w, 5] = done


@dataclass
class ProgramArrays:
    """A ProgramBatch as contiguous host arrays for the evaluator; programs that did not compile have
    length 0 (they evaluate to nan and are never compared)."""

    ops: np.ndarray  # [B, L] int32
    args: np.ndarray  # [B, L, 3] int32
    imm: np.ndarray  # [B, L] float64
    lengths: np.ndarray  # [B] int32

    @classmethod
    def from_batch(cls, batch) -> ProgramArrays:
        batch = batch.trimmed().to("cpu")
        lengths = batch.lengths.numpy().astype(np.int32)
        lengths = np.where(batch.error[:, 0].numpy() == 0, lengths, 0).astype(np.int32)
        return cls(np.ascontiguousarray(batch.ops.numpy(), dtype=np.int32),
                   np.ascontiguousarray(batch.args.numpy(), dtype=np.int32),
                   np.ascontiguousarray(batch.imm.numpy(), dtype=np.float64), lengths)

    @classmethod
    def from_programs(cls, programs: list) -> ProgramArrays:
        """Host Programs (anything else, e.g. a CompileError, is a row of length 0) packed with NumPy."""
        progs = [p if isinstance(p, Program) else None for p in programs]
        width = max([len(p) for p in progs if p is not None] + [1])
        B = len(progs)
        ops = np.full((B, width), -1, dtype=np.int32)
        args = np.full((B, width, 3), -1, dtype=np.int32)
        imm = np.zeros((B, width), dtype=np.float64)
        lengths = np.zeros(B, dtype=np.int32)
        for i, p in enumerate(progs):
            if p is None:
                continue
            k = len(p)
            ops[i, :k] = [_OP[o] for o in p.ops]
            args[i, :k] = p.args
            imm[i, :k] = p.imms
            lengths[i] = k
        return cls(ops, args, imm, lengths)

    def __len__(self) -> int:
        return self.ops.shape[0]

    @property
    def reduces(self) -> bool:
        """Whether a program here is a row kernel (has a reduction: the last opcodes, spec.IR_OPS); computed
        once (the arrays are not changed after packing)."""
        known = self.__dict__.get("_reduces")
        if known is None:
            known = self.__dict__["_reduces"] = bool(self.ops.size) and int(self.ops.max()) >= FIRST_REDUCTION
        return known

    def select(self, rows: np.ndarray) -> ProgramArrays:
        return ProgramArrays(self.ops[rows], self.args[rows], self.imm[rows], self.lengths[rows])

    def unique(self) -> tuple[ProgramArrays, np.ndarray | None]:
        """(the distinct programs, for each program the row of its copy among them), or (self, None) when
        all are distinct: candidates that differ only in comments, spacing or names compile to the same
        program, which then runs once. Rows are compared bit for bit (instructions, operands, immediates)."""
        b = len(self)
        if b < 2:
            return self, None
        rows = np.concatenate([self.ops.reshape(b, -1).view(np.uint8), self.args.reshape(b, -1).view(np.uint8),
                               self.imm.reshape(b, -1).view(np.uint8), self.lengths.reshape(b, 1).view(np.uint8)],
                              axis=1)
        seen: dict[bytes, int] = {}
        inverse = np.fromiter((seen.setdefault(r.tobytes(), len(seen)) for r in rows), dtype=np.int64, count=b)
        if len(seen) == b:
            return self, None
        first = np.zeros(len(seen), dtype=np.int64)
        first[inverse[::-1]] = np.arange(b - 1, -1, -1)
        return self.select(first), inverse


@dataclass
class Comparison:
    """Per program: failures seen, first failing input (-1: none), max abs / rel / ULP error over finite
    pairs, and inputs evaluated (fewer than all when it stopped at its first failing tile). From a compare
    in row mode (row=n), failures, first_failure and evaluated count rows (failing rows, the first failing
    row's index, rows evaluated); the errors are still over elements."""

    failures: np.ndarray
    first_failure: np.ndarray
    max_abs_err: np.ndarray
    max_rel_err: np.ndarray
    max_ulp_err: np.ndarray
    evaluated: np.ndarray
    got: np.ndarray | None = None  # each program's output at its first failure, where the caller tracked it

    def take(self, rows: np.ndarray) -> Comparison:
        """The comparison of program rows[i] as row i."""
        values = (getattr(self, f.name) for f in dataclasses.fields(self))
        return Comparison(*(None if v is None else v[rows] for v in values))


def threads() -> int:
    """Threads the evaluator runs on: the CPUs this process may use."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


#: below this many register-element updates (instructions x inputs) a call runs in the calling thread alone:
#: waking the pool's threads and merging their lanes costs more than it saves (one edit of a 26-instruction
#: kernel on 6,905 inputs is 180k updates; split over two threads it ran about twice as long)
INLINE_WORK = 1 << 20


def _run_items(fn, n_items: int, work: int, *arguments) -> None:
    """fn(*arguments, w0, w1) over work items 0..n_items, split across threads (the jitted functions
    release the GIL), the calling thread working too; in the calling thread alone when there is one item,
    one CPU or little work."""
    global _POOL
    t = threads()
    if t == 1 or n_items <= 1 or work < INLINE_WORK:
        fn(*arguments, 0, n_items)
        return
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(t - 1, thread_name_prefix="gpuiter-fused")
    # more parts than threads: lanes that stop early leave the others to balance; each thread (the caller
    # among them) takes the next part until none is left
    parts = min(n_items, 4 * t)
    bounds = np.linspace(0, n_items, parts + 1).astype(np.int64).tolist()
    spans = iter([(lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo])
    lock = threading.Lock()

    def work_through() -> None:
        while True:
            with lock:
                span = next(spans, None)
            if span is None:
                return
            fn(*arguments, *span)

    futures = [_POOL.submit(work_through) for _ in range(min(t, parts) - 1)]
    work_through()
    for f in futures:
        f.result()


def as_registers(x: np.ndarray, dtype: str) -> np.ndarray:
    """Inputs [P, n] of the kernel dtype as the evaluator's register dtype (exact), contiguous."""
    return np.ascontiguousarray(x, dtype=REGISTER_DTYPE[dtype])


def row_span(row: int) -> int:
    """Inputs per tile: TILE, or in a row kernel (row > 0) whole rows, as many as fit in TILE (one row when
    it is longer)."""
    return TILE if row <= 0 else max(1, TILE // row) * row


def evaluate(programs: ProgramArrays, x: np.ndarray, dtype: str = "float32", row: int = 0) -> np.ndarray:
    """Outputs [B, n] (register dtype: float32 for the 16-bit dtypes, holding their values exactly) of
    every program over inputs x [P, n]; bool results as 0/1, programs that did not compile as nan.

    row = 0: elementwise. row > 0: row kernels, the inputs being n / row rows of `row` (row r is
    x[:, r*row:(r+1)*row]); a reduction reduces each row, and every output is per element (a per-row value
    repeated along its row). ValueError if n is not whole rows, or if a program reduces and row is 0."""
    x = as_registers(x, dtype)
    B, n = len(programs), x.shape[1]
    check_row_length(n, row, programs.reduces)
    span = row_span(row)
    out = np.empty((B, n), dtype=x.dtype)
    n_tiles = -(-n // span)
    _run_items(_evaluate_items, B * n_tiles, B * n * programs.ops.shape[1], programs.ops, programs.args,
               programs.imm, programs.lengths, x, out, ROUNDING[dtype], span, int(row))
    return out


def compare(programs: ProgramArrays, x: np.ndarray, want: np.ndarray, dtype: str, rtol: float, atol: float,
            stop_early: bool = True, row: int = 0) -> Comparison:
    """Run every program over x [P, n] and compare with `want` [n] (the reference's outputs rounded to
    the kernel dtype) in one pass; see Comparison. A program stops at its first failing tile when
    stop_early (so its failures and errors cover the inputs it evaluated).

    row > 0: row kernels over rows of `row` inputs, as evaluate; `want` is still per element (a per-row
    reference output repeated along its row). The Comparison then counts rows: failures are failing rows
    (a row fails where any of its elements does), first_failure is the index of the first failing row,
    evaluated the rows evaluated; the max abs / rel / ULP errors are over elements, as elementwise."""
    x = as_registers(x, dtype)
    want = np.ascontiguousarray(want, dtype=x.dtype)
    B, n = len(programs), x.shape[1]
    check_row_length(n, row, programs.reduces)
    span = row_span(row)
    n_tiles = max(1, -(-n // span))
    inline = B * n * programs.ops.shape[1] < INLINE_WORK
    lanes = 1 if inline else min(n_tiles, max(1, -(-2 * threads() // max(B, 1))))  # few programs: split tiles too
    items = B * lanes
    out = np.zeros((items, 6), dtype=np.float64)
    settings = np.array([rtol, atol, ROUNDING[dtype], lanes, stop_early, span, row], dtype=np.float64)
    _run_items(_verify_items, items, B * n * programs.ops.shape[1], programs.ops, programs.args, programs.imm,
               programs.lengths, x, want, settings, out)
    fails, first, evaluated = (out[:, c].astype(np.int64) for c in (0, 1, 5))
    abs_err, rel_err, ulp_err = out[:, 2].copy(), out[:, 3].copy(), out[:, 4].copy()
    if lanes == 1:
        return Comparison(fails, first, abs_err, rel_err, ulp_err, evaluated)
    # lanes cover consecutive tiles: the first failure is the first lane's that has one; with stop_early
    # the lanes after it would not have run, so they don't count
    shape = (B, lanes)
    fails, first, evaluated = fails.reshape(shape), first.reshape(shape), evaluated.reshape(shape)
    abs_err, rel_err, ulp_err = abs_err.reshape(shape), rel_err.reshape(shape), ulp_err.reshape(shape)
    failing = fails > 0
    stop = np.where(failing.any(axis=1), failing.argmax(axis=1), lanes - 1)
    used = np.arange(lanes)[None, :] <= (stop[:, None] if stop_early else lanes - 1)
    firsts = np.where(failing, first, np.iinfo(np.int64).max).min(axis=1)
    return Comparison(np.where(used, fails, 0).sum(axis=1), np.where(firsts == np.iinfo(np.int64).max, -1, firsts),
                      np.where(used, abs_err, 0.0).max(axis=1), np.where(used, rel_err, 0.0).max(axis=1),
                      np.where(used, ulp_err, 0.0).max(axis=1), np.where(used, evaluated, 0).sum(axis=1))


def warm_up() -> None:
    """Load (or compile, the first time on this machine) the evaluator for every register dtype, elementwise
    and on rows, so the first verification of a session pays nothing for it."""
    ops = np.array([[_OP["param"], _OP["ret"], -1], [_OP["param"], _OP["sum"], _OP["ret"]]], dtype=np.int32)
    args = np.array([[[-1] * 3, [0, -1, -1], [-1] * 3], [[-1] * 3, [0, -1, -1], [1, -1, -1]]], dtype=np.int32)
    elementwise = ProgramArrays(ops[:1, :2].copy(), args[:1, :2].copy(), np.zeros((1, 2)), np.array([2], np.int32))
    rows = ProgramArrays(ops, args, np.zeros((2, 3)), np.array([2, 3], dtype=np.int32))
    for dtype in ("float32", "float64"):
        x = np.zeros((1, 4), dtype=REGISTER_DTYPE[dtype])
        evaluate(elementwise, x, dtype)
        compare(elementwise, x, x[0], dtype, 0.0, 0.0)
        evaluate(rows, x, dtype, row=2)
        compare(rows, x, x[0], dtype, 0.0, 0.0, row=2)


__all__ = ["REGISTER_DTYPE", "ROUNDING", "TILE", "Comparison", "ProgramArrays", "as_registers", "compare",
           "evaluate", "row_span", "threads", "warm_up"]
