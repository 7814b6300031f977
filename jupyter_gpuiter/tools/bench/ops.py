"""`gpuiter bench ops`: per-element cost of the tensor operations the traditional compiler is made of, by
dtype.

    gpuiter bench ops [--rows 500] [--cols 200] [--threads 2] [--device cpu]

Prints microseconds per call on a [rows, cols] array (the size of a token array in one chunk), the
median of repeated calls. docs/compiler.md and docs/performance.md quote it: it is why the passes work
in int32 and avoid full-mask `where`, int64 reductions and bool-mask multiplies on a CPU.
"""

from __future__ import annotations

import torch

from .common import device_sync, timed, tool_parser


def main(argv: list[str] | None = None) -> int:
    ap = tool_parser("ops", __doc__)
    ap.add_argument("--rows", type=int, default=500)
    ap.add_argument("--cols", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    sync = device_sync(dev)

    def us(fn, repeats: int = 50) -> float:
        """Median microseconds a call, after one call to warm up."""
        fn()
        return timed(fn, repeats, sync)[0] * 1e6

    shape = (args.rows, args.cols)
    gen = torch.Generator().manual_seed(0)
    mask = (torch.rand(shape, generator=gen) > 0.5).to(dev)
    regular = (torch.arange(args.cols) % 8 == 0).expand(shape).contiguous().to(dev)
    idx = torch.randint(0, args.cols, shape, generator=gen).to(dev)
    dtypes = (torch.int64, torch.int32, torch.int16)
    values = {dt: torch.randint(0, 100, shape, generator=gen).to(dev, dt) for dt in dtypes}
    others = {dt: torch.randint(0, 100, shape, generator=gen).to(dev, dt) for dt in dtypes}
    ops = {
        "a + b": lambda a, b: a + b,
        "a * b": lambda a, b: a * b,
        "a == b (bool)": lambda a, b: a == b,
        "~(a ^ b).bool() (common.eq)": lambda a, b: ~(a ^ b).bool(),
        "minimum(a, b)": lambda a, b: torch.minimum(a, b),
        "a.amin(1)": lambda a, b: a.amin(1),
        "a.cumsum(1, dtype=a.dtype)": lambda a, b: a.cumsum(1, dtype=a.dtype),
        "a.cummax(1)": lambda a, b: a.cummax(1).values,
        "a.gather(1, int64 index)": lambda a, b: a.gather(1, idx),
        "a * bool mask": lambda a, b: a * mask,
        "where(random mask, a, b)": lambda a, b: torch.where(mask, a, b),
        "where(regular mask, a, b)": lambda a, b: torch.where(regular, a, b),
        "(a - b).mul_(mask).add_(b)": lambda a, b: (a - b).mul_(mask).add_(b),
    }
    print(f"us per call on {shape} ({shape[0] * shape[1]:,} elements), {args.threads} threads, {dev}")
    print(f"{'operation':30}" + "".join(f"{str(dt).removeprefix('torch.'):>9}" for dt in dtypes))
    for name, op in ops.items():
        cells = [us(lambda dt=dt, op=op: op(values[dt], others[dt])) for dt in dtypes]
        print(f"{name:30}" + "".join(f"{c:9.1f}" for c in cells))
    flat = idx.view(-1)
    print(f"{'index_select(int32 index)':30}{us(lambda: values[torch.int32].view(-1).index_select(0, flat.int())):27.1f}")
    print(f"{'.long() + gather':30}{us(lambda: values[torch.int32].gather(1, idx.int().long())):27.1f}")
    rows = (torch.arange(shape[0], dtype=torch.int32, device=dev) * shape[1])[:, None]
    idx32 = idx.int()
    print(f"{'+ row offsets, index_select':30}"
          f"{us(lambda: values[torch.int32].view(-1).index_select(0, (idx32 + rows).view(-1))):27.1f}")
    tiny, other = values[torch.int32][0, :4].clone(), others[torch.int32][0, :4].clone()
    print(f"{'a + b on 4 elements (a call)':30}{us(lambda: tiny + other, 2000):27.2f}")
    print(f"{'a + 3 on 4 elements':30}{us(lambda: tiny + 3, 2000):27.2f}")
    print(f"{'bool mask.any(1)':30}{us(lambda: mask.any(1)):27.1f}")
    # the same array as one flat stream of segments (a row each), as flat token streams would hold it
    a32 = values[torch.int32]
    stream = a32.view(-1)
    seg = torch.arange(shape[0], dtype=torch.int32, device=dev).repeat_interleave(shape[1])
    seg64, starts = seg.long(), (torch.arange(shape[0], device=dev) * shape[1])

    def segmented_cumsum():
        c = stream.cumsum(0, dtype=torch.int32)
        return c - (c.index_select(0, starts) - stream.index_select(0, starts)).index_select(0, seg)

    print(f"{'row cumsum (int32)':30}{us(lambda: a32.cumsum(1, dtype=torch.int32)):27.1f}")
    print(f"{'flat cumsum less segment base':30}{us(segmented_cumsum):27.1f}")
    print(f"{'row amin (int32)':30}{us(lambda: a32.amin(1)):27.1f}")
    print(f"{'scatter_reduce amin by segment':30}"
          f"{us(lambda: a32.new_full((shape[0],), 1 << 30).scatter_reduce_(0, seg64, stream, 'amin')):27.1f}")
    print(f"{'mask.view(uint8).amax(1)':30}{us(lambda: mask.view(torch.uint8).amax(1)):27.1f}")
    return 0
