"""The traditional (data-parallel) compiler against the serial oracle: the contract of docs/compiler.md.

Byte-identical canonical text for valid programs; for invalid ones the same kind, line, diagnostic
and message, and the same column unless it is a syntax error (tests/support/differential.py). The
default run checks a fast subset; the full sweep of >=100,000 valid and >=100,000 mutated programs
runs with `-m slow` (or --runslow); about a fifth of the generated programs are row kernels
(generate.ROW_SHARE; test_rows.py has the hand-written ones and the reductions' arity errors). Hand-written cases, generated and mutated programs, random text,
then line ends and indentation, and conditional expressions split by commas, each against the oracle
and CPython's verdict.
"""

import random
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import jupyter_gpuiter as gi
from jupyter_gpuiter import compile_batch, generate
from jupyter_gpuiter.compilers import traditional
from jupyter_gpuiter.compilers.traditional import batch_lexer
from jupyter_gpuiter.ir import Program, ProgramBatch
from jupyter_gpuiter.lang import spec
from tests.support.differential import assert_agree
from tests.support.edge_cases import COLLIDING, INVALID, TM_A, TM_B, VALID


def test_edge_cases_agree():
    assert_agree(VALID + [s for s, _ in INVALID])


def test_a_syntax_error_in_a_one_line_def_is_on_its_body_s_first_line():
    """`def f(x): return ...` holds two statements: a syntax error in the body is at the body's first
    line, which a header over two lines puts below the def's."""
    sources = ["def f(x\n): return x +\n", "def f(x): \\\n return x x\n", "def f(x,\n y): return (x +\n y +)\n",
               "def f(x): return x +\n", "def f(x\n):\n    return x +\n", "def f(x,\n y x):\n    return x\n"]
    got = assert_agree(sources)
    assert [g.rsplit(":", 1)[0] for g in got] == ["error syntax 2", "error syntax 2", "error syntax 2",
                                                  "error syntax 1", "error syntax 3", "error syntax 1"]


def test_lone_surrogates_in_comments_and_docstrings_compile_in_both_and_in_a_recheck():
    """CPython's parser cannot encode a lone surrogate, which lex admits in comments and docstrings: the
    serial compiler must not raise on one (nor on a row exact.py sends it, whose batch would be lost)."""
    sources = ["def f(x):\n    return x  # \udc80\n", 'def f(x):\n    """a \ud800 b"""\n    return x\n',
               "def f(x):\n    return y  # \udfff\n", 'def f(x):\n    """\ud800"""\n    return x +\n',
               f"def f(x):\n    {TM_A} = x\n    return {TM_B}  # \udc80\n", VALID[0]]
    got = assert_agree(sources)
    assert got[:2] == ["%0 = param 0\nret %0"] * 2 and got[4] == "error unknown-name 3:12"


PRECEDENCE = ["-2**2", "2**-1", "a**b**c", "a - b - c", "not a == b", "a / b * c // a % b", "-a ** -b",
              "a if b else c if a else b", "(a if b else c) if a else b", "not a and b or not c",
              "a < b == (c > a)", "+-+a", "a ** -b ** c", "-(a) ** 2", "min(a, b, c, a, b) + max(a, b,)",
              "where(a > b, -a, b ** 2)", "a and b and c or a", "(a + b) * (c - a) / ((b))", "np.pi * math.e",
              "a if not b else -c", "clip(a, -1, 1) ** 2 ** 0.5"]


@pytest.mark.parametrize("expr", PRECEDENCE)
def test_precedence_and_associativity(expr):
    assert_agree([f"def f(a, b, c):\n    return {expr}\n", f"def f(a, b, c):\n    x = {expr}\n    x += a\n    return x\n"])


@pytest.mark.parametrize("seed", range(4))
def test_generated_and_mutated_programs_agree(seed):
    sources = generate.generate_batch(400, 1000 + seed)
    mutants = [m for m, _ in generate.mutate_batch(sources, 2000 + seed)]
    got = assert_agree(sources + mutants)
    assert all(not g.startswith("error") for g in got[: len(sources)])
    assert 40 < _row_kernels(got[: len(sources)]) < 140  # row kernels among them (generate.ROW_SHARE)
    assert sum(g.startswith("error") for g in got[len(sources):]) > 0.9 * len(mutants)


def test_small_programs_agree():
    assert_agree(generate.generate_batch(500, 7, statements=(0, 2), max_depth=3))


def test_device_batch_equals_the_serial_programs_packed():
    """The device ProgramBatch itself, not only its host unpacking: instructions, immediates, lengths,
    parameter counts and error codes equal ProgramBatch.from_results of the serial compiler's results,
    and invalid rows are pure padding."""
    sources = generate.generate_batch(300, 21) + [m for m, _ in generate.mutate_batch(generate.generate_batch(300, 22), 23)]
    got = compile_batch(sources, mode="traditional").batch
    want = ProgramBatch.from_results(compile_batch(sources, mode="serial").results)
    n = want.ops.shape[1]
    assert torch.equal(got.ops[:, :n], want.ops) and torch.equal(got.args[:, :n], want.args)
    assert torch.equal(got.imm[:, :n].nan_to_num(7.5), want.imm.nan_to_num(7.5))
    assert (got.ops[:, n:] == -1).all() and (got.args[:, n:] == -1).all() and (got.imm[:, n:] == 0).all()
    assert torch.equal(got.lengths, want.lengths) and torch.equal(got.n_params, want.n_params)
    assert torch.equal(got.error[:, :2], want.error[:, :2])  # kind and line (syntax columns may differ)
    assert (got.error[:, 0] != 0).sum() > 200


def test_bad_programs_do_not_spoil_good_ones():
    good = generate.generate_batch(50, 11)
    bad = ["def f(x):\n    return y\n", "def f(x)\n", "$", "", "x" * 10_000]
    mixed = [s for pair in zip(good, bad * 10) for s in pair]
    got = compile_batch(mixed, mode="traditional").canonical()
    alone = compile_batch(good, mode="traditional").canonical()
    assert got[0::2] == alone
    assert all(g.startswith("error") for g in got[1::2])


HEADS = [  # def lines as Python reads them: comments before and inside, continuations, a trailing comma
    "# scale (by two)\ndef double(x, y):\n    return x * 2\n", "def  f( a ,b ):\n    return a\n",
    "def g(a,  # first (one)\n      b,\n):\n    return a\n", "def \\\n h \\\n (x):\n    return x\n",
    "\n\n  # c\r\ndef k():\n    return 1\n", "def t(x,):\n    return x\n", "def u(p\t,\tq)  :  # (r)\n    return q\n",
    "\\\n\ndef v(x):\n    return x\n", "# c\r\n\\\r\n\r\ndef w(x):\r\n    return x\r\n",  # a backslash line first
]


def test_names_are_those_the_serial_compiler_reads():
    sources = HEADS + VALID + generate.generate_batch(300, 21)
    serial = compile_batch(sources, mode="serial").results
    got = compile_batch(sources, mode="traditional").results
    pairs = [(s, g) for s, g in zip(serial, got) if isinstance(s, Program)]
    assert len(pairs) > 250 and all(isinstance(r, Program) for r in serial[: len(HEADS)])
    assert [(g.name, g.param_names) for _, g in pairs] == [(s.name, s.param_names) for s, _ in pairs]


def test_reading_names_takes_time_linear_in_the_head():
    """A failed match of the head must not backtrack over each way to read CRLFs (2^40 here): a
    subprocess, so that a regression fails by its timeout instead of hanging the run."""
    import subprocess
    import sys

    code = ("from jupyter_gpuiter.compilers.traditional.driver import _names; "
            "print(_names('# c\\r\\n' * 40 + '\\\\\\r\\n\\r\\ndef f(x):\\r\\n    return x\\r\\n'), "
            "_names('\\r\\n' * 40 + 'x'), _names('def f(#' + 'a' * 8000), _names('def f(' + '#' * 60))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split() == ["('f',", "['x'])", "('kernel',", "[])", "('kernel',", "[])", "('kernel',", "[])"]


@pytest.mark.parametrize("source", [
    "def f(x):\n    return x\n" + " " * (spec.MAX_SOURCE_BYTES * 4),
    "def f(x):\n    return " + "(" * 3000 + "x" + ")" * 3000 + "\n",
    "def f(x):\n    return " + "-" * 4000 + "x\n",
    "def f(x):\n    return " + "+".join(["x"] * 2000) + "\n",
    "def f(x):\n    return 1" + "0" * 5000 + "\n",
    "def f(" + ",".join(f"p{i}" for i in range(500)) + "):\n    return p0\n",
])
def test_limits_give_errors_not_crashes(source):
    got = compile_batch([source], mode="traditional").canonical()[0]
    assert got.startswith(("error too-large", "%0")), got
    assert_agree([source])


def test_limit_checks_are_exact_at_the_boundary():
    n = spec.MAX_NESTING
    at = "def f(x):\n    return " + "(" * n + "x" + ")" * n + "\n"
    over = "def f(x):\n    return " + "(" * (n + 1) + "x" + ")" * (n + 1) + "\n"
    got = assert_agree([at, over])
    assert not got[0].startswith("error") and got[1].startswith("error too-large")


def test_unicode_crlf_tabs_and_long_lines():
    srcs = [
        "def f(x):\r\n\t'''naïve ✓'''\r\n\ty = x  # café\r\n\treturn y\r\n",
        "def f(x):\r    return x\r",
        "def f(x):\n    return x" + " + x" * 400 + "\n",
        "def f(x):\n    y = x +" + " " * 3000 + "1\n    return y\n",
        "def f(x):\n    return x  # " + "é" * 2000 + "\n",
    ]
    assert_agree(srcs)


_alphabet = list("abxefr0123456789_.+-*/%<>=!(),:'\"\\#\n\t ") + ["def f(x):\n    ", "return ", "if ", " else ",
                                                                  "not ", "é", "\r\n", "sin(", "np.", "**"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_alphabet), max_size=30))
def test_random_text_agrees(parts):
    assert_agree(["".join(parts)])


@pytest.mark.gpu
def test_cuda_agrees_with_serial():
    sources = generate.generate_batch(2000, 21)
    sources += [m for m, _ in generate.mutate_batch(sources, 22)] + VALID + [s for s, _ in INVALID] + COLLIDING
    got = assert_agree(sources, device="cuda")
    assert got == compile_batch(sources, mode="traditional", device="cpu").canonical()
    assert torch.cuda.is_available()
    batches, _ = traditional.compile_to_batches(sources, "cuda")  # exact.py's int16 scatter_add on the device
    flagged = sorted(sel[j] for sel, c in batches for j in torch.nonzero(c.recheck).flatten().tolist())
    assert flagged == [len(sources) - len(COLLIDING) + i for i in range(4)]


def _row_kernels(canonical: list[str]) -> int:
    """How many of the canonical texts are row kernels (hold a reduction)."""
    return sum(bool(_REDUCTION.search(c)) for c in canonical)


_REDUCTION = re.compile(f"= (?:{'|'.join(spec.REDUCTION_OPS)}) %")


@pytest.mark.slow
@pytest.mark.parametrize("part", range(10))
def test_full_sweep(part):
    """>=100,000 generated and >=100,000 mutated programs over the ten parts; about generate.ROW_SHARE of
    the generated ones (and of the mutants' sources) are row kernels."""
    sources = generate.generate_batch(10_000, 50_000 + part)
    mutants = [m for m, _ in generate.mutate_batch(sources, 60_000 + part)]
    got = assert_agree(sources)
    assert abs(_row_kernels(got) / len(got) - generate.ROW_SHARE) < 0.02
    assert _row_kernels(assert_agree(mutants)) > 0.01 * len(mutants)


def test_hash_collisions_are_caught_and_compiled_serially():
    from jupyter_gpuiter.compilers.traditional.pack import pack

    lex_module = batch_lexer
    tk = lex_module.lex(*pack([TM_A, TM_B], "cpu"), 4096)
    assert tk.kind[:, 0].tolist() == [spec.TOK["name"]] * 2 and tk.end[:, 0].tolist() == [len(TM_A)] * 2
    assert tk.hash[0, 0] == tk.hash[1, 0]  # the names do collide, so the passes alone would take them as one
    sources = generate.generate_batch(40, 5)
    mixed = sources[:20] + COLLIDING + sources[20:]
    got = assert_agree(mixed)
    assert got[20].startswith("error unknown-name") and got[23].startswith("error syntax") and "ret" in got[22]
    batches, _ = traditional.compile_to_batches(mixed)
    flagged = sorted(sel[j] for sel, c in batches for j in torch.nonzero(c.recheck).flatten().tolist())
    assert flagged == [20, 21, 22, 23]  # the four the hashes misled; not the matching indentation
    want = ProgramBatch.from_results(compile_batch(mixed, mode="serial").results)
    batch = compile_batch(mixed, mode="traditional").batch
    n = want.ops.shape[1]
    assert torch.equal(batch.ops[:, :n], want.ops) and torch.equal(batch.args[:, :n], want.args)
    assert (batch.ops[:, n:] == -1).all() and torch.equal(batch.lengths, want.lengths)
    assert torch.equal(batch.error[:, :2], want.error[:, :2])


def test_ordinary_programs_are_never_sent_back_to_the_serial_compiler():
    sources = generate.generate_batch(2000, 31)
    sources += [m for m, _ in generate.mutate_batch(sources, 32)] + VALID + [s for s, _ in INVALID]
    batches, _ = traditional.compile_to_batches(sources)
    assert sum(int(c.recheck.sum()) for _, c in batches) == 0


# -- Line ends and indentation ---------------------------------------------------------------------------
# Line ends and indentation against the serial oracle (`assert_agree`) and CPython's verdict.
#
# Two of CPython's errors the token rules do not see:
#
# - a backslash continuation that ends the file (CPython: unexpected EOF), whatever the line ends (LF,
#   CRLF, a lone CR); a blank line or spaces after it, or a backslash in a comment, are fine;
# - a form feed that ends the body's indentation: CPython's tokenizer sets the column to 0 at a form
#   feed, so the body is not indented; form feeds elsewhere in the indentation, mid-line, in comments
#   and on blank lines change nothing.
#
# Both come after every lexical and token-rule error and before the errors found in the tree after
# them (an earlier statement's syntax error comes first), as in the serial compiler. Found by fuzzing:
# the traditional compiler accepted these or reported another error.
#
# And form feeds in the indentation of any line, `def`'s included (both compilers rejected `def f(x):`,
# which CPython accepts): a line's indentation is what follows its last form feed; byte-order marks in a
# str (rejected, as by CPython's compile()); an unknown math./np. attribute's message.


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


# -- Conditional expressions split by a comma ------------------------------------------------------------
# A conditional expression split by a comma of its bracket (`max(x if y, z else x)`) is a syntax error, as in
# CPython and the serial compiler: the traditional parse pairs each `if` with the next `else` of its bracket only
# when no comma of that bracket stands between them. Differential against the serial oracle (`assert_agree`),
# on hand-written neighbours and on seeded random rearrangements of valid calls with ternary arguments.


H = "def f(x, y, z, w):\n    return "

#: found by fuzzing: accepted (or an arity error) by the traditional compiler before the fix
SPLIT = ["max(x if y, z else x)", "min(x if y, z else x)", "atan2(x if y, z else x)", "where(x if y, z else x, w)",
         "clip(x if y, z else x, w)", "where(x if y, z, w else x)", "max(x if y, z, w else x)",
         "max(x, y if z, w else x, y)", "max(x if y else z if w, x else y)", "min(x if y, z else x, w if x, y else z)",
         "max(x if y,\n        z else x)", "max(x if y\n        , z else x)", "max(x,\n    y if z, w else x)",
         "max(math.sin(x) if y, z else x)", "max(x if np.pi, z else x)", "max(-x if not y, z else +x)"]

NEIGHBOURS = [
    # valid: the comma outside the ternary, or inside a bracket of the condition or a branch
    "max(x if y else z, w)", "max(x, y if z else w)", "max(x if y else z, w if x else y)",
    "max(x if max(y, z) else w, x)", "max(x if y else min(z, w), x)", "max(min(x, y) if z else w, x)",
    "max(x, y if z else w,)", "where(x if y else z, w, x if y else z if w else x)",
    "max(x if y else z if w else x, y)", "max((x if y else z), w)", "max(x if (y) else z, w)",
    "max(x if y else z,\n        w)", "atan2(x if y else z, w)", "clip(x if y else z, w, x)",
    # invalid: the comma elsewhere, the parts in the wrong brackets, or missing
    "max(min(x if y, z) else w)", "max(x if y else z if w, x)", "max(x if y else z,)", "max(x if y, else z)",
    "max(x if y else, z)", "max(x else y, z if w)", "max(x if ,y else z)", "max(x if y,) else z",
    "max(x if y if z else w else x, y)", "max(x if y, z else w,)", "max(x if min(y, z else w), x)",
    "max(x if y else z w, x)", "min(x if y, z else x) if w else y", "x if y else max(z if w, x else y)",
    # tuples (unsupported in the language) with the comma inside a ternary
    "(x if y, z else w)", "(x if y, z) else w", "x if y, z else w", "x if y else z, w", "(x if y else z, w)",
    "(x if y else z if w, x)", "x if y,", "x if y, else z", "max(x if (y, z) else w, x)",
]

STATEMENTS = [
    "def f(x, y, z):\n    a = max(x if y, z else x)\n    return a\n",
    "def f(x, y, z):\n    a += max(x if y, z else x)\n    return a\n",
    "def f(x, y, z):\n    a = x\n    b = atan2(a if y, z else x)\n    return b\n",
    "def f(x, y, z):\n    a = max(x if y else z, x)\n    return max(a if y, z else x)\n",
    "def f(x, y, z):\n    a = max(x if y else z, x)\n    b = min(a if y else z, x, a if z else y)\n    return b\n",
    "def f(x, y, z):\n    a, b = x if y, z else x\n    return a\n",
    "def f(x, y, z):\n    a = x if y, z else x\n    return a\n",
    "def f(x, y, z): return max(x if y, z else x)\n",
    "def f(x, y, z): return max(x if y else z, x)\n",
]


def test_fuzzed_cases_are_syntax_errors():
    sources = [H + e + "\n" for e in SPLIT]
    got = assert_agree(sources)
    assert all(g.startswith("error syntax 2:") for g in got)


def test_neighbours_agree():
    got = assert_agree([H + e + "\n" for e in NEIGHBOURS] + STATEMENTS)
    assert sum(not g.startswith("error") for g in got) >= 15  # the valid neighbours stay valid


ATOMS = ["x", "y", "z", "w", "1", "-x", "(y)", "np.pi"]
CALLS = [("max", 2), ("min", 3), ("atan2", 2), ("where", 3), ("clip", 3), ("math.sin", 1)]


def _expr(rng: random.Random, depth: int) -> str:
    r = rng.random()
    if depth <= 0 or r < 0.3:
        return rng.choice(ATOMS)
    if r < 0.6:
        return f"{_expr(rng, depth - 1)} if {_expr(rng, depth - 1)} else {_expr(rng, depth - 1)}"
    name, n = rng.choice(CALLS)
    return f"{name}({', '.join(_expr(rng, depth - 1) for _ in range(n))}{',' if rng.random() < 0.2 else ''})"


def _rearranged(rng: random.Random, expr: str) -> str:
    """Swaps a comma with an `if` or `else`, moves one, or drops or adds a comma."""
    words = expr.replace(",", " , ").replace("(", " ( ").replace(")", " ) ").split()
    seps = [i for i, w in enumerate(words) if w in (",", "if", "else")]
    if len(seps) < 2:
        return expr
    i, j = rng.sample(seps, 2)
    op = rng.randrange(3)
    if op == 0:
        words[i], words[j] = words[j], words[i]
    elif op == 1:
        words.insert(j, words.pop(i))
    else:
        words.insert(rng.randrange(len(words) + 1), ",")
    return " ".join(words)


@pytest.mark.parametrize("seed", range(2))
def test_random_rearrangements_agree(seed):
    rng = random.Random(seed)
    exprs = [_expr(rng, 3) for _ in range(300)]
    exprs = [e for e in exprs if " if " in e and "(" in e][:150]
    sources = [H + e + "\n" for e in exprs] + [H + _rearranged(rng, e) + "\n" for e in exprs for _ in range(3)]
    got = assert_agree(sources)
    assert sum(g.startswith("error syntax") for g in got) > len(exprs)


def test_valid_programs_unchanged():
    """Valid programs with ternaries among call arguments compile to the serial compiler's text."""
    rng = random.Random(7)
    exprs = [e for e in (_expr(rng, 3) for _ in range(400)) if " if " in e and "(" in e][:200]
    sources = [H + e + "\n" for e in exprs]
    serial = compile_batch(sources, mode="serial").canonical()
    ok = [s for s, c in zip(sources, serial) if not c.startswith("error")]
    assert len(ok) > 50
    assert all(not g.startswith("error") for g in assert_agree(ok))
