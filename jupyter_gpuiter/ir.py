"""The IR: SSA over instruction indices, one Program per kernel, ProgramBatch as padded device tensors.

Instruction i is (op, a, b, c, imm). Parameters are instructions 0..P-1, constants are instructions,
`name = expr` emits nothing (the name binds a register), the last instruction is `ret`. Canonical
order: parameters, then each statement's expression in left-to-right post-order.

>>> p = Program(["param", "const", "mul", "ret"], [(-1,) * 3, (-1,) * 3, (0, 1, -1), (2, -1, -1)],
...             [0.0, 2.0, 0.0, 0.0], n_params=1)
>>> print(p.text())
%0 = param 0
%1 = const 2.0
%2 = mul %0 %1
ret %2
"""

from __future__ import annotations

import gc
import hashlib
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import repeat

import numpy as np

from .lang import spec
from .lang.errors import KIND_BY_CODE, KIND_CODES, CompileError

OP_INDEX = spec.IR_OP_INDEX
OP_NAMES = [op.name for op in spec.IR_OPS]


#: whether gc.freeze and gc.unfreeze splice the generations' lists (a GIL build before 3.14's collector)
_SPLICING_FREEZE = sys.version_info < (3, 14) and getattr(sys, "_is_gil_enabled", lambda: True)()


@contextmanager
def gc_paused():
    """Pause the cyclic garbage collector while unpacking a batch into host objects: the hundreds of
    thousands of lists and tuples would otherwise trigger hundreds of young collections and, every few
    batches, a full one (up to half the host time). The objects hold no cycles; the collector resumes
    (if it was on) when the block exits.

    On exit every young object of the process, these among them, moves to the oldest generation
    unscanned (gc.freeze, then unfreeze, which puts the frozen objects there), or the first young
    collection after it would traverse them all (a tenth or more of a 4,096-program compile_batch,
    docs/performance.md). They are
    scanned at a later full collection instead, with everything else long-lived, and cyclic garbage
    that was young then waits for that one too. Skipped while the process holds frozen objects of its
    own (unfreezing would thaw them), and where the two calls are not a cheap splice of lists: CPython
    3.14's incremental collector and free-threaded builds (both unmeasured here)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            if _SPLICING_FREEZE and gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()



def format_imm(op: str, imm: float, index: int) -> str:
    if op == "param":
        return str(index)
    if op == "bool":
        return "True" if imm else "False"
    return repr(float(imm))


@dataclass
class Program:
    """One compiled kernel: parallel lists of ops, operand triples and immediates."""

    ops: list[str]
    args: list[tuple[int, int, int]]
    imms: list[float]
    n_params: int
    param_names: list[str] = field(default_factory=list)
    name: str = "kernel"

    def __len__(self) -> int:
        return len(self.ops)

    def text(self) -> str:
        """Stable canonical text, one instruction a line (docs/ir.md, "Canonical text")."""
        out = []
        for i, (op, args, imm) in enumerate(zip(self.ops, self.args, self.imms)):
            if op == "ret":
                out.append(f"ret %{args[0]}")
                continue
            operands = " ".join(f"%{a}" for a in args[: spec.IR_OP_BY_NAME[op].nargs])
            detail = format_imm(op, imm, i) if op in ("param", "const", "bool") else operands
            out.append(f"%{i} = {op} {detail}")
        return "\n".join(out)

    def digest(self) -> str:
        """SHA-256 of the canonical text: what identifies the program (e.g. as a reference in a cache)."""
        return hashlib.sha256(self.text().encode()).hexdigest()

    def types(self) -> list[bool]:
        """Per instruction: True where the value is a bool (bools act as 0/1 in arithmetic)."""
        is_bool: list[bool] = []
        for op, (a, b, c) in zip(self.ops, self.args):
            if op in ("and", "or", "min", "max"):
                is_bool.append(is_bool[a] and is_bool[b])
            elif op == "select":
                is_bool.append(is_bool[b] and is_bool[c])
            elif op in ("ret", "amax", "amin"):
                is_bool.append(is_bool[a])
            else:
                is_bool.append(spec.IR_OP_BY_NAME[op].returns_bool)
        return is_bool

    def returns_bool(self) -> bool:
        return self.types()[-1]

    @property
    def reduces(self) -> bool:
        """Whether this is a row kernel: it has a reduction (docs/language.md, "Row kernels")."""
        return any(op in spec.REDUCTION_OPS for op in self.ops)

    def per_row(self) -> list[bool]:
        """Per instruction: True where the value is the same along the row (a reduction's result, a
        literal, or computed from per-row values only), False where it varies per element (parameters
        and what depends on them outside a reduction)."""
        row: list[bool] = []
        for op, args in zip(self.ops, self.args):
            if op == "param":
                row.append(False)
            elif spec.IR_OP_BY_NAME[op].reduction:
                row.append(True)
            else:
                row.append(all(row[a] for a in args[: spec.IR_OP_BY_NAME[op].nargs]))
        return row

    def returns_per_row(self) -> bool:
        """A row kernel whose result is per row: one value a row (shape without the last axis)."""
        return self.reduces and self.per_row()[-1]

    @property
    def n_nodes(self) -> int:
        """Instructions that compute something (not parameters, not the final ret)."""
        return len(self.ops) - self.n_params - 1


@dataclass
class ProgramBatch:
    """B programs as padded tensors on one device: what the VM, the decoder and the compilers exchange.

    ops [B, N] int32 (-1 = padding), args [B, N, 3] int32, imm [B, N] float64, lengths [B],
    n_params [B], error [B, 3] int32 = (kind code, line, col) with kind code 0 for a valid program.
    """

    ops: object
    args: object
    imm: object
    lengths: object
    n_params: object
    error: object
    messages: list[str | None] | None = None  # per program, when the compiler produced one

    @property
    def device(self):
        return self.ops.device

    def __len__(self) -> int:
        return int(self.ops.shape[0])

    @classmethod
    def from_results(cls, results: list[Program | CompileError], device=None) -> ProgramBatch:
        """Pack host-side results (programs or errors) into tensors."""
        import torch

        n = max([len(r) for r in results if isinstance(r, Program)] + [1])
        b = len(results)
        ops = torch.full((b, n), -1, dtype=torch.int32)
        args = torch.full((b, n, 3), -1, dtype=torch.int32)
        imm = torch.zeros((b, n), dtype=torch.float64)
        lengths = torch.zeros(b, dtype=torch.int32)
        n_params = torch.zeros(b, dtype=torch.int32)
        error = torch.zeros((b, 3), dtype=torch.int32)
        messages: list[str | None] = []
        for i, r in enumerate(results):
            if isinstance(r, CompileError):
                error[i] = torch.tensor([KIND_CODES[r.kind], r.line, r.col])
                messages.append(r.message)
                continue
            messages.append(None)
            k = len(r)
            ops[i, :k] = torch.tensor([OP_INDEX[o] for o in r.ops], dtype=torch.int32)
            args[i, :k] = torch.tensor(r.args, dtype=torch.int32)
            imm[i, :k] = torch.tensor(r.imms, dtype=torch.float64)
            lengths[i], n_params[i] = k, r.n_params
        batch = cls(ops, args, imm, lengths, n_params, error, messages)
        return batch.to(device) if device is not None else batch

    def trimmed(self) -> ProgramBatch:
        """The same batch without the padding columns past its longest program (views, no copy; reads
        the lengths to the host)."""
        n = max(1, int(self.lengths.max())) if len(self) else 1
        return replace(self, ops=self.ops[:, :n], args=self.args[:, :n], imm=self.imm[:, :n])

    def to(self, device) -> ProgramBatch:
        return ProgramBatch(*(t.to(device) for t in (self.ops, self.args, self.imm, self.lengths,
                                                      self.n_params, self.error)), self.messages)

    def host_rows(self) -> tuple[list, list, list, list[int], list[int], list[list[int]]]:
        """The used part on the host, for building Programs: op names, operand tuples and immediates of
        instructions 0..lengths-1 of each row, row after row in flat lists, and per row lengths,
        n_params and (kind, line, col). Shared by to_results and the traditional compiler."""
        # numpy, not torch: these are small single-threaded host copies
        lengths = self.lengths.cpu().numpy()
        width = int(lengths.max()) if len(self) else 0
        used = np.arange(width) < lengths[:, None]  # padding never becomes Python objects
        ops = np.array(OP_NAMES, dtype=object)[self.ops[:, :width].cpu().numpy()[used]].tolist()
        imms = self.imm[:, :width].cpu().numpy()[used].tolist()
        args = self.args[:, :width].cpu().numpy()
        args = _operand_tuples(*(args[:, :, j][used].astype(np.int64) for j in range(3)))
        return ops, args, imms, lengths.tolist(), self.n_params.tolist(), self.error.cpu().tolist()

    def to_results(self, param_names: list[list[str]] | None = None) -> list[Program | CompileError]:
        """Unpack to host-side Programs and CompileErrors (one device-to-host copy)."""
        with gc_paused():
            ops, args, imms, lengths, n_params, error = self.host_rows()
            out: list[Program | CompileError] = []
            start = 0
            for i, (kind, line, col) in enumerate(error):
                end = start + lengths[i]
                if kind:
                    msg = (self.messages[i] if self.messages else None) or KIND_BY_CODE[kind]
                    out.append(CompileError(KIND_BY_CODE[kind], line, col, msg))
                else:
                    names = param_names[i] if param_names else [f"x{j}" for j in range(n_params[i])]
                    out.append(Program(ops[start:end], args[start:end], imms[start:end], n_params[i], names))
                start = end
        return out


def _operand_tuples(a, b, c) -> list[tuple[int, int, int]]:
    """Operand triples (int64 arrays) as a list of tuples, sharing one tuple per distinct (a, b, -1): the
    instructions with at most two operands (96% of generated ones) reuse a few thousand tuples instead
    of each allocating one that the collector then scans and the caller later frees (about half the
    cost of zipping). Tuples are immutable, so the sharing is invisible."""
    if len(a) == 0:
        return []
    lo, hi = int(min(a.min(), b.min())), int(max(a.max(), b.max()))
    span = hi - lo + 1
    if span > 1 << 10:  # a table of span**2 pairs would be too large: one tuple each
        return list(zip(a.tolist(), b.tolist(), c.tolist()))
    pair = (a - lo) * span + (b - lo)
    present = np.zeros(span * span, dtype=bool)
    present[pair] = True
    pairs = np.flatnonzero(present)
    table = np.empty(span * span, dtype=object)
    table[pairs] = np.fromiter(zip((pairs // span + lo).tolist(), (pairs % span + lo).tolist(), repeat(-1)),
                               dtype=object, count=len(pairs))
    out = table[pair]
    three = np.flatnonzero(c != -1)
    if len(three):
        out[three] = np.fromiter(zip(a[three].tolist(), b[three].tolist(), c[three].tolist()), dtype=object,
                                 count=len(three))
    return out.tolist()


def canonical(result: Program | CompileError) -> str:
    """IR text of a program, or `error <kind> <line>:<col>` (the BatchResult.canonical() form)."""
    if isinstance(result, CompileError):
        return f"error {result.kind} {result.line}:{result.col}"
    return result.text()
