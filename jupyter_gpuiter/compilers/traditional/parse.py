"""Pass 3, parse: tokens -> expression trees, in O(log T) tensor steps (no loop over the tree).

Operator precedence as binding powers: each token gets a left and a right binding power (lbp,
rbp), offset by its nesting level (parentheses and ternary conditions), and every token's parent is
one of its two nearest "weaker" neighbours (all nearest smaller values, ANSV):

    L(i) = max j < i with rbp(j) < lbp(i)      R(i) = min k > i with lbp(k) < rbp(i)
    parent(i) = L(i) if rbp(L(i)) >= lbp(R(i)) else R(i)

This is the Cartesian tree of the expression, generalised to prefix operators (lbp = inf),
right-associative `**`, calls (`(` binds the name on its left tightest) and `a if c else b` (an `if`
node under an `else` node). L and R come from sparse tables of minima by binary lifting:
O(B*T log T) work, O(log T) steps. A subtree is exactly the open interval (L(i), R(i)), which gives
each node's first and last token. Statements are split by walls (`=`, `op=`, `return`, NEWLINE)
whose binding power is below everything.

    x = - a * ( b + c )        bp:  x:inf  = wall  -:(inf,32)  a:inf  *:(28,29)  (:(inf,62)
                                     b:inf  +:(88,89)  c:inf  ):(62,inf)
    tree: = | * ( - (a) , ( ( + (b, c) ) )

Validity is local (Python's expression grammar on these tokens is an operator-precedence grammar):
operands and operators must alternate, `not` may only start an operand of and/or/not, a ternary
part or a statement value, and `if`/`else` must pair up inside each bracket. The first bad token
makes a syntax error at its statement's first line.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...lang import spec
from .common import BIG, gather, last_true, next_true, positions, shift_left, shift_right
from .lex import Tokens
from .rules import OPERAND_END, Structure, isin

K = spec.TOK
N_NONE, N_NAME, N_NUM, N_BOOL, N_ATTR, N_BIN, N_PRE, N_TERN, N_CALL, N_TUPLE, N_GROUP, N_SEP, N_CALLEE = range(13)
INF = 1 << 30
WALL = -1
S = 64  # binding powers per nesting level
AUG_OPS = list(spec.AUG_ASSIGN)
BIN_PREC = {op: b.prec for op, b in spec.BINARY_OPS.items()}


def _table(mapping: dict, default, device) -> torch.Tensor:
    t = torch.full((len(spec.TOKEN_KINDS),), default, dtype=torch.long, device=device)
    for k, v in mapping.items():
        t[K[k]] = v
    return t


@dataclass
class Tree:
    ntype: torch.Tensor  # [B, T] node type at the node's token (N_*)
    child: torch.Tensor  # [B, T, 3] value-node children (-1 = none); ternary: (cond, then, else)
    parent: torch.Tensor  # [B, T] call of each argument node (-1)
    arg_rank: torch.Tensor  # [B, T] argument index of argument nodes
    n_args: torch.Tensor  # [B, T] call nodes: number of arguments
    attr: torch.Tensor  # [B, T] N_ATTR and namespaced call nodes: the token after the dot (-1)
    name_tok: torch.Tensor  # [B, T] name/attr/call nodes: the token whose text names it
    callee: torch.Tensor  # [B, T] call nodes: the function's token
    node_start: torch.Tensor  # [B, T] first token of the node (errors are reported there)
    node_end: torch.Tensor  # [B, T] last token of the node
    depth: torch.Tensor  # [B, T] nodes above and including the node (statement roots: 1)
    chained: torch.Tensor  # [B, T] comparison whose left operand is an unparenthesised comparison
    stmt_value: torch.Tensor  # [B, T] at a statement's first token: its value node (-1)
    stmt_targets: torch.Tensor  # [B, T] value node of each token (through parentheses)
    target_of: torch.Tensor  # [B, T] assignment-target roots: their statement's first token (-1)
    stmt_kind: torch.Tensor  # [B, T] at the first token: 0 none, 1 assign, 2 aug, 3 return, 4 expression
    stmt_aug: torch.Tensor  # [B, T] at the first token: the aug operator token (-1)
    n_targets: torch.Tensor  # [B, T] at the first token
    stmt_first: torch.Tensor  # [B, T] first token of each body token's statement
    body: torch.Tensor  # [B, T] tokens of body statements
    syntax: torch.Tensor  # [B] first bad token (BIG = none)


def _sparse_min(x: torch.Tensor, levels: int) -> list[torch.Tensor]:
    """table[k][:, j] = min(x[:, j : j + 2^k]) for every window inside x (level k is 2^k - 1 shorter)."""
    table = [x]
    for k in range(1, levels):
        prev, step = table[-1], 1 << (k - 1)
        table.append(torch.minimum(prev[:, :-step], prev[:, step:]))
    return table


def nearest_smaller_left(rbp: torch.Tensor, lbp: torch.Tensor) -> torch.Tensor:
    """L(i) = max j < i with rbp[j] < lbp[i], or -1: binary lifting over a sparse table of minima.

    rbp is padded on the left with one longest step of -BIG, so a step past the start fails the
    comparison by itself: each level is one gather, one compare and one select, with no bounds checks."""
    B, T = rbp.shape
    levels = max(1, T.bit_length())
    pad = 1 << (levels - 1)
    table = _sparse_min(torch.cat([torch.full((B, pad), -BIG, dtype=rbp.dtype, device=rbp.device), rbp], 1), levels)
    j = positions(rbp) + pad  # padded coordinates; invariant: rbp[j : i] >= lbp[i]
    for k in range(levels - 1, -1, -1):
        start = j - (1 << k)
        j = torch.where(table[k].gather(1, start) >= lbp, start, j)
    return j - (pad + 1)


def nearest_smaller_right(lbp: torch.Tensor, rbp: torch.Tensor) -> torch.Tensor:
    """R(i) = min k > i with lbp[k] < rbp[i], or T."""
    T = lbp.shape[1]
    flipped = nearest_smaller_left(lbp.flip(1), rbp.flip(1))
    return (T - 1 - flipped).flip(1)


def parse(tk: Tokens, st: Structure, ok: torch.Tensor) -> Tree:
    kind = tk.kind
    dev = kind.device
    B, T = kind.shape
    pos = positions(kind)
    lid = st.line_id
    is_nl = kind == K["newline"]
    ol = st.one_line[:, None]
    hc = st.header_colon[:, None]
    body = st.valid & ~is_nl & ~st.docstring & torch.where(ol, (lid == 0) & (pos > hc), lid >= 1) & ok[:, None]
    stmt_start = body & (shift_right(~body, True) | (shift_right(lid, -1) != lid))
    stmt_first = torch.where(body, last_true(stmt_start), -1)

    # math.NAME: the namespace token stands for the attribute; the dot and the name drop out
    dot = body & (kind == K["."])
    ns = shift_left(dot, False) & body
    dead = dot | shift_right(dot, False)
    attr = torch.where(ns, pos + 2, -1)
    live = body & ~dead

    prev_raw = shift_right(kind, K["newline"])
    is_atom = live & isin(kind, [K["name"], K["number"], K["True"], K["False"]])
    prefix = live & ((((kind == K["-"]) | (kind == K["+"])) & ~isin(prev_raw, OPERAND_END)) | (kind == K["not"]))
    prec_t = _table(BIN_PREC, 0, dev)
    binary = live & (prec_t[kind] > 0) & ~prefix
    lpar, rpar = live & (kind == K["("]), live & (kind == K[")"])
    call = lpar & st.is_call
    group = lpar & ~st.is_call
    comma = live & (kind == K[","])
    is_if, is_else = live & (kind == K["if"]), live & (kind == K["else"])
    assign = live & (kind == K["="])
    aug = live & isin(kind, [K[a] for a in AUG_OPS])
    ret = live & (kind == K["return"])
    wall = ~body | assign | aug | ret

    # nesting level: parentheses, plus the conditions of ternaries (between `if` and `else`)
    tern = is_if.long().cumsum(1) - is_if.long() - (is_else.long().cumsum(1))
    level = st.depth - rpar.long() + tern
    base = level * S
    p4 = prec_t[kind] * 4
    right_assoc = kind == K["**"]
    lbp = torch.full((B, T), INF, dtype=torch.long, device=dev)
    rbp = torch.full((B, T), INF, dtype=torch.long, device=dev)
    lbp = torch.where(binary, base + p4 + right_assoc.long(), lbp)
    rbp = torch.where(binary, base + p4 + 1 - right_assoc.long(), rbp)
    unary_prec = torch.where(kind == K["not"], spec.PREC_NOT, spec.PREC_UNARY) * 4
    rbp = torch.where(prefix, base + unary_prec, rbp)
    lbp = torch.where(call, base + S - 4, lbp)
    rbp = torch.where(lpar, base + S - 2, rbp)
    lbp = torch.where(rpar, base + S - 2, lbp)
    lbp = torch.where(comma, base, lbp)
    rbp = torch.where(comma, base + 1, rbp)
    lbp = torch.where(is_if, base + 6, lbp)
    rbp = torch.where(is_if, base + 7, rbp)
    lbp = torch.where(is_else, base + 5, lbp)
    rbp = torch.where(is_else, base + 4, rbp)
    lbp = torch.where(wall, WALL, lbp)
    rbp = torch.where(wall, WALL, rbp)

    L = nearest_smaller_left(rbp, lbp)
    R = nearest_smaller_right(lbp, rbp)
    take_left = (L >= 0) & ((R >= T) | (gather(rbp, L) >= gather(lbp, R)))
    parent_tok = torch.where(take_left, L, torch.where(R < T, R, -1))
    member = live & ~wall & ~rpar
    parent_tok = torch.where(member & ~gather(wall, parent_tok) & (parent_tok >= 0), parent_tok, -1)
    root = member & (parent_tok < 0)

    # children slots of each node; values see through parentheses
    left_of = torch.full((B, T + 1), -1, dtype=torch.long, device=dev)
    right_of = torch.full((B, T + 1), -1, dtype=torch.long, device=dev)
    has_parent = member & (parent_tok >= 0)
    left_of.scatter_(1, torch.where(has_parent & (pos < parent_tok), parent_tok, T), pos)
    right_of.scatter_(1, torch.where(has_parent & (pos > parent_tok), parent_tok, T), pos)
    left_of, right_of = left_of[:, :T], right_of[:, :T]
    vn = torch.where(group & (right_of >= 0), right_of, pos)
    for _ in range(max(1, (spec.MAX_NESTING + 1).bit_length())):
        vn = vn.gather(1, vn)

    def value(tok):
        return torch.where(tok >= 0, gather(vn, tok), -1)

    ntype = torch.full((B, T), N_NONE, dtype=torch.long, device=dev)
    ntype = torch.where(is_atom, torch.where(kind == K["name"], N_NAME, torch.where(kind == K["number"], N_NUM,
                                                                                     N_BOOL)), ntype)
    ntype = torch.where(ns, N_ATTR, ntype)
    ntype = torch.where(binary, N_BIN, torch.where(prefix, N_PRE, ntype))
    ntype = torch.where(call, N_CALL, ntype)
    ntype = torch.where(group, torch.where(right_of >= 0, N_GROUP, N_TUPLE), ntype)
    ntype = torch.where(is_else, N_TERN, torch.where(comma | is_if, N_SEP, ntype))
    callee = torch.where(call, left_of, -1)
    callee_mask = torch.zeros((B, T + 1), dtype=torch.bool, device=dev)
    callee_mask.scatter_(1, torch.where(call & (left_of >= 0), left_of, T), True)
    ntype = torch.where(callee_mask[:, :T] & (ntype != N_NONE), N_CALLEE, ntype)
    attr = torch.where(call, gather(attr, callee), attr)
    name_tok = torch.where(attr >= 0, attr, torch.where(call, callee, pos))

    if_node = torch.where(is_else, left_of, -1)
    child = torch.stack([
        torch.where(is_else, value(gather(right_of, if_node)), value(torch.where(prefix, right_of,
                                                                                              left_of))),
        torch.where(is_else, value(gather(left_of, if_node)), value(right_of)),
        torch.where(is_else, value(right_of), -1)], -1)
    child = torch.where((binary | prefix | is_else)[..., None], child, -1)
    left_raw = torch.where(binary, left_of, -1)
    is_cmp = binary & (prec_t[kind] == spec.PREC_CMP)
    chained = is_cmp & gather(is_cmp, left_raw) & (left_raw >= 0)

    # call arguments: the roots hanging under the call's `(` or under its commas
    par = parent_tok.clamp(min=0)
    under_call = has_parent & ~comma & (gather(call, par) | gather(comma, par))
    call_of = torch.where(gather(comma, par), gather(st.enclosing, par), parent_tok)
    arg = under_call & (call_of >= 0) & (pos > call_of)
    comma_key = torch.where(comma, st.enclosing * (T + 1) + pos, BIG).sort(1).values
    rank = torch.searchsorted(comma_key, call_of * (T + 1) + pos) - torch.searchsorted(comma_key, call_of * (T + 1))
    parent = torch.full((B, T + 1), -1, dtype=torch.long, device=dev)
    arg_rank = torch.zeros((B, T + 1), dtype=torch.long, device=dev)
    vpos = value(pos)
    parent.scatter_(1, torch.where(arg, vpos, T), torch.where(arg, call_of, -1))
    arg_rank.scatter_(1, torch.where(arg, vpos, T), rank)
    n_args = torch.zeros((B, T + 1), dtype=torch.long, device=dev)
    n_args.scatter_add_(1, torch.where(arg, call_of, T), arg.long())

    # depth by pointer jumping (statement roots have depth 1)
    # over [B, T + 1] arrays whose last column is a sentinel root (depth 0, its own ancestor)
    depth = torch.cat([member.long(), torch.zeros_like(member[:, :1], dtype=torch.long)], 1)
    anc = torch.cat([torch.where(parent_tok >= 0, parent_tok, T), torch.full_like(parent_tok[:, :1], T)], 1)
    for _ in range(max(1, T.bit_length())):
        depth = depth + depth.gather(1, anc)
        anc = anc.gather(1, anc)
    depth = depth[:, :T]
    node_start = L + 1
    node_end = (R - 1).clamp(max=T - 1)

    # syntax: operands and operators alternate; `not`, `if`/`else` in their places
    p_tok = last_true(live, inclusive=False)
    p_tok = torch.where((p_tok >= 0) & (gather(stmt_first, p_tok) == stmt_first), p_tok, -1)
    pk = gather(kind, p_tok)
    p_start = p_tok < 0
    p_end = (p_tok >= 0) & (gather(is_atom, p_tok) | gather(rpar, p_tok))
    p_open_paren = (p_tok >= 0) & gather(lpar, p_tok)
    p_comma = (p_tok >= 0) & gather(comma, p_tok)
    starts_operand = is_atom | prefix | group
    after_operand = binary | rpar | comma | is_if | is_else | assign | aug | call
    bad = live & starts_operand & p_end
    bad |= live & after_operand & ~p_end & ~(rpar & (p_open_paren | p_comma))
    bad |= ret & ~p_start
    n_tok = next_true(live).clamp(max=T)
    last_in_stmt = live & ((n_tok >= T) | (gather(stmt_first, n_tok) != stmt_first))
    bad |= last_in_stmt & ~(is_atom | rpar | ret)
    not_ctx = [K[k] for k in ("and", "or", "not", "if", "else", "(", ",", "=", "return")] + [K[a] for a in AUG_OPS]
    bad |= live & (kind == K["not"]) & ~isin(pk, not_ctx) & ~p_start
    del pk
    # if/else alternate inside each bracket of a statement: sort them by (statement, bracket, position)
    ie = is_if | is_else
    gkey = torch.where(ie, (stmt_first * (T + 1) + st.enclosing + 1) * (T + 1) + pos, BIG)
    order = gkey.argsort(1)
    sk = gkey.gather(1, order)
    s_if = is_if.gather(1, order)
    grp = sk // (T + 1)
    same_next = shift_left(grp, -1) == grp
    same_prev = shift_right(grp, -1) == grp
    bad_sorted = (sk < BIG) & ((s_if & ~(same_next & ~shift_left(s_if, True))) |
                               (~s_if & ~(same_prev & shift_right(s_if, False))))
    bad_ie = torch.zeros_like(bad)
    bad_ie.scatter_(1, order, bad_sorted)
    bad |= bad_ie & ie
    # statements: `return` first; `=` and `op=` do not mix; one `op=`
    first = body & (stmt_first == pos)
    sf = stmt_first.clamp(min=0)

    def per_stmt(mask):
        out = torch.zeros((B, T + 1), dtype=torch.long, device=dev)
        out.scatter_add_(1, torch.where(mask, sf, T), mask.long())
        return out[:, :T]

    n_aug, n_asg = per_stmt(aug), per_stmt(assign)
    bad |= body & (gather(n_aug, sf) > 0) & ((gather(n_asg, sf) > 0) | (gather(n_aug, sf) > 1))
    bad |= (assign | aug) & gather(ret, sf)  # `return x = 1`
    # targets: the roots just left of `=` / `op=`
    r_wall_kind = gather(kind, R)
    tgt = root & (R < T) & ((r_wall_kind == K["="]) | isin(r_wall_kind, [K[a] for a in AUG_OPS]))
    tnode_type = gather(ntype, vn)
    target_ok = torch.where(r_wall_kind == K["="], isin(tnode_type, [N_NAME, N_ATTR, N_TUPLE]),
                            isin(tnode_type, [N_NAME, N_ATTR]))
    bad |= tgt & ~target_ok
    syntax = torch.where(bad, pos, BIG).min(1).values

    value_root = root & ~tgt
    stmt_value = torch.full((B, T + 1), -1, dtype=torch.long, device=dev)
    stmt_value.scatter_(1, torch.where(value_root, sf, T), vn)
    stmt_kind = torch.where(first, 4, 0)
    stmt_kind = torch.where(first & (n_asg > 0), 1, stmt_kind)
    stmt_kind = torch.where(first & (n_aug > 0), 2, stmt_kind)
    stmt_kind = torch.where(first & ret, 3, stmt_kind)
    stmt_aug = torch.full((B, T + 1), -1, dtype=torch.long, device=dev)
    stmt_aug.scatter_(1, torch.where(aug, sf, T), pos)
    target_of = torch.where(tgt, stmt_first, -1)
    n_targets = per_stmt(tgt)
    return Tree(ntype, child, parent[:, :T], arg_rank[:, :T], n_args[:, :T], attr, name_tok, callee, node_start,
                node_end, depth, chained, stmt_value[:, :T], vn, target_of, stmt_kind, stmt_aug[:, :T], n_targets,
                stmt_first, body, syntax)
