"""The resident Session and the public API (docs/ir.md, docs/verification.md): compile, then verify.

A Session keeps what an iteration would otherwise pay for again: the device, compiled programs (keyed
by source hash, mode and options, whatever the dtype), input pools on the device, the reference's
outputs on each pool, and the history of every iteration with its time split into compile / verify.
An edit pays for compiling the new source, evaluating it and comparing; nothing else.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from . import compilers
from .compilers.result import BatchResult
from .ir import Program
from .lang.errors import CompileError
from .runtime.device import resolve
from .runtime.kernel import Kernel
from .verification import Verdict, verify_programs
from .verification.api import ReferenceOutputs
from .verification.pools import InputPool

__all__ = ["Session", "compile", "compile_batch", "current_session", "verify", "verify_batch"]


@dataclass
class Iteration:
    """One entry of the history."""

    kind: str  # compile | verify | verify_batch
    name: str
    seconds: dict[str, float]
    cache_hit: bool = False
    verdict: Verdict | None = None
    extra: dict = field(default_factory=dict)


class Session:
    """Resident state for a notebook or a long-running loop. `jupyter_gpuiter.current_session()` is the current one."""

    def __init__(self, device=None, cache_size: int = 512):
        self.device = resolve(device)
        self.pool = InputPool(self.device)
        self.outputs = ReferenceOutputs()
        self.history: list[Iteration] = []
        self._programs: OrderedDict[tuple, tuple[Program, str]] = OrderedDict()
        self._references: dict[tuple, Kernel] = {}
        self._cache_size = cache_size

    @property
    def cached_kernels(self) -> int:
        return len(self._programs)

    def set_device(self, device) -> None:
        """Move the Session to another device (pools, reference outputs and compiled programs start afresh)."""
        self.device = resolve(device)
        self.pool = InputPool(self.device)
        self.outputs = ReferenceOutputs()
        self._programs.clear()
        self._references.clear()

    def neural_model(self):
        """The neural compiler's model on this Session's device, loaded once and kept resident."""
        from .compilers.neural import load_model

        return load_model(device=self.device)

    def _compiled(self, source: str, mode: str, dev, options: dict) -> tuple[Program, str, bool]:
        """(program, compiler that made it, cache hit) for one source; raises CompileError."""
        if not isinstance(source, str):
            raise TypeError(f"source must be str, got {type(source).__name__}")
        key = (hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest(), mode, str(dev),
               tuple(sorted(options.items())))
        hit = self._programs.get(key)
        if hit is not None:
            self._programs.move_to_end(key)
            return hit[0], hit[1], True
        result, path = compilers.compile_one(source, mode=mode, device=dev, **options)
        if isinstance(result, CompileError):
            result.source = source
            raise result
        self._remember(key, result, path)
        return result, path, False

    def _remember(self, key: tuple, program: Program, path: str) -> None:
        self._programs[key] = (program, path)
        if len(self._programs) > self._cache_size:
            self._programs.popitem(last=False)

    def compile(self, source: str, mode: str = "auto", dtype: str = "float32", device=None,
                **options) -> Kernel:
        """Compile (or fetch from the cache) one kernel; raises CompileError. `options` go to the mode
        (e.g. hybrid's `k`, `tests`, `strict`). The cache holds programs, so another dtype of the same
        source compiles nothing."""
        dev = self.device if device is None else resolve(device)
        t0 = time.perf_counter()
        program, path, hit = self._compiled(source, mode, dev, options)
        kernel = Kernel(program, source, mode, dtype)
        self.history.append(Iteration("compile", kernel.name, {"compile": time.perf_counter() - t0}, hit,
                                      extra={"mode": mode, "dtype": dtype, "path": path}))
        return kernel

    def _reference(self, reference, mode: str, dtype: str):
        """A source reference compiles with a checked compiler, never with the candidate's model."""
        if not isinstance(reference, str):
            return reference
        trusted = mode if mode in compilers.REFERENCE_MODES else compilers.DEFAULT_MODE
        program, _, _ = self._compiled(reference, trusted, self.device, {})
        key = (id(program), dtype)  # the cached program's identity: one reference Kernel (packed once) each
        kernel = self._references.get(key)
        if kernel is None or kernel.program is not program:
            kernel = self._references[key] = Kernel(program, reference, trusted, dtype)
            if len(self._references) > 64:
                self._references.pop(next(iter(self._references)))
        return kernel

    def verify(self, candidate, reference, *, mode: str = "auto", **options) -> Verdict:
        """Compile what is source, then verify on this Session's device-resident inputs."""
        dtype = options.get("dtype", "float32")
        t0 = time.perf_counter()
        path = getattr(candidate, "mode", None)
        try:
            if isinstance(candidate, str):
                candidate = self.compile(candidate, mode=mode, dtype=dtype)
                path = self.history[-1].extra.get("path")
        except CompileError as e:
            return Verdict(False, 0, 0, 1.0, options.get("delta", 1e-3), error=e, dtype=dtype, compiler=path)
        ref = self._reference(reference, mode, dtype)
        t1 = time.perf_counter()
        verdict = verify_programs([candidate], ref, self.pool, outputs=self.outputs, compiler=[path],
                                  **options)[0]
        self.history.append(Iteration("verify", getattr(candidate, "name", "kernel"),
                                      {"compile": t1 - t0, **verdict.timings}, verdict=verdict))
        return verdict

    def verify_batch(self, candidates: Sequence, reference, *, mode: str = "auto", **options) -> list[Verdict]:
        """Verify many candidates (sources, Kernels or Programs) in one pass; sources compile in one batch."""
        if isinstance(candidates, str):
            raise TypeError("verify_batch takes a list of candidates; use verify() for one")
        dtype = options.get("dtype", "float32")
        t0 = time.perf_counter()
        sources = [c for c in candidates if isinstance(c, str)]
        compiled = compilers.compile_batch(sources, mode=mode, device=self.device)
        paths = iter(compiled.paths or [mode] * len(sources))
        compiled_results = iter(compiled.results)
        results, names = [], []
        for c in candidates:
            results.append(next(compiled_results) if isinstance(c, str) else c)
            names.append(next(paths) if isinstance(c, str) else getattr(c, "mode", None))
        # all sources: the compiler's batch goes straight to the evaluator, nothing packed again
        batch = compiled.batch if len(sources) == len(candidates) else None
        ref = self._reference(reference, mode, dtype)
        t1 = time.perf_counter()
        verdicts = verify_programs(results, ref, self.pool, batch=batch, outputs=self.outputs, compiler=names,
                                   **options)
        self.history.append(Iteration("verify_batch", f"{len(candidates)} candidates",
                                      {"compile": t1 - t0, "verify": time.perf_counter() - t1},
                                      extra={"passed": sum(v.passed for v in verdicts), "candidates": len(candidates),
                                             "tests": max((v.tests_run for v in verdicts), default=0)}))
        return verdicts


_current: Session | None = None


def current_session() -> Session:
    """The current Session (created on first use)."""
    global _current
    if _current is None:
        _current = Session()
    return _current


def compile(source: str, mode: str = "auto", device=None, dtype: str = "float32", **options) -> Kernel:
    """Compile one kernel-language function to a callable Kernel, or raise CompileError. `options` go to
    the mode (see `compilers.compile_batch`)."""
    if not isinstance(source, str):
        raise TypeError(f"source must be str, got {type(source).__name__}")
    result = compile_batch([source], mode=mode, device=device, **options)[0]
    if isinstance(result, CompileError):
        result.source = source
        raise result
    return Kernel(result, source, mode, dtype)


def compile_batch(sources: Sequence[str], mode: str = "auto", device=None, **options) -> BatchResult:
    """Compile many sources in one call; per program a Program or a CompileError. `options` go to the mode
    (hybrid: `k`, `tests`, `strict`, …; neural and hybrid: `model_path`). "auto" picks serial or
    traditional for the batch at hand; `BatchResult.paths` says which ran."""
    return compilers.compile_batch(sources, mode=mode, device=device, **options)


def verify(candidate, reference, *, tests: int | None = None, delta: float = 1e-3, dtype: str = "float32",
           domain=None, seed: int = 0, exhaustive: bool = False, rtol: float | None = None,
           atol: float | None = None, mode: str = "auto") -> Verdict:
    """Verify a candidate (source or Kernel) against a reference (source, Kernel or a callable on NumPy
    arrays) on the current Session's device (docs/verification.md). `mode` compiles a source candidate."""
    return current_session().verify(candidate, reference, tests=tests, delta=delta, dtype=dtype, domain=domain, seed=seed,
                            exhaustive=exhaustive, rtol=rtol, atol=atol, mode=mode)


def verify_batch(candidates: Sequence, reference, **options) -> list[Verdict]:
    """Verify many candidates in one pass (same options as verify, and `mode`)."""
    return current_session().verify_batch(candidates, reference, **options)
