"""Pass 4, semantic: name resolution and checks, per node, as sorts and scans over the batch.

Names resolve by one stable sort of (name hash, time) events per program: parameters bind at the
header, assignments at the end of their statement, and every reference takes the latest binding
before it in its hash group (a running max). Aliases (`y = x`) are followed by pointer jumping.
Checks produce error keys ordered like the serial compiler's: statement errors before the
expression errors at the same place, outer expressions before inner ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...lang import spec
from ...lang.errors import KIND_CODES
from .common import BIG, FirstError, error_base, error_key, gather, lookup, next_true, positions
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


def _lookup(key: torch.Tensor, names: list[str]) -> torch.Tensor:
    """Index into `names` of each packed name key, or -1."""
    return lookup(key, [pack_key(n) for n in names])


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
    first_nl = torch.where((kind == K["newline"]).any(1), (kind == K["newline"]).long().argmax(1), tk.count)
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

    # name resolution: events are references (time 2p) and bindings (time 2*end+1 / params 2p)
    is_param = inside & (kind == K["name"]) & (st.enclosing == ho[:, None])
    param_index = is_param.long().cumsum(1) - 1
    n_params = is_param.sum(1)
    stmt_end = next_true(kind == K["newline"]).clamp(max=T)  # statement's NEWLINE
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
    aug_target = tnode_mask & name_node & (skind == 2)
    asg_target = tnode_mask & name_node & (skind == 1)
    value_ref = name_node & ~tnode_mask
    ref_ev = value_ref | callee | aug_target
    bind_ev = is_param | asg_target | aug_target
    stmt_val = gather(tr.stmt_value, tr.stmt_first)  # the statement's value node
    aug_tok = gather(tr.stmt_aug, tr.stmt_first)
    bind_src = torch.where(is_param, T + param_index, torch.where(aug_target, aug_tok, stmt_val))
    ev_time = torch.cat([torch.where(ref_ev, 2 * pos, BIG), torch.where(bind_ev, torch.where(
        is_param, 2 * pos, 2 * stmt_end + 1), BIG)], 1)
    ev_hash = torch.cat([tk.hash, tk.hash], 1)
    ev_bind = torch.cat([torch.zeros_like(bind_ev), bind_ev], 1)
    ev_src = torch.cat([torch.full_like(pos, -1), bind_src], 1)
    # one sort by (48 bits of the name hash, time); times are below 2^13 (tokens <= 2050)
    sort_key = ((ev_hash >> 14) << 13) | ev_time.clamp(max=(1 << 13) - 1)
    order = sort_key.argsort(dim=1)
    h = (ev_hash >> 14).gather(1, order)
    seg = torch.cat([torch.zeros_like(h[:, :1]), (h[:, 1:] != h[:, :-1]).long()], 1).cumsum(1)
    n2 = 2 * T
    slot = torch.arange(n2, device=dev).expand(B, n2)
    is_b = ev_bind.gather(1, order) & (ev_time.gather(1, order) < BIG)
    run = torch.where(is_b, seg * (n2 + 1) + slot + 1, seg * (n2 + 1)).cummax(1).values
    found = (run // (n2 + 1) == seg) & (run % (n2 + 1) > 0)
    src_sorted = torch.where(found, ev_src.gather(1, order).gather(1, (run % (n2 + 1) - 1).clamp(min=0)), -1)
    # a binding found "before" a ref with equal time cannot happen: refs are even, bindings odd
    resolved = torch.full((B, n2), -1, dtype=torch.long, device=dev)
    resolved.scatter_(1, order, src_sorted)
    ref_src = resolved[:, :T]
    # duplicate parameters: a parameter whose name's previous event (params sort first) is a parameter
    is_p = torch.cat([torch.zeros_like(is_param), is_param], 1).gather(1, order)
    dup = is_p & torch.cat([torch.zeros_like(is_p[:, :1]), is_p[:, :-1] & (seg[:, 1:] == seg[:, :-1])], 1)
    dup_tok = torch.zeros((B, n2), dtype=torch.bool, device=dev)
    dup_tok.scatter_(1, order, dup)
    fail(dup_tok[:, T:], "duplicate parameter", token_base(0))

    # follow aliases (`y = x` binds y to x's source) by pointer jumping
    # (on arrays with a sentinel first column, and parameter sources coded below -1, so that the
    # token a source points to is the column (src + 1).clamp(min=0), the sentinel for none and params)
    src = torch.where(value_ref | aug_target, ref_src, -1)
    src = torch.cat([torch.full_like(src[:, :1], -1), torch.where(src >= T, T - 2 - src, src)], 1)
    alias = torch.cat([torch.zeros_like(value_ref[:, :1]), value_ref & (ref_src >= 0)], 1)
    for _ in range(max(1, (T + 1).bit_length())):
        at_src = (src + 1).clamp(min=0)
        src = torch.where(alias.gather(1, at_src), src.gather(1, at_src), src)
    src = src[:, 1:]
    src = torch.where(src < -1, T - 2 - src, src)

    name_key = gather(tk.key, tr.name_tok)
    const_idx = _lookup(name_key, CONSTANT_NAMES)
    builtin_idx = _lookup(name_key, BUILTIN_NAMES)
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
    lo = torch.tensor([b.arity[0] for b in spec.BUILTINS.values()], device=dev)[builtin_idx.clamp(min=0)]
    hi = torch.tensor([b.arity[1] for b in spec.BUILTINS.values()], device=dev)[builtin_idx.clamp(min=0)]
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
