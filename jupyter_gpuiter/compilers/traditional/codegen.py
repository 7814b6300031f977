"""Pass 5, codegen: nodes -> instructions, by one sort, prefix sums and one row gather.

Canonical order is statement order and left-to-right post-order, which is the order of
(last token of the node, depth descending): a node ends with or after its last child and is
shallower than its children; disjoint nodes are ordered by position. Each node emits 0..7
instructions (a name emits none, a variadic min/max n-1); registers are the exclusive prefix sum of
those counts in that order, offset by the parameters. Each program gets a table of instruction rows:
one per token (its first instruction; operands from the children's registers), one per parameter,
the return and a padding row. The rows in canonical order (parameters, sorted nodes, return) with
their counts give each slot its row by one searchsorted, and one index_select fills all fields; call
arguments (and the folds' accumulators) are then scattered into their slots. O(B*T log T).
"""

from __future__ import annotations

import torch

from ...ir import OP_INDEX
from ...lang import spec
from .lex import Tokens
from .parse import N_BIN, N_BOOL, N_CALL, N_NUM, N_PRE, N_TERN, Tree
from .semantic import BUILTIN_NAMES, CONSTANT_NAMES, Semantics

K = spec.TOK
MAX_FOLD = 7
NP = spec.MAX_PARAMS
F = 6  # row fields: op, a, b, c, imm (float64 bits), imm_token
_TABLES: dict = {}


def _tables(dev):
    """(binary/aug op by kind, unary op by kind, builtin op, builtin is variadic, constant values,
    the rows after the tokens' [F, 1, NP + 2])."""
    if dev not in _TABLES:
        binary, unary = [-1] * len(spec.TOKEN_KINDS), [-1] * len(spec.TOKEN_KINDS)
        for tok, b in spec.BINARY_OPS.items():
            binary[K[tok]] = OP_INDEX[b.ir_op]
        for tok, op in spec.AUG_ASSIGN.items():
            binary[K[tok]] = OP_INDEX[spec.BINARY_OPS[op].ir_op]
        unary[K["-"]], unary[K["+"]], unary[K["not"]] = OP_INDEX["neg"], OP_INDEX["pos"], OP_INDEX["not"]
        extra = torch.full((F, NP + 2), -1)  # parameters, the return (its register per program), padding
        extra[0, :NP], extra[0, NP] = OP_INDEX["param"], OP_INDEX["ret"]
        extra[4] = torch.cat([torch.arange(NP, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)]).view(torch.int64)
        _TABLES[dev] = tuple(t.to(dev) for t in (
            torch.tensor(binary), torch.tensor(unary),
            torch.tensor([OP_INDEX[spec.BUILTINS[n].ir_op] for n in BUILTIN_NAMES]),
            torch.tensor([spec.BUILTINS[n].arity[0] != spec.BUILTINS[n].arity[1] for n in BUILTIN_NAMES]),
            torch.tensor([spec.CONSTANTS[n] for n in CONSTANT_NAMES], dtype=torch.float64),
            extra[:, None]))
    return _TABLES[dev]


def _lut(table, idx):
    """table[idx] for idx [B, T] in range, by a gather (cheaper on CPU than indexing)."""
    return table.expand(idx.shape[0], -1).gather(1, idx)


def codegen(tk: Tokens, tr: Tree, sm: Semantics):
    """(ops [B, N], args [B, N, 3], imm [B, N], imm_token [B, N], lengths [B]); N = T + 34."""
    kind = tk.kind
    dev = kind.device
    B, T = kind.shape
    N = T + NP + 2
    op_bin, op_un, b_ops, b_var, c_vals, extra_rows = _tables(dev)
    pos = torch.arange(T, device=dev).expand(B, T)
    row0 = torch.arange(B, device=dev)[:, None]
    body, nt = tr.body, tr.ntype

    def at(x, idx):
        """x[b, idx[b, ...]] for idx in range."""
        return x.gather(1, idx.reshape(B, -1)).view(idx.shape)

    first_tok = tr.stmt_first.clamp(min=0)
    aug = body & (tr.stmt_aug >= 0) & (tr.stmt_first == pos)  # at statement start: the aug op emits
    is_num, is_bool = nt == N_NUM, nt == N_BOOL
    is_const = body & (is_num | is_bool | (sm.const_name >= 0))
    is_bin, is_pre, is_tern = body & (nt == N_BIN), body & (nt == N_PRE), body & (nt == N_TERN)
    is_call = body & (nt == N_CALL) & (sm.builtin >= 0)
    builtin = sm.builtin.clamp(min=0)
    variadic = is_call & _lut(b_var, builtin)
    n_inst = (is_const | is_bin | is_pre | is_tern | is_call).long()
    n_inst = torch.where(variadic, (tr.n_args - 1).clamp(min=1), n_inst)
    # the aug instruction is attributed to the aug operator token
    aug_here = torch.zeros((B, T + 1), dtype=torch.bool, device=dev)
    aug_here.scatter_(1, torch.where(aug, tr.stmt_aug, T), True)
    aug_here = aug_here[:, :T]
    n_inst = n_inst | aug_here
    end = torch.where(aug_here, at(tr.node_end, at(tr.stmt_value, first_tok).clamp(min=0)), tr.node_end)
    depth = torch.where(aug_here, 0, tr.depth)  # the aug instruction comes after its whole statement
    key = torch.where(n_inst > 0, end * (T + 2) + (T + 1 - depth), 1 << 40)
    order = key.argsort(1)
    # rows in canonical order: parameters, nodes, return; slot s takes the row whose [start, end) holds s
    P = sm.n_params
    counts = torch.cat([(torch.arange(NP, device=dev) < P[:, None]).long(), n_inst.gather(1, order),
                        torch.ones((B, 2), dtype=torch.long, device=dev)], 1)
    ends = counts.cumsum(1)
    base = torch.empty_like(n_inst)
    base.scatter_(1, order, (ends - counts)[:, NP:NP + T])
    value_reg = base + n_inst - 1
    # the register a node's value lives in (names: their binding's)
    src = sm.source
    src_reg = torch.where(src >= T, src - T, at(value_reg, src.clamp(0, T - 1)))
    reg = torch.where(src >= 0, src_reg, value_reg)
    reg_ext = torch.cat([torch.full_like(reg[:, :1], -1), reg], 1)  # a sentinel first column for "no node"

    # each token's first instruction (calls get their arguments below)
    c0, c1, c2 = at(reg_ext, tr.child + 1).unbind(-1)  # children >= -1
    aug_target = at(reg_ext, at(tr.stmt_targets, first_tok) + 1)
    aug_value = at(reg_ext, at(tr.stmt_value, first_tok) + 1)
    op = torch.where(is_pre, _lut(op_un, kind), _lut(op_bin, kind))
    op = torch.where(is_call, _lut(b_ops, builtin), op)
    op = torch.where(is_tern, OP_INDEX["select"], op)
    op = torch.where(is_const, torch.where(is_bool, OP_INDEX["bool"], OP_INDEX["const"]), op)
    a = torch.where(aug_here, aug_target, torch.where(is_const | is_call, -1, c0))
    b = torch.where(aug_here, aug_value, torch.where(is_const | is_pre | is_call, -1, c1))
    cval = torch.where(is_num, tk.value, torch.where(is_bool, (kind == K["True"]).double(),
                                                     _lut(c_vals, sm.const_name.clamp(min=0))))
    imm = torch.where(is_const, cval, 0.0).view(torch.int64)
    imm_tok = torch.where(is_const & is_num & tk.slow_number, pos, -1)
    has_ret = body & (tr.stmt_kind == 3)
    ret_stmt = torch.where(has_ret.any(1), has_ret.long().argmax(1), 0)
    ret_reg = at(reg, at(tr.stmt_value, ret_stmt[:, None]).clamp(0, T - 1))
    # fields x rows [F, B, T + NP + 2]: the tokens', the parameters', the return's, padding's
    extra = extra_rows.expand(F, B, NP + 2).clone()
    extra[1, :, NP] = ret_reg[:, 0]
    rows = torch.cat([torch.stack([op, a, b, c2, imm, imm_tok]), extra], 2)
    # each slot's row: the last row in canonical order that starts at or before it
    canon = torch.cat([T + torch.arange(NP, device=dev).expand(B, NP), order,
                       torch.full((B, 2), T + NP, dtype=torch.long, device=dev) + torch.arange(2, device=dev)], 1)
    mark = torch.zeros((B, N + 2), dtype=torch.long, device=dev)
    mark.scatter_(1, torch.where(counts > 0, ends - counts, N + 1).clamp_(max=N + 1),
                  torch.arange(NP + T + 2, device=dev).expand(B, -1))
    owner = mark[:, :N + 1].cummax(1).values
    out = rows.gather(2, at(canon, owner).expand(F, B, N + 1))
    # call arguments: rank r of a fixed call is operand r of its instruction; a variadic call's
    # arguments 0 and 1 are its first instruction's, argument r >= 2 is operand b of fold r - 1,
    # whose operand a is the previous slot (the accumulator)
    p = tr.parent
    pc = p.clamp(min=0)
    var_arg = at(variadic, pc)
    r = tr.arg_rank
    fold = var_arg & (r >= 2)
    s = at(base, pc) + torch.where(fold, r - 1, 0)
    field = torch.where(var_arg, torch.where(r == 0, 1, 2), r + 1)
    ok = (p >= 0) & at(is_call, pc) & torch.where(var_arg, r <= MAX_FOLD, r < 3)
    flat = out.view(-1)
    spare = N + row0 * (N + 1)  # slot N of field 0
    s = s.clamp_(max=N) + row0 * (N + 1)
    flat.scatter_(0, torch.where(ok, s + field * (B * (N + 1)), spare).view(-1), reg.view(-1))
    flat.scatter_(0, torch.where(ok & fold, s + B * (N + 1), spare).view(-1), (s - row0 * (N + 1) - 1).view(-1))
    out = out[:, :, :N]
    total = P + n_inst.sum(1)
    return out[0], out[1:4].permute(1, 2, 0).contiguous(), out[4].view(torch.float64), out[5], total + 1
