"""The hybrid compiler: neural candidates, verified on the device against the traditional compiler.

Per source, in rounds: first the greedy candidate, then `k - 1` samples for the sources still open.
A candidate is run by the batched VM on `tests` random inputs next to the traditional program; in
strict mode it must then also have the traditional program's canonical text. The first candidate
that passes wins; a source with none falls back to the traditional program; an invalid source gets
the traditional compiler's CompileError. `BatchResult.paths` says which path produced each program.

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
from ..runtime import vm
from ..verify.compare import compare
from ..verify.pools import make_inputs
from .neural import load_model, sample_candidates
from .result import BatchResult


def check_pairs(candidates: list[Program], references: list[Program], tests: int, device, seed: int = 0,
                dtype: str = "float32") -> torch.Tensor:
    """Per pair: True where the candidate matches its reference on the same `tests` random inputs
    (one VM pass for all candidates, one for all references)."""
    if not candidates:
        return torch.zeros(0, dtype=torch.bool)
    n_params = max(max(p.n_params for p in candidates), max(p.n_params for p in references), 1)
    x = make_inputs(n_params, tests, dtype=dtype, seed=seed, device=device)
    got = vm.run(ProgramBatch.from_results(candidates, device=device), x, dtype)
    expected = vm.run(ProgramBatch.from_results(references, device=device), x, dtype)
    same_arity = torch.tensor([c.n_params == r.n_params for c, r in zip(candidates, references)], device=device)
    return (compare(got, expected, dtype=dtype).passed & same_arity).cpu()


def compile_batch(sources: Sequence[str], device=None, *, k: int = 4, tests: int = 256, strict: bool = True,
                  temperature: float = 0.7, seed: int = 0, model=None, model_path=None,
                  dtype: str = "float32") -> BatchResult:
    """Mode "hybrid" (see the module docstring). k >= 1 candidates per source at most; `model_path`:
    another checkpoint."""
    from ..runtime.device import resolve
    from .traditional import compile_batch as traditional

    if k < 1 or tests < 1:
        raise ValueError(f"hybrid needs k >= 1 and tests >= 1, got k={k}, tests={tests}")
    device = resolve(device)
    t0 = time.perf_counter()
    trad = traditional(sources, device=device)
    t_trad = time.perf_counter() - t0
    model = model or load_model(model_path, device)
    results = list(trad.results)
    paths = ["neural" if isinstance(r, Program) else "error" for r in results]
    open_ = [i for i, r in enumerate(results) if isinstance(r, Program)]
    stats = {"candidates": 0, "decoded": 0, "passed_tests": 0, "accepted": 0, "accepted_text_differs": 0,
             "winning_candidate": [-1] * len(sources)}
    seconds = {"traditional": t_trad, "neural": 0.0, "verify": 0.0}
    offset = 0  # candidates tried per source in earlier rounds
    for round_k, temp in ((1, 0.0), (k - 1, temperature)):
        if round_k == 0 or not open_:
            continue
        t1 = time.perf_counter()
        cands = sample_candidates([sources[i] for i in open_], k=round_k, temperature=temp, seed=seed,
                                  model=model)
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
        paths[i] = "traditional"
    seconds["total"] = time.perf_counter() - t0
    # Strict results have the traditional text, so the traditional device batch is theirs too.
    batch = trad.batch if strict else ProgramBatch.from_results(results, device=device)
    return BatchResult(results, "hybrid", batch=batch, timings=seconds, paths=paths, stats=stats)


__all__ = ["check_pairs", "compile_batch"]
