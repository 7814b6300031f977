"""The diagnostics table (lang/diagnostics.py): both compilers state every error in its words, every
diagnostic is reachable, no message is written outside it, and docs/language.md lists it.

The differential tests compare the whole error: kind, line, message and diagnostic id, and the column
unless it is a syntax error of CPython's parser (phase 3, whose columns may differ: docs/language.md).
"""

import ast
import pickle
import string
from pathlib import Path

import pytest

import jupyter_gpuiter
from jupyter_gpuiter import CompileError, compile_batch, generate
from jupyter_gpuiter.compilers import serial
from jupyter_gpuiter.lang import diagnostics, spec
from jupyter_gpuiter.lang.diagnostics import DIAGNOSTICS, error
from tests.support.edge_cases import INVALID

PACKAGE = Path(jupyter_gpuiter.__file__).parent
D = "def f(x, y):\n"


def describe(r):
    if not isinstance(r, CompileError):
        return "ok"
    col = None if r.id == "python_syntax" else r.col
    return (r.id, r.kind, r.line, col, r.message)


def assert_same_errors(sources):
    trad = compile_batch(sources, mode="traditional").results
    ser = compile_batch(sources, mode="serial").results
    bad = [(s, describe(t), describe(r)) for s, t, r in zip(sources, trad, ser) if describe(t) != describe(r)]
    assert not bad, f"{len(bad)} of {len(sources)} differ; first (source, traditional, serial): {bad[0]!r}"
    return ser


# --- both compilers, word for word --------------------------------------------------------------

@pytest.mark.parametrize("seed", range(3))
def test_generated_invalid_programs_have_the_same_message_in_both_compilers(seed):
    sources = generate.generate_batch(300, 7000 + seed)
    mutants = [m for m, _ in generate.mutate_batch(sources, 8000 + seed)]
    results = assert_same_errors(mutants)
    assert sum(isinstance(r, CompileError) for r in results) > 0.7 * len(mutants)


@pytest.mark.parametrize("family", list(generate.MUTATIONS))
def test_each_mutation_family_has_the_same_message_in_both_compilers(family):
    sources = generate.generate_batch(40, 9000)
    assert_same_errors([generate.mutate(s, 9100 + i, only=family)[0] for i, s in enumerate(sources)])


def test_edge_cases_have_the_same_message_in_both_compilers():
    assert_same_errors([s for s, _ in INVALID])


# --- every diagnostic is reachable ---------------------------------------------------------------

#: a source per diagnostic that both compilers report (kind, line, col and message checked alike)
EXAMPLES = {
    "source_too_large": "def f(x):\n    return x\n" + "#" * spec.MAX_SOURCE_BYTES,
    "invalid_character": D + "    return x $ y\n",
    "invalid_character_in_string": D + "    '''doc\x01'''\n    return x\n",
    "invalid_character_in_comment": D + "    return x  # \x7f\n",
    "non_ascii": D + "    return café\n",
    "byte_order_mark_at_start": "\ufeffdef f(x):\n    return x\n",
    "byte_order_mark": D + "    return x\ufeff\n",
    "unterminated_string": D + "    return 'abc\n",
    "invalid_number": D + "    return 1abc\n",
    "complex_number": D + "    return 1j\n",
    "stray_backslash": D + "    return x \\ y\n",
    "string_escape": D + '    """\\x41"""\n    return x\n',
    "unmatched_paren": D + "    return x)\n",
    "too_many_brackets": D + "    return " + "(" * (spec.MAX_NESTING + 1) + "x" + ")" * (spec.MAX_NESTING + 1) + "\n",
    "unclosed_paren": D + "    z = (x +\n    return z\n",
    "call_of_non_name": D + "    return (x)(y)\n",
    "empty_source": "  \n",
    "def_first": "x = 1\n",
    "too_many_parameters": "def f(" + ", ".join(f"p{i}" for i in range(spec.MAX_PARAMS + 1)) + "):\n    return p0\n",
    "bad_parameter": "def f(x=1):\n    return x\n",
    "after_continuation": D + "    z = x\n\\\n    return z\n",
    "unexpected_indent": "  def f(x):\n    return x\n",
    "missing_body": D,
    "code_outside_function": D + "    return x\nz = 1\n",
    "indentation_mismatch": D + "    z = 1\n  return z\n",
    "too_many_tokens": D + "    return x" + " + x" * spec.MAX_TOKENS + "\n",
    "too_many_prefix_operators": D + "    return " + "-" * (spec.MAX_NESTING + 1) + "x\n",
    "keyword_loop": D + "    for i in x:\n        pass\n    return x\n",
    "keyword_loop_jump": D + "    break\n",
    "keyword_elif": D + "    elif x:\n        pass\n",
    "keyword_is": D + "    return x is y\n",
    "keyword_lambda": D + "    return lambda: x\n",
    "keyword_import": D + "    import math\n    return x\n",
    "keyword_class": D + "    class A: pass\n",
    "keyword_exception": D + "    raise x\n",
    "keyword_generator": D + "    yield x\n",
    "keyword_async": D + "    return await x\n",
    "keyword_none": D + "    return None\n",
    "keyword": D + "    return x in y\n",
    "bad_operator": D + "    return x @ y\n",
    "string_prefix": D + '    """doc"""\n    return f"{x}"\n',
    "string_outside_docstring": D + "    return 'abc'\n",
    "attribute": D + "    return x.real\n",
    "tuple_comma": D + "    return x, y\n",
    "assignment_in_brackets": D + "    return max(x, key=y)\n",
    "colon": D + "    z: float = x\n    return z\n",
    "star": D + "    return max(*x)\n",
    "nested_def": D + "    def g(x):\n        return x\n    return x\n",
    "if_statement": D + "    if x:\n        x = 1\n    return x\n",
    "number_too_long": D + "    return " + "1" * (spec.MAX_NUMBER_CHARS + 1) + "\n",
    "python_syntax": D + "    z = x y\n    return z\n",
    "code_after_return": D + "    return x\n    z = 1\n",
    "chained_assignment": D + "    z = w = x\n    return z\n",
    "assignment_target": D + "    math.pi = x\n    return x\n",
    "return_without_value": D + "    return\n",
    "expression_statement": D + "    x + 1\n    return x\n",
    "missing_return": D + "    z = x\n",
    "duplicate_parameter": "def f(x, x):\n    return x\n",
    "unknown_name": D + "    return z\n",
    "unknown_attribute": D + "    return np . \\\n  foo\n",
    "function_as_value": D + "    return math.sin\n",
    "variable_called": D + "    return x(y)\n",
    "constant_called": D + "    return pi(y)\n",
    "unknown_function": D + "    return foo(x)\n",
    "arity": D + "    return x + atan2(x, max(y, (x)), y, )\n",
    "chained_comparison": D + "    return x < y < 1\n",
    "tuple": D + "    return ()\n",
    "unknown_name_augmented": D + "    w -= 1\n    return w\n",
}


def test_every_diagnostic_of_both_compilers_has_an_example():
    both = {d.id for d in DIAGNOSTICS.values() if d.by == "both"}
    assert set(EXAMPLES) == both


def test_each_example_is_its_diagnostic_in_both_compilers():
    ids = list(EXAMPLES)
    results = assert_same_errors([EXAMPLES[i] for i in ids])
    assert [getattr(r, "id", r) for r in results] == ids


def test_the_examples_messages():
    """A few messages in full: names, characters and counts come from the source."""
    got = {i: r.message for i, r in zip(EXAMPLES, compile_batch(list(EXAMPLES.values()), mode="traditional"))}
    assert got["invalid_character"] == "invalid character '$'"
    assert got["invalid_character_in_comment"] == "invalid character '\\x7f' in a comment"
    assert got["non_ascii"] == "non-ASCII character 'é': names and operators must be ASCII"
    assert got["invalid_number"] == "invalid number literal '1a'"
    assert got["bad_operator"] == "operator '@' is not part of the kernel language"
    assert got["keyword"] == "`in` is not supported"
    assert got["unknown_attribute"] == ("'np.foo' is not defined: math. and np. name only the builtins and the "
                                        "constants pi, e, inf, nan")
    assert got["function_as_value"] == "'sin' is a function: call it, e.g. sin(x)"
    assert got["arity"] == "atan2() takes 2 arguments, got 3"
    assert got["unknown_name_augmented"] == "name 'w' is not defined before +="
    assert got["python_syntax"] == serial.parser_message(EXAMPLES["python_syntax"])
    assert got["python_syntax"].startswith("invalid syntax")


def test_the_serial_compiler_s_guards():
    """Guards no program reaches (the token rules leave the tree walk only the constructs it knows): the
    walker still reports them, in the table's words."""
    w = serial._Walker("def f():\n    pass\n", [])
    for code in ("[x]", "'s'", "...", "x[0]"):
        w.expr(ast.parse(code).body[0].value, 1)
    fn = ast.parse("def f():\n    pass\n").body[0]
    w.body(fn, False)
    assert [ident for ident, _ in w.found] == ["unsupported_expression", "unsupported_constant",
                                               "unsupported_constant", "unsupported_expression",
                                               "unsupported_statement", "missing_return"]
    assert [w.errors[n][-1] for n in range(len(w.errors))] == list(range(6))
    assert diagnostics.message("unsupported_statement", construct="Pass") == "Pass statements are not supported"
    assert error("nested_too_deeply", 1, 1).message == "program is nested too deeply"


def test_the_neural_compiler_s_diagnostics(monkeypatch):
    from jupyter_gpuiter.compilers import neural
    from jupyter_gpuiter.compilers.neural import tokens as tk

    long = "def f(x):\n    return " + " + ".join(["x"] * 300) + "\n"
    with pytest.raises(CompileError) as info:
        tk.encode(long)
    assert info.value.id == "neural_input_size" and info.value.kind == "too-large"
    assert f"{tk.MAX_SLOTS} names, {tk.MAX_IN - 2} tokens" in info.value.message

    def junk(sources, k=1, model=None, **_):
        return neural.Candidates([tk.encode(s) for s in sources], [[tk.DecodeError("unfinished")] for _ in sources])

    monkeypatch.setattr(neural, "sample_candidates", junk)
    got = neural.compile_batch(["def f(x):\n    return x\n"], model=object())[0]
    assert (got.id, got.kind) == ("neural_no_program", "neural") and "(unfinished)" in got.message
    # a guard: every token the rules admit is in the model's vocabulary
    assert error("neural_unknown_token", 2, 5, text="@").message.startswith("the neural model has no token for '@'")


def test_the_cli_s_diagnostic(tmp_path):
    from jupyter_gpuiter.tools import cli

    big = tmp_path / "big.py"
    big.write_bytes(b"#" * (spec.MAX_SOURCE_BYTES + 1))
    with pytest.raises(CompileError) as info:
        cli._read_source(str(big))
    assert info.value.id == "file_too_large" and f"{spec.MAX_SOURCE_BYTES:,}" in info.value.message


# --- the table ---------------------------------------------------------------------------------

def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, path.relative_to(PACKAGE).as_posix(), path.read_text(encoding="utf-8")


def test_every_diagnostic_is_named_outside_the_table():
    """Each id appears as a string in some module other than the table (a compiler, a lexer, the
    CLI, or spec.BAD_KEYWORDS)."""
    named = set()
    for _, rel, text in _modules():
        if rel != "lang/diagnostics.py":
            named |= {n.value for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Constant)
                      and isinstance(n.value, str)}
    assert not set(DIAGNOSTICS) - named


def _strings(tree) -> list[str]:
    """The str constants of a module but its docstrings."""
    docs = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr)}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docs]


def test_no_compile_message_is_written_outside_the_table():
    """No CompileError is made from a literal message, and no string in another module holds a
    template's wording: a message is written once."""
    chunks = {}
    for d in DIAGNOSTICS.values():
        for literal, *_ in string.Formatter().parse(d.template):
            for part in literal.split("`"):
                if len(part.strip()) >= 16:
                    chunks[part.strip()] = d.id
    found = []
    for _, rel, text in _modules():
        if rel == "lang/diagnostics.py":
            continue
        tree = ast.parse(text)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "CompileError":
                literal = [a for a in [*node.args, *(k.value for k in node.keywords)]
                           if isinstance(a, ast.JoinedStr) or (isinstance(a, ast.Constant) and isinstance(a.value, str))]
                if literal:
                    found.append(f"{rel}:{node.lineno}: CompileError made from a literal")
        strings = _strings(tree)
        found += [f"{rel}: writes {ident}'s {chunk!r}" for chunk, ident in chunks.items()
                  if any(chunk in s for s in strings)]
    assert not found, "\n".join(found)


def test_templates_and_kinds():
    for d in DIAGNOSTICS.values():
        assert d.id.isidentifier() and d.id == d.id.lower(), d.id
        d.message(**dict.fromkeys(d.fields, 1))  # every field named
    assert DIAGNOSTICS["arity"].fields == ("name", "expected", "got")
    assert DIAGNOSTICS["too_many_brackets"].fields == ()  # the limits are filled in
    assert diagnostics.message("too_many_brackets") == f"more than {spec.MAX_NESTING} nested brackets"
    assert {spec.BAD_KEYWORDS[w] for w in ("for", "while")} == {"keyword_loop"}


def test_docs_list_the_table(root):
    text = (root / "docs/language.md").read_text()
    begin, end = "<!-- diagnostics: generated from lang/diagnostics.py -->\n", "<!-- /diagnostics -->"
    assert begin in text and end in text
    listed = text[text.index(begin) + len(begin): text.index(end)]
    assert listed == diagnostics.markdown(), "docs/language.md: paste diagnostics.markdown() between the markers"


# --- one formatter -----------------------------------------------------------------------------

def test_the_formatter():
    src = "def f(x):\n\treturn x + yy\n"
    e = error("unknown_name", 2, 13, name="yy")
    assert str(e) == e.format() == "unknown-name at line 2, column 13: name 'yy' is not defined"  # no source yet
    assert e.with_source(src) is e and e.source == src
    assert e.format() == str(e) + "\n\treturn x + yy\n\t           ^"
    assert e.format(path="k.py", caret=False) == "k.py:2:13: unknown-name: name 'yy' is not defined"
    assert e.id == "unknown_name" and e.args == (str(e),)
    again = pickle.loads(pickle.dumps(e))
    assert (again.id, again.kind, again.line, again.col, again.message, again.source) == (
        e.id, e.kind, e.line, e.col, e.message, e.source)


def test_the_cli_magic_and_comm_show_the_formatter_s_text(tmp_path, capsys):
    from jupyter_gpuiter.front import comm
    from jupyter_gpuiter.tools import cli

    src = "def f(x):\n    return sin(x, x)\n"
    e = compile_batch([src], mode="serial")[0]
    bad = tmp_path / "bad.py"
    bad.write_text(src)
    assert cli.main(["compile", str(bad)]) == 1
    assert capsys.readouterr().err == e.format(path=str(bad)) + "\n"
    assert comm.error_message("f", "serial", e, {})["sentence"] == e.format(caret=False)
