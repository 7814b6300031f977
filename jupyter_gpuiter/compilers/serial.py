"""The serial compiler: CPython's `ast` plus a tree walk. The oracle for tests and the CPU baseline.

Phases, each reporting the first error it finds (docs/language.md, "Errors"):
  A. limits on the source size;
  B. the reference lexer and the token rules (lang/lexer.py, lang/rules.py), run only where lang/quick.py's
     conservative check cannot vouch for the source or a later phase has an error to report;
  C. CPython's parser (`ast.parse`), whose syntax errors are reported at the first line of the
     statement that contains them;
  D. a walk over the tree: names, calls, arity, types, statement shapes; the first error by
     (line, col, outer before inner).
"""

from __future__ import annotations

import ast
import re
import sys
from contextlib import contextmanager

from ..ir import Program
from ..lang import spec
from ..lang.diagnostics import DIAGNOSTICS, ORDER, error
from ..lang.errors import CompileError
from ..lang.lexer import normalize_newlines, tokenize
from ..lang.quick import quick_check
from ..lang.rules import check

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
           ast.Mod: "mod", ast.Pow: "pow"}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_UNARY = {ast.USub: "neg", ast.UAdd: "pos", ast.Not: "not"}
_BOOLOPS = {ast.And: "and", ast.Or: "or"}
_STMT, _STMT_AFTER_RETURN, _NO_RETURN = 1, 0, 2  # priorities of statement-level errors (depth 0)


@contextmanager
def _deep_recursion(limit: int = 20000):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _check_size(source: str) -> None:
    size = len(source) if source.isascii() else len(source.encode("utf-8", errors="surrogatepass"))
    if size > spec.MAX_SOURCE_BYTES:
        raise error("source_too_large", 1, 1, source, size=size)


def check_source(source: str):
    """Phases A and B: the tokens, the file structure, or the first CompileError."""
    _check_size(source)
    src = normalize_newlines(source)
    tokens, lex_error = tokenize(src)
    structure, errors = check(tokens, src, complete=lex_error is None)
    candidates = [(e.line, e.col, e.priority, e.code, e.order, n) for n, e in enumerate(errors)]
    if lex_error:
        candidates.append((lex_error.line, lex_error.col, -1, 0, 0, -1))
    if candidates:
        line, col, *_, n = min(candidates)
        first = errors[n] if n >= 0 else lex_error
        raise error(first.id, line, col, source, **first.fields)
    return src, tokens, structure


class _Walker:
    def __init__(self, src: str, param_names: list[str]):
        self.lines = src.split("\n")
        self.ops: list[str] = []
        self.args: list[tuple[int, int, int]] = []
        self.imms: list[float] = []
        self.errors: list[tuple] = []  # (line, col, depth, priority, kind, order, n): n indexes found
        self.found: list[tuple[str, dict]] = []  # (diagnostic id, fields)
        self.env: dict[str, int] = {}
        for i, name in enumerate(param_names):
            self.emit("param", imm=float(i))
            self.env.setdefault(name, i)

    def emit(self, op: str, a: int = -1, b: int = -1, c: int = -1, imm: float = 0.0) -> int:
        self.ops.append(op)
        self.args.append((a, b, c))
        self.imms.append(imm)
        return len(self.ops) - 1

    def pos(self, node) -> tuple[int, int]:
        line = self.lines[node.lineno - 1].encode()
        return node.lineno, len(line[: node.col_offset].decode("utf-8", errors="replace")) + 1

    def error(self, node, depth: int, priority: int, ident: str, **fields) -> int:
        """Record diagnostic `ident` at node; the first by (line, col, depth, priority, kind, the
        diagnostics table's order) is reported."""
        self.errors.append((*self.pos(node), depth, priority, DIAGNOSTICS[ident].kind, ORDER[ident], len(self.found)))
        self.found.append((ident, fields))
        return -1

    # --- expressions: return the register holding the value ---
    def expr(self, node, depth: int) -> int:
        method = getattr(self, "expr_" + type(node).__name__, None)
        if method is None:
            return self.error(node, depth, 0, "unsupported_expression", construct=type(node).__name__)
        return method(node, depth)

    def expr_Constant(self, node, depth):
        v = node.value
        if isinstance(v, bool):
            return self.emit("bool", imm=float(v))
        if isinstance(v, (int, float)):
            try:
                return self.emit("const", imm=float(v))
            except OverflowError:
                return self.emit("const", imm=float("inf"))
        return self.error(node, depth, 0, "unsupported_constant", type=type(v).__name__)

    def _value(self, name: str, node, depth: int, namespaced: bool) -> int:
        if not namespaced and name in self.env:
            return self.env[name]
        if name in spec.CONSTANTS:
            return self.emit("const", imm=spec.CONSTANTS[name])
        if name in spec.BUILTINS:
            return self.error(node, depth, 0, "function_as_value", name=name)
        if namespaced:  # (the rules admit only math.NAME and np.NAME)
            return self.error(node, depth, 0, "unknown_attribute", namespace=getattr(node.value, "id", "math"),
                              name=name)
        return self.error(node, depth, 0, "unknown_name", name=name)

    def expr_Name(self, node, depth):
        return self._value(node.id, node, depth, False)

    def expr_Attribute(self, node, depth):
        return self._value(node.attr, node, depth, True)

    def expr_UnaryOp(self, node, depth):
        return self.emit(_UNARY[type(node.op)], self.expr(node.operand, depth + 1))

    def expr_BinOp(self, node, depth):
        a = self.expr(node.left, depth + 1)
        return self.emit(_BINOPS[type(node.op)], a, self.expr(node.right, depth + 1))

    def expr_BoolOp(self, node, depth):
        acc = self.expr(node.values[0], depth + 1)
        for v in node.values[1:]:
            acc = self.emit(_BOOLOPS[type(node.op)], acc, self.expr(v, depth + 1))
        return acc

    def expr_Compare(self, node, depth):
        if len(node.ops) > 1:
            self.error(node, depth, 0, "chained_comparison")
        a = self.expr(node.left, depth + 1)
        return self.emit(_CMPOPS[type(node.ops[0])], a, self.expr(node.comparators[0], depth + 1))

    def expr_IfExp(self, node, depth):
        then = self.expr(node.body, depth + 1)
        cond = self.expr(node.test, depth + 1)
        return self.emit("select", cond, then, self.expr(node.orelse, depth + 1))

    def expr_Tuple(self, node, depth):
        return self.error(node, depth, 0, "tuple")

    def expr_Call(self, node, depth):
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr
        namespaced = not isinstance(f, ast.Name)
        args = [self.expr(a, depth + 1) for a in node.args]
        if not namespaced and name in self.env:
            return self.error(node, depth, 0, "variable_called", name=name)
        if name in spec.CONSTANTS:
            return self.error(node, depth, 0, "constant_called", name=name)
        builtin = spec.BUILTINS.get(name)
        if builtin is None:
            return self.error(node, depth, 0, "unknown_function", name=name)
        lo, hi = builtin.arity
        if not lo <= len(args) <= hi:
            return self.error(node, depth, 0, "arity", **arity_fields(name, len(args)))
        if len(args) == 1 and name in spec.REDUCTIONS:  # sum, mean, one-argument max/min: over the row
            return self.emit(spec.REDUCTIONS[name], args[0])
        if lo != hi:  # variadic min/max: fold left after the arguments
            acc = args[0]
            for a in args[1:]:
                acc = self.emit(builtin.ir_op, acc, a)
            return acc
        return self.emit(builtin.ir_op, *args)

    # --- statements ---
    def body(self, fn: ast.FunctionDef, has_docstring: bool) -> int:
        stmts = fn.body[1:] if has_docstring else fn.body
        ret = -1
        for s in stmts:
            if ret >= 0:
                self.error(s, 0, _STMT_AFTER_RETURN, "code_after_return")
            if isinstance(s, ast.Assign):
                if len(s.targets) > 1:
                    self.error(s, 0, _STMT, "chained_assignment")
                value = self.expr(s.value, 1)
                for t in s.targets:
                    if isinstance(t, ast.Name):
                        self.env[t.id] = value
                    else:
                        self.error(t, 0, _STMT, "assignment_target")
            elif isinstance(s, ast.AugAssign):
                if not isinstance(s.target, ast.Name):
                    self.error(s.target, 0, _STMT, "assignment_target")
                    self.expr(s.value, 1)
                    continue
                old = self.env.get(s.target.id, -1)
                if old < 0:
                    self.error(s.target, 1, 0, "unknown_name_augmented", name=s.target.id)
                value = self.expr(s.value, 1)
                self.env[s.target.id] = self.emit(_BINOPS[type(s.op)], old, value)
            elif isinstance(s, ast.Return):
                if s.value is None:
                    self.error(s, 0, _STMT, "return_without_value")
                elif ret < 0:
                    ret = self.expr(s.value, 1)
                else:
                    self.expr(s.value, 1)
            elif isinstance(s, ast.Expr):
                self.error(s, 0, _STMT, "expression_statement")
                self.expr(s.value, 1)
            else:
                self.error(s, 0, _STMT, "unsupported_statement", construct=type(s).__name__)
        last = fn.body[-1]
        if not isinstance(last, ast.Return):
            self.error(last, 0, _NO_RETURN, "missing_return")
        return ret


def compile_sources(sources) -> list[Program | CompileError]:
    """Each source compiled in turn: a Program or the CompileError it raised."""
    results: list[Program | CompileError] = []
    for s in sources:
        try:
            results.append(compile_source(s))
        except CompileError as e:
            results.append(e)
    return results


def _encodable(src: str) -> str:
    """src with each lone surrogate as U+FFFD, which CPython's parser and UTF-8 can encode (both raise
    UnicodeEncodeError on a surrogate). The token rules have admitted non-ASCII only in comments and
    docstrings by now, and U+FFFD is one code point of three UTF-8 bytes as a surrogate is in the
    compiler's sizes, so no line or column moves."""
    return src if src.isascii() else _SURROGATE.sub("\ufffd", src)


_SURROGATE = re.compile("[\ud800-\udfff]")


def arity_fields(name: str, got: int) -> dict:
    """The fields of an `arity` error: builtin `name` called with `got` arguments."""
    lo, hi = spec.BUILTINS[name].arity
    expected = f"{lo} argument" if lo == hi == 1 else f"{lo} arguments" if lo == hi else f"{lo} to {hi} arguments"
    return {"name": name, "expected": expected, "got": got}


def parser_message(source: str) -> str:
    """CPython's message for a source that passed the token rules but not its parser (phase C), as
    compile_source reports it (the traditional compiler states its own syntax errors with it)."""
    try:
        ast.parse(_encodable(normalize_newlines(source)))
    except SyntaxError as e:
        return e.msg
    except (RecursionError, MemoryError):
        pass
    return "invalid syntax"


def compile_source(source: str, *, quick: bool = True) -> Program:
    """Compile one kernel-language function to a Program, or raise CompileError.

    With `quick` (the default), phase B is first lang/quick.py's conservative check: a source it vouches for
    goes to the parser without the reference lexer and token rules, which run only when an error is to be
    reported, so that it is the one they would report first (the same Program, the same errors)."""
    _check_size(source)
    src = normalize_newlines(source)
    has_docstring = quick_check(src) if quick else None
    structure = None
    if has_docstring is None:
        src, tokens, structure = check_source(source)
        has_docstring = structure.docstring_line >= 0
    src = _encodable(src)
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        if structure is None:
            _, tokens, structure = check_source(source)
        line = e.lineno or 1
        # statements' first lines: each logical line's, and a one-line def's body (`def f(x): return x`)
        starts = [tokens[a].line for a, _ in structure.lines]
        body = tokens[structure.header_colon + 1] if structure.header_colon >= 0 else None
        if body is not None and body.kind != "newline" and (body.line, body.col) <= (line, e.offset or 1):
            starts.append(body.line)
        start = max([s for s in starts if s <= line] or [1])
        col = (e.offset or 1) if start == line else 1
        raise error("python_syntax", start, col, source, message=e.msg) from None
    except (RecursionError, MemoryError):
        if structure is None:
            check_source(source)
        raise error("nested_too_deeply", 1, 1, source) from None
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef) and len(tree.body) == 1, "the token rules admit one def only"
    names = [a.arg for a in fn.args.args]
    with _deep_recursion():
        w = _Walker(src, names)
        seen: set[str] = set()
        for a in fn.args.args:
            if a.arg in seen:
                w.error(a, 0, 0, "duplicate_parameter", name=a.arg)
            seen.add(a.arg)
        ret = w.body(fn, has_docstring)
    if w.errors:
        if structure is None:
            check_source(source)
        line, col, *_, n = min(w.errors)
        ident, fields = w.found[n]
        raise error(ident, line, col, source, **fields)
    w.emit("ret", ret)
    return Program(w.ops, w.args, w.imms, len(names), names, fn.name)
