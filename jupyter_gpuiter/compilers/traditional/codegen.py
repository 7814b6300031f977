"""Pass 5, codegen: nodes -> instructions, by one sort and prefix sums.

Canonical order is statement order and left-to-right post-order, which is the order of
(last token of the node, depth descending): a node ends with or after its last child and is
shallower than its children; disjoint nodes are ordered by position. Each node emits 0..7
instructions (a name emits none, a variadic min/max n-1); registers are the exclusive prefix sum of
those counts in that order, offset by the parameters. Operands are gathered from the children's
registers. O(B*T log T).
"""

from __future__ import annotations

import torch

from ...ir import OP_INDEX
from ...lang import spec
from .common import gather, positions
from .lex import Tokens
from .parse import N_BIN, N_BOOL, N_CALL, N_NUM, N_PRE, N_TERN, Tree
from .semantic import BUILTIN_NAMES, CONSTANT_NAMES, Semantics

K = spec.TOK
MAX_FOLD = 7


def _op_table(dev):
    t = torch.full((len(spec.TOKEN_KINDS),), -1, dtype=torch.long, device=dev)
    for tok, b in spec.BINARY_OPS.items():
        t[K[tok]] = OP_INDEX[b.ir_op]
    for tok, op in spec.AUG_ASSIGN.items():
        t[K[tok]] = OP_INDEX[spec.BINARY_OPS[op].ir_op]
    return t


def codegen(tk: Tokens, tr: Tree, sm: Semantics):
    """(ops [B, N], args [B, N, 3], imm [B, N], imm_token [B, N], lengths [B]); N = T + 34."""
    kind = tk.kind
    dev = kind.device
    B, T = kind.shape
    pos = positions(kind)
    N = T + spec.MAX_PARAMS + 2
    body = tr.body
    op_tab = _op_table(dev)
    unary = torch.full((len(spec.TOKEN_KINDS),), -1, dtype=torch.long, device=dev)
    unary[K["-"]], unary[K["+"]], unary[K["not"]] = OP_INDEX["neg"], OP_INDEX["pos"], OP_INDEX["not"]
    b_ops = torch.tensor([OP_INDEX[spec.BUILTINS[n].ir_op] for n in BUILTIN_NAMES], device=dev)
    b_var = torch.tensor([spec.BUILTINS[n].arity[0] != spec.BUILTINS[n].arity[1] for n in BUILTIN_NAMES], device=dev)
    c_vals = torch.tensor([spec.CONSTANTS[n] for n in CONSTANT_NAMES], dtype=torch.float64, device=dev)

    nt = tr.ntype
    aug = body & (tr.stmt_aug >= 0) & (tr.stmt_first == pos)  # at statement start: the aug op emits
    aug_tok = tr.stmt_aug.clamp(min=0)
    is_const = body & ((nt == N_NUM) | (nt == N_BOOL) | (sm.const_name >= 0))
    is_op = body & ((nt == N_BIN) | (nt == N_PRE) | (nt == N_TERN))
    is_call = body & (nt == N_CALL) & (sm.builtin >= 0)
    variadic = is_call & b_var[sm.builtin.clamp(min=0)]
    n_inst = torch.where(is_const | is_op, 1, 0)
    n_inst = torch.where(is_call, torch.where(variadic, (tr.n_args - 1).clamp(min=1), 1), n_inst)
    # the aug instruction is attributed to the aug operator token
    aug_here = torch.zeros((B, T + 1), dtype=torch.bool, device=dev)
    aug_here.scatter_(1, torch.where(aug, aug_tok, T), True)
    aug_here = aug_here[:, :T]
    n_inst = torch.where(aug_here, 1, n_inst)
    end = torch.where(aug_here, gather(tr.node_end, gather(tr.stmt_value, tr.stmt_first)),
                      tr.node_end)
    depth = torch.where(aug_here, 0, tr.depth)  # the aug instruction comes after its whole statement
    key = torch.where(n_inst > 0, end * (T + 2) + (T + 1 - depth), 1 << 40)
    order = key.argsort(1)
    counts = n_inst.gather(1, order)
    base_sorted = counts.cumsum(1) - counts
    base = torch.empty_like(base_sorted)
    base.scatter_(1, order, base_sorted)
    base = base + sm.n_params[:, None]
    value_reg = base + n_inst - 1
    # the register a node's value lives in (names: their binding's)
    src = sm.source
    src_reg = torch.where(src >= T, src - T, gather(value_reg, src))
    reg = torch.where(src >= 0, src_reg, value_reg)

    reg_ext = torch.cat([torch.full_like(reg[:, :1], -1), reg], 1)  # a sentinel first column for "no node"

    def reg_of(node):
        return reg_ext.gather(1, (node + 1).clamp(min=0))

    ops = torch.full((B, N + 1), -1, dtype=torch.long, device=dev)
    args = [torch.full((B, N + 1), -1, dtype=torch.long, device=dev) for _ in range(3)]
    imm = torch.zeros((B, N + 1), dtype=torch.float64, device=dev)
    imm_tok = torch.full((B, N + 1), -1, dtype=torch.long, device=dev)

    def emit(mask, at, op, operands=(), value=None, token=None):
        """Write the instructions of the tokens in `mask` at slots `at`; the others go to the spare
        column N, so the values need no masking."""
        idx = torch.where(mask, at, N)
        ops.scatter_(1, idx, op)
        for j, operand in enumerate(operands):
            args[j].scatter_(1, idx, operand)
        if value is not None:
            imm.scatter_(1, idx, value)
        if token is not None:
            imm_tok.scatter_(1, idx, token)

    # every node's first instruction at once: constants, operators, aug assignments, calls
    c0, c1, c2 = reg_ext.gather(1, tr.child.reshape(B, 3 * T) + 1).view(B, T, 3).unbind(-1)  # children >= -1
    is_bin, is_pre, is_tern = body & (nt == N_BIN), body & (nt == N_PRE), body & (nt == N_TERN)
    first_tok = tr.stmt_first.clamp(min=0)
    aug_target, aug_value = reg_of(gather(tr.stmt_targets, first_tok)), reg_of(gather(tr.stmt_value, first_tok))
    # calls: argument registers by (call, rank)
    arg_regs = torch.full((B, T + 1, 8), -1, dtype=torch.long, device=dev)
    is_arg = tr.parent >= 0
    flat = torch.where(is_arg & (tr.arg_rank < 8), tr.parent * 8 + tr.arg_rank, T * 8)
    arg_flat = arg_regs.view(B, -1)
    arg_flat.scatter_(1, flat, torch.where(is_arg, reg, -1))
    arg_regs = arg_regs[:, :T]
    bop = b_ops[sm.builtin.clamp(min=0)]
    fixed = is_call & ~variadic
    folds = variadic & (tr.n_args > 1)
    cval = torch.where(nt == N_NUM, tk.value, torch.where(nt == N_BOOL, (kind == K["True"]).double(),
                                                            c_vals[sm.const_name.clamp(min=0)]))
    op = torch.where(is_bin | aug_here, op_tab[kind], torch.where(is_pre, unary[kind], bop))
    op = torch.where(is_tern, OP_INDEX["select"], op)
    op = torch.where(is_const, torch.where(nt == N_BOOL, OP_INDEX["bool"], OP_INDEX["const"]), op)
    a = torch.where(aug_here, aug_target, torch.where(is_call, arg_regs[..., 0], c0))
    b = torch.where(aug_here, aug_value, torch.where(is_call, arg_regs[..., 1], c1))
    c = torch.where(fixed, arg_regs[..., 2], torch.where(is_tern, c2, -1))
    a = torch.where(is_const, -1, a)
    b = torch.where(is_const | is_pre, -1, b)
    emit(is_const | is_bin | is_pre | is_tern | aug_here | fixed | folds, base, op, (a, b, c), value=torch.where(is_const, cval, 0.0),
         token=torch.where(is_const & (nt == N_NUM) & tk.slow_number, pos, -1))
    # variadic min/max: the further folds acc = op(acc, next argument) fill the slots after the call's
    # first. Per slot, not per fold: slot s belongs to the last such call whose first slot is <= s
    # (a running maximum of (first slot, node) keys) and is its fold j = s - first slot.
    multi = variadic & (tr.n_args > 2)
    mark = torch.full((B, N + 1), -1, dtype=torch.long, device=dev)
    mark.scatter_(1, torch.where(multi, base, N), base * (T + 1) + pos)
    owner = mark[:, :N].cummax(1).values
    node = owner % (T + 1)
    slot = torch.arange(N, device=dev)
    j = slot - owner // (T + 1)
    fold = (owner >= 0) & (j >= 1) & (j < MAX_FOLD) & (j < gather(tr.n_args, node) - 1)
    ops[:, :N] = torch.where(fold, gather(bop, node), ops[:, :N])
    args[0][:, :N] = torch.where(fold, slot - 1, args[0][:, :N])
    fold_arg = arg_flat.gather(1, (node * 8 + j + 1).clamp(0, T * 8 - 1))
    args[1][:, :N] = torch.where(fold, fold_arg, args[1][:, :N])
    # parameters and the return
    P = sm.n_params
    pidx = torch.arange(N + 1, device=dev).expand(B, N + 1)
    is_param = pidx < P[:, None]
    ops = torch.where(is_param, OP_INDEX["param"], ops)
    imm = torch.where(is_param, pidx.double(), imm)
    total = P + n_inst.sum(1)
    ret_stmt = torch.where((body & (tr.stmt_kind == 3)).any(1), (body & (tr.stmt_kind == 3)).long().argmax(1), 0)
    ret_val = gather(tr.stmt_value, ret_stmt)
    ret_reg = gather(reg, ret_val)
    ops.scatter_(1, total[:, None].clamp(max=N), torch.full_like(total[:, None], OP_INDEX["ret"]))
    args[0].scatter_(1, total[:, None].clamp(max=N), ret_reg[:, None])
    return ops[:, :N], torch.stack(args, -1)[:, :N], imm[:, :N], imm_tok[:, :N], total + 1
