"""A quick, conservative front check: True or False when a source certainly passes the reference lexer and
the token rules (lang/lexer.py, lang/rules.py) — whether its body opens with a docstring — else None.

It admits a common subset only: a one-line `def name(params):` header at the start of a line, a body at one
indentation (spaces and tabs), at most an unprefixed docstring without backslashes, names, numbers without
`_` (decimal, and the 0x/0o/0b forms), the language's operators, `math.`/`np.` attributes and comments; no
continuation backslash, form feed, string outside the docstring or non-ASCII outside comments and the
docstring. Within it, every
token rule is checked as rules.check does (a few more strictly), over token texts from one regex pass: no
Token objects. None means "not known": the caller runs the full lexer and rules, so every error is theirs.
tests/lang/test_quick.py holds it to that.
"""

from __future__ import annotations

import re

from . import spec
from .lexer import OPERATOR_RE

# a comment's character: no control character but tab, and no backslash (the token rules read a line after
# one that ends in a backslash, even in a comment, as a continuation)
_C = r"[^\x00-\x08\n-\x1f\x7f\\]"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_BLANK_LINES = rf"(?:[ \t]*(?:#{_C}*)?\n)*"
# a docstring's body: no backslash, no control character but tab (and newline in a triple-quoted one), and
# no closing quote(s) inside
_DOC = (r'"""(?:[^"\\\x00-\x08\x0b-\x1f\x7f]|"(?!""))*"""' r"|'''(?:[^'\\\x00-\x08\x0b-\x1f\x7f]|'(?!''))*'''"
        r'|"[^"\\\x00-\x08\n-\x1f\x7f]*"' r"|'[^'\\\x00-\x08\n-\x1f\x7f]*'")
_HEAD_RE = re.compile(
    rf"{_BLANK_LINES}def[ \t]+(?P<name>{_NAME})[ \t]*\([ \t]*(?P<params>{_NAME}(?:[ \t]*,[ \t]*{_NAME})*(?:[ \t]*,)?)?"
    rf"[ \t]*\)[ \t]*:[ \t]*(?:#{_C}*)?\n{_BLANK_LINES}(?P<indent>[ \t]+)(?=[^ \t\n#])"
    rf"(?:(?P<doc>{_DOC})[ \t]*(?:#{_C}*)?(?:\n|\Z))?")
# one token after blanks: a newline with the next line's indentation, a comment, a name, a number with
# whatever sticks to it (checked by _NUMBER_RE), an operator, or any other character (never admitted)
_TOKEN_RE = re.compile(rf"[ \t]*(\n[ \t]*|#{_C}*|{_NAME}|(?:[0-9]|\.[0-9])(?:[A-Za-z0-9_.]|(?<=[eE])[+-])*"
                       rf"|{OPERATOR_RE.pattern}|(?s:.))")
# the numbers admitted, each of which the reference lexer reads whole: no `_`, no integer with a leading zero
_NUMBER_RE = re.compile(r"[1-9][0-9]*|0|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+"
                        r"|0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+")

# token classes: up to CONSTANT no rule looks at the token but at a line start (IF); NAME to CLOSE end an
# operand; NAME and NS (`math`, `np`) make a `(` a call's
OTHER, IF, NAME, NS, NUMBER, CONSTANT, CLOSE, OPEN, COMMA, DOT, ASSIGN, STAR, PREFIX, NOT, REJECT = range(15)
_CLASS = {
    **{w: REJECT for w in spec.BAD_KEYWORDS}, **{o: REJECT for o in spec.BAD_OPS},
    **{o: OTHER for o in spec.BINARY_OPS}, **{o: ASSIGN for o in ["=", *spec.AUG_ASSIGN]},
    **{n: NS for n in spec.NAMESPACES},
    "def": REJECT, ":": REJECT, "True": CONSTANT, "False": CONSTANT, "(": OPEN, ")": CLOSE, ",": COMMA, ".": DOT,
    "*": STAR, "**": STAR, "+": PREFIX, "-": PREFIX, "not": NOT, "if": IF, "else": OTHER, "return": OTHER,
}
_NUMBERS: dict[str, int] = {}  # number literals admitted so far (most recur from edit to edit): NUMBER
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_KEYWORDS = frozenset(spec.KEYWORDS) | frozenset(spec.BAD_KEYWORDS)
_HEADER_TOKENS = 5  # def name ( ) :


def quick_check(src: str) -> bool | None:
    """For a newline-normalised source: whether its body opens with a docstring, when the reference lexer and
    token rules certainly find no error in it; None when this check cannot tell (or they would find one)."""
    head = _HEAD_RE.match(src)
    if head is None:
        return None
    params = head["params"]
    names = [p.strip() for p in params.split(",")] if params else []
    if names and not names[-1]:  # a trailing comma
        names.pop()
    if len(names) > spec.MAX_PARAMS or not _KEYWORDS.isdisjoint(names) or head["name"] in _KEYWORDS:
        return None
    doc = head["doc"] is not None
    header = _HEADER_TOKENS + len(names) + (params.count(",") if params else 0)
    body = _body(src[head.end():] if doc else src[head.start("indent"):], head["indent"])
    if body is None or not (body[1] or doc) or header + doc + body[0] > spec.MAX_TOKENS:
        return None
    return doc


def _body(text: str, indent: str) -> tuple[int, int] | None:
    """(significant tokens, logical lines) of the body after its docstring, every line at `indent`, or None
    unless each token certainly passes the rules."""
    get, name_start, numbers = _CLASS.get, _NAME_START, _NUMBERS
    line_start = "\n" + indent
    calls: list[bool] = []  # per open bracket: whether it is a call's (where commas belong)
    found = _TOKEN_RE.findall("\n" + text)
    tokens = iter(found)
    newline = None  # the newline token before the next logical line, if it is still to start
    prev = OTHER  # the previous token's class
    lines = skipped = prefixes = 0
    for t in tokens:
        k = get(t)
        if k is None:
            c = t[0]
            if c in name_start:
                k = NAME
            elif c == "\n" or c == "#":
                skipped += 1
                if c == "\n" and not calls:
                    newline = t
                continue
            else:
                k = numbers.get(t)
                if k is None:
                    if not (len(t) <= spec.MAX_NUMBER_CHARS and _NUMBER_RE.fullmatch(t)):
                        return None
                    if len(numbers) >= 4096:
                        numbers.clear()
                    k = numbers[t] = NUMBER
        if newline is not None:  # a logical line's first token
            if newline != line_start or k == IF:
                return None
            newline, prev = None, OTHER
            lines += 1
        if k > CONSTANT:
            if k >= PREFIX:
                if k == REJECT:
                    return None
                # (prefix operators in a row are limited: the count of all of them is at least the longest run)
                if k == NOT or not NAME <= prev <= CLOSE:
                    prefixes += 1
            elif k == OPEN:
                if NUMBER <= prev <= CLOSE:
                    return None
                calls.append(NAME <= prev <= NS)
                if len(calls) > spec.MAX_NESTING:
                    return None
            elif k == CLOSE:
                if not calls:
                    return None
                calls.pop()
            elif k == COMMA:
                if not calls or not calls[-1]:
                    return None
            elif k == ASSIGN:
                if calls:
                    return None
            elif k == STAR:
                if not NAME <= prev <= CLOSE:
                    return None
            else:  # DOT: only math.NAME and np.NAME, the name right after the point
                if prev != NS:
                    return None
                t = next(tokens, "")
                k = get(t)
                if not (k == NS or k is None and t[:1] in name_start):
                    return None
                k = NAME  # (a point after it is an error)
        prev = k
    if calls or prefixes > spec.MAX_NESTING:
        return None
    return len(found) - skipped, lines
