"""The IR's ops as torch functions: one table, used by the single-kernel renderer and the batched VM.

Semantics are those of runtime/reference.py (NumPy): values are tensors of the kernel dtype, bools
are 0/1 in that dtype, nan is truthy, min/max follow Python's comparisons, IEEE results everywhere.
Reductions (reduce_rows) reduce the last axis: sum and mean accumulate in float64 (torch's summation
order, not NumPy's: the two may differ in the last float64 bit) and round once to the kernel dtype.
"""

from __future__ import annotations

import torch


def _truthy(x):
    return x != 0


def _mod(a, b):
    """Python's float %: the sign of the divisor, zeros included (torch.remainder keeps the dividend's)."""
    r = torch.remainder(a, b)
    return torch.where(r == 0, torch.copysign(torch.zeros_like(r), b), r)


def _as(x, like):
    return x.to(like.dtype) if x.dtype == torch.bool else x


#: IR op -> function of tensors (all operands share the kernel dtype).
TORCH_OPS = {
    "neg": torch.neg, "pos": lambda x: x, "not": lambda x: _as(x == 0, x),
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.true_divide,
    "floordiv": torch.floor_divide, "mod": _mod, "pow": torch.pow,
    "lt": lambda a, b: _as(a < b, a), "le": lambda a, b: _as(a <= b, a), "gt": lambda a, b: _as(a > b, a),
    "ge": lambda a, b: _as(a >= b, a), "eq": lambda a, b: _as(a == b, a), "ne": lambda a, b: _as(a != b, a),
    "and": lambda a, b: torch.where(_truthy(a), b, a), "or": lambda a, b: torch.where(_truthy(a), a, b),
    "select": lambda c, a, b: torch.where(_truthy(c), a, b),
    "abs": torch.abs, "min": lambda a, b: torch.where(b < a, b, a), "max": lambda a, b: torch.where(b > a, b, a),
    "sqrt": torch.sqrt, "exp": torch.exp, "expm1": torch.expm1, "log": torch.log, "log1p": torch.log1p,
    "log2": torch.log2, "log10": torch.log10, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
    "asin": torch.asin, "acos": torch.acos, "atan": torch.atan, "atan2": torch.atan2, "sinh": torch.sinh,
    "cosh": torch.cosh, "tanh": torch.tanh, "erf": torch.erf, "floor": torch.floor, "ceil": torch.ceil,
    "clip": lambda x, lo, hi: torch.minimum(torch.maximum(x, lo), hi),
    "sigmoid": lambda x: 1 / (1 + torch.exp(-x)), "copysign": torch.copysign, "hypot": torch.hypot,
    "isnan": lambda x: _as(torch.isnan(x), x), "isinf": lambda x: _as(torch.isinf(x), x), "float": lambda x: x,
}


def round_once(v: torch.Tensor, tdt: torch.dtype) -> torch.Tensor:
    """float64 values rounded once to the kernel dtype. To float16 and bfloat16 through float32 rounded to
    odd (then to nearest even by the conversion), which is rounding once from float64; torch's own
    float64 -> float16 conversion goes through float32 rounded to nearest, twice."""
    if tdt in (torch.float64, torch.float32):
        return v.to(tdt)
    f = v.to(torch.float32)
    back = f.double()
    inexact = (back != v) & torch.isfinite(f)
    bits = f.view(torch.int32)
    bits = torch.where(inexact & (back.abs() > v.abs()), bits - 1, bits)  # toward zero: v truncated
    return torch.where(inexact, bits | 1, bits).view(torch.float32).to(tdt)


def reduce_rows(op: str, x: torch.Tensor) -> torch.Tensor:
    """The reduction `op` (sum, mean, amax, amin) of x over its last axis, kept as an axis of length 1, in
    x's dtype: sum and mean accumulated in float64 and rounded once; max and min exact, as IEEE 754-2019's
    maximum and minimum (nan if the row has one, and -0 < +0, whatever the order; torch.amax keeps the
    first of +0 and -0)."""
    if op in ("amax", "amin"):
        r = torch.amax(x, dim=-1, keepdim=True) if op == "amax" else torch.amin(x, dim=-1, keepdim=True)
        # a zero result: +0 for max where the row holds a +0, -0 for min where it holds a -0
        zeros = (x == 0) & (torch.signbit(x) == (op == "amin"))
        signed = torch.where(zeros.any(dim=-1, keepdim=True), 0.0 if op == "amax" else -0.0,
                             -0.0 if op == "amax" else 0.0).to(r.dtype)
        return torch.where(r == 0, signed, r)
    v = torch.sum(x, dim=-1, keepdim=True, dtype=torch.float64)
    if op == "mean":
        v = v / x.shape[-1]
    return round_once(v, x.dtype)
