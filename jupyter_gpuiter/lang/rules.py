"""Token-level rules of the kernel language, checked after lexing and before any parsing.

Every rule is local to a token and its bracket context, so the data-parallel compiler checks the same
rules with a few tensor ops. Each violation is an error at a token; the reported one is the first by
(line, col, priority). Priorities break ties at one token: limits, then indentation, then the shape of
the file (one `def`), then the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import spec
from .diagnostics import ORDER, Reported
from .errors import KIND_CODES
from .lexer import Token

P_LIMIT, P_INDENT, P_FILE, P_TOKEN = range(4)
OPERAND_END = {"name", "number", "string", "True", "False", ")"}
PREFIX_OPS = {"-", "+", "not"}


@dataclass(order=True)
class RuleError(Reported):
    line: int
    col: int
    priority: int
    code: int = field(init=False, repr=False)  # ties at one token go to the lower kind code,
    order: int = field(init=False, repr=False)  # then to the diagnostic placed first in the table
    id: str = field(compare=False)  # a diagnostic id (lang/diagnostics.py)
    fields: dict = field(compare=False, default_factory=dict)

    def __post_init__(self):
        self.code, self.order = KIND_CODES[self.kind], ORDER[self.id]


@dataclass
class Structure:
    """What the rules learned about the file, reused by the serial compiler."""

    lines: list[tuple[int, int]]  # logical lines: (first token index, index of its newline token or the end)
    header_open: int = -1  # index of the `(` of `def name(`
    header_close: int = -1
    header_colon: int = -1
    docstring_line: int = -1  # index into `lines`, or -1


def _logical_lines(tokens: list[Token]) -> list[tuple[int, int]]:
    lines, start = [], 0
    for i, t in enumerate(tokens):
        if t.kind == "newline":
            lines.append((start, i))
            start = i + 1
    if start < len(tokens):  # lexing stopped at an error inside this line
        lines.append((start, len(tokens)))
    return lines


def check(tokens: list[Token], source: str, complete: bool = True) -> tuple[Structure, list[RuleError]]:
    """All rule violations of a token stream (tokens as the reference lexer returns them).

    `complete` is False when lexing stopped at an error: rules about the end of the file (a body is
    missing, a bracket is never closed) are then not checked.
    """
    errors: list[RuleError] = []

    def fail(t: Token, ident: str, priority: int = P_TOKEN, **fields):
        errors.append(RuleError(t.line, t.col, priority, ident, fields))

    lines = _logical_lines(tokens)
    st = Structure(lines)
    # --- brackets: depth, innermost enclosing `(`, call parens ---
    open_stack: list[int] = []
    enclosing = [-1] * len(tokens)
    is_call = [False] * len(tokens)
    for i, t in enumerate(tokens):
        enclosing[i] = open_stack[-1] if open_stack else -1
        if t.kind == "(":
            prev = tokens[i - 1].kind if i else "newline"
            is_call[i] = prev == "name"
            if prev in OPERAND_END - {"name"}:
                fail(t, "call_of_non_name")
            open_stack.append(i)
            if len(open_stack) > spec.MAX_NESTING:
                fail(t, "too_many_brackets", P_LIMIT)
        elif t.kind == ")":
            open_stack.pop()
    for i in open_stack if complete else ():
        fail(tokens[i], "unclosed_paren")
    # --- the file: one `def` header first, then its body ---
    if not tokens:  # (no token before a lexical error is not an empty source: the lexical error stands)
        if complete:
            errors.append(RuleError(1, 1, P_FILE, "empty_source"))
        return st, errors
    first_end = lines[0][1]
    if tokens[0].kind != "def":
        fail(tokens[0], "def_first", P_FILE)
    else:
        st.header_open = next((i for i in range(first_end) if tokens[i].kind == "("), -1)
        if st.header_open >= 0:
            depth, j = 0, st.header_open
            while j < first_end:
                depth += {"(": 1, ")": -1}.get(tokens[j].kind, 0)
                if depth == 0:
                    break
                j += 1
            st.header_close = j
            if j + 1 < first_end and tokens[j + 1].kind == ":":
                st.header_colon = j + 1
    header = range(st.header_open + 1, st.header_close) if st.header_open >= 0 else range(0)
    n_params = 0
    for i in header:
        t = tokens[i]
        if t.kind == "name" and enclosing[i] == st.header_open:
            n_params += 1
            if n_params > spec.MAX_PARAMS:
                fail(t, "too_many_parameters", P_LIMIT)
        elif t.kind != ",":
            fail(t, "bad_parameter")
    one_line = st.header_colon >= 0 and st.header_colon + 1 < first_end
    body_indent = None
    for n, (a, _) in enumerate(lines):
        t = tokens[a]
        line_start = source.rfind("\n", 0, t.start) + 1
        # CPython's tokenizer sets the column to 0 at a form feed: a line's indentation is what follows
        # the last form feed before its first token (`\fdef f(x):` is not indented)
        indent = source[line_start:t.start]
        indent = indent[indent.rfind("\f") + 1:]
        if line_start >= 2 and source[line_start - 2] == "\\":
            fail(t, "after_continuation", P_INDENT)
        elif n == 0:
            if indent:
                fail(t, "unexpected_indent", P_INDENT)
        elif not indent:
            if n == 1 and not one_line:
                fail(t, "missing_body", P_INDENT)
            else:
                fail(t, "code_outside_function", P_FILE)
        elif body_indent is None and not one_line:
            body_indent = indent
        elif indent != body_indent:
            fail(t, "unexpected_indent" if body_indent is None or len(indent) > len(body_indent)
                 else "indentation_mismatch", P_INDENT)
    if complete and len(lines) == 1 and not one_line and tokens[0].kind == "def":
        fail(tokens[0], "missing_body")
    # --- docstring: the first body line made only of strings ---
    body_first = (st.header_colon + 1, first_end) if one_line else lines[1] if len(lines) > 1 else None
    if body_first and all(tokens[i].kind == "string" for i in range(*body_first)):
        st.docstring_line = 0 if one_line else 1
    doc_tokens = set(range(*body_first)) if st.docstring_line >= 0 else set()
    line_starts = {a for a, _ in lines}
    # --- token by token ---
    significant = unary_run = 0
    for i, t in enumerate(tokens):
        k = t.kind
        if k != "newline":
            significant += 1
            if significant == spec.MAX_TOKENS + 1:
                fail(t, "too_many_tokens", P_LIMIT)
        prev = tokens[i - 1].kind if i else "newline"
        if k == "number" and len(t.text) > spec.MAX_NUMBER_CHARS:
            fail(t, "number_too_long", P_LIMIT)
        if k in PREFIX_OPS and (k == "not" or prev not in OPERAND_END):
            unary_run += 1
            if unary_run == spec.MAX_NESTING + 1:
                fail(t, "too_many_prefix_operators", P_LIMIT)
        else:
            unary_run = 0
        enc = enclosing[i]
        in_call = enc >= 0 and (is_call[enc] or enc == st.header_open)
        if k == "bad-keyword":
            fail(t, spec.BAD_KEYWORDS[t.text], keyword=t.text)
        elif k == "bad-op":
            fail(t, "bad_operator", op=t.text)
        elif k == "string":
            if t.prefix not in ("", "r", "u"):
                fail(t, "string_prefix")
            elif i not in doc_tokens:
                fail(t, "string_outside_docstring")
        elif k == ".":
            ok = (prev == "name" and tokens[i - 1].text in spec.NAMESPACES and i + 1 < len(tokens)
                  and tokens[i + 1].kind == "name" and (i < 2 or tokens[i - 2].kind != "."))  # not np.math.sin
            if not ok:
                fail(t, "attribute")
        elif k == "," and not in_call:
            fail(t, "tuple_comma")
        elif (k == "=" or k in spec.AUG_ASSIGN) and enc >= 0:
            fail(t, "assignment_in_brackets")
        elif k == ":" and i != st.header_colon:
            fail(t, "colon")
        elif k in ("*", "**") and prev not in OPERAND_END:
            fail(t, "star")
        elif k == "def" and i != 0:
            fail(t, "nested_def")
        elif k == "if" and i in line_starts:
            fail(t, "if_statement")
    return st, errors


def first_error(errors: list[RuleError]) -> RuleError | None:
    return min(errors) if errors else None
