"""The public compile API (design §6 contracts). The resident Session joins it with the verifier."""

from __future__ import annotations

from collections.abc import Sequence

from . import compilers
from .compilers.result import BatchResult
from .lang.errors import CompileError
from .runtime.kernel import Kernel


def compile(source: str, mode: str = "traditional", device=None, dtype: str = "float32") -> Kernel:
    """Compile one kernel-language function to a callable Kernel, or raise CompileError.

    Modes that are not built yet fall back to `serial` only when asked for explicitly elsewhere; here
    an unknown or unavailable mode is a ValueError naming the available ones.
    """
    if not isinstance(source, str):
        raise TypeError(f"source must be str, got {type(source).__name__}")
    result = compile_batch([source], mode=mode, device=device)[0]
    if isinstance(result, CompileError):
        result.source = source
        raise result
    return Kernel(result, source, mode, dtype)


def compile_batch(sources: Sequence[str], mode: str = "traditional", device=None) -> BatchResult:
    """Compile many sources in one call; per program a Program or a CompileError."""
    return compilers.compile_batch(sources, mode=mode, device=device)
