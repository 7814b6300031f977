"""What the neural model reads and writes: abstracted source tokens in, register-free postfix IR out.

Input: the reference lexer's tokens with every user name replaced by a slot `S<k>` (numbered by first
occurrence, so the parameters are `S0 … S<P-1>`), every number literal by `NUM`, the function's name
by `FN` and a docstring by `STR`; keywords, operators, builtin and constant names stay themselves.
Each token also carries its bracket depth, a lexer-level feature that makes precedence easier to learn.

Output: a postfix program over a value stack. `S<k>` pushes the value a name holds (no instruction),
`NUM`/`pi`/`True`… emit a constant (literal values are taken in source order, which is the order the
canonical IR emits them), an op pops its operands and emits one instruction, `min #3` folds three
values left, `SET S<k>` binds a name, `RET` returns. A reduction (`sum`, `mean`, and `amax`/`amin` for
one-argument `max`/`min`) pops one value and emits its IR op, like any one-operand op. Two select tokens keep their stack orders apart:
`ifexp` (then, cond, else) and `select` (cond, a, b, as `where` takes them).

`decode()` turns a postfix sequence into the canonical Program deterministically; `postfix()` makes the
training target from the source with CPython's `ast` (checked against the serial compiler by tests).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ...ir import Program
from ...lang import spec
from ...lang.diagnostics import error
from ...lang.lexer import number_value
from ..serial import check_source

MAX_SLOTS = 48
MAX_IN = 320  # input tokens the model reads, BOS/EOS included
MAX_OUT = 320
MAX_DEPTH = 32  # bracket depths past this share one embedding

_SPECIAL = ["<pad>", "<bos>", "<eos>"]
_SLOTS = [f"S{k}" for k in range(MAX_SLOTS)]
#: Builtins added after the first shipped vocabulary (row kernels). Their tokens are appended at the end
#: of VOCAB, so every older token keeps its id and a checkpoint trained before them can be fine-tuned
#: (its embedding grows by the new rows). A later addition goes after these, never between.
_ADDED_BUILTINS = ["mean", "sum"]
_ADDED_OPS = ["amax", "amin"]
_BUILTINS_V1 = sorted(set(spec.BUILTINS) - set(_ADDED_BUILTINS))
_SOURCE = (["FN", "NUM", "STR", "NL", "NS"] + list(spec.KEYWORDS) + list(spec.TOKEN_KINDS[5:31])
           + _BUILTINS_V1 + sorted(spec.CONSTANTS))
_BINARY = {b.ir_op for b in spec.BINARY_OPS.values()}
_FIXED_BUILTINS = sorted({b.ir_op for b in spec.BUILTINS.values() if b.arity[0] == b.arity[1]}
                         - {"select"} - set(spec.REDUCTION_OPS))
#: Output ops and how many stack values each pops (each pushes one).
OP_ARITY = {"neg": 1, "pos": 1, "not": 1, "ifexp": 3, "select": 3, **{op: 2 for op in _BINARY},
            **{op: spec.IR_OP_BY_NAME[op].nargs for op in _FIXED_BUILTINS},
            **{op: 1 for op in spec.REDUCTION_OPS}}
_FOLDS = sorted(op for op in {b.ir_op for b in spec.BUILTINS.values() if b.arity[0] != b.arity[1]})
_MAX_FOLD = max(b.arity[1] for b in spec.BUILTINS.values())
_COUNTS = [f"#{n}" for n in range(2, _MAX_FOLD + 1)]
_TARGET = (["SET", "RET"] + sorted(set(OP_ARITY) - set(spec.REDUCTION_OPS)) + _FOLDS + _COUNTS
           + ["True", "False"])

VOCAB: list[str] = list(dict.fromkeys(_SPECIAL + _SLOTS + _SOURCE + _TARGET + _ADDED_BUILTINS + _ADDED_OPS))
#: The sizes of earlier shipped vocabularies, each a prefix of this one (152: before row kernels), so a
#: checkpoint made for one can be fine-tuned after growing its embedding (train.init_model).
PAST_VOCAB_SIZES = (152,)
INDEX = {t: i for i, t in enumerate(VOCAB)}
PAD, BOS, EOS = INDEX["<pad>"], INDEX["<bos>"], INDEX["<eos>"]
_CONST_TOKENS = set(spec.CONSTANTS)
_AUG = set(spec.AUG_ASSIGN)


@dataclass
class Encoded:
    """One source as the model sees it, plus what decoding needs to put the program back together."""

    ids: list[int]  # BOS … EOS
    depth: list[int]
    n_slots: int
    literals: list[float]  # number literal values in source order
    slot_names: list[str]
    n_params: int
    fn_name: str


def encode(source: str) -> Encoded:
    """The model input for one source; raises the serial compiler's lexical/rule CompileError first,
    then `too-large` when the program exceeds the model's input size."""
    _, tokens, structure = check_source(source)
    user = set()
    params: list[str] = []
    for i, t in enumerate(tokens):
        if t.kind != "name":
            continue
        nxt = tokens[i + 1].kind if i + 1 < len(tokens) else ""
        if structure.header_open < i < structure.header_close:
            params.append(t.text)
            user.add(t.text)
        elif nxt == "=" or nxt in _AUG:
            user.add(t.text)
    slots: dict[str, int] = {p: k for k, p in enumerate(dict.fromkeys(params))}
    ids, depth, literals = [BOS], [0], []
    level = 0
    for i, t in enumerate(tokens):
        prev = tokens[i - 1].kind if i else ""
        nxt = tokens[i + 1].kind if i + 1 < len(tokens) else ""
        if t.kind == "name":
            if i == 1:
                tok = "FN"
            elif prev == ".":
                tok = t.text if t.text in spec.BUILTINS or t.text in _CONST_TOKENS else "S" + str(
                    slots.setdefault(t.text, len(slots)))
            elif t.text in spec.NAMESPACES and nxt == "." and t.text not in user:
                tok = "NS"
            elif t.text not in user and (t.text in spec.BUILTINS or t.text in _CONST_TOKENS):
                tok = t.text
            else:
                tok = "S" + str(slots.setdefault(t.text, len(slots)))
        elif t.kind == "number":
            tok = "NUM"
            literals.append(number_value(t.text))
        elif t.kind == "string":
            tok = "STR"
        elif t.kind == "newline":
            tok = "NL"
        else:
            tok = t.kind
        if t.kind == ")":
            level -= 1
        if len(slots) > MAX_SLOTS or len(ids) == MAX_IN - 1:  # no room for this token (and EOS)
            raise error("neural_input_size", 1, 1, source, names=MAX_SLOTS, tokens=MAX_IN - 2)
        if tok not in INDEX:
            raise error("neural_unknown_token", t.line, t.col, source, text=t.text)
        ids.append(INDEX[tok])
        depth.append(min(level, MAX_DEPTH - 1))
        if t.kind == "(":
            level += 1
    ids.append(EOS)
    depth.append(0)
    names = sorted(slots, key=slots.get)
    fn_name = tokens[1].text if len(tokens) > 1 else "kernel"
    return Encoded(ids, depth, len(slots), literals, names, len(dict.fromkeys(params)), fn_name)


def postfix(source: str, encoded: Encoded | None = None) -> list[str]:
    """The postfix target of a valid source (training data); the source must compile serially."""
    enc = encoded or encode(source)
    slot = {name: k for k, name in enumerate(enc.slot_names)}
    fn = ast.parse(source.replace("\r\n", "\n").replace("\r", "\n")).body[0]
    out: list[str] = []
    bound = set(enc.slot_names[: enc.n_params])

    def name(n: str):
        if n in bound:
            out.append(f"S{slot[n]}")
        else:
            out.append(n)

    def expr(node):
        if isinstance(node, ast.Constant):
            out.append(str(node.value) if isinstance(node.value, bool) else "NUM")
        elif isinstance(node, ast.Name):
            name(node.id)
        elif isinstance(node, ast.Attribute):
            out.append(node.attr)
        elif isinstance(node, ast.UnaryOp):
            expr(node.operand)
            out.append({ast.USub: "neg", ast.UAdd: "pos", ast.Not: "not"}[type(node.op)])
        elif isinstance(node, ast.BinOp):
            expr(node.left)
            expr(node.right)
            out.append(_binop(node.op))
        elif isinstance(node, ast.BoolOp):
            expr(node.values[0])
            for v in node.values[1:]:
                expr(v)
                out.append("and" if isinstance(node.op, ast.And) else "or")
        elif isinstance(node, ast.Compare):
            expr(node.left)
            expr(node.comparators[0])
            out.append(spec.BINARY_OPS[_CMP[type(node.ops[0])]].ir_op)
        elif isinstance(node, ast.IfExp):
            expr(node.body)
            expr(node.test)
            expr(node.orelse)
            out.append("ifexp")
        elif isinstance(node, ast.Call):
            f = node.func
            fname = f.id if isinstance(f, ast.Name) else f.attr
            builtin = spec.BUILTINS[fname]
            for a in node.args:
                expr(a)
            if len(node.args) == 1 and fname in spec.REDUCTIONS:  # sum, mean, one-argument max/min
                out.append(spec.REDUCTIONS[fname])
                return
            out.append(builtin.ir_op)
            if builtin.arity[0] != builtin.arity[1]:
                out.append(f"#{len(node.args)}")
        else:
            raise TypeError(f"not in the kernel language: {type(node).__name__}")

    body = fn.body[1:] if ast.get_docstring(fn, clean=False) is not None else fn.body
    for s in body:
        if isinstance(s, ast.Assign):
            expr(s.value)
            out += ["SET", f"S{slot[s.targets[0].id]}"]
            bound.add(s.targets[0].id)
        elif isinstance(s, ast.AugAssign):
            name(s.target.id)
            expr(s.value)
            out += [_binop(s.op), "SET", f"S{slot[s.target.id]}"]
        elif isinstance(s, ast.Return):
            expr(s.value)
            out.append("RET")
    return out


_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_BIN = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}


def _binop(op) -> str:
    return spec.BINARY_OPS[_BIN[type(op)]].ir_op


class DecodeError(ValueError):
    """The model's output is not a well-formed postfix program for this source."""


def decode(tokens: list[str], enc: Encoded) -> Program:
    """The canonical Program a postfix sequence denotes, or DecodeError."""
    ops: list[str] = []
    args: list[tuple[int, int, int]] = []
    imms: list[float] = []

    def emit(op, a=-1, b=-1, c=-1, imm=0.0) -> int:
        ops.append(op)
        args.append((a, b, c))
        imms.append(imm)
        return len(ops) - 1

    env = {k: emit("param", imm=float(k)) for k in range(enc.n_params)}
    stack: list[int] = []
    literal = iter(enc.literals)
    i = 0
    while i < len(tokens):
        t = tokens[i]
        i += 1
        if t.startswith("S") and t[1:].isdigit():
            k = int(t[1:])
            if k not in env:
                raise DecodeError(f"{enc.slot_names[k] if k < enc.n_slots else t} is used before it is bound")
            stack.append(env[k])
        elif t == "NUM":
            v = next(literal, None)
            if v is None:
                raise DecodeError("more NUM tokens than number literals")
            stack.append(emit("const", imm=v))
        elif t in _CONST_TOKENS:
            stack.append(emit("const", imm=spec.CONSTANTS[t]))
        elif t in ("True", "False"):
            stack.append(emit("bool", imm=float(t == "True")))
        elif t in OP_ARITY:
            n = OP_ARITY[t]
            if len(stack) < n:
                raise DecodeError(f"{t} needs {n} operands")
            operands, stack[-n:] = stack[-n:], []
            if t == "ifexp":
                then, cond, other = operands
                operands = [cond, then, other]
            stack.append(emit("select" if t == "ifexp" else t, *operands))
        elif t in _FOLDS:
            n = int(tokens[i][1:]) if i < len(tokens) and tokens[i] in _COUNTS else 0
            i += 1
            if n < 2 or len(stack) < n:
                raise DecodeError(f"{t} needs a count and that many operands")
            operands, stack[-n:] = stack[-n:], []
            acc = operands[0]
            for v in operands[1:]:
                acc = emit(t, acc, v)
            stack.append(acc)
        elif t == "SET":
            target = tokens[i] if i < len(tokens) else ""
            i += 1
            if not (target.startswith("S") and target[1:].isdigit()) or int(target[1:]) >= enc.n_slots or not stack:
                raise DecodeError("SET needs a value and a name")
            env[int(target[1:])] = stack.pop()
        elif t == "RET":
            if len(stack) != 1 or i != len(tokens):
                raise DecodeError("RET must end the program with one value")
            emit("ret", stack.pop())
            if next(literal, None) is not None:
                raise DecodeError("fewer NUM tokens than number literals")
            return Program(ops, args, imms, enc.n_params, enc.slot_names[: enc.n_params], enc.fn_name)
        else:
            raise DecodeError(f"unexpected token {t!r}")
    raise DecodeError("the program has no RET")


def stack_effects() -> tuple[list[int], list[int]]:
    """Per vocabulary id: (values popped, values pushed) in the output language, for constrained decoding.
    Tokens the output never holds get pop -1 (never allowed)."""
    pops, pushes = [-1] * len(VOCAB), [0] * len(VOCAB)
    for t, i in INDEX.items():
        if t in _SLOTS or t == "NUM" or t in _CONST_TOKENS or t in ("True", "False"):
            pops[i], pushes[i] = 0, 1
        elif t in OP_ARITY:
            pops[i], pushes[i] = OP_ARITY[t], 1
        elif t in _FOLDS:
            pops[i], pushes[i] = 0, 0  # the count token that follows does the popping
        elif t in _COUNTS:
            pops[i], pushes[i] = int(t[1:]), 1
        elif t in ("SET", "RET"):
            pops[i], pushes[i] = 1, 0
        elif t == "<eos>":
            pops[i], pushes[i] = 0, 0
    return pops, pushes
