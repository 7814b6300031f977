"""Pass 3, parse: tokens -> expression trees, in O(log n) tensor steps, n the most tokens on one logical
line (no loop over the tree).

Operator precedence as binding powers: each token gets a left and a right binding power (lbp,
rbp), offset by its nesting level (parentheses and ternary conditions), and every token's parent is
one of its two nearest "weaker" neighbours (all nearest smaller values, ANSV):

    L(i) = max j < i with rbp(j) < lbp(i)      R(i) = min k > i with lbp(k) < rbp(i)
    parent(i) = L(i) if rbp(L(i)) >= lbp(R(i)) else R(i)

This is the Cartesian tree of the expression, generalised to prefix operators (lbp = inf),
right-associative `**`, calls (`(` binds the name on its left tightest) and `a if c else b` (an `if`
node under an `else` node). L and R come from sparse tables of minima by binary lifting:
O(B*T log n) work, O(log n) steps. A subtree is exactly the open interval (L(i), R(i)), which gives
each node's first and last token, and its depth (how many such intervals cover it: one prefix sum).
Statements are split by walls (`=`, `op=`, `return`, NEWLINE) whose binding power is below everything,
so a search ends inside its logical line.

    x = - a * ( b + c )        bp:  x:inf  = wall  -:(inf,32)  a:inf  *:(28,29)  (:(inf,62)
                                     b:inf  +:(88,89)  c:inf  ):(62,inf)
    tree: = | * ( - (a) , ( ( + (b, c) ) )

Everything inside is int32 (binding powers, positions, counts; INF = 2^30), table lookups are
index_selects on int32 indices, gathers convert their index once (on two CPU threads a gather with
an int64 index beats an index_select on flat int32 indices, which runs on one), and integer selects
are arithmetic (a CPU `where` over a full mask is not vectorised). Scatters take a tensor source
(a scalar one is ~3x slower), and scatter_add_s send the tokens that add nothing to distinct
columns past the row (one shared column chains dependent additions). Flags come from one lookup
of a packed class word, unpacked by broadcast shifts. The Tree's fields are int32 as computed
(node and statement kinds uint8).

Validity is local (Python's expression grammar on these tokens is an operator-precedence grammar):
operands and operators must alternate, `not` may only start an operand of and/or/not, a ternary
part or a statement value, and `if`/`else` must pair up inside each bracket with no comma of that
bracket between them. The first bad token makes a syntax error at its statement's first line.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...lang import spec
from .batch_lexer import Tokens
from .batch_rules import OPERAND_END, Structure
from .common import BIG, eq, first_true, ne, positions, shift_left, shift_right, take

K = spec.TOK
N_NONE, N_NAME, N_NUM, N_BOOL, N_ATTR, N_BIN, N_PRE, N_TERN, N_CALL, N_TUPLE, N_GROUP, N_SEP, N_CALLEE = range(13)
assert N_ATTR > N_BOOL and N_GROUP > N_TUPLE and N_CALLEE > N_SEP  # parse applies these roles as maxima
INF = 1 << 30
WALL = -1
S = 64  # binding powers per nesting level
AUG_OPS = list(spec.AUG_ASSIGN)
BIN_PREC = {op: b.prec for op, b in spec.BINARY_OPS.items()}


# Token classes: the token kinds, plus the kinds whose role depends on context.
NK = len(spec.TOKEN_KINDS)
C_PREFIX, C_CALL, C_DEAD, C_WALL = NK, NK + 1, NK + 2, NK + 3  # prefix +/-, call `(`, after a dot, not body
NT = NK + 4  # token classes
_FAR = INF + (1 << 20)  # offset of an infinite binding power: above INF from any level's base; clamped to INF
LOW_R = -(1 << 29)  # below every binding power (bases: |depth + ternaries| <= 2T, times S: within +-2^19)
LOW_L = LOW_R - 1  # and before its start


def _class_tables() -> dict:
    """Per token class: lbp and rbp offsets from the level's base, node type and flags."""
    n = NT
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
    flags["plus_minus"] = having([K["+"], K["-"]])  # by kind
    flags["target_eq"] = having([N_NAME, N_ATTR, N_TUPLE])  # by node type
    flags["target_aug"] = having([N_NAME, N_ATTR])
    assert all(0 <= b <= S - 2 for b in lb + rb if b != _FAR)  # so no finite binding power is WALL
    for c in range(n):
        if flags["wall"][c]:
            lb[c] = rb[c] = WALL
    i32 = torch.int32
    out = {"lb": torch.tensor(lb, dtype=i32), "rb": torch.tensor(rb, dtype=i32), "nt": torch.tensor(nt, dtype=torch.uint8)}
    for name, cs in (("call", [C_CALL]), ("group", [K["("]]), ("rpar", [K[")"]]), ("comma", [K[","]]),
                     ("if", [K["if"]]), ("else", [K["else"]]), ("assign", [K["="]]), ("return", [K["return"]])):
        flags[name] = having(cs)
    words = {w: [sum(int(flags[f][c]) << i for i, f in enumerate(names)) for c in range(n)]
             for w, names in FLAG_WORDS.items()}  # up to 8 flags a class as the bits of one byte
    out["flags_p"] = torch.tensor(words["flags_p"], dtype=torch.uint8)
    # per class, one int32 word of bytes (flags_a, flags_b, node type, 0): one lookup for all three
    out["cls_word"] = torch.tensor([a | b << 8 | t << 16 for a, b, t in zip(words["flags_a"], words["flags_b"], nt)],
                                   dtype=i32)
    # per kind, one byte: plus_minus | operand_end << 1 | assign code << 2 (2 `=`, 1 `op=`, else 0: the
    # assignment a target stands left of)
    out["kind_word"] = torch.tensor([int(flags["plus_minus"][c]) | int(flags["operand_end"][c]) << 1
                                     | (2 * (c == K["="]) + flags["aug"][c]) << 2 for c in range(NK)], dtype=torch.uint8)
    # by node type + NT * assign code
    out["target_ok"] = torch.tensor([True] * n + flags.pop("target_aug") + flags.pop("target_eq"))
    # by (`=`) + 2 * (`op=`) + 4 * (`return`) + 8 * (first token)
    out["stmt_kind"] = torch.tensor([0] * 8 + [4, 1, 2, 2, 3, 3, 3, 3], dtype=torch.uint8)
    out.update({f: torch.tensor(v) for f, v in flags.items()})
    return out


FLAG_WORDS = {
    "flags_a": ("prefix", "binary", "wall", "aug", "cmp", "starts", "after", "last_ok"),
    "flags_b": ("call", "group", "rpar", "comma", "if", "else", "assign", "return"),
    "flags_p": ("end", "lpar", "not_ctx", "comma"),  # of the previous token's class
}
_CLASS_TABLES = _class_tables()
_DEVICE_TABLES: dict = {}


def _tables(device) -> dict:
    if device not in _DEVICE_TABLES:
        _DEVICE_TABLES[device] = {k: v.to(device) for k, v in _CLASS_TABLES.items()}
    return _DEVICE_TABLES[device]


@dataclass
class Tree:
    """Per token [B, T], int32 unless noted; -1 marks none."""

    ntype: torch.Tensor  # [B, T] uint8 node type at the node's token (N_*)
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
    stmt_kind: torch.Tensor  # [B, T] uint8 at the first token: 0 none, 1 assign, 2 aug, 3 return, 4 expression
    stmt_aug: torch.Tensor  # [B, T] at the first token: the aug operator token (-1)
    n_targets: torch.Tensor  # [B, T] at the first token
    stmt_first: torch.Tensor  # [B, T] first token of each body token's statement
    body: torch.Tensor  # [B, T] tokens of body statements
    syntax: torch.Tensor  # [B] int64 first bad token (BIG = none)


def nearest_smaller(rbp: torch.Tensor, lbp: torch.Tensor, reach: int) -> tuple[torch.Tensor, ...]:
    """(L, R, rbp at L, lbp at R), int32: L(i) = max j < i with rbp[j] < lbp[i], or -1 (there: LOW_L);
    R(i) = min k > i with lbp[k] < rbp[i], or T (there: LOW_R). Exact where that is at most `reach`
    positions from i; farther ones come out as none (-1, T).

    Both as one rightward search over 2B rows (L on the reversed rows), by binary lifting over
    sparse tables of minima with a column T of a value below every binding power, so a step past
    the end fails by itself: no bounds checks. All int32: a step is taken where
    (threshold - 1 - min) >> 31 is -1, so a level is one gather and three int32 operations; the
    levels span min(reach, T) positions."""
    B, T = rbp.shape
    top = max(1, min(reach, T).bit_length()) - 1  # the levels reach 2^(top + 1) > min(reach, T) positions
    # tables[k][:, j] = min over columns j .. j + 2^k - 1, where a range reaching column T is LOW:
    # the last max(1, 2^(k-1)) columns of level k are filled with LOW, the others computed
    tables = torch.empty((top + 1, 2 * B, T + 1), dtype=torch.int32, device=rbp.device)
    low = torch.full((2 * B, 1), LOW_R, dtype=torch.int32, device=rbp.device)
    low[B:] = LOW_L
    tables[0, :B, :T] = lbp
    tables[0, B:, :T] = rbp.flip(1)
    tables[0, :, T:] = low
    for k in range(1, top + 1):
        step = 1 << (k - 1)
        a = tables[k - 1]
        torch.minimum(a[:, :T + 1 - step], a[:, step:], out=tables[k, :, :T + 1 - step])
        tables[k, :, T + 1 - step:] = low
    below = torch.cat([rbp, lbp.flip(1)], 0).sub_(1)
    m = torch.arange(1, T + 1, dtype=torch.int32, device=rbp.device).repeat(2 * B, 1)
    idx = torch.empty(m.shape, dtype=torch.int64, device=m.device)  # buffers: no temporaries a level
    got = torch.empty_like(m)
    for k in range(top, -1, -1):  # invariant: values[i + 1 : m] >= threshold[i]
        torch.gather(tables[k], 1, idx.copy_(m), out=got)
        m.sub_(torch.sub(below, got, out=got).bitwise_right_shift_(31), alpha=1 << k)
    at = tables[0].gather(1, idx.copy_(m))
    if 2 << top < T:  # a search may have stopped short of its value (at is not below the threshold): none
        missed = torch.sub(below, at, out=got).bitwise_right_shift_(31)
        torch.maximum(m, missed & T, out=m)
        at.add_((low - at).bitwise_and_(missed))
    return (T - 1) - m[B:].flip(1), m[:B], at[B:].flip(1), at[:B]


def _last(mask: torch.Tensor, pos1: torch.Tensor) -> torch.Tensor:
    """1 + the largest j <= i with mask[j], or 0 (int32; pos1 = positions + 1, int16: an int16 cummax
    costs a fraction of an int32 one on a CPU)."""
    return (pos1 * mask).cummax(1).values.int()


_SHIFTS: dict = {}


def _shifts(n: int, step: int, dims: int, dtype: torch.dtype, device) -> torch.Tensor:
    """[n, 1, ...] shift amounts 0, step, 2 step, ... (cached)."""
    key = (n, step, dims, dtype, device)
    if key not in _SHIFTS:
        _SHIFTS[key] = torch.arange(0, n * step, step, dtype=dtype, device=device).view(n, *[1] * dims)
    return _SHIFTS[key]


def _bits(word: torch.Tensor, n: int = 8) -> tuple[torch.Tensor, ...]:
    """The low n bits of a contiguous uint8 tensor as bool tensors (a 0/1 byte is a bool), by one
    broadcast shift and one mask over [n, ...] (two ops, not 2n). For words [k, ...]: n * k bools,
    bit i of word j at i * k + j."""
    bits = (word[None] >> _shifts(n, 1, word.dim(), torch.uint8, word.device)).bitwise_and_(1)
    return bits.view(torch.bool).flatten(0, 1 if word.dim() > 2 else 0).unbind(0)


def parse(tk: Tokens, st: Structure, ok: torch.Tensor) -> Tree:
    kind = tk.kind
    dev = kind.device
    B, T = kind.shape
    i32 = torch.int32
    tab = _tables(dev)
    pos = torch.arange(T, dtype=i32, device=dev).expand(B, T)
    pos1 = pos[0] + 1  # a row, broadcast
    pos1_16 = pos1.short()  # T < 2^14 (lex refuses longer rows)
    # scatter_add_ targets of the tokens that add nothing: distinct columns T + i past the row (adding
    # into one shared column makes a chain of dependent additions, ~2.5x slower)
    dump = pos1 + (T - 1)
    lid = st.line_id
    ol = st.one_line[:, None]
    hc = st.header_colon[:, None]
    after = lid >= 1  # line ids are >= 0 at valid tokens
    newline = eq(kind, K["newline"])
    body = st.valid & ~newline & ~st.docstring & (after ^ (ol & (after | (pos1 > hc + 1))))  # one-line: ~after & ...
    body &= ok[:, None]
    body_i = body.int()
    stmt_start = body & shift_right(~body | newline, True)  # a logical line starts after each NEWLINE
    sf1 = _last(stmt_start, pos1_16).mul_(body_i)  # stmt_first + 1
    stmt_first = sf1 - 1
    sf = (sf1 - body_i).long()  # stmt_first clamped at 0, an index

    # math.NAME: the namespace token stands for the attribute; the dot and the name drop out
    dot = body & eq(kind, K["."])
    ns = shift_left(dot, False) & body
    dead = dot | shift_right(dot, False)
    attr = (pos1 + 2).mul(ns).sub_(1)
    live = body & ~dead

    # each token's class: its kind, or the role its context gives it
    u8 = torch.uint8
    kw = take(tab["kind_word"], kind)
    plus_minus, operand_end = _bits(kw, 2)
    pm_prefix = plus_minus & ~shift_right(operand_end, False)
    # the roles in priority order are the classes above the kinds in increasing order: the class
    # is the largest of the kind and the roles' classes, found by uint8 maxima
    role = torch.maximum(pm_prefix.view(u8) * C_PREFIX, st.is_call.view(u8) * C_CALL)
    role = torch.maximum(torch.maximum(role, dead.view(u8) * C_DEAD), (~body).view(u8) * C_WALL)
    cls = torch.maximum(kind, role.int())
    # the class word's bytes as contiguous planes (flags_a, flags_b, node type): strided bytes are slow
    cw = (take(tab["cls_word"], cls)[None] >> _shifts(3, 8, 2, i32, dev)).to(u8)
    (prefix, call, binary, group, wall, rpar, aug, comma, is_cmp, is_if, starts, is_else, follows, assign,
     last_ok, ret) = _bits(cw[:2])

    # nesting level: parentheses, plus the conditions of ternaries (between `if` and `else`); walls
    # take their binding power (WALL) from the tables alone
    ifs = is_if.int()
    tern = (ifs - is_else.int()).cumsum(1, dtype=i32)
    base = (tern.sub_(ifs).sub_(rpar.int()).add_(st.depth)).mul_(S).mul_(~wall)
    lbp = (base + take(tab["lb"], cls)).clamp_(max=INF)
    rbp = base.add_(take(tab["rb"], cls)).clamp_(max=INF)

    # Walls (NEWLINEs, `=`, op=, `return`, tokens outside the body) are below every binding power of a
    # level >= 0, so a search for a threshold above WALL ends inside its logical line, within
    # tk.longest_line positions: exact. Other searches may stop short, and then come out as none: the
    # walls' own (none anyway unless a level is below 0) and those for a threshold below WALL. Levels
    # go below 0 only after an unpaired `else`, at or past the row's first syntax error, the one thing
    # such a row keeps, and the links that change all join tokens on such a level, past it.
    L, R, at_l, at_r = nearest_smaller(rbp, lbp, tk.longest_line)
    # the parent is L where rbp(L) >= lbp(R) (with the fills: L where R = T, R where L = -1); its
    # binding power is then the larger of the two: WALL for a wall, LOW_R for none (finite binding
    # powers are multiples of S plus 0 .. S - 2, never WALL)
    take_left = at_l >= at_r
    p_bp = torch.maximum(at_l, at_r)
    member = live & ~wall & ~rpar
    has_parent = member & ne(p_bp, WALL) & ne(p_bp, LOW_R)
    parent_tok = (L - R).mul_(take_left).add_(R)  # a parent where has_parent
    root = member & ~has_parent
    parent_tok = (parent_tok + 1).mul_(has_parent).sub_(1)

    # children slots of each node (a left child's parent is its R, a right child's its L)
    left_of = torch.full((B, T + 1), -1, dtype=i32, device=dev)
    right_of = torch.full((B, T + 1), -1, dtype=i32, device=dev)
    left_of.scatter_(1, (R - T).mul_(has_parent & ~take_left).add_(T).long(), pos)
    right_of.scatter_(1, (L - T).mul_(has_parent & take_left).add_(T).long(), pos)
    left_full, right_full = left_of, right_of
    left_of, right_of = left_of[:, :T], right_of[:, :T]
    # values see through parentheses: pointer jumping, int64 throughout (gathers of the index itself).
    # A group under a group is its next token: a group's `(` links left to the token before it, which
    # rules make one of finite binding power (no operand's end). So a chain is one run `((...`, and
    # log2 of the deepest nesting rounds do (a deeper program breaks a rule and has no tree).
    ro1 = right_of + 1
    grouped = group & ro1.bool()
    vn_idx = (right_of - pos).mul_(grouped).add_(pos).long()
    for _ in range(min(tk.deepest, spec.MAX_NESTING).bit_length()):
        vn_idx = vn_idx.gather(1, vn_idx)
    vn = vn_idx.int()
    vn_ext = torch.cat([torch.full_like(vn[:, :1], -1), vn], 1)  # value of token t at t + 1; -1 at 0

    # node types: each role's type is above the types it replaces (N_ATTR above the atoms', N_GROUP
    # above N_TUPLE, N_CALLEE above all), so roles apply as maxima
    ntype = cw[2]
    role = torch.maximum((ns & (ntype <= N_BOOL)).view(u8) * N_ATTR, grouped.view(u8) * N_GROUP)
    ntype = torch.maximum(ntype, role)
    lo1 = left_of + 1
    callee1 = lo1 * call  # callee + 1
    callee_mask = torch.zeros((B, T + 1), dtype=torch.bool, device=dev)
    callee_mask.scatter_(1, (callee1 - 1 - T).mul_(callee1.bool()).add_(T).long(), call)  # (a scalar is ~3x slower)
    ntype = torch.maximum(ntype, (callee_mask[:, :T] & ntype.bool()).view(u8) * N_CALLEE)
    callee = callee1 - 1
    attr = (attr.gather(1, callee.clamp(min=0).long()) - attr).mul_(call).add_(attr)
    name_tok = (callee - pos).mul_(call).add_(pos)
    name_tok = (attr - name_tok).mul_((attr + 1).bool()).add_(name_tok)

    # children (token + 1, 0 = none) -> their values, by one gather; ternary: the `if` node is left_of
    lo_c = left_of.clamp(min=0).long()
    c0 = (right_full.gather(1, lo_c) + 1).mul_(is_else).add_(ro1 * prefix).add_(lo1 * binary)
    c1 = (left_full.gather(1, lo_c) + 1).mul_(is_else).add_(ro1 * (binary | prefix))
    c2 = ro1 * is_else
    child = vn_ext.gather(1, torch.stack([c0, c1, c2], -1).view(B, 3 * T).long()).view(B, T, 3)
    chained = is_cmp & is_cmp.gather(1, lo_c) & lo1.bool()

    # call arguments: the roots hanging under the call's `(` or under its commas
    par = parent_tok.clamp(min=0).long()
    under_comma = comma.gather(1, par)
    under_call = has_parent & ~comma & (call.gather(1, par) | under_comma)
    enclosing = st.enclosing
    call_of = (enclosing.gather(1, par) - parent_tok).mul_(under_comma).add_(parent_tok)
    arg = under_call & (call_of + 1).bool() & (pos > call_of)
    # depth: the member intervals (L(j), R(j)) covering each node (subtrees are nested intervals)
    ends = torch.zeros((B, 2 * T), dtype=i32, device=dev)
    one = member.int()
    ends.scatter_add_(1, (L + 1 - dump).mul_(one).add_(dump).long(), one)
    ends.scatter_add_(1, (R - dump).mul_(one).add_(dump).long(), one.neg())
    depth = ends[:, :T].cumsum(1, dtype=i32).mul_(member)
    # rank = the call's own commas before the argument: a prefix sum of +1 per comma and, per `)`,
    # minus its bracket's own commas, so every bracket closed in between adds nothing
    n_commas = torch.zeros((B, 2 * T), dtype=i32, device=dev)
    enc_ok = (enclosing + 1).bool()
    n_commas.scatter_add_(1, (enclosing - dump).mul_(comma & enc_ok).add_(dump).long(), comma.int())
    own = (comma.int() - n_commas.gather(1, enclosing.clamp(min=0).long()).mul_(rpar)).cumsum(1, dtype=i32)
    rank = own - own.gather(1, call_of.clamp(min=0).long())
    parent = torch.full((B, T + 1), -1, dtype=i32, device=dev)
    arg_rank = torch.zeros((B, T + 1), dtype=i32, device=dev)
    arg_at = (vn - T).mul_(arg).add_(T).long()
    parent.scatter_(1, arg_at, (call_of + 1).mul_(arg).sub_(1))
    arg_rank.scatter_(1, arg_at, rank)
    n_args = torch.zeros((B, 2 * T), dtype=i32, device=dev)
    arg_i = arg.int()
    n_args.scatter_add_(1, (call_of - dump).mul_(arg_i).add_(dump).long(), arg_i)

    node_start = L + 1
    node_end = (R - 1).clamp_(max=T - 1)

    # syntax: operands and operators alternate; `not`, `if`/`else` in their places
    p1 = shift_right(_last(live, pos1_16), 0)  # previous live token + 1
    p_idx = (p1 - 1).clamp_(min=0).long()
    same = p1.bool() & eq(stmt_first.gather(1, p_idx), stmt_first)
    p_tok = (p1 * same).sub_(1)
    p_cls = cls.gather(1, p_idx)  # (its flags are read where `same` only)
    p_end, p_lpar, p_not_ctx, p_comma = _bits(take(tab["flags_p"], p_cls), 4)
    p_end = p_end & same
    bad = starts & p_end
    bad |= follows & ~p_end & ~(rpar & same & (p_comma | p_lpar))
    bad |= ret & same
    # a live token is the last of its statement unless it is the previous token of a live one
    not_last = torch.zeros((B, T + 1), dtype=torch.bool, device=dev)
    live_same = live & same
    not_last.scatter_(1, (p_tok - T).mul_(live_same).add_(T).long(), live_same)
    bad |= live & ~not_last[:, :T] & ~last_ok
    bad |= eq(cls, K["not"]) & ~p_not_ctx & same
    # if/else alternate inside each bracket of a statement, with no comma of the bracket between an `if`
    # and its `else` (`f(a if b, c else d)`): sort if/else/`,` by (statement, bracket, position)
    ie = is_if | is_else
    iec = ie | comma
    group_key = sf1.mul(T + 1).add_(enclosing).sub_(T)  # stmt_first * (T + 1) + enclosing + 1
    if (T + 1) ** 3 + 2 * (T + 1) < 1 << 31:  # int32 keys, with room for `none` above them all
        none = (1 << 31) - 1
        gkey = group_key.mul_(T + 1).add_(pos).sub_(none).mul_(iec).add_(none)
        sk, order = gkey.sort(1)
        grp = sk - order.int()  # the group times T + 1 (order is the position)
    else:
        gkey = torch.where(iec, group_key.long().mul_(T + 1).add_(positions(kind)), BIG)
        sk, order = gkey.sort(1)
        grp = sk - order
    s_if = is_if.gather(1, order)
    # a sorted `if` followed by an `else` of its group makes a pair; every if/else must be in one
    pair = eq(shift_left(grp, -1), grp) & s_if & shift_left(is_else.gather(1, order), False)
    in_pair = torch.zeros_like(bad)
    in_pair.scatter_(1, order, pair | shift_right(pair, False))
    bad |= ie & ~in_pair
    # targets: the roots just left of `=` / `op=`
    code = torch.cat([(kw >> 2).int(), torch.zeros_like(pos[:, :1])], 1).gather(1, R.long())
    tgt = root & code.bool()
    bad |= tgt & ~take(tab["target_ok"], code.mul_(NT).add_(ntype.gather(1, vn_idx)))
    # statements: `return` first; `=` and `op=` do not mix; one `op=`
    # per-statement counts, at the statement's first token (the first of its tokens to be bad), of
    # targets and `=` (16-bit fields) and of `op=`
    first = body & eq(stmt_first, pos)
    at_sf = (sf1 - 1 - dump).mul_(body_i).add_(dump).long()
    counts = torch.zeros((B, 2 * T), dtype=i32, device=dev)
    counts.scatter_add_(1, at_sf, tgt.int().add_(assign.int().bitwise_left_shift_(16)))
    n_aug = torch.zeros((B, 2 * T), dtype=i32, device=dev)
    n_aug.scatter_add_(1, at_sf, aug.int())
    counts, n_aug = counts[:, :T], n_aug[:, :T]
    n_asg, n_targets = counts >> 16, counts & 0xFFFF
    bad |= n_aug.bool() & ((n_aug + n_asg) > 1)
    bad |= (assign | aug) & ret.gather(1, sf)  # `return x = 1`
    first_bad = first_true(bad)
    syntax = torch.where(first_bad >= 0, first_bad.long(), BIG)

    value_root = root & ~tgt
    stmt_value = torch.full((B, T + 1), -1, dtype=i32, device=dev)
    stmt_value.scatter_(1, (sf1 - 1 - T).mul_(value_root).add_(T).long(), vn)
    kind_at = n_asg.clamp_(max=1).add_(n_aug.clamp_(max=1), alpha=2).add_(ret.int(), alpha=4).add_(first.int(), alpha=8)
    stmt_kind = take(tab["stmt_kind"], kind_at)
    stmt_aug = torch.full((B, T + 1), -1, dtype=i32, device=dev)
    stmt_aug.scatter_(1, (sf1 - 1 - T).mul_(aug).add_(T).long(), pos)
    target_of = sf1.mul(tgt).sub_(1)
    return Tree(ntype, child, parent[:, :T], arg_rank[:, :T], n_args[:, :T], attr, name_tok, callee, node_start,
                node_end, depth, chained, stmt_value[:, :T].contiguous(), vn, target_of, stmt_kind,
                stmt_aug[:, :T].contiguous(), n_targets,
                stmt_first, body, syntax)
