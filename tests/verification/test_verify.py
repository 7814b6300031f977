"""verify() and verify_batch(): verdicts, counterexamples that really fail, exhaustive proofs, bad input."""

import math

import numpy as np
import pytest
import torch

import jupyter_gpuiter as gi
from jupyter_gpuiter.lang.python_semantics import call_scalar, python_function

GELU = "def gelu(x):\n    inner = 0.7978845608 * (x + 0.044715 * x ** 3)\n    return 0.5 * x * (1.0 + tanh(inner))\n"
GELU_ALT = "def gelu(x):\n    return 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))\n"


def test_a_correct_rewrite_passes_with_a_bound():
    v = gi.verify(GELU_ALT, GELU, tests=20_000, domain={"x": (-6, 6)})
    assert v.passed and v.failures == 0 and v.tests_run == 20_000
    assert v.epsilon == pytest.approx(1 - 1e-3 ** (1 / 20_000))
    assert "20,000" in v.sentence


@pytest.mark.parametrize("wrong", [
    GELU.replace("0.044715", "0.05"), GELU.replace("1.0 +", "1.0 -"), GELU.replace("x ** 3", "x ** 2"),
    GELU.replace("return 0.5 * x", "return 0.5 * abs(x)"),
])
def test_wrong_candidates_fail_with_a_counterexample_that_really_fails(wrong):
    v = gi.verify(wrong, GELU, tests=5000, domain={"x": (-6, 6)})
    assert not v.passed and v.failures > 0 and v.counterexample is not None
    cx = v.counterexample
    # re-evaluate independently on the host, with CPython, in float64
    x = cx.inputs["x"]
    got = call_scalar(python_function(wrong), [x])
    want = call_scalar(python_function(GELU), [x])
    tol = 1e-5 + 1.3e-6 * abs(want)
    assert abs(got - want) > tol * 0.5, (cx, got, want)


def test_trivial_references_are_flagged_not_passed():
    v = gi.verify("def f(x):\n    return 0.0\n", "def f(x):\n    return 0.0\n", tests=1000)
    assert not v.passed and v.trivial


def test_nan_matches_nan_only_where_the_reference_is_nan():
    ok = gi.verify("def f(x):\n    return sqrt(x)\n", np.sqrt, tests=4000)
    assert ok.passed  # both nan below zero
    # x ** 0.5 differs from sqrt(x) at -inf (IEEE pow gives +inf): the verifier must notice
    assert not gi.verify("def f(x):\n    return sqrt(x)\n", "def f(x):\n    return x ** 0.5\n", tests=4000).passed
    bad = gi.verify("def f(x):\n    return sqrt(abs(x))\n", "def f(x):\n    return sqrt(x)\n", tests=4000)
    assert not bad.passed and math.isnan(bad.counterexample.expected)


def test_reference_can_be_a_numpy_callable():
    v = gi.verify(GELU, lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3))), tests=3000)
    assert v.passed


PLANT = float(np.float16(0.0001234))
PLANTED = f"def f(x):\n    return where(x == {PLANT!r}, 0.0, x * 2)\n"


def test_exhaustive_mode_finds_a_planted_bug_random_tests_miss():
    random_found = sum(not gi.verify(PLANTED, "def f(x):\n    return x * 2\n", tests=10_000, dtype="float16",
                                     seed=s).passed for s in range(5))
    assert random_found <= 1
    v = gi.verify(PLANTED, "def f(x):\n    return x * 2\n", dtype="float16", exhaustive=True)
    assert not v.passed and v.counterexample.inputs["x"] == PLANT and v.tests_run <= 65536


def test_exhaustive_pass_is_a_proof():
    v = gi.verify("def f(x):\n    return x + x\n", "def f(x):\n    return 2 * x\n", dtype="bfloat16",
                  exhaustive=True)
    assert v.passed and v.exhaustive and v.tests_run == 65536 and v.epsilon == 0.0
    assert "65,536" in v.sentence


def test_verify_batch_picks_out_the_correct_candidates():
    cands = [GELU.replace("0.044715", f"{0.044715 + d:.6f}") for d in (0.0, 0.01, -0.02, 0.0, 0.3)]
    cands.append("def gelu(x):\n    return q\n")
    verdicts = gi.verify_batch(cands, GELU, tests=3000, domain={"x": (-6, 6)})
    assert [v.passed for v in verdicts] == [True, False, False, True, False, False]
    assert verdicts[-1].error is not None and verdicts[-1].error.kind == "unknown-name"
    assert verdicts[1].counterexample is not None
    assert verdicts[0].delta == pytest.approx(1e-3 / 6)


@pytest.mark.parametrize("call,match", [
    (lambda: gi.verify(GELU, lambda x, y: x, tests=100), "arguments"),
    (lambda: gi.verify(GELU, lambda x: x[:3], tests=100), "shape"),
    (lambda: gi.verify(GELU, GELU, domain=["x=5"], tests=100), "domain"),
    (lambda: gi.verify(GELU, GELU, domain={"y": (0, 1)}, tests=100), "parameters"),
    (lambda: gi.verify(GELU, GELU, tests=10 ** 12), "memory"),
    (lambda: gi.verify(GELU, "def f(x, y):\n    return x\n", tests=100), "parameters"),
    (lambda: gi.verify(GELU, GELU, delta=2.0), "delta"),
])
def test_bad_input_gives_a_clear_error_and_the_session_keeps_working(call, match):
    with pytest.raises(ValueError, match=match):
        call()
    assert gi.verify(GELU_ALT, GELU, tests=500).passed


def test_compile_errors_become_verdicts():
    v = gi.verify("def f(x):\n    return nope(x)\n", GELU, tests=100)
    assert not v.passed and v.error.kind == "unknown-function"


def test_second_compile_is_a_cache_hit():
    s = gi.Session()
    s.compile(GELU)
    s.compile(GELU)
    assert [h.cache_hit for h in s.history if h.kind == "compile"] == [False, True]
    assert s.cached_kernels == 1


def test_kernels_accept_numpy_and_torch_and_reject_bad_shapes():
    k = gi.compile(GELU)
    x = np.linspace(-2, 2, 5)
    assert isinstance(k(x), np.ndarray) and isinstance(k(torch.tensor(x)), torch.Tensor)
    with pytest.raises(ValueError, match="broadcast"):
        k2 = gi.compile("def f(x, y):\n    return x + y\n")
        k2(np.ones(3), np.ones(4))


def test_verify_batch_runs_the_compilers_device_batch_in_order():
    cands = ["def f(x):\n    return x * 2\n", "def f(x):\n    return y\n", "x" * 9000, "def f(x):\n    return x + x\n",
             "def f(x):\n    return x + 1e400 * 0 + 0x10 - 16\n"]
    res = gi.compile_batch(cands)
    assert res.batch is not None and res.batch.error[:, 0].tolist()[:3] == [0, 2, 7]
    verdicts = gi.verify_batch(cands, "def f(x):\n    return 2 * x\n", tests=2000)
    assert [v.passed for v in verdicts] == [True, False, False, True, False]
    assert verdicts[2].error.kind == "too-large" and verdicts[4].counterexample is not None
    # a literal valued on the host (a hex one with more digits than lex values) reaches the device batch too
    assert gi.verify_batch(["def f(x):\n    return x + 0x0000000000000010 - 16\n"], "def f(x):\n    return x\n",
                           tests=500)[0].passed
