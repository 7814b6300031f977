"""The `gpuiter` Jupyter kernel (docs/jupyter.md): an IPython kernel with the jupyter_gpuiter extension and
Session preloaded, its kernelspec and its installer.

    python -m jupyter_gpuiter.front.jupyter_kernel -f CONNECTION_FILE   # what the kernelspec runs
    gpuiter install-kernel [--user|--sys-prefix]          # install the spec (the wheel also ships it)

`GpuiterKernel` is imported lazily so that the spec and the installer do not load ipykernel.
"""

from __future__ import annotations

from .spec import DISPLAY_NAME, KERNEL_NAME, kernel_json

__all__ = ["DISPLAY_NAME", "KERNEL_NAME", "GpuiterKernel", "kernel_json"]


def __getattr__(name: str):
    if name == "GpuiterKernel":
        from .kernel import GpuiterKernel

        return GpuiterKernel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
