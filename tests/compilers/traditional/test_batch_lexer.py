"""The data-parallel lexer (compilers/traditional/batch_lexer.py, with pack.py): the host's hints, number
literals valued exactly on the device or left to the host, the reference lexer's tokens on random text, rows
its positions cannot hold, and its DFA tables."""

import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuiter import generate
from jupyter_gpuiter.compilers import traditional
from jupyter_gpuiter.compilers.traditional import batch_lexer
from jupyter_gpuiter.lang import spec
from jupyter_gpuiter.lang.lexer import number_value, tokenize
from tests.support.differential import assert_agree
from tests.support.edge_cases import INVALID, VALID

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
