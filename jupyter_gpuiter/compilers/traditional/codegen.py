"""Pass 5, codegen: nodes -> instructions, by prefix sums, a running maximum and one row gather.

Canonical order is statement order and left-to-right post-order: the nodes before a node are those
that end before its first token, and its descendants (the nodes in its span but itself). Each node
emits 0..7 instructions (a name emits none, a variadic min/max n-1, a reduction one: sum, mean, or a
min/max of one argument, whose op the table's one-argument half gives); a node's first register is the
number of parameters plus the instructions of the nodes before it: two prefix sums of those counts
(by position, and less those of the nodes that have not ended) read at the ends of its span, no
sort. Each program gets a table of instruction rows: one per token (its first instruction; operands
from the children's registers), one per parameter, and padding. Rows in canonical order
(parameters, nodes, padding from the return's slot on) tile the slots; a slot's row is the last to
start at or before it (a running maximum of first slot and row code), and a few gathers fill all
fields; the return, call arguments and the folds' accumulators are then scattered into their
slots. O(B*T).

Inputs arrive int32 and the pass works in int32 (registers, slots, keys and flat indices fit: B * N * 3
< 2^31 under CHUNK_CELLS); gathers convert their indices (once each: on two threads that and a
gather beat an index_select on a flat int32 index). Its masks (roles of nodes, aug operators,
arguments) are sparse and regular, where the CPU's `torch.where` is fast (about 0.5 ns an element), and it avoids arithmetic
between an integer or float tensor and a bool mask, which torch runs through a slow casting loop.
Spans of an invalid tree may overlap, so their registers may collide: such rows are padding, and
clamps keep their writes in range. Only the rows of tokens that emit instructions are ever read, so
their fields are computed for those tokens only. The row tables are flat (B * T token rows, then the
shared parameter and padding rows), so each field is written in place and read by one index_select.
Outputs are int32 like the batch (imm float64).
"""

from __future__ import annotations

import functools

import torch

from ...ir import OP_INDEX
from ...lang import spec
from .batch_lexer import Tokens
from .common import eq, first_true, take
from .parse import N_ATTR, N_BIN, N_BOOL, N_CALL, N_CALLEE, N_NAME, N_NUM, N_PRE, N_TERN, Tree
from .semantic import BUILTIN_NAMES, CONSTANT_NAMES, Semantics

K = spec.TOK
MAX_FOLD = 7
NP = spec.MAX_PARAMS
NK = len(spec.TOKEN_KINDS)
NB = len(BUILTIN_NAMES)
I32 = torch.int32
N_TYPES = N_CALLEE + 1
_TABLES: dict = {}


@functools.lru_cache(maxsize=64)
def _slot_codes(T: int, dev) -> tuple[torch.Tensor, torch.Tensor]:
    """[N + 1] int32: slot s << 12 | T + s (a parameter's row code at its slot), and s (codes < 2^12:
    T <= 2 * MAX_TOKENS + 2)."""
    slot = torch.arange(T + NP + 3, dtype=I32, device=dev)
    return (slot << 12) | (T + slot), slot


def _tables(dev):
    """(op table (see codegen), builtin is variadic, builtin reduces with one argument, immediates: 0.0, the
    constants' values, 1.0 (True), the parameters' and padding rows' ops and immediates [NP + 1], -1 as an
    int32 scalar tensor)."""
    if dev not in _TABLES:
        binary, unary = [-1] * NK, [-1] * NK
        for tok, b in spec.BINARY_OPS.items():
            binary[K[tok]] = OP_INDEX[b.ir_op]
        for tok, op in spec.AUG_ASSIGN.items():
            binary[K[tok]] = OP_INDEX[spec.BINARY_OPS[op].ir_op]
        unary[K["-"]], unary[K["+"]], unary[K["not"]] = OP_INDEX["neg"], OP_INDEX["pos"], OP_INDEX["not"]
        # builtins by index, then (rows NB..2NB-1) the same called with one argument: a reduction's op
        builtin_ops = [OP_INDEX[spec.BUILTINS[n].ir_op] for n in BUILTIN_NAMES]
        builtin_ops += [OP_INDEX[spec.REDUCTIONS.get(n, spec.BUILTINS[n].ir_op)] for n in BUILTIN_NAMES]
        ops = []  # by (builtin + 1 (+ NB: with one argument), node type, kind); what a node of each type emits
        for b in [-1] + list(range(2 * NB)):
            for t in range(N_TYPES):
                for k in range(NK):
                    ops.append(OP_INDEX["const"] if t in (N_NUM, N_NAME, N_ATTR) else OP_INDEX["bool"]
                               if t == N_BOOL else OP_INDEX["select"] if t == N_TERN else
                               (builtin_ops[b] if b >= 0 else -1) if t == N_CALL else unary[k] if t == N_PRE
                               else binary[k])
        imm = [0.0] + [float(spec.CONSTANTS[n]) for n in CONSTANT_NAMES] + [1.0]
        extra_ops = [OP_INDEX["param"]] * NP + [-1]  # parameters, padding
        _TABLES[dev] = tuple(t.to(dev) for t in (
            torch.tensor(ops, dtype=I32),
            torch.tensor([spec.BUILTINS[n].arity[0] != spec.BUILTINS[n].arity[1] for n in BUILTIN_NAMES]),
            torch.tensor([n in spec.REDUCTIONS for n in BUILTIN_NAMES]),
            torch.tensor(imm, dtype=torch.float64),
            torch.tensor(extra_ops, dtype=I32),
            torch.cat([torch.arange(NP, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)]),
            torch.tensor(-1, dtype=I32)))
    return _TABLES[dev]


def codegen(tk: Tokens, tr: Tree, sm: Semantics, ok: torch.Tensor):
    """(ops [B, N], args [B, N, 3], imm [B, N], imm_token [B, N], lengths [B]); N = T + 34; all int32
    but imm (float64). Rows where not `ok` (programs with errors) are all padding, of length 0, as
    ProgramBatch packs them (their imm_token all -1)."""
    kind = tk.kind
    dev = kind.device
    B, T = kind.shape
    N = T + NP + 2  # slots: parameters, instructions, the return, padding
    assert N < 4096  # row codes in 12 bits
    op_tab, b_var, b_red, imm_tab, extra_ops, extra_imm, minus1 = _tables(dev)
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
    # sum, mean and one-argument max/min reduce over the row: one instruction, the reduction's op
    # (a variadic call of one argument emits one instruction anyway, its operand the argument)
    reduces = is_call & take(b_red, builtin) & eq(tr.n_args, 1)
    inst = node | aug_here
    n_inst = torch.where(variadic, (tr.n_args - 1).clamp_(min=1), inst.int())
    # a node's first register: the parameters, then the instructions of the nodes before it in
    # canonical order, which are those that end before its first token and its descendants (the
    # nodes in its span but itself); the aug instruction spans its statement's value, from the
    # first token (walls' node_start)
    sv = tr.stmt_value.gather(1, first_tok)
    node_end = tr.node_end
    end1 = torch.where(aug_here, node_end.gather(1, sv.clamp(min=0).long()), node_end).add_(1).long()
    w_ext = torch.zeros((B, T + 1), dtype=I32, device=dev)
    w_ext[:, 1:] = n_inst
    upto = w_ext.cumsum(1, dtype=I32)  # instructions of the tokens before each column
    # and of those that do not end before it
    open_ = w_ext.sub_(torch.zeros_like(w_ext).scatter_add_(1, end1, n_inst)).cumsum(1, dtype=I32)
    P = sm.n_params
    base = upto.gather(1, end1).sub_(open_.gather(1, tr.node_start.long())).sub_(n_inst).add_(P[:, None])
    total = P + upto[:, T]  # parameters and instructions: the return's slot
    value_reg = base + n_inst - 1
    # the register a node's value lives in: its own, or a name's binding's (a node's, or parameter
    # src - T's: src < 2T)
    reg = torch.cat([value_reg, pos.expand(B, T)], 1).gather(1, sm.source.long())
    reg_ext = torch.cat([torch.full_like(reg[:, :1], -1), reg], 1)  # a sentinel first column for "no node"

    # the row tables, flat: B * T token rows, then the parameters' NP rows and padding
    BT = B * T
    n_rows = BT + NP + 1
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
    ret_reg = reg.gather(1, ret_value)[:, 0]
    # op by (builtin, node type, kind): of instruction tokens, names and attributes are constants,
    # aug operators have no node type
    # (one-argument calls of a reduction name read the table's second half of builtins)
    op_idx = sm.builtin.add(1).add_(reduces.int().mul_(NB)).mul_(N_TYPES).add_(nt.int()).mul_(NK).add_(kind)
    torch.index_select(op_tab, 0, op_idx.view(-1), out=rows_op[:BT])
    rows_op[BT:] = extra_ops
    torch.where(is_num & tk.slow_number, pos, minus1, out=rows_tok[:BT].view(B, T))  # valued on the host
    rows_tok[BT:] = -1
    # immediates: a number's value, True as 1.0, or a named constant's value (imm_tab[0] = 0.0)
    is_true = (kind ^ K["True"]).clamp_(max=1).neg_().add_(1)  # kind == True as int32 arithmetic
    imm = take(imm_tab, is_true.mul_(len(CONSTANT_NAMES) + 1).add_(sm.const_name).add_(1))
    torch.where(is_num, tk.value, imm, out=rows_imm[:BT].view(B, T))
    rows_imm[BT:] = extra_imm

    # each slot's row: rows tile the slots (parameters, instructions in canonical order, padding from
    # the return's slot on), so a slot's row is the last to start at or before it: a running maximum
    # of (first slot << 12 | row code), the code a token's position, or T + parameter (padding T + NP)
    slot_code, slot = _slot_codes(T, dev)
    codes = slot_code & (slot - P[:, None]).bitwise_right_shift_(31)  # parameters' rows
    codes.scatter_(1, total.clamp(max=N)[:, None].long(), (total << 12).add_(T + NP)[:, None])
    at = (base.clamp(0, N) - N).mul_(inst).add_(N).long()  # others to a spare column
    codes.scatter_(1, at, (base << 12).bitwise_or_(pos))
    code = codes.cummax(1).values[:, :N].bitwise_and_(4095)
    # tokens' rows are b * T + code, the others' BT + code - T
    shift = (torch.arange(B, dtype=I32, device=dev) * T - (BT - T))[:, None]
    row = (code - T).bitwise_right_shift_(31).bitwise_and_(shift).add_(code).add_(BT - T)
    row = torch.where(ok[:, None], row, BT + NP).view(-1)  # invalid rows: padding
    imm_token = rows_tok.index_select(0, row).view(B, N)
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
    # the return, in valid rows
    ret_at = total.clamp(max=N - 1)[:, None].long()
    ops.scatter_(1, ret_at, torch.where(ok, OP_INDEX["ret"], -1).int()[:, None])
    flat.view(-1)[:spare].view(B, N * 3).scatter_(1, ret_at * 3, torch.where(ok, ret_reg, -1)[:, None])
    lengths = (total + 1).mul_(ok)  # parameters, instructions, the return
    return ops, flat[:spare].view(B, N, 3), imm, imm_token, lengths
