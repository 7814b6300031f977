"""CompileError (lang/errors.py): where it points and what survives a pickle."""

import pytest

from jupyter_gpuiter import CompileError
from jupyter_gpuiter.compilers.serial import compile_source


def test_caret_points_at_the_column():
    with pytest.raises(CompileError) as info:
        compile_source("def f(x):\n    return x + yy\n")
    assert info.value.caret() == "    return x + yy\n               ^"


def test_compile_error_pickles_with_its_fields():
    import pickle

    e = pickle.loads(pickle.dumps(CompileError("arity", 2, 5, "msg", "src")))
    assert (e.kind, e.line, e.col, e.message, e.source) == ("arity", 2, 5, "msg", "src")
