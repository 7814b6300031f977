"""The kernel language: spec tables, errors, the reference lexer and token rules, and what CPython computes
for each operator and builtin (python_semantics). The random program generator is a layer above (generate.py)."""

from .errors import ERROR_KINDS, CompileError

__all__ = ["ERROR_KINDS", "CompileError"]
