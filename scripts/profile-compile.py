"""Profile the traditional compiler by op (docs/performance.md).

    python scripts/profile-compile.py [--device cpu] [--n 2000] [--rows 22]

Compiles n generated programs once under torch.profiler, after a warm-up, and prints the wall time, the
op calls made and the ops' table (by self CPU time; on CUDA by device time). On CUDA it also prints how
busy the device was: its kernels' summed time against the wall time. A device idle most of the time is
waiting for the host to launch work (the passes make ~11,000 tensor calls a chunk), and the cure is fewer,
larger chunks or fewer launches; a busy one is limited by the kernels themselves.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch.profiler import ProfilerActivity, profile

from jupyter_gpuiter.compilers.traditional import compile_to_batches
from jupyter_gpuiter.lang import generate


def main() -> None:
    os.environ["GPUITER_COMPILE_WORKERS"] = "1"  # the passes in this process, not in workers
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--rows", type=int, default=22)
    args = ap.parse_args()
    dev = torch.device(args.device)
    cuda = dev.type == "cuda"
    sources = generate.generate_batch(args.n, args.seed)
    compile_to_batches(sources, dev)  # warm-up: tables, allocator

    def once():
        batches, _ = compile_to_batches(sources, dev)
        if cuda:
            torch.cuda.synchronize(dev)
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


if __name__ == "__main__":
    main()
