"""The reference lexer: source text -> tokens, or the first lexical error. Plain Python, obviously right.

It defines what the traditional compiler's DFA lexer must reproduce token for token. Lexing stops at
the first lexical error (bad character, unterminated string, malformed number, stray backslash,
non-ASCII outside comments and strings, unmatched `)`): what follows an error is never looked at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import spec
from .diagnostics import Reported

_DIGITS = r"[0-9](?:_?[0-9])*"
_POINT_FLOAT = rf"(?:(?:{_DIGITS})?\.{_DIGITS}|{_DIGITS}\.)"
NUMBER_RE = re.compile(
    rf"0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+"
    rf"|(?:{_POINT_FLOAT}|{_DIGITS})[eE][+-]?{_DIGITS}|{_POINT_FLOAT}"
    rf"|[1-9](?:_?[0-9])*|0(?:_?0)*"
)
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: String prefixes: the allowed ones, and those that lex as strings only to be rejected.
GOOD_PREFIXES = {"", "r", "u"}
BAD_PREFIXES = {"b", "f", "rb", "br", "rf", "fr"}
_NAME_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_DIGIT_CHARS = set("0123456789")
_WHITESPACE = " \t\f"
_CONTROL_CHARS = frozenset(chr(i) for i in [*range(32), 127]) - set("\t\n\f")
_CONTROL_RE = re.compile("[" + re.escape("".join(sorted(_CONTROL_CHARS))) + "]")
# the operators longest first: the first alternative that matches is the longest (maximal munch)
OPERATOR_RE = re.compile("|".join(re.escape(o) for o in spec.OPERATORS))
# the common tokens in one match (blanks, a whole name not opening a string, an operator that is not a
# number's point); anything else takes the character-by-character branches, which define the tokens
_COMMON_RE = re.compile(r"(?P<blank>[ \t\f]+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_'\"])"
                        r"|(?!\.[0-9])(?P<op>" + OPERATOR_RE.pattern + ")")
_KEYWORD_KIND = {**{w: "bad-keyword" for w in spec.BAD_KEYWORDS}, **{w: w for w in spec.KEYWORDS}}


@dataclass
class Token:
    kind: str  # one of spec.TOKEN_KINDS
    text: str
    start: int  # character offset in the newline-normalised source
    line: int
    col: int  # 1-based character column
    prefix: str = ""  # string tokens: the lower-cased prefix


@dataclass
class LexError(Reported):
    id: str  # a diagnostic id (lang/diagnostics.py)
    line: int
    col: int
    fields: dict = field(default_factory=dict)


def normalize_newlines(source: str) -> str:
    return source.replace("\r\n", "\n").replace("\r", "\n")


def number_value(text: str) -> float:
    """The float64 value of a number literal (ints too big for a float become inf)."""
    t = text.replace("_", "").lower()
    if t[:2] in ("0x", "0o", "0b"):
        n = int(t, 0)
    elif any(c in t for c in ".e"):
        return float(t)
    else:
        n = int(t)
    try:
        return float(n)
    except OverflowError:
        return float("inf")


def character_error(c: str, at_start: bool) -> tuple[str, dict]:
    """(diagnostic id, fields) of a character outside comments and strings that starts no token:
    non-ASCII, U+FEFF (which CPython's compile() rejects in a str too) or an invalid character."""
    if c == "\ufeff":
        return ("byte_order_mark_at_start" if at_start else "byte_order_mark"), {}
    return ("non_ascii" if ord(c) > 127 else "invalid_character"), {"char": c}


def bad_number_text(src: str, i: int) -> str:
    """The text an invalid number literal starting at src[i] is reported with: the longest number there
    and the character that spoils it."""
    return src[i:NUMBER_RE.match(src, i).end() + 1]


def is_control(c: str) -> bool:
    """ASCII control characters other than tab, newline and form feed are invalid everywhere."""
    return c in _CONTROL_CHARS


def _string_end(src: str, i: int, quote: str, raw: bool) -> tuple[int | None, LexError | None]:
    """Index after the string whose opening quote(s) start at i, or the lexical error inside it."""
    triple = src.startswith(quote * 3, i)
    close = quote * 3 if triple else quote
    j = i + len(close)
    while j < len(src):
        c = src[j]
        if is_control(c):
            return None, LexError("invalid_character_in_string", 0, j, {"char": c})
        if c == "\\":
            if not raw and j + 1 < len(src) and src[j + 1] in "xuUN":
                return None, LexError("string_escape", 0, j)
            if j + 1 < len(src) and is_control(src[j + 1]):
                return None, LexError("invalid_character_in_string", 0, j + 1, {"char": src[j + 1]})
            j += 2
            continue
        if src.startswith(close, j):
            return j + len(close), None
        if c == "\n" and not triple:
            break
        j += 1
    return None, LexError("unterminated_string", 0, i)


def tokenize(source: str) -> tuple[list[Token], LexError | None]:
    """Tokens of `source` (with a "newline" token ending each logical line) and the first lexical error."""
    src = normalize_newlines(source)
    tokens: list[Token] = []
    line, line_start, depth, i = 1, 0, 0, 0

    def tok(kind, start, end, prefix=""):
        tokens.append(Token(kind, src[start:end], start, line, start - line_start + 1, prefix))

    def err(ident, at, **fields):
        return tokens, LexError(ident, line, at - line_start + 1, fields)

    def string(start, quote_at, prefix):
        stop, e = _string_end(src, quote_at, src[quote_at], "r" in prefix)
        if e:  # locate the error: it may lie on a later line of a triple-quoted string
            at = start if e.id == "unterminated_string" else e.col
            ln, ls = line + src.count("\n", start, at), line_start
            if ln != line:
                ls = src.rindex("\n", start, at) + 1
            return start, line, line_start, LexError(e.id, ln, at - ls + 1, e.fields)
        tok("string", start, stop, prefix)
        ln, ls = line, line_start
        if "\n" in src[start:stop]:
            ln += src.count("\n", start, stop)
            ls = src.rindex("\n", start, stop) + 1
        return stop, ln, ls, None

    n = len(src)
    while i < n:
        common = _COMMON_RE.match(src, i)
        if common is not None:
            end = common.end()
            group = common.lastgroup
            if group == "name":
                word = common.group()
                tokens.append(Token(_KEYWORD_KIND.get(word, "name"), word, i, line, i - line_start + 1))
            elif group == "op":
                op = common.group()
                if op == ")":
                    if depth == 0:
                        return err("unmatched_paren", i)
                    depth -= 1
                elif op == "(":
                    depth += 1
                tokens.append(Token(op if op in spec.TOK else "bad-op", op, i, line, i - line_start + 1))
            i = end
            continue
        c = src[i]
        if c in _CONTROL_CHARS:
            return err("invalid_character", i, char=c)
        if c == "\n":
            if depth == 0 and tokens and tokens[-1].kind != "newline":
                tok("newline", i, i + 1)
            i += 1
            line, line_start = line + 1, i
        elif c in _WHITESPACE:
            i += 1
        elif c == "#":
            end = src.find("\n", i)
            end = len(src) if end < 0 else end
            bad = _CONTROL_RE.search(src, i, end)
            if bad:
                return err("invalid_character_in_comment", bad.start(), char=bad.group())
            i = end
        elif c == "\\":
            if i + 1 < len(src) and src[i + 1] == "\n":
                i += 2
                line, line_start = line + 1, i
            else:
                return err("stray_backslash", i)
        elif c in _NAME_CHARS and c not in _DIGIT_CHARS:
            m = NAME_RE.match(src, i)
            word = m.group()
            end = m.end()
            if end < len(src) and src[end] in "'\"" and word.lower() in GOOD_PREFIXES | BAD_PREFIXES:
                i, line, line_start, e = string(i, end, word.lower())
                if e:
                    return tokens, e
                continue
            kind = word if word in spec.KEYWORDS else "bad-keyword" if word in spec.BAD_KEYWORDS else "name"
            tok(kind, i, end)
            i = end
        elif c in _DIGIT_CHARS or (c == "." and i + 1 < len(src) and src[i + 1] in _DIGIT_CHARS):
            m = NUMBER_RE.match(src, i)
            end = m.end()
            if end < len(src) and src[end] in "jJ":
                return err("complex_number", i)
            if end < len(src) and (src[end] in _NAME_CHARS or src[end] == "."):
                return err("invalid_number", i, text=bad_number_text(src, i))
            tok("number", i, end)
            i = end
        elif c in "'\"":
            i, line, line_start, e = string(i, i, "")
            if e:
                return tokens, e
        else:
            # non-ASCII, U+FEFF or an invalid character: every operator matched as a common token above
            # (a point before a digit is a number's)
            ident, fields = character_error(c, i == 0)
            return err(ident, i, **fields)
    if tokens and tokens[-1].kind != "newline":
        tok("newline", i, i)
    return tokens, None
