"""The traditional compiler's errors on the host: a pass's error code -> the CompileError, in the words
of the serial compiler.

Each program's first error leaves the device as a key whose low byte is a code (common.error_key):
the token rules' codes (batch_rules.DIAGNOSTICS), the lexer's (LEX_MSG_BASE + a dfa.LEX_ERRORS code), the
semantic pass's (semantic.MSG_BASE + an index into semantic.DIAGNOSTICS) and the parser's
(semantic.PARSE_SYNTAX). CODES maps every code to its diagnostic (lang/diagnostics.py), in this one
place. The device knows where an error is and which diagnostic it is, not the names in its message:
`compile_error` reads those fields from the source at the error, with the reference lexer, as the
serial compiler states them (a name, a character, an operator, a number's text, an argument count;
CPython's message for a syntax error of the parser). Three codes are families the source refines: a
bad keyword (which keyword: spec.BAD_KEYWORDS), a non-ASCII character (U+FEFF is a byte-order mark)
and an unknown name (followed by `.NAME` it is an unknown attribute of math. or np.).
"""

from __future__ import annotations

import re

from ...lang import spec
from ...lang.diagnostics import DIAGNOSTICS as TABLE
from ...lang.diagnostics import error
from ...lang.errors import KIND_CODES, CompileError
from ...lang.lexer import NAME_RE, OPERATOR_RE, bad_number_text, character_error, normalize_newlines, tokenize
from .. import serial
from . import batch_rules, dfa, semantic

LEX_MSG_BASE = 64  # lexical error codes in error keys: LEX_MSG_BASE + dfa code

#: code in an error key -> diagnostic id (batch_rules.BAD_KEYWORD: which keyword's is read from the source)
CODES: dict[int, str] = {
    **{code: ident for code, ident in enumerate(batch_rules.DIAGNOSTICS) if ident},
    **{LEX_MSG_BASE + code: ident for code, ident in dfa.LEX_ERRORS.items()},
    **{semantic.MSG_BASE + i: ident for i, ident in enumerate(semantic.DIAGNOSTICS)},
    semantic.PARSE_SYNTAX: "python_syntax",
}
assert len(batch_rules.DIAGNOSTICS) <= LEX_MSG_BASE and LEX_MSG_BASE + max(dfa.LEX_ERRORS) < semantic.MSG_BASE
assert semantic.PARSE_SYNTAX < 256  # (a message id is the key's low byte)
assert all(ident == batch_rules.BAD_KEYWORD or ident in TABLE for ident in CODES.values())

#: kind code of each lexical error code (0: none), for the device
LEX_KIND_CODES = [KIND_CODES[TABLE[dfa.LEX_ERRORS[c]].kind] if c else 0 for c in range(len(dfa.LEX_ERRORS) + 1)]

_CALLEE = ("unknown_function", "arity", "function_as_value", "variable_called", "constant_called")
# a name, or NAMESPACE.NAME, where blanks, comments and line continuations may part the three tokens: the
# source passed the token rules, so a `.` after a name is an attribute of math. or np. (A comment runs
# to its line's end, so that a failed match cannot backtrack through its `#`s.)
_GAP = r"(?:[ \t\f\n]|\\\n|#[^\n]*(?![^\n]))*"
_DOTTED = re.compile(rf"([A-Za-z_][A-Za-z0-9_]*)(?:{_GAP}\.{_GAP}([A-Za-z_][A-Za-z0-9_]*))?")


def compile_error(code: int, source: str, line: int, col: int) -> CompileError:
    """The CompileError of the error with `code` at 1-based (line, col) of `source`."""
    ident = CODES[code]
    if ident == "python_syntax":
        return error(ident, line, col, source, message=serial.parser_message(source))
    src = normalize_newlines(source)
    at = _offset(src, line, col)
    fields: dict = {}
    if ident in ("invalid_character", "non_ascii"):
        ident, fields = character_error(src[at], at == 0)
    elif ident in ("invalid_character_in_string", "invalid_character_in_comment"):
        fields = {"char": src[at]}
    elif ident == "invalid_number":
        fields = {"text": bad_number_text(src, at)}
    elif ident == batch_rules.BAD_KEYWORD:
        word = NAME_RE.match(src, at).group()
        ident, fields = spec.BAD_KEYWORDS[word], {"keyword": word}
    elif ident == "bad_operator":
        fields = {"op": OPERATOR_RE.match(src, at).group()}
    elif ident in ("duplicate_parameter", "unknown_name_augmented"):
        fields = {"name": NAME_RE.match(src, at).group()}
    elif ident == "unknown_name" or ident in _CALLEE:
        m = _DOTTED.match(src, at)  # the name, or math.NAME / np.NAME
        name = m.group(2) or m.group(1)
        if ident == "unknown_name" and m.group(2):
            ident, fields = "unknown_attribute", {"namespace": m.group(1), "name": name}
        elif ident == "arity":
            fields = serial.arity_fields(name, _arguments(tokenize(src[m.end():])[0]))
        else:
            fields = {"name": name}
    return error(ident, line, col, source, **fields)


def _offset(src: str, line: int, col: int) -> int:
    """The index in `src` of 1-based (line, col), col counting characters."""
    start = 0
    for _ in range(line - 1):
        start = src.index("\n", start) + 1
    return start + col - 1


def _arguments(tokens: list) -> int:
    """How many arguments the call whose `(` is tokens[0] has (a trailing comma adds none)."""
    n, depth, pending = 0, 0, False
    for t in tokens:
        if t.kind == "(":
            depth += 1
            if depth == 1:
                continue
        elif t.kind == ")":
            depth -= 1
            if depth == 0:
                break
        if depth == 1 and t.kind == ",":
            n, pending = n + pending, False
        else:
            pending = True
    return n + pending
