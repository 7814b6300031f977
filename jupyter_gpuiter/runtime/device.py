"""Device selection: CUDA when torch sees one, else CPU; never crashes on a broken CUDA install."""

from __future__ import annotations

import functools

import torch


@functools.lru_cache(maxsize=1)
def cuda_available() -> bool:
    """True when a CUDA device is usable by torch (cheap; a driverless install reports False)."""
    try:
        return bool(torch.cuda.is_available()) and torch.cuda.device_count() > 0
    except Exception:  # noqa: BLE001 - a CUDA build without a driver can raise instead of returning False
        return False


def default_device() -> torch.device:
    return torch.device("cuda") if cuda_available() else torch.device("cpu")


def resolve(device=None) -> torch.device:
    """A torch.device from None ('auto'), a string or a device; an unusable CUDA request is an error."""
    if device is None or device == "auto":
        return default_device()
    dev = torch.device(device)
    if dev.type == "cuda" and not cuda_available():
        raise ValueError("CUDA was requested but no CUDA device is available; use device='cpu'")
    return dev
