"""The compilers: serial (the oracle), traditional (data-parallel), neural and hybrid, and "auto".

Each mode is a function `compile_batch(sources, device) -> BatchResult`; `MODES` lists those that exist.
"auto" (the default) is the fastest correct compiler for the batch at hand on the device: serial for a
few sources (below `AUTO_CROSSOVER_CPU` on a CPU, `AUTO_CROSSOVER_CUDA` on CUDA), traditional from there
on; `BatchResult.paths` says which ran.
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


def _neural(sources: Sequence[str], device=None, **options) -> BatchResult:
    from .neural import compile_batch as neural_batch

    return neural_batch(sources, device=device, **options)


def _hybrid(sources: Sequence[str], device=None, **options) -> BatchResult:
    from .hybrid import compile_batch as hybrid_batch

    return hybrid_batch(sources, device=device, **options)


#: "auto" on a CPU: the serial compiler below this many sources, the traditional one from there on. Where the
#: two cross on the idle 2-core machine (`gpuiter bench compile --crossover`, 2026-12-04: even at 32 sources,
#: 52.6 ms against 39.5 ms at 64).
AUTO_CROSSOVER_CPU = 64
#: The same on CUDA, where serial compiles on the host and uploads. Not yet measured by `--crossover`; bracketed
#: by the first GPU run (H200, 2026-12-04, scripts/gpu-check.sh): traditional took 29 ms for one source (a
#: chunk's few thousand launches: an edit was 36x torch eager's) and 94.8 ms for 4,096, serial 0.2-0.6 ms a
#: source on that host, so they cross between about 50 and 150 sources.
AUTO_CROSSOVER_CUDA = 64


def resolve_mode(mode: str, n_sources: int, device=None) -> str:
    """The compiler `mode` stands for with this many sources on this device ("auto" picks one)."""
    if mode != "auto":
        return mode
    from ..runtime.device import resolve

    crossover = AUTO_CROSSOVER_CPU if resolve(device).type == "cpu" else AUTO_CROSSOVER_CUDA
    return "serial" if n_sources < crossover else "traditional"


def _auto(sources: Sequence[str], device=None) -> BatchResult:
    used = resolve_mode("auto", len(sources), device)
    result = MODES[used](sources, device)
    result.paths = result.paths or [used] * len(result.results)
    return result


MODES: dict[str, Callable[..., BatchResult]] = {"auto": _auto, "serial": _serial, "traditional": _traditional,
                                                "neural": _neural, "hybrid": _hybrid}
DEFAULT_MODE = "auto"
#: compilers whose programs may serve as a reference (a model never checks its own translations)
REFERENCE_MODES = ("auto", "serial", "traditional")
#: Options each mode takes besides the sources and the device.
MODE_OPTIONS = {"auto": set(), "serial": set(), "traditional": set(), "neural": {"model_path"},
                "hybrid": {"model_path", "k", "tests", "strict", "temperature", "seed", "dtype"}}


def check_mode(mode) -> None:
    """ValueError unless `mode` names a mode of the registry: the one check of a mode, wherever it is given."""
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; available: {', '.join(MODES)}")


def compile_batch(sources: Sequence[str], mode: str = DEFAULT_MODE, device=None, **options) -> BatchResult:
    """Compile many sources at once with the named compiler. `options` go to the mode: neural takes
    `model_path`; hybrid takes `model_path`, `k`, `tests`, `strict`, `temperature`, `seed`, `dtype`."""
    if isinstance(sources, str):
        raise TypeError("compile_batch takes a list of sources; use compile() for one")
    check_mode(mode)
    for s in sources:
        if not isinstance(s, str):
            raise TypeError(f"sources must be str, got {type(s).__name__}")
    unknown = set(options) - MODE_OPTIONS[mode]
    if unknown:
        raise TypeError(f"mode {mode!r} takes no option {min(unknown)!r}; it takes: "
                        f"{', '.join(sorted(MODE_OPTIONS[mode])) or 'none'}")
    return MODES[mode](list(sources), device, **options)


def compile_one(source: str, mode: str = DEFAULT_MODE, device=None, **options):
    """One source: (Program or CompileError, the compiler that produced it). The serial compiler runs
    without packing a device batch (what an edit in a notebook pays for)."""
    check_mode(mode)
    used = resolve_mode(mode, 1, device)
    if used == "serial" and not options:
        from .serial import compile_sources

        if not isinstance(source, str):
            raise TypeError(f"sources must be str, got {type(source).__name__}")
        return compile_sources([source])[0], "serial"
    result = compile_batch([source], mode=mode, device=device, **options)
    return result[0], (result.paths[0] if result.paths else used)


__all__ = ["AUTO_CROSSOVER_CPU", "AUTO_CROSSOVER_CUDA", "DEFAULT_MODE", "MODES", "MODE_OPTIONS", "REFERENCE_MODES",
           "BatchResult", "check_mode", "compile_batch", "compile_one", "resolve_mode"]
