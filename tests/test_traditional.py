"""The traditional (data-parallel) compiler against the serial oracle: the design §5 contract.

Byte-identical canonical text for valid programs; for invalid ones the same kind, line, diagnostic
and message, and the same column unless it is a syntax error. The default run checks a fast subset;
the full sweep of >=100,000 valid and >=100,000 mutated programs runs with `-m slow` (or --runslow).
"""

import dataclasses
import random

import numpy as np
import pytest
import torch
from edge_cases import COLLIDING, INVALID, TM_A, TM_B, VALID
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuiter import compile_batch, generate
from jupyter_gpuiter.compilers import traditional
from jupyter_gpuiter.compilers.traditional import batch_lexer, driver
from jupyter_gpuiter.compilers.traditional.regroup import regroup
from jupyter_gpuiter.ir import Program, ProgramBatch
from jupyter_gpuiter.lang import spec
from jupyter_gpuiter.lang.errors import CompileError
from jupyter_gpuiter.lang.lexer import number_value, tokenize


def comparable(canonical: str) -> str:
    """Syntax errors agree on kind and line only."""
    return canonical.rsplit(":", 1)[0] if canonical.startswith("error syntax") else canonical


def worded(result) -> tuple | None:
    """An error's diagnostic and message (both compilers state it in the same words: lang/diagnostics.py)."""
    return (result.id, result.message) if isinstance(result, CompileError) else None


def assert_agree(sources, device=None):
    trad = compile_batch(sources, mode="traditional", device=device)
    ser = compile_batch(sources, mode="serial")
    got, want = trad.canonical(), ser.canonical()
    bad = [(s, g, w, worded(a), worded(b)) for s, g, w, a, b in zip(sources, got, want, trad, ser)
           if comparable(g) != comparable(w) or worded(a) != worded(b)]
    assert not bad, f"{len(bad)} of {len(sources)} disagree; first: {bad[0]!r}"
    return got


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


def test_batches_split_into_chunks_give_the_same_result(monkeypatch):
    sources = generate.generate_batch(120, 12) + [s for s, _ in INVALID]
    whole = compile_batch(sources, mode="traditional").canonical()
    monkeypatch.setattr(driver, "CHUNK_CELLS", 4096)
    assert compile_batch(sources, mode="traditional").canonical() == whole


def test_short_programs_are_not_padded_to_the_long_ones(monkeypatch):
    short = generate.generate_batch(300, 13, max_chars=60)
    long = generate.generate_batch(300, 14, statements=(10, 12))
    monkeypatch.setattr(driver, "MIN_CHUNK_CELLS", {"cpu": 1 << 12})
    batches, sizes = traditional.compile_to_batches(short + long)
    assert len(batches) >= 2
    for rows, chunk in batches:  # each chunk pads its token arrays to its most tokens: at most 1.1x, or it is small
        T = chunk.token_start.shape[1]
        assert T == max(chunk.tokens) and len(chunk.tokens) == len(rows)
        assert len(rows) * (max(sizes[rows]) + 1) <= 1 << 12 or len(rows) * T <= driver.PAD_WASTE * sum(chunk.tokens)
    assert_agree(short + long)


def test_lexing_chunks_pad_bytes_and_later_chunks_pad_tokens_at_most_pad_waste():
    from jupyter_gpuiter.compilers.traditional.plan import split

    sizes = np.array([10, 11, 12, 40, 41, 44, 90, 95, 99])
    tokens = np.array([3, 9, 4, 12, 30, 13, 31, 33, 14])
    by_bytes = split(list(range(9)), sizes + 1, sizes + 1, 10**6, 0, 1.1)
    assert by_bytes == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    order = np.argsort(tokens, kind="stable").tolist()
    assert split(order, sizes + 1, tokens, 10**6, 0, 1.1) == [[0], [2], [1], [3, 5, 8], [4, 6, 7]]
    assert split(order, sizes + 1, tokens, 250, 0, 1.1)[-2:] == [[4, 6], [7]]  # 3 rows of up to 96 bytes: 288


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


def split_by_steps(order, width, height, max_cells, min_cells, pad_waste):
    """The chunk cut as its definition reads, a row at a time: the oracle of plan.split."""
    heights, widths = [int(height[i]) for i in order], [int(width[i]) for i in order]
    chunks, start = [], 0
    while start < len(order):
        stop, used, widest = start + 1, heights[start], widths[start]
        while stop < len(order):
            n, h, widest_next = stop - start + 1, heights[stop], max(widest, widths[stop])
            cells = n * widest_next
            if cells > max_cells or (cells > min_cells and n * h > pad_waste * (used + h)):
                break
            used, widest, stop = used + h, widest_next, stop + 1
        chunks.append(list(order[start:stop]))
        start = stop
    return chunks


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 300), st.integers(0, 90)), max_size=400),
       st.sampled_from([40, 300, 3000, 10 ** 6]), st.sampled_from([0, 200, 2000, 10 ** 7]),
       st.sampled_from([1.0, 1.05, 1.1, 1.5]), st.booleans())
def test_split_cuts_where_a_row_at_a_time_would(rows, max_cells, min_cells, pad_waste, by_tokens):
    from jupyter_gpuiter.compilers.traditional.plan import split

    width, tokens = np.array([w for w, _ in rows], dtype=np.int64), np.array([t for _, t in rows], dtype=np.int64)
    height = tokens if by_tokens else width
    order = np.argsort(height, kind="stable").tolist()
    chunks = split(order, width, height, max_cells, min_cells, pad_waste)
    assert chunks == split_by_steps(order, width, height, max_cells, min_cells, pad_waste)
    assert [i for c in chunks for i in c] == order


HINT_BYTES = st.binary(max_size=60) | st.lists(st.sampled_from([b"1", b".", b"_", b"e", b"E", b"\r", b"x", b" "]),
                                                max_size=40).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(HINT_BYTES, max_size=6), st.booleans())
def test_host_hints_match_their_definitions(sources, as_str):
    import re

    from jupyter_gpuiter.compilers.traditional.batch_lexer import host_hints

    hard = re.compile(rb"[0-9.][eE]|[0-9._]{17}")
    expected = (any(b"\r" in s for s in sources), any(hard.search(s) for s in sources))
    if as_str:  # (bytes past ASCII become other bytes past ASCII, which never count)
        sources = [s.decode("latin-1") for s in sources]
    assert host_hints(sources) == expected


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


def test_loops_sized_by_the_chunk_reach_its_longest_line_deepest_nesting_and_longest_alias_chain(monkeypatch):
    """parse's and semantic's loops run as many rounds as the chunk's longest logical line, deepest
    nesting and most lines need, each just past a power of two here, among short programs in one chunk;
    searches that go past a line (walls', and after an unpaired `else`) come out as none."""
    n = 81  # a logical line of 2n + 6 = 168 tokens with links across 2n - 1 > 128 tokens
    far_right = "def f(a, c):\n    return (a" + "\n        ** a" * n + "\n        or c)\n"  # the first `**` to `or`
    far_left = "def f(a, c):\n    return c * (a" + "\n        + a" * n + ")\n"  # the last `+` to `(`
    deep = "def f(a, c):\n    return " + "(" * 33 + "a" + ")" * 33 + " + c\n"  # 33 groups to see through
    # 103 lines, 100 links from x100 to `a + 1` (a link cut short lands on a name, whose register is y's)
    chain = ("def f(a):\n    x1 = a + 1\n    y = a * 2\n" + "".join(f"    x{i} = x{i - 1}\n" for i in range(2, 101))
             + "    return x100 - y\n")
    aug = chain.replace("return x100 - y", "x100 += y\n    return x100")
    # `+=` is a wall, whose search goes past its line: its node must still start at 0, not in a `**` chain
    augs = "def f(a):\n    y = a\n" + "".join(f"    y = a{' ** a' * (i % 7 + 1)}\n    y += 1\n" for i in range(30))
    augs += "    return y\n"
    # after an unpaired `else`, levels are below 0 and searches pass walls: that `else` is still the error
    # (two, so that searches cut short stop at a wall in one and at a name in the other)
    unpaired = ["def f(a, b):\n    x = a else b\n" + "    y = a\n" * 70 + f"    z = {'-' * k}a if b else a\n    return z\n"
                for k in range(2)]
    short = generate.generate_batch(300, 31, max_chars=60)
    special = [far_right, far_left, deep, chain, aug, augs]
    sources = short[:100] + special[:3] + short[100:200] + special[3:] + short[200:] + unpaired
    monkeypatch.setattr(driver, "MIN_CHUNK_CELLS", {"cpu": driver.CHUNK_CELLS})
    assert len(traditional.compile_to_batches(sources)[0]) == 1
    got = assert_agree(sources)
    assert not any(g.startswith("error") for g in got[100:103] + got[203:206])
    assert all(g.startswith("error syntax 2:") for g in got[-2:])


def test_slow_number_literals_are_exact():
    lits = ["0x1F", "0o17", "0b101", "123456789012345678901", "1e300", "1e-300", "2.2250738585072014e-308",
            "0.1", "9007199254740993", "4.35", "1_0.5e1_0", "7e22", "7e23", "1" * 400, "9.E+27", "1e37", "9e37",
            "10e36", "1e38", "0e400", "9007199254740991e22", "9007199254740992e22", "9007199254740991e23",
            "0x" + "f" * 13, "0x1" + "0" * 13, "0b" + "1" * 31, "0o" + "7" * 17, "0x" + "f" * 14,
            # past 2^53 with a point: converting m, then dividing, would round twice
            "9007199254740993.0", "4503599627370497.5", "1234567890123456.7", "9_007_199_254_740_993.0"]
    # past 10^22, the largest mantissa each excess power of ten allows, and one more
    lits += [f"{m}e{22 + e}" for e in range(18) for m in (1, (2 ** 53 - 1) // 10 ** e, (2 ** 53 - 1) // 10 ** e + 1)]
    srcs = [f"def f(x):\n    return x + {lit}\n" for lit in lits]
    assert_agree(srcs)
    for lit in lits:  # one at a time, so that no other literal sets the host's hint
        lexed_literals([lit])


def test_literals_past_the_fast_path_beyond_a_chunks_room_go_to_the_host():
    """A chunk values its first few literals past Clinger's fast path with floats.py; more than that
    (a program made of them) leaves the rest to the host, and every one still agrees."""
    from jupyter_gpuiter.compilers.traditional.batch_lexer import lex
    from jupyter_gpuiter.compilers.traditional.pack import pack

    many = "def f(x):\n    y = x\n" + "".join(f"    y = y * 1.5e-{30 + i % 9} + 2{i}e40\n" for i in range(60))
    many += "    return y\n"
    srcs = [many, "def f(x):\n    return x * 1e-30\n"]
    data, lengths = pack(srcs, "cpu")
    tk = lex(data, lengths, 4096)
    hard = tk.kind[0] == spec.TOK["number"]
    assert 0 < int((tk.slow_number[0] & hard).sum()) < int(hard.sum()) - 1  # some on the device, some not
    assert_agree(srcs)


_BASE_DIGITS = {"x": "0123456789abcdefABCDEF", "o": "01234567", "b": "01"}


def lexed_literals(lits: list[str]) -> tuple[list[tuple[float, bool]], list[str]]:
    """Per literal, lex's (value, left to the host) in `return x + <literal>`; and those sources. Also
    checks the host's hint: where host_hints says no literal needs more than Clinger's fast path, lex
    gives the same without floats.py."""
    from jupyter_gpuiter.compilers.traditional.batch_lexer import host_hints, lex
    from jupyter_gpuiter.compilers.traditional.pack import pack

    srcs = [f"def f(x):\n    return x + {lit}\n" for lit in lits]
    data, lengths = pack(srcs, "cpu")
    results = []
    for hard in {True, host_hints(srcs)[1]}:
        tk = lex(data, lengths, 4096, hard_literals=hard)
        at = [row.index(spec.TOK["number"]) for row in tk.kind.tolist()]
        results.append([(float(tk.value[i, j]), bool(tk.slow_number[i, j])) for i, j in enumerate(at)])
    assert results[0] == results[-1]
    return results[0], srcs


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 999) | st.integers(0, 10 ** 20), st.integers(0, 6),
                          st.sampled_from(["e", "E-", "e+", ""]), st.integers(0, 45)), min_size=1, max_size=30))
def test_decimal_literals_valued_on_the_device_are_exact(drawn):
    """Whatever lex values itself equals the host's value of the literal (the rest it leaves to the host)."""
    lits = []
    for mantissa, point, sign, exponent in drawn:
        digits = str(mantissa)
        at = max(0, len(digits) - point)
        lits.append(digits[:at] + "." + digits[at:] + (f"{sign}{exponent}" if sign else "") if point else
                    digits + (f"{sign}{exponent}" if sign else ""))
    lexed, srcs = lexed_literals(lits)
    for lit, (value, host) in zip(lits, lexed):
        if not host:
            assert value == number_value(lit), lit
    assert_agree(srcs)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("xXoObB"), st.lists(st.integers(0, 21), min_size=1, max_size=40),
                          st.lists(st.booleans(), min_size=40, max_size=40)), min_size=1, max_size=30))
def test_base_literals_are_valued_on_the_device(drawn):
    """Hex, octal and binary literals of up to _MAX_DIGITS digits (the 0 of the prefix counted) get their
    exact value from lex itself; longer ones are left to the host; both agree with the serial compiler."""
    from jupyter_gpuiter.compilers.traditional.batch_lexer import _MAX_DIGITS

    lits = []
    for prefix, picks, underscores in drawn:
        alphabet = _BASE_DIGITS[prefix.lower()]
        digits = [alphabet[p % len(alphabet)] for p in picks]
        lits.append("0" + prefix + "".join(("_" if u else "") + d for d, u in zip(digits, underscores)))
    lexed, srcs = lexed_literals(lits)
    for lit, (value, host) in zip(lits, lexed):
        n_digits = 1 + sum(c not in "_" for c in lit[2:])
        assert host == (n_digits > _MAX_DIGITS["_xob".index(lit[1].lower())]), lit
        if not host:
            assert value == number_value(lit), lit
    assert_agree(srcs)


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


def test_lexer_matches_the_reference_on_random_text():
    from jupyter_gpuiter.compilers.traditional import dfa
    from jupyter_gpuiter.compilers.traditional.batch_lexer import lex
    from jupyter_gpuiter.compilers.traditional.pack import pack

    rng = random.Random(3)
    alphabet = list("abcdefrRubBfFxXeEjJ0123456789_.+-*/%<>=!()[],:;'\"\\#\n\r\t $?@~&|^") + [
        "é", "\x01", "'''", '"""', "def ", "  "]
    srcs = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    data, lengths = pack(srcs, "cpu")
    tk = lex(data, lengths, 4096)
    for i, s in enumerate(srcs):
        ref, err = tokenize(s)
        n = int(tk.count[i])
        got = list(zip(tk.kind[i, :n].tolist(), tk.line[i, :n].tolist(), tk.col[i, :n].tolist()))
        assert got == [(spec.TOK[t.kind], t.line, t.col) for t in ref], s
        code = int(tk.lex_error[i])
        got_err = (dfa.LEX_ERRORS[code], int(tk.lex_line[i]), int(tk.lex_col[i])) if code else None
        assert got_err == ((err.id, err.line, err.col) if err else None), s  # (no U+FEFF: non_ascii is one)


@pytest.mark.parametrize("padded_on_host", [True, False])  # a CPU's way, and a GPU's (a gather on the device)
@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.characters(codec="utf-8") | st.sampled_from(["\udc80", "é", "\r", "\x00"]), max_size=30),
                max_size=12), st.data())
def test_pack_pads_each_source_to_the_widest(padded_on_host, sources, data):
    from jupyter_gpuiter.compilers.traditional.pack import encode, pack

    as_bytes = data.draw(st.lists(st.booleans(), min_size=len(sources), max_size=len(sources)))
    mixed = [encode(s) if b else s for s, b in zip(sources, as_bytes)]  # str and pre-encoded bytes alike
    out, lengths = pack(mixed, "cpu", padded_on_host)
    raw = [s.encode("utf-8", errors="surrogatepass") for s in sources]
    width = max(map(len, raw), default=0) + 1  # at least one padding byte after the longest
    assert out.dtype == torch.uint8 and out.shape == (len(sources), width)
    assert lengths.tolist() == [len(r) for r in raw]
    assert [bytes(row) for row in out.tolist()] == [r + bytes(width - len(r)) for r in raw]


def test_pass_timings_are_reported():
    timings = {}
    traditional.compile_batch(generate.generate_batch(20, 1), timings=timings)
    assert set(timings) == set(traditional.PASSES) and all(v >= 0 for v in timings.values())


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


@pytest.mark.slow
@pytest.mark.parametrize("part", range(10))
def test_full_sweep(part):
    """>=100,000 generated and >=100,000 mutated programs over the ten parts."""
    sources = generate.generate_batch(10_000, 50_000 + part)
    mutants = [m for m, _ in generate.mutate_batch(sources, 60_000 + part)]
    assert_agree(sources)
    assert_agree(mutants)


@pytest.mark.parametrize("free_gb, expect", [(0.5, "floor"), (8, "quarter"), (200, "cap")])
def test_cuda_chunks_take_a_quarter_of_free_memory_within_bounds(monkeypatch, free_gb, expect):
    free = int(free_gb * 2**30)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 2 * free))
    cells = traditional.chunk_cells(torch.device("cuda"))  # a device object needs no GPU
    budget = 4 * driver.BYTES_PER_CELL  # bytes of free memory a cell may claim
    if expect == "floor":  # a small GPU still gets the CPU's chunks
        assert cells == driver.CHUNK_CELLS > free // budget
    elif expect == "cap":
        assert cells == driver.CUDA_CHUNK_CELLS < free // budget
    else:
        assert driver.CHUNK_CELLS < cells < driver.CUDA_CHUNK_CELLS
        assert cells * budget <= free < (cells + 1) * budget
    assert traditional.chunk_cells(torch.device("cpu")) == driver.CHUNK_CELLS


def test_batches_leave_as_ordinary_tensors():
    # the passes run under torch.inference_mode; what leaves must accept in-place updates outside it
    sources = ["def f(x):\n    return x * 0x1F + 1e400\n", "def g(x):\n    return y\n"]  # a host-valued literal
    batches, _ = traditional.compile_to_batches(sources, "cpu")
    result = compile_batch(sources, mode="traditional")
    for batch in [c.batch for _, c in batches] + [result.batch]:
        for t in (batch.ops, batch.args, batch.imm, batch.lengths, batch.n_params, batch.error):
            assert not t.is_inference()
        batch.imm.add_(0.0)  # an inference tensor raises here
    assert isinstance(result[0], Program) and isinstance(result[1], CompileError)


def test_lex_refuses_rows_its_int16_positions_cannot_hold():
    from jupyter_gpuiter.compilers.traditional.batch_lexer import lex

    with pytest.raises(ValueError, match="fewer than"):
        lex(torch.zeros((1, 1 << 14), dtype=torch.uint8), torch.tensor([5]), 64)
    longest = spec.MAX_SOURCE_BYTES + 1  # pack's width for the longest source compile_to_batches sends
    tk = lex(torch.full((1, longest), ord(" "), dtype=torch.uint8), torch.tensor([longest - 1]), 64)
    assert int(tk.count[0]) == 0 and int(tk.lex_error[0]) == 0
    body = "def f(x):\n    return x * 2  # "
    at_limit = [body + "y" * (spec.MAX_SOURCE_BYTES - len(body) - 1) + "\n", body + "é" * 4000 + "\n"]
    assert len(at_limit[0].encode()) == spec.MAX_SOURCE_BYTES and len(at_limit[1].encode()) < spec.MAX_SOURCE_BYTES
    got = assert_agree(at_limit + [at_limit[0] + "\n"])  # the last is one byte over: too-large
    assert not got[0].startswith("error") and got[2].startswith("error")


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


def test_sources_without_a_cr_skip_the_newline_compaction_to_the_same_tokens():
    from dataclasses import fields

    from jupyter_gpuiter.compilers.traditional.batch_lexer import lex
    from jupyter_gpuiter.compilers.traditional.pack import pack

    sources = [s for s in generate.generate_batch(300, 51) + VALID + [s for s, _ in INVALID] if "\r" not in s]
    assert len(sources) > 200
    data, lengths = pack(sources, "cpu")
    full, short = lex(data, lengths, 4096, has_cr=True), lex(data, lengths, 4096, has_cr=False)
    for f in fields(full):
        a, b = getattr(full, f.name), getattr(short, f.name)
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else np.array_equal(a, b), f.name


def test_regrouped_rows_equal_the_same_rows_lexed_together():
    """regroup's Tokens are those lex makes of the same sources as one chunk, field by field (its loop bounds
    are the parts' maxima: bounds, never below the chunk's own)."""
    sources = [s.encode() for s in generate.generate_batch(60, 17) + [s for s, _ in INVALID]]
    a = sources[:40] + [b"def f(x):\n    return x $ 1\n"]  # a lexical error
    b = sources[40:] + [b'def f(x):\n    return "x\n', b"def f(x):\r\n    return x\r\n",
                        b"def f(x):\n" + b"    y = x\n" * 30 + b"    return y\n"]
    with torch.inference_mode():
        lexed = [driver._lex_chunk(part, "cpu") for part in (a, b)]
        rows = ([5, 0, 40, 17, 3], [1, len(b) - 1, len(b) - 3, 8])  # out of order; the longest; lexical errors
        chosen = [a[i] for i in rows[0]] + [b[i] for i in rows[1]]
        got = regroup([(tk, r) for tk, r in zip(lexed, rows)], max(map(len, chosen)))
        want = driver._lex_chunk(chosen, "cpu")
    for field in dataclasses.fields(want):
        g, w = getattr(got, field.name), getattr(want, field.name)
        if field.name in ("longest_line", "most_lines", "deepest"):
            assert g >= w, field.name
        elif field.name in ("lex_line", "lex_col"):  # (a place only where there is a lexical error)
            errors = want.lex_error != 0
            assert errors.any() and torch.equal(g[errors], w[errors]), field.name
        elif isinstance(w, torch.Tensor):
            assert g.dtype == w.dtype and torch.equal(g, w), field.name
        else:
            assert np.array_equal(g, w), field.name


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10 ** 20), st.integers(0, 22), st.integers(0, 30))
def test_the_hard_literal_hint_misses_no_literal_past_the_fast_path(mantissa, point, exponent):
    """One literal at a time (so that no other one in the chunk sets the hint), with and without an
    exponent and underscores: lex with the host's hint equals lex with floats.py always on."""
    digits = str(mantissa)
    at = max(0, len(digits) - point)
    plain = digits[:at] + "." + digits[at:] if point else digits
    grouped = "_".join(digits[max(0, i - 3):i] for i in range(len(digits), 0, -3)[::-1])
    for lit in (plain, f"{plain}e{exponent}", f"{plain}e-{exponent}", grouped, f"0x{mantissa:x}", f"0o{mantissa:o}"):
        lexed_literals([lit])


def test_generated_programs_leave_to_the_host_only_literals_too_long_for_the_device():
    """The room of literals past the fast path a chunk values (lex._exact_rest) holds all the generated
    programs' ones: the host gets only those with more digits than _MAX_DIGITS or five exponent digits."""
    from jupyter_gpuiter.compilers.traditional.batch_lexer import _MAX_DIGITS

    def too_long(text: str) -> bool:
        t = text.replace("_", "").lower()
        if t[:2] in ("0x", "0o", "0b"):
            return len(t) - 1 > _MAX_DIGITS["_xob".index(t[1])]
        exponent = t.partition("e")[2]
        return sum(c.isdigit() for c in t) > _MAX_DIGITS[0] or len(exponent.lstrip("+-")) > 4

    batches, _ = traditional.compile_to_batches(generate.generate_batch(2048, 0), workers=1)
    texts = [text for _, chunk in batches for text in chunk.host_literals()[2]]
    assert texts and all(too_long(t) for t in texts), [t for t in texts if not too_long(t)][:5]


def test_the_two_byte_dfa_table_is_two_single_byte_steps():
    """lex's scan reads the state after two bytes from one table: pair[(c1 * C + c2) * S + s] must be
    next[c2 * S + next[c1 * S + s]] for every class pair and state."""
    lexmod = batch_lexer
    t = lexmod._build_tables()
    C, S = t["C"], len(lexmod.dfa.STATES)
    nxt = torch.tensor(t["next"]).view(C, S)
    pair = torch.as_tensor(t["pair"]).view(C, C, S)
    c1, c2, s = torch.meshgrid(torch.arange(C), torch.arange(C), torch.arange(S), indexing="ij")
    assert torch.equal(pair, nxt[c2, nxt[c1, s]])
    assert pair.shape == (C, C, S) and 40 <= C <= 64  # byte classes keep the table small


def test_warm_up_builds_the_tables_a_first_compile_would(monkeypatch):
    lexmod = batch_lexer
    monkeypatch.setattr(lexmod, "_TABLES", {})
    traditional.warm_up("cpu")
    assert torch.device("cpu") in lexmod._TABLES
    sources = generate.generate_batch(40, 3)
    assert traditional.compile_batch(sources, workers=1).canonical() == \
        compile_batch(sources, mode="serial").canonical()
