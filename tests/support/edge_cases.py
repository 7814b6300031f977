"""Hand-written edge cases: (source, expected) where expected is "ok" or (kind, line, col).

The expectations are the language's specification (docs/language.md); both compilers must meet them.
"""

from jupyter_gpuiter.lang import spec

D = "def f(x, y):\n"

VALID = [
    D + "    return -2**2\n", D + "    return 2**-1\n", D + "    return x**y**2\n", D + "    return x - y - 1\n",
    D + "    return not x == y\n", D + "    return x if y else -x if x else y\n",
    D + "    # comment\n\n    z = x  # trailing comment\n    return z\n",
    D + '    """Docstring with unicode: café ✓."""\n    return x\n',
    D + "    'single quoted docstring'\n    return x\n",
    "def f(x, y):\r\n    z = x + y\r\n    return z\r\n",
    "def f(x, y):\n\tz = x + y\n\treturn z\n",
    "def f(x, y): return x + y\n",
    "def f(x, y,):\n    return max(x, y,)\n",
    D + "    z = (x +\n         y)\n    return z\n",
    D + "    z = x + \\\n        y\n    return z\n",
    D + "    return math.sin(x) + np.cos(y) + math.pi + np.e + inf * 0 + nan\n",
    D + "    x += 1\n    x **= 2\n    x //= 3\n    x %= 5\n    x -= y\n    x *= 2\n    x /= 7\n    return x\n",
    D + "    return min(x, y, 1, 2) + max(x, y) + where(x > y, x, y) + clip(x, -1, 1)\n",
    D + "    return 1_000 + 0x1F + 0o17 + 0b101 + 1e-3 + .5 + 2. + 1E+2 + 00\n",
    D + "    return True + False * x\n",
    D + "    return (((x)))\n",
    D + "    z = x\n    z = z + 1\n    return z\n",
    "def f(x, y):\n    return x + " + "1 + " * 300 + "y\n",
    "def f():\n    return 1.0\n",
    "def f(sin, pi):\n    return sin + pi\n",
    D + "    return x  # é\n",
    D + "    return x\n\n\n# trailing comment\n",
    # row kernels (docs/language.md, "Row kernels")
    "def softmax(x):\n    e = exp(x - max(x))\n    return e / sum(e)\n",
    (
        "def layernorm(x, gamma, beta):\n    mu = mean(x)\n    var = mean((x - mu) ** 2)\n"
        "    return (x - mu) / sqrt(var + 1e-5) * gamma + beta\n"
    ),
    "def logsumexp(x):\n    m = max(x)\n    return m + log(sum(exp(x - m)))\n",
    D + "    return np.sum(x * y) + math.mean(x > 0) + np.max(x - np.max(x)) + min(min(y), y, 1)\n",
    D + "    return sum(2.0) + max(1) + mean(min(x, y))\n",
]

INVALID = [
    ("", ("unsupported", 1, 1)),
    ("# only a comment\n", ("unsupported", 1, 1)),
    ("x = 1\n", ("unsupported", 1, 1)),
    (D, ("syntax", 1, 1)),
    ("def f(x):\n    # just a comment\n", ("syntax", 1, 1)),
    (D + "    return y\n  z = 1\n", ("syntax", 3, 3)),
    (D + "    z = 1\n        return z\n", ("syntax", 3, 9)),
    (D + "    z = 1\n\treturn z\n", ("syntax", 3, 2)),
    (D + "return x\n", ("syntax", 2, None)),
    (D + "    return x\nz = 1\n", ("unsupported", 3, 1)),
    ("  def f(x):\n    return x\n", ("syntax", 1, 3)),
    (D + "    return z\n", ("unknown-name", 2, 12)),
    (D + "    w += 1\n    return w\n", ("unknown-name", 2, 5)),
    (D + "    z = z + 1\n    return z\n", ("unknown-name", 2, 9)),
    (D + "    return foo(x)\n", ("unknown-function", 2, 12)),
    (D + "    return math.foo(x)\n", ("unknown-function", 2, 12)),
    (D + "    return math.foo\n", ("unknown-name", 2, 12)),
    (D + "    return sin(x, y)\n", ("arity", 2, 12)),
    (D + "    return min()\n", ("arity", 2, 12)),
    (D + "    return sum(x, y)\n", ("arity", 2, 12)),
    (D + "    return x + np.mean()\n", ("arity", 2, 16)),
    (D + "    return x + atan2(x)\n", ("arity", 2, 16)),
    (D + "    return sin\n", ("type", 2, 12)),
    (D + "    return x(y)\n", ("type", 2, 12)),
    (D + "    return pi(y)\n", ("type", 2, 12)),
    (D + "    return x < y < 1\n", ("unsupported", 2, 12)),
    (D + "    z = w = x\n    return z\n", ("unsupported", 2, 5)),
    (D + "    math.pi = x\n    return x\n", ("unsupported", 2, 5)),
    (D + "    x + 1\n    return x\n", ("unsupported", 2, 5)),
    (D + "    return\n", ("unsupported", 2, 5)),
    (D + "    return x\n    z = 1\n", ("unsupported", 3, 5)),
    (D + "    z = x\n", ("unsupported", 2, 5)),
    (D + "    return ()\n", ("unsupported", 2, 12)),
    ("def f(x, x):\n    return x\n", ("syntax", 1, 10)),
    (D + "    for i in x:\n        pass\n    return x\n", ("unsupported", 2, 5)),
    (D + "    if x:\n        x = 1\n    return x\n", ("unsupported", 2, 5)),
    (D + "    while x: x = 1\n    return x\n", ("unsupported", 2, 5)),
    (D + "    return [x]\n", ("unsupported", 2, 12)),
    (D + "    return x[0]\n", ("unsupported", 2, 13)),
    (D + "    return {x}\n", ("unsupported", 2, 12)),
    (D + "    return x, y\n", ("unsupported", 2, 13)),
    (D + "    return (x, y)\n", ("unsupported", 2, 14)),
    (D + "    return x.real\n", ("unsupported", 2, 13)),
    (D + "    return np.math.sin(x)\n", ("unsupported", 2, 19)),  # one namespace, not a chain
    (D + "    return np.np.pi\n", ("unsupported", 2, 17)),
    (D + "    return max(x, key=y)\n", ("unsupported", 2, 22)),
    (D + "    return max(*x)\n", ("unsupported", 2, 16)),
    (D + "    return lambda: x\n", ("unsupported", 2, 12)),
    (D + "    return 'abc'\n", ("unsupported", 2, 12)),
    (D + '    """doc"""\n    return f"{x}"\n', ("unsupported", 3, 12)),
    (D + "    return (z := x)\n", ("unsupported", 2, 15)),
    (D + "    return x @ y\n", ("unsupported", 2, 14)),
    (D + "    return x; y\n", ("unsupported", 2, 13)),
    (D + "    import math\n    return x\n", ("unsupported", 2, 5)),
    (D + "    return x is y\n", ("unsupported", 2, 14)),
    (D + "    return x in y\n", ("unsupported", 2, 14)),
    (D + "    return None\n", ("unsupported", 2, 12)),
    (D + "    return 1j\n", ("unsupported", 2, 12)),
    ("def f(x=1):\n    return x\n", ("unsupported", 1, 8)),
    ("def f(x: float):\n    return x\n", ("unsupported", 1, 8)),
    ("def f(*x):\n    return x\n", ("unsupported", 1, 7)),
    ("def f(x) -> float:\n    return x\n", ("unsupported", 1, 10)),
    ("@dec\ndef f(x):\n    return x\n", ("unsupported", 1, 1)),
    (D + "    def g(x):\n        return x\n    return x\n", ("unsupported", 2, 5)),
    (D + "    return x\ndef g(x):\n    return x\n", ("unsupported", 3, 1)),
    (D + "    return 1 +\n", ("syntax", 2, None)),
    (D + "    z = x y\n    return z\n", ("syntax", 2, None)),
    (D + "    z = (x +\n    return z\n", ("syntax", 2, 9)),
    (D + "    return x)\n", ("syntax", 2, 13)),
    (D + "    return 01\n", ("syntax", 2, 12)),
    (D + "    return 1_\n", ("syntax", 2, 12)),
    (D + "    return 1abc\n", ("syntax", 2, 12)),
    (D + "    return x $ y\n", ("syntax", 2, 14)),
    (D + "    return x ? y\n", ("syntax", 2, 14)),
    (D + "    return x\x00\n", ("syntax", 2, 13)),
    (D + "    return 'abc\n", ("syntax", 2, 12)),
    (D + '    """abc\n    return x\n', ("syntax", 2, 5)),
    (D + "    return x \\ y\n", ("syntax", 2, 14)),
    (D + "    return café\n", ("unsupported", 2, 15)),
    (D + "    αβ = x\n    return αβ\n", ("unsupported", 2, 5)),
    (D + "    return x == not y\n", ("syntax", 2, None)),
    (D + "    return x if y if x else y else x\n", ("syntax", 2, None)),
    (D + "    f(x) = 1\n    return x\n", ("syntax", 2, None)),
    (D + "    1 = x\n    return x\n", ("syntax", 2, None)),
    (D + "    True = x\n    return x\n", ("syntax", 2, None)),
    (D + "    z = += 1\n    return x\n", ("syntax", 2, None)),
    (D + "    return max(x,, y)\n", ("syntax", 2, None)),
    (D + "    return max(, y)\n", ("syntax", 2, None)),
    ("def (x):\n    return x\n", ("syntax", 1, None)),
    ("def f(x)\n    return x\n", ("syntax", 1, None)),
    ("def f(x y):\n    return x\n", ("syntax", 1, None)),
    ("def f(x):\n    return " + "(" * (spec.MAX_NESTING + 1) + "x" + ")" * (spec.MAX_NESTING + 1) + "\n",
     ("too-large", 2, 12 + spec.MAX_NESTING)),
    ("def f(x):\n    return " + "-" * (spec.MAX_NESTING + 1) + "x\n", ("too-large", 2, 12 + spec.MAX_NESTING)),
    ("def f(x):\n    return x" + " + x" * spec.MAX_TOKENS + "\n", ("too-large", 2, None)),
    ("def f(" + ", ".join(f"p{i}" for i in range(spec.MAX_PARAMS + 1)) + "):\n    return p0\n",
     ("too-large", 1, None)),
    ("def f(x):\n    return x\n" + "#" * spec.MAX_SOURCE_BYTES, ("too-large", 1, 1)),
]

# found by the full differential sweep
INVALID += [
    ("def f(x):\n    return y = (x)\n", ("syntax", 2, None)),
    ("def f(x):\n    return x += 1\n", ("syntax", 2, None)),
    ("def f(x):\n    return (x **= 2) ** 2\n", ("unsupported", 2, 15)),
    ("def f(x):\n    y = max(x, (x += 1))\n    return y\n", ("unsupported", 2, 19)),
    # a call's argument slot below its row: codegen indexed out of the instruction table (fixed in 925ab58)
    (("\n# tab\tinside\n\ndef body(x0, x_, v, a1, x2,):\n  'Returns value elementwise y y'\n"
     "  x0 += 39.581 % floor(x_)\n  x0 = v\n  n = x0\n  mu = a1 - 1e4\n  x0 += v and a1\n"
     "  x_2 = float(min(a1 != float(v), log(False) * x_, -(1 + v ** expm1(mu))) lambdaif not erf(hypot(pi if "
     "x0 - False else a1 * v, 11.392) % x_) else x_ / x0) - +(x2 - -mu)\n  x_ *= 3.16E+25\n"
     "  x2 %= cosh(pow(True, a1))\n  return 0x7d ** (-a1 / x2)\n\n"),
     ("syntax", 11, None)),
]


# Sources on which 64-bit polynomial hashes collide (the exact pass sends them to the serial compiler)
def _thue_morse(n: int, pair: str) -> str:
    """n characters of the Thue-Morse sequence over `pair`: for n = 1,024 the two spellings (pair and
    its reverse) collide under every polynomial hash modulo 2^64 with an odd multiplier."""
    return "".join(pair[i.bit_count() & 1] for i in range(n))


TM_A, TM_B = _thue_morse(1024, "ab"), _thue_morse(1024, "ba")
SPACES, TABS = _thue_morse(1024, " \t"), _thue_morse(1024, "\t ")
COLLIDING = [
    f"def f(x):\n    {TM_A} = x\n    return {TM_B}\n",  # TM_B is not defined
    f"def f({TM_A}, {TM_B}):\n    return {TM_A} + {TM_B}\n",  # two parameters, not a duplicate
    f"def f(x):\n    {TM_A} = x\n    {TM_B} = 2 * x\n    return {TM_B} + {TM_A}\n",  # two variables
    f"def f(x):\n{SPACES}y = x\n{TABS}return y\n",  # the indentation does not match
    f"def f(x):\n{SPACES}y = x\n{SPACES}return y\n",  # it does
]
