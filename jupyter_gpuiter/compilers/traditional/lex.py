"""Pass 1, lex: bytes [B, L] -> tokens [B, T] (kind, byte span, line, col, name key and hash, number value).

The DFA of dfa.py runs over byte classes two bytes at a time: L/2 steps, each one add and one table
lookup over the batch (L <= 8 KiB by the language's limits); the odd positions follow in one vectorised
lookup. Everything else is a few dozen O(B*L) tensor ops and O(B*T) ones after compaction, with no
Python loop over programs and no host synchronisation but the one read that sizes T: per-byte facts
(token start, boundary, error, paren, newline, number digit) are table lookups on the transition
index, token ends and line starts are scatters at prefix-count slots, and token fields are gathers
at the compacted token starts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...lang import spec
from . import dfa
from .common import BIG, perfect_hash, signed64, take

_TABLES: dict = {}
# what a transition into a number state adds to _numbers' packed counts: digits (bits 0-15), fraction
# digits (16-31), exponent digits (32-47), and in bits 48-63 the exponent's minus (1) and a base prefix (2)
_NUMBER_CODES = {"n_zero1": 1, "n_zero": 1, "n_lz": 1, "n_int": 1, "n_frac": 1 + (1 << 16), "n_exp_dig": 1 + (1 << 32),
                 "n_hex_pfx": 2 << 48, "n_oct_pfx": 2 << 48, "n_bin_pfx": 2 << 48}
_MINUS = 1 << 48
_BAD_ESCAPES = set(b"xuUN")
_MASK16 = (1 << 16) - 1
_MASK32 = (1 << 32) - 1


def _build_tables() -> dict:
    """Per-transition tables [C * S] (byte class major) and the byte -> class map, as Python lists.

    Bytes with the same column in every table form one class (about 50 of the 257 inputs), which
    makes the two-byte table [C * C * S] small."""
    S, N = len(dfa.STATES), dfa.N_INPUTS
    nxt, flags = dfa.build_tables()
    kinds = [spec.TOK.get(dfa.token_kind_of_state(s) or "none", 0) for s in dfa.STATES]
    kinds = [k if s not in dfa.NUMBER_STATES or s in dfa.NUMBER_ACCEPTING else 0 for k, s in zip(kinds, dfa.STATES)]
    in_token = [dfa.token_kind_of_state(s) is not None or s in dfa.NUMBER_STATES or s.startswith(("open", "s_", "t_"))
                for s in dfa.STATES]
    esc = {dfa.STATE[s] for s in dfa.ESCAPE_STATES}
    digit = {dfa.STATE[s]: v for s, v in _NUMBER_CODES.items()}
    paren = {dfa.STATE["op:("]: 1, dfa.STATE["op:)"]: -1}
    cols: dict = {}
    for x in range(N):
        col = []
        for s in range(S):
            n, f = nxt[s * N + x], flags[s * N + x]
            col.append((n, f, s in esc and x in _BAD_ESCAPES, digit.get(n, 0) + (_MINUS if (s, x) == (dfa.STATE["n_exp"], 45)
                                                                       else 0)))
        cols.setdefault(tuple(col), []).append(x)
    classes = list(cols)
    byte_class = [0] * N
    for c, col in enumerate(classes):
        for x in cols[col]:
            byte_class[x] = c
    per = {k: [] for k in ("next", "flags", "start", "boundary", "err", "paren", "nl", "bad_escape", "number", "kind")}
    for col in classes:
        for s, (n, f, bad, num) in enumerate(col):
            per["next"].append(n)
            per["flags"].append(f)
            per["start"].append(bool(f & 1))
            per["boundary"].append(bool(f & 1) or not in_token[n])
            per["err"].append(f >> 1 & 15 != 0)
            per["paren"].append(paren.get(n, 0) if f & 1 else 0)
            per["nl"].append(n == dfa.STATE["nl"])
            per["bad_escape"].append(bad)
            per["number"].append(num)
            per["kind"].append(kinds[n])
    C = len(classes)
    pair = [0] * (C * C * S)
    for c1 in range(C):
        for c2 in range(C):
            for s in range(S):
                pair[(c1 * C + c2) * S + s] = per["next"][c2 * S + per["next"][c1 * S + s]]
    per["pair"] = pair
    per["class_offset"] = [c * S for c in byte_class]
    per["C"] = C
    return per


def _tables(device):
    if device not in _TABLES:
        t = _build_tables()
        out = {"C": t.pop("C")}
        for k, v in t.items():
            out[k] = torch.tensor(v, dtype=torch.bool if isinstance(v[0], bool) else torch.int64, device=device)
        out["crlf"] = torch.tensor([10 if x == 13 else x for x in range(256)], device=device)
        out["digit"] = torch.tensor([x - 48 if 48 <= x <= 57 else 0 for x in range(256)], device=device)
        out["line_char"] = torch.tensor([(x == 10) << 32 | ((x & 0xC0) != 0x80) for x in range(256)], device=device)
        out["byte_mask"] = torch.tensor([(1 << 8 * k) - 1 for k in range(8)] + [-1], device=device)
        out["pow10"] = torch.tensor([10 ** k for k in range(19)] + [0], device=device)
        out["scale_up"] = torch.tensor([10.0 ** max(k, 0) for k in range(-22, 23)], dtype=torch.float64, device=device)
        out["scale_down"] = torch.tensor([10.0 ** max(-k, 0) for k in range(-22, 23)], dtype=torch.float64, device=device)
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


def _first(mask: torch.Tensor) -> torch.Tensor:
    """[B] index of the first True per row, or BIG."""
    return torch.where(mask.amax(1), mask.view(torch.uint8).argmax(1), BIG)


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
    hash_prefix: torch.Tensor  # [B, L + 2] hash_prefix(data_padded), for hashes of other spans


def normalize_newlines(data: torch.Tensor, lengths: torch.Tensor, width: int):
    """CRLF -> LF, lone CR -> LF, on the device (as lexer.normalize_newlines does on the host).

    Returns the DFA input [B, width] (normalised bytes, then EOF_BYTE) and the new lengths."""
    B, L = data.shape
    keep = torch.arange(L, device=data.device) < lengths[:, None]
    keep[:, :-1] &= (data[:, :-1] != 13) | (data[:, 1:] != 10)
    slot = keep.cumsum(1)
    x = torch.full((B, width + 1), dfa.EOF_BYTE, dtype=torch.int64, device=data.device)
    x.scatter_(1, slot * keep, take(_tables(data.device)["crlf"], data.long()))  # dropped bytes go to slot 0
    return x[:, 1:], slot[:, -1]


def _run_dfa(x: torch.Tensor, t: dict) -> torch.Tensor:
    """The transition index (byte class * S + previous state) at each position of x [B, L], L even.

    A scan over byte pairs, each step one add and one lookup in the two-byte table over the batch;
    the states after even positions then follow in one lookup."""
    B = x.shape[0]
    offset = take(t["class_offset"], x)
    even, odd = offset[:, 0::2], offset[:, 1::2]
    pair = even * t["C"] + odd  # (class pair) * S
    after = torch.empty_like(pair)  # states after each odd position
    idx = torch.empty(B, dtype=torch.int64, device=x.device)
    state = torch.zeros(B, dtype=torch.int64, device=x.device)
    for p, a in zip(pair.unbind(1), after.unbind(1)):
        torch.add(p, state, out=idx)
        torch.index_select(t["pair"], 0, idx, out=a)
        state = a
    out = torch.empty_like(offset)
    out[:, 0] = even[:, 0]
    torch.add(even[:, 1:], after[:, :-1], out=out[:, 2::2])
    torch.add(odd, take(t["next"], out[:, 0::2]), out=out[:, 1::2])
    return out


def lex(data: torch.Tensor, lengths: torch.Tensor, max_tokens: int) -> Tokens:
    t = _tables(data.device)
    dev = data.device
    B, L0 = data.shape
    L = L0 + 1  # room for the EOF position
    x, lengths = normalize_newlines(data, lengths, L + (L & 1))  # the DFA's steps take an even width
    b = x[:, :L] & 255
    pos = torch.arange(L, device=dev)
    trans = _run_dfa(x, t)[:, :L]
    starts = take(t["start"], trans)

    # the token at each byte ends at the next boundary: boundary positions by their count, gathered
    boundary = take(t["boundary"], trans)
    n_bound = boundary.cumsum(1)
    bound_at = torch.full((B, L + 2), L, dtype=torch.int64, device=dev)
    bound_at.scatter_(1, n_bound * boundary, pos.expand(B, L))
    end_pos = bound_at.gather(1, n_bound + 1)

    # lexical errors: the DFA's (a sink, so at most one), escapes in non-raw strings, unmatched ')'
    det_dfa = _first(take(t["err"], trans))
    at = det_dfa.clamp(max=L - 1)[:, None]
    flags = t["flags"][trans.gather(1, at)[:, 0]]
    code_dfa, where_dfa = (flags >> 1) & 15, flags >> 5
    q = (det_dfa - 1).clamp(0, L - 1)[:, None]
    tok_start_at = bound_at.gather(1, n_bound.gather(1, q))[:, 0]  # inside a token: its start is the last boundary
    rep_dfa = torch.where(where_dfa == dfa.AT_PREV, det_dfa - 1,
                          torch.where(where_dfa == dfa.AT_TOKEN, tok_start_at, det_dfa))
    det_esc = _first(take(t["bad_escape"], trans))  # at the byte after the backslash
    det_esc = torch.where(det_esc < BIG, det_esc - 1, BIG)
    delta = take(t["paren"], trans)
    depth = delta.cumsum(1)
    det_par = _first(depth < 0)
    det = torch.stack([det_dfa, det_esc, det_par], 1)
    first = det.argmin(1)[:, None]
    has_error = det.amin(1) < BIG
    rep = torch.stack([rep_dfa, det_esc, det_par], 1).gather(1, first)[:, 0]
    code = torch.stack([code_dfa, torch.full_like(code_dfa, dfa.E_ESCAPE), torch.full_like(code_dfa, dfa.E_UNMATCHED)],
                       1).gather(1, first)[:, 0]
    code = torch.where(has_error, code, 0)
    limit = torch.where(has_error, rep, BIG)[:, None]

    # tokens before the first error, and NEWLINE tokens at line ends outside parens after a token. A
    # token without a kind (an unfinished string or number) always ends at the DFA's error: it may
    # end at the limit only when the state before that error has a kind.
    unfinished = take(t["kind"], trans.gather(1, (det_dfa - 1).clamp(0, L - 1)[:, None])) == 0
    kept = starts & (end_pos < limit + ~((det_dfa[:, None] == limit) & unfinished))
    eof = (pos == lengths[:, None]) & ~has_error[:, None]
    cand = (take(t["nl"], trans) & (pos < limit) & (depth == delta)) | eof
    n_cand = cand.cumsum(1)
    has_token = torch.zeros((B, L + 2), dtype=torch.bool, device=dev)  # per stretch between candidates
    has_token.scatter_(1, (n_cand + 1) * kept, kept)
    newline = cand & has_token.gather(1, n_cand)
    selected = kept | newline

    # compaction to [B, T]: the one scalar read inside the pipeline sizes the token arrays to the
    # longest program's token count instead of its byte count (about 4x smaller)
    n_sel = selected.cumsum(1)
    total = n_sel[:, -1]
    T = max(1, min(int(total.max()), max_tokens))
    slots = torch.zeros((B, T + 2), dtype=torch.int64, device=dev)
    slots.scatter_(1, (n_sel * selected).clamp_(max=T + 1), pos.expand(B, L))  # slot 0 and T + 1 discard
    tok_start = slots[:, 1:T + 1]
    count = total.clamp(max=T)
    truncated = total > T  # over the limits anyway; the end-of-file rules must not fire
    valid = torch.arange(T, device=dev) < count[:, None]
    is_newline = newline.gather(1, tok_start)
    tok_end = torch.where(is_newline, tok_start + 1, end_pos.gather(1, tok_start)) * valid
    tok_kind = torch.where(is_newline, spec.TOK["newline"], take(t["kind"], trans.gather(1, (tok_end - 1).clamp(min=0))))
    tok_kind = tok_kind * valid

    # line and column: newlines and characters before each byte, and where each line starts
    line_char = take(t["line_char"], b).cumsum(1)
    before = torch.cat([torch.zeros_like(line_char[:, :1]), line_char], 1)  # [B, L + 1]: counts over [0, i)
    is_nl = b == 10
    line_at = torch.empty((B, L + 1), dtype=torch.int64, device=dev)
    line_at.scatter_(1, (line_char >> 32) * is_nl, (pos + 1).expand(B, L))  # line k + 1 starts at line_at[k]
    line_at[:, 0] = 0  # (the other bytes' slot)

    def place(p):  # (line, col, line start) of byte positions p
        z = before.gather(1, p)
        ls = line_at.gather(1, z >> 32)
        return (z >> 32) + 1, (z & _MASK32) - (before.gather(1, ls) & _MASK32) + 1, ls

    tok_line, tok_col, tok_line_start = (v * valid for v in place(tok_start))
    lex_line, lex_col, _ = (v[:, 0] for v in place(rep.clamp(0, L - 1)[:, None]))

    # names: packed key (keyword and builtin lookups) and a hash of the full text (identity)
    length = tok_end - tok_start
    head = _words(b).gather(1, (tok_start & 7) * ((L + 7) // 8) + (tok_start >> 3))  # bytes start..start+7
    key = torch.where(length <= 8, head & take(t["byte_mask"], length.clamp(max=8)), -1)
    prefix = hash_prefix(b)
    tok_hash = span_hash(prefix, tok_start, tok_end)
    kw = keyword_kinds(key)
    tok_kind = torch.where((tok_kind == spec.TOK["name"]) & (kw != 0), kw, tok_kind)

    p0, p1 = head & 255, (head >> 8) & 255
    value, slow = _numbers(t, b, trans, end_pos, tok_start, tok_end, tok_kind == spec.TOK["number"])
    bad_letter = lambda c: (c | 32 == ord("b")) | (c | 32 == ord("f"))
    prefix_bad = (tok_kind == spec.TOK["string"]) & (bad_letter(p0) | ((p0 != 39) & (p0 != 34) & bad_letter(p1)))
    return Tokens(tok_kind, tok_start, tok_end, tok_line, tok_col, tok_line_start, key, tok_hash, value, slow, prefix_bad,
                  count, truncated, code, lex_line, lex_col, b, lengths, prefix)


def pack_key(word: str) -> int:
    k = 0
    for i, ch in enumerate(word.encode()):
        k |= ch << (8 * i)
    return k


_KEYWORDS = list(spec.KEYWORDS) + list(spec.BAD_KEYWORDS)
_KEYWORD_KINDS = [spec.TOK[w] for w in spec.KEYWORDS] + [spec.TOK["bad-keyword"]] * len(spec.BAD_KEYWORDS)


_KEYWORD_SLOTS: dict = {}


def _keyword_slots(device):
    """A perfect hash of the keywords' keys: (multiplier, key per slot, kind per slot) with the slot the
    top 10 bits of key * multiplier (mod 2^64); the multiplier is the first odd one without collisions."""
    if device not in _KEYWORD_SLOTS:
        keys = [pack_key(w) for w in _KEYWORDS]
        mult, slots = perfect_hash(keys, 10)
        slot_key, slot_kind = [-1] * 1024, [0] * 1024
        for k, kind, sl in zip(keys, _KEYWORD_KINDS, slots):
            slot_key[sl], slot_kind[sl] = k, kind
        _KEYWORD_SLOTS[device] = (mult, torch.tensor(slot_key, device=device), torch.tensor(slot_kind, device=device))
    return _KEYWORD_SLOTS[device]


def keyword_kinds(key: torch.Tensor) -> torch.Tensor:
    """Token kind for names that are keywords (0 for plain names)."""
    mult, slot_key, slot_kind = _keyword_slots(key.device)
    slot = ((key * mult) >> 54) & 1023
    return torch.where(take(slot_key, slot) == key, take(slot_kind, slot), 0)


_P = 0x100000001B3  # odd, so invertible modulo 2^64 (FNV's prime)
_MIX = 0x9E3779B97F4A7C15 - (1 << 64)  # the golden-ratio multiplier, as a signed int64
_POWERS: dict = {}


def _powers(n: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """P^j and P^-j modulo 2^64 (as wrapping int64) for j < n, cached per device and grown on demand."""
    have = _POWERS.get(device)
    if have is None or have[0].shape[0] < n:
        size = max(n, 2 * (have[0].shape[0] if have is not None else 1024))
        inv = pow(_P, -1, 1 << 64)
        fw, bw, a, b = [], [], 1, 1
        for _ in range(size):
            fw.append(signed64(a))
            bw.append(signed64(b))
            a, b = a * _P % (1 << 64), b * inv % (1 << 64)
        _POWERS[device] = have = (torch.tensor(fw, device=device), torch.tensor(bw, device=device))
    return have[0][:n], have[1][:n]


def hash_prefix(b: torch.Tensor) -> torch.Tensor:
    """[B, L + 1] prefix sums of b[j] * P^j modulo 2^64 (int64 arithmetic wraps), from 0."""
    L = b.shape[1]
    fw, _ = _powers(L + 1, b.device)
    return torch.cat([torch.zeros_like(b[:, :1]), (b * fw[:L]).cumsum(1)], 1)


def span_hash(prefix: torch.Tensor, start: torch.Tensor, end: torch.Tensor) -> torch.Tensor:
    """A 64-bit polynomial hash of each span [start, end) of bytes: differences of the hash_prefix sums,
    shifted back by P^-start."""
    L = prefix.shape[1] - 1
    _, bw = _powers(L + 1, prefix.device)
    start, end = start.clamp(0, L), end.clamp(0, L)
    h = (prefix.gather(1, end) - prefix.gather(1, start)) * take(bw, start)
    h = h * _MIX  # spread short names over all 64 bits (users of the hash may keep only the top bits)
    return h ^ (h >> 29)


_POW10 = [10.0 ** k for k in range(23)]


def _numbers(t, b, trans, end_pos, start, end, is_number):
    """Exact float64 values of decimal literals on the device (Clinger's fast path: an integer
    mantissa below 2^53 scaled by 10^k with |k| <= 22 is one correctly rounded operation); other
    literals (hex/octal/binary, more than 18 digits, big exponents) are flagged for the host.

    Per byte, the DFA's transition says whether it is a digit of the mantissa, of the fraction or of
    the exponent, the exponent's minus or a base prefix: counts packed in one int64 prefix sum. A
    digit weighs 10^(digits after it in its token), so one more prefix sum gives each token's digit
    string as an integer (mantissa * 10^n_exp + exponent); int64 arithmetic wraps, so the differences
    of prefix sums at token ends stay exact."""
    code = take(t["number"], trans)
    counts = torch.cat([torch.zeros_like(code[:, :1]), code.cumsum(1)], 1)  # [B, L + 1]: over [0, i)
    after = ((counts.gather(1, end_pos) - counts[:, 1:]) & _MASK16).clamp_(max=19)
    term = take(t["digit"], b) * take(t["pow10"], after)
    digits = torch.cat([torch.zeros_like(term[:, :1]), term.cumsum(1)], 1)
    c = counts.gather(1, end) - counts.gather(1, start)
    n_dig, n_frac, n_exp, top = c & _MASK16, (c >> 16) & _MASK16, (c >> 32) & _MASK16, c >> 48
    v = digits.gather(1, end) - digits.gather(1, start)
    scale = take(t["pow10"], n_exp.clamp(max=18))
    m = v // scale
    e = v - m * scale
    k = torch.where((top & 1).bool(), -e, e) - n_frac
    slow = is_number & ((n_dig > 18) | (n_exp > 4) | (m >= 2 ** 53) | (k.abs() > 22) | (top > 1))
    k = (k + 22).clamp_(0, 44)
    value = m.to(torch.float64) * take(t["scale_up"], k) / take(t["scale_down"], k)  # m * 10^k or m / 10^-k
    value = torch.where(is_number & ~slow, value, 0.0)
    return value, slow
