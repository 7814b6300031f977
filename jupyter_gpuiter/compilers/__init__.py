"""The compilers: serial (the oracle), traditional (data-parallel), neural and hybrid.

Each mode is a function `compile_batch(sources, device) -> BatchResult`; `MODES` lists those that exist.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .result import BatchResult


def _serial(sources: Sequence[str], device=None) -> BatchResult:
    from ..ir import ProgramBatch
    from ..runtime.device import resolve
    from .serial import compile_sources

    results = compile_sources(sources)
    return BatchResult(results, "serial", batch=ProgramBatch.from_results(results, device=resolve(device)))


def _traditional(sources: Sequence[str], device=None) -> BatchResult:
    from ..runtime.device import resolve
    from .traditional import compile_batch as traditional_batch

    return traditional_batch(sources, device=resolve(device))


MODES: dict[str, Callable[..., BatchResult]] = {"serial": _serial, "traditional": _traditional}


def compile_batch(sources: Sequence[str], mode: str = "serial", device=None) -> BatchResult:
    """Compile many sources at once with the named compiler."""
    if isinstance(sources, str):
        raise TypeError("compile_batch takes a list of sources; use compile() for one")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; available: {', '.join(MODES)}")
    for s in sources:
        if not isinstance(s, str):
            raise TypeError(f"sources must be str, got {type(s).__name__}")
    return MODES[mode](list(sources), device)


__all__ = ["MODES", "BatchResult", "compile_batch"]
