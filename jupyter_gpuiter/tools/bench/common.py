"""Shared benchmark plumbing: timing, machine description, JSON output."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch


def machine(device) -> dict:
    info = {"python": platform.python_version(), "torch": torch.__version__, "cpu": platform.processor() or
            platform.machine(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(), "device": str(device),
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    if torch.device(device).type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def device_sync(device):
    """What `timed` and `alternating` take as `sync` for `device`: CUDA's synchronize, else None."""
    dev = torch.device(device)
    return (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else None


def tool_parser(name: str, doc: str):
    """The argument parser of the measurement tool `gpuiter bench NAME` (its module docstring's first paragraph
    as the description, the rest as the epilog)."""
    first, _, rest = doc.partition("\n\n")
    return argparse.ArgumentParser(prog=f"gpuiter bench {name}", description=" ".join(first.split()),
                                   epilog=rest.strip() or None,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def timed(fn, repeats: int, sync=None) -> tuple[float, list[float], object]:
    """Median wall time of `repeats` calls (after the caller's warm-up), all times, last result."""
    return alternating({"fn": fn}, repeats, sync)["fn"]


def alternating(fns: dict, repeats: int, sync=None) -> dict[str, tuple[float, list[float], object]]:
    """`timed` for several functions measured in rounds, each round calling every function once in
    order, so that a machine whose speed drifts during the run (shared machines do, by ±5-15% over
    seconds) weighs on all of them alike: per name, (median, all times, last result)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    results: dict[str, object] = {}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            results[name] = fn()
            if sync is not None:
                sync()
            times[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(t), t, results[name]) for name, t in times.items()}


def write_json(data: dict, path: str | os.PathLike) -> Path:
    """Write `data` as JSON to `path`, atomically: into a temporary file beside it, then renamed over it. A
    symlink at `path` is replaced by the file, never written through (a results folder holding a link to
    another file must not overwrite that file), and a reader never sees half a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=2) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(f.fileno(), 0o666 & ~umask)  # as a new file gets (mkstemp's is 0o600)
            f.write(text)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return p
