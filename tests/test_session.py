"""The Session and the public API (session.py): what a Session keeps between iterations (compiled programs,
reference outputs) and when each cache must let go; mode "auto"; nothing computed twice; compile's errors."""

import numpy as np
import pytest
import torch

import jupyter_gpuiter as gi
from jupyter_gpuiter import compilers
from jupyter_gpuiter.compilers import AUTO_CROSSOVER_CPU, resolve_mode, serial
from jupyter_gpuiter.generate import generate_batch
from jupyter_gpuiter.runtime.render import torch_function

SRC = "def f(x, y):\n    return x * y + 1.0\n"
OPTIONS = {"tests": 2000, "domain": {"x": (-3, 3), "y": (-3, 3)}}


def counting(monkeypatch):
    """Count the sources each compiler is asked for."""
    calls = []
    real_serial = serial.compile_sources
    real_traditional = compilers.MODES["traditional"]

    def counted_serial(sources):
        calls.append(("serial", len(sources)))
        return real_serial(sources)

    def counted_traditional(sources, device=None):
        calls.append(("traditional", len(sources)))
        return real_traditional(sources, device)

    monkeypatch.setattr(serial, "compile_sources", counted_serial)
    monkeypatch.setitem(compilers.MODES, "traditional", counted_traditional)
    return calls


def test_a_program_compiles_once_whatever_the_dtype(monkeypatch):
    sess = gi.Session("cpu")
    calls = counting(monkeypatch)
    k32 = sess.compile(SRC)
    k64 = sess.compile(SRC, dtype="float64")
    assert len(calls) == 1 and (k32.dtype, k64.dtype) == ("float32", "float64")
    assert k32.program is k64.program
    # another mode or another source is another program
    sess.compile(SRC, mode="traditional")
    sess.compile(SRC.replace("1.0", "2.0"))
    assert len(calls) == 3


def test_the_default_float64_reference_of_a_cell_does_not_compile_it_again(monkeypatch):
    sess = gi.Session("cpu")
    calls = counting(monkeypatch)
    cand = sess.compile(SRC)
    ref = sess.compile(SRC, dtype="float64")
    assert sess.verify(cand, ref, **OPTIONS).passed
    assert len(calls) == 1


def test_reference_outputs_are_computed_once_per_pool():
    sess = gi.Session("cpu")
    seen = []

    def ref(x, y):
        seen.append(len(x))
        return x * y + 1.0

    for i in range(3):  # three edits against the same reference on the same pool
        assert sess.verify(SRC.replace("1.0", "1.00" + "0" * i), ref, **OPTIONS).passed
    assert seen == [2000]
    assert sess.outputs.hits == 2 and sess.outputs.misses == 1


def test_each_reference_cache_key_invalidates():
    sess = gi.Session("cpu")
    calls = []

    def make_ref(c):
        def ref(x, y):
            calls.append(c)
            return x * y + c
        return ref

    r1 = make_ref(1.0)
    assert sess.verify(SRC, r1, **OPTIONS).passed
    # an edited reference (a new function object) is evaluated afresh, and the verdict follows it
    r2 = make_ref(2.0)
    v = sess.verify(SRC, r2, **OPTIONS)
    assert not v.passed and calls == [1.0, 2.0]
    # a new pool seed: new inputs, new outputs
    assert sess.verify(SRC, r1, seed=1, **OPTIONS).passed and calls == [1.0, 2.0, 1.0]
    # another dtype: outputs rounded to it, computed afresh
    assert sess.verify(SRC, r1, dtype="float64", **OPTIONS).passed and len(calls) == 4
    # the same again: all cached
    assert sess.verify(SRC, r1, dtype="float64", **OPTIONS).passed and len(calls) == 4
    # a source reference edited is a different program
    assert sess.verify(SRC, SRC, **OPTIONS).passed
    assert not sess.verify(SRC, SRC.replace("1.0", "1.5"), **OPTIONS).passed


def test_a_kernel_reference_in_another_dtype_is_another_entry():
    sess = gi.Session("cpu")
    src = "def f(x):\n    return x / 3.0\n"
    v32 = sess.verify(src, sess.compile(src, dtype="float32"), tests=500)
    v64 = sess.verify(src, sess.compile(src, dtype="float64"), tests=500)
    assert v32.passed and v64.passed and len(sess.outputs) == 2
    assert v32.max_abs_err == 0.0  # the same program in its own dtype is exact


def test_auto_picks_serial_for_a_few_sources_and_traditional_past_the_crossover():
    assert resolve_mode("auto", 1, "cpu") == "serial"
    assert resolve_mode("auto", AUTO_CROSSOVER_CPU - 1, "cpu") == "serial"
    assert resolve_mode("auto", AUTO_CROSSOVER_CPU, "cpu") == "traditional"
    assert resolve_mode("hybrid", 1, "cpu") == "hybrid"
    few = gi.compile_batch(generate_batch(3, 1))
    many = gi.compile_batch(generate_batch(AUTO_CROSSOVER_CPU, 2))
    assert few.paths == ["serial"] * 3 and many.paths == ["traditional"] * AUTO_CROSSOVER_CPU
    # whichever ran, the programs are the serial compiler's
    assert many.canonical() == compilers.compile_batch(generate_batch(AUTO_CROSSOVER_CPU, 2), mode="serial").canonical()


def test_verdicts_say_which_compiler_ran():
    sess = gi.Session("cpu")
    v = sess.verify(SRC, SRC, **OPTIONS)
    assert v.compiler == "serial"
    sources = [SRC.replace("1.0", f"1.0{'0' * i}") for i in range(AUTO_CROSSOVER_CPU)]
    assert {v.compiler for v in sess.verify_batch(sources, SRC, **OPTIONS)} == {"traditional"}
    assert sess.verify(SRC, SRC, mode="traditional", **OPTIONS).compiler == "traditional"


def test_a_failing_candidate_in_a_batch_is_shrunk_only_when_read():
    sess = gi.Session("cpu")
    wrong = "def f(x, y):\n    return x * y + 1.001\n"
    verdicts = sess.verify_batch([SRC, wrong], SRC, **OPTIONS)
    assert verdicts[0].passed and not verdicts[1].passed
    lazy = object.__getattribute__(verdicts[1], "counterexample")
    assert not isinstance(lazy, gi.Counterexample)  # nothing shrunk yet
    cx = verdicts[1].counterexample
    assert isinstance(cx, gi.Counterexample) and verdicts[1].counterexample is cx
    assert all(-3 <= v <= 3 for v in cx.inputs.values())
    k = sess.compile(wrong)
    got = float(k(np.float32(cx.inputs["x"]), np.float32(cx.inputs["y"])))
    assert got == cx.got and got != pytest.approx(cx.expected, rel=1e-6)


def test_kernel_calls_on_cpu_arrays_match_the_torch_renderer():
    k = gi.compile("def g(x, y):\n    return where(x > y, exp(-x) * y, x % 0.7) // 0.3\n")
    x = np.linspace(-5, 5, 3001, dtype=np.float32)
    y = np.float32(0.25)
    fused_out = k(x, y)
    rendered = torch_function(k.program, k.dtype)(torch.from_numpy(x), torch.tensor(y)).numpy()
    assert fused_out.shape == (3001,) and fused_out.dtype == np.float32
    np.testing.assert_allclose(fused_out, rendered, rtol=2e-7, atol=0)
    assert k(torch.from_numpy(x), y).dtype == torch.float32
    b = gi.compile("def b(x):\n    return x > 0.5\n")
    assert b(x).dtype == np.bool_ and b(x).sum() == (x > 0.5).sum()
    assert k(np.ones((2, 3), np.float32), np.zeros((3,), np.float32)).shape == (2, 3)


def test_compile_raises_compile_error_with_source():
    with pytest.raises(gi.CompileError) as info:
        gi.compile("def f(x):\n    return q\n", mode="serial")
    assert info.value.kind == "unknown-name" and "return q" in info.value.caret()


def test_bad_api_input():
    with pytest.raises(ValueError, match="unknown mode"):
        gi.compile_batch(["def f(x):\n    return x\n"], mode="quantum")
    with pytest.raises(TypeError):
        gi.compile_batch("def f(x):\n    return x\n", mode="serial")
    with pytest.raises(TypeError):
        gi.compile(b"def f(x): return x", mode="serial")
