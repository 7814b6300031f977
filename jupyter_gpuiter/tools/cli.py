"""The `gpuiter` command."""

from __future__ import annotations

import argparse
import codecs
import sys
from pathlib import Path


def _count(minimum: int):
    """An argparse type: a whole number >= minimum (a bad one is a usage error, not a traceback later)."""
    def count(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {n}")
        return n

    return count


def _read_source(path: str) -> str:
    """A kernel file's text as Python reads a source file: UTF-8, a leading byte-order mark dropped. At most
    the language's size limit is read (and a few bytes more, to tell a larger file): a huge file or
    /dev/zero is a too-large error, not a read until memory runs out. Raises OSError, UnicodeDecodeError,
    or CompileError (too-large)."""
    from ..lang import spec
    from ..lang.diagnostics import error

    limit = spec.MAX_SOURCE_BYTES
    with open(path, "rb") as f:
        data = f.read(len(codecs.BOM_UTF8) + limit + 1)
    data = data.removeprefix(codecs.BOM_UTF8)
    if len(data) > limit:
        raise error("file_too_large", 1, 1)
    return data.decode("utf-8", errors="strict")


def _compile(args) -> int:
    from .. import CompileError, compile_batch

    try:
        source = _read_source(args.file)
    except (OSError, UnicodeDecodeError) as e:
        print(f"{args.file}: cannot read: {e}", file=sys.stderr)
        return 2
    except CompileError as e:
        print(e.format(path=args.file), file=sys.stderr)
        return 1
    batch = compile_batch([source], mode=args.mode)
    result = batch[0]
    if isinstance(result, CompileError):
        print(result.with_source(source).format(path=args.file), file=sys.stderr)
        return 1
    if args.emit == "ir":
        print(result.text())
    else:
        print(f"{args.file}: ok: {result.name}({', '.join(result.param_names)}), "
              f"{result.n_nodes} instructions ({batch.paths[0] if batch.paths else args.mode})")
    return 0


def _bench(args) -> int:
    from .bench import SUITES

    suites = SUITES if args.suite == "all" else (args.suite,)
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        print(f"unknown suite {unknown[0]!r}; available: {', '.join(SUITES)}, all", file=sys.stderr)
        return 2
    problem = _unusable_out(Path(args.out), suites)
    if problem:  # found before the benchmarks run, not when their results are written
        print(f"gpuiter bench: --out {args.out}: {problem}", file=sys.stderr)
        return 2
    try:
        return _run_suites(args, suites)
    except OSError as e:  # writing a result (a full disk, a path that changed meanwhile)
        print(f"gpuiter bench: {e}", file=sys.stderr)
        return 2


def _unusable_out(out: Path, suites) -> str | None:
    """Why the results folder cannot take the suites' JSON files, or None (it is created if missing). A
    results file that is a symlink is fine: write_json replaces the link, never the file it points to."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"cannot create the results folder: {e}"
    for suite in suites:
        p = out / f"{suite}.json"
        if p.is_dir() and not p.is_symlink():
            return f"{p} is a folder, where the {suite} results would be written"
    return None


def _run_suites(args, suites) -> int:
    for suite in suites:
        out = str(Path(args.out) / f"{suite}.json")
        if suite == "compile" and args.crossover:
            from .bench.crossover import run

            run(device=args.device, repeats=args.repeats, seed=args.seed, json_path=out.replace(".json", "-crossover.json"))
        elif suite == "compile":
            from .bench.compile import run

            run(n=args.n, seed=args.seed, device=args.device, repeats=args.repeats, json_path=out)
        elif suite == "vm":
            from .bench.vm import run

            run(device=args.device, repeats=args.repeats, json_path=out)
        elif suite == "loop":
            from .bench.loop import run

            run(device=args.device, n_candidates=args.candidates, tests=args.tests, repeats=max(args.repeats, 3),
                json_path=out)
        elif suite == "verify":
            from .bench.verify import run

            run(device=args.device, repeats=max(args.repeats, 3), json_path=out)
        elif suite == "neural":
            from .bench.neural import run

            run(n=args.held_out, samples=args.samples, seed=args.seed, device=args.device, json_path=out)
        elif suite == "peers":
            from .bench.peers import run

            try:
                run(device=args.device, iterations=args.iterations, tests=args.tests, seed=args.seed,
                    peers=args.peers.split(",") if args.peers else None, json_path=out)
            except ValueError as e:
                print(f"gpuiter bench peers: {e}", file=sys.stderr)
                return 2
    return 0


def _bench_tool(name: str, argv: list[str]) -> int:
    """`gpuiter bench TOOL ...`: one of the compiler's measurement tools, with its own options."""
    from .bench import ab, chunk_cost, chunks, compile_profile, host, ops, settings

    tools = {"chunks": chunks, "chunk-cost": chunk_cost, "host": host, "ops": ops, "profile": compile_profile,
             "settings": settings, "ab": ab}
    return tools[name].main(argv)


def _train_neural(args) -> int:
    from ..compilers.neural.train import TrainConfig, export, train

    cfg = TrainConfig(examples=args.examples, steps=args.steps, minutes=args.minutes, data_seed=args.data_seed,
                      eval_every=args.eval_every, threads=args.threads, rows=args.rows, init=args.init or "",
                      lr=args.lr, warmup=args.warmup)
    try:
        last = train(args.out, cfg, resume=args.resume, device=args.device or "cpu")
        print(f"checkpoint: {last}")
        if args.export:
            print(f"exported: {export(last, args.export)}")
    except (OSError, ValueError) as e:  # a checkpoint or data cache that is not ours: say which, no traceback
        print(f"gpuiter train-neural: {e}", file=sys.stderr)
        return 2
    return 0


def _install_kernel(args) -> int:
    from ..front.jupyter_kernel.install import install

    try:
        path = install(user=not (args.sys_prefix or args.prefix is not None), sys_prefix=args.sys_prefix, prefix=args.prefix)
    except (OSError, ValueError) as e:
        print(f"cannot install the gpuiter kernel: {e}", file=sys.stderr)
        return 1
    print(f"installed the gpuiter kernelspec in {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from .. import DEFAULT_MODE, modes
    from .bench import TOOLS

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"] and len(argv) > 1 and argv[1] in TOOLS:
        return _bench_tool(argv[1], argv[2:])

    parser = argparse.ArgumentParser(prog="gpuiter", description="Compile, verify and benchmark kernels.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("compile", help="Compile a kernel-language file and report errors or print its IR.")
    p.add_argument("file", help="A .py file holding one kernel-language function.")
    p.add_argument("--mode", default=DEFAULT_MODE, choices=list(modes()),
                   help=f"Which compiler to use (default {DEFAULT_MODE}: the fastest correct one for one file).")
    p.add_argument("--emit", choices=["ir"], help="Print the canonical IR of the compiled program.")
    p.set_defaults(run=_compile)
    b = sub.add_parser("bench", help="Run benchmark suites; prints ratios measured in one run and writes JSON.",
                       epilog=f"The compiler's measurement tools take their own options: gpuiter bench "
                              f"{{{','.join(TOOLS)}}} --help.")
    b.add_argument("suite", nargs="?", default="all",
                   help="Which suite: compile, vm, loop, verify, neural, peers, or all.")
    b.add_argument("--n", type=_count(1), default=4096, help="Number of generated programs.")
    b.add_argument("--seed", type=int, default=0, help="Seed of the program generator.")
    b.add_argument("--device", default=None, help="cpu, cuda, or omit to pick CUDA when available.")
    b.add_argument("--repeats", type=_count(1), default=3, help="Timed repetitions; the median is reported.")
    b.add_argument("--out", default="bench-results", help="Folder for the JSON results.")
    b.add_argument("--held-out", type=_count(1), default=1000, help="neural: held-out generated programs.")
    b.add_argument("--samples", type=_count(1), default=16, help="neural: samples per program for pass@k.")
    b.add_argument("--iterations", type=_count(1), default=20, help="peers: edits per kernel (each a new constant).")
    b.add_argument("--tests", type=_count(1), default=None,
                   help="peers, loop: test inputs per candidate (default 6,905: failure rate <= 1e-3 at confidence "
                        "99.9%%).")
    b.add_argument("--candidates", type=_count(1), default=1000, help="loop: candidates per batch.")
    b.add_argument("--crossover", action="store_true",
                   help="compile: find the batch size from which the traditional compiler beats the serial one.")
    b.add_argument("--peers", default=None,
                   help="peers: comma-separated subset of gpuiter, gpuiter-serial, gpuiter-hybrid, numba, "
                        "torch-compile, torch-eager, fresh-process, cupy, nvcc (default: all).")
    b.set_defaults(run=_bench)
    t = sub.add_parser("train-neural", help="Train the neural compiler on generated programs (resumable).")
    t.add_argument("--out", default="neural-run", help="Folder for checkpoints (last.pt) and config.json.")
    t.add_argument("--examples", type=int, default=200_000, help="Generated training programs.")
    t.add_argument("--steps", type=int, default=30_000, help="Optimiser steps (the learning-rate schedule's length).")
    t.add_argument("--minutes", type=float, default=120.0, help="Stop after this much training time.")
    t.add_argument("--data-seed", type=int, default=1, help="Seed of the training programs.")
    t.add_argument("--eval-every", type=int, default=1000, help="Score the held-out set and save every N steps.")
    t.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default).")
    t.add_argument("--rows", type=float, default=0.35, help="Share of row kernels among the training programs.")
    t.add_argument("--init", default=None,
                   help="Start from this checkpoint's weights (fine-tuning; an older vocabulary is grown).")
    t.add_argument("--lr", type=float, default=2e-3, help="Peak learning rate.")
    t.add_argument("--warmup", type=int, default=400, help="Warm-up steps of the learning rate.")
    t.add_argument("--device", default=None, help="cpu (default) or cuda.")
    t.add_argument("--resume", action="store_true", help="Continue from OUT/last.pt.")
    t.add_argument("--export", default=None, help="Also write a float16 copy for shipping to this path.")
    t.set_defaults(run=_train_neural)
    k = sub.add_parser("install-kernel", help="Install the gpuiter Jupyter kernelspec (the wheel also ships it).")
    where = k.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="For the current user (the default).")
    where.add_argument("--sys-prefix", action="store_true", help="Into this environment (sys.prefix).")
    where.add_argument("--prefix", default=None, help="Into PREFIX/share/jupyter/kernels.")
    k.set_defaults(run=_install_kernel)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
