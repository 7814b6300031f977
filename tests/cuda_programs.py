"""Programs and inputs for the native CUDA tests: one program per IR op, one per literal, and input vectors with the
special values of a dtype."""

import numpy as np

from jupyter_gpuiter.ir import Program
from jupyter_gpuiter.lang import spec

#: The IR ops that compute (all but parameters, constants and ret).
COMPUTE_OPS = [op.name for op in spec.IR_OPS if op.name not in ("param", "const", "bool", "ret")]


def op_program(op: str) -> Program:
    """`def f(x0, ...): return op(x0, ...)` for one IR op."""
    n = spec.IR_OP_BY_NAME[op].nargs
    operands = tuple(range(n)) + (-1,) * (3 - n)
    return Program(["param"] * n + [op, "ret"], [(-1, -1, -1)] * n + [operands, (n, -1, -1)],
                   [float(i) for i in range(n)] + [0.0, 0.0], n, [f"x{i}" for i in range(n)], op)


def const_program(v: float, op: str = "const") -> Program:
    """`def f(): return v` (op "bool" for True/False)."""
    return Program([op, "ret"], [(-1, -1, -1), (0, -1, -1)], [v, 0.0], 0, [], "lit")


def inputs(rng: np.random.Generator, dtype: str, n: int) -> np.ndarray:
    """`n` values of `dtype`: its special values (±0, ±1, ±inf, nan, the smallest subnormal and normal, the
    largest finite), small integers and halves (ties for floor division and modulo), then uniform in [-10, 10];
    shuffled, so that several parameters meet in every combination."""
    info = np.finfo(dtype)
    special = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, -3.0, 7.0, 1e-3, 100.0, -100.0, np.inf, -np.inf, np.nan,
               float(info.smallest_subnormal), float(info.tiny), float(info.max), -float(info.max)]
    small = rng.integers(-8, 9, n // 4) / rng.choice([1, 2], n // 4)
    x = np.concatenate([special * 8, small, rng.uniform(-10, 10, n)])[:n]
    return rng.permutation(x).astype(dtype)
