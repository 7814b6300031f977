"""Pass 5, codegen: nodes -> instructions, by one sort, prefix sums and one row gather.

Canonical order is statement order and left-to-right post-order, which is the order of
(last token of the node, depth descending): a node ends with or after its last child and is
shallower than its children; disjoint nodes are ordered by position. Each node emits 0..7
instructions (a name emits none, a variadic min/max n-1); registers are the exclusive prefix sum of
those counts in that order, offset by the parameters. Each program gets a table of instruction rows:
one per token (its first instruction; operands from the children's registers), one per parameter,
the return and padding. Rows in canonical order (parameters, sorted nodes, return, padding) tile the
slots; a slot's row is the number of rows that end at or before it (a histogram of the rows' ends
and one prefix sum), and a few gathers fill all fields; call arguments and the folds' accumulators
are then scattered into their slots. O(B*T log T).

Inputs arrive int32 and the pass works in int32 (registers, slots, keys and flat indices fit: B * N * 3
< 2^31 under CHUNK_CELLS); gathers convert their indices (once each: on two threads that and a
gather beat an index_select on a flat int32 index). Its masks (roles of nodes, aug operators,
arguments) are sparse and regular, where the CPU's `torch.where` is fast (about 0.5 ns an element), and it avoids arithmetic
between an integer or float tensor and a bool mask, which torch runs through a slow casting loop.
The sort key keeps its values, so ties (only invalid trees have them) keep their order. Only the rows
of tokens that emit instructions are ever read, so their fields are computed for those tokens only.
The row tables are flat (B * T token rows, then the shared parameter and padding rows, then one
return row per program), so each field is written in place and read by one index_select.
Outputs are int32 like the batch (imm float64).
"""

from __future__ import annotations

import torch

from ...ir import OP_INDEX
from ...lang import spec
from .common import first_true, take
from .lex import Tokens
from .parse import N_BIN, N_BOOL, N_CALL, N_NUM, N_PRE, N_TERN, Tree
from .semantic import BUILTIN_NAMES, CONSTANT_NAMES, Semantics

K = spec.TOK
MAX_FOLD = 7
NP = spec.MAX_PARAMS
NK = len(spec.TOKEN_KINDS)
NB = len(BUILTIN_NAMES)
I32 = torch.int32
# the op table: binary/aug op by kind, unary op by kind, builtin op by builtin, then select, const, bool
_OP_UN, _OP_CALL, _OP_TERN = NK, 2 * NK, 2 * NK + NB
_NO_INST = 1 << 30  # sort key of tokens without instructions, above every node's key
_TABLES: dict = {}


def _tables(dev):
    """(op table (see _OP_*), builtin is variadic, immediates: 0.0 then the constants' values, the
    parameters' and padding rows' ops and immediates [NP + 1], -1 as an int32 scalar tensor)."""
    if dev not in _TABLES:
        binary, unary = [-1] * NK, [-1] * NK
        for tok, b in spec.BINARY_OPS.items():
            binary[K[tok]] = OP_INDEX[b.ir_op]
        for tok, op in spec.AUG_ASSIGN.items():
            binary[K[tok]] = OP_INDEX[spec.BINARY_OPS[op].ir_op]
        unary[K["-"]], unary[K["+"]], unary[K["not"]] = OP_INDEX["neg"], OP_INDEX["pos"], OP_INDEX["not"]
        ops = (binary + unary + [OP_INDEX[spec.BUILTINS[n].ir_op] for n in BUILTIN_NAMES]
               + [OP_INDEX["select"], OP_INDEX["const"], OP_INDEX["bool"]])
        imm = [0.0] + [float(spec.CONSTANTS[n]) for n in CONSTANT_NAMES]
        extra_ops = [OP_INDEX["param"]] * NP + [-1]  # parameters, padding
        _TABLES[dev] = tuple(t.to(dev) for t in (
            torch.tensor(ops, dtype=I32),
            torch.tensor([spec.BUILTINS[n].arity[0] != spec.BUILTINS[n].arity[1] for n in BUILTIN_NAMES]),
            torch.tensor(imm, dtype=torch.float64),
            torch.tensor(extra_ops, dtype=I32),
            torch.cat([torch.arange(NP, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)]),
            torch.tensor(-1, dtype=I32)))
    return _TABLES[dev]


def codegen(tk: Tokens, tr: Tree, sm: Semantics, ok: torch.Tensor):
    """(ops [B, N], args [B, N, 3], imm [B, N], imm_token [B, N], lengths [B]); N = T + 34; all int32
    but imm (float64). Rows where not `ok` (programs with errors) are all padding, of length 0, as
    ProgramBatch packs them (their imm_token as for a valid row)."""
    kind = tk.kind
    dev = kind.device
    B, T = kind.shape
    N = T + NP + 2  # slots; also rows in canonical order: parameters, tokens, the return, padding
    op_tab, b_var, imm_tab, extra_ops, extra_imm, minus1 = _tables(dev)
    pos = torch.arange(T, dtype=I32, device=dev)
    body, nt = tr.body, tr.ntype

    # which tokens emit instructions, and how many
    first_tok = tr.stmt_first.clamp(min=0).long()
    # the aug instruction is attributed to the aug operator token (the one its statement records)
    aug_here = body & (tr.stmt_aug.gather(1, first_tok) == pos)
    is_num, is_bool, is_pre, is_tern = nt == N_NUM, nt == N_BOOL, nt == N_PRE, nt == N_TERN
    is_const = body & (is_num | is_bool | (sm.const_name >= 0))
    builtin = sm.builtin.clamp(min=0)
    is_call = body & (nt == N_CALL) & (sm.builtin >= 0)
    node = is_const | is_call | (body & (is_pre | is_tern | (nt == N_BIN)))
    variadic = is_call & take(b_var, builtin)
    inst = node | aug_here
    n_inst = torch.where(variadic, (tr.n_args - 1).clamp_(min=1), inst.int())
    # sort key (last token, -depth); the aug instruction comes after its whole statement (depth 0)
    sv = tr.stmt_value.gather(1, first_tok)
    node_end = tr.node_end
    end = torch.where(aug_here, node_end.gather(1, sv.clamp(min=0).long()), node_end)
    key = torch.where(inst, end * (T + 2) - tr.depth, _NO_INST)  # (aug operators are walls: depth 0)
    order = key.argsort(1)
    # rows in canonical order: parameters, nodes, return, padding; their registers by a prefix sum
    P = sm.n_params
    counts = torch.cat([(torch.arange(NP, device=dev) < P[:, None]).int(), n_inst.gather(1, order),
                        torch.ones((B, 2), dtype=I32, device=dev)], 1)
    ends = counts.cumsum(1, dtype=I32)
    base = torch.empty_like(n_inst)
    base.scatter_(1, order, ends[:, NP:NP + T] - counts[:, NP:NP + T])
    value_reg = base + n_inst - 1
    # the register a node's value lives in: its own, or a name's binding's (a node's, or parameter
    # src - T's: src < 2T)
    reg = torch.cat([value_reg, pos.expand(B, T)], 1).gather(1, torch.where(sm.source < 0, pos, sm.source).long())
    reg_ext = torch.cat([torch.full_like(reg[:, :1], -1), reg], 1)  # a sentinel first column for "no node"

    # the row tables, flat: B * T token rows, then the parameters' NP rows, padding, B returns
    BT, RET = B * T, B * T + NP + 1
    n_rows = RET + B
    rows_args = torch.empty((n_rows, 3), dtype=I32, device=dev)
    rows_op = torch.empty(n_rows, dtype=I32, device=dev)
    rows_tok = torch.empty(n_rows, dtype=I32, device=dev)
    rows_imm = torch.empty(n_rows, dtype=torch.float64, device=dev)
    # operands: the children's registers (constants and calls have no children: calls get their
    # arguments below); an aug operator has no children either, its operands are its statement's
    # target and value; a prefix operator's second child is its first
    child_at = tr.child + torch.arange(1, B * (T + 1), T + 1, dtype=I32, device=dev)[:, None, None]
    torch.index_select(reg_ext.view(-1), 0, child_at.view(-1), out=rows_args[:BT].view(-1))
    c = rows_args[:BT].view(B, T, 3)
    c[:, :, 0] = torch.where(aug_here, reg.gather(1, tr.stmt_targets.gather(1, first_tok).long()), c[:, :, 0])
    c[:, :, 1] = torch.where(aug_here, reg_ext.gather(1, (sv + 1).long()),
                             c[:, :, 1].masked_fill_(is_pre, -1))
    rows_args[BT:] = -1
    has_ret = body & (tr.stmt_kind == 3)
    ret_stmt = first_true(has_ret).clamp_(min=0).long()  # the first return statement (0 if none)
    ret_value = tr.stmt_value.gather(1, ret_stmt[:, None]).clamp_(0, T - 1).long()
    rows_args[RET:, 0] = reg.gather(1, ret_value)[:, 0]
    # op, as an op-table index: bool constant > constant > ternary > builtin call > prefix > binary or
    # aug operator (the first role that applies)
    op_idx = torch.where(is_pre, kind + _OP_UN, kind)
    op_idx = torch.where(is_call, sm.builtin + _OP_CALL, op_idx)
    op_idx = torch.where(is_tern, _OP_TERN, op_idx)
    op_idx = torch.where(is_const, torch.where(is_bool, _OP_TERN + 2, _OP_TERN + 1), op_idx)
    torch.index_select(op_tab, 0, op_idx.view(-1), out=rows_op[:BT])
    rows_op[BT:RET] = extra_ops
    rows_op[RET:] = OP_INDEX["ret"]
    torch.where(is_num & tk.slow_number, pos, minus1, out=rows_tok[:BT].view(B, T))  # valued on the host
    rows_tok[BT:] = -1
    # immediates: a number's value, True as 1.0, or a named constant's value (imm_tab[0] = 0.0)
    imm = torch.where(is_bool & (kind == K["True"]), 1.0, take(imm_tab, sm.const_name + 1))
    torch.where(is_num, tk.value, imm, out=rows_imm[:BT].view(B, T))
    rows_imm[BT:RET] = extra_imm
    rows_imm[RET:] = 0.0

    # each slot's row: rows tile the slots in canonical order, so slot s is in row number
    # #(rows ending at or before s); the last row (padding) also takes every slot after the end
    hist = torch.zeros((B, N + 1), dtype=I32, device=dev)
    hist.scatter_add_(1, ends[:, :-1].clamp(max=N).long(), torch.ones_like(ends[:, :1]).expand(B, N - 1))
    owner = hist[:, :N].cumsum(1, dtype=I32)
    rows = torch.arange(B, device=dev)[:, None]
    canon = torch.cat([BT + torch.arange(NP, device=dev).expand(B, NP), order + rows * T, RET + rows,
                       torch.full((B, 1), BT + NP, device=dev)], 1)
    row = canon.gather(1, owner.long())
    imm_token = rows_tok.index_select(0, row.view(-1)).view(B, N)
    row = torch.where(ok[:, None], row, BT + NP).view(-1)  # invalid rows: padding
    ops = rows_op.index_select(0, row).view(B, N)
    imm = rows_imm.index_select(0, row).view(B, N)
    spare = B * N * 3  # one flat slot past the operands, for writes that land nowhere
    flat = torch.empty(spare + 3, dtype=I32, device=dev)
    torch.index_select(rows_args, 0, row, out=flat[:spare].view(B * N, 3))
    # call arguments: rank r of a fixed call is operand r of its instruction; a variadic call's
    # arguments 0 and 1 are its first instruction's, argument r >= 2 is operand b of fold r - 1,
    # whose operand a is the previous slot (the accumulator)
    # (for valid programs every parent is a builtin call of a valid arity; the clamps keep the
    # writes of trees with errors in their row, and slots past the row's end go to the spare; rows
    # not `ok` get none)
    p = tr.parent
    pc = p.clamp(min=0).long()
    r = tr.arg_rank
    is_arg = (p >= 0) & ok[:, None]
    fold = is_arg & variadic.gather(1, pc) & (r >= 2)
    fold32 = fold.int()  # (int32 arithmetic with a bool tensor goes through a slow casting loop)
    s = (base.gather(1, pc) + (r - 1) * fold32).clamp_(0, N)
    at = s * 3 + torch.arange(0, B * N * 3, N * 3, dtype=I32, device=dev)[:, None]
    off = s >= N
    flat.scatter_(0, torch.where(~is_arg | off, spare, at + r.clamp(0, 2) - fold32).view(-1).long(), reg.view(-1))
    flat.scatter_(0, torch.where(fold & ~off, at, spare).view(-1).long(), (s - 1).view(-1))
    lengths = (P + (ends[:, NP + T] - ends[:, NP - 1])).mul_(ok)  # parameters, instructions, the return
    return ops, flat[:spare].view(B, N, 3), imm, imm_token, lengths
