"""The IR's ops as torch functions: one table, used by the single-kernel renderer and the batched VM.

Semantics are those of runtime/reference.py (NumPy): values are tensors of the kernel dtype, bools
are 0/1 in that dtype, nan is truthy, min/max follow Python's comparisons, IEEE results everywhere.
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
