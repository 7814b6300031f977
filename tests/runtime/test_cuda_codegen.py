"""Native CUDA kernels: the shape of the generated CUDA C, and on a GPU, CuPy running it against the CPU reference
(runtime/reference.py): bit for bit where every op is exact, within a few units in the last place elsewhere.
(tests/runtime/test_cuda_nvrtc.py compiles the same source with NVRTC, no GPU needed.)"""

import pytest

from jupyter_gpuiter import compile_batch, generate
from jupyter_gpuiter.runtime.cuda import cuda_source, launch
from tests.support.cuda_programs import COMPUTE_OPS, chain_programs, const_program, disagreements, op_program


def _programs(n, seed):
    """Generated elementwise programs (row kernels: tests/runtime/test_cuda_rows.py)."""
    results = compile_batch(generate.generate_batch(n, seed, params=(0, 4)), mode="serial").results
    return [p for p in results if not p.reduces]


def test_source_shape():
    p = _programs(4, 1)[0]
    src = cuda_source(p, "float32", "my_kernel")
    assert 'extern "C" __global__ void my_kernel(' in src and "out[i] =" in src
    assert src.count("const C r") == len(p.ops) - 1


def test_bfloat16_is_refused_with_a_reason():
    with pytest.raises(ValueError, match="CuPy has no bfloat16"):
        launch(op_program("add"), [], "bfloat16")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_native_kernels_agree_with_the_reference(dtype):
    cupy = pytest.importorskip("cupy")
    from jupyter_gpuiter.runtime.cuda import compile_kernels

    progs = [op_program(op) for op in COMPUTE_OPS] + chain_programs() + _programs(30, 11)
    compile_kernels(progs, dtype)  # one NVRTC call for all of them
    report = disagreements(progs, lambda p, xs: cupy.asnumpy(launch(p, [cupy.asarray(x) for x in xs], dtype)),
                           dtype)
    assert not report, f"{len(report)} of {len(progs)} programs:\n\n" + "\n\n".join(report[:10])


@pytest.mark.gpu
def test_launch_on_empty_and_scalar_inputs():
    cupy = pytest.importorskip("cupy")
    empty = cupy.zeros((0, 3), dtype=cupy.float32)
    assert launch(op_program("add"), [empty, empty], "float32").shape == (0, 3)
    got = launch(const_program(2.5), [], "float64")
    assert got.shape == () and float(got) == 2.5
