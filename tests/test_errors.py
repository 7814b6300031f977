"""The serial compiler's verdicts on hand-written edge cases, and error reporting."""

import pytest
from edge_cases import INVALID, VALID

from jupyter_gpuiter import CompileError
from jupyter_gpuiter.compilers.serial import compile_source
from jupyter_gpuiter.lang.errors import ERROR_KINDS


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


def test_caret_points_at_the_column():
    with pytest.raises(CompileError) as info:
        compile_source("def f(x):\n    return x + yy\n")
    assert info.value.caret() == "    return x + yy\n               ^"


def test_compile_error_pickles_with_its_fields():
    import pickle

    e = pickle.loads(pickle.dumps(CompileError("arity", 2, 5, "msg", "src")))
    assert (e.kind, e.line, e.col, e.message, e.source) == ("arity", 2, 5, "msg", "src")
