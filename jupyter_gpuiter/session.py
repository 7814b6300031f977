"""The resident Session and the public API (docs/ir.md, docs/verification.md): compile, then verify.

A Session keeps what an iteration would otherwise pay for again: the device, compiled programs (keyed
by source hash, mode and options, whatever the dtype), input pools on the device, the reference's
outputs on each pool, and the history of every iteration with its time split into compile / verify.
An edit pays for compiling the new source, evaluating it and comparing; nothing else.

The Session is the front's door (docs/architecture.md): each compile, verify and verify_batch appends one
`Iteration` to the history and publishes it to the Session's subscribers (`Session.subscribe`) and, for the
current Session, to those of `subscribe_current` (the JupyterLab panel's comm). The modes' registry
(`modes()`), the warm-up a Jupyter kernel runs before its first cell (`warm_up`), the state `%gpuiter
status` shows (`Session.status`) and the references a cell is checked against (`Session.reference`) are
here too, so the front needs nothing below this module.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from . import compilers
from .compilers.result import BatchResult
from .ir import Program
from .lang.errors import CompileError
from .runtime.device import cuda_available, resolve
from .runtime.kernel import DTYPES, Kernel
from .verification import Verdict, verify_programs
from .verification.api import ReferenceOutputs, check_options
from .verification.pools import InputPool

__all__ = ["DEFAULT_MODE", "DTYPES", "Iteration", "Mode", "Session", "WarmUp", "compile", "compile_batch",
           "cuda_available", "current_session", "function_name", "modes", "subscribe_current", "verify",
           "verify_batch", "warm_up"]

_log = logging.getLogger(__name__)

#: the mode every compile and verify uses unless told otherwise (the registry's, compilers.DEFAULT_MODE)
DEFAULT_MODE = compilers.DEFAULT_MODE
#: the options Session.verify and verify_batch take besides `mode` (and verify's `name`)
VERIFY_OPTIONS = ("tests", "delta", "dtype", "domain", "seed", "exhaustive", "rtol", "atol", "progress", "row_lengths")


@dataclass(frozen=True)
class Mode:
    """One compiler mode of the registry (compilers.MODES): its name, the options it takes besides the
    sources and the device, whether its programs may serve as a reference, whether it is the default."""

    name: str
    options: tuple[str, ...]
    reference: bool
    default: bool


def modes() -> dict[str, Mode]:
    """The registry of compiler modes (compilers.MODES, MODE_OPTIONS, REFERENCE_MODES, DEFAULT_MODE), by
    name in the registry's order: what the API, the magic's `--mode` and the CLI's `--mode` accept."""
    return {name: Mode(name, tuple(sorted(compilers.MODE_OPTIONS.get(name, ()))),
                       name in compilers.REFERENCE_MODES, name == compilers.DEFAULT_MODE)
            for name in compilers.MODES}


def function_name(source: str) -> str:
    """The name of the first `def` in a source (what names a source that does not compile), or "cell"."""
    m = re.search(r"^\s*def\s+([A-Za-z_]\w*)", source, re.MULTILINE)
    return m.group(1) if m else "cell"


@dataclass
class Iteration:
    """One entry of the history, and the event a Session publishes for it.

    `kind` is compile, verify or verify_batch; `name` the kernel's (or the name it was given); `seconds`
    the time of each phase (a verify's "compile" counts its candidate's compile, also when the candidate
    is a Kernel this Session compiled for it, then the verification's phases). `mode` is the mode asked
    for, `dtype` the kernel's; `error` the CompileError of a source that did not compile (a verify's
    verdict then carries it too); `inner` marks a compile a verify made of its candidate (the verify's
    own event reports it). `extra`: for a compile, "path" (the compiler that ran); for a verify_batch,
    "passed", "candidates" and "tests".
    """

    kind: str  # compile | verify | verify_batch
    name: str
    seconds: dict[str, float]
    cache_hit: bool = False
    verdict: Verdict | None = None
    extra: dict = field(default_factory=dict)
    mode: str | None = None
    dtype: str | None = None
    error: CompileError | None = None
    inner: bool = False


def _check_verify_options(options: dict) -> str:
    """ValueError (TypeError for a name verify does not take) before anything compiles; the dtype."""
    unknown = sorted(set(options) - set(VERIFY_OPTIONS))
    if unknown:
        raise TypeError(f"verify takes no option {unknown[0]!r}; it takes: mode, {', '.join(VERIFY_OPTIONS)}")
    check_options(**{k: v for k, v in options.items() if k not in ("domain", "progress")})
    return options.get("dtype", "float32")


#: iterations a Session's history keeps (the latest)
HISTORY_SIZE = 10_000


class Session:
    """Resident state for a notebook or a long-running loop. `jupyter_gpuiter.current_session()` is the current one."""

    def __init__(self, device=None, cache_size: int = 512, history_size: int = HISTORY_SIZE):
        self.device = resolve(device)
        self.pool = InputPool(self.device)
        self.outputs = ReferenceOutputs()
        # the latest iterations (a loop of a million edits must not keep a million Verdicts); `iterations`
        # counts them all. At least one: a verify reads its compile's entry back.
        if isinstance(history_size, bool) or not isinstance(history_size, int) or history_size < 1:
            raise ValueError(f"history_size must be a whole number of iterations, at least 1, got {history_size!r}")
        self.history: deque[Iteration] = deque(maxlen=history_size)
        self.iterations = 0
        self._programs: OrderedDict[tuple, tuple[Program, str]] = OrderedDict()
        self._references: dict[tuple, Kernel] = {}
        self._cache_size = cache_size
        self._subscribers: list[Callable[[Iteration], object]] = []
        # the compile time of Kernels this Session compiled and has not verified yet: a verify of one counts it
        self._compile_seconds: weakref.WeakKeyDictionary[Kernel, float] = weakref.WeakKeyDictionary()

    @property
    def cached_kernels(self) -> int:
        return len(self._programs)

    # -- events ---------------------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[Iteration], object]) -> Callable[[], None]:
        """Call `callback(iteration)` after each compile, verify and verify_batch of this Session (the
        entry just appended to the history). Returns the function that unsubscribes it. A callback that
        raises is logged; the call that published the event goes on."""
        self._subscribers.append(callback)

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)

        return unsubscribe

    def _publish(self, iteration: Iteration) -> Iteration:
        self.history.append(iteration)
        self.iterations += 1
        callbacks = list(self._subscribers)
        if self is _current:
            callbacks += _current_subscribers
        for callback in callbacks:
            try:
                callback(iteration)
            except Exception:  # noqa: BLE001 - a subscriber's bug must not break the user's compile or verify
                _log.warning("jupyter_gpuiter: an iteration subscriber (%r) raised; ignored", callback, exc_info=True)
        return iteration

    # -- state ----------------------------------------------------------------------------------------

    def set_device(self, device) -> None:
        """Move the Session to another device (pools, reference outputs and compiled programs start afresh)."""
        self.device = resolve(device)
        self.pool = InputPool(self.device)
        self.outputs = ReferenceOutputs()
        self._programs.clear()
        self._references.clear()

    def status(self) -> dict:
        """What `%gpuiter status` and the panel show: the device, cached kernels, iterations, the input
        pools' bytes, the compiler's resident worker processes, and the last verdict (name, passed,
        sentence) or None."""
        from .runtime import workers

        last = next((h for h in reversed(self.history) if h.verdict is not None), None)
        return {"device": str(self.device), "cached_kernels": self.cached_kernels, "iterations": self.iterations,
                "pool_bytes": int(self.pool.nbytes), "compile_workers": workers.running(),
                "last": None if last is None else {"name": last.name, "passed": last.verdict.passed,
                                                   "sentence": last.verdict.sentence}}

    def neural_model(self):
        """The neural compiler's model on this Session's device, loaded once and kept resident."""
        from .compilers.neural import load_model

        return load_model(device=self.device)

    # -- compile --------------------------------------------------------------------------------------

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
            raise result.with_source(source)
        self._remember(key, result, path)
        return result, path, False

    def _remember(self, key: tuple, program: Program, path: str) -> None:
        self._programs[key] = (program, path)
        if len(self._programs) > self._cache_size:
            self._programs.popitem(last=False)

    def compile(self, source: str, mode: str = DEFAULT_MODE, dtype: str = "float32", device=None, *,
                name: str | None = None, **options) -> Kernel:
        """Compile (or fetch from the cache) one kernel; raises CompileError (ValueError for an unknown
        mode or dtype). `options` go to the mode (e.g. hybrid's `k`, `tests`, `strict`). The cache holds
        programs, so another dtype of the same source compiles nothing. `name` names the iteration
        (default: the function's)."""
        return self._compile(source, mode, dtype, device, options, name=name)

    def _compile(self, source, mode, dtype, device, options, *, name=None, inner=False) -> Kernel:
        compilers.check_mode(mode)
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        dev = self.device if device is None else resolve(device)
        t0 = time.perf_counter()
        try:
            program, path, hit = self._compiled(source, mode, dev, options)
        except CompileError as e:
            self._publish(Iteration("compile", name or function_name(source), {"compile": time.perf_counter() - t0},
                                    mode=mode, dtype=dtype, error=e, inner=inner))
            raise
        kernel = Kernel(program, source, mode, dtype)
        seconds = time.perf_counter() - t0
        self._compile_seconds[kernel] = seconds
        self._publish(Iteration("compile", name or kernel.name, {"compile": seconds}, hit, extra={"path": path},
                                mode=mode, dtype=dtype, inner=inner))
        return kernel

    # -- references -----------------------------------------------------------------------------------

    def reference(self, source: str, kind: str = "float64", *, mode: str = DEFAULT_MODE):
        """The reference a cell's kernel is checked against by default: "float64", the source compiled in
        float64 by a checked compiler (`mode` if its programs may serve as a reference, else the default
        mode; a model never checks its own translations); "python", the source's function run by CPython
        element by element as a NumPy function (nan where Python raises)."""
        if kind == "python":
            from .lang.python_semantics import numpy_reference

            return numpy_reference(source)
        if kind == "float64":
            compilers.check_mode(mode)
            trusted = mode if mode in compilers.REFERENCE_MODES else DEFAULT_MODE
            return self.compile(source, mode=trusted, dtype="float64")
        raise ValueError(f"a reference kind is 'float64' or 'python', got {kind!r}")

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

    # -- verify ---------------------------------------------------------------------------------------

    def verify(self, candidate, reference, *, mode: str = DEFAULT_MODE, name: str | None = None,
               **options) -> Verdict:
        """Compile what is source, then verify on this Session's device-resident inputs. The options are
        checked first (ValueError, whatever the candidate); a source that does not compile gives a Verdict
        carrying its CompileError. `name` names the iteration (default: the kernel's)."""
        compilers.check_mode(mode)
        dtype = _check_verify_options(options)
        t0 = time.perf_counter()
        path = getattr(candidate, "mode", None)
        compile_seconds = 0.0
        if isinstance(candidate, str):
            try:
                candidate = self._compile(candidate, mode, dtype, None, {}, name=name, inner=True)
            except CompileError as e:
                verdict = Verdict(False, 0, 0, 1.0, options.get("delta", 1e-3), error=e, dtype=dtype, compiler=path)
                self._publish(Iteration("verify", name or function_name(candidate),
                                        {"compile": time.perf_counter() - t0}, verdict=verdict, mode=mode,
                                        dtype=dtype, error=e))
                return verdict
            path = self.history[-1].extra.get("path")
            self._compile_seconds.pop(candidate, None)  # counted in t1 - t0 below
        elif isinstance(candidate, Kernel):
            compile_seconds = self._compile_seconds.pop(candidate, 0.0)
        ref = self._reference(reference, mode, dtype)
        t1 = time.perf_counter()
        verdict = verify_programs([candidate], ref, self.pool, outputs=self.outputs, compiler=[path],
                                  **options)[0]
        self._publish(Iteration("verify", name or getattr(candidate, "name", "kernel"),
                                {"compile": compile_seconds + t1 - t0, **verdict.timings}, verdict=verdict,
                                mode=getattr(candidate, "mode", mode), dtype=dtype))
        return verdict

    def verify_batch(self, candidates: Sequence, reference, *, mode: str = DEFAULT_MODE, **options) -> list[Verdict]:
        """Verify many candidates (sources, Kernels or Programs) in one pass; sources compile in one batch."""
        if isinstance(candidates, str):
            raise TypeError("verify_batch takes a list of candidates; use verify() for one")
        compilers.check_mode(mode)
        dtype = _check_verify_options(options)
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
        self._publish(Iteration("verify_batch", f"{len(candidates)} candidates",
                                {"compile": t1 - t0, "verify": time.perf_counter() - t1},
                                extra={"passed": sum(v.passed for v in verdicts), "candidates": len(candidates),
                                       "tests": max((v.tests_run for v in verdicts), default=0)},
                                mode=mode, dtype=dtype))
        return verdicts


_current: Session | None = None
_current_subscribers: list[Callable[[Iteration], object]] = []


def current_session() -> Session:
    """The current Session (created on first use)."""
    global _current
    if _current is None:
        _current = Session()
    return _current


def subscribe_current(callback: Callable[[Iteration], object]) -> Callable[[], None]:
    """Call `callback(iteration)` for each iteration of the current Session, whichever it is, one created
    later included (subscribing creates none). Returns the function that unsubscribes it."""
    _current_subscribers.append(callback)

    def unsubscribe() -> None:
        if callback in _current_subscribers:
            _current_subscribers.remove(callback)

    return unsubscribe


@dataclass
class WarmUp:
    """What `warm_up` did: the device it chose, the device's name (CUDA), and what failed, one line each."""

    device: str
    device_name: str | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0


def warm_up(device=None) -> WarmUp:
    """Pay now what the first compile and verify of a process would: the CUDA context (when CUDA is usable
    and `device` is not given), the traditional compiler's tables on the device, the fused evaluator
    (from numba's disk cache, ~1 s; its first build on a machine ~1 min). Creates no Session, so a Jupyter
    kernel runs it in a background thread before its first cell; never raises (what failed is in
    `warnings`)."""
    t0 = time.perf_counter()
    report = WarmUp("cpu")
    try:
        dev = resolve(device)
        if dev.type == "cuda":
            import torch

            torch.empty(1, device=dev)  # the CUDA context, now rather than in the first cell
            report.device_name = torch.cuda.get_device_name(dev)
        report.device = str(dev)
    except Exception as e:  # noqa: BLE001 - a broken CUDA install leaves the CPU
        report.warnings.append(f"warming up CUDA failed: {type(e).__name__}: {e}")
    try:
        from .compilers import traditional

        traditional.warm_up(report.device)  # idempotent if a cell races it
    except Exception as e:  # noqa: BLE001
        report.warnings.append(f"warming up the traditional compiler failed: {type(e).__name__}: {e}")
    try:
        from .runtime import fused

        fused.warm_up()
    except Exception as e:  # noqa: BLE001
        report.warnings.append(f"warming up the fused evaluator failed: {type(e).__name__}: {e}")
    report.seconds = time.perf_counter() - t0
    return report


def compile(source: str, mode: str = DEFAULT_MODE, device=None, dtype: str = "float32", **options) -> Kernel:
    """Compile one kernel-language function to a callable Kernel, or raise CompileError. `options` go to
    the mode (see `compilers.compile_batch`)."""
    if not isinstance(source, str):
        raise TypeError(f"source must be str, got {type(source).__name__}")
    result = compile_batch([source], mode=mode, device=device, **options)[0]
    if isinstance(result, CompileError):
        raise result.with_source(source)
    return Kernel(result, source, mode, dtype)


def compile_batch(sources: Sequence[str], mode: str = DEFAULT_MODE, device=None, **options) -> BatchResult:
    """Compile many sources in one call; per program a Program or a CompileError. `options` go to the mode
    (hybrid: `k`, `tests`, `strict`, …; neural and hybrid: `model_path`). "auto" picks serial or
    traditional for the batch at hand; `BatchResult.paths` says which ran."""
    return compilers.compile_batch(sources, mode=mode, device=device, **options)


def verify(candidate, reference, *, tests: int | None = None, delta: float = 1e-3, dtype: str = "float32",
           domain=None, seed: int = 0, exhaustive: bool = False, rtol: float | None = None,
           atol: float | None = None, mode: str = DEFAULT_MODE, row_lengths=None) -> Verdict:
    """Verify a candidate (source or Kernel) against a reference (source, Kernel or a callable on NumPy
    arrays) on the current Session's device (docs/verification.md). `mode` compiles a source candidate. Row
    kernels are checked on pools of rows of `row_lengths` elements (default pools.DEFAULT_ROW_LENGTHS);
    `tests` then counts rows."""
    return current_session().verify(candidate, reference, tests=tests, delta=delta, dtype=dtype, domain=domain, seed=seed,
                            exhaustive=exhaustive, rtol=rtol, atol=atol, mode=mode, row_lengths=row_lengths)


def verify_batch(candidates: Sequence, reference, **options) -> list[Verdict]:
    """Verify many candidates in one pass (same options as verify, and `mode`)."""
    return current_session().verify_batch(candidates, reference, **options)
