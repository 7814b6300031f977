"""`gpuiter bench compile`: traditional vs serial on the same generated batch, with a per-pass breakdown."""

from __future__ import annotations

import torch

from ..compilers import traditional
from ..compilers.serial import compile_sources
from ..lang.generate import generate_batch
from ..runtime.device import resolve
from .common import machine, timed, write_json


def run(n: int = 4096, seed: int = 0, device=None, repeats: int = 3, json_path: str | None = None) -> dict:
    dev = resolve(device)
    sources = generate_batch(n, seed)
    n_bytes = sum(len(s.encode()) for s in sources)

    def serial():
        return compile_sources(sources)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    traditional.compile_batch(sources[:64], device=dev)  # warm-up: tables, allocator
    serial_s, _, _ = timed(serial, repeats)
    device_s, _, batches = timed(lambda: traditional.compile_to_batches(sources, dev)[0], repeats, sync)
    full_s, _, result = timed(lambda: traditional.compile_batch(sources, device=dev), repeats)
    one_thread_s = None
    threads = torch.get_num_threads()
    if dev.type == "cpu" and threads > 1:  # per core: serial runs on one, the tensor passes on all of them
        torch.set_num_threads(1)
        try:
            one_thread_s, _, _ = timed(lambda: traditional.compile_to_batches(sources, dev)[0], repeats)
        finally:
            torch.set_num_threads(threads)
    passes: dict[str, float] = {}
    traditional.compile_to_batches(sources, dev, timings=passes)
    ok = result.n_ok
    report = {
        "suite": "compile", "programs": n, "bytes": n_bytes, "seed": seed, "valid": ok, "machine": machine(dev),
        "serial_s": serial_s, "traditional_device_s": device_s, "traditional_end_to_end_s": full_s,
        "serial_programs_per_s": n / serial_s, "traditional_device_programs_per_s": n / device_s,
        "traditional_end_to_end_programs_per_s": n / full_s,
        "serial_mb_per_s": n_bytes / serial_s / 1e6, "traditional_device_mb_per_s": n_bytes / device_s / 1e6,
        "ratio_device_vs_serial": serial_s / device_s, "ratio_end_to_end_vs_serial": serial_s / full_s,
        "passes_s": passes, "chunks": len(batches),
        "traditional_device_1thread_s": one_thread_s,
        "ratio_device_1thread_vs_serial": serial_s / one_thread_s if one_thread_s else None,
    }
    print(f"gpuiter bench compile: {n} generated programs, {n_bytes / 1e6:.2f} MB, {ok} valid, device {dev}")
    print(f"  serial (CPython ast)          {serial_s * 1e3:9.1f} ms  {n / serial_s:12,.0f} programs/s "
          f"{n_bytes / serial_s / 1e6:7.2f} MB/s")
    print(f"  traditional, to ProgramBatch  {device_s * 1e3:9.1f} ms  {n / device_s:12,.0f} programs/s "
          f"{n_bytes / device_s / 1e6:7.2f} MB/s   {serial_s / device_s:6.2f}x serial")
    print(f"  traditional, to host Programs {full_s * 1e3:9.1f} ms  {n / full_s:12,.0f} programs/s "
          f"{n_bytes / full_s / 1e6:7.2f} MB/s   {serial_s / full_s:6.2f}x serial")
    if one_thread_s:
        print(f"  traditional, 1 thread, batch  {one_thread_s * 1e3:9.1f} ms  {n / one_thread_s:12,.0f} programs/s "
              f"{n_bytes / one_thread_s / 1e6:7.2f} MB/s   {serial_s / one_thread_s:6.2f}x serial "
              f"(the rows above use {threads} threads)")
    total = sum(passes.values()) or 1.0
    print("  per pass: " + ", ".join(f"{k} {v * 1e3:.0f} ms ({100 * v / total:.0f}%)" for k, v in passes.items()))
    if json_path:
        print(f"  wrote {write_json(report, json_path)}")
    return report
