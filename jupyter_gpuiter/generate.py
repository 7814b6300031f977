"""The seeded random program generator (and mutator) of the kernel language.

Used by the fuzz and differential tests, the benchmarks and the neural model's training data.

>>> src = generate(7)
>>> src.startswith("def ")
True
>>> generate(7) == src  # deterministic for a seed
True
>>> len(generate_batch(3, seed=1, statements=(0, 2), max_depth=3))
3

`generate` returns the source of one *valid* function: a `def NAME(params):` header, body statements
`name = expr` / `name op= expr` that only read names defined before, and a final `return expr`. Every
operator, builtin (bare or `math.`/`np.`), constant and literal spelling of the language is reachable.
With ``style=True`` the formatting varies (spacing, redundant parentheses, comments with unicode,
blank lines, docstrings, tabs, CRLF, trailing commas, the one-line form, expressions spanning lines
inside parentheses or after a backslash) so that differential tests exercise the lexers too.

Row kernels (docs/language.md, "Row kernels"): `generate(..., rows=p)` makes one with probability p,
and `generate_batch` makes a share ROW_SHARE of its programs row kernels by default (`rows=0` for
elementwise ones only), from a second stream of the seed, so that a seed's elementwise programs are
those it gave before row kernels. A row kernel is a realistic one (softmax, log-softmax, layer and RMS
norm, logsumexp, losses, norms, variance, min-max scaling, ... with varied names, spellings, inlining
and extra statements) or a random program whose expressions hold reductions, nested ones included.
Elementwise programs never call sum or mean, nor min or max with one argument.

`mutate` turns a valid source into a (usually) invalid one and names what it did; the targeted
mutations guarantee their error kind:

=====================  =========================================================================
mutation name          guaranteed kind on a valid, generated input
=====================  =========================================================================
``unknown-name``       ``unknown-name`` (a read of a name replaced by a name defined nowhere)
``arity:add``          ``arity`` (a builtin call gets one argument too many; min/max as many as make 9)
``arity:remove``       ``arity`` (too few: the first argument of a builtin of fixed arity)
``arity:empty``        ``arity`` (all arguments removed)
``arity:wrap``         ``arity`` (a leaf wrapped in ``atan2(leaf)``; used when there is no call)
``unknown-function``   ``unknown-function`` (a call's name replaced, or a leaf wrapped in one)
=====================  =========================================================================

The others (``delete-token``, ``insert-token:TOK``, ``swap-tokens``, ``duplicate-token``,
``indent:{over,under,col0,tabs}``, ``construct:NAME``, ``truncate``, ``unbalance:{open,close,delete}``,
``bad-char:NAME``) are rejected most of the time but may by chance leave a valid program. The
``reduction`` family is for row kernels: a reduction called wrongly (``reduction:axis`` ``sum(x, -1)``,
``:extra``, ``:empty``, ``:many`` nine arguments to min/max, ``:keyword`` ``sum(x, axis=-1)``, ``:method``
``x.sum()``: errors but for ``max(x, y)``), or a valid program changed (``:swap`` another reduction,
``:unwrap`` one removed, ``:wrap`` one put around an operand, which makes an elementwise program a row kernel).
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass

from .lang import spec
from .lang.lexer import Token, normalize_newlines, tokenize

__all__ = [
    "GUARANTEED_KINDS",
    "MUTATIONS",
    "ROW_SHARE",
    "generate",
    "generate_batch",
    "is_reserved",
    "mutate",
    "mutate_batch",
]

_ATOM = 10  # precedence of names, literals, calls and parenthesised expressions

#: Python's keywords and soft keywords, spelled out so that the random stream is the same on every version.
_PY_KEYWORDS = ("False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
                "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in",
                "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
                "match", "case", "type", "_")
#: Names a generated program never binds: builtins, constants, namespaces, (soft) keywords, BAD_KEYWORDS.
_RESERVED = frozenset(
    set(spec.BUILTINS) | set(spec.CONSTANTS) | set(spec.NAMESPACES) | set(spec.KEYWORDS)
    | set(spec.BAD_KEYWORDS) | set(_PY_KEYWORDS)
)


def is_reserved(name: str) -> bool:
    """True for names the generator never binds (builtins, constants, math/np, keywords)."""
    return name in _RESERVED


_NAME_POOL = ("x", "y", "z", "a", "b", "c", "t", "u", "v", "w", "s", "p", "q", "k", "n", "m", "h", "g", "d",
              "r", "x0", "x1", "x2", "y1", "dx", "dt", "lo", "hi", "mu", "alpha", "beta", "gamma_", "theta",
              "eps", "tmp", "acc", "val", "scale", "bias", "out", "res", "inner", "num", "den", "xs", "X",
              "Y", "T", "_t", "x_", "x_2", "a1", "b2", "temp", "ratio", "delta", "omega", "rho", "sigma2")
_FN_POOL = ("f", "g", "h", "kernel", "fn", "func", "gelu", "softplus", "my_fn", "step", "k", "F", "body",
            "swish", "score", "loss", "act", "f2", "compute", "_kernel")
_UNKNOWN_NAMES = ("undefined", "zz", "foo", "bar", "q_unknown", "xx9", "missing", "z99", "nope", "yy", "Zq",
                  "undef_1", "tmp_x", "qq")
_UNKNOWN_FUNCS = ("relu", "gelu", "softplus", "foo", "print", "len", "round", "int", "sum", "exp2", "erfc",
                  "sign", "fabs", "square", "cbrt", "trunc", "fmod", "isfinite", "minimum", "maximum",
                  "arctan", "power", "degrees", "lgamma", "mysqrt", "absf")
_COMMENTS = ("compute", "TODO: simplify", "scale the input", "note: x may be nan", "café ✓", "π ≈ 3.14159",
             "naïve version", "日本語のコメント", "α + β → γ", "step 2", "avoid overflow", "see §4",
             "emoji 🚀 ok", "-- done --", "=", "#", "'quoted' \"text\"", "tab\tinside", "x**2 + y**2")
_DOC_WORDS = ("Compute", "the", "kernel", "value", "elementwise", "of", "x", "and", "y", "café", "✓", "π",
              "résumé", "naïve", "→", "approximation", "fast", "Returns", "a", "number", "über", "日本",
              "smooth", "clip", "2*x + 1", "(see notes)", "done.")
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
_ALNUM = _LETTERS + "0123456789"

_ARITH = ("+", "-", "*", "/", "//", "%", "**")
#: The builtins of elementwise expressions, in spec's order (stable): all but the reductions that take
#: one argument only (sum, mean); min and max appear here with two or more arguments.
_BUILTIN_NAMES = tuple(n for n, b in spec.BUILTINS.items() if not (n in spec.REDUCTIONS and b.arity == (1, 1)))
#: Reductions by weight, for the random expressions of row kernels.
_REDUCTIONS = ("sum", "mean", "max", "min")
_REDUCTION_WEIGHTS = (30, 25, 30, 15)
_CONST_NAMES = tuple(spec.CONSTANTS)

# --- expression trees: tuples, for speed ---
# ("leaf", text, ntokens) | ("un", op, child) | ("bin", op, left, right) | ("if", body, cond, orelse)
# | ("call", spelled_name, ntokens_of_name, args)


def _prec(node) -> int:
    k = node[0]
    if k in ("leaf", "call"):
        return _ATOM
    if k == "un":
        return spec.PREC_NOT if node[1] == "not" else spec.PREC_UNARY
    if k == "bin":
        return spec.BINARY_OPS[node[1]].prec
    return spec.PREC_TERNARY


def _operand_min_prec(op: str) -> tuple[int, int]:
    """Lowest precedence a (left, right) operand of binary `op` may have without parentheses."""
    if op == "**":  # left: a primary only (-2**2 is -(2**2)); right: a unary or power (2**-1)
        return _ATOM, spec.PREC_UNARY
    p = spec.BINARY_OPS[op].prec
    if p == spec.PREC_CMP:  # never chained: both operands above comparisons
        return p + 1, p + 1
    return p, p + 1  # left-associative


@dataclass
class _Style:
    indent: str = "    "
    eol: str = "\n"
    spacing: str = "pep8"  # pep8 | all | none | random
    comma: str = ", "
    assign: str = " = "
    p_paren: float = 0.0
    p_trailing_comma: float = 0.0
    p_comment: float = 0.0
    p_own_comment: float = 0.0
    p_blank: float = 0.0
    p_split: float = 0.0
    p_backslash: float = 0.0
    p_namespace: float = 0.25
    final_eol: str = "\n"
    styled: bool = False


# --- row kernels ---
# Realistic row kernels as templates: (function names, parameter roles, statements, the returned
# expression). Upper-case names are roles, given a parameter's or a local's name when the template is
# used; EPS is a small literal. The generator spells each call bare or with np./math. as its style
# says, may inline statements (to meet `statements`), add elementwise statements before them and
# extra parameters, and formats them like any program.
_ROW_TEMPLATES_TEXT = [
    (("softmax", "soft_max", "probs"), "X", ["E = exp(X - max(X))", "E / sum(E)"]),
    (("softmax", "stable_softmax"), "X", ["M = max(X)", "E = exp(X - M)", "E / sum(E)"]),
    (("softmax", "softmax_inplace"), "X", ["X -= max(X)", "X = exp(X)", "X / sum(X)"]),
    (("tempered_softmax", "softmax_t"), "X T", ["Z = X / T", "E = exp(Z - max(Z))", "E / sum(E)"]),
    (("attention_weights", "scaled_softmax"), "X", ["S = X / sqrt(sum(1.0))", "E = exp(S - max(S))", "E / sum(E)"]),
    (("masked_softmax",), "X W", ["E = where(W > 0, exp(X - max(X)), 0.0)", "E / (sum(E) + EPS)"]),
    (("log_softmax", "logsoftmax"), "X", ["Z = X - max(X)", "Z - log(sum(exp(Z)))"]),
    (("layernorm", "layer_norm", "ln"), "X G B",
     ["MU = mean(X)", "VAR = mean((X - MU) ** 2)", "(X - MU) / sqrt(VAR + EPS) * G + B"]),
    (("layernorm", "layer_norm"), "X G B", ["MU = mean(X)", "D = X - MU", "VAR = mean(D * D)", "D / sqrt(VAR + EPS) * G + B"]),
    (("gelu_layernorm",), "X G B", ["H = 0.5 * X * (1 + tanh(0.7978845608 * (X + 0.044715 * X ** 3)))", "MU = mean(H)",
                                   "(H - MU) / sqrt(mean((H - MU) ** 2) + EPS) * G + B"]),
    (("rmsnorm", "rms_norm"), "X G", ["X / sqrt(mean(X * X) + EPS) * G"]),
    (("rmsnorm", "rms_norm"), "X G", ["MS = mean(X ** 2)", "X * (1 / sqrt(MS + EPS)) * G"]),
    (("logsumexp", "lse"), "X", ["M = max(X)", "M + log(sum(exp(X - M)))"]),
    (("logsumexp",), "X", ["log(sum(exp(X - max(X)))) + max(X)"]),
    (("logmeanexp",), "X", ["M = max(X)", "M + log(mean(exp(X - M)))"]),
    (("smooth_max",), "X T", ["T * log(sum(exp((X - max(X)) / T))) + max(X)"]),
    (("cross_entropy", "xent", "nll"), "P Q", ["-sum(P * log(Q))"]),
    (("cross_entropy", "xent"), "P Q", ["-sum(P * log(Q + EPS))"]),
    (("softmax_cross_entropy", "ce_logits"), "X P", ["Z = X - max(X)", "-sum(P * (Z - log(sum(exp(Z)))))"]),
    (("binary_cross_entropy", "bce"), "X P",
     ["S = sigmoid(X)", "-mean(P * log(S + EPS) + (1 - P) * log(1 - S + EPS))"]),
    (("entropy",), "P", ["-sum(P * log(P + EPS))"]),
    (("kl_divergence", "kl"), "P Q", ["sum(P * log(P / Q))"]),
    (("cosine_similarity", "cos_sim"), "X Y", ["sum(X * Y) / max(sqrt(sum(X * X)) * sqrt(sum(Y * Y)), EPS)"]),
    (("l2_normalize", "normalize"), "X", ["X / max(sqrt(sum(X * X)), EPS)"]),
    (("l2_norm", "norm"), "X", ["sqrt(sum(X ** 2))"]),
    (("p_norm",), "X T", ["sum(abs(X) ** T) ** (1 / T)"]),
    (("variance",), "X", ["mean((X - mean(X)) ** 2)"]),
    (("variance", "var_unbiased"), "X", ["N = sum(1.0)", "sum((X - mean(X)) ** 2) / (N - 1)"]),
    (("std", "stddev"), "X", ["MU = mean(X)", "sqrt(mean((X - MU) ** 2) + EPS)"]),
    (("standardize", "zscore"), "X", ["MU = mean(X)", "(X - MU) / sqrt(mean(X * X) - MU ** 2 + EPS)"]),
    (("minmax_scale", "rescale"), "X", ["(X - min(X)) / (max(X) - min(X) + EPS)"]),
    (("minmax_scale", "rescale"), "X", ["LO = min(X)", "HI = max(X)", "(X - LO) / (HI - LO + EPS)"]),
    (("max_abs", "absmax"), "X", ["max(abs(X))"]),
    (("absmax_scale", "quant_scale"), "X", ["X / max(max(abs(X)), EPS)"]),
    (("centered", "center"), "X", ["X - mean(X)"]),
    (("max_shift",), "X", ["max(X - max(X))"]),
    (("spread", "peak_to_peak"), "X", ["max(X) - min(X)"]),
    (("mse", "mean_squared_error"), "X Y", ["mean((X - Y) ** 2)"]),
    (("mae",), "X Y", ["mean(abs(X - Y))"]),
    (("huber",), "X Y", ["D = abs(X - Y)", "mean(where(D < 1, 0.5 * D * D, D - 0.5))"]),
    (("dot",), "X Y", ["sum(X * Y)"]),
    (("count_positive",), "X", ["sum(X > 0)"]),
    (("frac_above",), "X T", ["mean(X > T)"]),
    (("is_row_max", "argmax_mask"), "X", ["X == max(X)"]),
    (("geometric_mean",), "X", ["exp(mean(log(X)))"]),
    (("harmonic_mean",), "X", ["1 / mean(1 / X)"]),
    (("sum_of_squares",), "X", ["sum(X * X)"]),
    (("mean_square", "power"), "X", ["mean(X ** 2)"]),
    (("sigmoid_normalize",), "X", ["S = sigmoid(X)", "S / sum(S)"]),
    (("clip_to_row", "soft_clip"), "X", ["clip(X, min(X) + EPS, max(X) - EPS)"]),
]
#: Names for a role (realistic ones first; a fresh name when they are taken)
_ROLE_NAMES = {
    "X": ("x", "logits", "h", "v", "a", "xs", "row", "scores", "inp", "act"),
    "Y": ("y", "other", "ref", "ys", "b2"), "P": ("p", "target", "labels", "probs", "pt", "y_true"),
    "Q": ("q", "pred", "probs_hat", "y_pred", "qx"), "G": ("gamma", "g", "weight", "w", "scale"),
    "B": ("beta", "b", "bias", "shift"), "T": ("t", "temp", "tau", "temperature", "k"),
    "W": ("mask", "keep", "w", "valid"), "M": ("m", "mx", "row_max", "top", "peak"),
    "E": ("ex", "exps", "num", "unnorm", "w_"), "Z": ("z", "shifted", "zs", "d"), "MU": ("mu", "avg", "centre", "mean_"),
    "VAR": ("var", "variance", "sigma2", "v2"), "D": ("d", "diff", "dev", "xc"), "MS": ("ms", "sq_mean", "mean_sq"),
    "N": ("n", "count", "length", "size"), "S": ("s", "scaled", "sig", "y_"), "LO": ("lo", "x_min", "low"),
    "HI": ("hi", "x_max", "high"), "H": ("h", "hidden", "act", "y_"),
}
_EPS = ("1e-5", "1e-6", "1e-8", "1e-12", "1e-9", "0.00001", "1E-5", "1e-05", "1e-3", "1e-7")
_ROW_FN_POOL = ("row_kernel", "reduce_row", "rowwise", "normalize_row", "stat", "agg", "pool", "score_row", "loss",
                "norm_fn", "summary")
_AST_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
            ast.Pow: "**", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
            ast.USub: "-", ast.UAdd: "+", ast.Not: "not", ast.And: "and", ast.Or: "or"}


def _shape(node, text: str):
    """A template expression as a neutral tree: ("name", id) | ("num", text) | ("un", op, child) |
    ("bin", op, left, right) | ("if", body, cond, orelse) | ("call", name, args)."""
    if isinstance(node, ast.Name):
        return ("name", node.id)
    if isinstance(node, ast.Constant):
        return ("num", ast.get_source_segment(text, node))
    if isinstance(node, ast.UnaryOp):
        return ("un", _AST_OPS[type(node.op)], _shape(node.operand, text))
    if isinstance(node, ast.BinOp):
        return ("bin", _AST_OPS[type(node.op)], _shape(node.left, text), _shape(node.right, text))
    if isinstance(node, ast.Compare):
        return ("bin", _AST_OPS[type(node.ops[0])], _shape(node.left, text), _shape(node.comparators[0], text))
    if isinstance(node, ast.BoolOp):
        acc = _shape(node.values[0], text)
        for v in node.values[1:]:
            acc = ("bin", _AST_OPS[type(node.op)], acc, _shape(v, text))
        return acc
    if isinstance(node, ast.IfExp):
        return ("if", _shape(node.body, text), _shape(node.test, text), _shape(node.orelse, text))
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in spec.BUILTINS, text
    return ("call", node.func.id, [_shape(a, text) for a in node.args])


def _template(names, roles, lines):
    stmts = []
    for line in lines[:-1]:
        st = ast.parse(line).body[0]
        if isinstance(st, ast.AugAssign):
            stmts.append((st.target.id, _AST_OPS[type(st.op)], _shape(st.value, line)))
        else:
            stmts.append((st.targets[0].id, "", _shape(st.value, line)))
    return names, tuple(roles.split()), stmts, _shape(ast.parse(lines[-1], mode="eval").body, lines[-1])


_ROW_TEMPLATES = [_template(*t) for t in _ROW_TEMPLATES_TEXT]


@dataclass
class _Plan:
    """A program's content, for `_Gen.program` to format: name, parameters, statements (target, aug
    operator or "", tree) and the returned tree."""

    name: str
    params: list
    stmts: list
    ret: tuple


def _depth(node) -> int:
    """Levels of operators and calls in a generator tree (a leaf is 0)."""
    k = node[0]
    if k == "leaf":
        return 0
    kids = node[3] if k == "call" else node[2:]
    return 1 + max((_depth(c) for c in kids), default=0)


def _subst(node, env: dict):
    """node with each name leaf bound in env replaced by its tree."""
    k = node[0]
    if k == "leaf":
        return env.get(node[1], node)
    if k == "call":
        return ("call", node[1], node[2], [_subst(a, env) for a in node[3]])
    if k == "un":
        return ("un", node[1], _subst(node[2], env))
    if k == "bin":
        return ("bin", node[1], _subst(node[2], env), _subst(node[3], env))
    return ("if", _subst(node[1], env), _subst(node[2], env), _subst(node[3], env))


def _subtrees(node, out: list) -> list:
    out.append(node)
    k = node[0]
    if k != "leaf":
        for c in node[3] if k == "call" else node[2:]:
            _subtrees(c, out)
    return out


def _replace(node, old, new):
    """node with the subtree `old` (by identity) replaced by `new`."""
    if node is old:
        return new
    k = node[0]
    if k == "leaf":
        return node
    if k == "call":
        return ("call", node[1], node[2], [_replace(a, old, new) for a in node[3]])
    if k == "un":
        return ("un", node[1], _replace(node[2], old, new))
    if k == "bin":
        return ("bin", node[1], _replace(node[2], old, new), _replace(node[3], old, new))
    return ("if", _replace(node[1], old, new), _replace(node[2], old, new), _replace(node[3], old, new))


def _rng(seed_or_rng) -> random.Random:
    if isinstance(seed_or_rng, random.Random):
        return seed_or_rng
    return random.Random(seed_or_rng)


class _Gen:
    def __init__(self, rng: random.Random, style: bool, max_depth: int, mean_nodes: float, max_nodes: int):
        self.rng = rng
        self.max_depth = max_depth
        self.mean_nodes = mean_nodes
        self.max_nodes = max_nodes
        self.ntok = 0
        self.st = self._style() if style else _Style()
        self.env: list[str] = []
        self.p_reduce = 0.0  # the share of call nodes that are reductions (row kernels only)
        self.n_reduce = 0  # reductions made so far

    # --- style ---
    def _style(self) -> _Style:
        r = self.rng.random
        st = _Style(styled=True)
        st.indent = self.rng.choices(["    ", "  ", "\t", " ", "        ", "   "], [60, 12, 12, 5, 6, 5])[0]
        st.eol = self.rng.choices(["\n", "\r\n", "\r"], [86, 12, 2])[0]
        st.spacing = self.rng.choices(["pep8", "all", "none", "random"], [45, 20, 15, 20])[0]
        st.comma = ", " if r() < 0.85 else ","
        st.assign = " = " if r() < 0.85 else self.rng.choice(["=", " =", "= ", "  =  "])
        st.p_paren = self.rng.choice([0.0, 0.0, 0.03, 0.08, 0.2])
        st.p_trailing_comma = self.rng.choice([0.0, 0.0, 0.0, 0.05, 0.3])
        commented = r() < 0.3
        st.p_comment = self.rng.choice([0.1, 0.3]) if commented else 0.0
        st.p_own_comment = self.rng.choice([0.1, 0.3]) if commented else 0.0
        st.p_blank = self.rng.choice([0.0, 0.0, 0.1, 0.3])
        st.p_split = self.rng.choice([0.0, 0.0, 0.05, 0.2])
        st.p_backslash = self.rng.choice([0.0, 0.0, 0.0, 0.05, 0.2])
        st.p_namespace = self.rng.choice([0.0, 0.2, 0.4, 0.8])
        st.final_eol = self.rng.choices(["\n", "", "\n\n"], [85, 10, 5])[0]
        return st

    def sp(self, op: str) -> str:
        s = self.st.spacing
        if s == "pep8":
            return "" if op == "**" else " "
        if s == "all":
            return " "
        if s == "none":
            return ""
        return self.rng.choice(("", " "))

    # --- names ---
    def fresh_name(self, taken) -> str:
        rng = self.rng
        for _ in range(100):
            if rng.random() < 0.88:
                name = rng.choice(_NAME_POOL)
            else:
                name = rng.choice(_LETTERS) + "".join(rng.choice(_ALNUM) for _ in range(rng.randint(0, 5)))
            if name not in taken and not is_reserved(name):
                return name
        i = 0
        while f"v{i}" in taken:
            i += 1
        return f"v{i}"

    # --- leaves ---
    def number(self) -> str:
        rng = self.rng
        k = rng.choices(range(12), [25, 10, 18, 8, 6, 10, 4, 3, 2, 2, 2, 1])[0]
        if k == 0:
            return str(rng.randint(0, 10))
        if k == 1:
            return str(rng.randint(11, 100000))
        if k == 2:
            return f"{rng.randint(0, 99)}.{rng.randint(0, 999)}"
        if k == 3:
            return "." + str(rng.randint(0, 999)).zfill(rng.randint(1, 3))
        if k == 4:
            return f"{rng.randint(0, 99)}."
        if k == 5:
            mant = rng.choice([str(rng.randint(1, 9)), f"{rng.randint(1, 9)}.{rng.randint(0, 99)}", f".{rng.randint(1, 9)}",
                               f"{rng.randint(1, 9)}."])
            return f"{mant}{rng.choice('eE')}{rng.choice(['', '-', '+'])}{rng.randint(0, 30)}"
        if k == 6:
            return rng.choice(["1_000", "10_000", "1_000_000", "3_141.5", "0.000_1", "2_5e-1_0", "1_0"])
        if k == 7:
            return rng.choice(["0x", "0X"]) + "".join(rng.choice("0123456789abcdefABCDEF")
                                                    for _ in range(rng.randint(1, 4)))
        if k == 8:
            return rng.choice(["0o17", "0O7", "0o_777", "0x_ff", "0b101", "0B1_0"])
        if k == 9:
            return rng.choice(["0", "00", "0_0", "0.0", "0.", ".0", "0e0"])
        if k == 10:
            return rng.choice(["1e308", "1.7976931348623157e308", "1e309", "1e-320", "5e-324", "1e-400",
                               "123456789012345678901234567890", "9007199254740993", "1e22", "65504.0",
                               "3.4028235e38"])
        return str(rng.randint(0, 10)) + "." + str(rng.randint(0, 10))

    def const_name(self, name: str) -> tuple[str, int]:
        if self.rng.random() < self.st.p_namespace:
            return f"{self.rng.choice(spec.NAMESPACES)}.{name}", 3
        return name, 1

    def leaf(self):
        rng = self.rng
        k = rng.choices(("var", "num", "const", "bool"), (60 if self.env else 0, 26, 9, 5))[0]
        if k == "var":
            return ("leaf", rng.choice(self.env), 1)
        if k == "num":
            return ("leaf", self.number(), 1)
        if k == "const":
            return ("leaf", *self.const_name(rng.choice(_CONST_NAMES)))
        return ("leaf", rng.choice(("True", "False")), 1)

    # --- expressions ---
    def size(self) -> int:
        return min(self.max_nodes, int(self.rng.expovariate(1.0 / self.mean_nodes))) if self.mean_nodes > 0 else 0

    def split(self, total: int, parts: int) -> list[int]:
        cuts = sorted(self.rng.randint(0, total) for _ in range(parts - 1))
        return [b - a for a, b in zip([0] + cuts, cuts + [total])]

    def expr(self, depth: int, size: int):
        """A tree with about `size` operator nodes and at most `depth` levels of them above the leaves."""
        rng = self.rng
        if depth <= 0 or size <= 0:
            return self.leaf()
        kind = rng.choices(("arith", "cmp", "bool", "neg", "not", "if", "call"), (34, 8, 5, 8, 3, 4, 30))[0]
        rest = size - 1
        if kind == "arith" or kind == "cmp" or kind == "bool":
            op = rng.choice(_ARITH if kind == "arith" else spec.COMPARISONS if kind == "cmp" else ("and", "or"))
            left, right = self.split(rest, 2)
            return ("bin", op, self.expr(depth - 1, left), self.expr(depth - 1, right))
        if kind == "neg" or kind == "not":
            op = "not" if kind == "not" else rng.choice(("-", "-", "+"))
            return ("un", op, self.expr(depth - 1, rest))
        if kind == "if":
            a, b, c = self.split(rest, 3)
            return ("if", self.expr(depth - 1, a), self.expr(depth - 1, b), self.expr(depth - 1, c))
        if self.p_reduce and rng.random() < self.p_reduce:
            return self.reduction(depth, rest)
        name = rng.choice(_BUILTIN_NAMES)
        lo, hi = spec.BUILTINS[name].arity
        lo = max(lo, 2) if lo != hi else lo  # min/max with one argument reduce: row kernels only
        n = lo if lo == hi else (rng.randint(2, 4) if rng.random() < 0.9 else rng.randint(lo, hi))
        spelled, ntok = self.const_name(name)
        return ("call", spelled, ntok, [self.expr(depth - 1, s) for s in self.split(rest, n)])

    def reduction(self, depth: int, size: int):
        """A reduction call (row kernels): of a random expression, or a centred one such as
        `max(x - max(x))`, `sum(exp(x - max(x)))` or `mean((x - mean(x)) ** 2)`."""
        rng = self.rng
        self.n_reduce += 1
        spelled, ntok = self.const_name(rng.choices(_REDUCTIONS, _REDUCTION_WEIGHTS)[0])
        if depth >= 4 and rng.random() < 0.3:
            a = self.expr(depth - 4, size // 2)
            inner = ("call", *self.const_name(rng.choice(("max", "max", "mean", "min"))), [a])
            self.n_reduce += 1
            diff = ("bin", "-", a, inner)
            f = rng.choice(("exp", "abs", "square", None))
            arg = (diff if f is None else ("bin", "**", diff, ("leaf", "2", 1)) if f == "square"
                   else ("call", *self.const_name(f), [diff]))
            return ("call", spelled, ntok, [arg])
        return ("call", spelled, ntok, [self.expr(depth - 1, size)])

    def pick_name(self, role: str, taken: list) -> str:
        for name in self.rng.sample(_ROLE_NAMES[role], len(_ROLE_NAMES[role])):
            if name not in taken and self.rng.random() < 0.7:
                return name
        return self.fresh_name(taken)

    def shaped(self, node, names: dict):
        """A template's neutral tree as a generator tree, its roles named and its calls spelled."""
        k = node[0]
        if k == "name":
            return ("leaf", names[node[1]], 1)
        if k == "num":
            return ("leaf", node[1], 1)
        if k == "un":
            return ("un", node[1], self.shaped(node[2], names))
        if k == "bin":
            return ("bin", node[1], self.shaped(node[2], names), self.shaped(node[3], names))
        if k == "if":
            return ("if", *(self.shaped(c, names) for c in node[1:]))
        if node[1] in spec.REDUCTIONS:
            self.n_reduce += 1
        return ("call", *self.const_name(node[1]), [self.shaped(a, names) for a in node[2]])

    def template_plan(self, p_range, s_range) -> _Plan | None:
        """A realistic row kernel from _ROW_TEMPLATES within the knobs, or None."""
        rng = self.rng
        (p_lo, p_hi), (s_lo, s_hi) = p_range, s_range
        fits = [t for t in _ROW_TEMPLATES if len(t[1]) <= p_hi]
        if not fits:
            return None
        fnames, roles, stmts, ret = rng.choice(fits)
        names: dict = {"EPS": rng.choice(_EPS)}
        taken: list = []
        for r in roles:
            names[r] = self.pick_name(r, taken)
            taken.append(names[r])
        params = list(taken)
        n_unused = max(0, p_lo - len(params)) + (rng.random() < 0.1)  # parameters the kernel does not read
        while n_unused > 0 and len(params) < p_hi:
            params.append(self.fresh_name(params))
            n_unused -= 1
        if rng.random() < 0.2:
            rng.shuffle(params)
        fname = rng.choice(fnames) if rng.random() < 0.75 else rng.choice(_ROW_FN_POOL)
        if fname in params or is_reserved(fname):
            fname = self.fresh_name(params)
        # elementwise statements before the template's: as many as `statements` needs, sometimes more
        self.env = list(params)
        need = max(0, s_lo - len(stmts))
        room = max(0, s_hi - len(stmts))
        n_extra = need + (rng.randint(0, min(2, room - need)) if room > need and rng.random() < 0.35 else 0)
        out = []
        for _ in range(n_extra):
            target = rng.choice(params) if rng.random() < 0.3 else self.fresh_name(self.env + [fname])
            out.append((target, "", self.expr(self.max_depth, self.size())))
            if target not in self.env:
                self.env.append(target)
        for (target, _, _) in stmts:
            if target not in names:
                names[target] = self.pick_name(target, self.env + [fname])
                self.env.append(names[target])
        body = [(names[t], op, self.shaped(tree, names)) for t, op, tree in stmts]
        ret = self.shaped(ret, names)
        if rng.random() < 0.1 and self.env:  # a little elementwise work on the result
            ret = ("bin", rng.choice(("*", "+", "-")), ret, self.leaf())
        # inline the template's first statements into the later ones while there are too many
        inline = max(0, len(out) + len(body) - s_hi)
        spare = min(len(body), len(out) + len(body) - s_lo)  # statements the program may do without
        if inline == 0 and spare > 0 and rng.random() < 0.1:
            inline = rng.randint(1, spare)
        env: dict = {}
        kept = []
        for i, (target, op, tree) in enumerate(body):
            tree = _subst(tree, env)
            if op and target in env:
                tree, op = ("bin", op, env[target], tree), ""
            if i < inline:
                env[target] = tree if not op else ("bin", op, ("leaf", target, 1), tree)
            else:
                env.pop(target, None)
                kept.append((target, op, tree))
        plan = _Plan(fname, params, out + kept, _subst(ret, env))
        if max(_depth(t) for _, _, t in plan.stmts + [("", "", plan.ret)]) > self.max_depth:
            return None
        return plan

    def random_row_plan(self, n_params: int, n_stmts: int) -> _Plan:
        """A random program whose expressions hold reductions, at least one."""
        rng = self.rng
        params: list = []
        for _ in range(n_params):
            params.append(self.fresh_name(params))
        fname = rng.choice(_ROW_FN_POOL) if rng.random() < 0.3 else self.fresh_name(params)
        if fname in params:
            fname = self.fresh_name(params + [fname])
        self.env = list(params)
        self.p_reduce = rng.choice((0.25, 0.4, 0.6))
        stmts = []
        for _ in range(n_stmts):
            if self.env and rng.random() < 0.2:
                target, op = rng.choice(self.env), rng.choice(("",) + _ARITH)
            else:
                target, op = self.fresh_name(self.env + [fname]), ""
            stmts.append((target, op, self.expr(self.max_depth, self.size())))
            if target not in self.env:
                self.env.append(target)
        ret = self.expr(self.max_depth - 1, self.size() + 1)
        self.p_reduce = 0.0
        if not self.n_reduce:  # wrap a part of the result that reads a name (else all of it)
            reads = [t for t in _subtrees(ret, []) if any(x[0] == "leaf" and x[1] in self.env for x in _subtrees(t, []))]
            part = rng.choice(reads) if reads else ret
            self.n_reduce += 1
            ret = _replace(ret, part, ("call", *self.const_name(rng.choices(_REDUCTIONS, _REDUCTION_WEIGHTS)[0]), [part]))
        return _Plan(fname, params, stmts, ret)

    def row_program(self, p_range, s_range) -> str:
        """A row kernel: a realistic one from the templates, or a random one with reductions."""
        rng = self.rng
        plan = self.template_plan(p_range, s_range) if rng.random() < 0.6 else None
        if plan is None:
            self.n_reduce = 0
            plan = self.random_row_plan(rng.randint(max(1, p_range[0]), p_range[1]), rng.randint(*s_range))
        return self.program(0, 0, plan)

    # --- printing ---
    def child(self, node, min_prec: int) -> str:
        text = self.fmt(node)
        if _prec(node) < min_prec or (self.st.p_paren and self.rng.random() < self.st.p_paren):
            self.ntok += 2
            if self.st.styled and self.rng.random() < 0.05:
                return "( " + text + " )"
            return "(" + text + ")"
        return text

    def fmt(self, node) -> str:
        k = node[0]
        if k == "leaf":
            self.ntok += node[2]
            return node[1]
        if k == "un":
            self.ntok += 1
            op = node[1]
            if op == "not":
                return "not " + self.child(node[2], spec.PREC_NOT)
            return op + self.child(node[2], spec.PREC_UNARY)
        if k == "bin":
            left, op, right = self.bin_parts(node)
            s = self.sp(op) if op not in ("and", "or") else " "
            return left + s + op + s + right
        if k == "if":
            body, cond, orelse = self.if_parts(node)
            return f"{body} if {cond} else {orelse}"
        return self.call(node)

    def bin_parts(self, node) -> tuple[str, str, str]:
        _, op, left, right = node
        lp, rp = _operand_min_prec(op)
        self.ntok += 1
        return self.child(left, lp), op, self.child(right, rp)

    def if_parts(self, node) -> tuple[str, str, str]:
        self.ntok += 2
        return (self.child(node[1], spec.PREC_TERNARY + 1), self.child(node[2], spec.PREC_TERNARY + 1),
                self.child(node[3], spec.PREC_TERNARY))

    def call_args(self, node) -> list[str]:
        args = [self.child(a, 0) for a in node[3]]
        self.ntok += node[2] + 2 + len(args) - 1
        return args

    def call(self, node) -> str:
        args = self.call_args(node)
        tail = ""
        if self.st.p_trailing_comma and self.rng.random() < self.st.p_trailing_comma:
            tail = ","
            self.ntok += 1
        return f"{node[1]}({self.st.comma.join(args)}{tail})"

    def rhs(self, node, cont: str) -> list[str]:
        """An expression as physical lines; `cont` is the indentation of continuation lines."""
        st, rng = self.st, self.rng
        if st.p_split and rng.random() < st.p_split and node[0] in ("bin", "if", "call"):
            comment = ("  # " + rng.choice(_COMMENTS)) if st.p_comment and rng.random() < 0.3 else ""
            if node[0] == "call":
                args = self.call_args(node)
                cut = rng.randint(1, len(args) - 1) if len(args) > 1 else 1
                first = st.comma.join(args[:cut]) + ("," if cut < len(args) else "")
                return [f"{node[1]}({first}{comment}", cont + st.comma.join(args[cut:]) + ")"]
            self.ntok += 2  # the added parentheses
            if node[0] == "bin":
                left, op, right = self.bin_parts(node)
                return [f"({left} {op}{comment}", f"{cont}{right})"]
            body, cond, orelse = self.if_parts(node)
            return [f"({body} if {cond}{comment}", f"{cont}else {orelse})"]
        if st.p_backslash and rng.random() < st.p_backslash and node[0] in ("bin", "if"):
            if node[0] == "bin":
                left, op, right = self.bin_parts(node)
                return [f"{left} {op} \\", f"{cont}{right}"]
            body, cond, orelse = self.if_parts(node)
            return [f"{body} if {cond} \\", f"{cont}else {orelse}"]
        return [self.fmt(node)]

    # --- decoration ---
    def comment(self) -> str:
        return self.rng.choice(["# ", "#", "#  "]) + self.rng.choice(_COMMENTS)

    def docstring(self, ind: str) -> list[str]:
        rng = self.rng
        words = " ".join(rng.choice(_DOC_WORDS) for _ in range(rng.randint(1, 8)))
        q = rng.choices(['"""', "'''", '"', "'", 'r"""', "r'", 'u"'], [50, 10, 15, 15, 4, 3, 3])[0]
        close = q.lstrip("ru")
        if len(close) == 3 and rng.random() < 0.3:
            more = " ".join(rng.choice(_DOC_WORDS) for _ in range(rng.randint(1, 6)))
            return [f"{ind}{q}{words}", "", f"{ind}{more}", f"{ind}{close}"]
        return [f"{ind}{q}{words}{close}"]

    def join(self, lines: list[str]) -> str:
        text = "\n".join(lines) + self.st.final_eol
        return text if self.st.eol == "\n" else text.replace("\n", self.st.eol)

    # --- the program ---
    def program(self, n_params: int, n_stmts: int, plan: _Plan | None = None) -> str:
        """A random program, or one of the given plan's statements (formatted in this generator's style)."""
        rng, st = self.rng, self.st
        if plan is not None:
            params, fname, n_params, n_stmts = list(plan.params), plan.name, len(plan.params), len(plan.stmts)
            self.env = list(params)
        else:
            params = []
            for _ in range(n_params):
                params.append(self.fresh_name(params))
            self.env = list(params)
            fname = self.fresh_name(params) if rng.random() < 0.85 or not st.styled else rng.choice(_FN_POOL)
            while fname in params:
                fname = self.fresh_name(params + [fname])
        self.ntok = 5 + max(0, 2 * n_params - 1)  # def NAME ( params ) :
        comma = st.comma
        ptext = comma.join(params)
        if st.styled and params:
            r = rng.random()
            if r < 0.05:
                ptext += ","
                self.ntok += 1
            elif r < 0.08:
                ptext = f" {ptext} "
            elif r < 0.10 and len(params) > 1:
                ptext = comma.join(params[:1]) + ",\n" + " " * (len(fname) + 5) + comma.join(params[1:])
        colon = ":" if not st.styled or rng.random() < 0.95 else " :"
        header = f"def {fname}({ptext}){colon}"
        lines: list[str] = []
        if st.styled and rng.random() < 0.05:
            lines += rng.choice([[""], [self.comment()], ["", self.comment(), ""]])
        depth = self.max_depth
        if n_stmts == 0 and st.styled and rng.random() < 0.3:  # the one-line form
            node = plan.ret if plan is not None else self.expr(depth, self.size())
            self.ntok += 1
            body = self.rhs(node, "    ")
            lines.append(header + rng.choice([" ", " ", "", "  "]) + "return " + body[0])
            lines += body[1:]
            if st.p_comment and rng.random() < 0.3:
                lines[-1] += "  " + self.comment()
            return self.join(lines)
        lines.append(header)
        ind = st.indent
        cont = ind + ("\t" if ind == "\t" else "    ")
        if st.styled and rng.random() < 0.15:
            lines += self.docstring(ind)
            self.ntok += 1

        def decorate():
            if st.p_blank and rng.random() < st.p_blank:
                lines.append(rng.choice(["", "", " ", ind, "\t"]))
            if st.p_own_comment and rng.random() < st.p_own_comment:
                lines.append(rng.choice([ind, ind, "", "  "]) + self.comment())

        def emit(stmt: list[str]):
            decorate()
            stmt = [ind + stmt[0]] + stmt[1:]
            if st.p_comment and rng.random() < st.p_comment:
                stmt[-1] += rng.choice(["  ", " ", "\t"]) + self.comment()
            lines.extend(stmt)

        for i in range(n_stmts):
            self.ntok += 3  # name, = (or op=), newline
            if plan is not None:
                target, op, node = plan.stmts[i]
                if op:
                    op += "="
                    a = st.assign.replace("=", op) if st.assign.strip() == "=" else f" {op} "
                    if st.spacing == "none" and rng.random() < 0.7:
                        a = op
                else:
                    a = st.assign
                body = self.rhs(node, cont)
                emit([target + a + body[0]] + body[1:])
                continue
            if self.env and rng.random() < 0.25:
                target = rng.choice(self.env)
                op = rng.choice(_ARITH) + "="
                a = st.assign.replace("=", op) if st.assign.strip() == "=" else f" {op} "
                if st.spacing == "none" and rng.random() < 0.7:
                    a = op
                node = self.expr(depth, self.size())
                body = self.rhs(node, cont)
                emit([target + a + body[0]] + body[1:])
                continue
            if self.env and rng.random() < 0.2:
                target = rng.choice(self.env)
            else:
                target = self.fresh_name(self.env + [fname])
            node = self.expr(depth, self.size())
            body = self.rhs(node, cont)
            if target not in self.env:
                self.env.append(target)
            emit([target + st.assign + body[0]] + body[1:])
        self.ntok += 2
        if plan is not None:
            node = plan.ret
        else:
            node = self.expr(depth, self.size() + (1 if rng.random() < 0.5 else 0))
        body = self.rhs(node, cont)
        emit(["return " + body[0]] + body[1:])
        if st.styled and rng.random() < 0.03:
            lines += ["", rng.choice(["", ind]) + self.comment()]
        return self.join(lines)


def _range(r, name: str) -> tuple[int, int]:
    if isinstance(r, int):
        return r, r
    lo, hi = r
    if lo > hi or lo < 0:
        raise ValueError(f"{name} must be (lo, hi) with 0 <= lo <= hi, got {r!r}")
    return int(lo), int(hi)


_MIN_SOURCE = "def f(x): return x"


#: The share of row kernels among generate_batch's programs (its default `rows`).
ROW_SHARE = 0.22


def generate(seed_or_rng, *, params=(1, 8), statements=(1, 12), max_depth: int = 10, style: bool = True,
             max_chars: int | None = None, mean_nodes: float = 5.0, max_nodes: int = 40, rows: float = 0.0) -> str:
    """The source of one valid kernel-language function.

    - `seed_or_rng`: an int (or any `random.Random` seed) or a `random.Random`, which is advanced.
    - `params`, `statements`: (lo, hi) inclusive ranges (or one int) for the number of parameters and of
      body statements before the final `return`; 0 statements means just `return expr` (sometimes
      written in the one-line form `def f(x): return expr`). `params` is capped at spec.MAX_PARAMS.
    - `max_depth`: the most nested operator/call levels in one expression (0 = a single name or
      literal); capped at 30 so that the bracket nesting stays far below spec.MAX_NESTING.
    - `mean_nodes`, `max_nodes`: the number of operator/call nodes of each expression is drawn from
      an exponential distribution with this mean, capped at `max_nodes`.
    - `style`: vary formatting (see the module docstring); False gives a plain canonical layout.
    - `max_chars`: retry (shrinking the size knobs) until the source has at most this many
      characters; below about 20 characters the smallest program `def f(x): return x` is returned.
    - `rows`: the probability that the program is a row kernel (docs/language.md, "Row kernels"): a
      realistic one (softmax, layer/RMS norm, logsumexp, losses, norms, ... with varied names, spellings
      and extra statements) or a random program whose expressions hold reductions, nested ones
      included (`max(x - max(x))`, `sum(exp(x - max(x)))`). A row kernel has at least one parameter
      and a reduction, so it needs `max_depth` >= 1 and params' hi >= 1 (else the program is
      elementwise). 0 (the default) draws nothing more from the stream, so elementwise programs are
      what they were before row kernels; 1 always makes a row kernel. An elementwise program never
      calls sum or mean, nor min or max with one argument.

    The result stays within spec.MAX_TOKENS and spec.MAX_SOURCE_BYTES.
    """
    rng = _rng(seed_or_rng)
    if not 0.0 <= rows <= 1.0:
        raise ValueError(f"rows must be a probability between 0 and 1, got {rows!r}")
    row = rows >= 1.0 or (rows > 0.0 and rng.random() < rows)
    p_lo, p_hi = _range(params, "params")
    p_lo, p_hi = min(p_lo, spec.MAX_PARAMS), min(p_hi, spec.MAX_PARAMS)
    s_lo, s_hi = _range(statements, "statements")
    depth = max(0, min(int(max_depth), 30))
    mean, cap = float(mean_nodes), int(max_nodes)
    if max_chars is not None:  # start near sizes that fit: about 25-40 characters a statement
        s_hi = max(s_lo, min(s_hi, max_chars // 35))
        p_hi = max(p_lo, min(p_hi, max_chars // 30 + 1))
        mean = min(mean, max(1.0, max_chars / 40))
    for attempt in range(200):
        if attempt >= 4 or (attempt >= 1 and max_chars is None):  # shrink: too long / too large
            s_hi = max(s_lo, (s_hi * 3) // 4) if attempt % 2 else s_hi
            depth = max(0, depth - 1) if attempt % 3 == 0 else depth
            p_hi = max(p_lo, p_hi - 1)
            mean *= 0.8
            cap = max(0, (cap * 3) // 4)
            if attempt >= 40:  # the lower bounds cannot be met
                s_lo, p_lo = (s_lo * 3) // 4, max(min(p_lo, 1), p_lo - 1)
                s_hi, p_hi = max(s_lo, s_hi), max(p_lo, p_hi)
        g = _Gen(rng, style, depth, mean, cap)
        if row and depth >= 1 and p_hi >= 1:
            src = g.row_program((p_lo, p_hi), (s_lo, s_hi))
        else:
            src = g.program(rng.randint(p_lo, p_hi), rng.randint(s_lo, s_hi))
        if g.ntok > spec.MAX_TOKENS - 8 or len(src.encode()) > spec.MAX_SOURCE_BYTES:
            continue
        if max_chars is None or len(src) <= max_chars:
            return src
    return _MIN_SOURCE


def generate_batch(n: int, seed=0, *, rows: float = ROW_SHARE, **knobs) -> list[str]:
    """`n` sources from one seeded stream (deterministic for a seed); `knobs` as for `generate`.

    About a share `rows` of them (ROW_SHARE by default; 0 for elementwise programs only) are row
    kernels. Those, and which places they take, come from a second stream of the seed, so the
    elementwise programs of a seed are the same at every `rows` (where a row kernel does not take
    their place) and the same as before row kernels."""
    if not 0.0 <= rows <= 1.0:
        raise ValueError(f"rows must be a probability between 0 and 1, got {rows!r}")
    rng, side = random.Random(seed), random.Random(f"{seed!r}:rows")
    out = []
    for _ in range(n):
        src = generate(rng, **knobs)
        out.append(generate(side, rows=1.0, **knobs) if rows and side.random() < rows else src)
    return out


# ----------------------------------------------------------------------------------------------------
# mutations
# ----------------------------------------------------------------------------------------------------

#: Mutation families `mutate` picks from (uniformly unless `only` is given), with their weights.
MUTATIONS = {
    "delete-token": 8, "insert-token": 10, "swap-tokens": 6, "duplicate-token": 5, "unknown-name": 8,
    "arity": 8, "unknown-function": 8, "indent": 8, "construct": 14, "truncate": 5, "unbalance": 5,
    "bad-char": 6, "reduction": 5,
}
#: Mutation families whose error kind is guaranteed on a valid input.
GUARANTEED_KINDS = {"unknown-name": "unknown-name", "arity": "arity", "unknown-function": "unknown-function"}

_VOCAB = ("+", "-", "*", "/", "//", "%", "**", "<", "<=", ">", ">=", "==", "!=", "=", "+=", "-=", "**=", ":",
          ",", "(", ")", ".", "[", "]", ";", "@", "&", "|", "^", "~", "->", ":=", "...", "!", "{", "}", "<<",
          "and", "or", "not", "if", "else", "def", "return", "True", "False", "for", "in", "is", "lambda",
          "None", "import", "while", "pass", "elif", "yield", "x", "y", "foo", "sqrt", "math", "np", "pi",
          "e", "min", "1", "2.5", ".5", "1e3", "0x1F", "'s'", '"doc"', "b'x'", "f'{x}'", "1j", "01", "1__0",
          "1e", "0x", "\\", "'", '"', "#")
_CONSTRUCTS = {
    "for": "for i in range(3):", "while": "while {v} > 0:", "if": "if {v} > 0:", "elif": "elif {v}:",
    "else": "else:", "import": "import math", "from-import": "from math import sin",
    "lambda": "{n} = lambda t: t", "list": "{n} = [{v}, 1]", "dict": "{n} = {{}}", "subscript": "{n} = {v}[0]",
    "attribute": "{n} = {v}.real", "attribute-call": "{n} = {v}.conjugate()",
    "chained-comparison": "{n} = 0 < {v} < 1", "tuple": "{n} = {v}, 1", "tuple-unpack": "{n}, {n}2 = {v}, {v}",
    "keyword-argument": "{n} = max({v}, 1, key=abs)", "string": "{n} = 'text'", "fstring": "{n} = f'{{{v}}}'",
    "bytes": "{n} = b'x'", "walrus": "{n} = ({n}2 := {v})", "del": "del {v}", "nested-def": "def g(t): return t",
    "pass": "pass", "assert": "assert {v} > 0", "global": "global {v}", "raise": "raise ValueError",
    "with": "with {v}:", "try": "try:", "yield": "yield {v}", "class": "class C: pass", "none": "{n} = None",
    "complex": "{n} = 1j * {v}", "ellipsis": "{n} = ...", "matmul": "{n} = {v} @ {v}", "shift": "{n} = {v} << 1",
    "invert": "{n} = ~{v}", "xor": "{n} = {v} ^ 1", "is": "{n} = {v} is {v}", "in": "{n} = {v} in {v}",
    "chained-assignment": "{n} = {n}2 = {v}", "annotation": "{n}: float = {v}", "attr-assign": "{v}.y = 1",
    "star": "{n} = max(*{v})", "semicolon": "{n} = 1; {n}2 = 2", "expression-statement": "{v} + 1",
    "call-statement": "sqrt({v})", "print": "print({v})", "unknown-call": "{n} = len({v})",
    "return-tuple": "return {v}, {v}", "async": "async def g(): pass", "await": "{n} = await {v}",
    "set": "{n} = {{{v}}}", "conditional-import": "import numpy as np",
}
_BAD_CHARS = {"dollar": "$", "question": "?", "backtick": "`", "nul": "\x00", "soh": "\x01", "bel": "\x07",
              "esc": "\x1b", "del": "\x7f", "vtab": "\x0b", "nbsp": "\u00a0", "zwsp": "\u200b", "smart-quote": "\u201c",
              "lambda": "\u03bb", "e-acute-name": "\u00e9", "cyrillic-a": "\u0430", "exclamation": "!",
              "superscript-two": "\u00b2", "arabic-digit": "\u0663", "fullwidth-digit": "\uff11", "form-feed": "\f",
              "tab": "\t", "dot": ".", "double-dot": ".."}
_IN_NAME_CHARS = ("e-acute-name", "cyrillic-a", "lambda", "superscript-two", "arabic-digit", "fullwidth-digit")


_NOT_LEAF_BEFORE = frozenset({"(", ".", "="} | set(spec.AUG_ASSIGN))


class _Src:
    """A normalised source, its tokens and structure helpers for the mutations."""

    def __init__(self, source: str):
        self.src = normalize_newlines(source)
        toks, _ = tokenize(self.src)
        self.all = toks
        self.sig = [i for i, t in enumerate(toks) if t.kind != "newline"]
        # the header: `def NAME ( ... ) :`
        self.header_end = 0
        if toks and toks[0].kind == "def":
            depth = 0
            for i, t in enumerate(toks):
                if t.kind == "(":
                    depth += 1
                elif t.kind == ")":
                    depth -= 1
                    if depth == 0:
                        self.header_end = i + 1
                        break
        self.names = {t.text for t in toks if t.kind == "name"}

    def end(self, t: Token) -> int:
        return t.start + len(t.text)

    def replace(self, a: int, b: int, text: str) -> str:
        return self.src[:a] + text + self.src[b:]

    def kind_at(self, i: int) -> str:
        return self.all[i].kind if 0 <= i < len(self.all) else "newline"

    def loads(self) -> list[int]:
        """Indices of name tokens that read a value (not the function name, params, targets, calls, np/math)."""
        out = []
        for i, t in enumerate(self.all):
            if t.kind != "name" or i < self.header_end:
                continue
            nxt = self.kind_at(i + 1)
            if nxt in ("(", ".", "="):
                continue
            out.append(i)
        return out

    def leaves(self) -> list[int]:
        """Indices of operand tokens inside expressions: numbers, True/False, loads (not targets, not after `.`)."""
        out = []
        for i, t in enumerate(self.all):
            if i < self.header_end:
                continue
            if t.kind in ("number", "True", "False") or (
                    t.kind == "name" and self.kind_at(i + 1) not in _NOT_LEAF_BEFORE and self.kind_at(i - 1) != "."):
                out.append(i)
        return out

    def operands(self) -> list[tuple[int, int]]:
        """Source spans of the atoms of expressions: `leaves` and namespaced constants such as `math.pi`."""
        spans = [(self.all[i].start, self.end(self.all[i])) for i in self.leaves()]
        for i, t in enumerate(self.all):
            if (t.kind == "name" and t.text in spec.NAMESPACES and i > self.header_end and self.kind_at(i + 1) == "."
                    and self.kind_at(i + 2) == "name" and self.kind_at(i + 3) != "("):
                spans.append((t.start, self.end(self.all[i + 2])))
        return spans

    def calls(self) -> list[int]:
        """Indices of the `(` of builtin calls."""
        return [i for i, t in enumerate(self.all) if t.kind == "(" and i > self.header_end
                and self.kind_at(i - 1) == "name" and self.all[i - 1].text in spec.BUILTINS]

    def call_args(self, open_i: int) -> tuple[list[tuple[int, int]], int, bool]:
        """(argument token spans [first, last], index of `)`, trailing comma?) of the call opened at open_i."""
        spans, depth, start = [], 0, open_i + 1
        i = open_i
        while True:
            i += 1
            k = self.all[i].kind
            if k == "(":
                depth += 1
            elif k == ")":
                if depth == 0:
                    break
                depth -= 1
            elif k == "," and depth == 0:
                spans.append((start, i - 1))
                start = i + 1
        trailing = start == i and bool(spans)
        if start < i:
            spans.append((start, i - 1))
        return spans, i, trailing

    def unknown(self, pool) -> str:
        for name in pool:
            if name not in self.names and name not in spec.BUILTINS and name not in spec.CONSTANTS:
                return name
        i = 0
        while f"unknown{i}" in self.names:
            i += 1
        return f"unknown{i}"

    def logical_starts(self) -> list[int]:
        """Token indices that start a logical line."""
        out, new = [], True
        for i, t in enumerate(self.all):
            if new and t.kind != "newline":
                out.append(i)
                new = False
            if t.kind == "newline":
                new = True
        return out

    def line_start(self, offset: int) -> int:
        return self.src.rfind("\n", 0, offset) + 1


def _m_delete(s: _Src, rng):
    t = s.all[rng.choice(s.sig)]
    return s.replace(t.start, s.end(t), ""), "delete-token"


def _m_insert(s: _Src, rng):
    tok = rng.choice(_VOCAB)
    t = s.all[rng.choice(s.sig)]
    at = t.start if rng.random() < 0.5 else s.end(t)
    pad = rng.choice(["", " "])
    return s.replace(at, at, pad + tok + pad), f"insert-token:{tok}"


def _m_swap(s: _Src, rng):
    pairs = [(s.sig[j], s.sig[j + 1]) for j in range(len(s.sig) - 1)
             if s.sig[j + 1] == s.sig[j] + 1 and s.all[s.sig[j]].text != s.all[s.sig[j + 1]].text]
    if not pairs:
        return None
    i, j = rng.choice(pairs)
    a, b = s.all[i], s.all[j]
    text = b.text + s.src[s.end(a):b.start] + a.text
    return s.replace(a.start, s.end(b), text), "swap-tokens"


def _m_duplicate(s: _Src, rng):
    t = s.all[rng.choice(s.sig)]
    return s.replace(s.end(t), s.end(t), rng.choice(["", " "]) + t.text), "duplicate-token"


def _m_unknown_name(s: _Src, rng):
    loads = s.loads()
    if loads:
        t = s.all[rng.choice(loads)]
    else:
        leaves = [i for i in s.leaves() if s.all[i].kind != "name"]
        if not leaves:
            return None
        t = s.all[rng.choice(leaves)]
    name = s.unknown(rng.sample(_UNKNOWN_NAMES, len(_UNKNOWN_NAMES)))
    return s.replace(t.start, s.end(t), name), "unknown-name"


def _m_arity(s: _Src, rng):
    calls = s.calls()
    if not calls:
        spans = s.operands()
        if not spans:
            return None
        a, b = rng.choice(spans)
        f = rng.choice([n for n, b in spec.BUILTINS.items() if b.arity[0] >= 2])
        return s.replace(a, b, f"{f}({s.src[a:b]})"), "arity:wrap"
    o = rng.choice(calls)
    b = spec.BUILTINS[s.all[o - 1].text]
    spans, close, _ = s.call_args(o)
    lo, hi = b.arity
    n = len(spans)
    after_open = s.end(s.all[o])
    r = rng.random()
    if r < 0.1:
        return s.replace(after_open, s.all[close].start, ""), "arity:empty"
    if (r < 0.55 if lo == hi else n >= hi):  # one argument more, at the front (a trailing comma stays valid)
        return s.replace(after_open, after_open, rng.choice(["1.0, ", "1,", "2 , "])), "arity:add"
    if lo == hi:  # remove the first argument and the comma after it
        end = s.all[spans[1][0]].start if n > 1 else s.all[close].start
        return s.replace(after_open, end, ""), "arity:remove"
    # variadic (min/max): every count from 1 (a reduction) to hi is valid, so as many more as make hi + 1
    return s.replace(after_open, after_open, "1, " * (hi + 1 - n)), "arity:add"


def _callee_start(s: _Src, open_i: int) -> int:
    """Where the callee of the call opened at open_i starts (its np. or math. included)."""
    i = open_i - 1
    if s.kind_at(i - 1) == "." and s.kind_at(i - 2) == "name" and s.all[i - 2].text in spec.NAMESPACES:
        i -= 2
    return s.all[i].start


def _m_reduction(s: _Src, rng):
    """Row kernels' mutations: a reduction called wrongly (``axis``: an argument more, ``sum(x, -1)``;
    ``extra``: an operand more, an error but for min/max; ``empty``; ``many``: nine arguments to min/max;
    ``keyword``: NumPy's ``axis=-1``; ``method``: ``x.sum()``), an existing one or one put around an
    operand; or a valid program changed: a reduction swapped for another (``swap``), removed
    (``unwrap``), or put around an operand (``wrap``, which makes an elementwise program a row kernel)."""
    reds = []
    for o in s.calls():
        spans, close, _ = s.call_args(o)
        if s.all[o - 1].text in spec.REDUCTIONS and len(spans) == 1:
            reds.append((o, spans[0], close))
    r = rng.random()
    if reds and 0.55 <= r < 0.7:
        o = rng.choice(reds)[0]
        t = s.all[o - 1]
        return s.replace(t.start, s.end(t), rng.choice([n for n in spec.REDUCTIONS if n != t.text])), "reduction:swap"
    if reds and 0.7 <= r < 0.8:
        o, (a, b), close = rng.choice(reds)
        return s.replace(_callee_start(s, o), s.end(s.all[close]), f"({s.src[s.all[a].start:s.end(s.all[b])]})"), \
            "reduction:unwrap"
    if reds and r < 0.55:  # an existing reduction called wrongly
        o, (a, b), close = rng.choice(reds)
        start, end = _callee_start(s, o), s.end(s.all[close])
        spelled, name = s.src[start:s.all[o].start], s.all[o - 1].text
        arg, atom = s.src[s.all[a].start:s.end(s.all[b])], a == b and s.all[a].kind == "name"
    else:
        spans = s.operands()
        if not spans:
            return None
        start, end = rng.choice(spans)
        spelled = rng.choice(["sum", "mean", "max", "min", "np.sum", "np.max", "math.mean", "np.min"])
        name, arg = spelled.rsplit(".", 1)[-1], s.src[start:end]
        atom = arg.isidentifier()
        if r >= 0.55:
            return s.replace(start, end, f"{spelled}({arg})"), "reduction:wrap"
    how = rng.choice(("extra", "empty", "keyword", "method") + (("many",) if name in ("min", "max") else ("axis",)))
    if how == "axis":
        text = f"{spelled}({arg}{rng.choice([', -1', ', 1', ',0'])})"
    elif how == "extra":
        text = f"{spelled}({arg}, {s.all[rng.choice(s.leaves() or [0])].text})"
    elif how == "empty":
        text = f"{spelled}()"
    elif how == "keyword":
        text = f"{spelled}({arg}{rng.choice([', axis=-1', ', axis=1', ', keepdims=True'])})"
    elif how == "many":
        text = f"{spelled}({arg}{', 1' * spec.BUILTINS[name].arity[1]})"
    else:
        text = f"{arg if atom else f'({arg})'}.{name}()"
    return s.replace(start, end, text), f"reduction:{how}"


def _m_unknown_function(s: _Src, rng):
    name = s.unknown(rng.sample(_UNKNOWN_FUNCS, len(_UNKNOWN_FUNCS)))
    calls = s.calls()
    if calls and rng.random() < 0.7:
        t = s.all[rng.choice(calls) - 1]
        return s.replace(t.start, s.end(t), name), "unknown-function"
    spans = s.operands()
    if not spans:
        return None
    a, b = rng.choice(spans)
    return s.replace(a, b, f"{name}({s.src[a:b]})"), "unknown-function"


def _m_indent(s: _Src, rng):
    starts = [i for i in s.logical_starts() if i > 0 and s.all[i].line > 1
              and s.src[s.line_start(s.all[i].start):s.all[i].start].strip() == ""]
    if not starts:  # the one-line form: put the body on its own line, unindented
        for i, t in enumerate(s.all):
            if t.kind == "return":
                return s.replace(t.start, t.start, "\n"), "indent:col0"
        return None
    later = starts[1:] or starts
    i = rng.choice(later)
    t = s.all[i]
    ls = s.line_start(t.start)
    ind = s.src[ls:t.start]
    how = rng.choice(["over", "under", "col0", "tabs"]) if len(starts) > 1 else "col0"
    if how == "under" and len(ind) < 2:
        how = "col0"
    if how == "over":
        new = ind + rng.choice([" ", "  ", "    ", "\t"])
    elif how == "under":
        new = ind[: rng.randint(1, len(ind) - 1)]
    elif how == "col0":
        new = ""
    else:
        new = ind.replace("\t", "    ") if "\t" in ind else "\t" + ind[4:] if len(ind) > 4 else ind[:-1] + "\t"
        if new == ind:
            new = ind + "\t"
    return s.replace(ls, t.start, new), f"indent:{how}"


def _m_construct(s: _Src, rng):
    name = rng.choice(list(_CONSTRUCTS) + ["code-after-return", "missing-return", "return-without-value"] * 2)
    starts = [i for i in s.logical_starts() if i > 0 and s.all[i].line > 1]
    ret = next((i for i, t in enumerate(s.all) if t.kind == "return"), None)
    if name == "missing-return" and ret is not None:
        nl = next(j for j in range(ret, len(s.all)) if s.all[j].kind == "newline")
        a = s.line_start(s.all[ret].start) if ret in starts else s.all[ret].start
        return s.replace(a, s.all[nl].start, ""), "construct:missing-return"
    if name == "return-without-value" and ret is not None:
        nl = next(j for j in range(ret, len(s.all)) if s.all[j].kind == "newline")
        if nl > ret + 1:
            return s.replace(s.end(s.all[ret]), s.end(s.all[nl - 1]), ""), "construct:return-without-value"
    v = next((s.all[i].text for i in s.loads()), "1")
    new = s.unknown(["n_new", "w_new", "qq1"])
    if name == "code-after-return":
        line = f"{new} = {v}"
    elif name in _CONSTRUCTS:
        line = _CONSTRUCTS[name].format(v=v, n=new)
    else:
        name = "expression-statement"
        line = _CONSTRUCTS[name].format(v=v, n=new)
    if starts:
        first = s.all[starts[0]]
        ind = s.src[s.line_start(first.start):first.start] or "    "
    else:
        ind = "    "
    if name == "code-after-return" or not starts:
        at = len(s.src.rstrip("\n"))
        return s.src[:at] + "\n" + ind + line + s.src[at:] + ("" if s.src.endswith("\n") else "\n"), \
            f"construct:{name}"
    t = s.all[rng.choice(starts)]
    ls = s.line_start(t.start)
    return s.replace(ls, ls, ind + line + "\n"), f"construct:{name}"


def _m_truncate(s: _Src, rng):
    last = s.end(s.all[s.sig[-1]])
    if last < 2:
        return None
    return s.src[: rng.randint(1, last - 1)], "truncate"


def _m_unbalance(s: _Src, rng):
    how = rng.choice(["open", "close", "delete"])
    parens = [i for i in s.sig if s.all[i].kind in ("(", ")")]
    if how == "delete" and parens:
        t = s.all[rng.choice(parens)]
        return s.replace(t.start, s.end(t), ""), "unbalance:delete"
    how = "open" if how == "delete" else how
    t = s.all[rng.choice(s.sig[1:] or s.sig)]
    at = t.start if rng.random() < 0.5 else s.end(t)
    return s.replace(at, at, "(" if how == "open" else ")"), f"unbalance:{how}"


def _m_bad_char(s: _Src, rng):
    name = rng.choice(list(_BAD_CHARS))
    c = _BAD_CHARS[name]
    if name in _IN_NAME_CHARS or (name in ("dot", "double-dot") and rng.random() < 0.5):
        names = [i for i in s.sig if s.all[i].kind in ("name", "number")]
        if names:
            t = s.all[rng.choice(names)]
            at = rng.randint(t.start, s.end(t))
            return s.replace(at, at, c), f"bad-char:{name}"
    t = s.all[rng.choice(s.sig)]
    at = t.start if rng.random() < 0.5 else s.end(t)
    return s.replace(at, at, c), f"bad-char:{name}"


_FAMILIES = {
    "delete-token": _m_delete, "insert-token": _m_insert, "swap-tokens": _m_swap,
    "duplicate-token": _m_duplicate, "unknown-name": _m_unknown_name, "arity": _m_arity,
    "unknown-function": _m_unknown_function, "indent": _m_indent, "construct": _m_construct,
    "truncate": _m_truncate, "unbalance": _m_unbalance, "bad-char": _m_bad_char, "reduction": _m_reduction,
}


def _eol(source: str) -> str:
    if "\r\n" in source:
        return "\r\n"
    return "\r" if "\r" in source else "\n"


def mutate(source: str, seed_or_rng, *, only=None) -> tuple[str, str]:
    """(mutated source, mutation name) for a valid `source` (typically one from `generate`).

    `only`: a family name or a collection of names from MUTATIONS to choose from (default: all,
    weighted by MUTATIONS). The mutated source keeps the original's line endings. A mutation that does
    not apply (e.g. no builtin call to change) falls back to another family of `only` or, failing that,
    to deleting a token. Mutations work on the reference lexer's tokens; sources that do not lex are
    still mutated, on the tokens before the lexical error.
    """
    rng = _rng(seed_or_rng)
    if only is None:
        families = list(MUTATIONS)
    elif isinstance(only, str):
        families = [only]
    else:
        families = list(dict.fromkeys(only))
    for f in families:
        if f not in _FAMILIES:
            raise ValueError(f"unknown mutation {f!r}: expected one of {list(MUTATIONS)}")
    s = _Src(source)
    eol = _eol(source)
    if not s.sig:
        return source + rng.choice(_VOCAB), "insert-token"
    weights = [MUTATIONS[f] for f in families]
    tried: set[str] = set()
    while len(tried) < len(families):
        f = rng.choices(families, weights)[0]
        if f in tried:
            continue
        tried.add(f)
        out = _FAMILIES[f](s, rng)
        if out is not None:
            text, name = out
            return (text.replace("\n", eol) if eol != "\n" else text), name
    text, name = _m_delete(s, rng)
    return (text.replace("\n", eol) if eol != "\n" else text), name


def mutate_batch(sources, seed=0, **kw) -> list[tuple[str, str]]:
    """`mutate` over `sources` with one seeded stream (deterministic for a seed)."""
    rng = random.Random(seed)
    return [mutate(src, rng, **kw) for src in sources]
