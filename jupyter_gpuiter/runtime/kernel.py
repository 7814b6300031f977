"""Kernel: a compiled program you can call on arrays (NumPy in, NumPy out; torch in, torch out)."""

from __future__ import annotations

import numpy as np

from ..ir import Program
from .reference import evaluate

DTYPES = ("float32", "float64", "float16", "bfloat16")


class Kernel:
    """A compiled elementwise function. Call it with one array (or scalar) per parameter.

    >>> from jupyter_gpuiter import compile
    >>> k = compile("def f(x, y):\\n    return x * y + 1", mode="serial")
    >>> k(np.array([1.0, 2.0]), 3.0)
    array([4., 7.], dtype=float32)
    """

    def __init__(self, program: Program, source: str = "", mode: str = "serial", dtype: str = "float32"):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        self.program, self.source, self.mode, self.dtype = program, source, mode, dtype

    @property
    def name(self) -> str:
        return self.program.name

    @property
    def params(self) -> list[str]:
        return list(self.program.param_names)

    def ir(self) -> str:
        return self.program.text()

    def __call__(self, *args):
        if len(args) != self.program.n_params:
            raise TypeError(f"{self.name}() takes {self.program.n_params} arguments "
                            f"({', '.join(self.params)}), got {len(args)}")
        torch_like = next((a for a in args if type(a).__module__.startswith("torch")), None)
        host = [a.detach().cpu().numpy() if type(a).__module__.startswith("torch") else a for a in args]
        try:
            np.broadcast_shapes(*[np.shape(a) for a in host])
        except ValueError:
            shapes = ", ".join(str(np.shape(a)) for a in host)
            raise ValueError(f"{self.name}(): argument shapes {shapes} do not broadcast together") from None
        dtype = "float32" if self.dtype == "bfloat16" else self.dtype
        out = evaluate(self.program, host, dtype)
        if torch_like is not None:
            import torch

            return torch.from_numpy(np.ascontiguousarray(out)).to(torch_like.device)
        return out

    def __repr__(self) -> str:
        return f"<Kernel {self.name}({', '.join(self.params)}) mode={self.mode} dtype={self.dtype}>"
