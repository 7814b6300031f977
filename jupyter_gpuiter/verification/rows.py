"""Row kernels on pools of rows (docs/verification.md, "Row kernels").

A test is one row. `tests` rows are split equally over the row lengths (pools.split_rows); each length's
rows come from the InputPool as one tensor [P, R*n] (rows consecutive, pools.make_rows), and the
reference's outputs on them from ReferenceOutputs.get_rows (per element, a per-row value repeated along
its row). Candidates run length by length, shortest first, each stopping at its first failing length (and
inside one at its first failing tile); the counts are rows: failures are failing rows, the bound counts
rows. A row fails when any of its compared values does. Elementwise candidates run per element of the rows.

The evaluators: the fused evaluator with `row=n` on a CPU (runtime/fused.py); on CUDA the fused CUDA kernel
(with CuPy, for programs within its register cap), else the torch VM with `row=n`. A counterexample is the first failing row, shrunk on the host when first read
(shrink.shrink_row): shorter, simpler, still failing where the reference is defined, inside the domain; the
candidate is evaluated there by the reference evaluator in the kernel dtype.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from ..ir import Program, ProgramBatch
from ..lang.errors import CompileError
from ..runtime import fused, fused_cuda, vm
from ..runtime.reference import evaluate as host_evaluate
from . import api
from .compare import compare
from .confidence import as_count, epsilon_bound, tests_needed
from .pools import as_row_lengths, domain_edges, split_rows
from .shrink import shrink_row
from .verdict import Counterexample, Verdict


def _kind(per_row: bool) -> str:
    return "one value per row" if per_row else "one value per element"


def verify_rows(results: list, ref: api.Reference, pool, *, names: list[str], domains: list, dtype: str, tests,
                delta: float, seed: int, rtol: float, atol: float, batch: ProgramBatch | None,
                outputs: api.ReferenceOutputs | None, progress, compiler: list, row_lengths, t0: float) -> list[Verdict]:
    """verify_programs for row kernels (its options already checked; `delta` is each candidate's share)."""
    lengths = as_row_lengths(row_lengths)
    n_params = ref.n_params
    if n_params == 0:
        raise ValueError("a row kernel is checked on rows of its parameters, and this one takes none: give it a "
                         "parameter (or, for an elementwise kernel, leave row_lengths unset)")
    total = as_count("tests", tests, minimum=1) if tests is not None else tests_needed(api.DEFAULT_EPSILON, delta)
    counts = split_rows(total, lengths)
    elements = sum(r * n for r, n in zip(counts, lengths))
    item = torch.empty((), dtype=api.TORCH_DTYPES[dtype]).element_size()
    register = np.dtype(fused.REGISTER_DTYPE[dtype]).itemsize
    need = elements * (n_params * item + register)
    # and the evaluator's registers: a tile holds whole rows, so each thread keeps (instructions + 1) registers of
    # the longest row (of a tile, for short ones)
    programs = [r for r in results if isinstance(r, Program)] + ([ref.program] if ref.program is not None else [])
    longest = max((len(p.ops) for p in programs), default=1)
    need += (longest + 1) * max(max(lengths), fused.TILE) * register * fused.threads()
    if need > pool.max_bytes:
        raise ValueError(f"N too large for memory: {total:,} rows of lengths {', '.join(map(str, lengths))} are "
                         f"{elements:,} elements, whose inputs, reference outputs and evaluator registers "
                         f"({longest} instructions) need {need:,} bytes, budget {pool.max_bytes:,} bytes; use fewer "
                         "tests (rows) or shorter row_lengths")
    groups = [(n, pool.get_rows(n_params, r, n, dtype, domains, seed)) for n, r in zip(lengths, counts) if r]
    outs, trivial = (outputs if outputs is not None else api.ReferenceOutputs()).get_rows(ref, groups, dtype, rtol, atol)
    t_setup = time.perf_counter()

    reasons: dict[int, str] = {}
    for j, r in enumerate(results):
        if isinstance(r, Program) and outs.per_row is not None and r.returns_per_row() != outs.per_row:
            reasons[j] = (f"the candidate returns {_kind(r.returns_per_row())} but the reference returns "
                          f"{_kind(outs.per_row)}")
    run = [j for j, r in enumerate(results) if isinstance(r, Program) and j not in reasons]
    position = {j: i for i, j in enumerate(run)}
    if run:
        arrays = (fused.ProgramArrays.from_batch(batch) if batch is not None else
                  fused.ProgramArrays.from_programs(results)).select(np.array(run))
        cmp = _compare_groups([results[j] for j in run], arrays, groups, outs.wants, dtype, rtol, atol, progress)
    t_run = time.perf_counter()
    timings = {"setup": t_setup - t0, "execute_and_compare": t_run - t_setup}
    bound = epsilon_bound(total, delta)
    verdicts = []
    common = {"dtype": dtype, "row_lengths": lengths}
    for j, r in enumerate(results):
        if isinstance(r, CompileError):
            verdicts.append(Verdict(False, 0, 0, 1.0, delta, error=r, compiler=compiler[j], **common))
            continue
        if j in reasons:
            verdicts.append(Verdict(False, 0, 0, 1.0, delta, reason=reasons[j], trivial=trivial, compiler=compiler[j],
                                    timings=dict(timings), **common))
            continue
        i = position[j]
        f = int(cmp.failures[i])
        passed = f == 0 and trivial is None
        cx = None
        if f:
            g, row = int(cmp.first_group[i]), int(cmp.first_row[i])
            n, x = groups[g]
            start = _host_rows(x[:, row * n:(row + 1) * n], dtype)
            cx = _LazyRowCounterexample(r, ref, start, row, names, dtype, rtol, atol, domains)
        verdicts.append(Verdict(passed, int(cmp.evaluated[i]), f, bound if passed else 1.0, delta, cx,
                                float(cmp.max_abs_err[i]), float(cmp.max_rel_err[i]), float(cmp.max_ulp_err[i]),
                                trivial=trivial, timings=dict(timings), compiler=compiler[j], **common))
    return verdicts


def _host_rows(x: torch.Tensor, dtype: str) -> list[np.ndarray]:
    """One row per parameter from inputs [P, n]: float64 copies holding the kernel dtype's values."""
    return list(api._host_inputs(x, dtype).astype(np.float64))


# --- running candidates on the rows ---------------------------------------------------------------------------

class RowCounts:
    """Per candidate, merged over the lengths (each pass covering the candidates still running): failing
    rows, rows evaluated, the first failing row as (length index, row index), max abs / rel / ULP error."""

    def __init__(self, b: int):
        self.failures, self.evaluated = np.zeros(b, dtype=np.int64), np.zeros(b, dtype=np.int64)
        self.first_group = np.full(b, -1, dtype=np.int64)
        self.first_row = np.full(b, -1, dtype=np.int64)
        self.max_abs_err, self.max_rel_err, self.max_ulp_err = (np.zeros(b) for _ in range(3))

    def add(self, which: np.ndarray, part: fused.Comparison, group: int, row0: int = 0) -> np.ndarray:
        """Merge one pass (rows counted from row0 of length `group`) for candidates `which`; those still
        without a failure."""
        self.failures[which] += part.failures
        self.evaluated[which] += part.evaluated
        for name in ("max_abs_err", "max_rel_err", "max_ulp_err"):
            getattr(self, name)[which] = np.maximum(getattr(self, name)[which], getattr(part, name))
        failed = part.first_failure >= 0
        self.first_group[which[failed]] = group
        self.first_row[which[failed]] = part.first_failure[failed] + row0
        return which[~failed]


def _compare_groups(programs: list[Program], arrays: fused.ProgramArrays, groups, wants, dtype, rtol, atol,
                    progress) -> RowCounts:
    """Every candidate over the lengths in order, a candidate stopping at its first failing length."""
    distinct, copies = arrays.unique()
    firsts = np.arange(len(programs)) if copies is None else np.unique(copies, return_index=True)[1]
    progs = [programs[i] for i in firsts]
    counts = RowCounts(len(distinct))
    running = np.arange(len(distinct))
    total = sum(x.shape[1] // n for n, x in groups)
    done = 0
    for g, ((n, x), want) in enumerate(zip(groups, wants)):
        sub = distinct if len(running) == len(distinct) else distinct.select(running)
        running = _compare_group([progs[i] for i in running], sub, running, counts, g, n, x, want, dtype, rtol, atol)
        done += x.shape[1] // n
        if progress is not None and len(programs) == 1:
            progress(done, total)
        if not len(running):
            break
    if copies is None:
        return counts
    out = RowCounts(len(programs))
    for name in vars(out):
        setattr(out, name, getattr(counts, name)[copies])
    return out


def _compare_group(programs, arrays, which, counts: RowCounts, g: int, n: int, x: torch.Tensor, want, dtype, rtol,
                   atol) -> np.ndarray:
    """One length's rows for the candidates `which` (programs/arrays in that order), a block of rows at a time
    (whole rows of about api.BLOCK inputs for the fused evaluators, api.TORCH_ELEMENTS outputs for the torch VM
    and the host): the fused evaluators run the candidates still running, the VM all of them (its batch is built
    once) with the finished ones' results dropped; returns those still running after the length."""
    if x.device.type in api.FUSED_DEVICES:
        path, budget = "fused", api.BLOCK
    elif x.device.type == "cuda" and fused_cuda.available() and max(len(p) for p in programs) <= fused_cuda.MAX_REGS:
        path, budget = "cuda", api.BLOCK
    else:
        path, budget = "vm", api.TORCH_ELEMENTS // max(1, len(programs))
    r = x.shape[1] // n
    step = max(1, budget // n)  # rows per block
    batch = ProgramBatch.from_results(programs).to(x.device) if path == "vm" else None
    running = which
    alive = np.arange(len(programs))  # positions in `programs` of the candidates still running
    for lo in range(0, r, step):
        hi = min(r, lo + step)
        part_x = x[:, lo * n:hi * n]
        part_want = want[lo * n:hi * n]
        sub = arrays if len(alive) == len(programs) else arrays.select(alive)
        if path == "fused":
            xs = fused.as_registers(api._host_inputs(part_x, dtype), dtype)
            part = fused.compare(sub, xs, part_want, dtype, rtol, atol, row=n)
        elif path == "cuda":
            part = fused_cuda.compare(sub, part_x, part_want, dtype, rtol, atol, row=n)
        else:
            got = vm.run(batch, part_x, dtype, row=n)[torch.as_tensor(alive, device=x.device)]
            part = _row_comparison(got, torch.from_numpy(part_want).to(got.device), n, dtype, rtol, atol)
        still = counts.add(running, part, g, lo)
        alive = alive[np.isin(running, still)]
        running = still
        if not len(running):
            break
    return running


def _host_eval(program: Program, rows: list[np.ndarray], dtype: str) -> np.ndarray:
    """A program on rows [R, n] (one array per parameter) by the reference evaluator in the kernel dtype
    (NumPy has no bfloat16: there the fused evaluator): [R, n], a per-row result repeated along its row;
    float64."""
    r, n = rows[0].shape
    if dtype == "bfloat16":
        xs = np.stack([a.reshape(-1) for a in rows])
        out = fused.evaluate(fused.ProgramArrays.from_programs([program]), fused.as_registers(xs, dtype), dtype, row=n)
        return out[0].astype(np.float64).reshape(r, n)
    out = host_evaluate(program, [a.astype(dtype) for a in rows], dtype).astype(np.float64)
    return np.repeat(out[:, None], n, axis=1) if out.ndim == 1 else out


def _row_comparison(got: torch.Tensor, want: torch.Tensor, n: int, dtype: str, rtol: float, atol: float
                    ) -> fused.Comparison:
    """compare.py's comparison of outputs [B, R*n] counted in rows: a row fails when any of its values does."""
    c = compare(got, want, rtol=rtol, atol=atol, dtype=dtype)
    b = c.ok.shape[0]
    bad = (~c.ok).reshape(b, -1, n).any(dim=2)
    r = bad.shape[1]
    first = torch.where(bad.any(dim=1), bad.to(torch.int8).argmax(dim=1), torch.full((b,), -1, device=bad.device))
    return fused.Comparison(bad.sum(dim=1).cpu().numpy(), first.cpu().numpy(), c.max_abs_err.cpu().numpy(),
                            c.max_rel_err.cpu().numpy(), c.max_ulp_err.cpu().numpy(), np.full(b, r, dtype=np.int64))


# --- counterexamples ----------------------------------------------------------------------------------------

class _LazyRowCounterexample:
    """Shrinks when first read (Verdict.counterexample), so a batch pays only for what is looked at."""

    def __init__(self, *args):
        self.args = args
        self._value: Counterexample | None = None

    def resolve(self) -> Counterexample:
        if self._value is None:
            self._value = row_counterexample(*self.args)
            self.args = None
        return self._value


def row_counterexample(program: Program, ref: api.Reference, start: list[np.ndarray], row_index: int,
                       names: list[str], dtype: str, rtol: float, atol: float, domains: list) -> Counterexample:
    """The failing row `start` (one row per parameter) shrunk on the host toward shorter rows and simpler
    values inside the domain, through rows that fail there where the reference is defined (not raising, and
    not nan at the failing values unless every failing value of `start` was); the candidate evaluated by the
    reference evaluator in the kernel dtype, the reference as the verification ran it (a program on the fused
    evaluator)."""
    tdt = api.TORCH_DTYPES[dtype]

    def run(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray | None]:
        """[T, L] candidate outputs and reference outputs (None: the reference refused) on T rows."""
        got = _host_eval(program, rows, dtype)
        try:
            want, _ = ref.rows(rows, fused_rows=True)
        except Exception:  # noqa: BLE001 - a reference refusing some rows: those rows are no counterexamples
            return got, None
        want = api._round_to(want, dtype).astype(np.float64)
        return got, np.repeat(want[:, None], got.shape[1], axis=1) if want.ndim == 1 else want

    def bad_values(rows: list[np.ndarray], nan_ok: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        got, want = run(rows)
        if want is None:
            return np.zeros(got.shape, dtype=bool), got, None
        return api._failing(got, want, rtol, atol) & (~np.isnan(want) | nan_ok), got, want

    def failing(trials: list[list[list[float]]], nan_ok: bool) -> list[bool]:
        out = [False] * len(trials)
        by_length: dict[int, list[int]] = {}
        for t, trial in enumerate(trials):
            by_length.setdefault(len(trial[0]), []).append(t)
        for idx in by_length.values():
            rows = [np.array([trials[t][p] for t in idx], dtype=np.float64) for p in range(len(names))]
            bad, _, want = bad_values(rows, nan_ok)
            if want is None and len(idx) > 1:  # one row may make the reference raise: ask row by row
                for t in idx:
                    out[t] = failing([trials[t]], nan_ok)[0]
                continue
            for k, t in enumerate(idx):
                out[t] = bool(bad[k].any())
        return out

    def representable(v: float) -> float:
        return api._representable(v, tdt)

    bounds = [domain_edges(d, dtype) if d is not None else (-math.inf, math.inf) for d in domains]
    first = [[float(v) for v in r] for r in start]
    best = shrink_row(first, lambda t: failing(t, False), bounds=bounds, representable=representable)
    if best == first and not failing([first], False)[0]:  # fails only where the reference is nan
        best = shrink_row(first, lambda t: failing(t, True), bounds=bounds, representable=representable)
    rows = [np.array([r], dtype=np.float64) for r in best]
    bad, got, want = bad_values(rows, True)
    per_row = program.returns_per_row()
    inputs = {name: np.array(r, dtype=np.float64) for name, r in zip(names, best)}
    got, bad = got[0], bad[0]
    want = np.full(got.shape, np.nan) if want is None else want[0]
    common = {"row_index": row_index, "found_length": len(start[0])}
    if per_row:
        return Counterexample(inputs, float(got[0]), float(want[0]), **common)
    if bad.any():
        at = int(bad.argmax())
    else:  # the host agrees with the reference here (the device did not): show where they differ most
        with np.errstate(invalid="ignore"):
            at = int(np.nan_to_num(np.abs(got - want), nan=np.inf).argmax())
    return Counterexample(inputs, float(got[at]), float(want[at]), position=at, got_row=got, expected_row=want,
                          **common)


__all__ = ["RowCounts", "row_counterexample", "verify_rows"]
