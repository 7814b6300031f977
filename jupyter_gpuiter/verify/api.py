"""Checking compiled candidates against a reference on device-resident inputs.

`verify_programs` works on Programs and Kernels (never on source text: the Session compiles, then calls
it). Inputs come from an InputPool (generated on the device, seeded, reused across calls); the
reference's outputs on a pool are computed once, rounded to the kernel dtype and kept in a
`ReferenceOutputs` cache; candidates run through the fused tile evaluator (runtime/fused.py), which
compares as it goes and stops a candidate at its first failing tile, so only per-candidate scalars
exist. On a CUDA device the batched torch-op VM and compare.py run instead (a fused GPU kernel is not
built yet). A counterexample is the first failing input, shrunk on demand (when it is first read)
toward simple values inside the domain where the reference is defined.
"""

from __future__ import annotations

import hashlib
import inspect
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import torch

from ..ir import Program, ProgramBatch
from ..lang.errors import CompileError
from ..runtime import fused, vm
from ..runtime.kernel import DTYPES, Kernel
from .compare import compare, default_tolerances, trivial_reference
from .confidence import as_count, epsilon_bound, per_candidate_delta, tests_needed
from .pools import Domain, as_domain, domain_edges, exhaustive_inputs, parse_domains
from .shrink import shrink
from .verdict import Counterexample, Verdict

DEFAULT_EPSILON = 1e-3  # tests=None runs enough tests to bound the failure rate by this at 1 - delta
CHUNK = 1 << 16  # inputs per pass of one candidate (progress is reported per chunk)
REFERENCE_CHUNK = 1 << 20  # inputs per reference call: bounds the reference's temporaries
TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
                "float64": torch.float64}


def _program(candidate) -> Program:
    if isinstance(candidate, Kernel):
        return candidate.program
    if isinstance(candidate, Program):
        return candidate
    raise TypeError(f"a candidate is a Kernel or a Program here, not {type(candidate).__name__}")


def _domains(domain, names: list[str]) -> list[Domain | None]:
    """Per parameter a Domain or None, from {name: (low, high) | "low:high[:log]" | Domain} or a list of
    "name=low:high[:log]" strings."""
    if domain is None:
        return [None] * len(names)
    if isinstance(domain, (list, tuple, str)):
        domain = parse_domains(domain)
    unknown = [n for n in domain if n not in names]
    if unknown:
        raise ValueError(f"domain names parameter {unknown[0]!r}, but the kernel's parameters are {', '.join(names)}")
    return [as_domain(domain.get(n)) for n in names]


def _arity(fn) -> tuple[int, float]:
    """(required, maximum) positional arguments of a callable; NumPy ufuncs by their `nin`."""
    if hasattr(fn, "nin"):
        return fn.nin, fn.nin
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 0, float("inf")
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return sum(p.default is p.empty for p in positional), float("inf")
    return sum(p.default is p.empty for p in positional), len(positional)


# --- the reference -----------------------------------------------------------------------------------

class Reference:
    """A reference as a function inputs [P, n] (kernel dtype, torch) -> outputs [n] as float64 NumPy, with
    a key that identifies it in the outputs cache. A Kernel or Program runs in its own dtype (a float64
    Kernel gives a float64 reference); a Python callable receives NumPy arrays holding exactly the
    candidate's inputs (float64 for float64 kernels, float32 for bfloat16, the kernel dtype otherwise)."""

    def __init__(self, reference, n_params: int, dtype: str):
        self.dtype = dtype
        self.n_params = n_params
        if isinstance(reference, (Kernel, Program)):
            prog = _program(reference)
            if prog.n_params != n_params:
                raise ValueError(f"the reference takes {prog.n_params} parameters but the candidate takes {n_params}")
            self.program = prog
            self.program_dtype = reference.dtype if isinstance(reference, Kernel) else dtype
            self.arrays = fused.ProgramArrays.from_programs([prog])
            self.fn = None
            text = prog.text().encode()
            self.key = ("program", hashlib.sha256(text).hexdigest(), self.program_dtype)
            return
        if not callable(reference):
            raise TypeError(f"a reference is source, a Kernel or a callable, not {type(reference).__name__}")
        lo, hi = _arity(reference)
        if not lo <= n_params <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise ValueError(f"the reference takes {want} arguments but the candidate takes {n_params}")
        self.program = None
        self.fn = reference
        # a function is assumed pure: the same object gives the same outputs (redefine it to change it)
        self.key = ("callable", id(reference))

    def __call__(self, x: torch.Tensor) -> np.ndarray:
        """Outputs [n] as float64 (bools as 0/1), unrounded."""
        if self.program is not None:
            xs = x.detach().cpu().to(torch.float64).numpy() if self.program_dtype == "float64" else \
                _host_inputs(x, self.program_dtype)
            out = fused.evaluate(self.arrays, xs, self.program_dtype)[0]
            return out.astype(np.float64)
        arrays = list(_host_inputs(x, self.dtype))
        with np.errstate(all="ignore"):
            out = self.fn(*arrays)
        n = x.shape[1]
        if out is None:
            raise ValueError("the reference returned None; it must return one number per input (an array of "
                             f"{n} values or a scalar)")
        out = np.asarray(out)
        if out.dtype.kind == "c":
            raise ValueError(f"the reference returned complex values ({out.dtype}); it must return real numbers")
        if out.dtype.kind not in "biuf":
            raise ValueError(f"the reference returned {out.dtype} values; it must return numbers or bools")
        if out.shape == ():
            out = np.full(n, out)
        if out.shape != (n,):
            raise ValueError(f"the reference returned shape {out.shape}; expected ({n},), one value per input")
        return out.astype(np.float64)


def _host_inputs(x: torch.Tensor, dtype: str) -> np.ndarray:
    """Inputs [P, n] as NumPy holding exactly the kernel dtype's values (bfloat16 as float32)."""
    x = x.detach().cpu()
    if dtype == "bfloat16":
        return x.to(torch.float32).numpy()
    return x.to(TORCH_DTYPES[dtype]).numpy()


def _round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to the kernel dtype (overflow to ±inf, underflow to 0), in register dtype."""
    if dtype == "bfloat16":
        return torch.from_numpy(values).to(torch.bfloat16).to(torch.float32).numpy()
    with np.errstate(over="ignore"):
        return values.astype(dtype).astype(fused.REGISTER_DTYPE[dtype])


class ReferenceOutputs:
    """The reference's outputs per (reference, inputs), rounded to the kernel dtype, with the reason the
    reference is trivial (or None): computed once, reused by every candidate checked on those inputs.
    LRU within `max_bytes`; entries hold their reference and inputs, so a key never outlives them."""

    def __init__(self, max_bytes: int = 256 << 20):
        self.max_bytes = max_bytes
        self._cache: OrderedDict[tuple, tuple] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, ref: Reference, x: torch.Tensor, dtype: str) -> tuple[np.ndarray, str | None]:
        key = (ref.key, id(x), dtype)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[2] is x:
                self._cache.move_to_end(key)
                self.hits += 1
                return hit[0], hit[1]
        parts = [ref(x[:, lo:lo + REFERENCE_CHUNK]) for lo in range(0, x.shape[1], REFERENCE_CHUNK)]
        raw = np.concatenate(parts) if len(parts) != 1 else parts[0]
        want = _round_to(raw, dtype)
        trivial = trivial_reference(torch.from_numpy(want), dtype=dtype)
        with self._lock:
            self.misses += 1
            if want.nbytes <= self.max_bytes:
                self._cache[key] = (want, trivial, x, ref.fn or ref.key)
                while sum(v[0].nbytes for v in self._cache.values()) > self.max_bytes:
                    self._cache.popitem(last=False)
        return want, trivial

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def __len__(self) -> int:
        return len(self._cache)


# --- checks on the options --------------------------------------------------------------------------

def _check_options(dtype: str, delta: float, tests, exhaustive: bool, domain) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise ValueError(f"delta must be a number in (0, 1), got {delta!r}")
    if tests is not None:
        as_count("tests", tests, minimum=1)
        if exhaustive:
            raise ValueError("exhaustive=True checks every input of the dtype: leave tests unset")


def _inputs(pool, n_params: int, names: list[str], dtype: str, tests, delta: float, domain, seed: int,
            exhaustive: bool) -> torch.Tensor:
    domains = _domains(domain, names)
    if exhaustive:
        x = exhaustive_inputs(n_params, dtype).to(pool.device)
        if any(d is not None for d in domains):  # every value of the dtype inside the domain
            keep = torch.ones(x.shape[1], dtype=torch.bool, device=x.device)
            for i, d in enumerate(domains):
                if d is not None:
                    lo, hi = domain_edges(d, dtype)
                    keep &= (x[i] >= lo) & (x[i] <= hi)
            x = x[:, keep]
        return x
    n = as_count("tests", tests, minimum=1) if tests is not None else tests_needed(DEFAULT_EPSILON, delta)
    return pool.get(n_params, n, dtype, domains, seed)


# --- verification -------------------------------------------------------------------------------------

def verify_programs(results: Sequence, reference, pool, *, tests: int | None = None, delta: float = 1e-3,
                    dtype: str = "float32", domain=None, seed: int = 0, exhaustive: bool = False,
                    rtol: float | None = None, atol: float | None = None, batch: ProgramBatch | None = None,
                    outputs: ReferenceOutputs | None = None, progress=None,
                    compiler: list[str] | None = None) -> list[Verdict]:
    """Verify compiled candidates (Programs, Kernels or CompileErrors) against a reference on the same
    inputs, in one pass. `batch`, when given, is the same candidates already packed (row i = results[i]).
    With k candidates each bound uses delta/k. `outputs` caches the reference's outputs across calls;
    `progress(done, total)` is called as inputs are checked (one candidate only); `compiler` names the
    compiler that produced each candidate (shown in its Verdict)."""
    t0 = time.perf_counter()
    _check_options(dtype, delta, tests, exhaustive, domain)
    k = max(1, len(results))
    results = [r if isinstance(r, CompileError) else _program(r) for r in results]
    ok = [r for r in results if isinstance(r, Program)]
    d_k = per_candidate_delta(delta, k)
    compiler = compiler or [None] * len(results)
    if not ok:
        return [Verdict(False, 0, 0, 1.0, d_k, error=r, dtype=dtype, compiler=c) for r, c in zip(results, compiler)]
    n_params = ok[0].n_params
    for r in ok:
        if r.n_params != n_params:
            raise ValueError(f"candidates take different numbers of parameters ({r.n_params} and {n_params})")
    names = ok[0].param_names or [f"x{i}" for i in range(n_params)]
    ref = Reference(reference, n_params, dtype)
    x = _inputs(pool, n_params, names, dtype, tests, d_k, domain, seed, exhaustive)
    d_rtol, d_atol = default_tolerances(dtype)
    rtol = d_rtol if rtol is None else float(rtol)
    atol = d_atol if atol is None else float(atol)
    if not (rtol >= 0 and atol >= 0):
        raise ValueError(f"rtol and atol must be non-negative numbers, got rtol={rtol!r}, atol={atol!r}")
    want, trivial = (outputs if outputs is not None else ReferenceOutputs()).get(ref, x, dtype)
    t_setup = time.perf_counter()
    if x.device.type == "cpu":
        arrays = fused.ProgramArrays.from_batch(batch) if batch is not None else \
            fused.ProgramArrays.from_programs(results)
        x_reg = fused.as_registers(_host_inputs(x, dtype), dtype)
        cmp = _compare_fused(arrays, x_reg, want, dtype, rtol, atol, progress)
    else:
        batch = batch if batch is not None else ProgramBatch.from_results(results)
        cmp = _compare_torch(batch, x, want, dtype, rtol, atol)
    t_run = time.perf_counter()
    timings = {"setup": t_setup - t0, "execute_and_compare": t_run - t_setup}
    verdicts = []
    n = x.shape[1]
    for j, r in enumerate(results):
        if isinstance(r, CompileError):
            verdicts.append(Verdict(False, 0, 0, 1.0, d_k, error=r, dtype=dtype, compiler=compiler[j]))
            continue
        f = int(cmp.failures[j])
        passed = f == 0 and trivial is None
        cx = None
        if f:
            first = int(cmp.first_failure[j])
            cx = _LazyCounterexample(r, ref, x[:, first], names, dtype, rtol, atol, float(want[first]),
                                     _domains(domain, names), exhaustive)
        eps = 0.0 if (passed and exhaustive) else epsilon_bound(n, d_k) if passed else 1.0
        verdicts.append(Verdict(passed, int(cmp.evaluated[j]), f, eps, d_k, cx, float(cmp.max_abs_err[j]),
                                float(cmp.max_rel_err[j]), float(cmp.max_ulp_err[j]),
                                exhaustive=exhaustive and passed, trivial=trivial, dtype=dtype,
                                timings=dict(timings), compiler=compiler[j]))
    return verdicts


def verify_program(candidate, reference, pool, **options) -> Verdict:
    """verify_programs for one candidate (a Kernel or a Program)."""
    return verify_programs([candidate], reference, pool, **options)[0]


def _compare_fused(arrays, x, want, dtype, rtol, atol, progress) -> fused.Comparison:
    """The fused evaluator over every candidate; one candidate goes chunk by chunk, reporting progress
    and stopping at its first failing chunk."""
    n = x.shape[1]
    if progress is None or len(arrays) != 1 or n <= CHUNK:
        cmp = fused.compare(arrays, x, want, dtype, rtol, atol)
        if progress is not None:
            progress(int(cmp.evaluated.max(initial=0)), n)
        return cmp
    parts = []
    for lo in range(0, n, CHUNK):
        c = fused.compare(arrays, x[:, lo:lo + CHUNK], want[lo:lo + CHUNK], dtype, rtol, atol)
        c.first_failure = np.where(c.first_failure >= 0, c.first_failure + lo, -1)
        parts.append(c)
        progress(min(n, lo + CHUNK), n)
        if c.failures[0]:
            break
    return fused.Comparison(*(np.array([fn(getattr(c, f)[0] for c in parts)]) for f, fn in (
        ("failures", sum), ("first_failure", lambda v: next((i for i in v if i >= 0), -1)), ("max_abs_err", max),
        ("max_rel_err", max), ("max_ulp_err", max), ("evaluated", sum))))


def _compare_torch(batch: ProgramBatch, x: torch.Tensor, want: np.ndarray, dtype: str, rtol, atol) -> fused.Comparison:
    """The batched torch-op VM and compare.py (the path for devices without a fused evaluator)."""
    got = vm.run(batch.to(x.device), x, dtype)
    cmp = compare(got, torch.from_numpy(want).to(x.device), rtol=rtol, atol=atol, dtype=dtype)
    fails = cmp.failures.cpu().numpy()
    return fused.Comparison(fails, cmp.first_failure.cpu().numpy(), cmp.max_abs_err.cpu().numpy(),
                            cmp.max_rel_err.cpu().numpy(), cmp.max_ulp_err.cpu().numpy(),
                            np.full(len(fails), x.shape[1]))


# --- counterexamples ------------------------------------------------------------------------------------

class _LazyCounterexample:
    """Shrinks when first read (Verdict.counterexample), so a batch pays only for what is looked at."""

    def __init__(self, program, ref, point, names, dtype, rtol, atol, expected, domains, exhaustive):
        self.args = (program, ref, point, names, dtype, rtol, atol, expected, domains, exhaustive)
        self._value: Counterexample | None = None

    def resolve(self) -> Counterexample:
        if self._value is None:
            self._value = _counterexample(*self.args)
            self.args = None
        return self._value


def _counterexample(program, ref: Reference, point: torch.Tensor, names, dtype, rtol, atol, expected,
                    domains, exhaustive) -> Counterexample:
    arrays = fused.ProgramArrays.from_programs([program])
    tdt = TORCH_DTYPES[dtype]

    def run(points: list[list[float]]) -> tuple[np.ndarray, np.ndarray | None]:
        xs = torch.tensor(points, dtype=torch.float64).T.to(tdt)
        got = fused.evaluate(arrays, _host_inputs(xs, dtype), dtype)[0].astype(np.float64)
        try:
            want = _round_to(ref(xs), dtype).astype(np.float64)
        except Exception:  # noqa: BLE001 - a reference refusing some inputs: those points are no counterexamples
            return got, None
        return got, want

    def fails(points: list[list[float]]) -> list[bool]:
        got, want = run(points)
        if want is None:
            return [fails([p])[0] for p in points] if len(points) > 1 else [False]
        bad = _failing(got, want, rtol, atol)
        # keep a point only where the reference is defined (not nan), unless it was nan at the start
        return (bad & (~np.isnan(want) | start_nan)).tolist()

    start = [float(v) for v in point.to(torch.float64).tolist()]
    start_nan = bool(np.isnan(expected))
    if exhaustive:  # a proof's counterexample is one exact value of the dtype: keep it
        best = start
    else:
        bounds = [(d.low, d.high) if d is not None else (-math.inf, math.inf) for d in domains]
        best = shrink(start, fails, bounds=bounds, representable=lambda v: _representable(v, tdt))
    got, want = run([best])
    return Counterexample(dict(zip(names, best)), float(got[0]), float(want[0]) if want is not None else expected)


def _representable(v: float, tdt) -> float:
    return float(torch.tensor(v, dtype=torch.float64).to(tdt).to(torch.float64))


def _failing(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """compare.py's rule on host arrays: True where the pair fails."""
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(got - want)
        finite = np.isfinite(got) & np.isfinite(want)
        ok = (got == want) | (np.isnan(got) & np.isnan(want)) | (finite & (diff <= atol + rtol * np.abs(want)))
    return ~ok


__all__ = ["Reference", "ReferenceOutputs", "verify_program", "verify_programs"]
