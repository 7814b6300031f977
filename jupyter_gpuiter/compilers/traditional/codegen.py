"""Pass 5, codegen: nodes -> instructions, by one sort, prefix sums and one row gather.

Canonical order is statement order and left-to-right post-order, which is the order of
(last token of the node, depth descending): a node ends with or after its last child and is
shallower than its children; disjoint nodes are ordered by position. Each node emits 0..7
instructions (a name emits none, a variadic min/max n-1); registers are the exclusive prefix sum of
those counts in that order, offset by the parameters. Each program gets a table of instruction rows:
one per token (its first instruction; operands from the children's registers), one per parameter,
the return and padding. Each slot takes the last row in canonical order (parameters, sorted nodes,
return, padding) that starts at or before it (a running maximum), and one gather fills all fields;
call arguments and the folds' accumulators are then scattered into their slots. Outputs are int32
like the batch (imm float64). O(B*T log T).
"""

from __future__ import annotations

import torch

from ...ir import OP_INDEX
from ...lang import spec
from .common import take
from .lex import Tokens
from .parse import N_BIN, N_BOOL, N_CALL, N_NUM, N_PRE, N_TERN, Tree
from .semantic import BUILTIN_NAMES, CONSTANT_NAMES, Semantics

K = spec.TOK
MAX_FOLD = 7
NP = spec.MAX_PARAMS
F = 5  # row fields: op, a, b, c, imm_token (imm apart)
_TABLES: dict = {}


def _tables(dev):
    """(binary/aug op by kind, unary op by kind, builtin op, builtin is variadic, constant values,
    the rows after the tokens' [F, 1, NP + 2] and their imm [NP + 2])."""
    if dev not in _TABLES:
        binary, unary = [-1] * len(spec.TOKEN_KINDS), [-1] * len(spec.TOKEN_KINDS)
        for tok, b in spec.BINARY_OPS.items():
            binary[K[tok]] = OP_INDEX[b.ir_op]
        for tok, op in spec.AUG_ASSIGN.items():
            binary[K[tok]] = OP_INDEX[spec.BINARY_OPS[op].ir_op]
        unary[K["-"]], unary[K["+"]], unary[K["not"]] = OP_INDEX["neg"], OP_INDEX["pos"], OP_INDEX["not"]
        extra = torch.full((F, NP + 2), -1, dtype=torch.int32)  # parameters, the return, padding
        extra[0, :NP], extra[0, NP] = OP_INDEX["param"], OP_INDEX["ret"]
        extra_imm = torch.cat([torch.arange(NP, dtype=torch.float64), torch.zeros(2, dtype=torch.float64)])
        _TABLES[dev] = tuple(t.to(dev) for t in (
            torch.tensor(binary, dtype=torch.int32), torch.tensor(unary, dtype=torch.int32),
            torch.tensor([OP_INDEX[spec.BUILTINS[n].ir_op] for n in BUILTIN_NAMES], dtype=torch.int32),
            torch.tensor([spec.BUILTINS[n].arity[0] != spec.BUILTINS[n].arity[1] for n in BUILTIN_NAMES]),
            torch.tensor([spec.CONSTANTS[n] for n in CONSTANT_NAMES], dtype=torch.float64),
            extra[:, None], extra_imm))
    return _TABLES[dev]


def codegen(tk: Tokens, tr: Tree, sm: Semantics):
    """(ops [B, N], args [B, N, 3], imm [B, N], imm_token [B, N], lengths [B]); N = T + 34; ops, args, imm_token int32."""
    kind = tk.kind
    dev = kind.device
    B, T = kind.shape
    N = T + NP + 2
    op_bin, op_un, b_ops, b_var, c_vals, extra_rows, extra_imm = _tables(dev)
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
    variadic = is_call & take(b_var, builtin)
    n_inst = (is_const | is_bin | is_pre | is_tern | is_call).long()
    n_inst = torch.where(variadic, (tr.n_args - 1).clamp(min=1), n_inst)
    # the aug instruction is attributed to the aug operator token
    aug_here = torch.zeros((B, T + 1), dtype=torch.bool, device=dev)
    aug_here.scatter_(1, torch.where(aug, tr.stmt_aug, T), True)
    aug_here = aug_here[:, :T]
    n_inst = n_inst | aug_here
    end = torch.where(aug_here, at(tr.node_end, at(tr.stmt_value, first_tok).clamp(min=0)), tr.node_end)
    depth = torch.where(aug_here, 0, tr.depth)  # the aug instruction comes after its whole statement
    key = torch.where(n_inst > 0, end * (T + 2) - depth, 1 << 40)
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
    reg32 = reg.int()
    reg_ext = torch.cat([torch.full_like(reg32[:, :1], -1), reg32], 1)  # a sentinel first column for "no node"

    # each token's first instruction (calls get their arguments below)
    c0, c1, c2 = at(reg_ext, tr.child + 1).unbind(-1)  # children >= -1
    aug_target = at(reg_ext, at(tr.stmt_targets, first_tok) + 1)
    aug_value = at(reg_ext, at(tr.stmt_value, first_tok) + 1)
    # the rows [F, B, T + NP + 2]: the tokens' first instructions, the parameters, the return,
    # padding; int32 like the batch, imm apart as float64
    rows = torch.empty((F, B, T + NP + 2), dtype=torch.int32, device=dev)
    imm_rows = torch.empty((B, T + NP + 2), dtype=torch.float64, device=dev)
    rows[:, :, T:], imm_rows[:, T:] = extra_rows, extra_imm
    op = torch.where(is_pre, take(op_un, kind), take(op_bin, kind))
    op = torch.where(is_call, take(b_ops, builtin), op)
    op = torch.where(is_tern, OP_INDEX["select"], op)
    op = torch.where(is_const, OP_INDEX["const"], op)
    rows[0, :, :T] = torch.where(is_const & is_bool, OP_INDEX["bool"], op)
    rows[1, :, :T] = torch.where(aug_here, aug_target, torch.where(is_const | is_call, -1, c0))
    rows[2, :, :T] = torch.where(aug_here, aug_value, torch.where(is_const | is_pre | is_call, -1, c1))
    rows[3, :, :T] = c2
    rows[4, :, :T] = torch.where(is_const & is_num & tk.slow_number, pos, -1)
    cval = torch.where(is_num, tk.value, torch.where(is_bool, (kind == K["True"]).double(),
                                                     take(c_vals, sm.const_name.clamp(min=0))))
    imm_rows[:, :T] = torch.where(is_const, cval, 0.0)
    has_ret = body & (tr.stmt_kind == 3)
    ret_stmt = torch.where(has_ret.any(1), has_ret.long().argmax(1), 0)
    rows[1, :, T + NP] = at(reg32, at(tr.stmt_value, ret_stmt[:, None]).clamp(0, T - 1))[:, 0]
    # each slot's row: the last row in canonical order that starts at or before it
    canon = torch.cat([T + torch.arange(NP, device=dev).expand(B, NP), order,
                       torch.full((B, 2), T + NP, dtype=torch.long, device=dev) + torch.arange(2, device=dev)], 1)
    mark = torch.zeros((B, N + 2), dtype=torch.long, device=dev)
    mark.scatter_(1, torch.where(counts > 0, ends - counts, N + 1).clamp_(max=N + 1),
                  torch.arange(NP + T + 2, device=dev).expand(B, -1))
    owner = mark[:, :N + 1].cummax(1).values
    row = at(canon, owner)
    out = rows.gather(2, row.expand(F, B, N + 1))
    # call arguments: rank r of a fixed call is operand r of its instruction; a variadic call's
    # arguments 0 and 1 are its first instruction's, argument r >= 2 is operand b of fold r - 1,
    # whose operand a is the previous slot (the accumulator)
    # (for valid programs every parent is a builtin call of a valid arity; the clamps only keep the
    # writes of invalid rows in their row)
    p = tr.parent
    pc = p.clamp(min=0)
    r = tr.arg_rank
    fold = (p >= 0) & at(variadic, pc) & (r >= 2)
    field = r.clamp(0, 2) + 1 - fold.long()
    s = (at(base, pc) + torch.where(fold, r - 1, 0)).clamp_(0, N) + row0 * (N + 1)
    spare = N + row0 * (N + 1)  # slot N of field 0
    flat = out.view(-1)
    flat.scatter_(0, torch.where(p >= 0, s + field * (B * (N + 1)), spare).view(-1), reg32.view(-1))
    flat.scatter_(0, torch.where(fold, s + B * (N + 1), spare).view(-1), (s - row0 * (N + 1) - 1).view(-1).int())
    out = out[:, :, :N]
    total = P + n_inst.sum(1)
    return out[0], out[1:4].permute(1, 2, 0).contiguous(), imm_rows.gather(1, row)[:, :N], out[4], total + 1
