"""Pass 4, semantic: name resolution and checks, per node, as sorts and scans over the batch.

Names resolve by one sort of [B, T] events (one per token) by (name hash, time): parameters bind at
the header, assignment and aug targets at the end of their statement, and a running max over the
sorted events gives the latest binding in each hash group; every token looks up the latest binding
before its own time (a `searchsorted`), which covers an aug target's read of its old value.
Aliases (`y = x`) are followed by pointer jumping (each round one gather). Builtin and constant
names are found by a perfect hash of their packed keys. Checks produce error keys ordered like the
serial compiler's: statement errors before the expression errors at the same place, outer
expressions before inner ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...lang import spec
from ...lang.errors import KIND_CODES
from .common import BIG, NO_ERROR, error_key, gather, perfect_hash, select, shift_left, shift_right, take
from .lex import Tokens, pack_key
from .parse import N_ATTR, N_BIN, N_CALL, N_NAME, N_TUPLE, Tree
from .rules import Structure

K = spec.TOK
MESSAGES = [
    ("unsupported", "code after return is never run"),
    ("unsupported", "chained assignment: assign one name at a time"),
    ("unsupported", "can only assign to a plain name"),
    ("unsupported", "return needs a value"),
    ("unsupported", "an expression on its own has no effect: assign or return it"),
    ("unsupported", "the function must end with `return <expr>`"),
    ("syntax", "duplicate parameter"),
    ("unknown-name", "name is not defined"),
    ("type", "this is a function: call it"),
    ("type", "this is a variable here, not a function"),
    ("type", "this is a constant, not a function"),
    ("unknown-function", "not a builtin function"),
    ("arity", "wrong number of arguments for this builtin"),
    ("unsupported", "chained comparisons are not supported: use `and`"),
    ("unsupported", "tuples are not supported"),
    ("syntax", "invalid syntax"),
]
MSG_BASE = 128  # message ids of this pass in error keys
MSG = {m: MSG_BASE + i for i, (_, m) in enumerate(MESSAGES)}
BUILTIN_NAMES = list(spec.BUILTINS)
CONSTANT_NAMES = list(spec.CONSTANTS)


@dataclass
class Semantics:
    source: torch.Tensor  # [B, T] for name references: binding source (node pos, or T + param index), else -1
    const_name: torch.Tensor  # [B, T] name/attr nodes that are constants: index into CONSTANT_NAMES, else -1
    builtin: torch.Tensor  # [B, T] call nodes: index into BUILTIN_NAMES, else -1
    is_ref: torch.Tensor  # [B, T] value-position name nodes bound to a local or parameter
    n_params: torch.Tensor  # [B]
    error: torch.Tensor  # [B] first error key


_NAME_SLOTS: dict = {}


def _name_slots(device):
    """A perfect hash of the builtin and constant names' packed keys: (multiplier, per-slot key [256]
    int64, per-slot info [256] int32), the slot the top 8 bits of key * multiplier (mod 2^64). Info
    packs constant index + 1 (bits 0-2), builtin index + 1 for builtins that are not constants
    (bits 3-8) and the builtin's arity range (bits 9-12, 13-16); empty slots hold a key that
    hashes elsewhere and info 0, so only an exact key match hits."""
    if device not in _NAME_SLOTS:
        names = sorted(set(CONSTANT_NAMES) | set(BUILTIN_NAMES))
        keys = [pack_key(n) for n in names]
        mult, slots = perfect_hash(keys, 8)
        spare = next(k for k, sl in zip(keys, slots) if sl != 0)  # for empty slots
        key_col = [spare if sl != slots[keys.index(spare)] else keys[0] for sl in range(256)]
        info_col = [0] * 256
        for n, k, sl in zip(names, keys, slots):
            b = spec.BUILTINS.get(n)
            const = CONSTANT_NAMES.index(n) + 1 if n in spec.CONSTANTS else 0
            builtin = BUILTIN_NAMES.index(n) + 1 if b and not const else 0
            lo, hi = b.arity if b else (0, 0)
            assert const < 8 and builtin < 64 and hi < 16
            key_col[sl], info_col[sl] = k, const | builtin << 3 | lo << 9 | hi << 13
        _NAME_SLOTS[device] = (mult, torch.tensor(key_col, dtype=torch.long, device=device),
                               torch.tensor(info_col, dtype=torch.int32, device=device))
    return _NAME_SLOTS[device]


K0 = (1 << 31) - 1  # error ranks are kept inverted, K0 - rank (see analyse)
INT64_MAX = (1 << 63) - 1


def _cm(message: str) -> int:
    """A message's kind code and id in 7 bits, code * 16 + id - MSG_BASE: ordered like them in error keys."""
    return KIND_CODES[MESSAGES[MSG[message] - MSG_BASE][0]] * 16 + MSG[message] - MSG_BASE


def _marks(mask: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """[B, T] bool, True at idx[b, i] for the masked i (each place marked by at most one masked i)."""
    out = torch.zeros(mask.shape, dtype=torch.uint8, device=mask.device)
    return out.scatter_add_(1, idx, mask.view(torch.uint8)).bool()


def analyse(tk: Tokens, st: Structure, tr: Tree) -> Semantics:
    kind = tk.kind
    dev = kind.device
    B, T = kind.shape
    i32 = torch.int32
    pos = torch.arange(T, dtype=i32, device=dev)  # [T], broadcast over the rows
    pos64 = torch.arange(T, device=dev)
    countdown = T - pos  # (mask * countdown).amax(1): T - the first masked position, 0 if none
    count = tk.count.int()
    valid = pos < count[:, None]

    # Errors. Every error of this pass is at a token, and tokens' (line, col) grow with their
    # position, so the first error is the least (place, priority, kind code, message) with place =
    # position + 1 (0 for padding, at line 0 col 0): an int32 rank place << 19 | (priority + 1) << 7
    # | code << 4 | message - MSG_BASE (place <= T + 1 < 2^12, priority < T + 4 < 2^12). Ranks are
    # kept inverted, K0 - rank, so that a rule is (inverted base - constant) * mask into a running
    # maximum, where 0 is no error; one row maximum at the end.
    inv_place = K0 - (((pos + 1) * valid) << 19)
    best = torch.zeros((B, T), dtype=i32, device=dev)

    def fail(mask, message, inv_base, priority):
        nonlocal best
        best = torch.maximum(best, (inv_base - (((priority + 1) << 7) + _cm(message))) * mask)

    # the header: def NAME ( [NAME {, NAME} [,]] ) : with the body on the next lines or after the colon
    ho, hc, colon = st.header_open, st.header_close, st.header_colon
    is_name, is_comma, nl = kind == K["name"], kind == K[","], kind == K["newline"]
    inside = (pos > ho.int()[:, None]) & (pos < hc.int()[:, None])
    after_open_comma = shift_right((kind == K["("]) | is_comma, False)
    after_name = shift_right(is_name, False)
    bad_param = inside & ((is_name & ~after_open_comma) | (is_comma & ~after_name))
    bad_left = (bad_param * countdown).amax(1)
    nl_left = (nl * countdown).amax(1)
    first_nl = torch.where(nl_left > 0, T - nl_left, count)
    header_bad = (kind[:, min(1, T - 1)] != K["name"]) | (ho != 2) | (hc < 0) | (colon < 0) | (bad_left > 0) | \
        (~st.one_line & (colon + 1 != first_nl))
    header_col = torch.where(bad_left > 0, gather(tk.col, (T - bad_left).long()), 1)

    # statements after the parse: syntax errors first
    has_syntax = tr.syntax < BIG
    sfirst = gather(tr.stmt_first, tr.syntax)
    syn_line = torch.where(header_bad, tk.line[:, 0], gather(tk.line, sfirst))
    syn_col = torch.where(header_bad, header_col, gather(tk.col, tr.syntax))
    syntax = header_bad | has_syntax
    syntax_key = error_key(syn_line, syn_col, 0, KIND_CODES["syntax"], MSG["invalid syntax"])

    # name resolution: one event per token, sorted by (the name hash's top 50 bits, time): references
    # (time 2p), parameters (2p + 1), assignment and aug targets (2 * end + 1); times < 2^13. Other
    # tokens sort last.
    is_param = inside & is_name & (st.enclosing == ho[:, None])
    param_index = is_param.cumsum(1, dtype=i32) - 1
    n_params = param_index[:, -1].long() + 1
    nl_at = nl * (pos - T) + T
    stmt_end = torch.minimum(shift_left(nl_at, T).flip(1).cummin(1).values.flip(1), count[:, None])  # its NEWLINE
    sf = tr.stmt_first.clamp(min=0)
    first = tr.body & (tr.stmt_first == pos64)
    skind = tr.stmt_kind.gather(1, sf)
    is_target = tr.target_of >= 0  # target atoms (at the atom's token)
    tnode = _marks(is_target, tr.stmt_targets)
    name_node = tr.body & (tr.ntype == N_NAME)
    calls = tr.body & (tr.ntype == N_CALL)
    plain_call = calls & (tr.attr < 0)
    callee_at = tr.callee.clamp(min=0)
    callee = _marks(plain_call & (tr.callee >= 0), callee_at)
    target_name = tnode & name_node
    aug_target = target_name & (skind == 2)
    asg_target = target_name & (skind == 1)
    value_ref = name_node & ~tnode
    ref = value_ref | callee
    ref_or_param = ref | is_param
    binds = (is_param & ~ref) | ((asg_target | aug_target) & ~ref_or_param)
    time = select(ref_or_param, 2 * pos + (is_param & ~ref), 2 * stmt_end + 1)
    key = torch.where(ref_or_param | binds, (tk.hash & -(1 << 14)) | (time.long() << 1), INT64_MAX)
    sv, order = key.sort(dim=1)
    # a running max of (hash group ordinal, binding token + 1) over the sorted events; every event
    # takes the value before its key (ties: targets of one statement), the latest earlier binding
    # of its name, which covers an aug target's read of its old value
    diff = sv ^ shift_right(sv, 0)
    group = ((diff >> 14) != 0).cumsum(1, dtype=i32) << 12
    run = (group + ((pos + 1) * binds).gather(1, order)).cummax(1).values
    key_start = ((diff != 0) * pos).cummax(1).values
    before = torch.cat([torch.zeros_like(run[:, :1]), run], 1).gather(1, key_start.long())
    bind_at = torch.empty_like(run).scatter_(1, order, (before - group).clamp_(min=0))  # binding token + 1, or 0
    # a binding's source: the value node, the aug operator token, or a parameter's own token
    bind_src = select(asg_target, tr.stmt_value.gather(1, sf).int(),
                      select(aug_target, tr.stmt_aug.gather(1, sf).int(), pos))
    ref_src = torch.cat([torch.full_like(bind_src[:, :1], -1), bind_src], 1).gather(1, bind_at.long())
    # a parameter bound before its own binding has a duplicate name (only parameters bind that early)
    fail(is_param & (bind_at > 0), "duplicate parameter", inv_place, 0)

    # follow aliases (`y = x` binds y to x's source) by pointer jumping: each token points to its
    # source if it is a bound reference, else to itself, so jumping ends at the alias chain's end.
    # Each link goes back one assignment statement (at least 4 tokens), so log2(T / 4) rounds do.
    bound = ref_src >= 0
    nxt = select(value_ref & bound, ref_src, pos).long()
    for _ in range(max(1, (T // 4).bit_length())):
        nxt = nxt.gather(1, nxt)
    # sources of bound references: the chain's end from their source; parameters as T + index
    src = select(is_param, T + param_index, pos).gather(1, nxt.gather(1, ref_src.clamp(min=0).long()))

    name_key = tk.key.gather(1, tr.name_tok.clamp(0, T - 1))
    mult, slot_key, slot_info = _name_slots(dev)
    slot = ((name_key * mult) >> 56) & 255
    info = take(slot_info, slot) * (take(slot_key, slot) == name_key)
    const1, builtin1 = info & 7, (info >> 3) & 63  # index + 1, or 0
    lo, hi = (info >> 9) & 15, info >> 13
    is_ref = value_ref & bound
    ns_inv = inv_place.gather(1, tr.node_start)
    expr_base = ns_inv - (tr.depth.int() << 7)  # priority 3 + depth: outer expressions first, as in the serial walk
    # values: names and math.NAME
    value_attr = tr.body & (tr.ntype == N_ATTR) & ~tnode
    loose = (value_ref & ~bound) | value_attr
    const_name = (const1 * loose - 1).long()
    not_const = const1 == 0
    fail(loose & not_const & (builtin1 > 0), "this is a function: call it", expr_base, 3)
    fail(loose & not_const & (builtin1 == 0), "name is not defined", expr_base, 3)
    fail(aug_target & ~bound, "name is not defined", inv_place, 3 + 1)  # an aug target: depth 1
    # calls
    callee_bound = plain_call & bound.gather(1, callee_at)
    fail(callee_bound, "this is a variable here, not a function", expr_base, 3)
    plain = calls & ~callee_bound
    fail(plain & ~not_const, "this is a constant, not a function", expr_base, 3)
    fail(plain & not_const & (builtin1 == 0), "not a builtin function", expr_base, 3)
    n_args = tr.n_args.int()
    arity_bad = plain & (builtin1 > 0) & ((n_args < lo) | (n_args > hi))
    fail(arity_bad, "wrong number of arguments for this builtin", expr_base, 3)
    fail(tr.body & (tr.ntype == N_BIN) & tr.chained, "chained comparisons are not supported: use `and`",
         expr_base, 3)
    fail(tr.body & (tr.ntype == N_TUPLE) & ~tnode, "tuples are not supported", expr_base, 3)
    builtin = (builtin1 * (calls & ~arity_bad) - 1).long()

    # statements
    stmt_kind = tr.stmt_kind
    is_ret = first & (stmt_kind == 3)
    ret_left = (is_ret * countdown).amax(1)
    fail(first & (pos > (T - ret_left)[:, None]), "code after return is never run", inv_place, 0)
    fail(first & (stmt_kind == 1) & (tr.n_targets > 1), "chained assignment: assign one name at a time", inv_place, 1)
    fail(is_target & ~name_node.gather(1, tr.stmt_targets), "can only assign to a plain name",
         ns_inv.gather(1, tr.stmt_targets), 1)
    fail(is_ret & (tr.stmt_value < 0), "return needs a value", inv_place, 1)
    fail(first & (stmt_kind == 4), "an expression on its own has no effect: assign or return it", inv_place, 1)
    doc_first = st.docstring & ~shift_right(st.docstring, False)
    last_stmt = (((first | doc_first) * (pos + 1)).amax(1) - 1).clamp(min=0).long()[:, None]  # 0 if none
    last_is_ret = first.gather(1, last_stmt) & (stmt_kind.gather(1, last_stmt) == 3)
    end_bad = ~last_is_ret[:, 0] & (count > 0)
    inv_end = inv_place.gather(1, last_stmt)[:, 0] - ((3 << 7) + _cm("the function must end with `return <expr>`"))
    top = torch.maximum(best.amax(1), inv_end * end_bad)

    rank = (K0 - top).long()
    at = rank >> 19  # position + 1, 0 for padding
    p = (at - 1).clamp(0, T - 1)[:, None]
    line, col = tk.line.gather(1, p)[:, 0] * (at > 0), tk.col.gather(1, p)[:, 0] * (at > 0)
    cm = rank & 127
    key = error_key(line, col, ((rank >> 7) & 4095) - 1, cm >> 4, MSG_BASE + (cm & 15))
    error = torch.where(syntax, syntax_key, torch.where(top > 0, key, NO_ERROR))
    return Semantics(select(is_ref | (aug_target & bound), src, -1).long(), const_name, builtin, is_ref, n_params,
                     error)
