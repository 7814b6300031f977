"""Pass 0 (host): sources -> one padded byte tensor [B, L] on the device. The only upload of data (regroup.py
uploads row indices).

Cost: one UTF-8 encode per source (skipped for bytes), one C-speed pad per source, one join, one copy.
Chunks are length-homogeneous (see compile_to_batches), so padding each source to the chunk's width
costs little and beats scattering the bytes into place (about 8x on 4,096 generated programs).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def encode(source: str) -> bytes:
    """A source's UTF-8 bytes as the compiler reads them (lone surrogates encoded, as the serial compiler sizes sources)."""
    return source.encode("utf-8", errors="surrogatepass")


def pack(sources: Sequence[str | bytes], device) -> tuple[torch.Tensor, torch.Tensor]:
    """(bytes [B, L] uint8 zero-padded, lengths [B] int64) on `device`. L >= 1. Sources are str, or
    bytes already encoded by `encode`."""
    encoded = [s if isinstance(s, bytes) else encode(s) for s in sources]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    width = int(lengths.max(initial=0)) + 1
    padded = bytearray(b"".join([e.ljust(width, b"\0") for e in encoded]))  # writable: torch shares it
    out = np.frombuffer(padded, dtype=np.uint8).reshape(len(encoded), width)
    return torch.from_numpy(out).to(device), torch.from_numpy(lengths).to(device)
