"""Verdict and Counterexample (verification/verdict.py): the fields a verification reports, how a verdict reads
(repr, sentence, posterior), and a counterexample shrunk only when first read."""

import dataclasses
import pickle

import pytest

import jupyter_gpuiter as gi
from jupyter_gpuiter import CompileError, Counterexample, Verdict

GELU = "def gelu(x):\n    inner = 0.7978845608 * (x + 0.044715 * x ** 3)\n    return 0.5 * x * (1.0 + tanh(inner))\n"
GELU_ALT = "def gelu(x):\n    return 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))\n"


def test_posterior_and_sentence_agree_with_the_counts():
    v = gi.verify(GELU_ALT, GELU, tests=4000)
    post = v.posterior
    assert post.alpha == 1 and post.beta == 4001 and post.upper(0.999) == pytest.approx(v.epsilon, rel=1e-3)


def test_a_verdict_has_the_contracts_fields_and_their_defaults():
    names = [f.name for f in dataclasses.fields(Verdict)]
    assert names[:6] == ["passed", "tests_run", "failures", "epsilon", "delta", "counterexample"]
    v = Verdict(True, 100, 0, 0.07, 1e-3)
    assert (v.counterexample, v.max_abs_err, v.max_rel_err, v.max_ulp_err) == (None, 0.0, 0.0, 0.0)
    assert (v.exhaustive, v.trivial, v.error, v.dtype, v.timings, v.compiler) == (False, None, None, "float32", {}, None)
    assert Verdict(True, 1, 0, 0.5, 0.1).timings is not v.timings  # each verdict its own timings


def test_repr_says_pass_or_fail_and_the_sentence():
    passed = Verdict(True, 69_075, 0, 1e-4, 1e-3)
    assert repr(passed) == f"<Verdict PASS: {passed.sentence}>"
    assert "69,075 tests" in passed.sentence and "99.9%" in passed.sentence
    failed = Verdict(False, 30_000, 3, 1.0, 1e-3, Counterexample({"x": 2.0}, 5.0, 4.0))
    assert repr(failed) == "<Verdict FAIL: failed 3 of 30,000 tests>"
    proved = Verdict(True, 65_536, 0, 0.0, 1e-3, exhaustive=True, dtype="float16")
    assert proved.sentence == "proved over all 65,536 inputs"


def test_a_candidate_that_did_not_compile_or_a_trivial_reference_says_so():
    error = CompileError("unknown-name", 2, 12, "name 'q' is not defined", "def f(x):\n    return q\n")
    v = Verdict(False, 0, 0, 1.0, 1e-3, error=error)
    assert v.sentence == f"did not compile: {error}" and repr(v).startswith("<Verdict FAIL: did not compile: ")
    t = Verdict(False, 1000, 0, 1.0, 1e-3, trivial="the reference is constant 0.0")
    assert t.sentence == "reference rejected: the reference is constant 0.0"


def test_a_counterexample_reads_as_a_call_with_what_it_gave_and_what_was_expected():
    cx = Counterexample({"x": 0.5, "y": -2.0}, 1.25, 1.5)
    assert str(cx) == "f(x=0.5, y=-2.0) = 1.25, expected 1.5"
    assert pickle.loads(pickle.dumps(cx)) == cx


def test_a_lazy_counterexample_is_resolved_once_when_first_read():
    resolved = []

    class Lazy:
        def resolve(self):
            resolved.append(1)
            return Counterexample({"x": 4.0}, 8.0, 4.0)

    v = Verdict(False, 5000, 12, 1.0, 1e-3, Lazy())
    assert not resolved  # nothing shrunk until someone looks
    assert v.counterexample == Counterexample({"x": 4.0}, 8.0, 4.0) and v.counterexample.got == 8.0
    assert resolved == [1]


def test_verify_fills_the_fields_a_failure_reports():
    v = gi.verify("def f(x):\n    return x * 2 if x > 3 else x\n", "def f(x):\n    return x\n", tests=5000,
                  domain={"x": (-10, 10)})
    assert not v.passed and 0 < v.failures <= v.tests_run <= 5000 and v.delta == 1e-3  # (it stops early)
    assert v.max_abs_err > 0 and v.max_rel_err > 0 and v.max_ulp_err > 0 and v.dtype == "float32"
    x = v.counterexample.inputs["x"]
    assert v.counterexample.got == 2 * x and v.counterexample.expected == x
    assert v.compiler in ("serial", "traditional") and v.timings and all(t >= 0 for t in v.timings.values())
