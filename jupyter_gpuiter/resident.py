"""The resident Session and the public API (design §6-§7 contracts): compile, then verify.

A Session keeps what an iteration would otherwise pay for again: the device, compiled kernels (keyed
by source hash and options), input pools on the device, and the history of every iteration with its
time split into compile / verify.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from . import compilers
from .compilers.result import BatchResult
from .lang.errors import CompileError
from .runtime.device import resolve
from .runtime.kernel import Kernel
from .verify import Verdict, verify_program, verify_programs
from .verify.pools import InputPool

__all__ = ["Session", "compile", "compile_batch", "session", "verify", "verify_batch"]


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
    """Resident state for a notebook or a long-running loop. `jupyter_gpuiter.session()` is the current one."""

    def __init__(self, device=None, cache_size: int = 512):
        self.device = resolve(device)
        self.pool = InputPool(self.device)
        self.history: list[Iteration] = []
        self._kernels: OrderedDict[tuple, Kernel] = OrderedDict()
        self._cache_size = cache_size

    @property
    def cached_kernels(self) -> int:
        return len(self._kernels)

    def set_device(self, device) -> None:
        """Move the Session to another device (pools and compiled kernels start afresh there)."""
        self.device = resolve(device)
        self.pool = InputPool(self.device)
        self._kernels.clear()

    def neural_model(self):
        """The neural compiler's model on this Session's device, loaded once and kept resident."""
        from .compilers.neural import load_model

        return load_model(device=self.device)

    def compile(self, source: str, mode: str = "traditional", dtype: str = "float32", device=None,
                **options) -> Kernel:
        """Compile (or fetch from the cache) one kernel; raises CompileError. `options` go to the mode
        (e.g. hybrid's `k`, `tests`, `strict`)."""
        if not isinstance(source, str):
            raise TypeError(f"source must be str, got {type(source).__name__}")
        dev = self.device if device is None else resolve(device)
        key = (hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest(), mode, dtype, str(dev),
               tuple(sorted(options.items())))
        t0 = time.perf_counter()
        kernel = self._kernels.get(key)
        extra = {"mode": mode, "dtype": dtype}
        if kernel is not None:
            self._kernels.move_to_end(key)
            self.history.append(Iteration("compile", kernel.name, {"compile": time.perf_counter() - t0}, True,
                                          extra=extra))
            return kernel
        batch = compilers.compile_batch([source], mode=mode, device=dev, **options)
        result = batch[0]
        if isinstance(result, CompileError):
            result.source = source
            raise result
        if batch.paths is not None:
            extra["path"] = batch.paths[0]
        kernel = Kernel(result, source, mode, dtype)
        self._kernels[key] = kernel
        if len(self._kernels) > self._cache_size:
            self._kernels.popitem(last=False)
        self.history.append(Iteration("compile", kernel.name, {"compile": time.perf_counter() - t0}, extra=extra))
        return kernel

    def _as_compiled(self, x, mode: str, dtype: str):
        return self.compile(x, mode=mode, dtype=dtype) if isinstance(x, str) else x

    def verify(self, candidate, reference, *, mode: str = "traditional", **options) -> Verdict:
        """Compile what is source, then verify on this Session's device-resident inputs."""
        dtype = options.get("dtype", "float32")
        t0 = time.perf_counter()
        try:
            cand = self._as_compiled(candidate, mode, dtype)
        except CompileError as e:
            return Verdict(False, 0, 0, 1.0, options.get("delta", 1e-3), error=e, dtype=dtype)
        ref = self._as_compiled(reference, mode, dtype)
        t1 = time.perf_counter()
        verdict = verify_program(cand, ref, self.pool, **options)
        self.history.append(Iteration("verify", getattr(cand, "name", "kernel"),
                                      {"compile": t1 - t0, **verdict.timings}, verdict=verdict))
        return verdict

    def verify_batch(self, candidates: Sequence, reference, *, mode: str = "traditional", **options) -> list[Verdict]:
        if isinstance(candidates, str):
            raise TypeError("verify_batch takes a list of candidates; use verify() for one")
        dtype = options.get("dtype", "float32")
        t0 = time.perf_counter()
        sources = [c for c in candidates if isinstance(c, str)]
        compiled = compilers.compile_batch(sources, mode=mode, device=self.device)
        compiled_results = iter(compiled.results)
        results = [next(compiled_results) if isinstance(c, str) else c for c in candidates]
        # all sources: the compiler's device batch goes straight to the VM, nothing re-uploaded
        batch = compiled.batch if len(sources) == len(candidates) else None
        ref = self._as_compiled(reference, mode, dtype)
        t1 = time.perf_counter()
        verdicts = verify_programs(results, ref, self.pool, batch=batch, **options)
        self.history.append(Iteration("verify_batch", f"{len(candidates)} candidates",
                                      {"compile": t1 - t0, "verify": time.perf_counter() - t1},
                                      extra={"passed": sum(v.passed for v in verdicts), "candidates": len(candidates),
                                             "tests": max((v.tests_run for v in verdicts), default=0)}))
        return verdicts


_current: Session | None = None


def session() -> Session:
    """The current Session (created on first use)."""
    global _current
    if _current is None:
        _current = Session()
    return _current


def compile(source: str, mode: str = "traditional", device=None, dtype: str = "float32", **options) -> Kernel:
    """Compile one kernel-language function to a callable Kernel, or raise CompileError. `options` go to
    the mode (see `compilers.compile_batch`)."""
    if not isinstance(source, str):
        raise TypeError(f"source must be str, got {type(source).__name__}")
    result = compile_batch([source], mode=mode, device=device, **options)[0]
    if isinstance(result, CompileError):
        result.source = source
        raise result
    return Kernel(result, source, mode, dtype)


def compile_batch(sources: Sequence[str], mode: str = "traditional", device=None, **options) -> BatchResult:
    """Compile many sources in one call; per program a Program or a CompileError. `options` go to the mode
    (hybrid: `k`, `tests`, `strict`, …; neural and hybrid: `model_path`)."""
    return compilers.compile_batch(sources, mode=mode, device=device, **options)


def verify(candidate, reference, *, tests: int | None = None, delta: float = 1e-3, dtype: str = "float32",
           domain=None, seed: int = 0, exhaustive: bool = False, rtol: float | None = None,
           atol: float | None = None) -> Verdict:
    """Verify a candidate (source or Kernel) against a reference (source, Kernel or a callable on NumPy
    arrays) on the current Session's device (design §7 contract)."""
    return session().verify(candidate, reference, tests=tests, delta=delta, dtype=dtype, domain=domain, seed=seed,
                            exhaustive=exhaustive, rtol=rtol, atol=atol)


def verify_batch(candidates: Sequence, reference, **options) -> list[Verdict]:
    """Verify many candidates in one device pass (same options as verify)."""
    return session().verify_batch(candidates, reference, **options)
