"""The `gpuiter compile` command: its output, its errors, and how it reads a file."""

import codecs
import os
import subprocess
import sys


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
