"""The random program generator and mutator (jupyter_gpuiter.generate), checked against the serial
compiler and the reference evaluator: generated programs are valid, evaluate, reach every operator,
builtin and formatting variant, and are deterministic; mutants are rejected with a well-formed
CompileError (and the targeted mutations with the kind they promise)."""

from __future__ import annotations

import ast
import collections
import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jupyter_gpuiter.compilers.serial import compile_source
from jupyter_gpuiter.generate import (
    GUARANTEED_KINDS,
    MUTATIONS,
    ROW_SHARE,
    generate,
    generate_batch,
    is_reserved,
    mutate,
    mutate_batch,
)
from jupyter_gpuiter.lang import spec
from jupyter_gpuiter.lang.errors import ERROR_KINDS, CompileError
from jupyter_gpuiter.lang.lexer import normalize_newlines, tokenize
from jupyter_gpuiter.runtime.reference import evaluate
from tests.support import ROOT

#: Mixed knobs: the defaults, the short programs the neural compiler is evaluated on, the extremes, and
#: row kernels (all, or half) under some of them.
KNOBS = [
    {},
    {"statements": (0, 2), "max_depth": 3},
    {"params": (1, 3), "statements": (0, 4), "max_depth": 5},
    {"style": False},
    {"max_chars": 80},
    {"max_chars": 160},
    {"params": (0, 2), "statements": (0, 1), "max_depth": 0},
    {"statements": (2, 6), "max_depth": 8, "mean_nodes": 10},
    {"rows": 1.0},
    {"rows": 1.0, "statements": (0, 2), "max_depth": 3},
    {"rows": 0.5, "params": (0, 2), "statements": (0, 1), "max_depth": 2},
    {"rows": 1.0, "max_chars": 120, "style": False},
]
N_PROGRAMS = 10_000
N_MUTANTS = 10_000


def _compile(src: str):
    """compile_source, with the source attached to anything that is not a CompileError (a compiler bug)."""
    try:
        return compile_source(src)
    except CompileError:
        raise
    except Exception as e:
        raise AssertionError(f"compile_source raised {type(e).__name__}: {e} on {src!r}") from e


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, dict]]:
    rng = random.Random(20240601)
    out = []
    for i in range(N_PROGRAMS):
        knobs = KNOBS[i % len(KNOBS)]
        out.append((generate(rng, **knobs), knobs))
    return out


@pytest.fixture(scope="module")
def compiled(corpus):
    programs, failures = [], []
    for src, _ in corpus:
        try:
            programs.append(_compile(src))
        except CompileError as e:
            failures.append((src, e))
    assert not failures, f"{len(failures)} generated programs do not compile, e.g. {failures[0]!r}"
    return programs


def _inputs(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    out = []
    for _ in range(n):
        x = rng.standard_normal(16) * rng.choice([1.0, 10.0, 1e3])
        x[rng.integers(0, 16, 2)] = rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310, 1e308], 2)
        out.append(x)
    return out


# --------------------------------------------------------------------------------------------------
# generated programs are valid
# --------------------------------------------------------------------------------------------------


def test_generated_programs_compile_and_evaluate(corpus, compiled):
    assert len(compiled) == len(corpus) == N_PROGRAMS
    rng = np.random.default_rng(0)
    for (src, _), program in zip(corpus, compiled):
        out = evaluate(program, _inputs(rng, program.n_params), "float64")
        per_element = program.n_params and not program.returns_per_row()  # a row kernel's [16] inputs: one row
        assert out.shape == ((16,) if per_element else ()), src
        assert out.dtype in (np.float64, np.bool_), src


def test_within_limits_and_knobs(corpus):
    for src, knobs in corpus:
        assert len(src.encode()) <= spec.MAX_SOURCE_BYTES
        tokens, err = tokenize(src)
        assert err is None, (src, err)
        assert sum(t.kind != "newline" for t in tokens) <= spec.MAX_TOKENS
        if "max_chars" in knobs:
            assert len(src) <= knobs["max_chars"], src
        fn = ast.parse(normalize_newlines(src)).body[0]
        body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        lo, hi = knobs.get("statements", (1, 12))
        if "max_chars" not in knobs:  # max_chars may shrink the ranges
            assert lo + 1 <= len(body) <= hi + 1, src
        depth = knobs.get("max_depth", 10)
        for stmt in body:
            assert _depth(stmt.value) <= depth, src
        params = [a.arg for a in fn.args.args]
        lo, hi = knobs.get("params", (1, 8))
        if "max_chars" not in knobs:
            assert lo <= len(params) <= hi, src
        assert len(set(params)) == len(params), src
        for name in params + [t.id for s in body if isinstance(s, (ast.Assign, ast.AugAssign))
                              for t in (s.targets if isinstance(s, ast.Assign) else [s.target])]:
            assert name.isascii() and name.isidentifier() and not is_reserved(name), (name, src)


def _depth(node) -> int:
    """Nesting of operators and calls (names, literals and math.NAME count 0), as the generator counts it."""
    if isinstance(node, (ast.Name, ast.Constant, ast.Attribute)):
        return 0
    kids = [n for n in ast.iter_child_nodes(node) if isinstance(n, ast.expr)]
    if isinstance(node, ast.Call):
        kids = node.args
    return 1 + max((_depth(k) for k in kids), default=0)


def test_large_knobs_stay_valid():
    rng = random.Random(3)
    for knobs in ({"statements": (150, 250)}, {"max_depth": 30, "mean_nodes": 40, "max_nodes": 400},
                  {"params": (32, 40)}, {"max_chars": 10}, {"statements": (0, 0), "params": (0, 0)}):
        for _ in range(5):
            src = generate(rng, **knobs)
            tokens, _ = tokenize(src)
            assert sum(t.kind != "newline" for t in tokens) <= spec.MAX_TOKENS
            assert len(src.encode()) <= spec.MAX_SOURCE_BYTES
            _compile(src)


def test_plain_style():
    for src in generate_batch(300, 9, style=False):
        assert "#" not in src and "\r" not in src and "\t" not in src and "\\" not in src
        assert not any(t.kind == "string" for t in tokenize(src)[0])
        lines = src.split("\n")
        assert lines[0].startswith("def ") and lines[-1] == ""
        assert all(line.startswith("    ") and line[4] != " " for line in lines[1:-1]), src


# --------------------------------------------------------------------------------------------------
# determinism
# --------------------------------------------------------------------------------------------------


def test_deterministic():
    a = generate_batch(300, 11, statements=(0, 3))
    assert a == generate_batch(300, 11, statements=(0, 3))
    b = generate_batch(300, 12, statements=(0, 3))
    assert sum(x == y for x, y in zip(a, b)) < 15
    assert len(set(a)) > 280
    assert generate(5) == generate(random.Random(5))
    rng = random.Random(5)
    assert generate(rng) != generate(rng)
    assert mutate_batch(a, 4) == mutate_batch(a, 4)
    assert mutate_batch(a, 4) != mutate_batch(a, 5)
    assert mutate(a[0], 1) == mutate(a[0], random.Random(1))


def test_deterministic_across_hash_seeds():
    code = ("import hashlib; from jupyter_gpuiter.generate import generate_batch, mutate_batch; "
            "s = generate_batch(200, 7); m = mutate_batch(s, 7); "
            "print(hashlib.sha256(repr((s, m)).encode()).hexdigest())")
    digests = set()
    for hash_seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, PYTHONPATH=str(ROOT))
        out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True,
                             check=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**64 - 1), st.sampled_from(KNOBS))
def test_property_compiles_deterministically(seed, knobs):
    src = generate(seed, **knobs)
    assert src == generate(seed, **knobs)
    text = _compile(src).text()
    assert text == _compile(src).text()
    assert text.rstrip().split("\n")[-1].startswith("ret %")


# --------------------------------------------------------------------------------------------------
# reachability
# --------------------------------------------------------------------------------------------------


def _continuations(src: str) -> tuple[bool, bool]:
    """(a logical line continued inside brackets, one continued by a backslash)."""
    norm = normalize_newlines(src)
    paren = backslash = False
    prev = None
    for t in tokenize(norm)[0]:
        if t.kind == "newline":
            prev = None
            continue
        if prev is not None and t.line > prev.line + prev.text.count("\n"):
            if "\\\n" in norm[prev.start + len(prev.text):t.start]:
                backslash = True
            else:
                paren = True
        prev = t
    return paren, backslash


def test_reachability(corpus, compiled):
    sample = list(zip(corpus, compiled))[:4000]
    ir_ops = collections.Counter(op for _, p in sample for op in p.ops)
    missing = [op for op in spec.IR_OP_BY_NAME if op not in ("param", "const", "bool", "ret") and not ir_ops[op]]
    assert not missing, f"IR ops never generated: {missing}"
    sources = [src for (src, _), _ in sample]
    feats = collections.Counter()
    for src in sources:
        norm = normalize_newlines(src)
        tokens = tokenize(norm)[0]
        texts = [t.text for t in tokens]
        for i, t in enumerate(tokens):
            if t.kind == "name" and i + 1 < len(tokens) and tokens[i + 1].kind == "(" and t.text in spec.BUILTINS:
                ns = tokens[i - 1].kind == "." and tokens[i - 2].text
                feats[f"call:{t.text}"] += 1
                feats[f"call-ns:{ns or 'bare'}"] += 1
                if t.text in ("min", "max"):
                    j, depth, commas = i + 2, 0, 0
                    while depth >= 0:
                        k = tokens[j].kind
                        depth += {"(": 1, ")": -1}.get(k, 0)
                        commas += k == "," and depth == 0 and tokens[j + 1].kind != ")"
                        j += 1
                    feats[f"minmax-args:{commas + 1}"] += 1
            elif t.kind == "name" and t.text in spec.CONSTANTS:
                feats[f"const:{t.text}:{'ns' if i and tokens[i - 1].kind == '.' else 'bare'}"] += 1
            elif t.kind in spec.AUG_ASSIGN or t.kind in ("True", "False"):
                feats[t.kind] += 1
            elif t.kind == "number":
                x = t.text.lower()
                feats["num:hex" if x.startswith("0x") else "num:oct" if x.startswith("0o") else
                      "num:bin" if x.startswith("0b") else "num:exp" if "e" in x else
                      "num:lead-dot" if x.startswith(".") else "num:trail-dot" if x.endswith(".") else
                      "num:float" if "." in x else "num:int"] += 1
                feats["num:underscore"] += "_" in x
                feats["num:huge"] += "e30" in x or len(x) > 20
            elif t.kind == "string":
                feats["docstring"] += 1
                feats["docstring-triple"] += t.text.endswith(('"""', "'''"))
                feats["docstring-unicode"] += not t.text.isascii()
            elif t.kind == "," and tokens[i + 1].kind == ")":
                feats["trailing-comma"] += 1
        feats["one-line"] += bool(re.search(r"^def [^\n]*\)\s*:[ \t]*return\b", norm, re.MULTILINE))
        feats["crlf"] += "\r\n" in src
        feats["tabs"] += bool(re.search(r"\n\t+\S", norm))
        feats["comment"] += "#" in norm
        feats["comment-unicode"] += any(not line.isascii() for line in re.findall(r"#[^\n]*", norm))
        feats["blank-line"] += "\n\n" in norm.rstrip("\n")
        feats["no-final-newline"] += not norm.endswith("\n")
        feats["nospace-op"] += bool(re.search(r"[\w)][+*/%<>-][\w(]", norm))
        paren, backslash = _continuations(src)
        feats["paren-continuation"] += paren
        feats["backslash"] += backslash
        feats["bool-op"] += "and" in texts or "or" in texts
    wanted = ([f"call:{b}" for b in spec.BUILTINS] + ["call-ns:math", "call-ns:np", "call-ns:bare"]
              + [f"const:{c}:{w}" for c in spec.CONSTANTS for w in ("ns", "bare")]
              + [f"minmax-args:{n}" for n in (1, 2, 3, 4)] + list(spec.AUG_ASSIGN) + ["True", "False"]
              + [f"num:{k}" for k in ("hex", "oct", "bin", "exp", "lead-dot", "trail-dot", "float", "int",
                                      "underscore", "huge")]
              + ["docstring", "docstring-triple", "docstring-unicode", "trailing-comma", "one-line", "crlf", "tabs",
                 "comment", "comment-unicode", "blank-line", "no-final-newline", "nospace-op",
                 "paren-continuation", "backslash", "bool-op"])
    absent = [w for w in wanted if feats[w] < 3]
    assert not absent, f"never (or hardly ever) generated: {absent}"


def test_short_programs_are_easy():
    short = generate_batch(500, 1, statements=(0, 2), max_depth=3)
    assert sum(len(s) <= 160 for s in short) > 300
    assert sum(len(s) <= 80 for s in short) > 60
    assert all(len(s) <= 80 for s in generate_batch(200, 2, max_chars=80))


# --------------------------------------------------------------------------------------------------
# row kernels
# --------------------------------------------------------------------------------------------------

#: sha256 of repr(generate_batch(300, 7)) as the generator made it before row kernels (commit cb18db1):
#: its elementwise stream is kept, so that rows=0 (and the places row kernels do not take) gives it still.
ELEMENTWISE_DIGEST = "fad37b105ccb599347880140ad4b9f897ab93e134ee0facf1ce723299e9adde6"


def _reduces(src: str) -> bool:
    return compile_source(src).reduces


def test_elementwise_stream_is_the_one_before_row_kernels():
    import hashlib

    plain = generate_batch(300, 7, rows=0)
    assert hashlib.sha256(repr(plain).encode()).hexdigest() == ELEMENTWISE_DIGEST
    assert not any(_reduces(src) for src in plain)  # no sum/mean, no one-argument min/max
    mixed = generate_batch(300, 7)
    rows = [i for i, src in enumerate(mixed) if src != plain[i]]
    assert all(_reduces(mixed[i]) for i in rows)
    assert all(not _reduces(src) for i, src in enumerate(mixed) if i not in rows)
    assert generate(5) == generate(5, rows=0.0)  # one program: elementwise unless asked


def test_row_share_and_determinism():
    sources = generate_batch(2000, 3)
    share = sum(map(_reduces, sources)) / len(sources)
    assert abs(share - ROW_SHARE) < 0.03, share
    assert sources == generate_batch(2000, 3)
    assert all(map(_reduces, generate_batch(300, 4, rows=1.0)))
    assert generate(9, rows=1.0) == generate(random.Random(9), rows=1.0)
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="rows"):
            generate_batch(3, 1, rows=bad)
        with pytest.raises(ValueError, match="rows"):
            generate(1, rows=bad)


def _calls(tree) -> list[tuple[str, int]]:
    return [(c.func.attr if isinstance(c.func, ast.Attribute) else c.func.id, len(c.args))
            for c in ast.walk(tree) if isinstance(c, ast.Call)]


def _nested_reduction(node, inside: bool = False) -> bool:
    """A reduction inside another reduction's argument (max(x - max(x)), sum(exp(x - max(x))))."""
    is_red = isinstance(node, ast.Call) and len(node.args) == 1 and (
        node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) in spec.REDUCTIONS
    if is_red and inside:
        return True
    return any(_nested_reduction(c, inside or is_red) for c in ast.iter_child_nodes(node))


def test_row_kernels_are_varied_realistic_and_evaluate():
    sources = generate_batch(3000, 8, rows=1.0)
    rng = np.random.default_rng(1)
    counts = collections.Counter()
    for src in sources:
        program = compile_source(src)
        assert program.reduces and program.n_params >= 1, src
        out = evaluate(program, _inputs(rng, program.n_params), "float64")
        assert out.shape == (() if program.returns_per_row() else (16,)), src
        tree = ast.parse(normalize_newlines(src))
        counts["per-row result"] += program.returns_per_row()
        counts["nested"] += _nested_reduction(tree)
        counts["name:" + tree.body[0].name] += 1
        for name, n in _calls(tree):
            if name in spec.REDUCTIONS and n == 1:
                counts["reduce:" + name] += 1
        counts["np."] += "np.sum(" in src or "np.max(" in src or "np.mean(" in src
        counts["aug"] += any(isinstance(s, ast.AugAssign) for s in tree.body[0].body)
    assert 0.2 < counts["per-row result"] / len(sources) < 0.8, counts
    assert counts["nested"] > 0.2 * len(sources), counts
    for name in ("softmax", "log_softmax", "layernorm", "rmsnorm", "logsumexp", "cross_entropy", "cosine_similarity",
                 "l2_normalize", "variance", "kl_divergence", "minmax_scale", "max_abs"):
        assert counts["name:" + name] >= 3, (name, counts)
    assert all(counts["reduce:" + r] > 300 for r in spec.REDUCTIONS), counts
    assert counts["np."] > 50 and counts["aug"] > 50, counts


def test_row_kernels_keep_the_knobs():
    for knobs in ({"statements": (0, 0)}, {"statements": (3, 5), "params": (2, 4)}, {"max_depth": 2},
                  {"max_chars": 60}, {"style": False}):
        for src in generate_batch(300, 10, rows=1.0, **knobs):
            fn = ast.parse(normalize_newlines(src)).body[0]
            body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            lo, hi = knobs.get("statements", (1, 12))
            assert lo + 1 <= len(body) <= hi + 1, (knobs, src)
            lo, hi = knobs.get("params", (1, 8))
            assert lo <= len(fn.args.args) <= hi, (knobs, src)
            assert all(_depth(s.value) <= knobs.get("max_depth", 10) for s in body), (knobs, src)
            assert len(src) <= knobs.get("max_chars", 10**6), (knobs, src)
            if knobs.get("style") is False:
                assert "#" not in src and "\r" not in src
            assert _reduces(src), (knobs, src)
    # no row kernel fits a depth of 0: the program is elementwise
    assert not any(map(_reduces, generate_batch(50, 11, rows=1.0, max_depth=0)))


def test_reduction_mutations():
    sources = generate_batch(1500, 12, rows=0.5)
    rng = random.Random(13)
    kinds = collections.defaultdict(collections.Counter)
    for src in sources:
        mutant, name = mutate(src, rng, only="reduction")
        try:
            kinds[name][_compile(mutant).reduces] += 1
        except CompileError as e:
            _check_error(e, mutant)
            kinds[name][e.kind] += 1
    for name in ("axis", "empty", "many"):
        assert set(kinds[f"reduction:{name}"]) == {"arity"} and kinds[f"reduction:{name}"]["arity"] > 20, kinds
    for name in ("keyword", "method"):
        assert set(kinds[f"reduction:{name}"]) == {"unsupported"} and kinds[f"reduction:{name}"]["unsupported"] > 20
    assert kinds["reduction:extra"]["arity"] > 20  # sum(x, y); max(x, y) is elementwise, valid
    assert kinds["reduction:wrap"][True] == sum(kinds["reduction:wrap"].values()) > 100  # a row kernel now
    assert kinds["reduction:swap"][True] == sum(kinds["reduction:swap"].values()) > 20
    assert kinds["reduction:unwrap"][True] + kinds["reduction:unwrap"][False] == sum(kinds["reduction:unwrap"].values())
    assert kinds["reduction:unwrap"][False] > 5  # the only reduction removed: elementwise


# --------------------------------------------------------------------------------------------------
# mutations
# --------------------------------------------------------------------------------------------------


def _check_error(e: CompileError, src: str):
    n_lines = len(normalize_newlines(src).split("\n"))
    assert e.kind in ERROR_KINDS, (e, src)
    assert 1 <= e.line <= n_lines + 1 and e.col >= 1, (e, src)


def test_mutants_are_rejected_cleanly(corpus):
    rng = random.Random(77)
    sources = [src for src, _ in corpus][:N_MUTANTS]
    rejected, crashes = 0, []
    families, kinds = collections.Counter(), collections.Counter()
    for src in sources:
        mutant, name = mutate(src, rng)
        family = name.split(":")[0]
        assert family in MUTATIONS, name
        families[family] += 1
        try:
            compile_source(mutant)
        except CompileError as e:
            _check_error(e, mutant)
            rejected += 1
            kinds[(family, e.kind)] += 1
        except Exception as e:  # noqa: BLE001 - collected and reported: a bug of the compiler
            crashes.append((name, mutant, f"{type(e).__name__}: {e}"))
    assert not crashes, f"{len(crashes)} mutants crash compile_source, e.g. {crashes[:3]!r}"
    assert rejected >= 0.9 * len(sources), (rejected, kinds)
    assert set(families) == set(MUTATIONS)
    for family, kind in GUARANTEED_KINDS.items():
        assert kinds[(family, kind)] == families[family], (family, kinds)
    assert sum(v for (f, k), v in kinds.items() if f == "construct") >= 0.97 * families["construct"]


@pytest.mark.parametrize("family", sorted(GUARANTEED_KINDS))
def test_targeted_mutations_give_their_kind(corpus, family):
    rng = random.Random(family)
    names = collections.Counter()
    for src, _ in corpus[:1500]:
        mutant, name = mutate(src, rng, only=family)
        names[name] += 1
        with pytest.raises(CompileError) as info:
            _compile(mutant)
        _check_error(info.value, mutant)
        assert info.value.kind == GUARANTEED_KINDS[family], (name, src, mutant, info.value)
    if family == "arity":
        assert {"arity:add", "arity:remove", "arity:empty"} <= set(names)


@pytest.mark.parametrize("family", ["indent", "construct", "unbalance", "bad-char", "truncate"])
def test_structural_mutations(corpus, family):
    rng = random.Random(family)
    kinds = collections.Counter()
    for src, _ in corpus[:600]:
        mutant, name = mutate(src, rng, only=family)
        assert name.split(":")[0] == family
        try:
            _compile(mutant)
            kinds["valid"] += 1
        except CompileError as e:
            _check_error(e, mutant)
            kinds[e.kind] += 1
    assert kinds["valid"] <= 0.15 * 600, kinds
    if family in ("indent", "unbalance"):
        assert kinds["syntax"] + kinds["unsupported"] >= 0.9 * 600, kinds
    if family == "construct":
        assert kinds["unsupported"] >= 0.85 * 600, kinds


def test_mutations_keep_line_endings():
    for src in generate_batch(400, 21):
        mutant, _ = mutate(src, random.Random(len(src)))
        if "\r\n" in src:
            assert "\n" not in mutant.replace("\r\n", "")
        elif "\r" not in src:
            assert "\r" not in mutant


def test_mutate_rejects_unknown_family():
    with pytest.raises(ValueError):
        mutate("def f(x):\n    return x\n", 0, only="nope")
