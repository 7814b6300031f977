"""`gpuiter bench loop`: the candidate loop of an AI code generator, and one edit, against the obvious baseline.

The batch loop: `candidates` rewrites of a two-argument kernel (three in four correct: the same function with
a distinct comment and an equivalent spelling; one in four wrong: a constant off by 1%), each a distinct
program (another constant moves by a few 1e-12 relative, below float32's resolution, so no two candidates
compile to the same program and none is evaluated once for many), each checked on the
same `tests` inputs against a float64 NumPy reference with rtol 1e-4 / atol 1e-5. Every round uses fresh
sources (a salt in the comments), so no compiled-program cache serves a round. Measured side by side, in
rounds:

- gpuiter: `Session.verify_batch(sources, reference, ...)`, compile (mode auto) + fused evaluate-and-compare;
- torch eager: per candidate `exec` of its torch translation, run on the inputs, `torch.allclose` against the
  float64 reference outputs (computed once);
- the torch-op path gpuiter had before the fused evaluator: compile + the batched VM + compare.py;
- numba.vectorize per candidate (a JIT compile each; timed on a few candidates, reported per candidate).

One edit: `Session.verify(edited_source, reference, ...)` against exec + run + allclose of the same edit.
All must agree on which candidates pass.
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np
import torch

from ...compilers import compile_batch
from ...runtime import vm
from ...runtime.device import resolve
from ...session import Session
from ...verification.compare import compare
from ...verification.confidence import tests_needed
from .common import alternating, machine, write_json

RTOL, ATOL = 1e-4, 1e-5
DOMAIN = {"x": (-4.0, 4.0), "y": (-4.0, 4.0)}
# a two-argument kernel of 26 instructions; {c} is the constant a wrong rewrite changes
TEMPLATE = """def blend(x, y):
    # rewrite {salt}
    d = x - y
    s = 1.0 / (1.0 + exp(-d))
    h = where(abs(d) < 1.0, 0.5 * d * d, abs(d) - 0.5)
    return s * h + {c} * tanh(x * y) - {k} * y * y
"""
BASE_C = 0.1
SPELLINGS = ("0.1", "0.10", "1e-1", "0.100")  # equivalent spellings of the correct constant


def reference(x, y):
    """The kernel in NumPy float64."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    d = x - y
    s = 1.0 / (1.0 + np.exp(-d))
    h = np.where(np.abs(d) < 1.0, 0.5 * d * d, np.abs(d) - 0.5)
    return s * h + BASE_C * np.tanh(x * y) - 0.01 * y * y


def candidates(n: int, salt: str) -> tuple[list[str], list[bool]]:
    """n rewrites and whether each is correct (one in four is wrong)."""
    sources, correct = [], []
    for i in range(n):
        good = i % 4 != 3
        c = SPELLINGS[i % len(SPELLINGS)] if good else repr(BASE_C * 1.01)
        sources.append(TEMPLATE.format(salt=f"{salt}-{i}", c=c, k=repr(0.01 * (1 + (i + 1) * 1e-12))))
        correct.append(good)
    return sources, correct


_TORCH_NAMES = {"exp": torch.exp, "tanh": torch.tanh, "abs": torch.abs, "where": torch.where}


def eager_check(source: str, xs: list[torch.Tensor], want: torch.Tensor) -> bool:
    """The baseline: exec the candidate as a torch function, run it, allclose against the float64 reference."""
    namespace = dict(_TORCH_NAMES)
    exec(source, namespace)  # noqa: S102 - the benchmark's own generated sources
    got = namespace["blend"](*xs)
    return bool(torch.allclose(got.double(), want, rtol=RTOL, atol=ATOL, equal_nan=True))


def torch_op_path(sources: list[str], x: torch.Tensor, want: torch.Tensor, device) -> list[bool]:
    """The path before the fused evaluator: compile, batched VM over [candidates x tests], compare.py."""
    compiled = compile_batch(sources, mode="auto", device=device)
    got = vm.run(compiled.batch.to(device), x, "float32")
    return (compare(got, want.to(torch.float32), rtol=RTOL, atol=ATOL, dtype="float32").failures == 0).tolist()


def numba_check(source: str, xs: list[np.ndarray], want: np.ndarray) -> bool:
    """numba.vectorize of the candidate (scalar Python on math), run, allclose."""
    import numba

    py = (source.replace("exp(", "math.exp(").replace("tanh(", "math.tanh(")
          .replace("where(abs(d) < 1.0, 0.5 * d * d, abs(d) - 0.5)", "(0.5 * d * d if abs(d) < 1.0 else abs(d) - 0.5)"))
    namespace = {"math": math}
    exec(py, namespace)  # noqa: S102 - the benchmark's own generated sources
    fn = numba.vectorize(["float32(float32, float32)"])(namespace["blend"])
    return bool(np.allclose(fn(*xs).astype(np.float64), want, rtol=RTOL, atol=ATOL, equal_nan=True))


def run(device=None, n_candidates: int = 1000, tests: int | None = None, repeats: int = 5, edits: int = 200,
        numba_candidates: int = 5, json_path: str | None = None) -> dict:
    dev = resolve(device)
    n = tests or tests_needed(1e-3, 1e-3)
    sess = Session(dev)
    options = {"tests": n, "domain": DOMAIN, "rtol": RTOL, "atol": ATOL}
    # the same inputs for everyone: the Session's pool
    warm_sources, correct = candidates(n_candidates, "warm")
    sess.verify_batch(warm_sources, reference, **options)
    x = sess.pool.get(2, n, "float32", [sess_domain(DOMAIN, "x"), sess_domain(DOMAIN, "y")], 0)
    xs = [x[0], x[1]]
    want = torch.as_tensor(reference(x[0].double().cpu().numpy(), x[1].double().cpu().numpy()), device=dev)
    rounds = iter(range(10**9))

    splits: dict[str, list[dict]] = {"batch": [], "edit": []}  # gpuiter's time per phase (the Session's iterations)

    def gpuiter_batch():
        sources, _ = candidates(n_candidates, f"batch-{next(rounds)}")
        passed = [v.passed for v in sess.verify_batch(sources, reference, **options)]
        splits["batch"].append(sess.history[-1].seconds)
        return passed

    def eager_batch():
        sources, _ = candidates(n_candidates, "eager")
        return [eager_check(s, xs, want) for s in sources]

    def torch_ops_batch():
        sources, _ = candidates(n_candidates, f"ops-{next(rounds)}")
        return torch_op_path(sources, x, want, dev)

    # gpuiter and the eager loop in alternating rounds; the torch-op VM path in a block of its own after them:
    # its multi-threaded torch ops leave OpenMP threads spinning for a while, which would tax whichever
    # path ran next (gpuiter's threads and compile workers), not the eager loop's single-threaded small ops;
    # so it runs last, after the edits too
    batch = alternating({"gpuiter": gpuiter_batch, "torch_eager": eager_batch}, repeats)
    for name, (_, _, passed) in batch.items():
        if list(passed) != correct:
            raise AssertionError(f"bench loop: {name} disagrees with the expected verdicts")
    edit_sources, edit_correct = candidates(edits * repeats + 8, "edit")
    edit_iter = iter(zip(edit_sources, edit_correct))

    def gpuiter_edit():
        source, good = next(edit_iter)
        assert sess.verify(source, reference, **options).passed == good
        splits["edit"].append(sess.history[-1].seconds)
        return good

    def eager_edit():
        source, good = next(edit_iter)
        assert eager_check(source, xs, want) == good
        return good

    for _ in range(3):
        gpuiter_edit(), eager_edit()
    edit = alternating({"gpuiter": gpuiter_edit, "torch_eager": eager_edit}, edits * repeats // 2)
    torch_ops_batch()  # its warm-up
    batch.update(alternating({"torch_op_vm": torch_ops_batch}, max(1, repeats // 2)))
    if list(batch["torch_op_vm"][2]) != correct:
        raise AssertionError("bench loop: torch_op_vm disagrees with the expected verdicts")
    numba_s = None
    try:
        import numba  # noqa: F401

        xs_np = [t.cpu().numpy() for t in xs]
        want_np = want.cpu().numpy()
        sources, good = candidates(numba_candidates, "numba")
        t0 = time.perf_counter()
        for s, g in zip(sources, good):
            assert numba_check(s, xs_np, want_np) == g
        numba_s = (time.perf_counter() - t0) / numba_candidates
    except ImportError:
        pass
    rate = {k: n_candidates / v[0] for k, v in batch.items()}
    report = {"suite": "loop", "machine": machine(dev), "candidates": n_candidates, "tests": n,
              "kernel": TEMPLATE, "rtol": RTOL, "atol": ATOL,
              "batch_seconds": {k: v[0] for k, v in batch.items()},
              "candidates_per_s": {**rate, **({"numba_vectorize": 1 / numba_s} if numba_s else {})},
              "ratio_gpuiter_vs_torch_eager": rate["gpuiter"] / rate["torch_eager"],
              "ratio_gpuiter_vs_torch_op_vm": rate["gpuiter"] / rate["torch_op_vm"],
              "edit_ms": {k: v[0] * 1e3 for k, v in edit.items()},
              "edit_ratio_gpuiter_vs_torch_eager": edit["gpuiter"][0] / edit["torch_eager"][0],
              "gpuiter_phase_ms": {what: {phase: 1e3 * statistics.median(t[phase] for t in times) for phase in times[-1]}
                                   for what, times in splits.items()}}
    print(f"gpuiter bench loop: {n_candidates:,} candidates x {n:,} tests of a two-argument kernel, device {dev}")
    for k, r in report["candidates_per_s"].items():
        print(f"  {k:16s} {r:12,.0f} candidates/s")
    print(f"  gpuiter is {report['ratio_gpuiter_vs_torch_eager']:.2f}x the torch-eager loop, "
          f"{report['ratio_gpuiter_vs_torch_op_vm']:.2f}x the torch-op VM path")
    print(f"  one edit: gpuiter {report['edit_ms']['gpuiter']:.3f} ms, torch eager "
          f"{report['edit_ms']['torch_eager']:.3f} ms ({report['edit_ratio_gpuiter_vs_torch_eager']:.2f}x its time)")
    for what, phases in report["gpuiter_phase_ms"].items():
        print(f"  gpuiter's {what} by phase (median ms): " + ", ".join(f"{k} {v:.3f}" for k, v in phases.items()))
    if json_path:
        print(f"  wrote {write_json(report, json_path)}")
    return report


def sess_domain(domain: dict, name: str):
    from ...verification.pools import as_domain

    return as_domain(domain[name])
