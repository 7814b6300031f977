"""Modes neural and hybrid reject every invalid source with the serial compiler's CompileError: the model
only ever sees sources the front end accepted."""

import pytest

import jupyter_gpuiter as gi
from jupyter_gpuiter import compile_batch
from jupyter_gpuiter.compilers.serial import compile_sources
from jupyter_gpuiter.generate import generate_batch, mutate_batch
from jupyter_gpuiter.lang.errors import CompileError
from jupyter_gpuiter.tools import cli
from tests.support.edge_cases import INVALID

ISSUE = {  # the issue's examples, each of which mode="neural" compiled to a kernel
    "unknown name": "def f(x):\n    return y\n",
    "unknown function": "def f(x):\n    return foo(x)\n",
    "arity": "def f(x):\n    return sin(x, x)\n",
    "chained comparison": "def f(x):\n    return 0 < x < 1\n",
    "missing return": "def f(x):\n    y = x\n",
    "bare return": "def f(x):\n    return\n",
    "code after return": "def f(x):\n    return x\n    y = 1\n",
    "duplicate parameter": "def f(x, x):\n    return x\n",
}


def invalid_sources() -> list[str]:
    mutated = [m for m, _ in mutate_batch(generate_batch(300, seed=71, max_chars=160), seed=72)]
    sources = list(ISSUE.values()) + [s for s, _ in INVALID] + mutated
    return [s for s, r in zip(sources, compile_sources(sources)) if isinstance(r, CompileError)]


@pytest.fixture(scope="module")
def invalid():
    sources = invalid_sources()
    assert len(sources) >= 300
    return sources


def where(results) -> list[tuple]:
    return [(r.kind, r.line, r.col) if isinstance(r, CompileError) else "program" for r in results]


@pytest.mark.parametrize("mode", ["neural", "hybrid"])
def test_every_invalid_source_gets_the_serial_error(invalid, mode):
    got = compile_batch(invalid, mode=mode, k=2) if mode == "hybrid" else compile_batch(invalid, mode=mode)
    assert where(got.results) == where(compile_batch(invalid, mode="serial").results)
    assert got.batch.error[:, 0].ne(0).all()  # the device batch says so too
    if mode == "hybrid":
        assert set(got.paths) == {"error"}


@pytest.mark.parametrize("mode", ["neural", "hybrid"])
@pytest.mark.parametrize("case", sorted(ISSUE))
def test_compile_raises_the_serial_error(mode, case):
    want = compile_batch([ISSUE[case]], mode="serial")[0]
    with pytest.raises(CompileError) as info:
        gi.compile(ISSUE[case], mode=mode)
    assert (info.value.kind, info.value.line, info.value.col) == (want.kind, want.line, want.col)


def test_a_mixed_batch_keeps_valid_programs_neural():
    valid = generate_batch(20, seed=73, max_chars=100)
    sources = [s for pair in zip(valid, ISSUE.values()) for s in pair]
    got = compile_batch(sources, mode="neural").canonical()
    want = compile_batch(sources, mode="serial").canonical()
    assert got[1::2] == want[1::2]
    assert sum(g == w for g, w in zip(got[::2], want[::2])) >= 6  # the model still writes the valid ones


@pytest.mark.parametrize("mode", ["neural", "hybrid"])
def test_cli_compile_exits_nonzero_on_an_invalid_source(tmp_path, capsys, mode):
    bad = tmp_path / "bad.py"
    bad.write_text(ISSUE["unknown name"])
    assert cli.main(["compile", str(bad), "--mode", mode, "--emit", "ir"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and f"{bad}:2:12: unknown-name" in captured.err
