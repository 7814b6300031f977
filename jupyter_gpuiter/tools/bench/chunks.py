"""`gpuiter bench chunks`: programs/s of the traditional compiler by chunk size, on one device (how
MIN_CHUNK_CELLS and the chunk budget are chosen).

    gpuiter bench chunks [--device cpu] [--n 16384] [--settings 17:21,19:21,21:21] [--repeats 3]

A setting `a:b` lets a chunk stop growing at 2^a cells when padding passes PAD_WASTE, and caps it at
2^b cells. Each setting compiles the same generated batch to device ProgramBatches in this process
(median of --repeats after a warm-up), and its batch must equal the first setting's, field by field:
the chunking changes the shapes every pass works on, never a result. Prints chunks, time and
programs/s per setting, then the per-pass split of the fastest.
"""

from __future__ import annotations

import contextlib

import torch

from ...compilers import traditional
from ...compilers.traditional import driver
from ...generate import generate_batch
from .common import device_sync, timed, tool_parser

DEFAULTS = {"cpu": "15:21,17:21,19:21,21:21", "cuda": "20:21,20:24,22:24,24:24,24:26"}


@contextlib.contextmanager
def chunking(device: torch.device, low: int, high: int):
    """The driver's chunk sizes set to a setting for the block (its own put back after)."""
    saved = driver.MIN_CHUNK_CELLS, driver.CHUNK_CELLS, driver.CUDA_CHUNK_CELLS
    driver.MIN_CHUNK_CELLS = {device.type: 1 << low}
    driver.CHUNK_CELLS = driver.CUDA_CHUNK_CELLS = 1 << high
    try:
        yield
    finally:
        driver.MIN_CHUNK_CELLS, driver.CHUNK_CELLS, driver.CUDA_CHUNK_CELLS = saved


def fields(batch) -> list[torch.Tensor]:
    return [batch.ops, batch.args, batch.imm.view(torch.int64), batch.lengths, batch.n_params, batch.error]


def main(argv: list[str] | None = None) -> int:
    ap = tool_parser("chunks", __doc__)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--settings", default=None, help="comma-separated a:b (powers of two), default by device")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    settings = [tuple(map(int, s.split(":"))) for s in (args.settings or DEFAULTS[dev.type]).split(",")]
    sources = generate_batch(args.n, args.seed, rows=0)
    sync = device_sync(dev)

    def compile_once():  # chunks as this process makes them, not worker processes
        batches, sizes = traditional.compile_to_batches(sources, dev, workers=1)
        if sync:
            sync()
        return batches, sizes

    traditional.compile_to_batches(sources[:64], dev, workers=1)  # tables, allocator
    print(f"chunk sweep: {args.n} generated programs on {dev}"
          + (f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else f", {torch.get_num_threads()} threads"))
    reference, best = None, None
    for low, high in settings:
        with chunking(dev, low, high):
            batches, sizes = compile_once()  # warm-up at this shape
            if dev.type == "cuda":
                del batches
                torch.cuda.reset_peak_memory_stats(dev)
            seconds, _, (batches, sizes) = timed(compile_once, args.repeats)
        got = fields(driver._assemble(batches, sizes, dev))
        if reference is None:
            reference = got
        same = all(torch.equal(a, b) for a, b in zip(reference, got))
        print(f"  2^{low}:2^{high} cells  {len(batches):4d} chunks  {seconds * 1e3:9.1f} ms  "
              f"{args.n / seconds:12,.0f} programs/s  {'same batch' if same else 'DIFFERENT BATCH'}")
        if dev.type == "cuda":  # checks BYTES_PER_CELL (measured on a CPU) against the device's allocator
            peak, cells = torch.cuda.max_memory_allocated(dev), max(c.data.numel() for _, c in batches)
            print(f"      peak {peak / 1e9:.2f} GB allocated, {peak / cells:.0f} bytes a cell of the largest chunk "
                  f"({cells:,} cells; the peak also holds the finished chunks' batches)")
        if not same:
            raise SystemExit(f"setting {low}:{high} changed the compiled batch")
        if best is None or seconds < best[0]:
            best = (seconds, low, high)
    _, low, high = best
    passes: dict[str, float] = {}
    with chunking(dev, low, high):
        traditional.compile_to_batches(sources, dev, timings=passes, workers=1)
    total = sum(passes.values()) or 1.0
    print(f"  per pass at 2^{low}:2^{high} (synchronised after each): "
          + ", ".join(f"{k} {v * 1e3:.0f} ms ({100 * v / total:.0f}%)" for k, v in passes.items()))
    return 0
