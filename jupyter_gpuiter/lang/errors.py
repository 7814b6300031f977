"""CompileError: the one exception every compiler raises (or records per program) for a bad program."""

from __future__ import annotations

#: The stable error kinds (docs/language.md, "Kinds"), with what each means.
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
    r"""A program outside the kernel language: ``.kind``, 1-based ``.line`` and ``.col``, and a message.

    Compilers make them from the diagnostics table (lang/diagnostics.py: ``error(id, line, col, ...)``),
    which sets ``.id``, the diagnostic's stable name. ``format()`` is the one way to show one to a person.

    >>> e = CompileError("unknown-name", 3, 12, "name 'y' is not defined", "def f(x):\n    z = x\n    return y\n")
    >>> str(e)
    "unknown-name at line 3, column 12: name 'y' is not defined"
    >>> print(e.format(path="k.py"))
    k.py:3:12: unknown-name: name 'y' is not defined
        return y
               ^
    """

    def __init__(self, kind: str, line: int, col: int, message: str, source: str | None = None, *,
                 id: str | None = None):
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        self.kind, self.line, self.col, self.message, self.source = kind, line, col, message, source
        self.id = id
        super().__init__(self.format(caret=False))

    def format(self, path: str | None = None, caret: bool = True) -> str:
        """The error for a person: ``kind at line L, column C: message``, or with a file's `path` the
        compiler convention ``path:L:C: kind: message``; then, when `caret` and the source is known, the
        offending line with a caret under the column. The CLI, the magic, comm, the widgets and
        ``str()`` (without the caret) all show errors through it."""
        if path is None:
            text = f"{self.kind} at line {self.line}, column {self.col}: {self.message}"
        else:
            text = f"{path}:{self.line}:{self.col}: {self.kind}: {self.message}"
        shown = self.caret() if caret else ""
        return f"{text}\n{shown}" if shown else text

    def __str__(self) -> str:
        return self.format(caret=False)

    def with_source(self, source: str) -> CompileError:
        """This error with its `.source` set (for the caret); returns self, e.g. ``raise e.with_source(src)``."""
        self.source = source
        return self

    def caret(self) -> str:
        """The offending source line with a caret under the column (empty when the source is unknown)."""
        if self.source is None:
            return ""
        lines = self.source.splitlines() or [""]
        text = lines[self.line - 1] if 0 < self.line <= len(lines) else ""
        pad = "".join(c if c == "\t" else " " for c in text[: max(self.col - 1, 0)])
        return f"{text}\n{pad}^"

    def __reduce__(self):
        return (CompileError, (self.kind, self.line, self.col, self.message, self.source), {"id": self.id})
