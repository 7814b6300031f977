"""Two checkouts' traditional compilers side by side in one process: the same outputs, and which is faster.

    git worktree add --detach /tmp/base <commit>
    python scripts/ab-compile.py /tmp/base . [--n 4096] [--threads 2] [--repeats 5] [--no-cr]
                                            [--statements MIN MAX] [--max-nodes N] [--plain]

Both packages are imported under aliases (the compiler's modules import each other relatively), so they
run alternately in one process on the same machine state. First every output of compile_batch is
compared on n generated and n/2 mutated programs (batch tensors, NaN-aware immediates, messages,
canonical text); then compile_to_batches of the n generated programs is timed, alternating, with the
median whole time and per-pass times of each side. How each compiler change of docs/performance.md
was checked and measured.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import statistics
import sys
import tempfile
import time

import torch


def load(tree: str, alias: str, links: str):
    os.symlink(os.path.join(os.path.abspath(tree), "jupyter_gpuiter"), os.path.join(links, alias))
    return importlib.import_module(f"{alias}.compilers.traditional"), importlib.import_module(f"{alias}.lang.generate")


def same_outputs(ra, rb) -> list[str]:
    ba, bb = ra.batch, rb.batch
    diffs = [f for f in ("ops", "args", "lengths", "n_params", "error") if not torch.equal(getattr(ba, f), getattr(bb, f))]
    if not (torch.equal(ba.imm.isnan(), bb.imm.isnan()) and torch.equal(ba.imm.nan_to_num(0), bb.imm.nan_to_num(0))):
        diffs.append("imm")
    if ba.messages != bb.messages:
        diffs.append("messages")
    if ra.canonical() != rb.canonical():
        diffs.append("canonical text")
    return diffs


def main() -> None:
    # both in this process (worker processes run the same passes, one thread each: `--threads 1`)
    os.environ["GPUITER_COMPILE_WORKERS"] = "1"
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-cr", action="store_true", help="line ends as LF only (the generator writes CRLF or CR in some)")
    ap.add_argument("--statements", type=int, nargs=2, metavar=("MIN", "MAX"),
                    help="statements a program (the generator's `statements` knob)")
    ap.add_argument("--max-nodes", type=int, help="nodes an expression at most (the generator's `max_nodes` knob)")
    ap.add_argument("--plain", action="store_true",
                    help="only generated programs with no CR and no literal past Clinger's fast path, as most "
                         "hand-written ones (no exponent, no 17 digits, points and underscores in a row)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    links = tempfile.mkdtemp(prefix="ab-compile-")
    sys.path.insert(0, links)
    base, generate = load(args.base, "gi_base", links)
    new, _ = load(args.new, "gi_new", links)
    knobs = {k: v for k, v in (("statements", tuple(args.statements or ())), ("max_nodes", args.max_nodes)) if v}
    sources = generate.generate_batch(args.n, 0, **knobs)
    seed, plain = 0, re.compile(r"\r|[0-9.][eE]|[0-9._]{17}")
    while args.plain and len(sources := [s for s in sources if not plain.search(s)]) < args.n:
        seed += 1
        if seed > 100:
            ap.error(f"--plain: 100 generated batches held only {len(sources)} plain programs")
        sources += generate.generate_batch(args.n, seed, **knobs)
    sources = sources[: args.n]
    if args.no_cr:
        sources = [s.replace("\r\n", "\n").replace("\r", "\n") for s in sources]
    sources += [m for m, _ in generate.mutate_batch(sources[: args.n // 2], 1)]
    diffs = same_outputs(base.compile_batch(sources), new.compile_batch(sources))
    print(f"outputs {'EQUAL' if not diffs else 'DIFFERENT: ' + ', '.join(diffs)} on {len(sources)} programs")
    timed = sources[: args.n]
    whole: dict[str, list[float]] = {"base": [], "new": []}
    passes: dict[str, dict[str, list[float]]] = {"base": {}, "new": {}}
    for _ in range(args.repeats):
        for side, compiler in (("base", base), ("new", new)):
            t0 = time.perf_counter()
            compiler.compile_to_batches(timed, "cpu")
            whole[side].append(time.perf_counter() - t0)
            split: dict[str, float] = {}
            compiler.compile_to_batches(timed, "cpu", timings=split)
            for k, v in split.items():
                passes[side].setdefault(k, []).append(v)
    for side, times in whole.items():
        print(f"{side:5s} whole {statistics.median(times) * 1e3:7.1f} ms  "
              + " ".join(f"{k} {statistics.median(v) * 1e3:.1f}" for k, v in passes[side].items()))
    if diffs:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
