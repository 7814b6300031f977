"""The batched VM: run B programs of a ProgramBatch over the same N inputs, on the device.

Registers are one tensor [B, R, n] per chunk of inputs; step k executes instruction k of every
program at once, one torch op per distinct opcode at that step (candidates of one kernel share most
opcodes, so a step is a handful of ops over B*n values). The opcode schedule is read to the host
once per batch (a few KB); inputs are chunked so that registers fit a memory budget.

Row kernels (run(..., row=n)): the inputs are rows of n (row r is columns r*n..(r+1)*n-1), a chunk holds
whole rows, and a reduction reduces each row of its operand (torch_ops.reduce_rows: float64, rounded
once) and repeats the row's value along the row, so every output is per element. Where one row of every
program's registers is over the budget, the programs run in groups that fit it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..ir import OP_NAMES, ProgramBatch
from ..lang.spec import IR_OP_BY_NAME, REDUCTION_OPS
from .reference import check_row_length
from .render import TORCH_DTYPES
from .torch_ops import TORCH_OPS, reduce_rows

DEFAULT_BUDGET = 256 << 20  # bytes of registers per chunk


@dataclass
class Schedule:
    """Per step k: [(opcode name, rows tensor, operand index tensors [rows, arity], imm tensor)]."""

    steps: list[list[tuple]]
    ret_reg: torch.Tensor  # [B] register holding each program's result
    returns_bool: np.ndarray  # [B]
    valid: np.ndarray  # [B] programs that compiled
    n_nodes: int  # computing instructions over all valid programs
    n_regs: int  # registers per program (the longest program's instructions before its ret)
    reduces: bool = False  # a valid program has a reduction (a row kernel)


def schedule(batch: ProgramBatch) -> Schedule:
    ops = batch.ops.cpu().numpy()
    args = batch.args.cpu().numpy()
    imm = batch.imm.cpu().numpy()
    lengths = batch.lengths.cpu().numpy()
    valid = (batch.error[:, 0].cpu().numpy() == 0) & (lengths > 0)
    B = ops.shape[0]
    width = int(lengths.max(initial=0))
    dev = batch.ops.device
    is_bool = np.zeros((B, max(width, 1)), dtype=bool)
    rows_all = np.arange(B)
    steps: list[list[tuple]] = []
    n_nodes = 0
    n_regs = max(width - 1, 1)
    for k in range(width - 1):  # the last instruction of the longest program is its ret
        col = np.where(valid & (k < lengths - 1), ops[:, k], -1)
        groups = []
        for code in np.unique(col[col >= 0]):
            name = OP_NAMES[code]
            rows = rows_all[col == code]
            nargs = IR_OP_BY_NAME[name].nargs
            a = args[rows, k, :nargs]
            if name in ("and", "or", "min", "max"):
                is_bool[rows, k] = is_bool[rows, a[:, 0]] & is_bool[rows, a[:, 1]]
            elif name in ("amax", "amin"):
                is_bool[rows, k] = is_bool[rows, a[:, 0]]
            elif name == "select":
                is_bool[rows, k] = is_bool[rows, a[:, 1]] & is_bool[rows, a[:, 2]]
            else:
                is_bool[rows, k] = IR_OP_BY_NAME[name].returns_bool
            if name not in ("param",):
                n_nodes += len(rows)
            flat_args = torch.as_tensor((rows[:, None] * n_regs + a).T.copy(), device=dev)
            groups.append((name, torch.as_tensor(rows, device=dev), torch.as_tensor(a, device=dev),
                           torch.as_tensor(imm[rows, k], device=dev), flat_args,
                           torch.as_tensor(rows * n_regs + k, device=dev)))
        steps.append(groups)
    last = np.clip(lengths - 1, 0, None)
    ret_reg = np.where(valid, args[rows_all, last, 0], 0)
    returns_bool = np.where(valid, is_bool[rows_all, np.clip(ret_reg, 0, None)], False)
    reduces = any(g[0] in REDUCTION_OPS for groups in steps for g in groups)
    return Schedule(steps, torch.as_tensor(ret_reg, device=dev), returns_bool, valid, n_nodes, n_regs, reduces)


def run(batch: ProgramBatch, inputs: torch.Tensor, dtype: str = "float32", *, sched: Schedule | None = None,
        budget: int = DEFAULT_BUDGET, row: int = 0) -> torch.Tensor:
    """Outputs [B, n] (kernel dtype; bool results as 0/1) of every program on inputs [P, n].

    Programs that did not compile produce nan. Programs read parameters 0..n_params-1 of `inputs`.
    row = 0: elementwise. row > 0: row kernels over the n / row rows of `row` inputs (row r is columns
    r*row..(r+1)*row-1); outputs are per element, a per-row value repeated along its row. ValueError if n
    is not whole rows, or if a program reduces and row is 0.
    """
    sched = sched or schedule(batch)
    tdt = TORCH_DTYPES[dtype]
    x = inputs.to(tdt)
    B = len(batch)
    n = x.shape[1]
    check_row_length(n, row, sched.reduces)
    regs_per_prog = sched.n_regs
    item = torch.finfo(tdt).bits // 8
    if row and B > 1 and B * regs_per_prog * item * row > budget:
        # one row of every program's registers is over the budget: programs in groups, a row at a time
        group = max(1, budget // (regs_per_prog * item * row))
        return torch.cat([run(_programs(batch, lo, min(B, lo + group)), inputs, dtype, budget=budget, row=row)
                          for lo in range(0, B, group)])
    chunk = max(1, min(n, budget // max(1, B * regs_per_prog * item)))
    if row:
        chunk = max(1, chunk // row) * row  # whole rows (at least one, over the budget if it must)
    out = torch.full((B, n), float("nan"), dtype=tdt, device=x.device)
    valid = torch.as_tensor(sched.valid, device=x.device)[:, None]
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        out[:, lo:hi] = torch.where(valid, _run_chunk(sched, x[:, lo:hi], B, regs_per_prog, tdt, row),
                                    out[:, lo:hi])
    return out


def _programs(batch: ProgramBatch, lo: int, hi: int) -> ProgramBatch:
    """Programs lo..hi-1 of the batch (views)."""
    return ProgramBatch(batch.ops[lo:hi], batch.args[lo:hi], batch.imm[lo:hi], batch.lengths[lo:hi],
                        batch.n_params[lo:hi], batch.error[lo:hi], batch.messages[lo:hi] if batch.messages else None)


def _run_chunk(sched: Schedule, x: torch.Tensor, B: int, n_regs: int, tdt, row: int = 0) -> torch.Tensor:
    m = x.shape[1]
    regs = torch.zeros((B * n_regs, m), dtype=tdt, device=x.device)  # row b*R + r is register r of program b
    for k, groups in enumerate(sched.steps):
        for name, rows, a, imm, flat_args, flat_dst in groups:
            if name == "param":
                val = x.index_select(0, imm.long())
            elif name in ("const", "bool"):
                val = imm.to(tdt)[:, None].expand(len(rows), m)
            elif name in REDUCTION_OPS:
                v = regs.index_select(0, flat_args[0]).view(len(rows), m // row, row)
                val = reduce_rows(name, v).expand(len(rows), m // row, row).reshape(len(rows), m)
            else:
                val = TORCH_OPS[name](*(regs.index_select(0, flat_args[j]) for j in range(a.shape[1])))
            regs.index_copy_(0, flat_dst, val)
    ret = torch.arange(B, device=x.device) * n_regs + sched.ret_reg.clamp(max=n_regs - 1)
    return regs.index_select(0, ret)
