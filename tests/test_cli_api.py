"""The `gpuiter compile` command and the public compile API."""

import codecs
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import jupyter_gpuiter as gi


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "jupyter_gpuiter.tools.cli", *args], capture_output=True, text=True, check=False)


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


# -- reading the file: as Python reads a source file, and never more than the size limit ----------

GELU = "def gelu(x):\n    return 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x ** 3)))\n"


def test_cli_compiles_a_file_that_starts_with_a_byte_order_mark(tmp_path, capsys):
    from jupyter_gpuiter.tools import cli

    plain, bom = tmp_path / "plain.py", tmp_path / "bom.py"
    plain.write_bytes(GELU.encode())
    bom.write_bytes(codecs.BOM_UTF8 + GELU.encode())  # what some editors save; `python bom.py` runs it
    assert cli.main(["compile", str(plain), "--emit", "ir"]) == 0
    want = capsys.readouterr().out
    for mode in ("serial", "traditional"):
        assert cli.main(["compile", str(bom), "--emit", "ir", "--mode", mode]) == 0, capsys.readouterr().err
        assert capsys.readouterr().out == want
    # an error's line and column are those of the text after the mark
    bad = tmp_path / "bad.py"
    bad.write_bytes(codecs.BOM_UTF8 + b"def f(x):\n    return y\n")
    assert cli.main(["compile", str(bad)]) == 1
    assert capsys.readouterr().err.startswith(f"{bad}:2:12: unknown-name: ")


def test_cli_refuses_a_file_over_the_size_limit_without_reading_it_whole(tmp_path, capsys):
    from jupyter_gpuiter.lang import spec
    from jupyter_gpuiter.tools import cli

    limit = spec.MAX_SOURCE_BYTES
    body = "def f(x):\n    return x\n"
    fits = body + "#" * (limit - len(body) - 1) + "\n"  # exactly the limit
    for name, data in [("limit.py", fits.encode()), ("bom_limit.py", codecs.BOM_UTF8 + fits.encode())]:
        (tmp_path / name).write_bytes(data)
        assert cli.main(["compile", str(tmp_path / name)]) == 0, capsys.readouterr().err
    (tmp_path / "over.py").write_bytes(fits.encode() + b"\n")
    assert cli.main(["compile", str(tmp_path / "over.py")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{tmp_path / 'over.py'}:1:1: too-large: ") and f"{limit:,}" in err
    if os.path.exists("/dev/zero"):  # it used to read until MemoryError
        assert cli.main(["compile", "/dev/zero"]) == 1
        assert "/dev/zero:1:1: too-large: " in capsys.readouterr().err
    assert cli.main(["compile", str(tmp_path)]) == 2  # a folder
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "latin1.py").write_bytes(b"def f(x):\n    return x  # caf\xe9\n")
    assert cli.main(["compile", str(tmp_path / "latin1.py")]) == 2
    assert "cannot read" in capsys.readouterr().err


class _EndlessFile:
    """A file that never ends (as /dev/zero), which refuses a read without a size."""

    def __init__(self):
        self.reads = []

    def read(self, size=-1):
        assert size is not None and size >= 0, "an unbounded read of an endless file"
        self.reads.append(size)
        return b"\0" * size if size else b""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_cli_reads_at_most_the_limit_and_a_few_bytes(monkeypatch, capsys):
    from jupyter_gpuiter.lang import spec
    from jupyter_gpuiter.tools import cli

    endless = _EndlessFile()
    monkeypatch.setattr(cli, "open", lambda *a, **k: endless, raising=False)
    assert cli.main(["compile", "endless.py"]) == 1
    assert "too-large" in capsys.readouterr().err
    assert sum(endless.reads) <= spec.MAX_SOURCE_BYTES + 4
