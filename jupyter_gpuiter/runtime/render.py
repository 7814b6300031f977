"""Render one Program as a straight-line torch function (the CPU/torch native path of a Kernel).

Every register has the inputs' broadcast shape; in a row kernel a reduction reduces the last axis (the
row) and is broadcast back along it, so a per-row value is held along its row (sum(2.0) is 2n) and a
per-row result drops the last axis (docs/language.md, "Row kernels")."""

from __future__ import annotations

import torch

from ..ir import Program
from ..lang.spec import IR_OP_BY_NAME, REDUCTION_OPS
from .reference import check_rows
from .torch_ops import TORCH_OPS, reduce_rows

TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
                "float64": torch.float64}


def torch_function(program: Program, dtype: str = "float32"):
    """A function of torch tensors (one per parameter, broadcast together) computing the program: of the
    broadcast shape, or for a row kernel whose result is per row, that shape without its last axis (a
    row kernel raises ValueError on an empty last axis or on scalars only)."""
    tdt = TORCH_DTYPES[dtype]
    steps = []
    for op, (a, b, c), imm in zip(program.ops, program.args, program.imms):
        steps.append((op, (a, b, c)[: IR_OP_BY_NAME[op].nargs], imm))
    returns_bool = program.returns_bool()
    reduces, per_row = program.reduces, program.returns_per_row()

    def run(*inputs: torch.Tensor) -> torch.Tensor:
        xs = torch.broadcast_tensors(*[x.to(tdt) for x in inputs]) if inputs else []
        like = xs[0] if xs else torch.zeros((), dtype=tdt)
        if reduces:
            check_rows(program.name, tuple(like.shape))
        regs: list[torch.Tensor] = []
        for op, operands, imm in steps:
            if op == "param":
                regs.append(xs[int(imm)])
            elif op in ("const", "bool"):
                regs.append(torch.full_like(like, imm))
            elif op == "ret":
                out = regs[operands[0]]
                if per_row:
                    out = out[..., 0]
                return out != 0 if returns_bool else out
            elif op in REDUCTION_OPS:
                regs.append(reduce_rows(op, regs[operands[0]]).expand(like.shape))
            else:
                regs.append(TORCH_OPS[op](*(regs[i] for i in operands)))
        raise ValueError("program has no ret")

    return run
