"""Pass 1, lex: bytes [B, L] -> tokens [B, T] (kind, byte span, line, col, name key and hash, number value).

The DFA of dfa.py runs over byte classes two bytes at a time: L/2 steps, each one int32 add and one
table lookup over the batch (L <= 8 KiB by the language's limits); the odd positions follow in one
vectorised lookup. Everything else is a few dozen O(B*L) tensor ops and O(B*T) ones after compaction,
with no Python loop over programs and no host synchronisation but the one read that sizes T (and the
number list, and the loops of parse and semantic; it also brings each row's token count, by which
regroup.py regroups rows for the later passes): per-byte facts (token start, boundary, error, escape,
paren, newline, number digit and digit value) are one int16 table lookup on the transition
index, counts are int16 or int32 prefix sums (one int64 one packs characters, newlines and number
fields), positions int16 where they fit (L < 2^14) and signs read by shifts rather than comparisons,
token ends come from one amax scatter per boundary stretch, line starts from a running maximum, and
token fields are read at the compacted token starts (int64 indices, converted once: on two threads a
gather beats an index_select on a flat int32 index); the Tokens' positions, lines, columns and kinds
are int32. Number values are worked out on the number tokens alone. On a CPU, index_select beats a
gather on an expanded table, and a full-mask `where` or a bool argmax is avoided.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ...lang import spec
from . import dfa
from .common import BIG, perfect_hash, select, signed64, take
from .floats import to_float64
from .pack import encode

_TABLES: dict = {}
# what a byte adds to the packed prefix count of lex (int64): characters (bits 0-13) and newlines (14-27) of
# the source, absolute (at most 8,194 each); and, only ever differenced over one token (each field holds
# any token shorter than 2,048 bytes), a number's fraction digits (28-38), the exponent's minus (39),
# exponent digits (40-50), all its digits (51-61) and its base (62-63: 0 decimal, 1 hex, 2 octal, 3
# binary, added by the prefix)
_Q_NL, _Q_FRAC, _Q_MINUS, _Q_EXP, _Q_DIG, _Q_BASE = 14, 28, 39, 40, 51, 62
_M14, _M11 = (1 << 14) - 1, (1 << 11) - 1
_BASES = (10, 16, 8, 2)
_DIGIT = 1 << _Q_DIG
_NUMBER_CODES = {"n_zero1": _DIGIT, "n_zero": _DIGIT, "n_lz": _DIGIT, "n_int": _DIGIT, "n_hex": _DIGIT, "n_oct": _DIGIT,
                 "n_bin": _DIGIT, "n_frac": _DIGIT + (1 << _Q_FRAC), "n_exp_dig": _DIGIT + (1 << _Q_EXP),
                 "n_hex_pfx": 1 << _Q_BASE, "n_oct_pfx": 2 << _Q_BASE, "n_bin_pfx": 3 << _Q_BASE}
# the base code of a digit by the state it leads to (facts' bits 12-13)
_DIGIT_BASE = {"n_hex": 1, "n_oct": 2, "n_bin": 3}
# a literal's digits (a base prefix's 0 counted) by base code, at most, for its value to be worked out on
# the device: every digit's weight base^k stays below 2^63, with k < 32 (and a decimal one's mantissa
# and exponent, packed as one integer, too)
_MAX_DIGITS = (18, 15, 21, 32)
_BAD_ESCAPES = set(b"xuUN")
# per-byte facts, one int16 per transition: flags in bits 0-6 (placed so that `facts & F_DIGIT` sums to
# a count and the others scaled by their bit fit an int32), a number digit's value in bits 8-11 and its
# base code in bits 12-13, and the paren depth change as a signed 2-bit field in bits 14-15 (so
# `facts >> 14` is it)
F_DIGIT, F_BOUNDARY, F_ERR, F_ESC, F_START, F_NL, F_LF = (1 << k for k in range(7))
_LF_SHIFT = F_LF.bit_length() - 1
# the normalised input as packed int64 words: byte (bits 0-8, EOF 256), class * S (9-21), and in the high
# int32 half class * C * S (bits 32-50), so that the DFA reads both halves as int32 views
_X_CS, _X_CCS = 9, 32


def _build_tables() -> dict:
    """Per-transition tables [C * S] (byte class major) and per-byte tables, as Python lists.

    Bytes with the same column in every table, the same newline and UTF-8 continuation status and
    the same digit value form one class (about 60 of the 257 inputs), which keeps the two-byte
    table [C * C * S] small."""
    S, N = len(dfa.STATES), dfa.N_INPUTS
    nxt, flags = dfa.build_tables()
    kinds = [spec.TOK.get(dfa.token_kind_of_state(s) or "none", 0) for s in dfa.STATES]
    kinds = [k if s not in dfa.NUMBER_STATES or s in dfa.NUMBER_ACCEPTING else 0 for k, s in zip(kinds, dfa.STATES)]
    in_token = [dfa.token_kind_of_state(s) is not None or s in dfa.NUMBER_STATES or s.startswith(("open", "s_", "t_"))
                for s in dfa.STATES]
    esc = {dfa.STATE[s] for s in dfa.ESCAPE_STATES}
    number = {dfa.STATE[s]: v for s, v in _NUMBER_CODES.items()}
    digit_base = {dfa.STATE[s]: v for s, v in _DIGIT_BASE.items()}
    paren = {dfa.STATE["op:("]: 1, dfa.STATE["op:)"]: -1}
    # the kind of a token ending in each state; NEWLINE tokens are the single bytes that leave the DFA
    # in `nl` (or `eof`) outside parens
    line_end = {dfa.STATE["nl"], dfa.STATE["eof"]}
    cols: dict = {}
    for x in range(N):
        b = x & 255
        byte = (b == 10, (b & 0xC0) != 0x80, int(chr(b), 16) if chr(b) in dfa.HEX else 0)
        col = [byte]
        for s in range(S):
            n, f = nxt[s * N + x], flags[s * N + x]
            minus = (s, x) == (dfa.STATE["n_exp"], 45)
            col.append((n, f, s in esc and x in _BAD_ESCAPES, number.get(n, 0) + (minus << _Q_MINUS)))
        cols.setdefault(tuple(col), []).append(x)
    classes = list(cols)
    byte_class = [0] * N
    for c, col in enumerate(classes):
        for x in cols[col]:
            byte_class[x] = c
    C = len(classes)
    per = {k: [] for k in ("next", "flags", "facts", "q", "kind", "token_kind")}
    for col in classes:
        (lf, char, digit), col = col[0], col[1:]
        for n, f, bad, num in col:
            start = bool(f & 1)
            is_digit = num >> _Q_DIG & 1
            v = (F_START * start | F_BOUNDARY * (start or not in_token[n]) | F_ERR * (f >> 1 & 15 != 0) | F_ESC * bad
                 | F_NL * (n == dfa.STATE["nl"]) | F_LF * lf | F_DIGIT * is_digit
                 | is_digit * (digit << 8 | digit_base.get(n, 0) << 12) | ((paren.get(n, 0) if start else 0) & 3) << 14)
            per["next"].append(n)
            per["flags"].append(f)
            per["facts"].append(v - (1 << 16) if v >= 1 << 15 else v)
            per["q"].append(signed64(num + (lf << _Q_NL) + char))
            per["kind"].append(kinds[n])
            per["token_kind"].append(spec.TOK["newline"] if n in line_end else kinds[n])
    nxt_cs = np.asarray(per["next"]).reshape(C, S)
    per["pair"] = nxt_cs[:, nxt_cs].transpose(1, 0, 2).ravel()  # [c1, c2, s]: next[c2, next[c1, s]]
    packed = [x | byte_class[x] * S << _X_CS | byte_class[x] * C * S << _X_CCS for x in range(N)]
    per["input"] = [packed[10 if x == 13 else x] for x in range(N)]  # a lone CR reads as LF
    per["C"] = C
    # the transition on the end of the file from `cont`: the source ends in a backslash continuation
    per["eof_cont"] = byte_class[dfa.EOF_BYTE] * S + dfa.STATE["cont"]
    return per


def _string_prefix_bad() -> np.ndarray:
    """By u < 2^16: whether a string token starting with bytes (u & 255, u >> 8) has a b or f prefix."""
    u = np.arange(1 << 16)
    p0, p1 = u & 255, u >> 8
    bad = lambda c: ((c | 32) == ord("b")) | ((c | 32) == ord("f"))
    return bad(p0) | ((p0 != 39) & (p0 != 34) & bad(p1))


def _tables(device):
    if device not in _TABLES:
        t = _build_tables()
        out = {"C": t.pop("C"), "eof_cont": t.pop("eof_cont")}
        for k, v in t.items():
            dtype = torch.int16 if k == "facts" else torch.int32 if k in ("token_kind", "next", "pair") else torch.int64
            out[k] = torch.tensor(v, dtype=dtype, device=device)
        # the mask of a key's bytes by length (9: longer than 8 bytes, the key is -1)
        out["byte_mask"] = torch.tensor([(1 << 8 * k) - 1 for k in range(8)] + [-1, 0], device=device)
        out["prefix_bad"] = torch.from_numpy(_string_prefix_bad()).to(device)
        # a digit's weight d * base^k by (base code << 12 | d << 8 | k), k the digits after it modulo 32, where
        # it is below 2^63 (a literal with more digits than _MAX_DIGITS is the host's)
        out["term"] = torch.tensor([d * base ** k if k < 32 and d * base ** k < 1 << 63 else 0
                                    for base in _BASES for d in range(16) for k in range(256)], device=device)
        out["max_digits"] = torch.tensor(_MAX_DIGITS, device=device)
        out["scale_up"] = torch.tensor([10.0 ** max(k, 0) for k in range(-22, 23)], dtype=torch.float64, device=device)
        out["scale_down"] = torch.tensor([10.0 ** max(-k, 0) for k in range(-22, 23)], dtype=torch.float64, device=device)
        # by 2 * exponent digits + minus, up to 9 (at 10 and over the literal is the host's anyway)
        out["exp_scale"] = torch.tensor([10 ** (k >> 1) for k in range(10)] + [1], device=device)
        out["exp_sign"] = torch.tensor([1 - 2 * (k & 1) for k in range(10)] + [1], device=device)
        _TABLES[device] = out
    return _TABLES[device]


def _words(b: torch.Tensor) -> torch.Tensor:
    """Bytes i..i+7 of each row as one little-endian int64 (zeros past the end), for every i: [B, 8 * n]
    with n = ceil(L / 8), the word at i being column (i % 8) * n + i // 8. Eight shifted byte copies
    viewed as int64, so one gather reads a token's first 8 bytes."""
    B, L = b.shape
    n = (L + 7) // 8
    buf = torch.zeros((B, 8 * n + 8), dtype=torch.uint8, device=b.device)
    buf[:, :L] = b
    return buf.as_strided((B, 8, 8 * n), (8 * n + 8, 1, 1)).contiguous().view(torch.int64).view(B, 8 * n)


class _First:
    """[B] index of the first set entry per row of [B, L] masks (bool, or int16 0 / -1), or BIG: the
    row maximum of the mask times, or and, L - i in int16 (argmax over a bool row is slow on a CPU)."""

    def __init__(self, L: int, device):
        self.L = L
        self.countdown = torch.arange(L, 0, -1, dtype=torch.int16, device=device)

    def __call__(self, mask: torch.Tensor) -> torch.Tensor:
        left = (mask * self.countdown if mask.dtype == torch.bool else mask & self.countdown).amax(1).long()
        return torch.where(left > 0, self.L - left, BIG)


@dataclass
class Tokens:
    """Token arrays [B, T]; kind 0 pads. Errors are (code, byte position) per program. Kinds, offsets,
    lines, columns and counts are int32; key and hash int64."""

    kind: torch.Tensor
    start: torch.Tensor  # byte offset in the normalised source
    end: torch.Tensor
    line: torch.Tensor
    col: torch.Tensor
    line_start: torch.Tensor  # byte offset where the token's physical line starts
    key: torch.Tensor  # first 8 bytes packed (names of <= 8 bytes), else -1
    hash: torch.Tensor  # 64-bit hash of the token text (names)
    value: torch.Tensor  # float64 value of number tokens
    slow_number: torch.Tensor  # numbers whose exact value the host computes at the end
    prefix_bad: torch.Tensor  # strings with an f/b prefix
    count: torch.Tensor  # [B] tokens per program
    truncated: torch.Tensor  # [B] more tokens than the arrays hold
    lex_error: torch.Tensor  # [B] lexical error code (dfa.E_*), 0 = none (int64)
    lex_line: torch.Tensor  # [B]
    lex_col: torch.Tensor  # [B]
    ends_continued: torch.Tensor  # [B] bool: the source ends in a backslash continuation (CPython: unexpected EOF)
    data_padded: torch.Tensor  # normalised bytes [B, L + 1] uint8
    lengths: torch.Tensor  # [B] of the normalised sources
    indent_hash: torch.Tensor  # [B, T] int64 hash of the token's indentation: the bytes [indent_start, start)
    indent_start: torch.Tensor  # [B, T] int32: after the line start and the last form feed before the token
    # maxima over the chunk, as ints, that bound later passes' loops
    longest_line: int  # tokens on one logical line, its NEWLINE not counted (of programs that may parse)
    most_lines: int  # NEWLINE tokens in one program
    deepest: int  # parens open at one byte (a `(` counts at its own)
    row_tokens: np.ndarray  # [B] count, read to the host with the maxima: how compile_to_batches regroups rows


def normalize_newlines(data: torch.Tensor, lengths: torch.Tensor, width: int, has_cr: bool = True):
    """CRLF -> LF, lone CR -> LF, on the device (as lexer.normalize_newlines does on the host).

    Returns the DFA input [B, width] as packed int64 words (the byte, EOF_BYTE past the end, and its
    class offsets, see _X_CS) and the new lengths (int32). has_cr=False (the host knows its sources
    hold no CR, as most do) skips the compaction."""
    B, L = data.shape
    t = _tables(data.device)
    keep = ((torch.arange(L, dtype=torch.int16, device=data.device) - lengths[:, None].short()) >> 15).bool()
    if not has_cr:
        x = torch.full((B, width), dfa.EOF_BYTE, dtype=torch.int16, device=data.device)
        x[:, :L] = select(keep, data.short(), dfa.EOF_BYTE)
        return take(t["input"], x.int()), lengths.int()
    keep[:, :-1] &= ((data[:, :-1] ^ 13) | (data[:, 1:] ^ 10)).bool()
    slot = keep.cumsum(1, dtype=torch.int16)
    x = torch.full((B, width + 1), dfa.EOF_BYTE, dtype=torch.int16, device=data.device)
    x.scatter_(1, (slot * keep).long(), data.short())  # dropped bytes go to slot 0
    return take(t["input"], x[:, 1:].int()), slot[:, -1].int()


def _run_dfa(x: torch.Tensor, t: dict) -> torch.Tensor:
    """The transition index (byte class * S + previous state, int32) at each position of packed x [B, L],
    L even.

    A scan over byte pairs, each step one add and one lookup in the two-byte table over the batch;
    the states after even positions then follow in one lookup."""
    B, L = x.shape
    halves = x.view(torch.int32)
    offset = halves[:, 0::2] >> _X_CS  # class * S
    even, odd = offset[:, 0::2], offset[:, 1::2]
    # (class pair) * S: the high half at even positions; step-major, so that each step reads and writes
    # contiguous rows
    pair = (halves[:, 1::4] + odd).t().contiguous()
    after = torch.empty((L // 2, B), dtype=torch.int32, device=x.device)  # states after each odd position
    idx = torch.empty(B, dtype=torch.int32, device=x.device)
    state = torch.zeros(B, dtype=torch.int32, device=x.device)
    for p, a in zip(pair.unbind(0), after.unbind(0)):
        torch.add(p, state, out=idx)
        torch.index_select(t["pair"], 0, idx, out=a)
        state = a
    out = torch.empty((B, L), dtype=torch.int32, device=x.device)
    out[:, 0] = even[:, 0]
    torch.add(even[:, 1:], after[:-1].t(), out=out[:, 2::2])
    torch.add(odd, take(t["next"], out[:, 0::2].contiguous()), out=out[:, 1::2])
    return out


# The host's two hints to lex, read at C speed: a CR byte (memchr); and, by a scan of each source's
# bytes through a class table (a regular expression took ~9 us a program), where a literal may need
# more than Clinger's fast path: an exponent, or 16 digits and a point (`[0-9.][eE]|[0-9._]{17}`: 17
# digits, points and underscores in a row). An integer (hex, octal and binary ones too) never does, as
# converting it to float64 rounds it once. Names and comments may match too.
_HINT_CLASS = bytes(ord("d") if c in b"0123456789." else ord("u") if c == ord("_") else ord("e") if c in b"eE"
                    else 32 for c in range(256))
_RUN_CLASS = bytes.maketrans(b"u", b"d")  # digits, points and underscores alike


def host_hints(sources) -> tuple[bool, bool]:
    """(whether any source holds a CR byte, whether any may hold a literal past Clinger's fast path) for
    sources (str, or bytes from pack.encode): lex's has_cr and hard_literals, each False only when
    certain."""
    encoded = [s if isinstance(s, bytes) else encode(s) for s in sources]
    return any(b"\r" in b for b in encoded), any(map(_may_hold_hard_literal, encoded))


def _may_hold_hard_literal(source: bytes) -> bool:
    c = source.translate(_HINT_CLASS)
    return b"de" in c or b"d" * 17 in c.translate(_RUN_CLASS)


def lex(data: torch.Tensor, lengths: torch.Tensor, max_tokens: int, has_cr: bool = True,
        hard_literals: bool = True) -> Tokens:
    """Tokens of sources [B, L] (has_cr=False: the caller knows they hold no CR byte; hard_literals=False:
    the caller knows no literal needs more than Clinger's fast path: host_hints)."""
    t = _tables(data.device)
    dev = data.device
    B, L0 = data.shape
    L = L0 + 1  # room for the EOF position
    if L >= 1 << 14:  # int16 positions (and twice them) must not wrap; compile_to_batches keeps L <= 8,194
        raise ValueError(f"lex takes rows of fewer than {(1 << 14) - 1} bytes, got {L0}")
    x, lengths = normalize_newlines(data, lengths, L + (L & 1), has_cr)  # the DFA's steps take an even width
    b = x.view(torch.uint8)[:, 0:8 * L:8].contiguous()  # the normalised bytes: each word's low byte (EOF: 0)
    # positions (int16 where they suffice: L < 2^14, and int16 ops cost a third of int32 ones; a
    # comparison to bool costs as much as ten, so signs are read by shifts)
    pos = torch.arange(L, dtype=torch.int32, device=dev)
    pos16 = torch.arange(L, dtype=torch.int16, device=dev)
    trans_all = _run_dfa(x, t)  # [B, L or L + 1], contiguous
    trans = trans_all[:, :L]
    facts = take(t["facts"], trans_all)[:, :L]
    fact = lambda bit: (facts & bit).bool()
    first = _First(L, dev)

    # the stretch from each boundary to the next (a token, or a byte outside tokens) by the boundary's
    # count: its end and the number digits up to there, an amax of (i + 1) << 14 | digits through i
    # (one prefix sum, `digits`)
    n_bound = fact(F_BOUNDARY).cumsum(1, dtype=torch.int16).long()
    digits = ((facts & F_DIGIT) | 1 << 14).cumsum(1, dtype=torch.int32)
    stretch = torch.zeros((B, L + 1), dtype=torch.int32, device=dev)
    stretch.scatter_reduce_(1, n_bound, digits, "amax")
    at_end = stretch.gather(1, n_bound)  # per byte: the end of its token, the digits through it
    end_pos = at_end >> 14
    end16 = end_pos.short()

    # lexical errors: the DFA's (a sink, so at most one), escapes in non-raw strings, unmatched ')'
    det_dfa = first(fact(F_ERR))
    at = det_dfa.clamp(max=L - 1)[:, None]
    flags = t["flags"][trans.gather(1, at)[:, 0]]
    code_dfa, where_dfa = (flags >> 1) & 15, flags >> 5
    q = (det_dfa - 1).clamp(0, L - 1)[:, None]
    # inside a token: its start is where the stretch before its own ends
    tok_start_at = (stretch.gather(1, n_bound.gather(1, q) - 1)[:, 0] >> 14).long()
    rep_dfa = torch.where(where_dfa == dfa.AT_PREV, det_dfa - 1,
                          torch.where(where_dfa == dfa.AT_TOKEN, tok_start_at, det_dfa))
    det_esc = first(fact(F_ESC))  # at the byte after the backslash
    det_esc = torch.where(det_esc < BIG, det_esc - 1, BIG)
    delta = facts >> 14
    depth = delta.cumsum(1, dtype=torch.int16)
    det_par = first(depth >> 15)
    det = torch.stack([det_dfa, det_esc, det_par], 1)
    first_err = det.argmin(1)[:, None]
    has_error = det.amin(1) < BIG
    rep = torch.stack([rep_dfa, det_esc, det_par], 1).gather(1, first_err)[:, 0]
    code = torch.stack([code_dfa, torch.full_like(code_dfa, dfa.E_ESCAPE), torch.full_like(code_dfa, dfa.E_UNMATCHED)],
                       1).gather(1, first_err)[:, 0]
    code = torch.where(has_error, code, 0)
    limit = torch.where(has_error, rep, BIG)

    # tokens before the first error, and NEWLINE tokens at line ends outside parens after a token. A
    # token without a kind (an unfinished string or number) always ends at the DFA's error: it may
    # end at the limit only when the state before that error has a kind.
    unfinished = take(t["kind"], trans.gather(1, (det_dfa - 1).clamp(0, L - 1)[:, None])[:, 0]) == 0
    last_end = (limit - ((det_dfa == limit) & unfinished).long()).clamp(max=L + 1).short()[:, None]
    kept = fact(F_START) & ~((last_end - end16) >> 15).bool()
    cand = fact(F_NL) & ((pos16 - limit.clamp(max=L + 1).short()[:, None]) >> 15).bool() & ~(depth - delta).bool()
    cand.scatter_(1, lengths[:, None].long(), ~has_error[:, None])  # the end of the file (the EOF byte is no F_NL)
    # a candidate is a NEWLINE when a kept token lies between it and the candidate before (no byte is
    # both): `since` counts the kept tokens after the last candidate, by a running maximum of the kept
    # counts at candidates
    n_kept = kept.cumsum(1, dtype=torch.int16)
    since = n_kept - (n_kept * cand).cummax(1).values
    newline = cand.clone()
    newline[:, 0] = False
    newline[:, 1:] &= since[:, :-1].bool()
    selected = kept | newline

    # compaction to [B, T]: the one scalar read inside the pipeline sizes the token arrays to the
    # longest program's token count instead of its byte count (about 4x smaller), and the number list
    n_sel = selected.cumsum(1, dtype=torch.int16)
    total = n_sel[:, -1].int()
    # and the data's sizes that bound later passes' loops: tokens on one logical line, its NEWLINE not
    # counted (the most kept tokens after a candidate: a candidate that is no NEWLINE has none before
    # it), in programs that may parse (not with a lexical error or a paren left open, a rules error);
    # NEWLINE tokens in one program; parens open at one byte
    line_tokens = since.amax(1) * ~(has_error | depth[:, -1].bool())
    sizes = [total.max(), (digits[:, -1] & _M14).max(), line_tokens.max().int(),  # a number has a digit
             newline.sum(1, dtype=torch.int16).max().int(), depth.amax().int()]
    read = torch.cat([torch.stack(sizes), total]).numpy(force=True)  # (to the host: the one read)
    T, NT, longest_line, most_lines, deepest = read[:5].tolist()
    T, NT = max(1, min(T, max_tokens)), max(1, NT)
    slots = torch.zeros((B, T + 2), dtype=torch.int32, device=dev)
    slots.scatter_(1, (n_sel * selected).clamp_(max=T + 1).long(), pos.expand(B, L))  # slot 0 and T + 1 discard
    # (gathers take int64 indices: on two threads one conversion and gathers beat index_select)
    tok_start = slots[:, 1:T + 1].contiguous()
    start64 = tok_start.long()
    count = total.clamp(max=T)
    truncated = total > T  # over the limits anyway; the end-of-file rules must not fire
    valid = torch.arange(T, dtype=torch.int32, device=dev) < count[:, None]
    tok_end = end_pos.gather(1, start64).mul_(valid)  # a NEWLINE's byte is a stretch of its own
    end64 = tok_end.long()
    kind = take(t["token_kind"], trans.gather(1, (end64 - 1).clamp_(min=0))) * valid

    # counts over [0, i): characters, newlines, number fields
    counts = torch.zeros((B, L + 1), dtype=torch.int64, device=dev)
    torch.cumsum(take(t["q"], trans_all)[:, :L], 1, out=counts[:, 1:])
    # where the line of each byte starts: a running maximum of i after each LF (F_LF's bit as a sign)
    line_at = torch.zeros((B, L), dtype=torch.int16, device=dev)
    torch.bitwise_and((facts[:, :-1] << 15 - _LF_SHIFT) >> 15, pos16[1:], out=line_at[:, 1:])
    line_at = line_at.cummax(1).values
    # where the indentation of each byte's line starts: CPython's tokenizer sets the column to 0 at a form
    # feed, so after the line start or the last form feed before it, whichever is later (only line-start
    # tokens use it, before which there is nothing but spaces, tabs and form feeds)
    indent_at = torch.zeros((B, L), dtype=torch.int16, device=dev)
    torch.mul(b[:, :-1] == 12, pos16[1:], out=indent_at[:, 1:])
    indent_at = torch.maximum(indent_at.cummax(1).values, line_at)

    # the fields read are in the low halves of counts' words: read as int32, at 2 * index
    low = counts.view(torch.int32)

    def place(p, one):  # int32 (line, col, line start) of byte positions p (int64); 0, 0, 0 at p = 0 with one = 0
        z = low.gather(1, p * 2)
        ls = line_at.gather(1, p)
        zl = low.gather(1, (ls * 2).long())
        return ((z >> _Q_NL) & _M14) + one, ((z - zl) & _M14) + one, ls.int()

    tok_line, tok_col, tok_line_start = place(start64, valid)  # padding starts at 0
    lex_line, lex_col, _ = (v[:, 0] for v in place(rep.clamp(0, L - 1)[:, None], 1))
    # the DFA in `cont` at the end of the file: the source ends in a backslash continuation (batch_rules.py)
    ends_continued = trans_all.gather(1, lengths[:, None].long())[:, 0] == t["eof_cont"]

    # names: packed key (keyword and builtin lookups) and a hash of the full text (identity)
    length = tok_end - tok_start
    n8 = (L + 7) // 8
    head = _words(b).gather(1, ((tok_start & 7) * n8 + (tok_start >> 3)).long())  # bytes start..start+7
    key = (head & take(t["byte_mask"], length.clamp(max=9))) | ((8 - length) >> 31)  # -1 past 8 bytes
    prefix = hash_prefix(b)
    tok_hash = _span_hash(prefix, start64, end64)
    tok_indent_start = indent_at.gather(1, start64).int()
    indent_hash = _span_hash(prefix, tok_indent_start.long(), start64)  # (rules compares indentations by it)
    is_kw, kw_delta = _keyword_delta(key)
    kind += kw_delta * (is_kw & (kind == spec.TOK["name"]))

    prefix_bad = (kind == spec.TOK["string"]) & take(t["prefix_bad"], head & 0xFFFF)
    value, slow = _numbers(t, facts, digits, at_end, counts, kind == spec.TOK["number"], NT, start64, end64,
                           hard_literals)
    return Tokens(kind, tok_start, tok_end, tok_line, tok_col, tok_line_start, key, tok_hash, value, slow, prefix_bad,
                  count, truncated, code, lex_line, lex_col, ends_continued, b, lengths, indent_hash, tok_indent_start,
                  longest_line,
                  most_lines, deepest, np.minimum(read[5:], T))


def pack_key(word: str) -> int:
    k = 0
    for i, ch in enumerate(word.encode()):
        k |= ch << (8 * i)
    return k


_KEYWORDS = list(spec.KEYWORDS) + list(spec.BAD_KEYWORDS)
_KEYWORD_KINDS = [spec.TOK[w] for w in spec.KEYWORDS] + [spec.TOK["bad-keyword"]] * len(spec.BAD_KEYWORDS)


_KEYWORD_SLOTS: dict = {}


def _keyword_slots(device):
    """A perfect hash of the keywords' keys: (multiplier, key per slot, kind - the name kind per slot,
    int32, 0 for an empty slot) with the slot the top 10 bits of key * multiplier (mod 2^64); the
    multiplier is the first odd one without collisions."""
    if device not in _KEYWORD_SLOTS:
        keys = [pack_key(w) for w in _KEYWORDS]
        mult, slots = perfect_hash(keys, 10)
        slot_key, slot_delta = [-1] * 1024, [0] * 1024
        for k, kind, sl in zip(keys, _KEYWORD_KINDS, slots):
            slot_key[sl], slot_delta[sl] = k, kind - spec.TOK["name"]
        _KEYWORD_SLOTS[device] = (mult, torch.tensor(slot_key, device=device),
                                  torch.tensor(slot_delta, dtype=torch.int32, device=device))
    return _KEYWORD_SLOTS[device]


def _keyword_delta(key: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(key is a keyword's, that keyword's kind - the name kind, or 0) per token, the second int32."""
    mult, slot_key, slot_delta = _keyword_slots(key.device)
    slot = ((key * mult) >> 54) & 1023
    return take(slot_key, slot) == key, take(slot_delta, slot)


_P = 0x100000001B3  # odd, so invertible modulo 2^64 (FNV's prime)
_MIX = 0x9E3779B97F4A7C15 - (1 << 64)  # the golden-ratio multiplier, as a signed int64
_POWERS: dict = {}


def _powers(n: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """P^j and P^-j * MIX modulo 2^64 (as wrapping int64) for j < n, cached per device and grown on demand."""
    have = _POWERS.get(device)
    if have is None or have[0].shape[0] < n:
        size = max(n, 2 * (have[0].shape[0] if have is not None else 1024))
        inv = pow(_P, -1, 1 << 64)
        fw, bw, a, b = [], [], 1, _MIX
        for _ in range(size):
            fw.append(signed64(a))
            bw.append(signed64(b))
            a, b = a * _P % (1 << 64), b * inv % (1 << 64)
        _POWERS[device] = have = (torch.tensor(fw, device=device), torch.tensor(bw, device=device))
    return have[0][:n], have[1][:n]


def hash_prefix(b: torch.Tensor) -> torch.Tensor:
    """[B, L + 1] prefix sums of b[j] * P^j modulo 2^64 (int64 arithmetic wraps), from 0."""
    B, L = b.shape
    fw, _ = _powers(L + 1, b.device)
    out = torch.zeros((B, L + 1), dtype=torch.int64, device=b.device)
    torch.cumsum(b * fw[:L], 1, out=out[:, 1:])
    return out


def _span_hash(prefix: torch.Tensor, start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
    """A 64-bit polynomial hash of each span [start, end) of bytes inside its row (int64 offsets [B, n]):
    differences of the hash_prefix sums, shifted back by P^-start, times the golden-ratio multiplier to
    spread short names over all 64 bits (users of the hash may keep only the top bits)."""
    _, bw = _powers(prefix.shape[1], prefix.device)
    h = (prefix.gather(1, end) - prefix.gather(1, start)) * take(bw, start)
    return h ^ (h >> 29)


def _exact_rest(value, rest, m, k, room: int):
    """value [B, NT] with the numbers where `rest` valued by floats.to_float64 (Eisel-Lemire): some sixty
    int64 operations against about ten for the fast path, so they run on the first `room` of those
    numbers in the chunk alone, compacted. Also returns the ones past `room`, left to the host (the
    generated programs, which seed such literals on purpose, leave none there)."""
    B, NT = rest.shape
    n = B * NT
    flat = rest.view(-1)
    rank = flat.cumsum(0)
    took = flat & (rank <= room)
    which = torch.full((room + 1,), n, dtype=torch.int64, device=rest.device)  # n: none, a discarded slot
    which.scatter_(0, torch.where(took, rank - 1, room), torch.arange(n, device=rest.device))
    which = which[:room]
    at = which.clamp(max=n - 1)
    got = to_float64(take(m.view(-1), at) * (which < n), take(k.view(-1), at))
    out = torch.cat([value.view(-1), value.new_zeros(1)]).scatter_(0, which, got)
    return out[:n].view(B, NT), (flat & ~took).view(B, NT)


def _numbers(t, facts, digits, at_end, counts, is_number, NT, tok_start, tok_end, hard_literals: bool):
    """Exact float64 values of literals on the device: an integer mantissa m and a decimal exponent k
    per literal, and the float64 nearest to m * 10^k, by Clinger's fast path where it applies, else by
    floats.py. Literals with more digits than _MAX_DIGITS (m must stay below 2^63, and every digit's
    weight below 2^63) or more than four exponent digits are flagged for the host. Returns (value,
    slow) [B, T].

    Per byte, the DFA's transition says whether it is a digit of the mantissa, of the fraction or of
    the exponent, the exponent's minus or a base prefix: counts packed in lex's prefix sum. A digit
    weighs base^(digits after it in its token), so one more prefix sum gives each token's digit string
    as an integer (mantissa * 10^n_exp + exponent); int64 arithmetic wraps, so the differences of
    prefix sums at token ends stay exact. The packed fields hold tokens shorter than 2,048 bytes; a
    longer number has too many digits, so it is the host's anyway. The rest
    works on the number tokens alone, listed in [B, NT] (NT bounds the number digits of a row, a
    small part of the tokens), and the results go to their tokens' slots."""
    B = facts.shape[0]
    dev = facts.device
    # by the digit value and the digits after each byte in its token (modulo 32)
    term = take(t["term"], (((at_end.short() - digits.short()) & 31) | (facts & 0x3F00)).int())
    weighted = torch.zeros_like(counts)
    torch.cumsum(term, 1, out=weighted[:, 1:])

    T = is_number.shape[1]
    n_num = is_number.cumsum(1, dtype=torch.int32)
    listed = torch.zeros((B, NT + 1), dtype=torch.int32, device=dev)
    listed.scatter_(1, (n_num * is_number).long(), torch.arange(T, dtype=torch.int32, device=dev).expand(B, T))
    real = torch.arange(NT, device=dev) < n_num[:, -1:]
    tok = torch.where(real, listed[:, 1:].long(), T)  # padding to a discarded slot
    start, end = tok_start.gather(1, tok.clamp(max=T - 1)), tok_end.gather(1, tok.clamp(max=T - 1))

    c = counts.gather(1, end) - counts.gather(1, start)
    v = weighted.gather(1, end) - weighted.gather(1, start)
    exp = ((c >> _Q_MINUS) & 4095).clamp_(max=10)  # 2 * exponent digits + minus
    scale = take(t["exp_scale"], exp)
    m = v // scale
    k = (v - m * scale) * take(t["exp_sign"], exp) - ((c >> _Q_FRAC) & _M11)
    too_long = ((c >> _Q_DIG) & _M11) > take(t["max_digits"], (c >> _Q_BASE) & 3)
    slow = too_long | (exp > 9) | (end - start >= 2048)
    # Clinger's fast path: m < 2^53 times 10^k with |k| <= 22 is one correctly rounded operation, and so
    # is any integer (k = 0) converted to float64
    rest = real & ~slow & (((m >= 2 ** 53) & k.bool()) | (k.abs() > 22))
    at = (k + 22).clamp_(0, 44)
    value = m.to(torch.float64) * take(t["scale_up"], at) / take(t["scale_down"], at)  # m * 10^k or m / 10^-k
    if hard_literals:  # (a chunk without, as most hand-written ones, skips ~70 operations)
        value, left = _exact_rest(value, rest, m, k, B * NT // 64 + 32)
        slow |= left
    value = torch.where(slow, 0.0, value)
    out_value = torch.zeros((B, T + 1), dtype=torch.float64, device=dev).scatter_(1, tok, value)
    out_slow = torch.zeros((B, T + 1), dtype=torch.bool, device=dev).scatter_(1, tok, slow)
    return out_value[:, :T], out_slow[:, :T]
