"""The kernel language: spec tables, errors, the reference lexer and the random program generator."""

from .errors import ERROR_KINDS, CompileError

__all__ = ["ERROR_KINDS", "CompileError"]
