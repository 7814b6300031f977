"""Native CUDA kernels: the shape of the generated CUDA C, and on a GPU, CuPy running it against the CPU reference
(runtime/reference.py): bit for bit where every op is exact, within a few units in the last place elsewhere.
(tests/test_cuda_nvrtc.py compiles the same source with NVRTC, no GPU needed.)"""

import numpy as np
import pytest
from cuda_programs import COMPUTE_OPS, const_program, inputs, op_program

from jupyter_gpuiter import compile_batch
from jupyter_gpuiter.lang import generate
from jupyter_gpuiter.runtime import reference
from jupyter_gpuiter.runtime.cuda import cuda_source, launch

#: Ops whose results come from a math library: CUDA's and NumPy's differ by a few units in the last place
#: (copysign too: the sign of a nan made by 0/0 is not portable). Every other op is exact in both.
LIBRARY_OPS = {"pow", "exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan",
               "atan2", "sinh", "cosh", "tanh", "erf", "sigmoid", "hypot", "copysign"}
#: (rtol, atol) for programs with library ops; a generated program may amplify a difference (cancellation, a
#: comparison that flips), so 1% of its elements may differ, against 0.1% for one op alone.
TOLERANCES = {"float16": (4e-3, 1e-4), "float32": (1e-5, 1e-6), "float64": (1e-12, 1e-14)}
N = 4099  # not a multiple of the block size


def _programs(n, seed):
    return list(compile_batch(generate.generate_batch(n, seed, params=(0, 4)), mode="serial").results)


def test_source_shape():
    p = _programs(1, 1)[0]
    src = cuda_source(p, "float32", "my_kernel")
    assert 'extern "C" __global__ void my_kernel(' in src and "out[i] =" in src
    assert src.count("const C r") == len(p.ops) - 1


def test_bfloat16_is_refused_with_a_reason():
    with pytest.raises(ValueError, match="CuPy has no bfloat16"):
        launch(op_program("add"), [], "bfloat16")


def _mismatches(p, got, want, dtype) -> tuple[np.ndarray, float]:
    """Per element: whether got and want differ (beyond the tolerance where the program calls a library op), and
    the share of elements allowed to."""
    if want.dtype == bool:
        return got != want, 0.0 if not set(p.ops) & LIBRARY_OPS else 0.01
    g, w = got.astype(np.float64), want.astype(np.float64)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    if not set(p.ops) & LIBRARY_OPS:
        return ~same, 0.0
    rtol, atol = TOLERANCES[dtype]
    return ~(same | np.isclose(g, w, rtol=rtol, atol=atol)), 0.001 if len(p.ops) <= 5 else 0.01


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_native_kernels_agree_with_the_reference(dtype):
    cupy = pytest.importorskip("cupy")
    from jupyter_gpuiter.runtime.cuda import compile_kernels

    progs = [op_program(op) for op in COMPUTE_OPS] + _programs(30, 11)
    compile_kernels(progs, dtype)  # one NVRTC call for all of them
    rng = np.random.default_rng(0)
    report = []
    for p in progs:
        xs = [inputs(rng, dtype, N) for _ in range(p.n_params)]
        got = cupy.asnumpy(launch(p, [cupy.asarray(x) for x in xs], dtype))
        want = reference.evaluate(p, xs, dtype)
        assert got.shape == want.shape and got.dtype == want.dtype, p.text()
        bad, allowed = _mismatches(p, np.atleast_1d(got), np.atleast_1d(want), dtype)
        if bad.mean() > allowed:
            i = int(np.flatnonzero(bad)[0])
            report.append(f"{bad.sum()}/{bad.size} differ; first at inputs {[float(x[i]) for x in xs]}: got "
                          f"{np.atleast_1d(got)[i]!r}, want {np.atleast_1d(want)[i]!r}\n{p.text()}")
    assert not report, f"{len(report)} of {len(progs)} programs:\n\n" + "\n\n".join(report[:10])


@pytest.mark.gpu
def test_launch_on_empty_and_scalar_inputs():
    cupy = pytest.importorskip("cupy")
    empty = cupy.zeros((0, 3), dtype=cupy.float32)
    assert launch(op_program("add"), [empty, empty], "float32").shape == (0, 3)
    got = launch(const_program(2.5), [], "float64")
    assert got.shape == () and float(got) == 2.5
