"""A conditional expression split by a comma of its bracket (`max(x if y, z else x)`) is a syntax error, as in
CPython and the serial compiler: the traditional parse pairs each `if` with the next `else` of its bracket only
when no comma of that bracket stands between them. Differential against the serial oracle (`assert_agree`),
on hand-written neighbours and on seeded random rearrangements of valid calls with ternary arguments."""

import random

import pytest
from test_traditional import assert_agree

from jupyter_gpuiter import compile_batch

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
