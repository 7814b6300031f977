"""`gpuiter bench ab`: this checkout's traditional compiler against another checkout's, side by side: the same
outputs, and which is faster.

    git worktree add --detach /tmp/base <commit>
    gpuiter bench ab /tmp/base [--n 4096] [--threads 2] [--repeats 5] [--no-cr] [--statements MIN MAX]
                               [--max-nodes N] [--plain]

Each checkout's compiler runs in a process of its own (its tree first on the path), both started here
and called in turn, so that they run alternately on the same machine state; the batches are generated
here. First every output of compile_batch is compared on n generated and n/2 mutated programs (batch
tensors, NaN-aware immediates, messages, canonical text); then compile_to_batches of the n generated
programs is timed in alternating rounds, with the median whole time and per-pass times of each side.
How each compiler change of docs/performance.md was checked and measured. The passes run in the sides'
own processes (worker processes run the same passes, one thread each: `--threads 1`).
"""

from __future__ import annotations

import os
import pickle
import re
import statistics
import subprocess
import sys
from pathlib import Path

from ...generate import generate_batch, mutate_batch
from .common import alternating, tool_parser

#: what a side runs: requests (a pickled (what, sources) each) on stdin, replies on the stdout it started
#: with; anything the compiler prints goes to stderr
SIDE = r"""
import os, pickle, sys, time
out = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
os.environ["GPUITER_COMPILE_WORKERS"] = "1"
import numpy as np
import torch
torch.set_num_threads(int(sys.argv[1]))
from jupyter_gpuiter.compilers import traditional
inp = sys.stdin.buffer
while True:
    try:
        what, sources = pickle.load(inp)
    except EOFError:
        break
    if what == "outputs":
        r = traditional.compile_batch(sources)
        b = r.batch
        imm = b.imm.numpy()
        reply = {name: getattr(b, name).numpy() for name in ("ops", "args", "lengths", "n_params", "error")}
        reply.update(imm_nan=np.isnan(imm), imm=np.nan_to_num(imm, nan=0.0), messages=b.messages,
                     canonical=r.canonical())
    else:
        t0 = time.perf_counter()
        traditional.compile_to_batches(sources, "cpu")
        whole = time.perf_counter() - t0
        split = {}
        traditional.compile_to_batches(sources, "cpu", timings=split)
        reply = whole, split
    pickle.dump(reply, out)
    out.flush()
"""


class Side:
    """One checkout's compiler in a process of its own."""

    def __init__(self, tree: str, threads: int):
        root = Path(tree).resolve()
        if not (root / "jupyter_gpuiter" / "__init__.py").is_file():
            raise ValueError(f"{tree} holds no jupyter_gpuiter package")
        env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen([sys.executable, "-c", SIDE, str(threads)], cwd=root, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask(self, what: str, sources: list[str]):
        pickle.dump((what, sources), self.proc.stdin)
        self.proc.stdin.flush()
        try:
            return pickle.load(self.proc.stdout)
        except EOFError:
            raise RuntimeError(f"the side in {self.proc.args} ended (exit {self.proc.wait()})") from None

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


def differences(a: dict, b: dict) -> list[str]:
    """The outputs in which two sides' compile_batch differ."""
    import numpy as np

    diffs = [f for f in ("ops", "args", "lengths", "n_params", "error") if not np.array_equal(a[f], b[f])]
    if not (np.array_equal(a["imm_nan"], b["imm_nan"]) and np.array_equal(a["imm"], b["imm"])):
        diffs.append("imm")
    if a["messages"] != b["messages"]:
        diffs.append("messages")
    if a["canonical"] != b["canonical"]:
        diffs.append("canonical text")
    return diffs


def main(argv: list[str] | None = None) -> int:
    ap = tool_parser("ab", __doc__)
    ap.add_argument("base", help="the other checkout (a folder holding jupyter_gpuiter/)")
    ap.add_argument("--new", default=str(Path(__file__).resolve().parents[3]),
                    help="the checkout to compare with it (default: this one)")
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
    args = ap.parse_args(argv)
    knobs = {k: v for k, v in (("statements", tuple(args.statements or ())), ("max_nodes", args.max_nodes)) if v}
    knobs["rows"] = 0  # elementwise programs: the figures recorded before row kernels
    sources = generate_batch(args.n, 0, **knobs)
    seed, plain = 0, re.compile(r"\r|[0-9.][eE]|[0-9._]{17}")
    while args.plain and len(sources := [s for s in sources if not plain.search(s)]) < args.n:
        seed += 1
        if seed > 100:
            ap.error(f"--plain: 100 generated batches held only {len(sources)} plain programs")
        sources += generate_batch(args.n, seed, **knobs)
    sources = sources[: args.n]
    if args.no_cr:
        sources = [s.replace("\r\n", "\n").replace("\r", "\n") for s in sources]
    checked = sources + [m for m, _ in mutate_batch(sources[: args.n // 2], 1)]
    try:
        sides = {"base": Side(args.base, args.threads), "new": Side(args.new, args.threads)}
    except ValueError as e:
        print(f"gpuiter bench ab: {e}", file=sys.stderr)
        return 2
    try:
        diffs = differences(sides["base"].ask("outputs", checked), sides["new"].ask("outputs", checked))
        print(f"outputs {'EQUAL' if not diffs else 'DIFFERENT: ' + ', '.join(diffs)} on {len(checked)} programs")
        passes: dict[str, dict[str, list[float]]] = {"base": {}, "new": {}}
        whole: dict[str, list[float]] = {"base": [], "new": []}

        def timed_side(name: str):
            def run():
                seconds, split = sides[name].ask("time", sources)
                whole[name].append(seconds)
                for k, v in split.items():
                    passes[name].setdefault(k, []).append(v)
            return run

        alternating({name: timed_side(name) for name in sides}, args.repeats)
    finally:
        for side in sides.values():
            side.close()
    for name, times in whole.items():
        print(f"{name:5s} whole {statistics.median(times) * 1e3:7.1f} ms  "
              + " ".join(f"{k} {statistics.median(v) * 1e3:.1f}" for k, v in passes[name].items()))
    return 1 if diffs else 0
