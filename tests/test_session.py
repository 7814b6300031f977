"""The Session and the public API (session.py): what a Session keeps between iterations (compiled programs,
reference outputs) and when each cache must let go; mode "auto"; nothing computed twice; compile's errors."""

from unittest import mock

import numpy as np
import pytest
import torch

import jupyter_gpuiter as gi
from jupyter_gpuiter import compilers
from jupyter_gpuiter.compilers import AUTO_CROSSOVER_CPU, AUTO_CROSSOVER_CUDA, resolve_mode, serial
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


SOFTMAX = "def softmax(x):\n    e = exp(x - max(x))\n    return e / sum(e)\n"


def test_row_lengths_reach_verify_and_verify_batch():
    sess = gi.Session("cpu")
    v = sess.verify(SOFTMAX, SOFTMAX, tests=60, row_lengths=[3, 5])
    assert v.passed and v.row_lengths == (3, 5) and v.tests_run == 60
    vs = sess.verify_batch([SOFTMAX, SOFTMAX.replace("sum(e)", "sum(e) + 1")], SOFTMAX, tests=60, row_lengths=(4,))
    assert [w.passed for w in vs] == [True, False] and all(w.row_lengths == (4,) for w in vs)
    assert gi.verify(SOFTMAX, SOFTMAX, tests=40, row_lengths=7).row_lengths == (7,)
    # a row kernel without row_lengths gets the default lengths; an elementwise pair stays elementwise
    assert len(sess.verify(SOFTMAX, SOFTMAX, tests=40).row_lengths) == 11
    assert sess.verify(SRC, SRC, **OPTIONS).row_lengths is None


def test_row_reference_outputs_are_cached_per_row_lengths():
    sess = gi.Session("cpu")
    calls = []

    def ref(x):
        calls.append(x.shape)
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    options = {"tests": 40, "domain": {"x": (-5, 5)}}
    assert sess.verify(SOFTMAX, ref, row_lengths=[4, 8], **options).passed
    assert calls == [(20, 4), (20, 8)]
    assert sess.verify(SOFTMAX.replace("e / sum(e)", "e * (1 / sum(e))"), ref, row_lengths=[8, 4], **options).passed
    assert len(calls) == 2 and sess.outputs.hits == 1  # the same lengths in another order: the same pools
    assert sess.verify(SOFTMAX, ref, row_lengths=[4, 16], **options).passed  # another length: outputs afresh
    assert calls[2:] == [(20, 4), (20, 16)]
    assert sess.verify(SOFTMAX, ref, row_lengths=[4, 16], seed=1, **options).passed  # other rows
    assert sess.verify(SOFTMAX, ref, row_lengths=[4, 16], dtype="float64", **options).passed  # other rounding
    assert len(calls) == 8
    # the verdict follows the lengths: wrong only on rows longer than 10
    wrong = "def softmax(x):\n    e = exp(x - max(x))\n    return e / sum(e) if sum(1.0) < 10 else e\n"
    assert sess.verify(wrong, ref, row_lengths=[4, 8], **options).passed
    assert not sess.verify(wrong, ref, row_lengths=[4, 16], **options).passed


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
    # on CUDA too: one source through the traditional compiler's launches cost an edit 29 ms on the first GPU run
    with mock.patch("jupyter_gpuiter.runtime.device.cuda_available", return_value=True):
        assert resolve_mode("auto", 1, "cuda") == "serial"
        assert resolve_mode("auto", AUTO_CROSSOVER_CUDA - 1, "cuda") == "serial"
        assert resolve_mode("auto", AUTO_CROSSOVER_CUDA, "cuda") == "traditional"
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


# -- the Session's events (the front's door: docs/architecture.md) --------------------------------------------

BAD = "def broken(x):\n    return x + nope\n"


def recorded(sess):
    events = []
    return events, sess.subscribe(events.append)


def test_each_compile_verify_and_verify_batch_publishes_one_iteration():
    sess = gi.Session("cpu")
    events, _ = recorded(sess)
    k = sess.compile(SRC, dtype="float64", name="mul")
    assert len(events) == 1 and events[-1] is sess.history[-1]
    c = events[-1]
    assert (c.kind, c.name, c.mode, c.dtype, c.cache_hit, c.error, c.inner) == (
        "compile", "mul", "auto", "float64", False, None, False)
    assert c.extra["path"] == "serial" and c.seconds["compile"] > 0

    # the Kernel's compile counts in the iteration that verifies it, once: made to look like 1,000 s, so that
    # no wall-clock noise can decide the asserts below
    sess._compile_seconds[k] = 1e3
    v = sess.verify(k, SRC, dtype="float64", **OPTIONS)
    assert len(events) == 2 and v.passed
    e = events[-1]
    assert (e.kind, e.name, e.mode, e.dtype, e.verdict, e.error) == ("verify", "f", "auto", "float64", v, None)
    assert e.seconds["compile"] >= 1e3 and set(v.timings) <= set(e.seconds)
    sess.verify(k, SRC, dtype="float64", **OPTIONS)
    assert events[-1].seconds["compile"] < 1e3

    sess.verify_batch([SRC, SRC.replace("1.0", "2.0")], SRC, **OPTIONS)
    b = events[-1]
    assert len(events) == 4 and b.kind == "verify_batch" and b.extra == {"passed": 1, "candidates": 2, "tests": 2000}
    assert events == list(sess.history)


def test_a_verify_of_a_source_reports_its_compile_as_inner():
    sess = gi.Session("cpu")
    events, _ = recorded(sess)
    sess.verify(SRC, SRC, name="g", **OPTIONS)
    assert [(e.kind, e.name, e.inner) for e in events] == [("compile", "g", True), ("verify", "g", False)]


def test_a_compile_error_is_an_iteration_too():
    sess = gi.Session("cpu")
    events, _ = recorded(sess)
    with pytest.raises(gi.CompileError) as info:
        sess.compile(BAD)
    assert info.value.source == BAD  # for the caret
    (e,) = events
    assert (e.kind, e.name, e.error, e.verdict, e.inner) == ("compile", "broken", info.value, None, False)

    v = sess.verify(BAD, SRC, **OPTIONS)
    assert not v.passed and v.error.kind == "unknown-name"
    inner, outer = events[1:]
    assert (inner.kind, inner.inner, outer.kind, outer.name, outer.verdict, outer.error) == (
        "compile", True, "verify", "broken", v, v.error)


def test_a_subscriber_that_raises_breaks_nothing_and_is_logged(caplog):
    sess = gi.Session("cpu")

    def broken(iteration):
        raise RuntimeError("subscriber bug")

    sess.subscribe(broken)
    events, unsubscribe = recorded(sess)
    assert sess.verify(SRC, SRC, **OPTIONS).passed
    assert [e.kind for e in events] == ["compile", "verify"]  # the next subscriber still hears
    assert "subscriber bug" in caplog.text
    unsubscribe()
    unsubscribe()  # twice is harmless
    sess.compile(SRC)
    assert len(events) == 2 and len(sess.history) == 3


def test_subscribe_current_follows_the_current_session_only(monkeypatch):
    from jupyter_gpuiter import session

    monkeypatch.setattr(session, "_current", None)
    events = []
    unsubscribe = session.subscribe_current(events.append)
    try:
        assert session._current is None  # subscribing creates no Session
        gi.Session("cpu").compile(SRC)  # not the current one
        assert events == []
        gi.verify(SRC, SRC, **OPTIONS)  # creates the current Session, which publishes to the subscriber
        assert [e.kind for e in events] == ["compile", "verify"]
    finally:
        unsubscribe()
    gi.current_session().compile(SRC)
    assert len(events) == 2


@pytest.mark.parametrize("options", [{"dtype": "int8"}, {"tests": 0}, {"delta": 2}, {"rtol": -1},
                                     {"exhaustive": "yes"}, {"seed": 1.5}, {"mode": "quantum"}, {"row_lengths": 0},
                                     {"row_lengths": [8, -1]}, {"row_lengths": []}, {"row_lengths": 2.5}])
def test_verify_checks_its_options_before_compiling(options):
    sess = gi.Session("cpu")
    events, _ = recorded(sess)
    with pytest.raises(ValueError):
        sess.verify(BAD, SRC, **options)
    with pytest.raises(ValueError):
        sess.verify_batch([BAD], SRC, **options)
    assert events == []  # nothing compiled


def test_an_unknown_option_or_mode_is_refused_everywhere():
    sess = gi.Session("cpu")
    with pytest.raises(TypeError, match="teste"):
        sess.verify(SRC, SRC, teste=10)
    for call in (lambda: sess.compile(SRC, mode="quantum"), lambda: gi.compile(SRC, mode="quantum"),
                 lambda: gi.compile_batch([SRC], mode="quantum"), lambda: gi.verify(SRC, SRC, mode="quantum"),
                 lambda: sess.reference(SRC, mode="quantum"), lambda: compilers.compile_one(SRC, mode="quantum")):
        with pytest.raises(ValueError, match="unknown mode 'quantum'; available: auto, serial"):
            call()
    with pytest.raises(ValueError, match="dtype"):
        sess.compile(SRC, dtype="int8")


def test_the_registry_of_modes():
    modes = gi.modes()
    assert list(modes) == list(compilers.MODES)
    assert [m.name for m in modes.values() if m.default] == [gi.DEFAULT_MODE] == [compilers.DEFAULT_MODE]
    assert set(modes["hybrid"].options) == compilers.MODE_OPTIONS["hybrid"] and modes["serial"].options == ()
    assert [m.name for m in modes.values() if m.reference] == list(compilers.REFERENCE_MODES)


def test_status_and_references():
    sess = gi.Session("cpu")
    status = sess.status()
    assert status["device"] == "cpu" and status["iterations"] == 0 and status["last"] is None
    assert status["compile_workers"] >= 0 and status["pool_bytes"] >= 0
    ref64 = sess.reference(SRC, "float64", mode="hybrid")  # a model never checks its own translations
    assert isinstance(ref64, gi.Kernel) and ref64.dtype == "float64" and sess.history[-1].mode == "auto"
    python = sess.reference(SRC, "python")
    np.testing.assert_allclose(python(np.array([2.0]), np.array([3.0])), [7.0])
    with pytest.raises(ValueError, match="reference kind"):
        sess.reference(SRC, "float16")
    sess.verify(SRC, python, **OPTIONS)
    status = sess.status()
    assert status["iterations"] == 3 and status["last"]["name"] == "f" and status["last"]["passed"] is True


def test_warm_up_reports_what_it_did():
    from jupyter_gpuiter.session import warm_up

    report = warm_up("cpu")
    assert report.device == "cpu" and report.warnings == [] and report.device_name is None and report.seconds > 0


def test_history_keeps_the_latest_iterations_and_counts_them_all():
    sess = gi.Session("cpu", history_size=3)
    for c in (1, 2, 3, 4, 5):
        sess.compile(f"def f(x):\n    return x + {c}\n", mode="serial")
    assert len(sess.history) == 3 and sess.iterations == 5 and sess.status()["iterations"] == 5
    assert [it.name for it in sess.history] == ["f"] * 3 and sess.history[-1].kind == "compile"
    one = gi.Session("cpu", history_size=1)
    assert one.verify("def f(x):\n    return x + 1\n", "def f(x):\n    return x + 1\n", tests=50).passed
    for bad in (0, -1, 2.5, True, None):
        with pytest.raises(ValueError, match="history_size"):
            gi.Session("cpu", history_size=bad)
