"""Every operator and builtin, compiled by the serial compiler and evaluated, against CPython's scalars."""

import math

import numpy as np
import pytest

from jupyter_gpuiter.compilers.serial import compile_source
from jupyter_gpuiter.lang import spec
from jupyter_gpuiter.lang.python_semantics import call_scalar, python_function
from jupyter_gpuiter.runtime.reference import evaluate

BINARY = ["+", "-", "*", "/", "//", "%", "**", "<", "<=", ">", ">=", "==", "!=", "and", "or"]
UNARY = ["-", "+", "not "]


def _cases():
    for op in BINARY:
        yield f"a {op} b", 2
    for op in UNARY:
        yield f"{op}a", 1
    yield "a if b else c", 3
    for name, b in spec.BUILTINS.items():
        for n in sorted({b.arity[0], b.arity[1], min(b.arity[0] + 1, b.arity[1])}):
            if n == 1 and name in spec.REDUCTIONS:  # over a row, not a scalar: tests/lang/test_rows.py
                continue
            args = ", ".join("abc"[i] if i < 3 else f"(a + {i})" for i in range(n))
            yield f"{name}({args})", min(n, 3)
    for c in spec.CONSTANTS:
        yield f"a + {c}", 1
        yield f"a + math.{c}", 1


def _inputs(rng, n_params, size=400):
    cols = []
    for _ in range(n_params):
        x = rng.uniform(-4, 4, size)
        x[rng.random(size) < 0.15] = 0.0  # exercise x/0, 0**-1, truthiness
        x[rng.random(size) < 0.1] = rng.integers(-3, 4, int((rng.random(size) < 0.1).sum()) or 1)[0]
        cols.append(x)
    return cols


def _same(got, want, rtol=1e-12):
    if math.isnan(want):
        return math.isnan(got)
    if math.isinf(want):
        return got == want
    return abs(got - want) <= rtol * max(1.0, abs(want))


@pytest.mark.parametrize("expr,n", list(_cases()), ids=lambda v: str(v))
def test_operator_matches_python(expr, n):
    params = ", ".join("abc"[:n])
    source = f"def f({params}):\n    return {expr}\n"
    program = compile_source(source)
    fn = python_function(source)
    rng = np.random.default_rng(abs(hash(expr)) % 2**32)
    cols = _inputs(rng, n)
    got = evaluate(program, cols, "float64")
    checked = 0
    for i in range(len(cols[0])):
        want = call_scalar(fn, [float(c[i]) for c in cols])
        if want is None:  # Python raised: the kernel gives an IEEE value instead, checked below
            continue
        checked += 1
        assert _same(float(got[i]), want), (expr, [c[i] for c in cols], got[i], want)
    assert checked > len(cols[0]) // 4


@pytest.mark.parametrize("expr,want", [
    ("1.0 / 0.0", math.inf), ("-1.0 / 0.0", -math.inf), ("0.0 / 0.0", math.nan), ("1.0 % 0.0", math.nan),
    ("0.0 ** -1", math.inf), ("log(0.0)", -math.inf), ("sqrt(-1.0)", math.nan), ("exp(1000.0)", math.inf),
    ("(-8.0) ** (1 / 3)", math.nan), ("floor(inf)", math.inf), ("1e400", math.inf), ("2 ** 10000", math.inf),
])
def test_ieee_results_where_python_raises(expr, want):
    program = compile_source(f"def f(x):\n    return {expr}\n")
    got = float(evaluate(program, [np.zeros(1)], "float64")[0])
    assert _same(got, want)


def test_bool_results_are_bools_and_count_as_numbers():
    p = compile_source("def f(x):\n    return x > 0\n")
    assert evaluate(p, [np.array([-1.0, 1.0])]).dtype == bool
    p = compile_source("def f(x):\n    return (x > 0) + True\n")
    assert evaluate(p, [np.array([-1.0, 1.0])]).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("expr", ["-2**2", "2**-1", "2**3**2", "10 - 4 - 3", "not 1 == 2", "-x**2",
                                  "x if x > 1 else -x if x < -1 else 0", "1 + 2 * 3 ** 2 / 4 // 1 % 5",
                                  "not x and x or 3", "(x > 0) == (x < 0)", "x // 3 * 3 + x % 3", "+-+-x"])
def test_precedence_and_associativity_match_python(expr):
    source = f"def f(x):\n    return {expr}\n"
    fn = python_function(source)
    xs = np.array([-3.0, -1.5, -1.0, 0.0, 0.5, 1.0, 2.0, 7.0])
    got = evaluate(compile_source(source), [xs], "float64")
    for x, g in zip(xs, got):
        assert _same(float(g), call_scalar(fn, [float(x)]))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_evaluation_happens_in_the_kernel_dtype(dtype):
    p = compile_source("def f(x):\n    return x * 3.0 + 0.1\n")
    x = np.array([0.1, 1e4], dtype=dtype)
    want = (x * np.asarray(3.0, dtype) + np.asarray(0.1, dtype)).astype(dtype)
    got = evaluate(p, [x], dtype)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)
