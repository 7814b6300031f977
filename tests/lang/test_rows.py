"""Row kernels in the language (docs/language.md, "Row kernels"): the serial compiler's IR, the per-row
typing, and the NumPy reference evaluator against NumPy's own reductions."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuiter.compilers.serial import compile_source
from jupyter_gpuiter.lang import spec
from jupyter_gpuiter.lang.errors import CompileError
from jupyter_gpuiter.runtime.reference import evaluate
from tests.support.row_kernels import REAL, ROW_LENGTHS, WRONG


def _rows(rng, n_params, rows, n, positive=False):
    xs = [rng.uniform(0.01, 1, (rows, n)) if positive else rng.normal(0, 3, (rows, n)) for _ in range(n_params)]
    return xs


@pytest.mark.parametrize("name", sorted(REAL))
@pytest.mark.parametrize("n", ROW_LENGTHS)
def test_real_row_kernels_match_numpy_in_float64(name, n):
    source, fn, domains = REAL[name]
    program = compile_source(source)
    assert program.reduces
    xs = _rows(np.random.default_rng(n), program.n_params, 5, n, positive=domains is not None)
    got = evaluate(program, xs, "float64")
    want = fn(*xs)
    assert got.shape == want.shape == ((5,) if program.returns_per_row() else (5, n))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("name", sorted(REAL))
def test_float32_differs_from_float64_by_rounding(name):
    source, _, domains = REAL[name]
    program = compile_source(source)
    xs = [x.astype(np.float32).astype(np.float64)
          for x in _rows(np.random.default_rng(7), program.n_params, 8, 33, positive=domains is not None)]
    f32, f64 = evaluate(program, xs, "float32"), evaluate(program, xs, "float64")
    assert f32.dtype == np.float32
    np.testing.assert_allclose(f32, f64, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(WRONG))
def test_wrong_versions_compile_and_differ_from_the_real_kernel(name):
    wrong, real = WRONG[name]
    source, fn, _ = REAL[real]
    p = compile_source(wrong)
    assert p.reduces and p.returns_per_row() == compile_source(source).returns_per_row()
    x = np.random.default_rng(1).normal(0, 1, (3, 7)) * [[1], [1], [3000]]  # the last row overflows a naive exp
    xs = [x] + [np.ones(7), np.zeros(7)][: p.n_params - 1]
    got, want = evaluate(p, xs, "float64"), fn(*xs)
    assert not np.allclose(got, want, rtol=1e-6, equal_nan=True)


def test_reductions_emit_one_instruction_each():
    text = compile_source("def f(x):\n    return sum(x) + mean(x) + max(x) + min(x)\n").text().splitlines()
    assert [line.split()[2] for line in text[1:-1] if "%0" in line.split()[3:]] == ["sum", "mean", "amax", "amin"]
    assert all(op in spec.IR_OP_BY_NAME and spec.IR_OP_BY_NAME[op].reduction for op in spec.REDUCTION_OPS)


def test_two_or_more_arguments_stay_elementwise():
    p = compile_source("def f(x, y):\n    return max(x, y) + min(x, y, 1)\n")
    assert not p.reduces and not p.returns_per_row()


@pytest.mark.parametrize("call", ["sum()", "sum(x, x)", "mean(x, 1)", "np.mean()", "max()", "min(" + "x, " * 9 + ")"])
def test_wrong_number_of_arguments_is_an_arity_error(call):
    with pytest.raises(CompileError) as info:
        compile_source(f"def f(x):\n    return {call}\n")
    assert info.value.kind == "arity"
    assert info.value.message.startswith(call.split("(")[0].split(".")[-1] + "() takes")


def test_per_row_typing():
    p = compile_source("def f(x):\n    m = max(x)\n    c = m * 2 + 1\n    return x - c\n")
    kinds = dict(zip(p.ops, p.per_row()))
    assert kinds["param"] is False and kinds["amax"] is True and kinds["mul"] is True and kinds["sub"] is False
    assert not p.returns_per_row()
    assert compile_source("def f(x):\n    return sum(x) * 2\n").returns_per_row()


def test_reduction_of_a_per_row_value_reduces_it_broadcast():
    p = compile_source("def f(x):\n    return sum(2.0) + 10 * max(3.0) + 100 * mean(sum(x))\n")
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(evaluate(p, [x], "float64"), 2 * 4 + 30 + 100 * x.sum(-1))


def test_nested_reductions():
    p = compile_source("def f(x):\n    return max(x - max(x))\n")
    x = np.random.default_rng(0).normal(size=(4, 9))
    np.testing.assert_array_equal(evaluate(p, [x], "float64"), np.zeros(4))


def test_bools_count_in_sum_and_stay_bools_in_max():
    count = compile_source("def f(x):\n    return sum(x > 0)\n")
    anypos = compile_source("def f(x):\n    return max(x > 0)\n")
    x = np.array([[-1.0, 2.0, 3.0], [-1.0, -2.0, 0.0]])
    np.testing.assert_array_equal(evaluate(count, [x], "float32"), [2.0, 0.0])
    out = evaluate(anypos, [x], "float32")
    assert anypos.returns_bool() and out.dtype == bool and out.tolist() == [True, False]


def test_nan_propagates_through_max_and_min():
    p = compile_source("def f(x):\n    return max(x) + min(x)\n")
    out = evaluate(p, [np.array([[1.0, math.nan, 3.0], [1.0, 2.0, 3.0]])], "float32")
    assert math.isnan(out[0]) and out[1] == 4.0


def test_rows_broadcast_like_numpy():
    source, fn, _ = REAL["layernorm"]
    p = compile_source(source)
    x, gamma, beta = np.random.default_rng(3).normal(size=(2, 3, 5)), np.linspace(1, 2, 5), np.float64(0.5)
    np.testing.assert_allclose(evaluate(p, [x, gamma, beta], "float64"), fn(x, gamma, beta), rtol=1e-12)


@pytest.mark.parametrize("inputs", [[np.zeros((3, 0))], [np.float64(1.0)], [np.zeros(0)]])
def test_empty_rows_and_scalars_are_refused(inputs):
    p = compile_source("def f(x):\n    return sum(x)\n")
    with pytest.raises(ValueError, match="row kernel"):
        evaluate(p, inputs, "float64")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=40), st.sampled_from(["float32", "float64"]))
def test_sum_rounds_once_from_float64(values, dtype):
    p = compile_source("def f(x):\n    return sum(x)\n")
    x = np.array(values, dtype=dtype)
    want = np.asarray(math.fsum(x.astype(np.float64).tolist()), dtype=np.float64)
    got = evaluate(p, [x], dtype)
    # float64 accumulation, one rounding: within one float64 rounding per element of the exact sum, then rounded
    slack = np.spacing(np.abs(x.astype(np.float64)).sum()) * len(values)
    assert abs(float(got) - float(want.astype(dtype))) <= abs(float(np.spacing(want.astype(dtype)))) + slack


@pytest.mark.parametrize("name", ["softmax", "layernorm", "logsumexp"])
def test_example_row_kernels_are_the_real_ones(root, name):
    program = compile_source((root / "examples" / "kernels" / f"{name}.py").read_text())
    assert program.text() == compile_source(REAL[name][0]).text()


def test_one_argument_max_and_min_of_signed_zeros_agree_across_evaluators():
    """+0 is the max and -0 the min of a row holding both, in whichever order: the reference evaluator folds as
    the fused one (NumPy's np.max keeps the zero it met first)."""
    import jupyter_gpuiter as gi

    rows = np.array([[0.0, -0.0], [-0.0, 0.0], [-0.0, -0.0], [0.0, 0.0], [-0.0, 1.0]])
    for src, want in (("def f(x):\n    return 1 / max(x)\n", [np.inf, np.inf, -np.inf, np.inf, 1.0]),
                      ("def f(x):\n    return 1 / min(x)\n", [-np.inf, -np.inf, -np.inf, np.inf, -np.inf])):
        k = gi.compile(src, dtype="float64")
        with np.errstate(divide="ignore"):
            assert k(rows).tolist() == want
            assert evaluate(compile_source(src), [rows], "float64").tolist() == want
