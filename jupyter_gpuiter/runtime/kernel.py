"""Kernel: a compiled program you can call on arrays (NumPy in, NumPy out; torch in, torch out)."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..ir import Program
from . import fused
from .reference import check_rows
from .render import TORCH_DTYPES, torch_function

DTYPES = tuple(TORCH_DTYPES)
_TORCH_OF = {np.float32: torch.float32, np.float64: torch.float64}


class Kernel:
    """A compiled kernel. Call it with one array (or scalar) per parameter, broadcast together.

    NumPy arrays in give a NumPy array out (bfloat16 results as float32, NumPy has no bfloat16); torch
    tensors in give a tensor on the same device; CuPy arrays in give a CuPy array. Arithmetic happens in
    the kernel dtype. A row kernel (one with a reduction, docs/language.md "Row kernels") reduces along the
    last axis of the broadcast shape; its result has that shape, or drops the last axis when it is per
    row, and an empty last axis or scalars only raise ValueError.

    >>> from jupyter_gpuiter import compile
    >>> k = compile("def f(x, y):\\n    return x * y + 1", mode="serial")
    >>> k(np.array([1.0, 2.0]), 3.0)
    array([4., 7.], dtype=float32)
    """

    def __init__(self, program: Program, source: str = "", mode: str = "serial", dtype: str = "float32"):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
        self.program, self.source, self.mode, self.dtype = program, source, mode, dtype
        self._fn = None  # the torch function (devices without the fused evaluator), rendered on first use
        self._arrays = None  # the program for the fused evaluator, packed on first use
        self._digest = None

    @property
    def arrays(self) -> fused.ProgramArrays:
        """The program packed for the fused evaluator (once per Kernel)."""
        if self._arrays is None:
            self._arrays = fused.ProgramArrays.from_programs([self.program])
        return self._arrays

    @property
    def digest(self) -> str:
        """SHA-256 of the program's canonical text: what identifies it as a reference (computed once)."""
        if self._digest is None:
            self._digest = self.program.digest()
        return self._digest

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
        kinds = {type(a).__module__.split(".")[0] for a in args}
        if kinds == {"cupy"} and self.dtype != "bfloat16":
            return self._native(args)
        tensors = [_to_tensor(a) for a in args]
        devices = {t.device for t in tensors if t.dim() > 0} or {t.device for t in tensors} or {torch.device("cpu")}
        if len(devices) > 1:
            raise ValueError(f"{self.name}(): arguments are on different devices: {sorted(map(str, devices))}")
        dev = devices.pop()
        tensors = [t.to(dev) for t in tensors]
        try:
            torch.broadcast_shapes(*[t.shape for t in tensors])
        except RuntimeError:
            shapes = ", ".join(str(tuple(t.shape)) for t in tensors)
            raise ValueError(f"{self.name}(): argument shapes {shapes} do not broadcast together") from None
        if self.program.reduces:
            check_rows(self.name, tuple(torch.broadcast_shapes(*[t.shape for t in tensors])))
        if dev.type == "cpu":
            out = self._fused(tensors)
        else:
            if self._fn is None:
                self._fn = torch_function(self.program, self.dtype)
            out = self._fn(*tensors) if tensors else self._fn()
        if "torch" in kinds:
            return out
        if "cupy" in kinds:
            import cupy

            return cupy.asarray(out)
        if out.dtype == torch.bfloat16:
            out = out.float()
        return out.cpu().numpy()

    def _fused(self, tensors: list[torch.Tensor]) -> torch.Tensor:
        """CPU arrays: the fused tile evaluator (an interpreter compiled once, nothing per kernel); a row kernel
        over the broadcast inputs as rows of the last axis."""
        tdt = TORCH_DTYPES[self.dtype]
        shape = torch.broadcast_shapes(*[t.shape for t in tensors]) if tensors else torch.Size()
        n = math.prod(shape)
        reg = fused.REGISTER_DTYPE[self.dtype]
        x = np.empty((len(tensors), n), dtype=reg)
        for i, t in enumerate(tensors):
            x[i] = t.to(tdt).to(_TORCH_OF[reg]).expand(shape).reshape(-1).numpy()
        row = shape[-1] if self.program.reduces else 0
        out = torch.from_numpy(fused.evaluate(self.arrays, x, self.dtype, row=row)[0]).reshape(shape)
        if self.program.returns_per_row():
            out = out[..., 0].contiguous()
        return out != 0 if self.program.returns_bool() else out.to(tdt)

    def _native(self, args):
        """CuPy in: the native CUDA kernel (CUDA C through NVRTC), CuPy out."""
        import cupy

        from .cuda import launch

        arrays = cupy.broadcast_arrays(*[cupy.asarray(a, dtype=self.dtype) for a in args])
        return launch(self.program, arrays, self.dtype)

    def __repr__(self) -> str:
        return f"<Kernel {self.name}({', '.join(self.params)}) mode={self.mode} dtype={self.dtype}>"


def _to_tensor(a) -> torch.Tensor:
    if isinstance(a, torch.Tensor):
        return a
    if type(a).__module__.split(".")[0] == "cupy":
        return torch.as_tensor(a, device="cuda")
    arr = np.asarray(a)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"kernel arguments must be numeric arrays or scalars, got {arr.dtype}")
    return torch.as_tensor(arr)
