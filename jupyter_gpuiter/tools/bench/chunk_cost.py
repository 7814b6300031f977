"""`gpuiter bench chunk-cost`: what one chunk costs by its size: the fixed part every chunk pays, whatever
its size, and what each program adds, and how many chunks a worker pays it for (docs/performance.md).

    gpuiter bench chunk-cost [--device cpu] [--sizes 4,16,64,256,512] [--threads 1] [--repeats 25]
                             [--part 4096] [--workers 2]

Each size is a chunk of that many generated programs of the batch's median length (seed 0), compiled
through every pass (`compile_chunk`: pack and lex, then the token passes on the same rows) `--repeats`
times; the median of all but the first five is printed, per chunk and per program. On a CPU the
default is one intra-op thread, as in a worker process. The smallest chunk's time is nearly all fixed
cost: the passes' few thousand tensor calls, which cost the same for one program as for hundreds.

Then how many chunks pay it, and what it is at their size: the first worker's part of a
`--part`-program batch shared out to `--workers` processes, cut as that worker cuts it (lexing chunks
by byte length, then token chunks regrouped by token count), with the padding of each (cells over the
rows' own bytes or tokens); and the time of lexing, and of the token passes, over those chunks in a
row, over the same rows cut in twice as many chunks (each chunk's every other row), and over chunks
twice as large (each chunk's rows twice over: no more padding), in alternating rounds (`--repeats` //
5 of them, at least 3). What the halves add per chunk is what a chunk costs at that size for being one
more; what the doubled chunks save against twice the time, what a chunk twice as large would save.
"""

from __future__ import annotations

import numpy as np
import torch

from ...compilers import traditional
from ...compilers.traditional import driver
from ...compilers.traditional.pack import encode
from ...compilers.traditional.plan import split
from ...compilers.traditional.regroup import regroup
from ...generate import generate_batch
from .common import alternating, device_sync, timed, tool_parser


def main(argv: list[str] | None = None) -> int:
    ap = tool_parser("chunk-cost", __doc__)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--sizes", default="4,16,64,256,512")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=25)
    ap.add_argument("--part", type=int, default=4096)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    if args.workers < 1 or args.repeats < 1:
        ap.error("--workers and --repeats take a whole number of at least 1")
    dev = torch.device(args.device)
    if dev.type == "cpu":
        torch.set_num_threads(args.threads)
    sync = device_sync(dev)
    sizes = [int(s) for s in args.sizes.split(",")]
    n = max(4096, 2 * max(sizes))
    by_length = sorted((encode(s) for s in generate_batch(n, 0, rows=0)), key=len)
    mid = n // 2 - max(sizes) // 2  # programs of about the median length
    warm = max(1, min(5, args.repeats - 1))
    counted = max(1, args.repeats - warm)
    print(f"chunk-cost: chunks of generated programs of about {len(by_length[n // 2])} bytes on {dev}"
          + (f", {torch.get_num_threads()} thread(s)" if dev.type == "cpu" else ""))
    for size in sizes:
        chunk = by_length[mid:mid + size]
        passes: dict[str, float] = {}
        timed(lambda chunk=chunk: traditional.compile_chunk(chunk, dev), warm, sync)  # warm-up
        t, _, _ = timed(lambda chunk=chunk, passes=passes: traditional.compile_chunk(chunk, dev, timings=passes),
                        counted, sync)
        print(f"  {size:6d} programs {sum(map(len, chunk)):9,d} bytes  {t * 1e3:8.2f} ms a chunk  "
              f"{t / size * 1e6:9.1f} us a program   (" + ", ".join(f"{name} {v / counted * 1e3:.2f}"
                                                          for name, v in passes.items()) + " ms)")
    if args.part:
        split_of_a_part(args.part, args.workers, dev, args.repeats)
    return 0


def split_of_a_part(n: int, workers: int, dev: torch.device, repeats: int) -> None:
    """Print the chunks the first of `workers` processes cuts its part of n generated programs into, and
    their time as cut, halved and doubled."""
    encoded = [encode(s) for s in generate_batch(n, 0, rows=0)]
    sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
    part = [encoded[i] for i in np.argsort(sizes, kind="stable").tolist()[0::workers]]
    width = np.fromiter(map(len, part), dtype=np.int64, count=len(part)) + 1
    max_cells = traditional.chunk_cells(dev) // workers
    min_cells, waste = traditional.chunk_closing(dev, max_cells)
    lexing = split(list(range(len(part))), width, width, max_cells, min_cells, waste)
    lexed = [(sel, driver._lex_chunk([part[i] for i in sel], dev)) for sel in lexing]
    groups = [tk for _, tk in driver._regrouped(lexed, width, max_cells, min_cells, waste, dev, None)]
    shapes = [(tk.kind.shape, sum(tk.row_tokens)) for tk in groups]
    byte_cells = sum(len(sel) * int(width[sel].max()) for sel in lexing)
    token_cells = sum(rows * cols for (rows, cols), _ in shapes)
    print(f"a part of {n} programs for {workers} workers: {len(part)} programs, {int(width.sum()):,} bytes")
    print(f"  lexing: {len(lexing)} chunks of {min(map(len, lexing))}-{max(map(len, lexing))} programs, "
          f"{byte_cells / width.sum():.3f}x its bytes in cells")
    # neighbouring chunks merged in pairs: the rows of both, as wide as the wider (chunks come by token count)
    paired = sum((shapes[k][0][0] + (shapes[k + 1][0][0] if k + 1 < len(shapes) else 0))
                 * shapes[min(k + 1, len(shapes) - 1)][0][1] for k in range(0, len(shapes), 2))
    print(f"  token passes: {len(shapes)} chunks of {min(s[0] for s, _ in shapes)}-{max(s[0] for s, _ in shapes)} "
          f"programs, {token_cells / sum(t for _, t in shapes):.3f}x its tokens in cells "
          f"(chunks {min(r * c for (r, c), _ in shapes):,}-{max(r * c for (r, c), _ in shapes):,} token cells; "
          f"merged in pairs, {paired / token_cells:.3f}x these cells)")

    def halves(rows: int) -> list[list[int]]:
        return [h for h in (list(range(0, rows, 2)), list(range(1, rows, 2))) if h]

    with torch.inference_mode():
        half_lexing = [[part[sel[j]] for j in h] for sel in lexing for h in halves(len(sel))]
        half_groups = [regroup([(tk, h)], int(tk.data_padded.shape[1]) - 2)
                       for tk in groups for h in halves(tk.kind.shape[0])]
        double_groups = [regroup([(tk, list(range(tk.kind.shape[0])) * 2)], int(tk.data_padded.shape[1]) - 2)
                         for tk in groups]
    whole_lexing = [[part[i] for i in sel] for sel in lexing]
    runs = {"lexing": (whole_lexing, half_lexing, [c * 2 for c in whole_lexing],
                       lambda chunk: driver._lex_chunk(chunk, dev)),
            "token passes": (groups, half_groups, double_groups, lambda tk: driver._token_passes(tk, dev))}
    for name, (*cuts, fn) in runs.items():
        calls = {k: (lambda chunks=chunks, fn=fn: [fn(chunk) for chunk in chunks]) for k, chunks in enumerate(cuts)}
        medians = alternating(calls, max(3, repeats // 5), device_sync(dev))
        whole, halved, doubled = (medians[k][0] for k in range(len(cuts)))
        n, n_halves = len(cuts[0]), len(cuts[1])
        print(f"  {name}: {whole * 1e3:.1f} ms over its {n} chunks; {halved * 1e3:.1f} ms over {n_halves} halves "
              f"({(halved - whole) / (n_halves - n) * 1e3:+.2f} ms a chunk more); {doubled * 1e3:.1f} ms over them doubled "
              f"({(2 * whole - doubled) / n * 1e3:.2f} ms a chunk saved against twice the time)")
