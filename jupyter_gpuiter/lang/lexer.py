"""The reference lexer: source text -> tokens, or the first lexical error. Plain Python, obviously right.

It defines what the traditional compiler's DFA lexer must reproduce token for token. Lexing stops at
the first lexical error (bad character, unterminated string, malformed number, stray backslash,
non-ASCII outside comments and strings, unmatched `)`): what follows an error is never looked at.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import spec

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
_OPERATOR_RE = re.compile("|".join(re.escape(o) for o in spec.OPERATORS))
# the common tokens in one match (blanks, a whole name not opening a string, an operator that is not a
# number's point); anything else takes the character-by-character branches, which define the tokens
_COMMON_RE = re.compile(r"(?P<blank>[ \t\f]+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_'\"])"
                        r"|(?!\.[0-9])(?P<op>" + _OPERATOR_RE.pattern + ")")
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
class LexError:
    kind: str
    line: int
    col: int
    message: str


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


def bom_message(at_start: bool) -> str:
    """The error for U+FEFF outside comments and strings (CPython's compile() rejects it in a str too)."""
    if at_start:
        return ("the text starts with a byte-order mark (U+FEFF), which CPython's compile() rejects in a str "
                "too: read the file with encoding='utf-8-sig', which drops it, as Python does when it runs a file")
    return "invalid character U+FEFF (a zero-width no-break space or byte-order mark): delete it"


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
            return None, LexError("syntax", 0, j, f"invalid character {c!r} in a string")
        if c == "\\":
            if not raw and j + 1 < len(src) and src[j + 1] in "xuUN":
                return None, LexError("unsupported", 0, j, "escapes \\x \\u \\U \\N are not supported in docstrings")
            if j + 1 < len(src) and is_control(src[j + 1]):
                return None, LexError("syntax", 0, j + 1, f"invalid character {src[j + 1]!r} in a string")
            j += 2
            continue
        if src.startswith(close, j):
            return j + len(close), None
        if c == "\n" and not triple:
            break
        j += 1
    return None, LexError("syntax", 0, i, "unterminated string")


def tokenize(source: str) -> tuple[list[Token], LexError | None]:
    """Tokens of `source` (with a "newline" token ending each logical line) and the first lexical error."""
    src = normalize_newlines(source)
    tokens: list[Token] = []
    line, line_start, depth, i = 1, 0, 0, 0

    def tok(kind, start, end, prefix=""):
        tokens.append(Token(kind, src[start:end], start, line, start - line_start + 1, prefix))

    def err(kind, at, message):
        return tokens, LexError(kind, line, at - line_start + 1, message)

    def string(start, quote_at, prefix):
        stop, e = _string_end(src, quote_at, src[quote_at], "r" in prefix)
        if e:  # locate the error: it may lie on a later line of a triple-quoted string
            at = start if e.message == "unterminated string" else e.col
            ln, ls = line + src.count("\n", start, at), line_start
            if ln != line:
                ls = src.rindex("\n", start, at) + 1
            return start, line, line_start, LexError(e.kind, ln, at - ls + 1, e.message)
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
                        return err("syntax", i, "unmatched ')'")
                    depth -= 1
                elif op == "(":
                    depth += 1
                tokens.append(Token(op if op in spec.TOK else "bad-op", op, i, line, i - line_start + 1))
            i = end
            continue
        c = src[i]
        if c in _CONTROL_CHARS:
            return err("syntax", i, f"invalid character {c!r}")
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
                return err("syntax", bad.start(), f"invalid character {bad.group()!r} in a comment")
            i = end
        elif c == "\\":
            if i + 1 < len(src) and src[i + 1] == "\n":
                i += 2
                line, line_start = line + 1, i
            else:
                return err("syntax", i, "a backslash must end the line (line continuation)")
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
                return err("unsupported", i, "complex numbers are not supported")
            if end < len(src) and (src[end] in _NAME_CHARS or src[end] == "."):
                return err("syntax", i, f"invalid number literal {src[i:end + 1]!r}")
            tok("number", i, end)
            i = end
        elif c in "'\"":
            i, line, line_start, e = string(i, i, "")
            if e:
                return tokens, e
        elif c == "\ufeff":
            return err("unsupported", i, bom_message(i == 0))
        elif ord(c) > 127:
            return err("unsupported", i, f"non-ASCII character {c!r}: names and operators must be ASCII")
        else:
            # every operator matched as a common token above (a point before a digit is a number's)
            return err("syntax", i, f"invalid character {c!r}")
    if tokens and tokens[-1].kind != "newline":
        tok("newline", i, i)
    return tokens, None
