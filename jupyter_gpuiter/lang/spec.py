"""The kernel language as data: the single source of truth for every compiler, the VM and the generators.

Every table here is read by the serial compiler, the data-parallel traditional compiler, the neural
tokenizer and the program generator; nothing else spells out the language.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# --- size limits (checked before any parsing; exceeding one is a `too-large` CompileError) ---
MAX_SOURCE_BYTES = 8192
MAX_TOKENS = 1024  # significant tokens: everything but comments, blank lines and NEWLINEs
MAX_NESTING = 64  # open brackets around a token, or prefix operators in a row
MAX_PARAMS = 32
MAX_NUMBER_CHARS = 100  # a longer literal is a `too-large` error (CPython itself refuses > 4300 digits)

# --- token kinds (shared by the regex lexer of the serial compiler and the DFA lexer) ---
TOKEN_KINDS = [
    "none", "name", "number", "string", "newline",
    "(", ")", ",", ":", ".", "=",
    "+", "-", "*", "/", "//", "%", "**",
    "<", "<=", ">", ">=", "==", "!=",
    "+=", "-=", "*=", "/=", "//=", "%=", "**=",
    # keywords of the language
    "def", "return", "and", "or", "not", "if", "else", "True", "False",
    # tokens that lex but are never part of the language (rejected as `unsupported`)
    "bad-keyword", "bad-op",
]
TOK = {name: i for i, name in enumerate(TOKEN_KINDS)}

KEYWORDS = ("def", "return", "and", "or", "not", "if", "else", "True", "False")
#: Python keywords outside the language, with the id of the diagnostic that explains each (lang/diagnostics.py).
BAD_KEYWORDS = {
    "for": "keyword_loop", "while": "keyword_loop", "in": "keyword", "is": "keyword_is", "lambda": "keyword_lambda",
    "import": "keyword_import", "from": "keyword_import", "as": "keyword", "class": "keyword_class",
    "pass": "keyword", "break": "keyword_loop_jump", "continue": "keyword_loop_jump", "global": "keyword",
    "nonlocal": "keyword", "del": "keyword", "assert": "keyword", "raise": "keyword_exception",
    "try": "keyword_exception", "except": "keyword_exception", "finally": "keyword_exception", "with": "keyword",
    "yield": "keyword_generator", "async": "keyword_async", "await": "keyword_async", "elif": "keyword_elif",
    "None": "keyword_none",
}

#: Operator spellings that lex (so the error can name them) but are outside the language.
BAD_OPS = ("->", ":=", "...", "..", "<<=", ">>=", "<<", ">>", "&=", "|=", "^=", "@=", "~", "&", "|", "^", "@",
           ";", "[", "]", "{", "}", "!")

#: All operator spellings the lexer knows, longest first (maximal munch).
OPERATORS = tuple(sorted({k for k in TOKEN_KINDS[5:31]} | set(BAD_OPS), key=lambda s: (-len(s), s)))

AUG_ASSIGN = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "//=": "//", "%=": "%", "**=": "**"}


@dataclass(frozen=True)
class BinaryOp:
    token: str
    ir_op: str
    prec: int
    right_assoc: bool = False


# Precedence, low to high (Python's): ternary 1, or 2, and 3, not 4, comparisons 5, + - 6, * / // % 7,
# unary + - 8, ** 9. `**` binds tighter than a unary operator on its left but looser on its right.
PREC_TERNARY, PREC_OR, PREC_AND, PREC_NOT, PREC_CMP, PREC_ADD, PREC_MUL, PREC_UNARY, PREC_POW = range(1, 10)

BINARY_OPS = {
    "or": BinaryOp("or", "or", PREC_OR),
    "and": BinaryOp("and", "and", PREC_AND),
    "<": BinaryOp("<", "lt", PREC_CMP), "<=": BinaryOp("<=", "le", PREC_CMP),
    ">": BinaryOp(">", "gt", PREC_CMP), ">=": BinaryOp(">=", "ge", PREC_CMP),
    "==": BinaryOp("==", "eq", PREC_CMP), "!=": BinaryOp("!=", "ne", PREC_CMP),
    "+": BinaryOp("+", "add", PREC_ADD), "-": BinaryOp("-", "sub", PREC_ADD),
    "*": BinaryOp("*", "mul", PREC_MUL), "/": BinaryOp("/", "div", PREC_MUL),
    "//": BinaryOp("//", "floordiv", PREC_MUL), "%": BinaryOp("%", "mod", PREC_MUL),
    "**": BinaryOp("**", "pow", PREC_POW, right_assoc=True),
}
UNARY_OPS = {"-": ("neg", PREC_UNARY), "+": ("pos", PREC_UNARY), "not": ("not", PREC_NOT)}
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")


@dataclass(frozen=True)
class Builtin:
    name: str
    ir_op: str
    arity: tuple[int, int]  # (min, max) arguments; variadic ones fold left over a binary IR op
    returns_bool: bool = False


def _b(name, arity=1, ir_op=None, returns_bool=False):
    lo, hi = (arity, arity) if isinstance(arity, int) else arity
    return Builtin(name, ir_op or name, (lo, hi), returns_bool)


BUILTINS = {b.name: b for b in [
    _b("abs"), _b("min", (1, 8)), _b("max", (1, 8)), _b("sqrt"), _b("exp"), _b("expm1"), _b("log"),
    _b("log1p"), _b("log2"), _b("log10"), _b("sin"), _b("cos"), _b("tan"), _b("asin"), _b("acos"),
    _b("atan"), _b("atan2", 2), _b("sinh"), _b("cosh"), _b("tanh"), _b("erf"), _b("floor"), _b("ceil"),
    _b("pow", 2, "pow"), _b("where", 3, "select"), _b("clip", 3), _b("sigmoid"), _b("copysign", 2),
    _b("hypot", 2), _b("isnan", 1, returns_bool=True), _b("isinf", 1, returns_bool=True), _b("float"),
    _b("sum", 1), _b("mean", 1),
]}

#: Reductions over the row (the last axis): builtin called with one argument -> IR op. One-argument
#: `max`/`min` reduce (Python's `max(iterable)`); with two or more they stay elementwise folds.
REDUCTIONS = {"sum": "sum", "mean": "mean", "max": "amax", "min": "amin"}

CONSTANTS = {"pi": math.pi, "e": math.e, "inf": math.inf, "nan": math.nan}
NAMESPACES = ("math", "np")


@dataclass(frozen=True)
class IROp:
    name: str
    nargs: int
    returns_bool: bool = False
    reduction: bool = False  # reduces its operand over the row; the result is per row


# The IR instruction set: every op the compilers emit and the VM/renderers execute.
IR_OPS = [
    IROp("param", 0), IROp("const", 0), IROp("bool", 0, True), IROp("ret", 1),
    IROp("neg", 1), IROp("pos", 1), IROp("not", 1, True),
    IROp("add", 2), IROp("sub", 2), IROp("mul", 2), IROp("div", 2), IROp("floordiv", 2), IROp("mod", 2),
    IROp("pow", 2),
    IROp("lt", 2, True), IROp("le", 2, True), IROp("gt", 2, True), IROp("ge", 2, True),
    IROp("eq", 2, True), IROp("ne", 2, True),
    IROp("and", 2), IROp("or", 2), IROp("select", 3),
] + [IROp(b.ir_op, b.arity[0] if b.arity[0] == b.arity[1] else 2, b.returns_bool)
     for b in BUILTINS.values() if b.ir_op not in ("pow", "select") and b.name not in ("sum", "mean")] + [
    # last, so the elementwise ops keep their indices
    IROp("sum", 1, reduction=True), IROp("mean", 1, reduction=True),
    IROp("amax", 1, reduction=True), IROp("amin", 1, reduction=True),
]
IR_OP_INDEX = {op.name: i for i, op in enumerate(IR_OPS)}
IR_OP_BY_NAME = {op.name: op for op in IR_OPS}
REDUCTION_OPS = tuple(op.name for op in IR_OPS if op.reduction)
