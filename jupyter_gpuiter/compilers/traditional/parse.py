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
each node's first and last token, and its depth (how many such intervals cover it: one prefix sum).
Statements are split by walls (`=`, `op=`, `return`, NEWLINE) whose binding power is below everything.

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
from .common import BIG, gather, last_true, positions, shift_left, shift_right, take
from .lex import Tokens
from .rules import OPERAND_END, Structure

K = spec.TOK
N_NONE, N_NAME, N_NUM, N_BOOL, N_ATTR, N_BIN, N_PRE, N_TERN, N_CALL, N_TUPLE, N_GROUP, N_SEP, N_CALLEE = range(13)
INF = 1 << 30
WALL = -1
S = 64  # binding powers per nesting level
AUG_OPS = list(spec.AUG_ASSIGN)
BIN_PREC = {op: b.prec for op, b in spec.BINARY_OPS.items()}


# Token classes: the token kinds, plus the kinds whose role depends on context.
NK = len(spec.TOKEN_KINDS)
C_PREFIX, C_CALL, C_DEAD, C_WALL = NK, NK + 1, NK + 2, NK + 3  # prefix +/-, call `(`, after a dot, not body
_FAR = 1 << 40  # offset of an infinite binding power (clamped to INF)


def _class_tables() -> dict:
    """Per token class: lbp and rbp offsets from the level's base, node type and flags."""
    n = NK + 4
    lb, rb, nt = [_FAR] * n, [_FAR] * n, [N_NONE] * n
    flags = {f: [False] * n for f in ("binary", "prefix", "atom", "aug", "cmp", "wall")}
    for op, prec in BIN_PREC.items():
        k = K[op]
        ra = int(op == "**")
        lb[k], rb[k], nt[k] = prec * 4 + ra, prec * 4 + 1 - ra, N_BIN
        flags["binary"][k] = True
        flags["cmp"][k] = prec == spec.PREC_CMP
    for c, prec in ((K["not"], spec.PREC_NOT), (C_PREFIX, spec.PREC_UNARY)):
        rb[c], nt[c] = prec * 4, N_PRE
        flags["prefix"][c] = True
    lb[C_CALL], rb[C_CALL], nt[C_CALL] = S - 4, S - 2, N_CALL
    rb[K["("]], nt[K["("]] = S - 2, N_TUPLE  # a group; N_GROUP where it holds a value
    lb[K[")"]] = S - 2
    lb[K[","]], rb[K[","]], nt[K[","]] = 0, 1, N_SEP
    lb[K["if"]], rb[K["if"]], nt[K["if"]] = 6, 7, N_SEP
    lb[K["else"]], rb[K["else"]], nt[K["else"]] = 5, 4, N_TERN
    for k, t in (("name", N_NAME), ("number", N_NUM), ("True", N_BOOL), ("False", N_BOOL)):
        nt[K[k]] = t
        flags["atom"][K[k]] = True
    for a in AUG_OPS:
        flags["aug"][K[a]] = True
    for c in [K["="], K["return"], C_WALL] + [K[a] for a in AUG_OPS]:
        flags["wall"][c] = True
    def of(*cs):
        return [any(f[c] for f in cs) for c in range(n)]

    def having(cs):
        return [c in cs for c in range(n)]

    lpar, rpar, comma = having([K["("], C_CALL]), having([K[")"]]), having([K[","]])
    flags["starts"] = of(flags["atom"], flags["prefix"], having([K["("]]))
    flags["after"] = of(flags["binary"], rpar, comma, flags["aug"], having([K[k] for k in ("if", "else", "=")] + [C_CALL]))
    flags["end"] = of(flags["atom"], rpar)  # ends an operand
    flags["last_ok"] = of(flags["end"], having([K["return"]]))
    flags["lpar"] = lpar
    flags["not_ctx"] = of(lpar, flags["aug"], having([K[k] for k in ("and", "or", "not", "if", "else", ",", "=", "return")]))
    flags["operand_end"] = having(OPERAND_END)  # by kind
    flags["assigns"] = of(flags["aug"], having([K["="]]))  # by kind
    flags["target_eq"] = having([N_NAME, N_ATTR, N_TUPLE])  # by node type
    flags["target_aug"] = having([N_NAME, N_ATTR])
    counted = [int(flags["aug"][c]) + (int(c == K["="]) << 20) for c in range(n)]  # statement counts' fields
    out = {"lb": torch.tensor(lb), "rb": torch.tensor(rb), "nt": torch.tensor(nt), "counted": torch.tensor(counted)}
    out.update({f: torch.tensor(v) for f, v in flags.items()})
    return out


_CLASS_TABLES = _class_tables()
_DEVICE_TABLES: dict = {}


def _tables(device) -> dict:
    if device not in _DEVICE_TABLES:
        _DEVICE_TABLES[device] = {k: v.to(device) for k, v in _CLASS_TABLES.items()}
    return _DEVICE_TABLES[device]


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


def nearest_smaller(rbp: torch.Tensor, lbp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(L, R): L(i) = max j < i with rbp[j] < lbp[i], or -1; R(i) = min k > i with lbp[k] < rbp[i], or T.

    Binary lifting over sparse tables of minima of rbp padded on the left and lbp padded on the
    right by one longest step of a value below every binding power, so a step past either end fails
    the comparison by itself: each level is one gather, one compare and one add per side, with no
    bounds checks. Values are int32 (binding powers fit) to halve the memory traffic."""
    B, T = rbp.shape
    levels = max(1, T.bit_length())
    pad = 1 << (levels - 1)
    r32, l32 = rbp.int(), lbp.int()
    fill = torch.full((B, pad), -(1 << 31), dtype=torch.int32, device=rbp.device)
    left, right = [torch.cat([fill, r32], 1)], [torch.cat([l32, fill], 1)]
    for k in range(1, levels):  # level k, column j: min over columns j .. j + 2^k - 1
        step = 1 << (k - 1)
        a, b = left[-1], right[-1]
        left.append(torch.minimum(a[:, :-step], a[:, step:]))
        right.append(torch.minimum(b[:, :-step], b[:, step:]))
    pos = positions(rbp)
    j = pos + pad  # padded coordinates; invariant: rbp[j : i] >= lbp[i]
    m = pos + 1  # invariant: lbp[i + 1 : m] >= rbp[i]
    for k in range(levels - 1, -1, -1):
        step = 1 << k
        j.sub_((left[k].gather(1, j - step) >= l32).long(), alpha=step)
        m.add_((right[k].gather(1, m) >= r32).long(), alpha=step)
    return j - (pad + 1), m


def parse(tk: Tokens, st: Structure, ok: torch.Tensor) -> Tree:
    kind = tk.kind
    dev = kind.device
    B, T = kind.shape
    tab = _tables(dev)
    pos = positions(kind)
    lid = st.line_id
    ol = st.one_line[:, None]
    hc = st.header_colon[:, None]
    body = (st.valid & (kind != K["newline"]) & ~st.docstring & torch.where(ol, (lid == 0) & (pos > hc), lid >= 1)
            & ok[:, None])
    stmt_start = body & (shift_right(~body, True) | (shift_right(lid, -1) != lid))
    stmt_first = torch.where(body, last_true(stmt_start), -1)

    # math.NAME: the namespace token stands for the attribute; the dot and the name drop out
    dot = body & (kind == K["."])
    ns = shift_left(dot, False) & body
    dead = dot | shift_right(dot, False)
    attr = torch.where(ns, pos + 2, -1)
    live = body & ~dead

    # each token's class: its kind, or the role its context gives it
    prev_raw = shift_right(kind, K["newline"])
    pm_prefix = ((kind == K["-"]) | (kind == K["+"])) & ~take(tab["operand_end"], prev_raw)
    cls = torch.where(pm_prefix, C_PREFIX, kind)
    cls = torch.where(st.is_call, C_CALL, cls)
    cls = torch.where(dead, C_DEAD, cls)
    cls = torch.where(body, cls, C_WALL)
    prefix = take(tab["prefix"], cls)
    binary = take(tab["binary"], cls)
    wall = take(tab["wall"], cls)
    aug = take(tab["aug"], cls)
    call = cls == C_CALL
    group = cls == K["("]
    rpar = cls == K[")"]
    comma = cls == K[","]
    is_if, is_else = cls == K["if"], cls == K["else"]
    assign = cls == K["="]
    ret = cls == K["return"]

    # nesting level: parentheses, plus the conditions of ternaries (between `if` and `else`)
    ifs = is_if.long()
    tern = (ifs - is_else.long()).cumsum(1) - ifs
    base = (st.depth - rpar.long() + tern) * S
    lbp = torch.where(wall, WALL, (base + take(tab["lb"], cls)).clamp_(max=INF))
    rbp = torch.where(wall, WALL, (base + take(tab["rb"], cls)).clamp_(max=INF))

    L, R = nearest_smaller(rbp, lbp)
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
    vn_ext = torch.cat([torch.full_like(vn[:, :1], -1), vn], 1)  # value of token t at t + 1; -1 at 0

    nt0 = take(tab["nt"], cls)
    ntype = torch.where(ns & (nt0 <= N_BOOL), N_ATTR, nt0)
    ntype = torch.where(group & (right_of >= 0), N_GROUP, ntype)
    callee = torch.where(call, left_of, -1)
    callee_mask = torch.zeros((B, T + 1), dtype=torch.bool, device=dev)
    callee_mask.scatter_(1, torch.where(call & (left_of >= 0), left_of, T), True)
    ntype = torch.where(callee_mask[:, :T] & (ntype != N_NONE), N_CALLEE, ntype)
    attr = torch.where(call, gather(attr, callee), attr)
    name_tok = torch.where(attr >= 0, attr, torch.where(call, callee, pos))

    # children (token, -1 = none) -> their values, by one gather; ternary: the `if` node is left_of
    c0 = torch.where(is_else, gather(right_of, left_of), torch.where(prefix, right_of, torch.where(binary, left_of, -1)))
    c1 = torch.where(is_else, gather(left_of, left_of), torch.where(binary | prefix, right_of, -1))
    c2 = torch.where(is_else, right_of, -1)
    child = vn_ext.gather(1, torch.stack([c0, c1, c2], -1).view(B, 3 * T).add_(1)).view(B, T, 3)
    is_cmp = take(tab["cmp"], cls)
    chained = is_cmp & gather(is_cmp, left_of) & (left_of >= 0)

    # call arguments: the roots hanging under the call's `(` or under its commas
    par = parent_tok.clamp(min=0)
    under_comma = comma.gather(1, par)
    under_call = has_parent & ~comma & (call.gather(1, par) | under_comma)
    call_of = torch.where(under_comma, st.enclosing.gather(1, par), parent_tok)
    arg = under_call & (call_of >= 0) & (pos > call_of)
    # depth: the member intervals (L(j), R(j)) covering each node (subtrees are nested intervals)
    ends = torch.zeros((B, T + 1), dtype=torch.int32, device=dev)
    one = member.int()
    ends.scatter_add_(1, torch.where(member, L + 1, T), one)
    ends.scatter_add_(1, torch.where(member, R, T), -one)
    depth = torch.where(member, ends[:, :T].cumsum(1), 0)
    # rank = the call's own commas before the argument: a prefix sum of +1 per comma and, per `)`,
    # minus its bracket's own commas, so every bracket closed in between adds nothing
    n_commas = torch.zeros((B, T + 1), dtype=torch.long, device=dev)
    n_commas.scatter_add_(1, torch.where(comma & (st.enclosing >= 0), st.enclosing, T), comma.long())
    own = torch.where(comma, 1, torch.where(rpar, -gather(n_commas, st.enclosing), 0)).cumsum(1)
    rank = own - gather(own, call_of)
    parent = torch.full((B, T + 1), -1, dtype=torch.long, device=dev)
    arg_rank = torch.zeros((B, T + 1), dtype=torch.long, device=dev)
    arg_at = torch.where(arg, vn, T)
    parent.scatter_(1, arg_at, torch.where(arg, call_of, -1))
    arg_rank.scatter_(1, arg_at, rank)
    n_args = torch.zeros((B, T + 1), dtype=torch.long, device=dev)
    n_args.scatter_add_(1, torch.where(arg, call_of, T), arg.long())

    node_start = L + 1
    node_end = (R - 1).clamp(max=T - 1)

    # syntax: operands and operators alternate; `not`, `if`/`else` in their places
    p_tok = last_true(live, inclusive=False)
    p_tok = torch.where((p_tok >= 0) & (gather(stmt_first, p_tok) == stmt_first), p_tok, -1)
    p_start = p_tok < 0
    p_cls = gather(cls, p_tok)
    p_end = ~p_start & take(tab["end"], p_cls)
    bad = take(tab["starts"], cls) & p_end
    bad |= take(tab["after"], cls) & ~p_end & ~(rpar & ~p_start & ((p_cls == K[","]) | take(tab["lpar"], p_cls)))
    bad |= ret & ~p_start
    # a live token is the last of its statement unless it is the previous token of a live one
    not_last = torch.zeros((B, T + 1), dtype=torch.bool, device=dev)
    not_last.scatter_(1, torch.where(live & ~p_start, p_tok, T), True)
    bad |= live & ~not_last[:, :T] & ~take(tab["last_ok"], cls)
    bad |= (cls == K["not"]) & ~take(tab["not_ctx"], p_cls) & ~p_start
    # if/else alternate inside each bracket of a statement: sort them by (statement, bracket, position)
    ie = is_if | is_else
    gkey = torch.where(ie, (stmt_first * (T + 1) + st.enclosing + 1) * (T + 1) + pos, BIG)
    sk, order = gkey.sort(1)
    s_if = is_if.gather(1, order)
    grp = sk - order  # the group times T + 1 (order is the position)
    # a sorted `if` followed by an `else` of its group makes a pair; every if/else must be in one
    pair = (shift_left(grp, -1) == grp) & s_if & ~shift_left(s_if, True)
    in_pair = torch.zeros_like(bad)
    in_pair.scatter_(1, order, pair | shift_right(pair, False))
    bad |= ie & ~in_pair
    # targets: the roots just left of `=` / `op=`
    r_wall_kind = gather(kind, R)
    tgt = root & (R < T) & take(tab["assigns"], r_wall_kind)
    tnode_type = gather(ntype, vn)
    target_ok = torch.where(r_wall_kind == K["="], take(tab["target_eq"], tnode_type),
                            take(tab["target_aug"], tnode_type))
    bad |= tgt & ~target_ok
    # statements: `return` first; `=` and `op=` do not mix; one `op=`
    # per-statement counts of `op=`, `=` and targets in one scatter, as 20-bit fields
    first = body & (stmt_first == pos)
    sf = stmt_first.clamp(min=0)
    counts = torch.zeros((B, T), dtype=torch.long, device=dev)
    counts.scatter_add_(1, sf, take(tab["counted"], cls) + (tgt.long() << 40))
    n_aug, n_asg, n_targets = counts & 0xFFFFF, (counts >> 20) & 0xFFFFF, counts >> 40
    s_counts = counts.gather(1, sf)
    s_aug, s_asg = s_counts & 0xFFFFF, s_counts >> 20 & 0xFFFFF
    bad |= body & (s_aug > 0) & ((s_asg > 0) | (s_aug > 1))
    bad |= (assign | aug) & ret.gather(1, sf)  # `return x = 1`
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
    return Tree(ntype, child, parent[:, :T], arg_rank[:, :T], n_args[:, :T], attr, name_tok, callee, node_start,
                node_end, depth, chained, stmt_value[:, :T], vn, target_of, stmt_kind, stmt_aug[:, :T], n_targets,
                stmt_first, body, syntax)
