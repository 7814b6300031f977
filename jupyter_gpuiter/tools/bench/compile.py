"""`gpuiter bench compile`: traditional vs serial on the same generated batch, with a per-pass breakdown.

Two batches: n elementwise programs (generate_batch(n, seed, rows=0): the programs of the figures before
row kernels) and, beside them, n row kernels (generate_batch(n, seed, rows=1.0): softmax, norms,
losses and random programs with reductions), each compiled by both compilers in the same rounds."""

from __future__ import annotations

import torch

from ...compilers import traditional
from ...compilers.serial import compile_sources
from ...generate import generate_batch
from ...ir import Program
from ...lang import spec
from ...runtime.device import resolve
from ...verification.confidence import as_count
from .common import alternating, machine, write_json


def run(n: int = 4096, seed: int = 0, device=None, repeats: int = 3, json_path: str | None = None,
        row_kernels: int | None = None) -> dict:
    """row_kernels: how many generated row kernels to time beside the n elementwise programs (default n)."""
    n = as_count("n (generated programs)", n, minimum=1)  # 0 divided by zero at the end of the run
    repeats = as_count("repeats", repeats, minimum=1)  # 0 left no time to take the median of
    n_rows = as_count("row_kernels", n if row_kernels is None else row_kernels, minimum=1)
    dev = resolve(device)
    sources = generate_batch(n, seed, rows=0.0)
    n_bytes = sum(len(s.encode()) for s in sources)
    row_sources = generate_batch(n_rows, seed, rows=1.0)
    row_bytes = sum(len(s.encode()) for s in row_sources)

    def serial():
        return compile_sources(sources)

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    traditional.compile_batch(sources[:64], device=dev)  # warm-up: tables, allocator
    # on a CPU, the batch shared out to resident worker processes (started here, outside the timings), as
    # compile_to_batches does by default from POOL_MIN_BYTES (here whatever n is), and the same in one process
    n_workers = traditional.default_workers() if dev.type == "cpu" else 1
    if n_workers > 1 and traditional.worker_pool(n_workers) is None:
        n_workers = 1  # no pool could start
    threads = torch.get_num_threads()

    def one_thread():  # per core: serial runs on one, the tensor passes on all of them
        torch.set_num_threads(1)
        try:
            return traditional.compile_to_batches(sources, dev, workers=1)[0]
        finally:
            torch.set_num_threads(threads)

    fns = {"serial": serial,
           "device": lambda: traditional.compile_to_batches(sources, dev, workers=n_workers)[0],
           "full": lambda: traditional.compile_batch(sources, device=dev, workers=n_workers)}
    if n_workers > 1:
        fns["one_process"] = lambda: traditional.compile_to_batches(sources, dev, workers=1)[0]
    if dev.type == "cpu" and threads > 1:
        fns["one_thread"] = one_thread
    fns |= {"rows_serial": lambda: compile_sources(row_sources),
            "rows_device": lambda: traditional.compile_to_batches(row_sources, dev, workers=n_workers)[0],
            "rows_full": lambda: traditional.compile_batch(row_sources, device=dev, workers=n_workers)}
    # in rounds (every variant once a round), so that the machine's drift weighs on serial and the rest alike
    measured = alternating(fns, repeats, sync)
    (serial_s, serial_times, _), (device_s, device_times, batches) = measured["serial"], measured["device"]
    full_s, _, result = measured["full"]
    one_process_s = measured["one_process"][0] if "one_process" in measured else None
    one_thread_s = measured["one_thread"][0] if "one_thread" in measured else None
    round_ratios = [s / d for s, d in zip(serial_times, device_times)]
    passes: dict[str, float] = {}
    traditional.compile_to_batches(sources, dev, timings=passes, workers=n_workers)
    ok = result.n_ok
    rows_serial_s, rows_serial_times, row_results = measured["rows_serial"]
    rows_device_s, rows_device_times, _ = measured["rows_device"]
    rows_full_s, _, rows_result = measured["rows_full"]
    row_programs = [r for r in row_results if isinstance(r, Program)]
    rows = {
        "programs": n_rows, "bytes": row_bytes, "valid": rows_result.n_ok,
        "reducing": sum(p.reduces for p in row_programs),
        "per_row_results": sum(p.returns_per_row() for p in row_programs),
        "reductions": sum(op in spec.REDUCTION_OPS for p in row_programs for op in p.ops),
        "serial_s": rows_serial_s, "traditional_device_s": rows_device_s, "traditional_end_to_end_s": rows_full_s,
        "serial_programs_per_s": n_rows / rows_serial_s, "traditional_device_programs_per_s": n_rows / rows_device_s,
        "traditional_end_to_end_programs_per_s": n_rows / rows_full_s,
        "ratio_device_vs_serial": rows_serial_s / rows_device_s, "ratio_end_to_end_vs_serial": rows_serial_s / rows_full_s,
        "ratio_device_vs_serial_by_round": [s / d for s, d in zip(rows_serial_times, rows_device_times)],
    }
    host_literals = sum(len(chunk.host_literals()[0]) for _, chunk in batches)  # valued on the host at the end
    report = {
        "suite": "compile", "programs": n, "bytes": n_bytes, "seed": seed, "valid": ok, "machine": machine(dev),
        "workers": n_workers,
        "serial_s": serial_s, "traditional_device_s": device_s, "traditional_end_to_end_s": full_s,
        "serial_programs_per_s": n / serial_s, "traditional_device_programs_per_s": n / device_s,
        "traditional_end_to_end_programs_per_s": n / full_s,
        "serial_mb_per_s": n_bytes / serial_s / 1e6, "traditional_device_mb_per_s": n_bytes / device_s / 1e6,
        "ratio_device_vs_serial": serial_s / device_s, "ratio_end_to_end_vs_serial": serial_s / full_s,
        "passes_s": passes, "chunks": len(batches), "host_literals": host_literals,
        "traditional_device_1process_s": one_process_s,
        "ratio_device_1process_vs_serial": serial_s / one_process_s if one_process_s else None,
        "traditional_device_1thread_s": one_thread_s,
        "ratio_device_1thread_vs_serial": serial_s / one_thread_s if one_thread_s else None,
        "ratio_device_vs_serial_by_round": round_ratios,
        # the host's work a program before the passes (summed over the processes); on a GPU, a ceiling
        "host_us_per_program": (passes["plan"] + passes["pack"]) / n * 1e6,
        "row_kernels": rows,
    }
    shared = f" ({n_workers} worker processes)" if n_workers > 1 else ""
    print(f"gpuiter bench compile: {n} generated programs, {n_bytes / 1e6:.2f} MB, {ok} valid, device {dev}{shared}, "
          f"{host_literals} literals left to the host")

    def row(label: str, seconds: float, ratio: bool = True, of=(n, n_bytes, serial_s)) -> None:
        count, size, base = of
        print(f"  {label:<30}{seconds * 1e3:9.1f} ms  {count / seconds:12,.0f} programs/s "
              f"{size / seconds / 1e6:7.2f} MB/s" + (f"   {base / seconds:6.2f}x serial" if ratio else ""))

    row("serial (CPython ast)", serial_s, ratio=False)
    row("traditional, to ProgramBatch", device_s)
    if one_process_s:
        row(f"  in one process, {threads} threads", one_process_s)
    if one_thread_s:
        row("  in one process, 1 thread", one_thread_s)
    row("traditional, to host Programs", full_s)
    if len(round_ratios) > 1:
        print(f"  to ProgramBatch by round (serial and traditional measured seconds apart): "
              f"{min(round_ratios):.2f}x to {max(round_ratios):.2f}x serial")
    total = sum(passes.values()) or 1.0
    summed = " (summed over the workers)" if n_workers > 1 else ""
    print(f"  per pass{summed}: " + ", ".join(f"{k} {v * 1e3:.0f} ms ({100 * v / total:.0f}%)" for k, v in passes.items()))
    host_us = report["host_us_per_program"]
    if dev.type == "cpu":  # (a CPU pads on the host, a GPU's path only joins: `gpuiter bench host` times that)
        print(f"  host's work before the passes (plan and pack{summed}): {host_us:.2f} us a program")
    else:  # (pack's time holds the upload and the device's padding gather too)
        print(f"  host's work before the passes (plan and pack): {host_us:.2f} us a program, "
              f"at most {1e6 / host_us:,.0f} programs/s")
    print(f"row kernels beside them: {n_rows} generated, {row_bytes / 1e6:.2f} MB, {rows['valid']} valid, "
          f"{rows['reductions']} reductions, {rows['per_row_results']} with one result a row")
    of = (n_rows, row_bytes, rows_serial_s)
    row("serial (CPython ast)", rows_serial_s, ratio=False, of=of)
    row("traditional, to ProgramBatch", rows_device_s, of=of)
    row("traditional, to host Programs", rows_full_s, of=of)
    by_round = rows["ratio_device_vs_serial_by_round"]
    if len(by_round) > 1:
        print(f"  to ProgramBatch by round: {min(by_round):.2f}x to {max(by_round):.2f}x serial")
    if json_path:
        print(f"  wrote {write_json(report, json_path)}")
    return report
