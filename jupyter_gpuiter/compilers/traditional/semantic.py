"""Pass 4, semantic: name resolution and checks, per node, as sorts and scans over the batch.

Names resolve by one sort of [B, T] events (one per name token) by (name hash, time): parameters
bind at the header, assignment and aug targets at the end of their statement, and a running max
over the sorted events gives the latest binding in each hash group; every event reads the value
before its key, the latest binding before its own time, which covers an aug target's read of its
old value. Aliases (`y = x`) are followed by pointer jumping (each round one gather). Builtin and
constant names are found by a perfect hash of their packed keys. Checks produce errors ordered like
the serial compiler's: statement errors before the expression errors at the same place, outer
expressions before inner ones.

Costs on a CPU: everything but the sort keys and the gather indices is int32, uint8 or bool; a
comparison that makes a bool costs several int32 operations, a full-mask `where` a dozen, so masks
combine as bools and values as arithmetic (common.select). Errors are int32 ranks in one running
maximum (see analyse); the rules of one place and priority set uint8 codes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...lang import spec
from ...lang.diagnostics import DIAGNOSTICS as TABLE
from ...lang.diagnostics import ORDER
from ...lang.errors import KIND_CODES
from .batch_lexer import Tokens, pack_key
from .batch_rules import Structure
from .common import (
    BIG,
    NO_ERROR,
    eq,
    error_key,
    first_true,
    gather,
    next_true,
    perfect_hash,
    select,
    shift_right,
    take,
)
from .parse import N_ATTR, N_BIN, N_CALL, N_NAME, N_TUPLE, Tree

K = spec.TOK
#: This pass's error codes: MSG_BASE + index -> diagnostic id (lang/diagnostics.py). The index ranks
#: the errors of one kind at one place and priority, in the table's order. The host reads a name's
#: fields from the source (an unknown name followed by `.NAME` is an unknown_attribute).
DIAGNOSTICS = [
    "code_after_return", "chained_assignment", "assignment_target", "return_without_value", "expression_statement",
    "missing_return", "duplicate_parameter", "unknown_name", "function_as_value", "variable_called",
    "constant_called", "unknown_function", "arity", "chained_comparison", "tuple", "unknown_name_augmented",
]
MSG_BASE = 128  # message ids of this pass in error keys
MSG = {d: MSG_BASE + i for i, d in enumerate(DIAGNOSTICS)}
assert [ORDER[d] for d in DIAGNOSTICS] == sorted(ORDER[d] for d in DIAGNOSTICS)  # ties ranked as the serial compiler does
#: The code of a syntax error of the parse pass or of the `def` header: CPython's parser states it on the host.
PARSE_SYNTAX = MSG_BASE + len(DIAGNOSTICS)
BUILTIN_NAMES = list(spec.BUILTINS)
CONSTANT_NAMES = list(spec.CONSTANTS)


@dataclass
class Semantics:
    """int32 but for the bools and the error key (int64)."""

    source: torch.Tensor  # [B, T] name references: binding source (node pos, or T + param index), others themselves
    const_name: torch.Tensor  # [B, T] name/attr nodes that are constants: index into CONSTANT_NAMES, else -1
    builtin: torch.Tensor  # [B, T] call nodes: index into BUILTIN_NAMES, else -1
    is_ref: torch.Tensor  # [B, T] value-position name nodes bound to a local or parameter
    n_params: torch.Tensor  # [B]
    error: torch.Tensor  # [B] first error key
    binding: torch.Tensor  # [B, T] the binding each name event resolved to by hash (a token), else -1


_NAME_SLOTS: dict = {}
u8, i32 = torch.uint8, torch.int32
K0 = (1 << 31) - 1  # error ranks are kept inverted, K0 - rank (see analyse)
INT64_MAX = (1 << 63) - 1


def _cm(ident: str) -> int:
    """A diagnostic's kind code and index in 7 bits, code * 16 + index: ordered like them in error keys."""
    return KIND_CODES[TABLE[ident].kind] * 16 + MSG[ident] - MSG_BASE


def _rank(ident: str, priority: int) -> int:
    """The low 19 bits of an error's rank: (priority + 1) << 7 | kind code and message."""
    return ((priority + 1) << 7) + _cm(ident)


assert len(DIAGNOSTICS) <= 16 and all(KIND_CODES[TABLE[d].kind] < 8 for d in DIAGNOSTICS)  # 7-bit codes and messages
# uint8 codes of the rules that share a place and priority: larger is first, 0 is none
_TOKEN_RULES = {"duplicate_parameter": 0, "code_after_return": 0, "chained_assignment": 1, "return_without_value": 1,
                "expression_statement": 1}  # at the token, by priority
_TOKEN_TOP = max(_rank(m, p) for m, p in _TOKEN_RULES.items()) + 1
_TOKEN_CODE = {m: _TOKEN_TOP - _rank(m, p) for m, p in _TOKEN_RULES.items()}
assert max(_TOKEN_CODE.values()) < 256
_EXPR_CODE = {m: 128 - _cm(m) for m in DIAGNOSTICS}  # at the node's first token, priority 3 + depth
assert _EXPR_CODE["unknown_function"] > _EXPR_CODE["arity"]


def _name_slots(device):
    """A perfect hash of the builtin and constant names' packed keys: (multiplier, per-slot key, info
    and wrong arities [256]), the slot the top byte of key * multiplier (mod 2^64). Empty slots hold
    a key that hashes elsewhere and info 0, so only an exact key match hits. Info (int32) packs what
    a name is: bits 0-6 its error code as a value, 7-13 as a callee (each XOR the code of a name
    that is not in the table, so info 0 reads as one), 14-16 constant index + 1, 17-22 builtin
    index + 1 (not for constants). Wrong arities (int32): bit min(n, 9) set if a builtin does not
    take n arguments."""
    if device not in _NAME_SLOTS:
        names = sorted(set(CONSTANT_NAMES) | set(BUILTIN_NAMES))
        keys = [pack_key(n) for n in names]
        mult, slots = perfect_hash(keys, 8)
        spare = next(k for k, sl in zip(keys, slots) if sl != 0)  # for empty slots
        key_col = [spare if sl != slots[keys.index(spare)] else keys[0] for sl in range(256)]
        info_col, arity_col = [0] * 256, [0] * 256
        undefined, not_builtin = _EXPR_CODE["unknown_name"], _EXPR_CODE["unknown_function"]
        for n, k, sl in zip(names, keys, slots):
            b = spec.BUILTINS.get(n)
            const = CONSTANT_NAMES.index(n) + 1 if n in spec.CONSTANTS else 0
            builtin = BUILTIN_NAMES.index(n) + 1 if b and not const else 0
            lo, hi = b.arity if builtin else (0, 9)
            assert hi < 9 or not builtin  # min(n, 9) = 9 is wrong for every builtin
            as_value = 0 if const else _EXPR_CODE["function_as_value"]
            as_callee = _EXPR_CODE["constant_called"] if const else 0
            assert builtin < 64
            key_col[sl] = k
            info_col[sl] = (as_value ^ undefined) | (as_callee ^ not_builtin) << 7 | const << 14 | builtin << 17
            arity_col[sl] = sum(1 << n for n in range(10) if not lo <= n <= hi)
        _NAME_SLOTS[device] = (mult, *(torch.tensor(c, dtype=dt, device=device)
                                       for c, dt in ((key_col, torch.long), (info_col, i32), (arity_col, i32))))
    return _NAME_SLOTS[device]


def _neg(x: torch.Tensor) -> torch.Tensor:
    """x < 0 for an int32 tensor, as bool: its sign by a shift (cheaper than a comparison on a CPU)."""
    return (x >> 31).bool()


def _marks(mask: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """[B, T] bool, True at idx[b, i] for the masked i (each place marked by at most one masked i)."""
    if mask.is_cuda:  # bool scatters to a spare column there
        B, T = mask.shape
        out = torch.zeros((B, T + 1), dtype=torch.bool, device=mask.device)
        return out.scatter_(1, torch.where(mask, idx, T).long(), True)[:, :T]
    out = torch.zeros(mask.shape, dtype=u8, device=mask.device)
    return out.scatter_add_(1, idx.long(), mask.view(u8)).clamp_(max=1).view(torch.bool)


def _decode(inv_base: torch.Tensor, code: torch.Tensor) -> torch.Tensor:
    """Inverted ranks of a family of uint8 codes: inv_base + code where code > 0, else 0 (in place
    of inv_base)."""
    c = code.int()
    return inv_base.add_(c).mul_(c.clamp_(max=1))


def analyse(tk: Tokens, st: Structure, tr: Tree) -> Semantics:
    kind = tk.kind.to(u8)
    dev = kind.device
    B, T = kind.shape
    assert T < 4096  # (2 * spec.MAX_TOKENS + 2) for 13-bit times and 12-bit places and priorities
    pos = torch.arange(T, dtype=i32, device=dev)  # [T], broadcast over the rows
    count = tk.count
    valid = pos < count[:, None]
    body = tr.body
    ntype = tr.ntype

    # Errors. Every error of this pass is at a token, and tokens' (line, col) grow with their
    # position, so the first error is the least (place, priority, kind code, message) with place =
    # position + 1 (0 for padding, at line 0 col 0): an int32 rank place << 19 | (priority + 1) << 7
    # | code << 4 | message - MSG_BASE (place <= T < 2^12, priority <= depth + 3 < 2^12). Ranks are
    # kept inverted, K0 - rank, so that errors meet in a running maximum where 0 is none; one row
    # maximum at the end. Rules of one place and priority set uint8 codes (larger first).
    inv_place = ((pos + 1) * valid).bitwise_left_shift_(19).neg_().add_(K0)
    token_code = torch.zeros((B, T), dtype=u8, device=dev)
    expr_code = torch.zeros((B, T), dtype=u8, device=dev)

    def at_token(mask, ident):
        nonlocal token_code
        token_code = torch.maximum(token_code, mask.view(u8) * _TOKEN_CODE[ident])

    def at_node(mask, ident_or_codes):
        nonlocal expr_code
        code = _EXPR_CODE[ident_or_codes] if isinstance(ident_or_codes, str) else ident_or_codes
        expr_code = torch.maximum(expr_code, mask.view(u8) * code)

    # the header: def NAME ( [NAME {, NAME} [,]] ) : with the body on the next lines or after the colon
    ho, hc, colon = st.header_open, st.header_close, st.header_colon
    is_name, is_comma, nl = eq(kind, K["name"]), eq(kind, K[","]), eq(kind, K["newline"])
    inside = (pos > ho[:, None]) & (pos < hc[:, None])
    after_open_comma = shift_right(eq(kind, K["("]) | is_comma, False)
    after_name = shift_right(is_name, False)
    bad_param = inside & ((is_name & ~after_open_comma) | (is_comma & ~after_name))
    bad_first, first_nl = first_true(bad_param), first_true(nl)
    first_nl = torch.where(first_nl >= 0, first_nl, count)
    header_bad = (kind[:, min(1, T - 1)] != K["name"]) | (ho != 2) | (hc < 0) | (colon < 0) | (bad_first >= 0) | \
        (~st.one_line & (colon + 1 != first_nl))
    header_col = torch.where(bad_first >= 0, gather(tk.col, bad_first), 1)

    # statements after the parse: syntax errors first
    has_syntax = tr.syntax < BIG
    sfirst = gather(tr.stmt_first, tr.syntax)
    syn_line = torch.where(header_bad, tk.line[:, 0], gather(tk.line, sfirst))
    syn_col = torch.where(header_bad, header_col, gather(tk.col, tr.syntax))
    syntax = header_bad | has_syntax
    syntax_key = error_key(syn_line, syn_col, 0, KIND_CODES[TABLE["python_syntax"].kind], PARSE_SYNTAX)

    # name resolution: one event per token, sorted by (the name hash's top 50 bits, time): references
    # (time 2p), parameters (2p + 1), assignment and aug targets (2 * end + 1); times < 2^13. Other
    # tokens sort last.
    is_param = inside & is_name & eq(st.enclosing, ho[:, None])
    n_before = is_param.cumsum(1, dtype=i32)  # parameters up to each token: a parameter's index + 1
    n_params = n_before[:, -1].clone()
    stmt_end = torch.minimum(next_true(nl), count[:, None])  # its NEWLINE
    sf = tr.stmt_first.clamp(min=0).long()  # (on two threads a conversion and gathers beat index_select)
    first = body & eq(tr.stmt_first, pos)
    stmt_kind = tr.stmt_kind
    skind = stmt_kind.gather(1, sf)
    is_target = ~_neg(tr.target_of)  # target atoms (at the atom's token)
    tnode = _marks(is_target, tr.stmt_targets)  # their value nodes (through parentheses)
    name_node = body & eq(ntype, N_NAME)
    calls = body & eq(ntype, N_CALL)
    plain_call = calls & _neg(tr.attr)
    callee_at = tr.callee.clamp(min=0).long()
    callee = _marks(plain_call & ~_neg(tr.callee), callee_at)
    target_name = tnode & name_node
    aug_target = target_name & eq(skind, 2)
    asg_target = target_name & eq(skind, 1)
    value_ref = name_node & ~tnode
    ref = value_ref | callee
    ref_or_param = ref | is_param
    binds = (is_param & ~ref) | ((asg_target | aug_target) & ~ref_or_param)
    time = select(ref_or_param, 2 * pos + (is_param & ~ref), stmt_end.mul_(2).add_(1))
    key = select(ref_or_param | binds, (tk.hash & -(1 << 14)).bitwise_or_(time.bitwise_left_shift_(1).long()),
                 INT64_MAX)
    sv, order = key.sort(dim=1)
    # a running max of (hash group ordinal, binding token + 1) over the sorted events; every event
    # takes the value before its key (ties: targets of one statement), the latest earlier binding
    # of its name, which covers an aug target's read of its old value
    diff = sv ^ shift_right(sv, 0)
    group = (diff >> 14).bool().cumsum(1, dtype=i32).bitwise_left_shift_(12)
    run = ((pos + 1) * binds).gather(1, order).add_(group).cummax(1).values
    key_start = (diff.bool() * pos).cummax(1).values
    before = torch.cat([torch.zeros_like(run[:, :1]), run], 1).gather(1, key_start.long())
    bind_at = torch.empty_like(run).scatter_(1, order, before.sub_(group).clamp_(min=0))  # binding token + 1, or 0
    # a binding's source: the value node, the aug operator token, or a parameter's own token
    stmt_src = select(eq(stmt_kind, 2), tr.stmt_aug, tr.stmt_value)  # at statements' first tokens
    bind_src = select(asg_target | aug_target, stmt_src.gather(1, sf), pos)
    ref_src = torch.cat([torch.full_like(bind_src[:, :1], -1), bind_src], 1).gather(1, bind_at.long())
    # a parameter bound before its own binding has a duplicate name (only parameters bind that early)
    at_token(is_param & bind_at.bool(), "duplicate_parameter")

    # follow aliases (`y = x` binds y to x's source) by pointer jumping: bound references and aug
    # targets point to their source, other tokens to themselves, so jumping ends at the alias
    # chain's end. Each link goes to an earlier statement (a binding is read by the statements after
    # it) but for a last one to a parameter, so a chain has at most as many links as its program has
    # statements, at most its NEWLINE tokens: log2(tk.most_lines + 1) rounds do.
    bound = ~_neg(ref_src)
    is_ref = value_ref & bound
    has_src = is_ref | (aug_target & bound)
    nxt, spare = select(has_src, ref_src, pos).long(), torch.empty((B, T), dtype=torch.long, device=dev)
    for _ in range(tk.most_lines.bit_length()):
        nxt, spare = torch.gather(nxt, 1, nxt, out=spare), nxt
    # sources: the chain's end; parameters as T + index (so a parameter is its own source)
    source = select(is_param, n_before.add_(T - 1), pos).gather(1, nxt)

    # builtins and constants
    name_key = gather(tk.key, tr.name_tok)
    mult, slot_key, slot_info, slot_arity = _name_slots(dev)
    prod = name_key * mult
    slot = prod.view(u8)[:, 7::8].long()  # its top byte, (prod >> 56) & 255 on a little-endian machine
    info = take(slot_info, slot).mul_(take(slot_key, slot) == name_key)
    # values: names and math.NAME
    value_attr = body & eq(ntype, N_ATTR) & ~tnode
    loose = (value_ref & ~bound) | value_attr
    const_name = (info >> 14).bitwise_and_(7).mul_(loose).sub_(1)  # constant index + 1 - 1
    at_node(loose, ((info & 127) ^ _EXPR_CODE["unknown_name"]).to(u8))
    # calls
    callee_bound = plain_call & bound.gather(1, callee_at)
    at_node(callee_bound, "variable_called")
    plain = calls & ~callee_bound
    at_node(plain, (((info >> 7) & 127) ^ _EXPR_CODE["unknown_function"]).to(u8))
    # (a name that misses its slot reads the slot's arities, harmless: it is not a builtin, an
    # error that comes first at the same node)
    n_args = tr.n_args.clamp(max=9)
    arity_bad = plain & take(slot_arity, slot).bitwise_right_shift_(n_args).bitwise_and_(1).to(u8).view(torch.bool)
    at_node(arity_bad, "arity")
    at_node(body & eq(ntype, N_BIN) & tr.chained, "chained_comparison")
    at_node(body & eq(ntype, N_TUPLE) & ~tnode, "tuple")
    builtin = (info >> 17).mul_(calls & ~arity_bad).sub_(1)  # builtin index + 1 - 1

    # statements
    is_ret = first & eq(stmt_kind, 3)
    ret_first = first_true(is_ret)
    at_token(first & (pos > torch.where(ret_first >= 0, ret_first, T)[:, None]), "code_after_return")
    at_token(first & eq(stmt_kind, 1) & (tr.n_targets > 1), "chained_assignment")
    at_token(is_ret & _neg(tr.stmt_value), "return_without_value")
    at_token(first & eq(stmt_kind, 4), "expression_statement")
    doc_first = st.docstring & ~shift_right(st.docstring, False)
    last_stmt = (((first | doc_first) * (pos + 1)).amax(1) - 1).clamp(min=0).long()[:, None]  # 0 if none
    last_is_ret = first.gather(1, last_stmt) & (stmt_kind.gather(1, last_stmt) == 3)
    end_bad = ~last_is_ret[:, 0] & (count > 0)

    # the first error: the families' inverted ranks
    ns_inv = inv_place.gather(1, tr.node_start.long())  # expression errors are at the node's first token
    expr_inv = ns_inv - (tr.depth << 7).add_((4 << 7) + 128)  # priority 3 + depth
    best = _decode(inv_place - _TOKEN_TOP, token_code)
    torch.maximum(best, _decode(expr_inv, expr_code), out=best)
    # an unbound aug target at itself, as an expression at depth 1
    torch.maximum(best, (inv_place - _rank("unknown_name_augmented", 4)).mul_(aug_target & ~bound), out=best)
    bad_target = tnode & ~name_node  # target nodes (one per target atom) that are not plain names
    torch.maximum(best, (ns_inv - _rank("assignment_target", 1)).mul_(bad_target), out=best)
    inv_end = inv_place.gather(1, last_stmt)[:, 0] - _rank("missing_return", 2)
    top = torch.maximum(best.amax(1), inv_end * end_bad)

    rank = (K0 - top).long()
    at = rank >> 19  # position + 1, 0 for padding
    p = (at - 1).clamp(0, T - 1)[:, None]
    line, col = tk.line.gather(1, p)[:, 0] * (at > 0), tk.col.gather(1, p)[:, 0] * (at > 0)
    cm = rank & 127
    key = error_key(line, col, ((rank >> 7) & 4095) - 1, cm >> 4, MSG_BASE + (cm & 15))
    error = torch.where(syntax, syntax_key, torch.where(top > 0, key, NO_ERROR))
    return Semantics(source, const_name, builtin, is_ref, n_params, error, bind_at - 1)
