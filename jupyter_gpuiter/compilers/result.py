"""BatchResult: what compile_batch returns, the same shape for every compiler."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..ir import Program, ProgramBatch, canonical
from ..lang.errors import CompileError


@dataclass
class BatchResult:
    """Per program a Program or a CompileError, plus the device batch when the compiler made one."""

    results: list[Program | CompileError]
    mode: str
    batch: ProgramBatch | None = None
    timings: dict[str, float] = field(default_factory=dict)  # seconds per pass, where measured (summed over workers)
    paths: list[str] | None = None  # hybrid: per program "neural", "traditional" or "error"
    stats: dict = field(default_factory=dict)  # compiler-specific counts (hybrid: candidates, accepts)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, i: int) -> Program | CompileError:
        return self.results[i]

    def canonical(self) -> list[str]:
        """Per program its IR text, or `error <kind> <line>:<col>` (the compiler contract: docs/ir.md)."""
        return [canonical(r) for r in self.results]

    @property
    def programs(self) -> list[Program | None]:
        return [r if isinstance(r, Program) else None for r in self.results]

    @property
    def errors(self) -> list[CompileError | None]:
        return [r if isinstance(r, CompileError) else None for r in self.results]

    @property
    def n_ok(self) -> int:
        return sum(isinstance(r, Program) for r in self.results)
