"""Pass 3, parse: tokens -> expression trees, by parallel bottom-up reduction rounds.

Every round, each operator whose operands are already complete and that binds them more tightly
than its neighbours do reduces at once, in every program of the batch: `a op b`, prefix `op a`,
`( a )`, calls `f ( a , b )`, `a if c else b`. The reduced expression lives on at the operator's
token (a call at its function name, a parenthesised one at its `(`). Rounds = height of the tree
(a left-associative chain of n operators takes n rounds); each round is O(B*T) elementwise work.

    tokens   x  =  -  a  *  ( b  +  c )            round 1:  - a      b + c
    alive    x  =  -     *  (    +    )            round 2:  ( . )
    alive    x  =  -     *  (                      round 3:  (-a) * (...)
    alive    x  =        *                         done: statement `atom = atom`

Afterwards each statement must be `target = ... = value`, `target op= value`, `return [value]` or a
lone expression; anything left over is a syntax error at the statement's first line. Nodes are
indexed by token position: type, children, first/last token, and the round that made them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...lang import spec
from .common import BIG, gather, last_true, next_true, positions, shift_right
from .lex import Tokens
from .rules import OPERAND_END, Structure, isin

K = spec.TOK
# token roles during reduction
R_NONE, R_ATOM, R_BIN, R_PRE, R_LPAR, R_CALL, R_RPAR, R_COMMA, R_IF, R_ELSE, R_ASSIGN, R_AUG, R_RETURN = range(13)
# node types
N_NONE, N_NAME, N_NUM, N_BOOL, N_ATTR, N_BIN, N_PRE, N_TERN, N_CALL, N_TUPLE = range(10)

BIN_PREC = {op: b.prec for op, b in spec.BINARY_OPS.items()}
AUG_OPS = list(spec.AUG_ASSIGN)
OPENERS = [R_NONE, R_LPAR, R_CALL, R_COMMA, R_ASSIGN, R_AUG, R_RETURN, R_ELSE]  # may precede a ternary
MAX_ROUNDS_BETWEEN_CHECKS = 8


def _table(mapping: dict, default=0, device=None) -> torch.Tensor:
    t = torch.full((len(spec.TOKEN_KINDS),), default, dtype=torch.long, device=device)
    for k, v in mapping.items():
        t[K[k]] = v
    return t


@dataclass
class Tree:
    ntype: torch.Tensor  # [B, T] node type at the node's token (N_*)
    child: torch.Tensor  # [B, T, 3] child node positions (-1 = none); ternary: (cond, then, else)
    parent: torch.Tensor  # [B, T] parent node of call arguments (-1)
    arg_rank: torch.Tensor  # [B, T] argument index of call arguments
    n_args: torch.Tensor  # [B, T] for calls
    attr: torch.Tensor  # [B, T] for N_ATTR and namespaced calls: the token after the dot (-1)
    node_start: torch.Tensor  # [B, T] first token of the node (errors are reported there)
    node_end: torch.Tensor  # [B, T] last token of the node
    made: torch.Tensor  # [B, T] round that created the node (leaves: 0)
    chained: torch.Tensor  # [B, T] comparison whose left operand is an unparenthesised comparison
    stmt_value: torch.Tensor  # [B, T] per statement-first-token: node of the value (-1)
    stmt_targets: torch.Tensor  # [B, T] node of each assignment target atom at its first alive token (-1)
    target_of: torch.Tensor  # [B, T] for target atoms: the statement's first token (-1)
    stmt_kind: torch.Tensor  # [B, T] at the statement's first token: 0 none, 1 assign, 2 aug, 3 return, 4 expr
    stmt_aug: torch.Tensor  # [B, T] at the statement's first token: the aug operator token (-1)
    n_targets: torch.Tensor  # [B, T] at the statement's first token
    stmt_first: torch.Tensor  # [B, T] first token of each token's statement
    body: torch.Tensor  # [B, T] tokens of body statements
    wrapped: torch.Tensor  # [B, T] atom is parenthesised
    rounds: int
    syntax: torch.Tensor  # [B] first syntax error: token position (BIG = none)


def parse(tk: Tokens, st: Structure, ok: torch.Tensor) -> Tree:
    kind = tk.kind
    dev = kind.device
    B, T = kind.shape
    W = T + 1  # column T is a trash slot for masked scatters
    pos = positions(kind)
    posw = torch.arange(W, device=dev).expand(B, W)
    lid = st.line_id
    is_nl = kind == K["newline"]
    ol = st.one_line[:, None]
    hc = st.header_colon[:, None]
    body = st.valid & ~is_nl & ~st.docstring & torch.where(ol, (lid == 0) & (pos > hc), lid >= 1) & ok[:, None]
    stmt_first = torch.where(body, last_true(body & (shift_right(~body, True) | shift_right(lid, -1).ne(lid))), -1)

    def wide(x, fill):
        return torch.cat([x, torch.full_like(x[:, :1], fill)], 1)

    prev_raw = shift_right(kind, K["newline"])
    prefix_pm = ((kind == K["-"]) | (kind == K["+"])) & ~isin(prev_raw, OPERAND_END)
    bin_prec_t = _table(BIN_PREC, 0, dev)
    role = torch.full((B, T), R_NONE, dtype=torch.long, device=dev)
    role = torch.where(isin(kind, [K["name"], K["number"], K["True"], K["False"]]), R_ATOM, role)
    role = torch.where((bin_prec_t[kind] > 0) & ~prefix_pm, R_BIN, role)
    role = torch.where(prefix_pm | (kind == K["not"]), R_PRE, role)
    role = torch.where(kind == K["("], torch.where(st.is_call, R_CALL, R_LPAR), role)
    role = torch.where(kind == K[")"], R_RPAR, role)
    role = torch.where(kind == K[","], R_COMMA, role)
    role = torch.where(kind == K["if"], R_IF, role)
    role = torch.where(kind == K["else"], R_ELSE, role)
    role = torch.where(kind == K["="], R_ASSIGN, role)
    role = torch.where(isin(kind, [K[a] for a in AUG_OPS]), R_AUG, role)
    role = torch.where(kind == K["return"], R_RETURN, role)
    prec = torch.where(role == R_BIN, bin_prec_t[kind], 0)
    prec = torch.where(role == R_PRE, torch.where(kind == K["not"], spec.PREC_NOT, spec.PREC_UNARY), prec)
    right_assoc = kind == K["**"]
    bad = torch.zeros((B, T), dtype=torch.bool, device=dev)
    # `not` only starts an operand of and/or/not, a ternary part, an argument or a statement value
    not_ctx = [K[k] for k in ("and", "or", "not", "if", "else", "(", ",", "=", "return", "newline")] + \
        [K[a] for a in AUG_OPS]
    bad |= body & (kind == K["not"]) & ~isin(prev_raw, not_ctx) & (stmt_first != pos)

    alive = wide(body, False)
    role = wide(torch.where(body, role, R_NONE), R_NONE)
    prec, right_assoc = wide(prec, 0), wide(right_assoc, False)
    ntype = torch.where(role[:, :T] == R_ATOM, torch.where(kind == K["name"], N_NAME, torch.where(
        kind == K["number"], N_NUM, N_BOOL)), N_NONE)
    ntype = wide(ntype, N_NONE)
    nodeid = wide(pos, -1)
    atom_start, atom_end = wide(pos, -1), wide(pos, -1)
    node_start, node_end = wide(pos, -1), wide(pos, -1)
    made = torch.zeros((B, W), dtype=torch.long, device=dev)
    wrapped = torch.zeros((B, W), dtype=torch.bool, device=dev)
    chained = torch.zeros((B, W), dtype=torch.bool, device=dev)
    child = torch.full((B, W, 3), -1, dtype=torch.long, device=dev)
    parent = torch.full((B, W), -1, dtype=torch.long, device=dev)
    arg_rank = torch.zeros((B, W), dtype=torch.long, device=dev)
    n_args = torch.zeros((B, W), dtype=torch.long, device=dev)
    attr = torch.full((B, W), -1, dtype=torch.long, device=dev)
    stmt_w = wide(stmt_first, -2)

    # math.NAME / np.NAME: one atom at the namespace token
    dot = wide(body & (kind == K["."]), False)
    ns = torch.roll(dot, -1, 1) & alive
    attr = torch.where(ns, posw + 2, attr)
    ntype = torch.where(ns, N_ATTR, ntype)
    node_end = torch.where(ns, posw + 2, node_end)
    atom_end = torch.where(ns, posw + 2, atom_end)
    ntype = torch.where(torch.roll(dot, 1, 1), N_NONE, ntype)
    alive = alive & ~dot & ~torch.roll(dot, 1, 1)
    role = torch.where(alive, role, R_NONE)

    # the `)` matching each `(`
    match = torch.full((B, W), BIG, dtype=torch.long, device=dev)
    close = body & (kind == K[")"])
    match.scatter_(1, torch.where(close & (st.enclosing >= 0), st.enclosing, T), torch.where(close, pos, BIG))

    trash = torch.full((B, W), T, dtype=torch.long, device=dev)

    def put(dst, mask, idx, val):
        """dst[idx] = val where mask (masked rows go to the trash column)."""
        dst.scatter_(1, torch.where(mask, idx, trash[:, : idx.shape[1]]), val)

    rnd = 0
    while True:
        rnd += 1
        L = last_true(alive, inclusive=False)
        R = next_true(alive).clamp(max=T)
        L = torch.where((L >= 0) & (gather(stmt_w, L) == stmt_w), L, T)
        R = torch.where(gather(stmt_w, R) == stmt_w, R, T)
        rl, rr = gather(role, L), gather(role, R)
        LL, RR = gather(L, L), gather(R, R)
        rll, rrr = gather(role, LL), gather(role, RR)
        pl, pr = gather(prec, LL), gather(prec, RR)
        RRR = gather(R, RR)
        R4 = gather(R, RRR)
        is_atom = role == R_ATOM

        def grabs_left(r_ctx, p_ctx, p_op, ra_op):  # context token left of an operand takes it first
            return ((r_ctx == R_BIN) & ((p_ctx > p_op) | ((p_ctx == p_op) & ~ra_op))) | \
                ((r_ctx == R_PRE) & (p_ctx > p_op))

        def grabs_right(r_ctx, p_ctx, ra_ctx, p_op):  # context token right of an operand takes it first
            return ((r_ctx == R_BIN) & ((p_ctx > p_op) | ((p_ctx == p_op) & ra_ctx))) | (r_ctx == R_CALL)

        ra_rr = gather(right_assoc, RR)
        red_bin = alive & (role == R_BIN) & (rl == R_ATOM) & (rr == R_ATOM) & \
            ~grabs_left(rll, pl, prec, right_assoc) & ~grabs_right(rrr, pr, ra_rr, prec)
        red_pre = alive & (role == R_PRE) & (rr == R_ATOM) & ~grabs_right(rrr, pr, ra_rr, prec)
        red_par = alive & (role == R_LPAR) & (((rr == R_ATOM) & (rrr == R_RPAR)) | (rr == R_RPAR))
        blocking = alive & ~is_atom & (role != R_COMMA)
        misplaced = alive & (((role == R_COMMA) & (rl != R_ATOM)) | (is_atom & ~isin(rl, [R_CALL, R_COMMA])))
        in_call = gather(wide(role[:, :T] == R_CALL, False), wide(st.enclosing, T).clamp(min=0)) & \
            (wide(st.enclosing, -1) >= 0)
        stop = (blocking | (misplaced & in_call)).long().cumsum(1)
        mclamp = match.clamp(max=T)
        inner_stop = gather(stop, mclamp - 1) - stop
        red_call = alive & (role == R_CALL) & (rl == R_ATOM) & (match < BIG) & (inner_stop == 0)
        ra4 = gather(role, R4)
        red_tern = alive & (role == R_IF) & (rl == R_ATOM) & (rr == R_ATOM) & (rrr == R_ELSE) & \
            (gather(role, RRR) == R_ATOM) & isin(rll, OPENERS) & ~isin(ra4, [R_BIN, R_CALL, R_IF])
        reduced = red_bin | red_pre | red_par | red_call | red_tern
        if rnd % MAX_ROUNDS_BETWEEN_CHECKS == 1 and rnd > 1 and not bool(reduced.any()):
            break
        if rnd > 2 * T + 2:
            break

        nid = nodeid
        # binary operators
        ln, rn = gather(nid, L), gather(nid, R)
        cmp = red_bin & (prec == spec.PREC_CMP)
        chained |= cmp & (gather(ntype, ln.clamp(min=0)) == N_BIN) & \
            (gather(prec, ln.clamp(min=0)) == spec.PREC_CMP) & ~gather(wrapped, L)
        newnode = red_bin | red_pre
        child[..., 0] = torch.where(red_bin, ln, torch.where(red_pre, rn, child[..., 0]))
        child[..., 1] = torch.where(red_bin, rn, child[..., 1])
        ntype = torch.where(red_bin, N_BIN, torch.where(red_pre, N_PRE, ntype))
        st_new = torch.where(red_bin, gather(atom_start, L), posw)
        node_start = torch.where(newnode, st_new, node_start)
        end_new = gather(atom_end, R)
        node_end = torch.where(newnode, end_new, node_end)
        # ternaries: (cond, then, else)
        Y = RRR
        child[..., 0] = torch.where(red_tern, rn, child[..., 0])
        child[..., 1] = torch.where(red_tern, ln, child[..., 1])
        child[..., 2] = torch.where(red_tern, gather(nid, Y), child[..., 2])
        ntype = torch.where(red_tern, N_TERN, ntype)
        node_start = torch.where(red_tern, gather(atom_start, L), node_start)
        node_end = torch.where(red_tern, gather(atom_end, Y), node_end)
        # calls: the node lives at the function's token
        F = L
        argmask = is_atom & in_call & (gather(red_call.long(), wide(st.enclosing, T).clamp(min=0)) == 1)
        enc = wide(st.enclosing, T).clamp(min=0)
        rank = (argmask.long().cumsum(1) - gather(argmask.long().cumsum(1), enc))
        put(parent, argmask, nid.clamp(min=0), gather(L, enc))
        put(arg_rank, argmask, nid.clamp(min=0), rank - 1)
        counts = torch.zeros((B, W), dtype=torch.long, device=dev)
        counts.scatter_add_(1, torch.where(argmask, enc, T), argmask.long())
        put(ntype, red_call, F, torch.full_like(F, N_CALL))
        put(n_args, red_call, F, counts)
        put(node_start, red_call, F, gather(atom_start, F))
        put(node_end, red_call, F, mclamp)
        put(atom_end, red_call, F, mclamp)
        put(made, red_call, F, torch.full_like(F, rnd))
        put(nodeid, red_call, F, F)
        # parenthesised expressions and empty tuples
        tup = red_par & (rr == R_RPAR)
        grp = red_par & ~tup
        ntype = torch.where(tup, N_TUPLE, ntype)
        node_start = torch.where(tup, posw, node_start)
        node_end = torch.where(tup, R, node_end)
        nodeid = torch.where(grp, rn, torch.where(newnode | red_tern | tup, posw, nodeid))
        atom_end = torch.where(grp, RR, torch.where(tup, R, torch.where(newnode, end_new, torch.where(
            red_tern, gather(atom_end, Y), atom_end))))
        atom_start = torch.where(grp | tup | red_pre, posw, torch.where(red_bin | red_tern, gather(atom_start, L),
                                                                           atom_start))
        wrapped = torch.where(grp, True, torch.where(newnode | red_tern | tup, False, wrapped))
        made = torch.where(newnode | red_tern | tup, rnd, made)

        # kill consumed tokens; reduced operators become atoms
        kill = torch.zeros((B, W), dtype=torch.bool, device=dev)
        put(kill, red_bin | red_tern, L, torch.ones_like(L, dtype=torch.bool))
        put(kill, red_bin | red_pre | red_par | red_tern, R, torch.ones_like(R, dtype=torch.bool))
        put(kill, grp | red_tern, RR, torch.ones_like(RR, dtype=torch.bool))
        put(kill, red_tern, RRR, torch.ones_like(RRR, dtype=torch.bool))
        inner_call = (wide(st.enclosing, -1) >= 0) & (gather(red_call.long(), enc) == 1) & \
            (wide(st.enclosing, -1) >= 0)
        kill |= inner_call & alive
        kill.scatter_(1, torch.where(red_call, mclamp, T), True)
        kill |= red_call
        alive = alive & ~kill
        alive[:, T] = False
        role = torch.where(reduced & ~red_call, R_ATOM, torch.where(alive, role, R_NONE))

    # statements: what is left must be `t = ... = v`, `t op= v`, `return [v]` or a lone value
    L = last_true(alive, inclusive=False)
    R = next_true(alive).clamp(max=T)
    L = torch.where((L >= 0) & (gather(stmt_w, L) == stmt_w), L, T)
    R = torch.where(gather(stmt_w, R) == stmt_w, R, T)
    rl, rr = gather(role, L), gather(role, R)
    LL, RR = gather(L, L), gather(R, R)
    rll, rrr = gather(role, LL), gather(role, RR)
    nt_atom = gather(ntype, nodeid.clamp(min=0))
    assign_target_ok = isin(nt_atom, [N_NAME, N_ATTR, N_TUPLE])
    aug_target_ok = isin(nt_atom, [N_NAME, N_ATTR])
    a = alive & (role == R_ATOM)
    ok_atom = a & isin(rl, [R_NONE, R_ASSIGN, R_AUG, R_RETURN]) & isin(rr, [R_NONE, R_ASSIGN, R_AUG]) & \
        ~((rr == R_ASSIGN) & ~assign_target_ok) & ~((rr == R_AUG) & ~aug_target_ok) & \
        ~((rl == R_AUG) & (rr != R_NONE)) & ~((rl == R_RETURN) & (rr != R_NONE))
    ok_ret = alive & (role == R_RETURN) & (rl == R_NONE) & ((rr == R_NONE) | ((rr == R_ATOM) & (rrr == R_NONE)))
    ok_asg = alive & (role == R_ASSIGN) & (rl == R_ATOM) & (rr == R_ATOM) & isin(rll, [R_NONE, R_ASSIGN]) & \
        isin(rrr, [R_NONE, R_ASSIGN])
    ok_aug = alive & (role == R_AUG) & (rl == R_ATOM) & (rr == R_ATOM) & (rll == R_NONE) & (rrr == R_NONE)
    bad_tok = (alive & ~(ok_atom | ok_ret | ok_asg | ok_aug))[:, :T] | bad
    has_aug = torch.zeros((B, W), dtype=torch.long, device=dev)
    has_asg = torch.zeros((B, W), dtype=torch.long, device=dev)
    sf = stmt_first.clamp(min=0)
    has_aug.scatter_add_(1, torch.where(body & (role[:, :T] == R_AUG) & alive[:, :T], sf, T),
                         torch.ones_like(sf))
    has_asg.scatter_add_(1, torch.where(body & (role[:, :T] == R_ASSIGN) & alive[:, :T], sf, T),
                         torch.ones_like(sf))
    mixed = (gather(has_aug, sf) > 0) & (gather(has_asg, sf) > 0) & body
    bad_tok = bad_tok | mixed
    syntax = torch.where(bad_tok, pos, BIG).min(1).values

    # per statement: kind, value node, targets
    first = body & (stmt_first == pos)
    alive_t, role_t = alive[:, :T], role[:, :T]
    is_value = alive_t & (role_t == R_ATOM) & (R[:, :T] == T)
    stmt_value = torch.full((B, W), -1, dtype=torch.long, device=dev)
    put(stmt_value, is_value, sf, nodeid[:, :T])
    ret_first = alive_t & (role_t == R_RETURN)
    aug_tok = alive_t & (role_t == R_AUG)
    stmt_kind = torch.zeros((B, W), dtype=torch.long, device=dev)
    put(stmt_kind, first, sf, torch.full_like(sf, 4))
    put(stmt_kind, first & (gather(has_asg, sf) > 0), sf, torch.full_like(sf, 1))
    put(stmt_kind, aug_tok, sf, torch.full_like(sf, 2))
    put(stmt_kind, ret_first, sf, torch.full_like(sf, 3))
    stmt_aug = torch.full((B, W), -1, dtype=torch.long, device=dev)
    put(stmt_aug, aug_tok, sf, pos)
    is_target = alive_t & (role_t == R_ATOM) & isin(gather(role, R)[:, :T], [R_ASSIGN, R_AUG])
    target_of = torch.where(is_target, stmt_first, -1)
    n_targets = torch.zeros((B, W), dtype=torch.long, device=dev)
    n_targets.scatter_add_(1, torch.where(is_target, sf, T), is_target.long())
    return Tree(ntype[:, :T], child[:, :T], parent[:, :T], arg_rank[:, :T], n_args[:, :T], attr[:, :T],
                node_start[:, :T], node_end[:, :T], made[:, :T], chained[:, :T], stmt_value[:, :T],
                nodeid[:, :T], target_of, stmt_kind[:, :T], stmt_aug[:, :T], n_targets[:, :T], stmt_first, body,
                wrapped[:, :T], rnd, syntax)
