"""The serial compiler (compilers/serial.py), the oracle: its verdicts on hand-written edge cases, and where each
phase reports its first error (size, lexer and token rules, CPython's parser, the tree walk)."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuiter import CompileError, generate
from jupyter_gpuiter.compilers.serial import compile_source, compile_sources
from jupyter_gpuiter.lang import spec
from jupyter_gpuiter.lang.errors import ERROR_KINDS
from tests.lang.test_quick import single_edit
from tests.support.edge_cases import INVALID, VALID


@pytest.mark.parametrize("source", VALID)
def test_valid_edge_cases_compile(source):
    program = compile_source(source)
    assert program.ops[-1] == "ret"


@pytest.mark.parametrize("source,expected", INVALID, ids=[repr(s[:60]) for s, _ in INVALID])
def test_invalid_edge_cases_report_kind_line_col(source, expected):
    with pytest.raises(CompileError) as info:
        compile_source(source)
    e = info.value
    kind, line, col = expected
    assert (e.kind, e.line) == (kind, line), str(e)
    if col is not None:
        assert e.col == col, str(e)
    assert e.kind in ERROR_KINDS and e.message


POSITIONS = [  # (source, kind, line, col): the first error, where each phase reports it
    ("x" * (spec.MAX_SOURCE_BYTES + 1), "too-large", 1, 1),  # A: the size, before anything is read
    ("", "unsupported", 1, 1),
    ("def f(x):\n    return x $ 1\n", "syntax", 2, 14),  # B: the lexer, at the character
    ("def f(x):\n  return x\n    y = 1\n", "syntax", 3, 5),  # B: the token rules (an unexpected indent)
    ("def f(x):\n    y = (x +\n         2 2)\n    return y\n", "syntax", 2, 10),  # C: the statement's first line
    ("def f(x):\n    y = (x +\n         2)\n    return y +\n", "syntax", 4, 15),
    ("def f(x):\n    return a + b\n", "unknown-name", 2, 12),  # D: the first by line and column
    ("def f(x):\n    y = q\n    return z\n", "unknown-name", 2, 9),
    ("def f(x):\n    return b + sin(x, x)\n", "unknown-name", 2, 12),
    ("def f(x):\n    return sin(foo(x), x)\n", "arity", 2, 12),  # the outer call before the inner
    ("def f(x):\n    return foo(q)\n", "unknown-function", 2, 12),
    ("def f(x):\n    while x:\n        pass\n    return x\n", "unsupported", 2, 5),
    ("def f(x):\n    y = x\n", "unsupported", 2, 5),  # no return
    ("def f(x):\n    return x\n    y = 2\n", "unsupported", 3, 5),  # code after return
    ("def f(x):\n    return \"s\"\n", "unsupported", 2, 12),
    ("def f(x):\r\n    return a\r\n", "unknown-name", 2, 12),  # CRLF: lines as CPython counts them
    ("def f(x):\n\treturn x + y\n", "unknown-name", 2, 13),  # a tab is one column
]


@pytest.mark.parametrize("source,kind,line,col", POSITIONS, ids=[repr(p[0][:40]) for p in POSITIONS])
def test_each_phase_reports_its_first_error_where_it_is(source, kind, line, col):
    with pytest.raises(CompileError) as info:
        compile_source(source)
    e = info.value
    assert (e.kind, e.line, e.col) == (kind, line, col), str(e)
    assert e.source == source and e.message


def test_names_in_messages_are_the_offending_ones():
    assert "'b'" in compile_sources(["def f(x):\n    return b + sin(x, x)\n"])[0].message
    assert "foo" in compile_sources(["def f(x):\n    return foo(q)\n"])[0].message
    assert "sin()" in compile_sources(["def f(x):\n    return sin(foo(x), x)\n"])[0].message


def test_compile_sources_reports_each_source_in_place_without_raising():
    sources = [VALID[0], "def f(x):\n    return q\n", "", VALID[1]]
    results = compile_sources(sources)
    assert [type(r).__name__ for r in results] == ["Program", "CompileError", "CompileError", "Program"]
    assert results[0].text() == compile_source(VALID[0]).text()
    assert (results[1].kind, results[1].line) == ("unknown-name", 2)


def _result(source: str, quick: bool):
    try:
        p = compile_source(source, quick=quick)
    except CompileError as e:
        return "error", e.id, e.kind, e.line, e.col, e.message
    return p.text(), p.param_names, p.name, repr(p.imms)


def assert_quick_is_full(sources):
    """compile_source with lang/quick.py's check gives what the full lexer and rules give: the same Program
    (text, names, immediates) or the same error (id, kind, line, column, message)."""
    bad = [s for s in sources if _result(s, True) != _result(s, False)]
    assert not bad, f"{len(bad)} of {len(sources)} differ; first: {bad[0]!r}"


@pytest.mark.parametrize("seed", range(3))
def test_the_quick_check_changes_no_result_on_generated_and_mutated_programs(seed):
    sources = generate.generate_batch(300, 3000 + seed)
    assert_quick_is_full(sources + [m for m, _ in generate.mutate_batch(sources, 4000 + seed)] + VALID
                         + [s for s, _ in INVALID] + [s for s, *_ in POSITIONS])


def test_the_quick_check_changes_no_result_on_single_edits():
    """Near-valid sources, where the quick check's refusals must fall exactly on the rules' errors."""
    rng = random.Random(5)
    base = [s for s, *_ in POSITIONS] + VALID + [
        ("def f(x, y):\n    d = x - y  # c\n    h = where(abs(d) < 1.0, 0.5 * d * d,\n              abs(d) - 0.5)\n"
         "    return math.exp(-d) * h + 1e-1 * tanh(x * y) if not x > 2 else -y\n"),
        'def f(a):\n    """A docstring."""\n    a += 2.5\n    return sum(a) / max(a, 1)\n']
    assert_quick_is_full([single_edit(rng, rng.choice(base)) for _ in range(3000)])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(["def f(x):\n    ", "return ", "x", "y", " ", "\n    ", "\n", "(", ")", "+", "-", "*",
                                 "**", ",", "=", "+=", ".", "math", "sin", "max", "1", "0.5", "1e3", "if ", " else ",
                                 "not ", "'''d'''", '"', "#", "\\", "\t", ";", ":", "é", "[", "==", "True"]),
                max_size=25))
def test_the_quick_check_changes_no_result_on_random_text(pieces):
    assert_quick_is_full(["".join(pieces), "def f(x):\n    " + "".join(pieces)])
