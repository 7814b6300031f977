"""`gpuiter bench host`: the host's work per program on a GPU's path through the traditional compiler, and
the programs/s it allows any device (docs/performance.md).

    gpuiter bench host [--n 16384] [--copies 4] [--repeats 5]

A GPU runs a chunk's passes in a few thousand kernel launches whatever its size, but the host touches
every program before the device sees it: it encodes and sorts the sources, cuts them into chunks and
joins each chunk's bytes for the upload (a CPU's path also scans them for lex's hints, a GPU's does
not); after lexing it cuts the rows again by token count. Those steps run here as compile_to_batches
runs them for a CUDA device, at its chunk sizes (2^24 cells at most, closing past 2^22), with pack's
device part on torch's `meta` device (shapes only, no data), so that only the host's work is timed.
The batch is --n generated programs (seed 0) repeated --copies times; the token counts come from
lexing it on the CPU first, in a CPU's chunks. Prints the median microseconds a program of each step
over --repeats rounds, their sum, and the ceiling it sets: 1 / sum programs/s, whatever the device.
"""

from __future__ import annotations

import numpy as np
import torch

from ...compilers import traditional
from ...compilers.traditional import driver
from ...compilers.traditional.pack import pack
from ...compilers.traditional.plan import by_size, split
from ...generate import generate_batch
from .common import alternating, tool_parser


def main(argv: list[str] | None = None) -> int:
    ap = tool_parser("host", __doc__)
    ap.add_argument("--n", type=int, default=16384)
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    if min(args.n, args.copies, args.repeats) < 1:
        ap.error("--n, --copies and --repeats take a whole number of at least 1")
    sources = generate_batch(args.n, 0, rows=0) * args.copies
    cuda = torch.device("cuda")  # (a device type only: nothing runs on it)
    max_cells = driver.CUDA_CHUNK_CELLS
    min_cells, waste = traditional.chunk_closing(cuda, max_cells)
    encoded, sizes, order = by_size(sources)
    width = sizes + 1
    tokens = np.zeros(len(sources), dtype=np.int64)
    cpu = torch.device("cpu")  # lexed at a CPU's chunk sizes (within its memory budget)
    cpu_cells = driver.CHUNK_CELLS
    for sel in split(order, width, width, cpu_cells, *traditional.chunk_closing(cpu, cpu_cells)):
        tokens[sel] = driver._lex_chunk([encoded[i] for i in sel], cpu).row_tokens

    steps = {
        "encode and sort": lambda: by_size(sources),
        "cut by bytes": lambda: split(order, width, width, max_cells, min_cells, waste),
        "pack": lambda: [pack([encoded[i] for i in sel], "meta") for sel in byte_chunks],
        "cut by tokens": lambda: split(np.asarray(order)[np.argsort(tokens[order], kind="stable")], width, tokens,
                                       max_cells, min_cells, waste),
    }
    byte_chunks = steps["cut by bytes"]()
    pack(encoded[:1], "meta")  # (the meta device's first call sets it up)
    n = len(sources)
    per_program = {name: median / n * 1e6 for name, (median, _, _) in alternating(steps, args.repeats).items()}
    print(f"host-cost: {n:,} programs ({args.n:,} generated, {args.copies} copies), {len(byte_chunks)} byte chunks on a "
          f"CUDA device's path, median of {args.repeats}")
    for name, us in per_program.items():
        print(f"  {name:<16}{us:8.3f} us a program")
    total = sum(per_program.values())
    print(f"  {'total':<16}{total:8.3f} us a program: at most {1e6 / total:,.0f} programs/s on any device")
    return 0
