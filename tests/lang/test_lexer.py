"""The reference lexer: tokens, positions, and number literals judged exactly as CPython judges them."""

import ast
import warnings

from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuiter.lang.lexer import number_value, tokenize


def test_tokens_and_positions():
    tokens, error = tokenize("def f(x):\n    y = x ** 2  # square\n    return y\n")
    assert error is None
    assert [(t.kind, t.line, t.col) for t in tokens[7:12]] == [
        ("name", 2, 5), ("=", 2, 7), ("name", 2, 9), ("**", 2, 11), ("number", 2, 14)]
    assert [t.kind for t in tokens].count("newline") == 3


def test_brackets_continue_the_logical_line():
    tokens, _ = tokenize("def f(x):\n    y = (x +\n  1)\n    return y\n")
    assert [t.kind for t in tokens].count("newline") == 3


_number_text = st.text(alphabet="0123456789_.eEjxXoObBaAfF+-", min_size=1, max_size=8).filter(
    lambda s: s[0].isdigit() or (s[0] == "." and len(s) > 1 and s[1].isdigit()))


@settings(max_examples=2000, deadline=None)
@given(_number_text)
def test_number_literals_accepted_exactly_when_cpython_reads_one_number(text):
    """The lexer takes `text` as one number token iff CPython parses `x = text` to one number constant."""
    src = f"x = {text}\n"
    tokens, error = tokenize(src)
    ours = error is None and [t.kind for t in tokens] == ["name", "=", "number", "newline"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = ast.parse(src).body[0].value
            cpython = isinstance(value, ast.Constant) and type(value.value) in (int, float)
        except SyntaxError:
            cpython = False
    assert ours == cpython or (not ours and error is not None and "j" in text.lower()), (text, error)
    if ours:
        v = value.value
        assert number_value(text) == (float(v) if abs(v) < 1e308 or isinstance(v, float) else float("inf"))
