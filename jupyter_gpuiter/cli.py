"""The `gpuiter` command."""

from __future__ import annotations

import argparse
import sys


def _compile(args) -> int:
    from . import compile_batch
    from .lang.errors import CompileError

    try:
        with open(args.file, encoding="utf-8") as f:
            source = f.read()
    except (OSError, UnicodeDecodeError) as e:
        print(f"{args.file}: cannot read: {e}", file=sys.stderr)
        return 2
    result = compile_batch([source], mode=args.mode)[0]
    if isinstance(result, CompileError):
        result.source = source
        print(f"{args.file}:{result.line}:{result.col}: {result.kind}: {result.message}", file=sys.stderr)
        caret = result.caret()
        if caret:
            print(caret, file=sys.stderr)
        return 1
    if args.emit == "ir":
        print(result.text())
    else:
        print(f"{args.file}: ok: {result.name}({', '.join(result.param_names)}), "
              f"{result.n_nodes} instructions ({args.mode})")
    return 0


def _bench(args) -> int:
    from pathlib import Path

    from .bench import SUITES

    suites = SUITES if args.suite == "all" else (args.suite,)
    unknown = [s for s in suites if s not in SUITES]
    if unknown:
        print(f"unknown suite {unknown[0]!r}; available: {', '.join(SUITES)}, all", file=sys.stderr)
        return 2
    for suite in suites:
        out = str(Path(args.out) / f"{suite}.json")
        if suite == "compile":
            from .bench.compile import run

            run(n=args.n, seed=args.seed, device=args.device, repeats=args.repeats, json_path=out)
        elif suite == "vm":
            from .bench.vm import run

            run(device=args.device, repeats=args.repeats, json_path=out)
        elif suite == "verify":
            from .bench.verify import run

            run(device=args.device, repeats=max(args.repeats, 3), json_path=out)
        elif suite == "peers":
            from .bench.peers import run

            try:
                run(device=args.device, iterations=args.iterations, tests=args.tests, seed=args.seed,
                    peers=args.peers.split(",") if args.peers else None, json_path=out)
            except ValueError as e:
                print(f"gpuiter bench peers: {e}", file=sys.stderr)
                return 2
    return 0


def _install_kernel(args) -> int:
    from .kernel.install import install

    try:
        path = install(user=not (args.sys_prefix or args.prefix is not None), sys_prefix=args.sys_prefix, prefix=args.prefix)
    except (OSError, ValueError) as e:
        print(f"cannot install the gpuiter kernel: {e}", file=sys.stderr)
        return 1
    print(f"installed the gpuiter kernelspec in {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from .compilers import MODES

    parser = argparse.ArgumentParser(prog="gpuiter", description="Compile, verify and benchmark kernels.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("compile", help="Compile a kernel-language file and report errors or print its IR.")
    p.add_argument("file", help="A .py file holding one kernel-language function.")
    p.add_argument("--mode", default="serial", choices=sorted(MODES), help="Which compiler to use.")
    p.add_argument("--emit", choices=["ir"], help="Print the canonical IR of the compiled program.")
    p.set_defaults(run=_compile)
    b = sub.add_parser("bench", help="Run benchmark suites; prints ratios measured in one run and writes JSON.")
    b.add_argument("suite", nargs="?", default="all", help="Which suite: compile, vm, verify, peers, or all.")
    b.add_argument("--n", type=int, default=4096, help="Number of generated programs.")
    b.add_argument("--seed", type=int, default=0, help="Seed of the program generator.")
    b.add_argument("--device", default=None, help="cpu, cuda, or omit to pick CUDA when available.")
    b.add_argument("--repeats", type=int, default=3, help="Timed repetitions; the median is reported.")
    b.add_argument("--out", default="bench-results", help="Folder for the JSON results.")
    b.add_argument("--iterations", type=int, default=20, help="peers: edits per kernel (each a new constant).")
    b.add_argument("--tests", type=int, default=None,
                   help="peers: test inputs per edit (default 6,905: failure rate <= 1e-3 at confidence 99.9%%).")
    b.add_argument("--peers", default=None,
                   help="peers: comma-separated subset of gpuiter, gpuiter-serial, gpuiter-hybrid, numba, "
                        "torch-compile, torch-eager, fresh-process, cupy, nvcc (default: all).")
    b.set_defaults(run=_bench)
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
