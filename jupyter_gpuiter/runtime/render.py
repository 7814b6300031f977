"""Render one Program as a straight-line torch function (the CPU/torch native path of a Kernel)."""

from __future__ import annotations

import torch

from ..ir import Program
from ..lang.spec import IR_OP_BY_NAME
from .torch_ops import TORCH_OPS

TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
                "float64": torch.float64}


def torch_function(program: Program, dtype: str = "float32"):
    """A function of torch tensors (one per parameter, broadcast together) computing the program."""
    tdt = TORCH_DTYPES[dtype]
    steps = []
    for op, (a, b, c), imm in zip(program.ops, program.args, program.imms):
        steps.append((op, (a, b, c)[: IR_OP_BY_NAME[op].nargs], imm))
    returns_bool = program.returns_bool()

    def run(*inputs: torch.Tensor) -> torch.Tensor:
        xs = torch.broadcast_tensors(*[x.to(tdt) for x in inputs]) if inputs else []
        like = xs[0] if xs else torch.zeros((), dtype=tdt)
        regs: list[torch.Tensor] = []
        for op, operands, imm in steps:
            if op == "param":
                regs.append(xs[int(imm)])
            elif op in ("const", "bool"):
                regs.append(torch.full_like(like, imm))
            elif op == "ret":
                out = regs[operands[0]]
                return out != 0 if returns_bool else out
            else:
                regs.append(TORCH_OPS[op](*(regs[i] for i in operands)))
        raise ValueError("program has no ret")

    return run
