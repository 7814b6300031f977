"""The reference evaluator: runs a Program on NumPy arrays, op by op. Ground truth for the VM.

A row kernel (one with a reduction) runs on the inputs broadcast together, the last axis being the
row; every register has that full shape (a per-row value is broadcast along the row) and reductions
accumulate in float64 and round once to the kernel dtype (docs/language.md, "Row kernels").

Values are arrays of the kernel dtype; bools are 0/1 in that dtype (as Python's True + 1 == 2) and
the result is converted to bool only when the program returns a bool. Semantics are the scalar
Python function's, with IEEE results where Python would raise (x/0 -> inf or nan, like NumPy).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir import Program
from ..lang.spec import IR_OP_BY_NAME

_erf = np.frompyfunc(math.erf, 1, 1)


def _truthy(x):
    return x != 0  # nan is truthy, as in Python


def _min(a, b):  # Python's min(a, b): b only if b < a (so min(nan, 1) is nan, min(1, nan) is 1)
    return np.where(b < a, b, a)


def _max(a, b):
    return np.where(b > a, b, a)


def _floordiv(a, b):
    return np.floor_divide(a, b)


def _pow(a, b):
    return np.power(a, b)


#: IR op -> NumPy implementation. Results are cast back to the kernel dtype by the evaluator.
NUMPY_OPS = {
    "neg": np.negative, "pos": lambda x: x, "not": lambda x: x == 0,
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floordiv": _floordiv, "mod": np.remainder, "pow": _pow,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
    "and": lambda a, b: np.where(_truthy(a), b, a), "or": lambda a, b: np.where(_truthy(a), a, b),
    "select": lambda c, a, b: np.where(_truthy(c), a, b),
    "abs": np.abs, "min": _min, "max": _max, "sqrt": np.sqrt, "exp": np.exp, "expm1": np.expm1,
    "log": np.log, "log1p": np.log1p, "log2": np.log2, "log10": np.log10, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "atan2": np.arctan2,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "floor": np.floor, "ceil": np.ceil,
    "erf": lambda x: np.asarray(_erf(np.asarray(x, dtype=np.float64)), dtype=np.float64),
    "clip": lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "copysign": np.copysign, "hypot": np.hypot,
    "isnan": np.isnan, "isinf": np.isinf, "float": lambda x: x,
}


#: reduction IR op -> its float64 NumPy reduction over the last axis (kept as an axis of length 1)
def _signed_zero(m: np.ndarray, a: np.ndarray, negative: bool) -> np.ndarray:
    """A row's max (min) where it is zero: +0 (-0) when the row holds one, as the other evaluators fold; NumPy
    keeps whichever zero its loop met first."""
    has = np.any((a == 0) & (np.signbit(a) == negative), axis=-1, keepdims=True)
    return np.where((m == 0) & has, np.asarray(-0.0 if negative else 0.0, m.dtype), m)


REDUCE_OPS = {
    "sum": lambda a: np.sum(a, axis=-1, dtype=np.float64, keepdims=True),
    "mean": lambda a: np.mean(a, axis=-1, dtype=np.float64, keepdims=True),
    "amax": lambda a: _signed_zero(np.max(a, axis=-1, keepdims=True), a, negative=False),
    "amin": lambda a: _signed_zero(np.min(a, axis=-1, keepdims=True), a, negative=True),
}


def check_rows(name: str, shape: tuple) -> None:
    """A row kernel needs a non-empty last axis (the row): ValueError otherwise."""
    if len(shape) == 0:
        raise ValueError(f"{name}() is a row kernel (it reduces over the last axis): give it at least one "
                         "array argument, got only scalars")
    if shape[-1] == 0:
        raise ValueError(f"{name}() is a row kernel: its rows (the last axis of the broadcast shape "
                         f"{tuple(shape)}) must not be empty")


def check_row_length(n: int, row: int, reduces: bool) -> None:
    """The batched evaluators' `row` argument over n inputs (fused, fused_cuda, vm): 0 is elementwise, refused
    for programs with a reduction; row > 0 needs n to be whole rows of it. ValueError otherwise."""
    if row < 0 or int(row) != row:
        raise ValueError(f"row must be a row length (> 0) or 0 for elementwise, got {row!r}")
    if row == 0 and reduces:
        raise ValueError("a row kernel (a program with a reduction) needs its row length: pass row=n")
    if row and n % row:
        raise ValueError(f"{n} inputs are not whole rows of {row}")


def evaluate(program: Program, inputs: list, dtype="float32") -> np.ndarray:
    """Run `program` over `inputs` (one array-like per parameter, broadcast together): elementwise, or
    row by row along the last axis for a row kernel (the result then drops that axis when it is per
    row)."""
    dt = np.dtype(dtype)
    if len(inputs) != program.n_params:
        raise TypeError(f"{program.name}() takes {program.n_params} arguments, got {len(inputs)}")
    arrays = np.broadcast_arrays(*[np.asarray(x, dtype=dt) for x in inputs]) if inputs else []
    shape = arrays[0].shape if arrays else ()
    if program.reduces:
        check_rows(program.name, shape)
    regs: list[np.ndarray] = []
    with np.errstate(all="ignore"):
        for op, (a, b, c), imm in zip(program.ops, program.args, program.imms):
            if op == "param":
                regs.append(arrays[int(imm)])
            elif op in ("const", "bool"):
                regs.append(np.full(shape, imm, dtype=dt))
            elif op == "ret":
                out = regs[a][..., 0] if program.returns_per_row() else regs[a]
                return out.astype(bool) if program.returns_bool() else out.astype(dt)
            elif op in REDUCE_OPS:
                regs.append(np.broadcast_to(REDUCE_OPS[op](regs[a]).astype(dt), shape))
            else:
                operands = [regs[i] for i in (a, b, c)[: IR_OP_BY_NAME[op].nargs]]
                regs.append(np.asarray(NUMPY_OPS[op](*operands)).astype(dt))
    raise ValueError("program has no ret")

