"""`gpuiter bench settings`: constants of the traditional compiler side by side in the running worker pool
(how PAD_WASTE_ONE_THREAD was chosen: docs/performance.md).

    gpuiter bench settings --set 'PAD_WASTE_ONE_THREAD=1.05' 'PAD_WASTE_ONE_THREAD=1.1' [--n 4096]
                           [--seed 0] [--calls 16] [--workers 2]

Starts the pool as `compile_to_batches` would, then alternates the settings call by call: each call
sets the module constants named in any setting inside every worker (a setting is `NAME=value;...`
with Python literals, `MIN_CHUNK_CELLS={"cpu": 65536}` say, for a constant of the driver, or
`module.NAME=value` for a constant of one of the compiler's modules; a name it leaves out keeps its
default) and compiles the batch there, split as `compile_to_batches` splits it. Prints each setting's
median and fastest wall time of a call (the first call of each left out), its chunk count, and the
median time by which the first worker to finish its part beat the last (what a perfect balance of the
parts could save is half of it); every setting's chunks must hold every row once.
"""

from __future__ import annotations

import ast
import statistics
import sys
import time
from types import ModuleType

import numpy as np

from ...compilers import traditional
from ...compilers.traditional import driver
from ...compilers.traditional.pack import encode
from ...generate import generate_batch
from ...runtime import workers
from .common import alternating, tool_parser


def owner(name: str) -> tuple[ModuleType, str]:
    """(module, attribute) of a setting's name: NAME of the driver, or module.NAME of one of the compiler's
    modules. Raises AttributeError or TypeError for a name that is neither."""
    module, _, attr = name.rpartition(".")
    where = getattr(traditional, module) if module else driver
    if not isinstance(where, ModuleType):
        raise TypeError(f"the traditional compiler has no module {module!r}")
    getattr(where, attr)
    return where, attr


def compile_part_with(encoded: list[bytes], max_cells: int, setting: dict):
    """In a worker: set the module constants of `setting`, then compile its part as the pool does;
    returns the seconds that took (sending the chunks included)."""
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


def main(argv: list[str] | None = None) -> int:
    ap = tool_parser("settings", __doc__)
    ap.add_argument("--set", nargs="+", required=True, dest="settings")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calls", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    encoded = [encode(s) for s in generate_batch(args.n, args.seed, rows=0)]
    sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    order = np.argsort(sizes, kind="stable").tolist()
    n = args.workers
    parts = [order[k::n] for k in range(n)]
    settings = [parse(s) for s in args.settings]
    names = {name for setting in settings for name in setting}  # each call sets them all: defaults elsewhere
    try:
        defaults = {name: getattr(*owner(name)) for name in names}
    except (AttributeError, TypeError) as e:
        print(f"gpuiter bench settings: {e} (a setting names NAME of the driver or module.NAME of one of the "
              f"compiler's modules)", file=sys.stderr)
        return 2
    settings = [{**defaults, **setting} for setting in settings]
    pool = traditional.worker_pool(n)
    if pool is None:
        print("gpuiter bench settings: no worker pool could start", file=sys.stderr)
        return 2
    apart: list[list[float]] = [[] for _ in settings]  # the last worker's busy time less the first's
    chunks = [0] * len(settings)

    def call(i: int):
        def run():
            calls = [([encoded[j] for j in part], driver.CHUNK_CELLS // n, settings[i]) for part in parts]
            with pool.streaming(compile_part_with, calls) as events:
                if events is None:
                    raise RuntimeError("the worker pool broke or is busy")
                got, busy = [], []
                for event, k, value in events:
                    (got if event == "item" else busy).append((k, value))
            apart[i].append(max(b for _, b in busy) - min(b for _, b in busy))
            rows = sorted(parts[k][j] for k, (sel, _) in got for j in sel)
            assert rows == sorted(order), f"setting {args.settings[i]!r} lost or repeated rows"
            chunks[i] = len(got)
        return run

    try:
        times = alternating({i: call(i) for i in range(len(settings))}, args.calls)
    finally:
        workers.shutdown()
    print(f"pool_settings: {args.n} generated programs (seed {args.seed}), {n} workers, {args.calls} calls a setting")
    for i, text in enumerate(args.settings):
        kept, kept_apart = times[i][1][1:] or times[i][1], apart[i][1:] or apart[i]
        print(f"  {text:<48} {chunks[i]:4d} chunks  median {statistics.median(kept) * 1e3:8.1f} ms  "
              f"fastest {min(kept) * 1e3:8.1f} ms  workers apart {statistics.median(kept_apart) * 1e3:6.1f} ms")
    return 0
