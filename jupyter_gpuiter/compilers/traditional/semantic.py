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
from .common import BIG, FirstError, error_base, error_key, gather, next_true, perfect_hash, positions, take
from .lex import Tokens, pack_key
from .parse import N_ATTR, N_BIN, N_CALL, N_NAME, N_TUPLE, Tree
from .rules import Structure, isin

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
    """A perfect hash of the builtin and constant names' packed keys: (multiplier, per-slot tables
    key, constant index, builtin index, arity low, arity high), the slot the top 8 bits of
    key * multiplier (mod 2^64). Slot 256 is the miss slot (index -1); empty slots hold a key that
    hashes elsewhere, so only an exact key match hits."""
    if device not in _NAME_SLOTS:
        names = sorted(set(CONSTANT_NAMES) | set(BUILTIN_NAMES))
        keys = [pack_key(n) for n in names]
        mult, slots = perfect_hash(keys, 8)
        spare = next(k for k, sl in zip(keys, slots) if sl != 0)  # for empty slots
        rows = [[spare if sl != slots[keys.index(spare)] else keys[0], -1, -1, 0, 0] for sl in range(257)]
        for n, k, sl in zip(names, keys, slots):
            b = spec.BUILTINS.get(n)
            rows[sl] = [k, CONSTANT_NAMES.index(n) if n in spec.CONSTANTS else -1,
                        BUILTIN_NAMES.index(n) if b else -1, b.arity[0] if b else 0, b.arity[1] if b else 0]
        cols = torch.tensor(rows, dtype=torch.long, device=device).T.contiguous()
        _NAME_SLOTS[device] = (mult, *cols)
    return _NAME_SLOTS[device]


def analyse(tk: Tokens, st: Structure, tr: Tree) -> Semantics:
    kind = tk.kind
    dev = kind.device
    B, T = kind.shape
    pos = positions(kind)
    errors = FirstError(B, dev)

    def fail(mask, message, base):
        errors.add(mask, base, KIND_CODES[MESSAGES[MSG[message] - MSG_BASE][0]], MSG[message])

    at_token: dict[int, torch.Tensor] = {}

    def token_base(priority):  # errors reported at the token itself
        if priority not in at_token:
            at_token[priority] = error_base(tk.line, tk.col, priority)
        return at_token[priority]

    def at(p):  # line and col of token positions p
        return gather(tk.line, p), gather(tk.col, p)

    expr_prio = 3 + tr.depth  # below statement errors (0..2); outer expressions first, as in the serial walk

    # the header: def NAME ( [NAME {, NAME} [,]] ) : with the body on the next lines or after the colon
    ho, hc, colon = st.header_open, st.header_close, st.header_colon
    nl = kind == K["newline"]
    first_nl = torch.where(nl.any(1), nl.long().argmax(1), tk.count)
    inside = (pos > ho[:, None]) & (pos < hc[:, None])
    prev = torch.cat([torch.full_like(kind[:, :1], K["newline"]), kind[:, :-1]], 1)
    bad_param = inside & (((kind == K["name"]) & ~isin(prev, [K["("], K[","]])) |
                          ((kind == K[","]) & (prev != K["name"])))
    header_bad = (gather(kind, torch.ones_like(ho)) != K["name"]) | (ho != 2) | (hc < 0) | (colon < 0) | \
        bad_param.any(1) | (~st.one_line & (colon + 1 != first_nl))
    header_col = torch.where(bad_param.any(1), gather(tk.col, bad_param.long().argmax(1)), 1)

    # statements after the parse: syntax errors first
    has_syntax = tr.syntax < BIG
    sfirst = gather(tr.stmt_first, tr.syntax)
    syn_line = torch.where(header_bad, gather(tk.line, torch.zeros_like(ho)), gather(tk.line, sfirst))
    syn_col = torch.where(header_bad, header_col, gather(tk.col, tr.syntax))
    syntax = header_bad | has_syntax
    syntax_key = error_key(syn_line, syn_col, 0, KIND_CODES["syntax"], MSG["invalid syntax"])

    # name resolution: one event per token, sorted by (48 bits of the name hash, time): references
    # (time 2p), parameters (2p + 1), assignment and aug targets (2 * end + 1); times < 2^13
    is_param = inside & (kind == K["name"]) & (st.enclosing == ho[:, None])
    param_index = is_param.long().cumsum(1) - 1
    n_params = param_index[:, -1] + 1
    stmt_end = next_true(nl).clamp(max=T)  # statement's NEWLINE
    stmt_end = torch.where(stmt_end < tk.count[:, None], stmt_end, tk.count[:, None])
    first = tr.body & (tr.stmt_first == pos)
    skind = gather(tr.stmt_kind, tr.stmt_first)
    is_target = tr.target_of >= 0  # target atoms (at the atom's token)
    target_node = torch.where(is_target, tr.stmt_targets, -1)
    tnode_mask = torch.zeros((B, T + 1), dtype=torch.bool, device=dev)
    tnode_mask.scatter_(1, torch.where(is_target, target_node.clamp(min=0), T), True)
    tnode_mask = tnode_mask[:, :T]
    name_node = tr.body & (tr.ntype == N_NAME)
    calls = tr.body & (tr.ntype == N_CALL)
    plain_call = calls & (tr.attr < 0)
    callee = torch.zeros((B, T + 1), dtype=torch.bool, device=dev)
    callee.scatter_(1, torch.where(plain_call & (tr.callee >= 0), tr.callee, T), True)
    callee = callee[:, :T]
    target_name = tnode_mask & name_node
    aug_target = target_name & (skind == 2)
    asg_target = target_name & (skind == 1)
    value_ref = name_node & ~tnode_mask
    h13 = (tk.hash >> 14) << 13
    ref_key = h13 | (2 * pos)  # what every token looks up: the latest binding before time 2p
    sort_key = torch.where(value_ref | callee, ref_key, torch.where(is_param, ref_key | 1, torch.where(
        asg_target | aug_target, h13 | (2 * stmt_end + 1), h13 | ((1 << 13) - 2))))
    sv, order = sort_key.sort(dim=1)
    # a running max of (hash, binding token + 1) over the sorted events: the latest binding so far
    # in each hash group, as a binding's token grows with its time within a group
    top = sv & -(1 << 13)
    run = torch.where((sv & 1).bool(), top | (order + 1), top).cummax(1).values
    run = torch.cat([torch.zeros_like(run[:, :1]), run], 1).gather(1, torch.searchsorted(sv, ref_key))
    bind_at = torch.where((run & -(1 << 13)) == h13, run & ((1 << 13) - 1), 0)  # binding token + 1, or 0
    # a binding's source: the value node, the aug operator token, or a parameter's own token
    bind_src = torch.where(asg_target, gather(tr.stmt_value, tr.stmt_first),
                           torch.where(aug_target, gather(tr.stmt_aug, tr.stmt_first), pos))
    ref_src = torch.cat([torch.full_like(pos[:, :1], -1), bind_src], 1).gather(1, bind_at)
    # a parameter bound before its own binding has a duplicate name (only parameters bind that early)
    fail(is_param & (bind_at > 0), "duplicate parameter", token_base(0))

    # follow aliases (`y = x` binds y to x's source) by pointer jumping: each token points to its
    # source if it is a bound reference, else to itself, so jumping ends at the alias chain's end
    alias = value_ref & (ref_src >= 0)
    nxt = torch.where(alias, ref_src, pos)
    for _ in range(max(1, T.bit_length())):
        nxt = nxt.gather(1, nxt)
    # sources of bound references: the chain's end from their source; parameters as T + index
    src = torch.where(is_param, T + param_index, pos).gather(1, nxt.gather(1, ref_src.clamp(min=0)))

    name_key = gather(tk.key, tr.name_tok)
    mult, slot_key, slot_const, slot_builtin, slot_lo, slot_hi = _name_slots(dev)
    slot = ((name_key * mult) >> 56) & 255
    slot = torch.where(take(slot_key, slot) == name_key, slot, 256)
    const_idx, builtin_idx = take(slot_const, slot), take(slot_builtin, slot)
    bound = ref_src >= 0
    is_ref = value_ref & bound
    ns_line, ns_col = at(tr.node_start)
    expr_base = error_base(ns_line, ns_col, expr_prio)
    # values: names and math.NAME
    value_attr = tr.body & (tr.ntype == N_ATTR) & ~tnode_mask
    loose = (value_ref & ~bound) | value_attr
    const_name = torch.where(loose & (const_idx >= 0), const_idx, -1)
    fail(loose & (const_idx < 0) & (builtin_idx >= 0), "this is a function: call it", expr_base)
    fail(loose & (const_idx < 0) & (builtin_idx < 0), "name is not defined", expr_base)
    fail(aug_target & ~bound, "name is not defined", token_base(3 + 1))  # an aug target: depth 1
    # calls
    callee_bound = plain_call & gather(bound, tr.callee)
    fail(callee_bound, "this is a variable here, not a function", expr_base)
    plain = calls & ~callee_bound
    fail(plain & (const_idx >= 0), "this is a constant, not a function", expr_base)
    fail(plain & (const_idx < 0) & (builtin_idx < 0), "not a builtin function", expr_base)
    lo, hi = take(slot_lo, slot), take(slot_hi, slot)
    arity_bad = plain & (const_idx < 0) & (builtin_idx >= 0) & ((tr.n_args < lo) | (tr.n_args > hi))
    fail(arity_bad, "wrong number of arguments for this builtin", expr_base)
    fail(tr.body & (tr.ntype == N_BIN) & tr.chained, "chained comparisons are not supported: use `and`",
         expr_base)
    fail(tr.body & (tr.ntype == N_TUPLE) & ~tnode_mask, "tuples are not supported", expr_base)
    builtin = torch.where(calls & ~arity_bad & (builtin_idx >= 0) & (const_idx < 0), builtin_idx, -1)

    # statements
    is_ret = first & (skind == 3)
    ret_rank = is_ret.long().cumsum(1)
    after_return = first & ((ret_rank - is_ret.long()) > 0)
    fail(after_return, "code after return is never run", token_base(0))
    fail(first & (skind == 1) & (gather(tr.n_targets, tr.stmt_first) > 1),
         "chained assignment: assign one name at a time", token_base(1))
    tgt_line, tgt_col = at(gather(tr.node_start, target_node))
    fail(is_target & ~gather(name_node, target_node), "can only assign to a plain name",
         error_base(tgt_line, tgt_col, 1))
    fail(is_ret & (gather(tr.stmt_value, pos) < 0), "return needs a value", token_base(1))
    fail(first & (skind == 4), "an expression on its own has no effect: assign or return it", token_base(1))
    doc_first = st.docstring & ~torch.cat([torch.zeros_like(st.docstring[:, :1]), st.docstring[:, :-1]], 1)
    starts = first | doc_first
    last_stmt = torch.where(starts.any(1), torch.where(starts, pos, -1).max(1).values, 0)
    last_kind = gather(tr.stmt_kind, last_stmt)
    last_is_ret = gather(first.long(), last_stmt).bool() & (last_kind == 3)
    fail((pos == last_stmt[:, None]) & ~last_is_ret[:, None] & (tk.count > 0)[:, None],
         "the function must end with `return <expr>`", token_base(2))

    error = torch.where(syntax, syntax_key, errors.key)
    return Semantics(torch.where(is_ref | (aug_target & bound), src, -1), const_name, builtin, is_ref, n_params, error)
