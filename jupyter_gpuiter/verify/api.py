"""Checking compiled candidates against a reference on device-resident inputs.

`verify_program` and `verify_programs` work on Programs and Kernels (never on source text: the
Session compiles, then calls these). Inputs come from an InputPool (generated on the device, seeded,
reused across calls); candidate and reference run on the device chunk by chunk, stopping at the first
failing chunk; only the verdict scalars and one counterexample cross to the host.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..ir import Program, ProgramBatch
from ..lang.errors import CompileError
from ..runtime import vm
from ..runtime.kernel import DTYPES, Kernel
from ..runtime.render import TORCH_DTYPES, torch_function
from .compare import compare, default_tolerances, trivial_reference
from .confidence import epsilon_bound, per_candidate_delta, tests_needed
from .pools import Domain, as_domain, exhaustive_inputs, parse_domains
from .shrink import shrink
from .verdict import Counterexample, Verdict

DEFAULT_EPSILON = 1e-3  # tests=None runs enough tests to bound the failure rate by this at 1 - delta
CHUNK = 1 << 16


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


def _reference_fn(reference, n_params: int, dtype: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """A function inputs [P, n] -> expected [n] (on the inputs' device)."""
    tdt = TORCH_DTYPES[dtype]
    if isinstance(reference, (Kernel, Program)):
        prog = _program(reference)
        if prog.n_params != n_params:
            raise ValueError(f"the reference takes {prog.n_params} parameters but the candidate takes {n_params}")
        fn = torch_function(prog, reference.dtype if isinstance(reference, Kernel) else dtype)  # e.g. float64
        return lambda x: fn(*x)
    if not callable(reference):
        raise TypeError(f"a reference is source, a Kernel or a callable, not {type(reference).__name__}")
    lo, hi = _arity(reference)
    if not lo <= n_params <= hi:
        want = str(lo) if lo == hi else f"{lo} to {hi}"
        raise ValueError(f"the reference takes {want} arguments but the candidate takes {n_params}")

    def run(x: torch.Tensor) -> torch.Tensor:
        arrays = [x[i].detach().cpu().float().numpy().astype(dtype if dtype != "bfloat16" else "float32")
                  for i in range(n_params)]
        with np.errstate(all="ignore"):
            out = np.asarray(reference(*arrays))
        if out.shape == ():
            out = np.full(x.shape[1], out)
        if out.shape != (x.shape[1],):
            raise ValueError(f"the reference returned shape {out.shape}; expected ({x.shape[1]},), one value per input")
        return torch.as_tensor(out.astype(np.float64)).to(device=x.device, dtype=tdt if out.dtype != bool else
                                                          torch.bool)

    return run


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


def _outputs(fn, x: torch.Tensor, returns_bool: bool, tdt) -> torch.Tensor:
    out = fn(x)
    return out.to(tdt) if out.dtype == torch.bool or returns_bool else out


def _check_options(dtype: str, delta: float) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")


def verify_program(candidate, reference, pool, *, tests: int | None = None, delta: float = 1e-3,
                   dtype: str = "float32", domain=None, seed: int = 0, exhaustive: bool = False,
                   rtol: float | None = None, atol: float | None = None, progress=None) -> Verdict:
    """Check a compiled candidate against a reference (Kernel, Program or callable on NumPy arrays).

    `progress(done, total)`, when given, is called after each chunk of inputs."""
    t0 = time.perf_counter()
    _check_options(dtype, delta)
    dev = pool.device
    prog = _program(candidate)
    names = prog.param_names or [f"x{i}" for i in range(prog.n_params)]
    ref = _reference_fn(reference, prog.n_params, dtype)
    tdt = TORCH_DTYPES[dtype]
    if exhaustive:
        x = exhaustive_inputs(prog.n_params, dtype).to(dev)
    else:
        n = tests if tests is not None else tests_needed(DEFAULT_EPSILON, delta)
        if n < 1:
            raise ValueError(f"tests must be at least 1, got {n}")
        x = pool.get(prog.n_params, n, dtype, _domains(domain, names), seed)
    d_rtol, d_atol = default_tolerances(dtype)
    rtol = d_rtol if rtol is None else rtol
    atol = d_atol if atol is None else atol
    cand = torch_function(prog, dtype)
    returns_bool = prog.returns_bool()
    t_setup = time.perf_counter()
    run_n = failures = 0
    first, abs_err, rel_err, ulp_err = -1, 0.0, 0.0, 0.0
    expected_seen = []
    for lo in range(0, x.shape[1], CHUNK):
        xc = x[:, lo:lo + CHUNK]
        got = _outputs(lambda v: cand(*v), xc, returns_bool, tdt)
        want = ref(xc)
        if want.dtype == torch.bool:
            want = want.to(tdt)
        cmp = compare(got[None], want, rtol=rtol, atol=atol, dtype=dtype)
        run_n += xc.shape[1]
        f = int(cmp.failures[0])
        abs_err = max(abs_err, float(cmp.max_abs_err[0]))
        rel_err = max(rel_err, float(cmp.max_rel_err[0]))
        ulp_err = max(ulp_err, float(cmp.max_ulp_err[0]))
        expected_seen.append(want)
        if progress is not None:
            progress(run_n, x.shape[1])
        if f:
            failures, first = f, lo + int(cmp.first_failure[0])
            break
    t_run = time.perf_counter()
    trivial = trivial_reference(torch.cat(expected_seen)) if not failures else None
    passed = failures == 0 and trivial is None
    cx = None
    if failures:
        cx = _counterexample(cand, ref, x[:, first], names, returns_bool, tdt, rtol, atol, dtype)
    eps = 0.0 if (passed and exhaustive) else epsilon_bound(run_n, delta) if passed else 1.0
    return Verdict(passed, run_n, failures, eps, delta, cx, abs_err, rel_err, ulp_err,
                   exhaustive=exhaustive and passed, trivial=trivial, dtype=dtype,
                   timings={"setup": t_setup - t0, "execute_and_compare": t_run - t_setup,
                            "counterexample": time.perf_counter() - t_run})


def _counterexample(cand, ref, point: torch.Tensor, names, returns_bool, tdt, rtol, atol, dtype) -> Counterexample:
    dev = point.device

    def fails(points: list[list[float]]) -> list[bool]:
        xs = torch.tensor(points, dtype=torch.float64, device=dev).T.to(tdt)
        got = _outputs(lambda v: cand(*v), xs, returns_bool, tdt)
        want = ref(xs)
        if want.dtype == torch.bool:
            want = want.to(tdt)
        return (~compare(got[None], want, rtol=rtol, atol=atol, dtype=dtype).ok[0]).tolist()

    start = [float(v) for v in point.to(torch.float64).tolist()]
    best = shrink(start, fails) if fails([start])[0] else start
    xs = torch.tensor([best], dtype=torch.float64, device=dev).T.to(tdt)
    got = float(_outputs(lambda v: cand(*v), xs, returns_bool, tdt)[0])
    want = float(ref(xs).to(torch.float64)[0])
    return Counterexample(dict(zip(names, best)), got, want)


def verify_programs(results: Sequence, reference, pool, *, tests: int | None = None, delta: float = 1e-3,
                    dtype: str = "float32", domain=None, seed: int = 0, exhaustive: bool = False,
                    rtol: float | None = None, atol: float | None = None,
                    batch: ProgramBatch | None = None) -> list[Verdict]:
    """Verify many compiled candidates (Programs, Kernels or CompileErrors) in one device pass: run by
    the batched VM on the same inputs. `batch`, when given, is the same candidates already on the device
    (the traditional compiler's output, row i = results[i]), so nothing is re-uploaded. With k candidates
    each bound uses delta/k. Counterexamples are the first failing input, not shrunk (verify one
    candidate to shrink it)."""
    _check_options(dtype, delta)
    dev = pool.device
    k = max(1, len(results))
    results = [r if isinstance(r, CompileError) else _program(r) for r in results]
    ok = [r for r in results if isinstance(r, Program)]
    d_k = per_candidate_delta(delta, k)
    if not ok:
        return [Verdict(False, 0, 0, 1.0, d_k, error=r, dtype=dtype) for r in results]
    n_params = ok[0].n_params
    for r in ok:
        if r.n_params != n_params:
            raise ValueError(f"candidates take different numbers of parameters ({r.n_params} and {n_params})")
    names = ok[0].param_names or [f"x{i}" for i in range(n_params)]
    ref = _reference_fn(reference, n_params, dtype)
    tdt = TORCH_DTYPES[dtype]
    if exhaustive:
        x = exhaustive_inputs(n_params, dtype).to(dev)
    else:
        n = tests if tests is not None else tests_needed(DEFAULT_EPSILON, d_k)
        x = pool.get(n_params, n, dtype, _domains(domain, names), seed)
    batch = (batch if batch is not None else ProgramBatch.from_results(results)).to(dev)
    got = vm.run(batch, x, dtype)
    want = ref(x)
    want = want.to(tdt) if want.dtype == torch.bool else want
    d_rtol, d_atol = default_tolerances(dtype)
    cmp = compare(got, want, rtol=d_rtol if rtol is None else rtol, atol=d_atol if atol is None else atol,
                  dtype=dtype)
    trivial = trivial_reference(want)
    first = cmp.first_failure.clamp(min=0)
    # the few host reads: per-candidate scalars and each candidate's first failing input, all at once
    fails, abs_e, rel_e, ulp_e = (t.tolist() for t in (cmp.failures, cmp.max_abs_err, cmp.max_rel_err,
                                                        cmp.max_ulp_err))
    cx_inputs = x[:, first].to(torch.float64).T.tolist()
    cx_got = got.gather(1, first[:, None])[:, 0].to(torch.float64).tolist()
    cx_want = want[first].to(torch.float64).tolist()
    n = x.shape[1]
    verdicts = []
    for j, r in enumerate(results):
        if isinstance(r, CompileError):
            verdicts.append(Verdict(False, 0, 0, 1.0, d_k, error=r, dtype=dtype))
            continue
        f = int(fails[j])
        passed = f == 0 and trivial is None
        cx = Counterexample(dict(zip(names, cx_inputs[j])), cx_got[j], cx_want[j]) if f else None
        eps = 0.0 if (passed and exhaustive) else epsilon_bound(n, d_k) if passed else 1.0
        verdicts.append(Verdict(passed, n, f, eps, d_k, cx, float(abs_e[j]), float(rel_e[j]), float(ulp_e[j]),
                                exhaustive=exhaustive and passed, trivial=trivial, dtype=dtype))
    return verdicts
