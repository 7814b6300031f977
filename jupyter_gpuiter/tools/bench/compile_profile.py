"""`gpuiter bench profile`: the traditional compiler profiled by op (docs/performance.md).

    gpuiter bench profile [--device cpu] [--n 2000] [--rows 22]

Compiles n generated programs once in this process under torch.profiler, after a warm-up, and prints the
wall time, the op calls made and the ops' table (by self CPU time; on CUDA by device time). On CUDA it
also prints how busy the device was: its kernels' summed time against the wall time. A device idle most
of the time is waiting for the host to launch work (the passes make ~11,000 tensor calls a chunk), and
the cure is fewer, larger chunks or fewer launches; a busy one is limited by the kernels themselves.
Then the tensor calls made from Python, by pass, and those of lex's DFA scan.
"""

from __future__ import annotations

import time

import torch
from torch.overrides import TorchFunctionMode
from torch.profiler import ProfilerActivity, profile

from ...compilers import traditional
from ...compilers.traditional import batch_lexer, driver
from ...generate import generate_batch
from .common import device_sync, tool_parser


def main(argv: list[str] | None = None) -> int:
    ap = tool_parser("profile", __doc__)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--rows", type=int, default=22)
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    sync = device_sync(dev)
    sources = generate_batch(args.n, args.seed, rows=0)
    traditional.compile_to_batches(sources, dev, workers=1)  # warm-up: tables, allocator

    def once(timings=None):  # the passes in this process, not in worker processes
        batches, _ = traditional.compile_to_batches(sources, dev, timings, workers=1)
        if sync:
            sync()
        return batches

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        t0 = time.perf_counter()
        batches = once()
        wall = time.perf_counter() - t0
    events = prof.key_averages()
    calls = sum(e.count for e in events if e.key.startswith("aten::"))
    print(f"profile-compile: {args.n} generated programs on {dev}, {len(batches)} chunks, "
          f"{wall * 1e3:.1f} ms under the profiler, {calls:,} aten op calls")
    if cuda:
        kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        busy = sum(e.device_time_total for e in kernels) / 1e6  # (microseconds)
        print(f"  device kernels: {len(kernels):,}, {busy * 1e3:.1f} ms in all: the device was busy "
              f"{100 * busy / wall:.0f}% of the wall time")
    sort_by = "self_device_time_total" if cuda else "self_cpu_time_total"
    print(events.table(sort_by=sort_by, row_limit=args.rows))
    by_pass, dfa = tensor_calls(once)
    print(f"tensor calls from Python (a kernel launch or more each on a GPU), a chunk on average: "
          f"{sum(by_pass.values()) / len(batches):,.0f}; by pass, over the {len(batches)} chunks: "
          + ", ".join(f"{k} {v:,}" for k, v in by_pass.items()) + f"; of lex's, the DFA scan's {dfa:,} (two a byte pair)")
    return 0


class _Calls(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def tensor_calls(once) -> tuple[dict[str, int], int]:
    """The torch calls `once` makes from Python, by pass (the compiler's pass ticks mark where one ends),
    and those of lex's DFA scan."""
    by_pass: dict[str, int] = {}
    calls, seen, dfa = _Calls(), [0], [0]
    tick, run_dfa = driver._Ticks.__call__, batch_lexer._run_dfa

    def counted_tick(self, name):
        by_pass[name] = by_pass.get(name, 0) + calls.count - seen[0]
        seen[0] = calls.count
        return tick(self, name)

    def counted_dfa(*a):
        before = calls.count
        try:
            return run_dfa(*a)
        finally:
            dfa[0] += calls.count - before

    driver._Ticks.__call__, batch_lexer._run_dfa = counted_tick, counted_dfa
    try:
        with calls:
            once(timings={})  # (ticks run only with timings)
    finally:
        driver._Ticks.__call__, batch_lexer._run_dfa = tick, run_dfa
    return by_pass, dfa[0]
