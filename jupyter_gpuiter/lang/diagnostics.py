"""The diagnostics table: every user-facing compile message, once.

Each diagnostic has a stable id (a short snake-case name), the CompileError kind it reports (a
contract: an id's kind never changes) and a message template with named fields (str.format). Both
compilers, both lexers, the neural compiler and the CLI refer to ids; nothing else in the package
spells out a compile message. The size limits of lang/spec.py and the constants' names are fields
every template may use without passing them (`max_nesting`, `max_params`, `max_tokens`,
`max_number_chars`, `max_source_bytes`, `constants`).

>>> error("unknown_name", 3, 12, name="y").message
"name 'y' is not defined"
>>> message("too_many_parameters")
'more than 32 parameters'
"""

from __future__ import annotations

import string
from dataclasses import dataclass

from . import spec
from .errors import ERROR_KINDS, CompileError

#: Which part of the language reports a diagnostic (docs/language.md "Which error is reported").
PHASES = {
    "size": "the source's size",
    "lexer": "the lexer (lang/lexer.py; the traditional compiler's DFA)",
    "rules": "the token rules (lang/rules.py)",
    "parser": "CPython's parser",
    "names": "names, calls and statements (the serial compiler's tree walk; the traditional semantic pass)",
    "neural": "the neural compiler (mode='neural' only)",
    "cli": "`gpuiter compile FILE`, reading the file",
}

#: Who reports a diagnostic: "both" compilers (serial and traditional, with the same text), the
#: "serial" compiler only, the "neural" compiler or the "cli".
REPORTERS = ("both", "serial", "neural", "cli")


@dataclass(frozen=True)
class Diagnostic:
    id: str
    kind: str  # CompileError.kind
    template: str  # str.format template with named fields
    phase: str  # a key of PHASES
    by: str = "both"  # one of REPORTERS
    #: a guard no program reaches (the token rules or the encoder's vocabulary exclude it): kept so that
    #: a change elsewhere is reported as an error rather than a crash
    guard: bool = False

    @property
    def fields(self) -> tuple[str, ...]:
        """The template's field names that a caller must give (the limits and `constants` are filled in)."""
        names = [f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(self.template) if f]
        return tuple(dict.fromkeys(n for n in names if n not in DEFAULT_FIELDS))

    def message(self, **fields) -> str:
        return self.template.format(**DEFAULT_FIELDS, **fields)


#: Fields every template may use without a caller passing them.
DEFAULT_FIELDS = {
    "max_source_bytes": spec.MAX_SOURCE_BYTES, "max_tokens": spec.MAX_TOKENS, "max_nesting": spec.MAX_NESTING,
    "max_params": spec.MAX_PARAMS, "max_number_chars": spec.MAX_NUMBER_CHARS, "constants": ", ".join(spec.CONSTANTS),
}

_D = Diagnostic
_TABLE = [
    # --- phase 1: the source's size ---
    _D("source_too_large", "too-large", "source is {size:,} bytes; the limit is {max_source_bytes:,}", "size"),
    # --- phase 2: the lexer ---
    _D("invalid_character", "syntax", "invalid character {char!r}", "lexer"),
    _D("invalid_character_in_string", "syntax", "invalid character {char!r} in a string", "lexer"),
    _D("invalid_character_in_comment", "syntax", "invalid character {char!r} in a comment", "lexer"),
    _D("non_ascii", "unsupported", "non-ASCII character {char!r}: names and operators must be ASCII", "lexer"),
    _D("byte_order_mark_at_start", "unsupported",
       "the text starts with a byte-order mark (U+FEFF), which CPython's compile() rejects in a str too: read "
       "the file with encoding='utf-8-sig', which drops it, as Python does when it runs a file", "lexer"),
    _D("byte_order_mark", "unsupported",
       "invalid character U+FEFF (a zero-width no-break space or byte-order mark): delete it", "lexer"),
    _D("unterminated_string", "syntax", "unterminated string", "lexer"),
    _D("invalid_number", "syntax", "invalid number literal {text!r}", "lexer"),
    _D("complex_number", "unsupported", "complex numbers are not supported", "lexer"),
    _D("stray_backslash", "syntax", "a backslash must end the line (line continuation)", "lexer"),
    _D("string_escape", "unsupported", "escapes \\x \\u \\U \\N are not supported in docstrings", "lexer"),
    _D("unmatched_paren", "syntax", "unmatched ')'", "lexer"),
    # --- phase 2: the token rules ---
    _D("too_many_brackets", "too-large", "more than {max_nesting} nested brackets", "rules"),
    _D("unclosed_paren", "syntax", "'(' was never closed", "rules"),
    _D("call_of_non_name", "unsupported", "only builtin functions can be called", "rules"),
    _D("empty_source", "unsupported", "empty source: expected `def name(params):`", "rules"),
    _D("def_first", "unsupported", "expected a function definition `def name(params):` first", "rules"),
    _D("too_many_parameters", "too-large", "more than {max_params} parameters", "rules"),
    _D("bad_parameter", "unsupported", "parameters must be plain names: no defaults, annotations or *args", "rules"),
    _D("after_continuation", "syntax", "a statement cannot start after a backslash continuation", "rules"),
    _D("unexpected_indent", "syntax", "unexpected indent", "rules"),
    _D("missing_body", "syntax", "expected an indented function body", "rules"),
    _D("code_outside_function", "unsupported", "code outside the function: a cell holds one `def`", "rules"),
    _D("indentation_mismatch", "syntax", "indentation does not match the lines above", "rules"),
    _D("too_many_tokens", "too-large", "more than {max_tokens} tokens", "rules"),
    _D("too_many_prefix_operators", "too-large", "more than {max_nesting} prefix operators in a row", "rules"),
    # Python keywords outside the language (spec.BAD_KEYWORDS says which keyword has which)
    _D("keyword_loop", "unsupported", "loops are not supported: the function is applied elementwise", "rules"),
    _D("keyword_loop_jump", "unsupported", "loops are not supported", "rules"),
    _D("keyword_elif", "unsupported", "if statements are not supported: use `a if c else b` or where()", "rules"),
    _D("keyword_is", "unsupported", "`is` is not supported: use ==", "rules"),
    _D("keyword_lambda", "unsupported", "lambda is not supported", "rules"),
    _D("keyword_import", "unsupported", "imports are not needed: math./np. builtins are built in", "rules"),
    _D("keyword_class", "unsupported", "classes are not supported", "rules"),
    _D("keyword_exception", "unsupported", "exceptions are not supported", "rules"),
    _D("keyword_generator", "unsupported", "generators are not supported", "rules"),
    _D("keyword_async", "unsupported", "async is not supported", "rules"),
    _D("keyword_none", "unsupported", "None is not supported: every value is a number or a bool", "rules"),
    _D("keyword", "unsupported", "`{keyword}` is not supported", "rules"),
    _D("bad_operator", "unsupported", "operator {op!r} is not part of the kernel language", "rules"),
    _D("string_prefix", "unsupported", "f-strings and bytes are not supported", "rules"),
    _D("string_outside_docstring", "unsupported", "strings are only allowed as the docstring", "rules"),
    _D("attribute", "unsupported", "attribute access is only for math.NAME and np.NAME builtins", "rules"),
    _D("tuple_comma", "unsupported", "tuples are not supported: return and assign one value", "rules"),
    _D("assignment_in_brackets", "unsupported",
       "keyword arguments, defaults and assignments inside brackets are not supported", "rules"),
    _D("colon", "unsupported", "':' only ends the `def` line (no if/for/lambda/slices/annotations)", "rules"),
    _D("star", "unsupported", "star expressions and *args are not supported", "rules"),
    _D("nested_def", "unsupported", "one function per cell: nested or further `def` is not supported", "rules"),
    _D("if_statement", "unsupported", "if statements are not supported: use `a if c else b` or where(c, a, b)",
       "rules"),
    _D("number_too_long", "too-large", "number literal longer than {max_number_chars} characters", "rules"),
    # --- phase 3: CPython's parser ---
    _D("python_syntax", "syntax", "{message}", "parser"),
    # --- phase 4: names, calls, statements ---
    _D("code_after_return", "unsupported", "code after return is never run", "names"),
    _D("chained_assignment", "unsupported", "chained assignment: assign one name at a time", "names"),
    _D("assignment_target", "unsupported", "can only assign to a plain name", "names"),
    _D("return_without_value", "unsupported", "return needs a value", "names"),
    _D("expression_statement", "unsupported", "an expression on its own has no effect: assign or return it",
       "names"),
    _D("missing_return", "unsupported", "the function must end with `return <expr>`", "names"),
    _D("duplicate_parameter", "syntax", "duplicate parameter '{name}'", "names"),
    _D("unknown_name", "unknown-name", "name '{name}' is not defined", "names"),
    _D("unknown_attribute", "unknown-name",
       "'{namespace}.{name}' is not defined: math. and np. name only the builtins and the constants {constants}",
       "names"),
    _D("function_as_value", "type", "'{name}' is a function: call it, e.g. {name}(x)", "names"),
    _D("variable_called", "type", "'{name}' is a variable here, not a function", "names"),
    _D("constant_called", "type", "'{name}' is a constant, not a function", "names"),
    _D("unknown_function", "unknown-function", "'{name}' is not a builtin function", "names"),
    _D("arity", "arity", "{name}() takes {expected}, got {got}", "names"),
    _D("chained_comparison", "unsupported", "chained comparisons are not supported: use `and`", "names"),
    _D("tuple", "unsupported", "tuples are not supported", "names"),
    _D("unknown_name_augmented", "unknown-name", "name '{name}' is not defined before +=", "names"),
    _D("unsupported_expression", "unsupported", "{construct} is not supported", "names", "serial", True),
    _D("unsupported_constant", "unsupported", "{type} constants are not supported", "names", "serial", True),
    _D("unsupported_statement", "unsupported", "{construct} statements are not supported", "names", "serial",
       True),
    _D("nested_too_deeply", "too-large", "program is nested too deeply", "parser", "serial", True),
    # --- the neural compiler ---
    _D("neural_input_size", "too-large", "the program exceeds the neural model's input size ({names} names, "
       "{tokens} tokens); use mode='traditional'", "neural", "neural"),
    _D("neural_unknown_token", "too-large", "the neural model has no token for {text!r}; use mode='traditional'",
       "neural", "neural", True),
    _D("neural_no_program", "neural",
       "the neural compiler wrote no valid program ({reason}); use mode='hybrid' or 'traditional'", "neural", "neural"),
    # --- gpuiter compile FILE ---
    _D("file_too_large", "too-large", "the file holds more than {max_source_bytes:,} bytes; the limit is "
       "{max_source_bytes:,}", "cli", "cli"),
]
del _D

#: id -> Diagnostic, in the table's order.
DIAGNOSTICS: dict[str, Diagnostic] = {d.id: d for d in _TABLE}
#: id -> its place in the table. Where several errors of one kind are first at one place (and
#: priority), both compilers report the one placed first here: the traditional compiler's error codes
#: follow this order (asserted there).
ORDER = {ident: i for i, ident in enumerate(DIAGNOSTICS)}
assert len(DIAGNOSTICS) == len(_TABLE), "duplicate diagnostic ids"
assert all(d.kind in ERROR_KINDS and d.phase in PHASES and d.by in REPORTERS for d in _TABLE)
assert all(d in DIAGNOSTICS for d in spec.BAD_KEYWORDS.values())


def message(ident: str, **fields) -> str:
    """The message of diagnostic `ident` with its fields filled in."""
    return DIAGNOSTICS[ident].message(**fields)


class Reported:
    """For a finding with a diagnostic `id` and its `fields` (the lexer's and the token rules' errors): its
    kind and its message, from the table."""

    id: str
    fields: dict

    @property
    def kind(self) -> str:
        return DIAGNOSTICS[self.id].kind

    @property
    def message(self) -> str:
        return message(self.id, **self.fields)


def error(ident: str, line: int, col: int, source: str | None = None, **fields) -> CompileError:
    """The CompileError of diagnostic `ident` at 1-based (line, col), its message filled in from `fields`."""
    d = DIAGNOSTICS[ident]
    return CompileError(d.kind, line, col, d.message(**fields), source, id=ident)


def markdown() -> str:
    """The table for docs/language.md "Errors" (a test keeps the two equal)."""
    rows = ["| Id | Kind | Phase | Message |", "|---|---|---|---|"]
    for d in _TABLE:
        shown = d.template.replace("|", "\\|").replace("*", "\\*")
        notes = ["serial only"] * (d.by == "serial") + ["a guard"] * d.guard
        note = f" ({', '.join(notes)})" if notes else ""
        rows.append(f"| `{d.id}` | `{d.kind}` | {d.phase}{note} | {shown} |")
    return "\n".join(rows) + "\n"
