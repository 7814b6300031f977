"""The quick front check (lang/quick.py): whatever it vouches for, the reference lexer and token rules accept
with the same docstring, on hand-written traps, generated and mutated programs, single edits of vouched
programs and random text; and it vouches for the common kernels it is there for."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuiter import generate
from jupyter_gpuiter.lang import spec
from jupyter_gpuiter.lang.lexer import normalize_newlines, tokenize
from jupyter_gpuiter.lang.quick import _CLASS, _TOKEN_RE, quick_check
from jupyter_gpuiter.lang.rules import check
from jupyter_gpuiter.tools.bench.loop import candidates
from tests.support.edge_cases import INVALID, VALID


def vouched(source: str) -> bool | None:
    """quick_check's answer, asserting that the lexer and rules find no error where it has one."""
    src = normalize_newlines(source)
    doc = quick_check(src)
    if doc is not None:
        tokens, lex_error = tokenize(src)
        assert lex_error is None, (source, lex_error)
        structure, errors = check(tokens, src)
        assert not errors, (source, errors)
        assert (structure.docstring_line >= 0) == doc, source
        if not doc:  # its regex splits the tokens as the lexer does
            texts = [t for t in _TOKEN_RE.findall(src) if t[0] not in "\n#" and t.strip()]
            assert texts == [t.text for t in tokens if t.kind != "newline"], source
    return doc


# each piece may break a rule, a token or the file's shape
PIECES = [*spec.OPERATORS, *spec.KEYWORDS, *spec.BAD_KEYWORDS, "'", '"', '"""', "'''", "r'", "b'", "u'", "f'", "\\",
          "\\\n", "\t", "\f", "\v", "\n", "\n    ", "\n\t", "\n  ", "#", "# c\\", "# é", "\x00", "\x7f", "\ufeff", "é",
          "\ud800", "0", "1", "01", "00", "1.", ".5", "1e5", "1e", "1e+", "e", "E", "j", "_", "1_0", "0x1", "1j", " ",
          "x", "y", "math", "np", "math.", "np.", "sin(", "sum(", "pi", "if ", "def ", "\r", "\r\n", "$", "?", "`",
          "a" * 101, "9" * 101, "(" * 65, "-" * 65]


def test_every_operator_and_keyword_has_a_class():
    assert set(spec.OPERATORS) | set(spec.KEYWORDS) | set(spec.BAD_KEYWORDS) <= set(_CLASS)


@pytest.mark.parametrize("source,doc", [
    ("def f(x, y):\n    return x + y\n", False),
    ("\n# lead\n  \ndef f(x,):\n    '''Doc: don't \"quote\" é.'''  # c\n\n    return math.sin(x)  # é \ud800\n", True),
    ('def f(x):\n\t"""a\n\tb"""\n\treturn -x ** 2 if not x else (x\n  + 1)\n', True),
    ('def f(x):\n    "d"', True),
    ("def f():\n    y = np.pi * 1.5e-3 + .5 + 2. + 0 + 7e3 + 1.E2 + 0x1F\n    y -= min(y, 1, 2,)\n    return y", False),
])
def test_vouches_for_common_kernels(source, doc):
    assert vouched(source) is doc


@pytest.mark.parametrize("source", [
    "def f(x):\n    return x  # a comment's backslash \\\n    y = 1\n",  # the rules read a continuation there
    "def f(x):\n    y = x\n\ty = 1\n    return y\n",  # indentation that differs
    "def f(x):\n    y = x\n      return y\n", "def f(x):\n    return x\ny = 1\n", "  def f(x):\n    return x\n",
    "def f(x):\n    return x;\n", "def f(x):\n    return 1if x else 2\n", "def f(x):\n    return 01\n",
    "def f(x):\n    return 1_0\n", "def f(x):\n    return 0x1g\n", "def f(x):\n    return 1j\n",
    "def f(x):\n    b'''d'''\n    return x\n", "def f(x):\n    r'd'\n    return x\n", "def f(x):\n    'a' 'b'\n    return x\n",
    "def f(x):\n    'd' + x\n    return x\n", "def f(x):\n    'd'\n    'e'\n    return x\n",
    "def f(x):\n    '\\x41'\n    return x\n", "def f(x):\n    return f(x=1)\n", "def f(x):\n    return (x, x)\n",
    "def f(x):\n    return x, x\n", "def f(x):\n    return x[0]\n", "def f(x):\n    return lambda: x\n",
    "def f(x):\n    return math.np.pi\n", "def f(x):\n    return x.math.pi\n", "def f(x):\n    return math.\n",
    "def f(x):\n    return (f)(x)\n", "def f(x):\n    return 1(x)\n", "def f(x):\n    return True(x)\n",
    "def f(x):\n    return sin(*x)\n", "def f(x):\n    if x:\n        return x\n", "def f(x):\n    def g(y): return y\n",
    "def f(x=1):\n    return x\n", "def f(x) -> int:\n    return x\n", "def f(x): return x\n", "@d\ndef f(x):\n    return x\n",
    "def f(x):\n    return x $ 1\n", "def f(x):\n    return x é\n", "\ufeffdef f(x):\n    return x\n",
    "def f(x):\n    return x \\\n + 1\n", "def f(x):\n    return x\x0c\n", "def f(x):\n    return x  # \x0c\n",
    "def f(x):\n", "def f(x):\n    # only a comment\n", "def f(None):\n    return 1\n", "def if(x):\n    return x\n",
    "def f(x):\n    return (x\n", "def f(x):\n    return x)\n", "def f(x):\n    return x := 1\n",
    "def f(x):\n    return x << 1\n", "def f(x):\n    return x ! 1\n", "def f(x):\n    return x ... 1\n",
    "def f(x):\n    return x." + "\n", "def f(x):\n    return " + "1" * 101 + "\n",
    "def f(x):\n    return " + "(" * 65 + "x" + ")" * 65 + "\n", "def f(x):\n    return " + "-" * 65 + "x\n",
    "def f(x):\n    return " + " + ".join(["x"] * 600) + "\n",
    "def f(" + ", ".join(f"a{i}" for i in range(33)) + "):\n    return a0\n",
])
def test_refuses_what_the_rules_reject_or_it_cannot_tell(source):
    assert vouched(source) is None


_number_text = st.text(alphabet="0123456789_.eEjxXoObBaAfF+-", min_size=1, max_size=8).filter(
    lambda s: s[0].isdigit() or (s[0] == "." and len(s) > 1 and s[1].isdigit()))


@settings(max_examples=2000, deadline=None)
@given(_number_text)
def test_number_literals(text):
    vouched(f"def f(x):\n    return {text}\n")
    vouched(f"def f(x):\n    return x+{text}*x\n")


def test_the_bench_loop_s_edits_are_vouched_for():
    assert all(vouched(s) is False for s in candidates(40, "quick")[0])


@pytest.mark.parametrize("seed", range(3))
def test_generated_and_mutated_programs(seed):
    sources = generate.generate_batch(400, 500 + seed)
    assert sum(vouched(s) is not None for s in sources) > 0.3 * len(sources)  # (the rest: `1_0`, `r''`, ...)
    for m, _ in generate.mutate_batch(sources, 600 + seed):
        vouched(m)


def test_edge_cases():
    for s in VALID + [s for s, _ in INVALID]:
        vouched(s)


def single_edit(rng: random.Random, source: str) -> str:
    """`source` with one piece inserted, or a few characters replaced by one or deleted, at a random place."""
    i = rng.randrange(len(source) + 1)
    piece, what = rng.choice(PIECES), rng.random()
    if what < 0.5:
        return source[:i] + piece + source[i:]
    if what < 0.8:
        return source[:i] + piece + source[i + rng.randint(1, 3):]
    return source[:i] + source[i + rng.randint(1, 4):]


@pytest.mark.parametrize("seed", range(3))
def test_single_edits_of_vouched_programs(seed):
    rng = random.Random(seed)
    base = [s for s in generate.generate_batch(200, 700 + seed) if vouched(s) is not None]
    base += candidates(10, "edits")[0]
    for _ in range(3000):
        source = single_edit(rng, rng.choice(base))
        vouched(source)
        vouched(single_edit(rng, source))


_HEADS = ["def f(x, y):\n    ", 'def f(x):\n    """d"""\n    ', "def f(x):\n\t", "# c\ndef g(a,):\n  ", ""]


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(_HEADS), st.lists(st.sampled_from(PIECES + ["x", " ", "return ", "+", "(", ")", ",", "="] * 4),
                                          max_size=30))
def test_random_text(head, pieces):
    vouched(head + "".join(pieces))
