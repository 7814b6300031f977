"""The Python side of the row kernels' launches, without a GPU: `cuda.launch` and `fused_cuda.evaluate/compare(row=n)`
run with a host stand-in for CuPy (`host_cupy`: NumPy arrays; RawModule compiles the source with g++ and
tests/runtime/test_cuda_rows.py's SIMT stand-ins; a launch checks every argument's C type against the kernel's
signature, then runs the blocks on threads). What a GPU run would get wrong in the glue (an argument out of order,
an int where a long long goes, a stride in bytes, an output of the wrong shape, a result not read back) shows here.
Small blocks for the host: the native kernels with 16 threads, the fused kernel's teams of 1 to 4 lanes or the
whole block of 16 (warps of 4)."""

import contextlib
import ctypes
import re
import types

import numpy as np
import pytest
import torch

from jupyter_gpuiter.compilers.serial import compile_source
from jupyter_gpuiter.runtime import cuda, fused, fused_cuda
from tests.runtime.test_cuda_rows import EXTRA, build, row_mismatches
from tests.support.row_kernels import REAL


class _Array(np.ndarray):
    """A NumPy array with CuPy's .get()."""

    def get(self):
        return np.asarray(self)


def host_cupy(tmp_path, cxx) -> types.ModuleType:
    """What runtime/cuda.py and runtime/fused_cuda.py take from CuPy, on the host."""
    m = types.ModuleType("cupy")
    for name in ("int64", "int32", "float64", "float32", "float16", "uint64", "asarray", "broadcast_to",
                 "ascontiguousarray", "broadcast_arrays"):
        setattr(m, name, getattr(np, name))
    m.full = lambda *a, **k: np.full(*a, **k).view(_Array)
    m.zeros = lambda *a, **k: np.zeros(*a, **k).view(_Array)
    m.from_dlpack = np.from_dlpack
    m.cuda = types.SimpleNamespace(Device=lambda *a: contextlib.nullcontext(),
                                   ExternalStream=lambda *a: contextlib.nullcontext())
    modules = []

    class RawModule:
        def __init__(self, code: str, options=()):
            defines = "".join(f"#define {o[2:].replace('=', ' ', 1)}\n" for o in options if o.startswith("-D"))
            self.signatures, wrappers = {}, []
            for k in re.finditer(r'extern "C" __global__ void (\w+)\(([^)]*)\)', code):
                params = [p.replace("__restrict__", "").strip() for p in k.group(2).split(",")]
                kinds = [p[: len(p) - len(p.split()[-1].lstrip("*"))].strip() for p in params]
                self.signatures[k.group(1)] = kinds
                unpack = ", ".join(f"*({t}*)a[{i}]" for i, t in enumerate(kinds))
                wrappers.append(f'extern "C" int call_{k.group(1)}(void** a, long long grid, long long block) '
                                f"{{ return gi_launch(grid, block, [&] {{ {k.group(1)}({unpack}); }}); }}")
            self.so = build(tmp_path, cxx, defines + code + "\n" + "\n".join(wrappers), f"module{len(modules)}")
            modules.append(self)

        def get_function(self, name):
            kinds = self.signatures[name]
            c_types = {"long long": (np.int64, ctypes.c_longlong), "int": (np.int32, ctypes.c_int),
                       "double": (np.float64, ctypes.c_double)}

            def launch(grid, block, args, shared_mem=0):
                assert len(args) == len(kinds), (name, len(args), kinds)
                values = []
                for kind, a in zip(kinds, args):
                    if kind.endswith("*"):
                        assert isinstance(a, np.ndarray), (name, kind, type(a))
                        values.append(ctypes.c_void_p(a.ctypes.data))
                    else:
                        want, c_type = c_types[kind]
                        assert type(a) is want, (name, kind, type(a))
                        values.append(c_type(a.item()))
                pointers = (ctypes.c_void_p * len(values))(*[ctypes.addressof(v) for v in values])
                hung = getattr(self.so, f"call_{name}")(pointers, ctypes.c_longlong(grid[0]),
                                                         ctypes.c_longlong(block[0]))
                assert hung == 0, "a barrier or a shuffle waited for a thread that never came"

            return launch

    m.RawModule = RawModule
    return m


@pytest.fixture
def on_host(cxx, tmp_path, monkeypatch):
    fake = host_cupy(tmp_path, cxx)
    monkeypatch.setitem(__import__("sys").modules, "cupy", fake)
    # the stand-in compiles the source itself (cuda.load_module's NVRTC cubin is for a GPU: test_cuda_nvrtc.py)
    for module in (cuda, fused_cuda):
        monkeypatch.setattr(module, "load_module", lambda source, options=cuda.NVRTC_OPTIONS: fake.RawModule(source,
                                                                                                          options))
    monkeypatch.setattr(cuda, "_KERNELS", {})
    monkeypatch.setattr(cuda, "ROW_THREADS", 16)  # warps of 4 on the host: 4 of them
    monkeypatch.setattr(cuda, "ROW_WARP", 4)
    monkeypatch.setattr(fused_cuda, "_KERNELS", {})
    monkeypatch.setattr(fused_cuda, "THREADS", 16)
    monkeypatch.setattr(fused_cuda, "row_team", lambda row: 16 if row > 8 else min(4, 1 << max(0, row - 1).bit_length()))
    monkeypatch.setattr(fused_cuda, "_on_cuda", lambda x: None)
    monkeypatch.setattr(fused_cuda, "_on", lambda x: contextlib.nullcontext())


def test_launch_lays_out_rows_and_reads_broadcasts_in_place(on_host):
    rng = np.random.default_rng(0)
    for name in ("softmax", "layernorm", "logsumexp", "cosine_similarity"):
        p = compile_source(REAL[name][0])
        # layer norm in float64: `* gamma + beta` cancels near 0, where float32's check (a few units of the result)
        # would see the order of the mean's sum, which the team size changes
        dtype = "float64" if name == "layernorm" else "float32"
        for n in (1, 3, 4, 7, 33):  # teams of 1 and 4 lanes (4 and 16 rows a block of 16), blocks of 8 and 16
            xs = [rng.normal(0, 3, (3, 5, n)).astype(dtype) for _ in range(p.n_params)]
            if p.n_params == 3:
                xs[1], xs[2] = xs[1][0, 0], np.asarray(0.5, dtype)  # [n] and a scalar, broadcast
            got = cuda.launch(p, xs, dtype)
            assert got.shape == ((3, 5) if p.returns_per_row() else (3, 5, n))
            assert not row_mismatches(p, np.asarray(got), xs, dtype).any(), (name, n)
    count = compile_source(EXTRA["count"])
    got = cuda.launch(count, [np.array([[1.0, -1.0, 2.0], [0.0, 0.0, -3.0]], np.float64)], "float64")
    assert got.dtype == np.float64 and got.tolist() == [2.0, 0.0]
    positive = compile_source(EXTRA["share_positive"])
    assert cuda.launch(positive, [np.array([[1, 1, -1], [1, -1, -1]], np.float16)], "float16").tolist() == [True, False]
    assert cuda.launch(count, [np.zeros((0, 4), np.float32)], "float32").shape == (0,)
    elementwise = compile_source("def f(x, y):\n    return x * y + 1\n")  # as before
    x = rng.normal(size=(2, 3000)).astype(np.float32)
    assert np.array_equal(cuda.launch(elementwise, [x[0], x[1]], "float32"), x[0] * x[1] + 1)


def test_fused_cuda_on_rows_runs_as_fused(on_host):
    progs = [compile_source(s) for s, _, _ in REAL.values()] + [compile_source(s) for s in EXTRA.values()]
    arrays = fused.ProgramArrays.from_programs(progs)
    rng = np.random.default_rng(1)
    for row in (1, 3, 33):
        x = rng.normal(0, 3, (3, 6 * row)).astype(np.float32)
        x[0] = np.abs(x[0]) + 0.01
        got = fused_cuda.evaluate(arrays, torch.from_numpy(x), "float32", row=row).numpy()
        cpu = fused.evaluate(arrays, x, "float32", row=row)
        same = np.all((got == cpu) | (np.isnan(got) & np.isnan(cpu)), axis=1)
        assert same.mean() > 0.8, np.flatnonzero(~same)
        want = cpu[0]
        for stop_early in (False, True):
            mine = fused_cuda.compare(arrays, torch.from_numpy(x), torch.from_numpy(want), "float32", 1e-5, 1e-6,
                                      stop_early, row=row)
            theirs = fused.compare(arrays, x, want, "float32", 1e-5, 1e-6, stop_early, row=row)
            assert np.array_equal(mine.first_failure[same], theirs.first_failure[same])
            if not stop_early:
                for field in ("failures", "evaluated", "max_abs_err", "max_rel_err", "max_ulp_err"):
                    assert np.array_equal(getattr(mine, field)[same], getattr(theirs, field)[same]), field
    elementwise = fused.ProgramArrays.from_programs([compile_source("def f(x, y):\n    return where(x > y, x, y)\n")])
    x = rng.normal(size=(2, 3000)).astype(np.float32)
    assert np.array_equal(fused_cuda.evaluate(elementwise, torch.from_numpy(x), "float32").numpy(),
                          fused.evaluate(elementwise, x, "float32"))
    c = fused_cuda.compare(elementwise, torch.from_numpy(x), torch.from_numpy(x[0]), "float32", 0.0, 0.0, False)
    assert c.failures.tolist() == [int((x[1] > x[0]).sum())] and c.evaluated.tolist() == [3000]
