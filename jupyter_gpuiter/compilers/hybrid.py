"""The hybrid compiler: neural candidates, verified on the device against the traditional compiler.

Per source, in rounds: first the greedy candidate, then `k - 1` samples for the sources still open (in
sub-rounds of at most `ROUND_PAIRS` candidates, so memory stays bounded whatever k is, and sources that
found a program stop sampling). A candidate is run by the batched VM on `tests` random inputs next to
the traditional program (row kernels on rows of CHECK_ROW values); in strict mode it must then also have the traditional program's canonical
text. The first candidate that passes wins; a source with none falls back to the traditional program.
The model never judges validity: an invalid source gets the serial compiler's CompileError (the
traditional compiler's verdict, with serial's columns, which differ for some syntax errors).
`BatchResult.paths` says which path produced each program: "neural", "traditional", "error", or
"serial" where the traditional compiler rejected a source the serial one compiles (its program is then
the reference and the fallback).

Strict mode never returns a program whose semantics differ from the traditional one (it returns the
same canonical text). Without strict, acceptance rests on the random tests alone: the accepted
candidates whose text differs are counted in `stats["accepted_text_differs"]`, the candidates for a
false accept, which the neural benchmark re-checks with many more tests.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from ..ir import Program, ProgramBatch
from ..lang.errors import CompileError
from ..runtime import vm
from ..verification.compare import compare
from ..verification.pools import make_inputs
from .neural import MAX_K, check_k, load_model, sample_candidates
from .result import BatchResult

#: Candidates decoded and checked together at most (unless one per open source is more).
ROUND_PAIRS = 4096
#: Most random tests per candidate: 2^20 passing tests bound the failure rate by ~6.6e-6 at 99.9%
#: confidence; past that, use `verify(..., exhaustive=True)` or strict mode.
MAX_TESTS = 1 << 20
#: Values (programs x tests) one VM call computes at most in check_pairs.
CHECK_VALUES = 1 << 24
#: Row length of check_pairs' inputs when a pair holds a row kernel: long enough that sum, mean, max and
#: min of a row differ, odd so that a row's halves do not pair up. The tests are then rows of this
#: many values (rounded up to whole rows).
CHECK_ROW = 7


def check_pairs(candidates: list[Program], references: list[Program], tests: int, device, seed: int = 0,
                dtype: str = "float32") -> torch.Tensor:
    """Per pair: True where the candidate matches its reference on the same `tests` random inputs.

    VM passes cover at most CHECK_VALUES values each; a reference shared by many pairs runs once a pass.
    Where a candidate or its reference is a row kernel, the inputs are rows of CHECK_ROW values and the
    pass runs row-wise (an elementwise program gives the same values either way); a candidate must then
    also return per row exactly where its reference does.
    """
    if not candidates:
        return torch.zeros(0, dtype=torch.bool)
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates for {len(references)} references")
    n_params = max(max(p.n_params for p in candidates), max(p.n_params for p in references), 1)
    rows = any(p.reduces for p in candidates) or any(p.reduces for p in references)
    n = -(-tests // CHECK_ROW) * CHECK_ROW if rows else tests
    x = make_inputs(n_params, n, dtype=dtype, seed=seed, device=device)
    per = max(1, CHECK_VALUES // n)
    passed = []
    for lo in range(0, len(candidates), per):
        cands, refs = candidates[lo: lo + per], references[lo: lo + per]
        distinct: dict[int, int] = {}
        row = [distinct.setdefault(id(r), len(distinct)) for r in refs]
        unique = list({id(r): r for r in refs}.values())
        row_length = CHECK_ROW if rows else 0
        got = vm.run(ProgramBatch.from_results(cands, device=device), x, dtype, row=row_length)
        expected = vm.run(ProgramBatch.from_results(unique, device=device), x, dtype, row=row_length)
        expected = expected[torch.tensor(row, device=expected.device)]
        same_shape = torch.tensor([c.n_params == r.n_params and c.returns_per_row() == r.returns_per_row()
                                   for c, r in zip(cands, refs)], device=got.device)
        passed.append((compare(got, expected, dtype=dtype).passed & same_shape).cpu())
    return torch.cat(passed)


def check_tests(tests) -> int:
    """tests as an int in 1..MAX_TESTS, else a TypeError or ValueError saying why."""
    if isinstance(tests, bool) or not isinstance(tests, int):
        raise TypeError(f"tests must be an int, got {tests!r}")
    if not 1 <= tests <= MAX_TESTS:
        raise ValueError(f"tests must be between 1 and {MAX_TESTS:,}, got {tests:,}: {MAX_TESTS:,} passing tests "
                         "already bound the failure rate by ~6.6e-6 at 99.9% confidence (use strict mode or "
                         "verify(..., exhaustive=True) for more)")
    return tests


def compile_batch(sources: Sequence[str], device=None, *, k: int = 4, tests: int = 256, strict: bool = True,
                  temperature: float = 0.7, seed: int = 0, model=None, model_path=None,
                  dtype: str = "float32") -> BatchResult:
    """Mode "hybrid" (see the module docstring). 1 <= k <= MAX_K candidates per source at most;
    `model_path`: another checkpoint."""
    from ..runtime.device import resolve
    from .serial import compile_sources
    from .traditional import compile_batch as traditional

    check_k(k, MAX_K)  # before anything is compiled, loaded or allocated
    check_tests(tests)
    device = resolve(device)
    model = model or load_model(model_path, device)
    t0 = time.perf_counter()
    trad = traditional(sources, device=device)
    t_trad = time.perf_counter() - t0
    results = list(trad.results)
    fallback = ["traditional"] * len(results)
    rejected = [i for i, r in enumerate(results) if isinstance(r, CompileError)]
    # The serial compiler states the error of a source the traditional one rejects (the same kind and
    # line, but syntax columns can differ); where it accepts one (a traditional bug), its program is the
    # reference instead.
    changed = False
    for i, r in zip(rejected, compile_sources([sources[i] for i in rejected])):
        e = results[i]
        changed |= isinstance(r, Program) or (r.kind, r.line, r.col) != (e.kind, e.line, e.col)
        results[i] = r
        if isinstance(r, Program):
            fallback[i] = "serial"
    paths = ["neural" if isinstance(r, Program) else "error" for r in results]
    open_ = [i for i, r in enumerate(results) if isinstance(r, Program)]
    stats = {"candidates": 0, "decoded": 0, "passed_tests": 0, "accepted": 0, "accepted_text_differs": 0,
             "winning_candidate": [-1] * len(sources)}
    seconds = {"traditional": t_trad, "serial": time.perf_counter() - t0 - t_trad, "neural": 0.0, "verify": 0.0}
    generator = torch.Generator(device=next(model.parameters()).device).manual_seed(seed)
    offset = 0  # candidates tried per source in earlier rounds
    while offset < k and open_:
        if offset == 0:
            round_k, temp = 1, 0.0
        else:
            round_k, temp = min(k - offset, max(1, ROUND_PAIRS // len(open_))), temperature
        t1 = time.perf_counter()
        cands = sample_candidates([sources[i] for i in open_], k=round_k, temperature=temp, model=model,
                                  generator=generator)
        t2 = time.perf_counter()
        pairs = [(i, j, p) for i, progs in zip(open_, cands.programs) for j, p in enumerate(progs)
                 if isinstance(p, Program)]
        stats["candidates"] += round_k * len(open_)
        stats["decoded"] += len(pairs)
        ok = check_pairs([p for _, _, p in pairs], [results[i] for i, _, _ in pairs], tests, device,
                         seed=seed, dtype=dtype).tolist()
        seconds["neural"] += t2 - t1
        seconds["verify"] += time.perf_counter() - t2
        stats["passed_tests"] += sum(ok)
        won = set()
        for (i, j, p), passed in zip(pairs, ok):
            if i in won or not passed:
                continue
            same = p.text() == results[i].text()
            if strict and not same:
                continue
            won.add(i)
            stats["accepted_text_differs"] += not same
            stats["winning_candidate"][i] = offset + j
            p.param_names, p.name = results[i].param_names, results[i].name
            results[i] = p
        stats["accepted"] += len(won)
        open_ = [i for i in open_ if i not in won]
        offset += round_k
    for i in open_:
        paths[i] = fallback[i]
    seconds["total"] = time.perf_counter() - t0
    # Strict results have the traditional text, so the traditional device batch is theirs, unless the
    # serial compiler restated an error (its columns are in the batch).
    batch = trad.batch if strict and not changed else ProgramBatch.from_results(results, device=device)
    return BatchResult(results, "hybrid", batch=batch, timings=seconds, paths=paths, stats=stats)


__all__ = ["CHECK_ROW", "CHECK_VALUES", "MAX_TESTS", "ROUND_PAIRS", "check_pairs", "check_tests", "compile_batch"]
