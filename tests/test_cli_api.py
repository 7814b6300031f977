"""The `gpuiter compile` command and the public compile API."""

import subprocess
import sys

import numpy as np
import pytest
import torch

import jupyter_gpuiter as gi


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "jupyter_gpuiter.cli", *args], capture_output=True, text=True, check=False)


def test_cli_emits_ir_for_gelu(root):
    r = run_cli("compile", str(root / "examples/kernels/gelu.py"), "--emit", "ir")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "%0 = param 0" and "tanh" in r.stdout and lines[-1].startswith("ret %")


def test_cli_reports_file_line_col_kind(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(x):\n    return sin(x, x)\n")
    r = run_cli("compile", str(bad))
    assert r.returncode == 1
    assert r.stderr.splitlines()[0].startswith(f"{bad}:2:12: arity: ")
    assert "^" in r.stderr


def test_cli_unreadable_file(tmp_path):
    r = run_cli("compile", str(tmp_path / "missing.py"))
    assert r.returncode == 2 and "cannot read" in r.stderr


def test_kernel_calls_numpy_and_torch(root):
    k = gi.compile((root / "examples/kernels/softplus.py").read_text(), mode="serial")
    x = np.linspace(-3, 3, 7)
    want = np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)
    np.testing.assert_allclose(k(x), want, rtol=1e-6)
    t = k(torch.tensor(x, dtype=torch.float32))
    assert isinstance(t, torch.Tensor)
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6)


def test_kernel_rejects_bad_calls():
    k = gi.compile("def f(x, y):\n    return x + y\n", mode="serial")
    with pytest.raises(TypeError, match="takes 2 arguments"):
        k(np.ones(3))
    with pytest.raises(ValueError, match="do not broadcast"):
        k(np.ones(3), np.ones(4))
    assert k(np.ones(3), 2.0).tolist() == [3.0, 3.0, 3.0]


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
