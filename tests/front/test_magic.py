"""%%gpucompile and %gpuiter driven through IPython's own shell (the kernel tests run them in a real kernel)."""

import numpy as np
import pytest
import torch
from IPython import get_ipython
from IPython.core.error import UsageError
from IPython.testing.globalipapp import start_ipython

import jupyter_gpuiter as gi
from jupyter_gpuiter.runtime import workers

GELU = "def gelu(x):\n    inner = 0.7978845608 * (x + 0.044715 * x ** 3)\n    return 0.5 * x * (1.0 + tanh(inner))\n"


@pytest.fixture(scope="module")
def ip():
    shell = start_ipython() or get_ipython()  # None when another test module started the shell already
    shell.run_line_magic("load_ext", "jupyter_gpuiter")
    return shell


def test_cell_defines_a_kernel_and_verifies_it(ip, capsys):
    ip.run_cell_magic("gpucompile", "--tests 2000", GELU)
    out = capsys.readouterr().out
    assert "gelu: PASS" in out and "2,000 tests" in out
    k = ip.user_ns["gelu"]
    assert isinstance(k, gi.Kernel)
    np.testing.assert_allclose(k(np.array([1.0])), [0.8411920], rtol=1e-5)
    assert isinstance(k(torch.ones(2)), torch.Tensor)


def test_wrong_cell_shows_a_counterexample(ip, capsys):
    ip.user_ns["ref"] = lambda x: 2 * x
    ip.run_cell_magic("gpucompile", "double --ref ref --tests 3000 --domain x=-4:4", "def f(x):\n    return x + x + (x > 3)\n")
    out = capsys.readouterr().out
    assert "double: FAIL" in out and "counterexample" in out
    assert "double" in ip.user_ns


def test_compile_error_shows_the_caret_and_keeps_the_namespace(ip, capsys):
    ip.user_ns["keep"] = 42
    ip.run_cell_magic("gpucompile", "", "def f(x):\n    return x + yy\n")
    out = capsys.readouterr().out
    assert "unknown-name at line 2, column 16" in out and "    return x + yy\n               ^" in out
    assert ip.user_ns["keep"] == 42


def test_exhaustive_proof(ip, capsys):
    ip.run_cell_magic("gpucompile", "h --dtype float16 --exhaustive --ref python", "def h(x):\n    return x * 2\n")
    assert "proved over all 65,536 inputs" in capsys.readouterr().out


@pytest.mark.parametrize("line,match", [
    ("--mode quantum", "mode"), ("--dtype int8", "dtype"), ("--tests 0", "tests"), ("--delta 2", "delta"),
    ("--ref nothing_here", "no such name"), ("--domain x=5", "domain"), ("--candidates 4", "hybrid"),
    ("--mode hybrid --candidates 0", "at least 1"), ("--model m.pt", "neural or hybrid"),
])
def test_bad_options_are_one_line_usage_errors(ip, line, match):
    with pytest.raises(UsageError, match=match):
        ip.run_cell_magic("gpucompile", line, GELU)


def test_hybrid_cell_records_its_path_and_verifies_against_a_trusted_compiler(ip, capsys):
    ip.run_cell_magic("gpucompile", "--mode hybrid --candidates 2 --tests 1000", GELU.replace("gelu", "hgelu"))
    assert "hgelu: PASS" in capsys.readouterr().out
    compiles = [h for h in gi.current_session().history if h.kind == "compile" and h.name == "hgelu"]
    assert compiles[0].mode == "hybrid" and compiles[0].extra["path"] in ("neural", "traditional")
    # the float64 reference: compiled by a checked compiler, never the model
    assert compiles[-1].mode == "auto" and compiles[-1].extra["path"] in ("serial", "traditional")


def test_second_run_of_an_unchanged_cell_is_a_cache_hit(ip):
    cell = "def sq(x):\n    return x * x\n"
    ip.run_cell_magic("gpucompile", "--quiet --tests 100", cell)
    ip.run_cell_magic("gpucompile", "--quiet --tests 100", cell)
    compiles = [h for h in gi.current_session().history
                if h.kind == "compile" and h.name == "sq" and h.dtype == "float32"]
    assert [h.cache_hit for h in compiles][-2:] == [False, True]


def test_line_magic(ip, capsys):
    ip.run_line_magic("gpuiter", "status")
    out = capsys.readouterr().out
    assert out.startswith("device cpu, ") and "cached kernels" in out and out.rstrip().endswith(
        f", {workers.running()} compile worker processes")
    with pytest.raises(UsageError):
        ip.run_line_magic("gpuiter", "bogus")
    with pytest.raises(UsageError):
        ip.run_line_magic("gpuiter", "device tpu")


def test_comm_messages_are_json_and_match_the_protocol():
    import json

    from jupyter_gpuiter.front import comm

    v = gi.verify("def f(x):\n    return x + 1\n", "def f(x):\n    return x\n", tests=200)
    msg = json.loads(json.dumps(comm.verdict_message("f", "traditional", v, {"compile": 0.1})))
    assert msg["type"] == "verdict" and msg["passed"] is False and msg["counterexample"]["inputs"]
    assert set(msg) >= {"name", "mode", "passed", "exhaustive", "tests", "failures", "epsilon", "delta", "sentence",
                        "counterexample", "error", "seconds"}
    status = json.loads(json.dumps(comm.status_message(gi.current_session())))
    assert status["type"] == "status" and status["last"]["passed"] is False
    assert comm.send(status) is False  # no kernel here: dropped, not raised


def test_keyboard_interrupt_during_verification_leaves_everything_usable(ip, capsys):
    def interrupted(x):
        raise KeyboardInterrupt

    ip.user_ns["interrupted"] = interrupted
    ip.run_cell_magic("gpucompile", "k_int --ref interrupted --tests 100", "def k_int(x):\n    return x\n")
    assert "verification interrupted" in capsys.readouterr().out
    assert isinstance(ip.user_ns["k_int"], gi.Kernel)
    ip.run_cell_magic("gpucompile", "--tests 100", "def again(x):\n    return x + 1\n")
    assert "again: PASS" in capsys.readouterr().out


def test_tradeoffs_and_history_magics_display(ip, capsys):
    ip.run_line_magic("gpuiter", "tradeoffs")
    assert "IntSlider(value=1, description='candidates k'" in capsys.readouterr().out  # the widget's repr
    ip.run_line_magic("gpuiter", "history")
    assert "'name': 'resident'" in capsys.readouterr().out


def test_progress_callback_reports_chunks():
    calls = []
    s = gi.Session()
    v = s.verify("def f(x):\n    return x\n", "def f(x):\n    return x\n", tests=200_000,
                 progress=lambda done, total: calls.append((done, total)))
    assert v.passed and calls[-1] == (200_000, 200_000) and len(calls) == 4


SOFTMAX = "def softmax(x):\n    e = exp(x - max(x))\n    return e / sum(e)\n"
NAIVE_SOFTMAX = "def softmax(x):\n    e = exp(x)\n    return e / sum(e)\n"


def test_row_kernel_cell_verifies_on_the_rows_asked_for(ip, capsys):
    ip.run_cell_magic("gpucompile", "--rows 1,7,33 --tests 600", SOFTMAX)
    assert "softmax: PASS" in capsys.readouterr().out
    verdict = gi.current_session().history[-1].verdict
    assert verdict.row_lengths == (1, 7, 33) and verdict.tests_run == 600
    x = np.array([[0.0, 1.0, 2.0], [5.0, 5.0, 5.0]], dtype=np.float32)
    np.testing.assert_allclose(ip.user_ns["softmax"](x).sum(axis=-1), [1.0, 1.0], rtol=1e-6)


def test_naive_softmax_fails_with_a_row_counterexample(ip, capsys):
    ip.run_cell_magic("gpucompile", "naive --rows 7,33 --tests 600", NAIVE_SOFTMAX)
    out = capsys.readouterr().out
    assert "naive: FAIL" in out and "counterexample: f(x=[" in out and "element" in out
    cx = gi.current_session().history[-1].verdict.counterexample
    assert cx.is_row and cx.row_length >= 1


@pytest.mark.parametrize("rows", ["0", "1,a", ",", "-3", "2.5", "7,\u00b2"])
def test_bad_rows_option_is_a_usage_error(ip, rows):
    with pytest.raises(UsageError, match="--rows"):
        ip.run_cell_magic("gpucompile", f"--rows {rows}", SOFTMAX)
