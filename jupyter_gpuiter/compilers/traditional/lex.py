"""Pass 1, lex: bytes [B, L] -> tokens [B, T] (kind, byte span, line, col, name key and hash, number value).

The DFA of dfa.py runs as one table lookup per byte position, vectorised over the batch (L steps of
O(B) work; L <= 8 KiB by the language's limits). Everything after the scan is O(B*L) tensor work with
no Python loop over programs and no host synchronisation: token boundaries from the transition flags,
paren depth and NEWLINE tokens by prefix sums, compaction by a scatter at cumsum indices.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...lang import spec
from . import dfa
from .common import BIG, gather, last_true, lookup, next_true

_TABLES: dict = {}


def _tables(device):
    if device not in _TABLES:
        nxt, flags = dfa.build_tables()
        kinds = [spec.TOK.get(dfa.token_kind_of_state(s) or "none", 0) for s in dfa.STATES]
        number_ok = [s not in dfa.NUMBER_STATES or s in dfa.NUMBER_ACCEPTING for s in dfa.STATES]
        kinds = [k if ok else 0 for k, ok in zip(kinds, number_ok)]
        in_token = [dfa.token_kind_of_state(s) is not None or s in dfa.NUMBER_STATES or s.startswith(("open", "s_", "t_"))
                    for s in dfa.STATES]
        esc = [s in dfa.ESCAPE_STATES for s in dfa.STATES]
        _TABLES[device] = {
            "next": torch.tensor(nxt, dtype=torch.int64, device=device),
            "flags": torch.tensor(flags, dtype=torch.int64, device=device),
            "kind": torch.tensor(kinds, dtype=torch.int64, device=device),
            "in_token": torch.tensor(in_token, dtype=torch.bool, device=device),
            "escape": torch.tensor(esc, dtype=torch.bool, device=device),
            "nl": torch.tensor([s == "nl" for s in dfa.STATES], dtype=torch.bool, device=device),
        }
    return _TABLES[device]


@dataclass
class Tokens:
    """Token arrays [B, T]; kind 0 pads. Errors are (code, byte position) per program."""

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
    lex_error: torch.Tensor  # [B] lexical error code (dfa.E_*), 0 = none
    lex_line: torch.Tensor  # [B]
    lex_col: torch.Tensor  # [B]
    data_padded: torch.Tensor  # normalised bytes [B, L + 1]
    lengths: torch.Tensor  # [B]


def normalize_newlines(data: torch.Tensor, lengths: torch.Tensor):
    """CRLF -> LF, lone CR -> LF, on the device (as lexer.normalize_newlines does on the host)."""
    B, L = data.shape
    b = data.long()
    pos = torch.arange(L, device=data.device).expand(B, L)
    nxt = torch.cat([b[:, 1:], torch.zeros_like(b[:, :1])], 1)
    drop = (b == 13) & (nxt == 10)
    keep = ~drop & (pos < lengths[:, None])
    idx = torch.where(keep, keep.cumsum(1) - 1, torch.full_like(pos, L))
    out = torch.zeros((B, L + 1), dtype=torch.long, device=data.device)
    out.scatter_(1, idx, torch.where(b == 13, torch.full_like(b, 10), b))
    return out[:, :L], keep.sum(1)


def _run_dfa(x: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """States after each input position: a scan over L, each step one gather over the batch."""
    B, L = x.shape
    xt = x.t().contiguous()
    states = torch.empty((L, B), dtype=torch.int64, device=x.device)
    state = torch.zeros(B, dtype=torch.int64, device=x.device)
    for i in range(L):
        state = table[state * dfa.N_INPUTS + xt[i]]
        states[i] = state
    return states.t()


def lex(data: torch.Tensor, lengths: torch.Tensor, max_tokens: int) -> Tokens:
    t = _tables(data.device)
    data, lengths = normalize_newlines(data, lengths)
    B, L0 = data.shape
    L = L0 + 1  # room for the EOF position
    b = torch.cat([data, torch.zeros_like(data[:, :1])], 1)
    pos = torch.arange(L, device=data.device).expand(B, L)
    x = torch.where(pos < lengths[:, None], b, torch.full_like(b, dfa.EOF_BYTE))
    states = _run_dfa(x, t["next"])
    prev = torch.cat([torch.zeros_like(states[:, :1]), states[:, :-1]], 1)
    flags = t["flags"][prev * dfa.N_INPUTS + x]
    starts = (flags & 1).bool()
    err = (flags >> 1) & 15
    where = flags >> 5

    # token spans and kinds
    boundary = starts | ~t["in_token"][states]
    end_pos = next_true(boundary)  # for a start at i: where its token ends
    last_start = last_true(starts)
    end_state = gather(states, end_pos - 1)
    kind = torch.where(starts, t["kind"][end_state], torch.zeros_like(states))

    # lexical errors: the DFA's (a sink, so at most one), escapes in non-raw strings, unmatched ')'
    big = torch.full((B,), BIG, device=data.device)
    has = err != 0
    det_dfa = torch.where(has.any(1), has.long().argmax(1), big)
    code_dfa = gather(err, det_dfa[:, None])[:, 0]
    where_dfa = gather(where, det_dfa[:, None])[:, 0]
    tok_start_at = gather(last_true(starts), (det_dfa - 1)[:, None])[:, 0]
    rep_dfa = torch.where(where_dfa == dfa.AT_PREV, det_dfa - 1,
                          torch.where(where_dfa == dfa.AT_TOKEN, tok_start_at, det_dfa))
    nxt_byte = torch.cat([b[:, 1:], torch.zeros_like(b[:, :1])], 1)
    s0 = gather(b, last_start)
    s1 = gather(b, last_start + 1)
    raw = (s0 | 32 == ord("r")) | ((s0 != 39) & (s0 != 34) & (s1 | 32 == ord("r")))
    bad_escape = t["escape"][states] & ~raw & (
        (nxt_byte == ord("x")) | (nxt_byte == ord("u")) | (nxt_byte == ord("U")) | (nxt_byte == ord("N")))
    det_esc = torch.where(bad_escape.any(1), bad_escape.long().argmax(1), big)
    complete = starts & (kind != 0)
    delta = torch.where(complete & (kind == spec.TOK["("]), 1, 0) - torch.where(complete & (kind == spec.TOK[")"]), 1, 0)
    depth_after = delta.cumsum(1)
    under = depth_after < 0
    det_par = torch.where(under.any(1), under.long().argmax(1), big)
    det = torch.stack([det_dfa, det_esc, det_par], 1)
    first = det.argmin(1)
    det_first = det.min(1).values
    rep = torch.stack([rep_dfa, det_esc, det_par], 1).gather(1, first[:, None])[:, 0]
    code = torch.stack([code_dfa, torch.full_like(code_dfa, dfa.E_ESCAPE), torch.full_like(code_dfa, dfa.E_UNMATCHED)],
                       1).gather(1, first[:, None])[:, 0]
    has_error = det_first < BIG
    code = torch.where(has_error, code, torch.zeros_like(code))
    limit = torch.where(has_error, rep, big)[:, None]

    kept = complete & (end_pos <= limit)
    depth_before = torch.where(kept, delta, 0).cumsum(1) - torch.where(kept, delta, 0)
    eof = (pos == lengths[:, None]) & ~has_error[:, None]
    cand = (t["nl"][states] & (pos < limit) & (depth_before == 0)) | eof
    count_tok = kept.long().cumsum(1)
    prev_cand = torch.where(cand, count_tok, torch.zeros_like(count_tok)).cummax(1).values
    prev_cand = torch.cat([torch.zeros_like(prev_cand[:, :1]), prev_cand[:, :-1]], 1)
    newline = cand & (count_tok > prev_cand)
    selected = kept | newline

    # line and column of every byte
    is_nl = b == 10
    line = 1 + is_nl.long().cumsum(1) - is_nl.long()
    line_start = last_true(is_nl, inclusive=False) + 1
    chars = ((b & 0xC0) != 0x80).long().cumsum(1)
    chars_excl = chars - ((b & 0xC0) != 0x80).long()
    col = chars_excl - gather(chars_excl, line_start) + 1

    # compaction to [B, T]: the one scalar read inside the pipeline sizes the token arrays to the
    # longest program's token count instead of its byte count (about 4x smaller)
    T = max(1, min(int(selected.sum(1).max()), max_tokens))
    idx = torch.where(selected, selected.long().cumsum(1) - 1, torch.full_like(pos, T))
    idx = torch.where(idx < T, idx, torch.full_like(idx, T))

    def compact(v, fill=0):
        out = torch.full((B, T + 1), fill, dtype=v.dtype, device=v.device)
        out.scatter_(1, idx, v)
        return out[:, :T]

    kind_all = torch.where(newline, torch.full_like(kind, spec.TOK["newline"]), kind)
    tok_kind = compact(torch.where(selected, kind_all, torch.zeros_like(kind_all)))
    tok_start = compact(pos)
    tok_end = compact(torch.where(newline, pos + 1, end_pos).clamp(max=L))
    tok_line = compact(line)
    tok_col = compact(col)
    tok_line_start = compact(line_start)
    count = selected.sum(1).clamp(max=T)
    truncated = selected.sum(1) > T  # over the limits anyway; the end-of-file rules must not fire

    # names: packed key (keyword and builtin lookups) and a hash of the full text (identity)
    length = tok_end - tok_start
    key = torch.zeros_like(tok_start)
    for k in range(8):
        byte_k = gather(b, tok_start + k)
        key |= torch.where(k < length, byte_k, torch.zeros_like(byte_k)) << (8 * k)
    key = torch.where(length <= 8, key, torch.full_like(key, -1))
    tok_hash = span_hash(b, tok_start, tok_end)
    kw = keyword_kinds(key)
    is_name = tok_kind == spec.TOK["name"]
    tok_kind = torch.where(is_name & (kw != 0), kw, tok_kind)

    value, slow = _numbers(b, tok_start, tok_end, tok_kind == spec.TOK["number"])
    p0 = gather(b, tok_start)
    p1 = gather(b, tok_start + 1)
    bad_letter = lambda c: (c | 32 == ord("b")) | (c | 32 == ord("f"))
    prefix_bad = (tok_kind == spec.TOK["string"]) & (bad_letter(p0) | ((p0 != 39) & (p0 != 34) & bad_letter(p1)))
    lex_line = gather(line, rep[:, None].clamp(max=L - 1))[:, 0]
    lex_col = gather(col, rep[:, None].clamp(max=L - 1))[:, 0]
    return Tokens(tok_kind, tok_start, tok_end, tok_line, tok_col, tok_line_start, key, tok_hash, value, slow, prefix_bad, count, truncated,
                  code, lex_line, lex_col, b, lengths)


def pack_key(word: str) -> int:
    k = 0
    for i, ch in enumerate(word.encode()):
        k |= ch << (8 * i)
    return k


_KEYWORDS = list(spec.KEYWORDS) + list(spec.BAD_KEYWORDS)
_KEYWORD_KINDS = [spec.TOK[w] for w in spec.KEYWORDS] + [spec.TOK["bad-keyword"]] * len(spec.BAD_KEYWORDS)


def keyword_kinds(key: torch.Tensor) -> torch.Tensor:
    """Token kind for names that are keywords (0 for plain names)."""
    kinds = lookup(key, [pack_key(w) for w in _KEYWORDS], _KEYWORD_KINDS)
    return kinds.clamp(min=0)


_P = 0x100000001B3  # odd, so invertible modulo 2^64 (FNV's prime)
_MIX = 0x9E3779B97F4A7C15 - (1 << 64)  # the golden-ratio multiplier, as a signed int64
_POWERS: dict = {}


def _signed(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def _powers(n: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """P^j and P^-j modulo 2^64 (as wrapping int64) for j < n, cached per device and grown on demand."""
    have = _POWERS.get(device)
    if have is None or have[0].shape[0] < n:
        size = max(n, 2 * (have[0].shape[0] if have is not None else 1024))
        inv = pow(_P, -1, 1 << 64)
        fw, bw, a, b = [], [], 1, 1
        for _ in range(size):
            fw.append(_signed(a))
            bw.append(_signed(b))
            a, b = a * _P % (1 << 64), b * inv % (1 << 64)
        _POWERS[device] = have = (torch.tensor(fw, device=device), torch.tensor(bw, device=device))
    return have[0][:n], have[1][:n]


def span_hash(b, start, end):
    """A 64-bit polynomial hash of each span [start, end) of bytes: sums of b[j] * P^j modulo 2^64
    (int64 arithmetic wraps), differences of prefix sums, shifted back by P^-start."""
    L = b.shape[1]
    fw, bw = _powers(L + 1, b.device)
    pre = torch.cat([torch.zeros_like(b[:, :1]), (b * fw[:L]).cumsum(1)], 1)
    h = (gather(pre, end) - gather(pre, start)) * bw[start.clamp(0, L)]
    h = h * _MIX  # spread short names over all 64 bits (users of the hash may keep only the top bits)
    return h ^ (h >> 29)


_POW10 = [10.0 ** k for k in range(23)]


def _numbers(b, start, end, is_number):
    """Exact float64 values of decimal literals on the device (Clinger's fast path: an integer
    mantissa below 2^53 scaled by 10^k with |k| <= 22 is one correctly rounded operation); other
    literals (hex/octal/binary, long mantissas, big exponents) are flagged for the host.

    Works per byte with prefix sums: a token's digit sums are differences of row-wide sums taken
    at its start and end (int64 arithmetic wraps, so the differences stay exact)."""
    B, L = b.shape
    pos = torch.arange(L, device=b.device).expand(B, L)
    starts = torch.zeros((B, L), dtype=torch.bool, device=b.device)
    starts.scatter_(1, start.clamp(0, L - 1), is_number)
    tok_start = last_true(starts)
    tok_end = torch.zeros((B, L), dtype=torch.long, device=b.device)
    tok_end.scatter_(1, start.clamp(0, L - 1), torch.where(is_number, end, 0))
    tok_end = gather(tok_end, tok_start.clamp(min=0))
    inside = (tok_start >= 0) & (pos < tok_end)

    def csum(x):  # inclusive prefix sums with a leading zero column: csum(x)[j] = sum of x[:j]
        return torch.cat([torch.zeros_like(x[:, :1]), x.cumsum(1)], 1)

    def seg(c, i, j):  # sum over [i, j) from a csum
        return gather(c, j) - gather(c, i)

    is_e = inside & ((b | 32) == ord("e"))
    c_e, c_dot = csum(is_e.long()), csum((inside & (b == 46)).long())
    ts = tok_start.clamp(min=0)
    seen_e = (c_e[:, 1:] - gather(c_e, ts)) > 0
    seen_dot = (c_dot[:, 1:] - gather(c_dot, ts)) > 0
    digit = inside & (b >= 48) & (b <= 57)
    mant, expo = digit & ~seen_e, digit & seen_e
    c_mant, c_expo = csum(mant.long()), csum(expo.long())
    mant_after = gather(c_mant, tok_end) - c_mant[:, 1:]
    exp_after = gather(c_expo, tok_end) - c_expo[:, 1:]
    d = (b - 48).clamp(0, 9)
    p10 = torch.pow(10, torch.arange(19, device=b.device))
    m_terms = torch.where(mant & (mant_after <= 18), d * p10[mant_after.clamp(0, 18)], 0)
    e_terms = torch.where(expo & (exp_after <= 18), d * p10[exp_after.clamp(0, 18)], 0)
    frac = csum((mant & seen_dot).long())
    minus = csum((inside & seen_e & (b == 45)).long())
    c_m, c_x = csum(m_terms), csum(e_terms)
    s, e_ = start.clamp(0, L), end.clamp(0, L)
    m = seg(c_m, s, e_)
    e = seg(c_x, s, e_)
    e = torch.where(seg(minus, s, e_) > 0, -e, e)
    k = e - seg(frac, s, e_)
    n_mant, n_exp = seg(c_mant, s, e_), seg(c_expo, s, e_)
    second = gather(b, start + 1) | 32
    hexlike = (second == ord("x")) | (second == ord("o")) | (second == ord("b"))
    slow = is_number & ((n_mant > 18) | (n_exp > 4) | (m >= 2 ** 53) | (k.abs() > 22) | hexlike)
    pow10 = torch.tensor(_POW10, dtype=torch.float64, device=b.device)[k.abs().clamp(max=22)]
    mf = m.to(torch.float64)
    value = torch.where(k >= 0, mf * pow10, mf / pow10)
    value = torch.where(is_number & ~slow, value, torch.zeros_like(value))
    return value, slow
