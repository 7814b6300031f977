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


def main(argv: list[str] | None = None) -> int:
    from .compilers import MODES

    parser = argparse.ArgumentParser(prog="gpuiter", description="Compile, verify and benchmark kernels.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("compile", help="Compile a kernel-language file and report errors or print its IR.")
    p.add_argument("file", help="A .py file holding one kernel-language function.")
    p.add_argument("--mode", default="serial", choices=sorted(MODES), help="Which compiler to use.")
    p.add_argument("--emit", choices=["ir"], help="Print the canonical IR of the compiled program.")
    p.set_defaults(run=_compile)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
