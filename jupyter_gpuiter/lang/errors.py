"""CompileError: the one exception every compiler raises (or records per program) for a bad program."""

from __future__ import annotations

#: The stable error kinds (design §4 contract), with what each means.
ERROR_KINDS = {
    "syntax": "the text is not valid Python",
    "unknown-name": "a name that is neither a parameter, an earlier assignment nor a constant",
    "unknown-function": "a call of something that is not a builtin",
    "arity": "a builtin called with the wrong number of arguments",
    "type": "a function used as a value, or a variable or constant called",
    "unsupported": "valid Python outside the kernel language",
    "too-large": "the program exceeds a size limit",
    "neural": "the neural compiler's output is not a program (mode='neural' only; hybrid falls back)",
}
KIND_CODES = {kind: i + 1 for i, kind in enumerate(ERROR_KINDS)}  # 0 = no error
KIND_BY_CODE = {code: kind for kind, code in KIND_CODES.items()}


class CompileError(Exception):
    """A program outside the kernel language: ``.kind``, 1-based ``.line`` and ``.col``, and a message.

    >>> str(CompileError("unknown-name", 3, 12, "name 'y' is not defined"))
    "3:12: unknown-name: name 'y' is not defined"
    """

    def __init__(self, kind: str, line: int, col: int, message: str, source: str | None = None):
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        super().__init__(f"{line}:{col}: {kind}: {message}")
        self.kind, self.line, self.col, self.message, self.source = kind, line, col, message, source

    def caret(self) -> str:
        """The offending source line with a caret under the column (empty when the source is unknown)."""
        if self.source is None:
            return ""
        lines = self.source.splitlines() or [""]
        text = lines[self.line - 1] if 0 < self.line <= len(lines) else ""
        pad = "".join(c if c == "\t" else " " for c in text[: max(self.col - 1, 0)])
        return f"{text}\n{pad}^"

    def __reduce__(self):
        return (CompileError, (self.kind, self.line, self.col, self.message, self.source))
