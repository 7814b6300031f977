"""Pass 0 (host): sources -> one padded byte tensor [B, L] on the device. The only upload of data (regroup.py
uploads row indices).

Chunks are length-homogeneous (see compile_to_batches), so on a CPU padding each source to the chunk's
width on the host costs little: one UTF-8 encode, one C-speed pad per source and one join, which beats
scattering the bytes into place (about 8x on 4,096 generated programs). On a GPU the host's time per
program bounds the programs/s, so there the sources cross unpadded, in one join, and the device pads
them by one gather.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def encode(source: str) -> bytes:
    """A source's UTF-8 bytes as the compiler reads them (lone surrogates encoded, as the serial compiler sizes sources)."""
    return source.encode("utf-8", errors="surrogatepass")


def pack(sources: Sequence[str | bytes], device, padded_on_host: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(bytes [B, L] uint8 zero-padded, lengths [B] int64) on `device`. L >= 1. Sources are str, or
    bytes already encoded by `encode`. padded_on_host: pad on the host (None: on a CPU) or on the device."""
    device = torch.device(device)
    encoded = [s if isinstance(s, bytes) else encode(s) for s in sources]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    width = int(lengths.max(initial=0)) + 1
    if padded_on_host if padded_on_host is not None else device.type == "cpu":
        padded = bytearray().join([e.ljust(width, b"\0") for e in encoded])  # writable: torch shares it
        out = np.frombuffer(padded, dtype=np.uint8).reshape(len(encoded), width)
        return torch.from_numpy(out).to(device), torch.from_numpy(lengths).to(device)
    joined = bytearray().join(encoded)
    joined.append(0)  # read by the padding cells (and the buffer is never empty)
    flat = torch.frombuffer(joined, dtype=torch.uint8).to(device)
    n = torch.from_numpy(lengths).to(device)
    col = torch.arange(width, device=device)
    at = (torch.cumsum(n, 0) - n)[:, None] + col  # each cell's byte in the flat sources
    return flat[torch.where(col < n[:, None], at, flat.numel() - 1)], n
