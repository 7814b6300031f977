"""Checking compiled candidates against a reference on device-resident inputs.

`verify_programs` works on Programs and Kernels (never on source text: the Session compiles, then calls
it). Inputs come from an InputPool (generated on the device, seeded, reused across calls); the
reference's outputs on a pool are computed once, rounded to the kernel dtype and kept in a
`ReferenceOutputs` cache; candidates run through the fused tile evaluator (runtime/fused.py), which
compares as it goes and stops a candidate at its first failing tile, so only per-candidate scalars
exist; candidates that compiled to the same program run once. On a CUDA device the same interpreter runs as
a CUDA kernel (runtime/fused_cuda.py, when CuPy and NVRTC are there; not yet run on a GPU), else the batched
torch-op VM and compare.py, over blocks of candidates and chunks of inputs, counting like the fused evaluator
(up to each candidate's first failing tile). Memory is bounded by the pool: the reference runs on chunks of inputs,
its rounded outputs take one value per input, and everything else is per chunk. A counterexample is the
first failing input, shrunk on demand (when it is first read) toward simple values inside the domain
where the reference is defined. Row kernels (docs/verification.md, "Row kernels") go to rows.py, which runs
them on pools of rows with this module's Reference and ReferenceOutputs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import numbers
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import torch

from ..ir import Program, ProgramBatch
from ..lang.errors import CompileError
from ..lang.spec import REDUCTION_OPS
from ..runtime import fused, fused_cuda, vm
from ..runtime.kernel import DTYPES, Kernel
from ..runtime.reference import evaluate as host_evaluate
from .compare import compare, default_tolerances, trivial_reference
from .confidence import as_count, epsilon_bound, per_candidate_delta, tests_needed
from .pools import Domain, as_domain, as_row_lengths, domain_edges, exhaustive_inputs, parse_domains
from .shrink import shrink
from .verdict import Counterexample, Verdict

DEFAULT_EPSILON = 1e-3  # tests=None runs enough tests to bound the failure rate by this at 1 - delta
CHUNK = 1 << 16  # inputs per pass of one candidate with a progress bar (progress is reported per chunk)
BLOCK = 1 << 20  # inputs per fused pass otherwise: bounds the inputs converted to registers at once
REFERENCE_CHUNK = 1 << 20  # inputs per reference call: bounds the reference's temporaries
TORCH_ELEMENTS = 1 << 22  # candidate outputs per torch-VM pass (candidates x inputs): bounds compare's temporaries
FUSED_DEVICES = ("cpu",)  # devices whose inputs go to the fused evaluator; elsewhere the torch-op VM runs
# every value of the key dtype is one of the value dtypes': what a reference program may run in unchanged
_HOLDS = {"float64": ("float16", "bfloat16", "float32", "float64"), "float32": ("float16", "bfloat16", "float32"),
          "float16": ("float16",), "bfloat16": ("bfloat16",)}
_REDUCTIONS = frozenset(REDUCTION_OPS)  # a program with one is a row kernel (Program.reduces, without its loop)
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


_ARITIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _arity(fn) -> tuple[int, float]:
    """(required, maximum) positional arguments of a callable; NumPy ufuncs by their `nin`. Remembered
    per function object (inspect.signature costs more than checking a small kernel's edit)."""
    try:
        return _ARITIES[fn]
    except (KeyError, TypeError):
        pass
    arity = _signature_arity(fn)
    with contextlib.suppress(TypeError):  # not weakly referenceable (a bound method, a builtin): not kept
        _ARITIES[fn] = arity
    return arity


def _signature_arity(fn) -> tuple[int, float]:
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
    a key that identifies it in the outputs cache. It sees exactly the candidate's inputs: a Kernel or
    Program runs in its own dtype (a float64 Kernel gives a float64 reference) when that holds every value
    of the kernel dtype, else in one that does (float64 for a float64 kernel, float32 otherwise); a Python
    callable receives NumPy arrays (float64 for float64 kernels, float32 for bfloat16, the kernel dtype
    otherwise)."""

    def __init__(self, reference, n_params: int, dtype: str):
        self.dtype = dtype
        self.n_params = n_params
        if isinstance(reference, (Kernel, Program)):
            prog = _program(reference)
            if prog.n_params != n_params:
                raise ValueError(f"the reference takes {prog.n_params} parameters but the candidate takes {n_params}")
            self.program = prog
            own = reference.dtype if isinstance(reference, Kernel) else dtype
            self.program_dtype = own if dtype in _HOLDS[own] else "float64" if dtype == "float64" else "float32"
            if isinstance(reference, Kernel):
                self.arrays, digest = reference.arrays, reference.digest
            else:
                self.arrays = fused.ProgramArrays.from_programs([prog])
                digest = prog.digest()
            self.fn = None
            self.key = ("program", digest, self.program_dtype)
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
        out = _numbers(out, f"one number per input (an array of {n} values or a scalar)")
        if out.shape == ():
            out = np.full(n, out)
        if out.shape != (n,):
            raise ValueError(f"the reference returned shape {out.shape}; expected ({n},), one value per input")
        return out.astype(np.float64)


    def rows(self, arrays: list[np.ndarray], fused_rows: bool = False) -> tuple[np.ndarray, bool | None]:
        """Outputs on rows (one array [R, n] per parameter, holding values of the kernel dtype) as float64,
        unrounded: [R, n] (per element) or [R] (per row), and whether they are per row (None when a callable's
        answer on rows of one element cannot tell). A program runs in the reference evaluator
        (runtime/reference.py; bfloat16 in float32, as that evaluator computes it), or with `fused_rows` in
        the fused evaluator (as the candidates run there: the same program gives the same values); a
        callable receives the rows as float64 arrays."""
        r, n = arrays[0].shape
        if self.program is not None:
            per_row = self.program.returns_per_row()
            if fused_rows:
                xs = np.stack([a.reshape(-1) for a in arrays]) if arrays else np.empty((0, r * n))
                out = fused.evaluate(self.arrays, fused.as_registers(xs, self.program_dtype), self.program_dtype,
                                     row=n)[0].astype(np.float64).reshape(r, n)
                return (out[:, 0] if per_row else out), per_row
            dt = "float32" if self.program_dtype == "bfloat16" else self.program_dtype
            out = host_evaluate(self.program, [a.astype(dt) for a in arrays], dt)
            return out.astype(np.float64), per_row
        with np.errstate(all="ignore"):
            out = self.fn(*[np.asarray(a, dtype=np.float64) for a in arrays])
        out = _numbers(out, f"on rows an array of shape ({r}, {n}) (one value per element) or ({r},) (one per row)")
        if out.shape == ():
            return np.full(r, out, dtype=np.float64), None
        if out.shape == (r, n):
            return out.astype(np.float64), None if n == 1 else False
        if out.shape in ((r,), (r, 1)):
            return out.reshape(r).astype(np.float64), None if n == 1 else True
        raise ValueError(f"the reference returned shape {out.shape} for {r} rows of {n} elements; expected ({r}, {n}) "
                         f"(one value per element) or ({r},) (one value per row)")


def _numbers(out, expected: str) -> np.ndarray:
    """A reference's answer as a real or bool array, or a ValueError saying what it must return."""
    if out is None:
        raise ValueError(f"the reference returned None; it must return {expected}")
    out = np.asarray(out)
    if out.dtype.kind == "c":
        raise ValueError(f"the reference returned complex values ({out.dtype}); it must return real numbers")
    if out.dtype.kind not in "biuf":
        raise ValueError(f"the reference returned {out.dtype} values; it must return numbers or bools")
    return out


def _host_inputs(x: torch.Tensor, dtype: str) -> np.ndarray:
    """Inputs [P, n] as NumPy holding exactly the kernel dtype's values (bfloat16 as float32)."""
    x = x.detach().cpu()
    if dtype == "bfloat16":
        return x.to(torch.float32).numpy()
    return x.to(TORCH_DTYPES[dtype]).numpy()


def _round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to the kernel dtype (overflow to ±inf, underflow to 0), in register dtype.
    The 16-bit dtypes round through float32, as the kernel's float32 registers do (and torch's float64 to
    bfloat16 conversion does)."""
    with np.errstate(over="ignore"):
        if dtype == "bfloat16":
            return torch.from_numpy(values.astype(np.float32)).to(torch.bfloat16).to(torch.float32).numpy()
        if dtype == "float16":
            return values.astype(np.float32).astype(np.float16).astype(np.float32)
        return values.astype(dtype)


class ReferenceOutputs:
    """The reference's outputs per (reference, inputs), rounded to the kernel dtype, with the reason the
    reference is trivial under the tolerances in use (or None): computed once, reused by every candidate
    checked on those inputs.
    LRU within `max_bytes`; an entry holds its reference (so a key never outlives it) and a weak reference
    to its inputs (so it never keeps a pool the InputPool has let go, and a new tensor at the same
    address is never mistaken for it)."""

    def __init__(self, max_bytes: int = 256 << 20):
        self.max_bytes = max_bytes
        self._cache: OrderedDict[tuple, tuple] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, ref: Reference, x: torch.Tensor, dtype: str, rtol: float | None = None,
            atol: float | None = None) -> tuple[np.ndarray, str | None]:
        """(outputs, why trivial or None); tolerances None are the dtype's defaults."""
        key = (ref.key, id(x), dtype)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[2]() is x:
                self._cache.move_to_end(key)
                self.hits += 1
                want, trivial = hit[0], hit[1]
            else:
                hit = None
        if hit is None:
            n = x.shape[1]
            want = np.empty(n, dtype=fused.REGISTER_DTYPE[dtype])  # the only array of the pool's length made here
            for lo in range(0, n, REFERENCE_CHUNK):
                want[lo:lo + REFERENCE_CHUNK] = _round_to(ref(x[:, lo:lo + REFERENCE_CHUNK]), dtype)
            trivial = {}  # per (rtol, atol)
            with self._lock:
                self.misses += 1
                for k in [k for k, v in self._cache.items() if v[2]() is None]:  # inputs gone: never hit again
                    del self._cache[k]
                if want.nbytes <= self.max_bytes:
                    self._cache[key] = (want, trivial, weakref.ref(x), ref.fn or ref.key)
                    while sum(v[0].nbytes for v in self._cache.values()) > self.max_bytes:
                        self._cache.popitem(last=False)
        if (rtol, atol) not in trivial:
            trivial[(rtol, atol)] = trivial_reference(torch.from_numpy(want), rtol=rtol, atol=atol, dtype=dtype)
        return want, trivial[(rtol, atol)]

    def get_rows(self, ref: Reference, groups: list[tuple[int, torch.Tensor]], dtype: str, rtol: float | None = None,
                 atol: float | None = None) -> tuple[RowOutputs, str | None]:
        """The reference on pools of rows: `groups` is [(row length n, inputs [P, R*n])], in order; (outputs,
        why trivial or None), the triviality judged over every group's outputs together (one value a row
        when they are per row)."""
        key = (ref.key, "rows", tuple((n, id(x)) for n, x in groups), dtype)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[2]() is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                outs = hit[0]
            else:
                hit = None
        if hit is None:
            outs = _row_outputs(ref, groups, dtype)
            alive = _AllAlive([x for _, x in groups])
            with self._lock:
                self.misses += 1
                for k in [k for k, v in self._cache.items() if v[2]() is None]:
                    del self._cache[k]
                if outs.nbytes <= self.max_bytes:
                    self._cache[key] = (outs, outs.trivial, alive, ref.fn or ref.key)
                    while sum(v[0].nbytes for v in self._cache.values()) > self.max_bytes:
                        self._cache.popitem(last=False)
        if (rtol, atol) not in outs.trivial:
            values = np.concatenate([w[::n] if outs.per_row else w for (n, _), w in zip(groups, outs.wants)])
            outs.trivial[(rtol, atol)] = trivial_reference(torch.from_numpy(values), rtol=rtol, atol=atol, dtype=dtype)
        return outs, outs.trivial[(rtol, atol)]

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def __len__(self) -> int:
        return len(self._cache)


@dataclasses.dataclass
class RowOutputs:
    """The reference's outputs on pools of rows: per group, [R*n] values rounded to the kernel dtype (register
    dtype), one per element (a per-row output repeated along its row, as the evaluators compare); whether
    they are per row (None: a callable whose rows were all of one element); the triviality per tolerances."""

    wants: list[np.ndarray]
    per_row: bool | None
    trivial: dict = dataclasses.field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        return sum(w.nbytes for w in self.wants)


class _AllAlive:
    """A weak reference to several tensors: the first while all are alive, else None."""

    def __init__(self, tensors: list[torch.Tensor]):
        self.refs = [weakref.ref(t) for t in tensors]

    def __call__(self):
        tensors = [r() for r in self.refs]
        return None if any(t is None for t in tensors) else tensors[0]


def _row_outputs(ref: Reference, groups: list[tuple[int, torch.Tensor]], dtype: str) -> RowOutputs:
    """Run the reference over each group's rows (in chunks of about REFERENCE_CHUNK elements); a program in
    the fused evaluator (as the candidates run)."""
    fused_rows = ref.program is not None
    wants, kinds = [], {}
    for n, x in groups:
        r = x.shape[1] // n
        want = np.empty(r * n, dtype=fused.REGISTER_DTYPE[dtype])
        step = max(1, REFERENCE_CHUNK // n)
        for lo in range(0, r, step):
            hi = min(r, lo + step)
            part = x[:, lo * n:hi * n]
            host = _host_inputs(part, dtype).astype(np.float64).reshape(x.shape[0], hi - lo, n)
            out, per_row = ref.rows(list(host), fused_rows)
            if per_row is not None:
                kinds.setdefault(per_row, n)
            rounded = _round_to(out, dtype)
            want[lo * n:hi * n] = (np.repeat(rounded, n) if out.ndim == 1 else rounded.reshape(-1))
        wants.append(want)
    if len(kinds) > 1:
        raise ValueError(f"the reference returned one value per row for rows of {kinds[True]} elements but one per "
                         f"element for rows of {kinds[False]}; it must do one or the other")
    return RowOutputs(wants, next(iter(kinds), None))


# --- checks on the options --------------------------------------------------------------------------

def _check_options(dtype: str, delta: float, tests, exhaustive: bool, seed, row_lengths=None) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not 0 < delta < 1:
        raise ValueError(f"delta must be a number in (0, 1), got {delta!r}")
    if not isinstance(exhaustive, (bool, np.bool_)):
        raise ValueError(f"exhaustive must be True or False, got {exhaustive!r}")  # noqa: TRY004 - contract: ValueError
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"seed must be an integer, got {seed!r}")  # noqa: TRY004 - contract: ValueError
    if tests is not None:
        as_count("tests", tests, minimum=1)
        if exhaustive:
            raise ValueError("exhaustive=True checks every input of the dtype: leave tests unset")
    if row_lengths is not None:
        as_row_lengths(row_lengths)
        if exhaustive:
            raise ValueError("exhaustive=True checks every value of one 16-bit parameter; row_lengths asks for "
                             "pools of rows: use one or the other")


def _tolerance(name: str, value, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0:
        raise ValueError(f"{name} must be a non-negative number or None (the dtype's default), got {value!r}")
    return float(value)


def check_options(dtype: str = "float32", delta: float = 1e-3, tests=None, exhaustive: bool = False, seed=0,
                  rtol=None, atol=None, row_lengths=None) -> None:
    """ValueError for an option verify_programs would refuse: what a caller checks before compiling."""
    _check_options(dtype, delta, tests, exhaustive, seed, row_lengths)
    _tolerance("rtol", rtol, 0.0)
    _tolerance("atol", atol, 0.0)


def _inputs(pool, n_params: int, domains: list[Domain | None], dtype: str, tests, delta: float, seed: int,
            exhaustive: bool) -> torch.Tensor:
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
    want_bytes = n * np.dtype(fused.REGISTER_DTYPE[dtype]).itemsize
    if want_bytes > pool.max_bytes:  # the reference's outputs take one register value per input
        raise ValueError(f"N too large for memory: the reference's {n:,} outputs need {want_bytes:,} bytes, "
                         f"budget {pool.max_bytes:,} bytes; use fewer tests per pass")
    return pool.get(n_params, n, dtype, domains, int(seed))


# --- verification -------------------------------------------------------------------------------------

def verify_programs(results: Sequence, reference, pool, *, tests: int | None = None, delta: float = 1e-3,
                    dtype: str = "float32", domain=None, seed: int = 0, exhaustive: bool = False,
                    rtol: float | None = None, atol: float | None = None, batch: ProgramBatch | None = None,
                    outputs: ReferenceOutputs | None = None, progress=None,
                    compiler: list[str] | None = None, row_lengths=None) -> list[Verdict]:
    """Verify compiled candidates (Programs, Kernels or CompileErrors) against a reference on the same
    inputs, in one pass. `batch`, when given, is the same candidates already packed (row i = results[i]).
    With k candidates each bound uses delta/k. `outputs` caches the reference's outputs across calls;
    `progress(done, total)` is called as inputs are checked (one candidate only); `compiler` names the
    compiler that produced each candidate (shown in its Verdict). Row kernels (a reference or a candidate
    with a reduction, or `row_lengths` given) are checked on pools of rows (verification/rows.py): `tests`
    then counts rows."""
    t0 = time.perf_counter()
    _check_options(dtype, delta, tests, exhaustive, seed, row_lengths)
    d_rtol, d_atol = default_tolerances(dtype)
    rtol, atol = _tolerance("rtol", rtol, d_rtol), _tolerance("atol", atol, d_atol)
    k = max(1, len(results))
    if batch is None and len(results) == 1 and isinstance(results[0], Kernel):  # an edit: packed once per Kernel
        batch_arrays = results[0].arrays
    else:
        batch_arrays = None
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
    domains = _domains(domain, names)
    ref = Reference(reference, n_params, dtype)
    programs = ok if ref.program is None else [ref.program, *ok]
    if row_lengths is not None or any(not _REDUCTIONS.isdisjoint(p.ops) for p in programs):
        from . import rows  # rows.py builds on this module

        if exhaustive:
            raise ValueError("exhaustive=True checks every value of one 16-bit parameter; a row kernel is checked "
                             "on pools of rows: leave exhaustive unset")
        return rows.verify_rows(results, ref, pool, names=names, domains=domains, dtype=dtype, tests=tests,
                                delta=d_k, seed=int(seed), rtol=rtol, atol=atol, batch=batch, outputs=outputs,
                                progress=progress, compiler=compiler, row_lengths=row_lengths, t0=t0)
    x = _inputs(pool, n_params, domains, dtype, tests, d_k, seed, exhaustive)
    want, trivial = (outputs if outputs is not None else ReferenceOutputs()).get(ref, x, dtype, rtol, atol)
    t_setup = time.perf_counter()
    if x.device.type in FUSED_DEVICES:
        arrays = batch_arrays or (fused.ProgramArrays.from_batch(batch) if batch is not None else
                                  fused.ProgramArrays.from_programs(results))
        cmp = _compare_fused(arrays, x, want, dtype, rtol, atol, progress)
    elif x.device.type == "cuda" and fused_cuda.available() and max(len(r) for r in ok) <= fused_cuda.MAX_REGS:
        arrays = fused.ProgramArrays.from_batch(batch) if batch is not None else \
            fused.ProgramArrays.from_programs(results)
        cmp = fused_cuda.compare(arrays, x, want, dtype, rtol, atol)
    else:
        batch = batch if batch is not None else ProgramBatch.from_results(results)
        cmp = _compare_torch(batch, x, want, dtype, rtol, atol, progress)
    t_run = time.perf_counter()
    timings = {"setup": t_setup - t0, "execute_and_compare": t_run - t_setup}
    verdicts = []
    n = x.shape[1]
    bound = epsilon_bound(n, d_k)  # every candidate that passes has the same bound
    x_host = x.numpy() if x.device.type == "cpu" and x.dtype != torch.bfloat16 else None
    for j, r in enumerate(results):
        if isinstance(r, CompileError):
            verdicts.append(Verdict(False, 0, 0, 1.0, d_k, error=r, dtype=dtype, compiler=compiler[j]))
            continue
        f = int(cmp.failures[j])
        passed = f == 0 and trivial is None
        cx = None
        if f:
            first = int(cmp.first_failure[j])
            # a copy: a verdict never holds the pool
            point = torch.from_numpy(x_host[:, first].copy()) if x_host is not None else x[:, first].to("cpu", copy=True)
            cx = _LazyCounterexample(r, ref, point, names, dtype, rtol, atol, float(want[first]), domains, exhaustive,
                                     None if cmp.got is None else float(cmp.got[j]))
        eps = 0.0 if (passed and exhaustive) else bound if passed else 1.0
        verdicts.append(Verdict(passed, int(cmp.evaluated[j]), f, eps, d_k, cx, float(cmp.max_abs_err[j]),
                                float(cmp.max_rel_err[j]), float(cmp.max_ulp_err[j]),
                                exhaustive=exhaustive and passed, trivial=trivial, dtype=dtype,
                                timings=dict(timings), compiler=compiler[j]))
    return verdicts


def verify_program(candidate, reference, pool, **options) -> Verdict:
    """verify_programs for one candidate (a Kernel or a Program)."""
    return verify_programs([candidate], reference, pool, **options)[0]


class _Counts:
    """Per-candidate counts merged over passes, each pass covering the candidates still running (those
    without a failure yet) over the next inputs: a candidate stops at its first failing pass, as it stops
    at its first failing tile inside one. `got` (with `track_got`): each candidate's output at its first
    failure, as the passes computed it (the torch path), else None."""

    def __init__(self, b: int, track_got: bool = False):
        self.failures, self.evaluated = np.zeros(b, dtype=np.int64), np.zeros(b, dtype=np.int64)
        self.first_failure = np.full(b, -1, dtype=np.int64)
        self.max_abs_err, self.max_rel_err, self.max_ulp_err = (np.zeros(b) for _ in range(3))
        self.got = np.full(b, np.nan) if track_got else None

    def add(self, rows: np.ndarray, part: fused.Comparison, lo: int, got: np.ndarray | None = None) -> np.ndarray:
        """Merge one pass over inputs lo.. for candidates `rows`; the rows still without a failure."""
        self.failures[rows] += part.failures
        self.evaluated[rows] += part.evaluated
        for name in ("max_abs_err", "max_rel_err", "max_ulp_err"):
            getattr(self, name)[rows] = np.maximum(getattr(self, name)[rows], getattr(part, name))
        failed = part.first_failure >= 0
        self.first_failure[rows[failed]] = part.first_failure[failed] + lo
        if self.got is not None:
            self.got[rows[failed]] = got[failed]
        return rows[~failed]

    def result(self) -> fused.Comparison:
        return fused.Comparison(self.failures, self.first_failure, self.max_abs_err, self.max_rel_err,
                                self.max_ulp_err, self.evaluated, self.got)


def _compare_fused(arrays, x: torch.Tensor, want, dtype, rtol, atol, progress) -> fused.Comparison:
    """The fused evaluator's comparison of every candidate: a program many candidates compiled to runs once,
    its comparison copied to each."""
    distinct, copies = arrays.unique()
    cmp = _fused_passes(distinct, x, want, dtype, rtol, atol, progress)
    return cmp if copies is None else cmp.take(copies)


def _fused_passes(arrays, x: torch.Tensor, want, dtype, rtol, atol, progress) -> fused.Comparison:
    """The fused evaluator over the programs, BLOCK inputs at a time (CHUNK with a progress bar on one
    program); a program stops at its first failing tile, so a block goes to the programs still running
    only, and it ends when none is."""
    n = x.shape[1]
    step = CHUNK if progress is not None and len(arrays) == 1 else BLOCK  # multiples of fused.TILE
    if n <= step:  # one pass: nothing to merge
        xs = fused.as_registers(_host_inputs(x, dtype), dtype)
        part = fused.compare(arrays, xs, want, dtype, rtol, atol)
        if progress is not None:
            progress(n, n)
        return part
    counts = _Counts(len(arrays))
    running = np.arange(len(arrays))
    for lo in range(0, n, step):
        xs = fused.as_registers(_host_inputs(x[:, lo:lo + step], dtype), dtype)
        part = fused.compare(arrays if len(running) == len(arrays) else arrays.select(running), xs,
                             want[lo:lo + step], dtype, rtol, atol)
        running = counts.add(running, part, lo)
        if progress is not None:
            progress(min(n, lo + step), n)
        if not len(running):
            break
    return counts.result()


def _rows(batch: ProgramBatch, lo: int, hi: int) -> ProgramBatch:
    """Candidates lo..hi of a batch (views)."""
    return dataclasses.replace(batch, ops=batch.ops[lo:hi], args=batch.args[lo:hi], imm=batch.imm[lo:hi],
                               lengths=batch.lengths[lo:hi], n_params=batch.n_params[lo:hi],
                               error=batch.error[lo:hi], messages=batch.messages and batch.messages[lo:hi])


def _compare_torch(batch: ProgramBatch, x: torch.Tensor, want: np.ndarray, dtype: str, rtol, atol,
                   progress=None) -> fused.Comparison:
    """The batched torch-op VM and compare.py (the path for devices without a fused evaluator), over
    blocks of candidates and chunks of inputs of at most TORCH_ELEMENTS outputs, counting like the fused
    evaluator: each candidate up to its first failing tile of fused.TILE inputs."""
    n, b = x.shape[1], len(batch)
    tile = fused.TILE
    m = min(n, max(tile, TORCH_ELEMENTS // max(b, 1) // tile * tile))  # inputs per pass, whole tiles
    rows_per_pass = max(1, TORCH_ELEMENTS // max(m, 1))
    counts = _Counts(b, track_got=True)
    want_t = torch.from_numpy(want)
    for b0 in range(0, b, rows_per_pass):
        block = _rows(batch, b0, min(b, b0 + rows_per_pass)).to(x.device)
        sched = vm.schedule(block)
        running = np.arange(b0, b0 + len(block))
        for lo in range(0, n, m):
            got = vm.run(block, x[:, lo:lo + m], dtype, sched=sched)[torch.as_tensor(running - b0, device=x.device)]
            cmp = compare(got, want_t[lo:lo + m].to(x.device), rtol=rtol, atol=atol, dtype=dtype, tile=tile)
            part = fused.Comparison(*(t.cpu().numpy() for t in (
                cmp.failures, cmp.first_failure, cmp.max_abs_err, cmp.max_rel_err, cmp.max_ulp_err, cmp.evaluated)))
            at = torch.as_tensor(np.maximum(part.first_failure, 0), device=x.device)
            running = counts.add(running, part, lo, got.gather(1, at[:, None])[:, 0].double().cpu().numpy())
            if progress is not None and b == 1:
                progress(min(n, lo + m), n)
            if not len(running):
                break
    return counts.result()


# --- counterexamples ------------------------------------------------------------------------------------

class _LazyCounterexample:
    """Shrinks when first read (Verdict.counterexample), so a batch pays only for what is looked at."""

    def __init__(self, program, ref, point, names, dtype, rtol, atol, expected, domains, exhaustive, got):
        self.args = (program, ref, point, names, dtype, rtol, atol, expected, domains, exhaustive, got)
        self._value: Counterexample | None = None

    def resolve(self) -> Counterexample:
        if self._value is None:
            self._value = _counterexample(*self.args)
            self.args = None
        return self._value


def _counterexample(program, ref: Reference, point: torch.Tensor, names, dtype, rtol, atol, expected,
                    domains, exhaustive, device_got: float | None = None) -> Counterexample:
    """The failing input `point`, shrunk on the host (the fused evaluator and the reference, compared by
    compare.py's rule) toward simple values inside the domain, through points that fail there and where
    the reference is defined: not raising, and not nan unless it was nan at `point` (the candidate gave a
    number there); from such a point it first looks for a failing one where the reference is not nan. A
    point found on a device that does not fail on the host (the device's evaluator disagreeing with the
    host's) moves to one that does when the shrinking finds one, else is reported with the values compared
    on the device (`device_got`: the candidate's output there, None when the host's evaluator ran)."""
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

    def failing(points: list[list[float]], nan_ok: bool) -> list[bool]:
        got, want = run(points)
        if want is None:
            return [failing([p], nan_ok)[0] for p in points] if len(points) > 1 else [False]
        return (_failing(got, want, rtol, atol) & (~np.isnan(want) | nan_ok)).tolist()

    start = [float(v) for v in point.to(torch.float64).tolist()]
    best = start
    if not exhaustive:  # a proof's counterexample is one exact value of the dtype: keep it
        bounds = [(d.low, d.high) if d is not None else (-math.inf, math.inf) for d in domains]

        def representable(v):
            return _representable(v, tdt)

        best = shrink(start, lambda p: failing(p, False), bounds=bounds, representable=representable)
        if best == start and np.isnan(expected):  # no failing point nearby where the reference is defined
            best = shrink(start, lambda p: failing(p, True), bounds=bounds, representable=representable)
    got, want = run([best])
    if best == start and device_got is not None and not failing([start], True)[0]:
        return Counterexample(dict(zip(names, start)), device_got, expected)  # what the device compared
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
