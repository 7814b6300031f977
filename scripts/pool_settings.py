"""Settings of the traditional compiler's module, side by side in the running worker pool (how
PAD_WASTE_ONE_THREAD was chosen: docs/performance.md).

    python scripts/pool_settings.py --set 'PAD_WASTE_ONE_THREAD=1.05' 'PAD_WASTE_ONE_THREAD=1.1' [--n 4096]
                                    [--seed 0] [--calls 16] [--workers 2]

Starts the pool as `compile_to_batches` would, then alternates the settings call by call: each call
sets the module constants named in any setting inside every worker (a setting is `NAME=value;...`
with Python literals, `MIN_CHUNK_CELLS={"cpu": 65536}` say, or `module.NAME=value` for a constant of
one of the compiler's modules; a name it leaves out keeps its default)
and compiles the batch there, split as
`compile_to_batches` splits it. Prints each setting's median and fastest wall time of a call (the
first call of each left out), its chunk count, and the median time by which the first worker to
finish its part beat the last (what a perfect balance of the parts could save is half of it); every
setting's chunks must hold every row once.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def owner(name: str):
    """(module, attribute) of a setting's name: NAME of the compiler's package, or module.NAME of one of its
    modules."""
    from jupyter_gpuiter.compilers import traditional

    module, _, attr = name.rpartition(".")
    return (importlib.import_module(f"{traditional.__name__}.{module}") if module else traditional), attr


def compile_part_with(encoded: list[bytes], max_cells: int, setting: dict):
    """In a worker: set the module constants of `setting`, then compile its part as the pool does;
    returns the seconds that took (sending the chunks included)."""
    from jupyter_gpuiter.compilers import traditional

    for name, value in setting.items():
        setattr(*owner(name), value)
    t0 = time.perf_counter()
    yield from driver._compile_part(encoded, max_cells)
    return time.perf_counter() - t0


def parse(text: str) -> dict:
    out = {}
    for item in filter(None, (p.strip() for p in text.split(";"))):
        name, _, value = item.partition("=")
        out[name.strip()] = ast.literal_eval(value.strip())
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", nargs="+", required=True, dest="settings")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calls", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    # the workers import this file by its module name (they inherit the environment)
    os.environ["PYTHONPATH"] = HERE + os.pathsep + os.environ.get("PYTHONPATH", "")
    sys.path.insert(0, HERE)
    import pool_settings

    from jupyter_gpuiter.compilers import traditional
    from jupyter_gpuiter.compilers.traditional import workers
    from jupyter_gpuiter.generate import generate_batch

    encoded = [traditional.encode(s) for s in generate_batch(args.n, args.seed)]
    sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    order = np.argsort(sizes, kind="stable").tolist()
    n = args.workers
    parts = [order[k::n] for k in range(n)]
    settings = [parse(s) for s in args.settings]
    names = {name for setting in settings for name in setting}  # each call sets them all: defaults elsewhere
    try:
        defaults = {name: getattr(*owner(name)) for name in names}
    except (ImportError, AttributeError) as e:
        sys.exit(f"pool_settings: {e} (a setting names NAME of the compiler's package or module.NAME of one of its modules)")
    settings = [{**defaults, **setting} for setting in settings]
    pool = workers.pool(n)
    if pool is None:
        sys.exit("pool_settings: no worker pool could start")
    times: list[list[float]] = [[] for _ in settings]
    apart: list[list[float]] = [[] for _ in settings]  # the last worker's busy time less the first's
    chunks = [0] * len(settings)
    for _ in range(args.calls):
        for i, setting in enumerate(settings):
            calls = [([encoded[j] for j in part], driver.CHUNK_CELLS // n, setting) for part in parts]
            t0 = time.perf_counter()
            with pool.streaming(pool_settings.compile_part_with, calls) as events:
                got, busy = [], []
                for event, k, value in events:
                    (got if event == "item" else busy).append((k, value))
            times[i].append(time.perf_counter() - t0)
            apart[i].append(max(b for _, b in busy) - min(b for _, b in busy))
            rows = sorted(parts[k][j] for k, (sel, _) in got for j in sel)
            assert rows == sorted(order), f"setting {args.settings[i]!r} lost or repeated rows"
            chunks[i] = len(got)
    print(f"pool_settings: {args.n} generated programs (seed {args.seed}), {n} workers, {args.calls} calls a setting")
    for text, t, c, a in zip(args.settings, times, chunks, apart):
        kept, kept_apart = t[1:] or t, a[1:] or a
        print(f"  {text:<48} {c:4d} chunks  median {statistics.median(kept) * 1e3:8.1f} ms  "
              f"fastest {min(kept) * 1e3:8.1f} ms  workers apart {statistics.median(kept_apart) * 1e3:6.1f} ms")
    workers.shutdown()


if __name__ == "__main__":
    main()
