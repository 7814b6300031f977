"""Pass 2, rules: the token-level rules of lang/rules.py as tensor programs over tokens [B, T].

Brackets (depth by prefix sums, the innermost open paren by a batched binary search over
(level, position) keys), the file's shape (one `def` header, logical lines, indentation compared by
length and a hash of its bytes: exact.py compares the bytes of the pairs taken as equal), the
docstring, limits, and one check per token kind. Output: per program the first error key
(common.error_key) and the structure later passes use. O(B*T log T).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from ...lang import spec
from ...lang.diagnostics import DIAGNOSTICS as TABLE
from ...lang.diagnostics import ORDER
from ...lang.errors import KIND_CODES
from ...lang.rules import P_FILE, P_INDENT, P_LIMIT, P_TOKEN
from .batch_lexer import Tokens, pack_key
from .common import (
    FirstError,
    eq,
    error_key,
    first_true,
    gather,
    ne,
    positions,
    select,
    shift_left,
    shift_right,
    take,
)

K = spec.TOK
#: The rules' error codes: code -> diagnostic id (lang/diagnostics.py); 0 is none.
DIAGNOSTICS = [
    None, "too_many_brackets", "unclosed_paren", "call_of_non_name", "empty_source", "def_first",
    "too_many_parameters", "bad_parameter", "after_continuation", "unexpected_indent", "missing_body",
    "code_outside_function", "indentation_mismatch", "too_many_tokens", "too_many_prefix_operators",
    "bad_keyword", "bad_operator", "string_prefix", "string_outside_docstring", "attribute", "tuple_comma",
    "assignment_in_brackets", "colon", "star", "nested_def", "if_statement", "number_too_long",
]
#: The code of a bad keyword: which keyword (and so which diagnostic of spec.BAD_KEYWORDS) is read from
#: the source on the host.
BAD_KEYWORD = "bad_keyword"
MSG = {d: i for i, d in enumerate(DIAGNOSTICS) if d}
# codes rank the errors of one kind at one token and priority as the serial compiler does: by the table's order
_ORDERED = [ORDER["keyword_loop"] if d == BAD_KEYWORD else ORDER[d] for d in DIAGNOSTICS[1:]]
assert _ORDERED == sorted(_ORDERED)
assert len(spec.TOKEN_KINDS) <= 256  # check() compares kinds as bytes


def kind_of(ident: str) -> str:
    return "unsupported" if ident == BAD_KEYWORD else TABLE[ident].kind


# every (priority, kind code, message id) a rule may fail with, for FirstError's ranks
CONSTANTS = tuple((p, KIND_CODES[kind_of(d)], m) for p in (P_FILE, P_INDENT, P_LIMIT, P_TOKEN)
                  for m, d in enumerate(DIAGNOSTICS) if d)
NAMESPACE_KEYS = [pack_key(n) for n in spec.NAMESPACES]
OPERAND_END = [K["name"], K["number"], K["string"], K["True"], K["False"], K[")"]]
INF = 1 << 30  # above every (depth, position) key: depths and positions are below 2^12


_MEMBERSHIP: dict = {}


def isin(x: torch.Tensor, values) -> torch.Tensor:
    """x in values, for token kinds and node types (non-negative, below the number of token kinds):
    one lookup in a cached boolean table."""
    key = (tuple(values), x.device)
    if key not in _MEMBERSHIP:
        table = torch.zeros(len(spec.TOKEN_KINDS), dtype=torch.bool, device=x.device)
        table[list(values)] = True
        _MEMBERSHIP[key] = table
    return take(_MEMBERSHIP[key], x)


def _back(x: torch.Tensor, n: int) -> torch.Tensor:
    """x[:, i - n] at i (zero/False before the row starts)."""
    return torch.nn.functional.pad(x, (n, 0))[:, : x.shape[1]]


def _at_first(rows: torch.Tensor, T: int) -> torch.Tensor:
    """[B, T] mask of the first token of the rows where `rows` [B]."""
    return torch.nn.functional.pad(rows[:, None], (0, T - 1))


@dataclass
class Structure:
    """What later passes need: logical lines, brackets, the header, the docstring. Integers are int32
    (error keys int64)."""

    valid: torch.Tensor  # [B, T] token exists
    line_id: torch.Tensor  # [B, T] logical line of each token
    depth: torch.Tensor  # [B, T] open parens before the token (for `(`: outside it)
    enclosing: torch.Tensor  # [B, T] innermost open `(` around the token, or -1
    is_call: torch.Tensor  # [B, T] `(` that opens a call's arguments (and a token parse must reject: see the end of check)
    header_open: torch.Tensor  # [B]
    header_close: torch.Tensor  # [B]
    header_colon: torch.Tensor  # [B]
    one_line: torch.Tensor  # [B]
    docstring: torch.Tensor  # [B, T] tokens of the docstring line
    error: torch.Tensor  # [B] first error key, NO_ERROR if none
    # [B, T] at line-start tokens whose indentation was taken as the first body line's (same length
    # and hash): where that line's indentation starts (exact.py compares the bytes); else -1
    indent_like: torch.Tensor


def check(tk: Tokens, complete: torch.Tensor) -> Structure:
    kind = tk.kind
    T = kind.shape[1]
    pos = positions(kind)
    valid = pos < tk.count[:, None]
    errors = FirstError(tk.line, tk.col, valid, CONSTANTS)

    def fail(mask, ident, priority=P_TOKEN):
        errors.at_tokens(mask, priority, KIND_CODES[kind_of(ident)], MSG[ident])

    # kinds as bytes for the comparisons (a quarter of the memory traffic; lookups take int32 indices)
    kind8 = kind.to(torch.uint8)  # (spec has fewer than 256 token kinds: asserted below the messages)
    prev = shift_right(kind, K["newline"])
    prev8 = shift_right(kind8, K["newline"])
    nxt8 = shift_left(kind8, K["newline"])
    is_open, is_close = eq(kind8, K["("]), eq(kind8, K[")"])
    delta = is_open.int() - is_close.int()
    depth_after = delta.cumsum(1, dtype=torch.int32)
    depth = depth_after - delta
    # brackets
    operand_before = isin(prev, OPERAND_END)
    is_call = is_open & eq(prev8, K["name"])
    fail(is_open & operand_before & ~is_call, "call_of_non_name")
    fail(is_open & (depth_after > spec.MAX_NESTING), "too_many_brackets", P_LIMIT)
    # padding (kind 0) keeps the final depth, so the suffix may run past the last token
    suffix_min = shift_left(depth_after, INF).flip(1).cummin(1).values.flip(1)
    fail(is_open & (suffix_min >= depth_after) & complete[:, None], "unclosed_paren")
    level_key = select(is_open, depth_after * (T + 1) + pos, INF).sort(1).values
    level = depth * (T + 1)
    found = torch.searchsorted(level_key, level + pos, out_int32=True)
    # the last key below the token's own: an open at its depth iff it lies in [level, level + pos);
    # keys of deeper opens (and INF, and level_key[0] when found is 0) lie above, none below level
    # reaches depth 0 (opens have depth_after >= 1)
    at = gather(level_key, found - 1) - level
    enclosing = at | ((at | (pos - 1 - at)) >> 31)  # -1 outside [0, pos)

    # the file: a `def` header, then its body
    is_nl = eq(kind8, K["newline"])
    line_id = is_nl.cumsum(1, dtype=torch.int32) - is_nl.int()
    line_start_tok = valid & ~is_nl & shift_right(is_nl, True)
    first_end = first_true(is_nl)
    first_end = torch.where(first_end >= 0, first_end, tk.count)
    empty = (tk.count == 0) & complete  # (no token before a lexical error: that error stands)
    errors.add_rows(empty, error_key(1, 1, P_FILE, KIND_CODES[kind_of("empty_source")], MSG["empty_source"]))
    is_def0 = kind[:, 0] == K["def"]
    fail(_at_first(~is_def0, T), "def_first", P_FILE)
    in_first = pos < first_end[:, None]
    header_open = torch.where(is_def0, first_true(is_open & in_first), -1)
    opened = torch.where(header_open >= 0, header_open, T)
    closes = is_close & in_first & ~depth_after.bool() & (pos > opened[:, None])
    header_close = first_true(closes)
    header_end = torch.where(header_close >= 0, header_close, torch.where(header_open >= 0, first_end, -1))
    after = header_close + 1
    header_colon = torch.where((header_close >= 0) & (after < first_end) & (gather(kind, after) == K[":"]), after, -1)
    in_header = (pos > header_open[:, None]) & (pos < header_end[:, None])  # header_end is -1 without one
    is_param = in_header & eq(kind8, K["name"]) & eq(enclosing, header_open[:, None])
    n_params = is_param.cumsum(1, dtype=torch.int32)
    fail(is_param & eq(n_params, spec.MAX_PARAMS + 1), "too_many_parameters", P_LIMIT)
    fail(in_header & ~is_param & ne(kind8, K[","]), "bad_parameter")
    one_line = (header_colon >= 0) & (header_colon + 1 < first_end)

    # indentation, compared by length and a hash of the bytes between the line start (or the last form
    # feed after it: CPython's column 0) and the first token (exact.py compares the bytes of the lines
    # taken as matching)
    indent_len = tk.start - tk.indent_start
    indent_hash = tk.indent_hash
    lid = line_id
    body_first = first_true(line_start_tok & eq(lid, 1))
    bi_len = gather(indent_len, body_first)
    bi_hash = gather(indent_hash, body_first)
    ls = tk.line_start
    after_bs = (ls >= 2) & (gather(tk.data_padded, ls - 2) == ord("\\"))
    ol = one_line[:, None]
    fail(line_start_tok & after_bs, "after_continuation", P_INDENT)
    ok_bs = line_start_tok & ~after_bs
    indented = indent_len.bool()  # lengths are >= 0 at tokens
    fail(ok_bs & ~lid.bool() & indented, "unexpected_indent", P_INDENT)
    fail(ok_bs & eq(lid, 1) & ~indented & ~ol, "missing_body", P_INDENT)
    fail(ok_bs & lid.bool() & ~indented & ((lid > 1) | ol), "code_outside_function", P_FILE)
    mismatch = ol | ne(indent_len, bi_len[:, None]) | ne(indent_hash, bi_hash[:, None])
    deeper = ol | (indent_len > bi_len[:, None])
    compared = ok_bs & indented & ((lid >= 2) | (ol & lid.bool()))
    later = compared & mismatch
    fail(later & deeper, "unexpected_indent", P_INDENT)
    fail(later & ~deeper, "indentation_mismatch", P_INDENT)
    indent_like = (gather(tk.indent_start, body_first)[:, None] + 1).mul(compared & ~mismatch).sub_(1)
    n_lines = is_nl.sum(1, dtype=torch.int32)
    fail(_at_first(complete & (n_lines == 1) & ~one_line & is_def0, T), "missing_body")

    # the docstring: the first body line made only of strings
    is_str = eq(kind8, K["string"])
    doc_range = (ol & (pos > header_colon[:, None]) & ~lid.bool() | ~ol & eq(lid, 1)) & valid & ~is_nl
    # a row's any() as a uint8 maximum (several times cheaper on a CPU)
    doc_ok = doc_range.view(torch.uint8).amax(1).bool() & ~(doc_range & ~is_str).view(torch.uint8).amax(1).bool()
    docstring = doc_range & doc_ok[:, None]

    # token by token
    significant = (valid & ~is_nl).cumsum(1, dtype=torch.int32)
    fail(~is_nl & eq(significant, spec.MAX_TOKENS + 1), "too_many_tokens", P_LIMIT)
    fail(eq(kind8, K["number"]) & (tk.end - tk.start > spec.MAX_NUMBER_CHARS), "number_too_long", P_LIMIT)
    prefix = (eq(kind8, K["-"]) | eq(kind8, K["+"])) & ~operand_before | eq(kind8, K["not"])
    # the token that makes a run of MAX_NESTING + 1: a window of that many ends there, not one more
    n = spec.MAX_NESTING + 1
    if T >= n:
        count = prefix.cumsum(1, dtype=torch.int32)
        fail(eq(count - _back(count, n), n) & ~_back(prefix, n), "too_many_prefix_operators", P_LIMIT)
    enc_call = gather(is_call, enclosing) | eq(enclosing, header_open[:, None])
    in_call = (enclosing >= 0) & enc_call
    prev_key = shift_right(tk.key, 0)
    fail(eq(kind8, K["bad-keyword"]), BAD_KEYWORD)
    fail(eq(kind8, K["bad-op"]), "bad_operator")
    fail(is_str & tk.prefix_bad, "string_prefix")
    fail(is_str & ~tk.prefix_bad & ~docstring, "string_outside_docstring")
    is_namespace = functools.reduce(torch.logical_or, [eq(prev_key, k) for k in NAMESPACE_KEYS])  # two keys: no isin sort
    dot_ok = eq(prev8, K["name"]) & is_namespace & eq(nxt8, K["name"]) & ~eq(shift_right(prev8, K["newline"]), K["."])
    fail(eq(kind8, K["."]) & ~dot_ok, "attribute")
    fail(eq(kind8, K[","]) & ~in_call, "tuple_comma")
    assigning = eq(kind8, K["="]) | isin(kind, [K[a] for a in spec.AUG_ASSIGN])
    fail(assigning & (enclosing >= 0), "assignment_in_brackets")
    fail(eq(kind8, K[":"]) & ne(pos, header_colon[:, None]), "colon")
    star = eq(kind8, K["*"]) | eq(kind8, K["**"])
    fail(star & ~operand_before, "star")
    fail(eq(kind8, K["def"]) & pos.bool(), "nested_def")
    fail(eq(kind8, K["if"]) & line_start_tok, "if_statement")

    # One of CPython's syntax errors that lang/rules.py does not see: a source that ends in a backslash
    # continuation (lex's ends_continued; CPython: unexpected EOF). In the serial compiler it comes after
    # every lexical and token-rule error and before the tree walk's, and after CPython's syntax errors in
    # earlier statements, which is the order of parse's errors on the rows parse gets (those without a
    # lexical or rules error). So rules leaves it to parse, marking one token where st.is_call: the last
    # statement's last token that parse keeps (not math.NAME's `.NAME`). Parse classes it as a call's
    # `(`, which can neither start a statement nor end one, so the token is rejected and the error is at
    # its statement's first line (a docstring holding the token is cleared for the row, so that it is
    # parsed). (A form feed that ends a line's indentation needs no such mark: lex measures indentation
    # from the last form feed, CPython's column 0, as lang/rules.py does.)
    last = tk.count - 2  # the last token before the final NEWLINE
    last = last - 2 * eq(gather(kind, last - 1), K["."]).int()
    eof = complete & tk.ends_continued & (last >= 0)
    at = torch.where(eof, last, T)[:, None].long()  # T: none
    mark = torch.zeros((kind.shape[0], T + 1), dtype=torch.bool, device=kind.device)
    is_call = is_call | mark.scatter_(1, at, torch.ones_like(at, dtype=torch.bool))[:, :T]
    docstring = docstring & ~(eof & gather(docstring, last))[:, None]

    return Structure(valid, line_id, depth, enclosing, is_call, header_open, header_close, header_colon, one_line,
                     docstring, errors.key, indent_like)
