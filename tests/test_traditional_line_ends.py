"""Line ends and indentation against the serial oracle (`assert_agree`) and CPython's verdict.

Two of CPython's errors the token rules do not see:

- a backslash continuation that ends the file (CPython: unexpected EOF), whatever the line ends (LF,
  CRLF, a lone CR); a blank line or spaces after it, or a backslash in a comment, are fine;
- a form feed that ends the body's indentation: CPython's tokenizer sets the column to 0 at a form
  feed, so the body is not indented; form feeds elsewhere in the indentation, mid-line, in comments
  and on blank lines change nothing.

Both come after every lexical and token-rule error and before the errors found in the tree after
them (an earlier statement's syntax error comes first), as in the serial compiler. Found by fuzzing:
the traditional compiler accepted these or reported another error.

And form feeds in the indentation of any line, `def`'s included (both compilers rejected `\fdef f(x):`,
which CPython accepts): a line's indentation is what follows its last form feed; byte-order marks in a
str (rejected, as by CPython's compile()); an unknown math./np. attribute's message.
"""

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_traditional import assert_agree

import jupyter_gpuiter as gi
from jupyter_gpuiter import compile_batch

ENDS = ["\\\n", "\\\r\n", "\\\r"]

EOF_BODIES = [
    "def f(x):\n    return x ", "def f(x):\n    return x\n", "def f(x):\n    y = x ", "def f(x): return x ",
    "def f(x):\n    return x\n    ", "def f(x):\n    return x + ", "def f(x):\n    return (x ",
    "def f(x):\n    return math.pi ", "def f(x):\n    return abs(x) ", "def f(x):\n    return ",
    "def f(x):\n    y = ", "def f(x):\n    y += ", "def f(x):\n    return -", "def f(x):\n    return x if x else ",
    'def f(x):\n    """doc""" ', 'def f(x):\n    """doc"""\n    return x ', 'def f(x): "doc" ',
    'def f(x):\n    """doc\n    more""" ', "def f(x):\n    return (x +\n  1) ", "def f(x):\n    return x, 1 ",
    "def f(x):\n    return (x +\n 1), 2 ", "def f(x):\n    y = = x\n    return x ",
    "def f(x):\n    y = x,\n    return x ", "def f(x) y:\n    return x ", "def f(x)\n    return x ",
    "def f(x):\n    return y ", "def f(x):\n    return x\n    return x ", "def f(x):\n    x\n    return x ",
    "def f(x):\n    return x \\\n", "def f(x):\n    return x\n\n", "def f(x):\n    return x  # c\n",
    "def f(x):", "def f(x):\n", "def f(x):\n\x0creturn x ", "def f(x):\n    return x\n  ",
    "def f(x):\n    return \\\n    x ", "def f(x):\n    return x; ", "def f(x):\n    return x ) ",
    "def f(x):\n    return 1e ", "def f(x):\n    return math. ", "def f(x):\n    return '",
]


def test_a_backslash_continuation_that_ends_the_file_is_a_syntax_error():
    sources = [b + e for b in EOF_BODIES for e in ENDS]
    got = assert_agree(sources)
    assert got[0].startswith("error syntax 2:") and got[3 * 3].startswith("error syntax 1:")


def test_after_a_final_backslash_continuation_a_blank_line_spaces_or_a_comment_are_fine():
    sources = [b + e + tail for b in EOF_BODIES[:10] for e in ENDS for tail in ("\n", "  ", " # c", "\t\n", "\x0c")]
    sources += [b + "# a comment \\" + e for b in EOF_BODIES[:10] for e in ENDS]
    sources += [b + "\\" for b in EOF_BODIES[:10]]  # a backslash before the end of the file: a lexical error
    got = assert_agree(sources)
    assert not got[0].startswith("error")


def test_a_final_backslash_continuation_loses_to_lexical_and_token_rule_errors():
    sources = ["def f(x):\n    return 'a\\x' \\\n", "def f(x):\n    return x)\\\n", "def f(x):\n    return 1j \\\n",
               "def f(x):\n    return x, 1 \\\n", "def f(x):\n    y = [x] \\\n", "def f(x):\n  return x\n    \\\n",
               "def f(x):\n    return x\n  y \\\n", "def f(x):\n  return x\n z = 1\\\n"]
    got = assert_agree(sources)
    assert got[3] == compile_batch(["def f(x):\n    return x, 1\n"], mode="serial").canonical()[0]


FF_SOURCES = [
    "def f(x):\n\x0creturn x\n", "def f(x):\n\t \x0cy = x\n\t \x0creturn y\n", "def f(x):\n\x0cx\n",
    "def f(x):\n \x0c return x\n", "def f(x):\n\x0c\n return x\n", "def f(x):\n return\x0cx\n",
    "def f(x):\n return x #\x0c\n", "\x0cdef f(x):\n return x\n", "def f(x):\n\x0creturn x, 1\n",
    "def f(x):\n\x0creturn x\n\x0c y = 1\n", "def f(x): \x0c\n\x0c return x\n", "def f(x):\x0c\n    return x\n",
    'def f(x):\n\x0c"""doc"""\n\x0creturn x\n', 'def f(x):\n\x0c"""doc"""\n', "def f(x):\n\x0creturn x +\n",
    "def f(x):\n\x0creturn y\n", "def f(x):\n\x0cy = = x\n\x0creturn y\n", "def f(x) y:\n\x0creturn x\n",
    "def f(x)\n\x0creturn x\n", "def f(x, x):\n\x0creturn x\n", "def f(x,\n y):\n\x0creturn x\n",
    "def f(x): return x\n\x0c", "def f(x): return x\n\x0creturn x\n", "def f(x):\n\x0c\x0creturn x\n",
    "def f(x):\n  \x0c\x0c  return x\n", "def f(x):\n\x0c  return x\n\x0c return x\n", "def f(x):\n\x0c# c\n return x\n",
    "def f(x):\n    y = (x +\n\x0c1)\n    return y\n", "def f(x):\n    y = x\n\x0c\n    return y\n",
    "def f(x):\r\n\x0creturn x\r\n", "def f(x):\r\x0creturn x\r", "def f(x):\n\x0creturn x \\\n",
    "def f(x):\n\x0creturn (x\n", "def f(x):\n\x0creturn 'a\\x'\n", "def f(x):\n\x0c  \x0creturn x\n",
]


def test_a_form_feed_that_ends_the_indentation_leaves_the_body_unindented():
    got = assert_agree(FF_SOURCES)
    assert got[0].startswith("error syntax 2:") and got[2].startswith("error syntax 2:")
    assert not got[3].startswith("error")


BODIES = [["return x"], ["y = x", "return y"], ["x"], ['"""doc"""', "return x"], ["y = x,", "return y"],
          ["y = = x", "return x"], ["return z"], ["y = x", "return abs(y, y)"], ["return math.pi"], ['"""doc"""'],
          ["y = (x +", "1)", "return y"], ["return x", "return x"], ["y = x", "y += 1"]]
WHITE = st.text(alphabet=" \t\x0c", max_size=4)
EOF_TAILS = ["", "", "\\\n", "\\\r\n", "\\\r", "\\\n\n", "\\\n  ", "\\\n\\\n", " # \\\n"]


def source_of(header, body, indents, newline, tail):
    return newline.join([header] + [i + b for i, b in zip(indents, body)]) + newline + tail


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["def f(x):", "def f(x):\x0c", "def f(x,\n y):"]),
                          st.sampled_from(BODIES), WHITE, st.lists(WHITE, min_size=3, max_size=3), st.booleans(),
                          st.sampled_from(["\n", "\r\n", "\r"]), st.sampled_from(EOF_TAILS)), min_size=1, max_size=16))
def test_random_indentations_and_final_continuations_agree(drawn):
    """Indentation of spaces, tabs and form feeds, one for every line or one a line, and sources that end
    in a backslash continuation (or not)."""
    sources = []
    for header, body, shared, each, same, newline, tail in drawn:
        indents = [shared] * len(body) if same else (each * 2)[:len(body)]
        sources.append(source_of(header, body, indents, newline, tail))
    assert_agree(sources)


def test_seeded_random_indentations_agree():
    rng = random.Random(7)
    white = " \t\x0c"
    sources = []
    for _ in range(2000):
        body = rng.choice(BODIES)
        shared = "".join(rng.choice(white) for _ in range(rng.randint(0, 4)))
        indents = [shared if rng.random() < 0.8 else "".join(rng.choice(white) for _ in range(rng.randint(0, 3)))
                   for _ in body]
        sources.append(source_of("def f(x):", body, indents, "\n", rng.choice(EOF_TAILS)))
    assert_agree(sources)


# ---------------------------------------------------------------- form feeds before `def`, byte-order marks


def cpython_accepts(source: str) -> bool:
    try:
        compile(source, "<kernel>", "exec")
    except SyntaxError:
        return False
    return True


def serial_accepts(source: str) -> bool:
    return not compile_batch([source], mode="serial").canonical()[0].startswith("error")


# indentation made of spaces, tabs and form feeds, before the def and before body lines whose indentation
# after the last form feed is one string (CPython's column 0 is at a form feed): whether CPython accepts
# depends only on form feeds, so the compilers must accept exactly when it does
HEADER_WHITE = ["", "\f", "\f\f", " \f", "\t\f", "  \f\f", "\f ", "\f\t", " \f ", "\f\f  "]
BODY_WHITE = ["    ", "\f    ", "  \f    ", "\f\f    ", "\t\f    ", "    \f", "\f", "  \f  \f    "]


def test_form_feeds_in_indentation_accepted_exactly_where_cpython_accepts_them():
    sources = []
    for h in HEADER_WHITE:
        for b1 in BODY_WHITE:
            for b2 in ("    ", "\f    "):
                sources.append(f"{h}def f(x):\n{b1}y = x * 2\n{b2}return y + 1\n")
        sources.append(f"{h}def f(x): return x\n")
        sources.append(f'{h}def f(x):\n\f    """doc"""\n    return x\n')
    got = assert_agree(sources)
    for s, g in zip(sources, got):
        assert (not g.startswith("error")) == cpython_accepts(s), (s, g)
        if g.startswith("error"):  # CPython: IndentationError
            assert g.startswith("error syntax "), (s, g)
    want = compile_batch(["def f(x):\n    y = x * 2\n    return y + 1\n"], mode="serial").canonical()[0]
    assert got[HEADER_WHITE.index("\f") * 18 + 2] == want  # \fdef, \f-indented body: the same program


def test_a_form_feed_before_def_compiles_in_every_mode_that_checks():
    for mode in ("serial", "traditional"):
        k = gi.compile("\fdef f(x):\n    return x + 1\n", mode=mode)
        assert k.name == "f" and k(np.array([1.0])).tolist() == [2.0]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(WHITE, WHITE, st.sampled_from(BODIES)), min_size=1, max_size=16))
def test_random_white_before_def_agrees(drawn):
    assert_agree([source_of(h + "def f(x):", body, [w] * len(body), "\n", "") for h, w, body in drawn])


BOM = "\ufeff"


def test_a_byte_order_mark_in_a_str_is_rejected_as_cpython_compile_rejects_it():
    """CPython accepts a BOM in a file's bytes (Python drops it when it decodes them), not in a str:
    compile('\\ufeffdef ...') is a SyntaxError. The compilers take str, so they agree with compile(); the
    message says to decode with utf-8-sig (what `gpuiter compile FILE` does)."""
    sources = [BOM + "def f(x):\n    return x\n", BOM + "# c\ndef f(x):\n    return x\n", BOM * 2 + "def f(x): return x\n",
               "def f(x):\n    return x" + BOM + "\n", BOM + "def f(x):\n    return y\n", "def f(x):\n    return x  # " + BOM + "\n",
               'def f(x):\n    """' + BOM + '"""\n    return x\n', "\f" + BOM + "def f(x): return x\n"]
    got = assert_agree(sources)
    assert [cpython_accepts(s) for s in sources] == [False] * 5 + [True, True, False]
    assert got[:5] == ["error unsupported 1:1"] * 3 + ["error unsupported 2:13", "error unsupported 1:1"]
    assert not got[5].startswith("error") and not got[6].startswith("error")
    assert got[7] == "error unsupported 1:2"
    for mode in ("serial", "traditional"):
        with pytest.raises(gi.CompileError) as info:
            gi.compile(sources[0], mode=mode)
        assert (info.value.kind, info.value.line, info.value.col) == ("unsupported", 1, 1)
        assert "byte-order mark" in info.value.message and "utf-8-sig" in info.value.message
        with pytest.raises(gi.CompileError) as info:
            gi.compile(sources[3], mode=mode)
        assert "U+FEFF" in info.value.message and "utf-8-sig" not in info.value.message
    # decoded as Python decodes a file, the same bytes compile
    assert serial_accepts((BOM + "def f(x):\n    return x\n").encode().decode("utf-8-sig"))


def test_an_unknown_math_attribute_is_named_with_its_namespace():
    sources = ["def f(x): return math.__dict__\n", "def f(x):\n    return np.foo + x\n",
               "def f(x):\n    return x * math . tau\n"]
    got = assert_agree(sources)
    assert got == ["error unknown-name 1:18", "error unknown-name 2:12", "error unknown-name 2:16"]
    for mode in ("serial", "traditional"):
        messages = [e.message for e in compile_batch(sources, mode=mode).results]
        assert messages[0].startswith("'math.__dict__' is not defined: math. and np. name only the builtins")
        assert messages[1].startswith("'np.foo' is not defined") and messages[2].startswith("'math.tau' is not")
        assert all("has no constant" not in m and "pi, e, inf, nan" in m for m in messages)


def test_a_lexical_error_before_any_token_is_not_an_empty_source():
    """Lexing stops at the first lexical error: no token before it made both compilers report `empty
    source` at 1:1 instead of the error itself."""
    sources = ["   $x", "#c\n \x00", "\f" + BOM + "def f(x): return x\n", "  ", "", "# c\n"]
    got = assert_agree(sources)
    assert got == ["error syntax 1:4", "error syntax 2:2", "error unsupported 1:2"] + ["error unsupported 1:1"] * 3
    assert "empty source" in compile_batch(["  "], mode="serial").results[0].message
