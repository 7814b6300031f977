"""Row kernels (docs/language.md, "Row kernels") through the traditional compiler, against the serial oracle:
the same IR text (sum, mean, amax, amin: a one-argument min/max reduces, two or more fold elementwise), the
same arity errors of sum/mean/min/max (kind, line, column, message) wherever the call stands, and the same
results on hand-written kernels (tests/support/row_kernels.py), on their spelling variants, and on generated
row kernels and their mutants."""

import pytest
import torch

from jupyter_gpuiter import compile_batch, generate
from jupyter_gpuiter.compilers import traditional
from jupyter_gpuiter.ir import ProgramBatch
from jupyter_gpuiter.lang import spec
from tests.support.differential import assert_agree
from tests.support.row_kernels import REAL, WRONG

HAND = [src for src, _, _ in REAL.values()] + [src for src, _ in WRONG.values()]


#: Syntax errors in the split header of a one-line def: at the def's first line in both compilers
#: (docs/language.md: "the first line of the statement that contains them").
SPLIT_HEADER = ["def f(x,\n      y z): return sum(x)\n", "def f(x,\n      y,,): return max(x)\n"]


def test_a_syntax_error_in_a_split_header_of_a_one_line_def_is_on_the_def_line():
    got = assert_agree(SPLIT_HEADER)
    assert all(g.startswith("error syntax 1:") for g in got)


def _spelled(src: str, prefix: str) -> str:
    """src with every builtin call spelled prefix + name (np. or math.)."""
    for name in sorted(spec.BUILTINS, key=len, reverse=True):
        src = src.replace(f" {name}(", f" {prefix}{name}(").replace(f"({name}(", f"({prefix}{name}(")
        src = src.replace(f"-{name}(", f"-{prefix}{name}(")
    return src


def _variants(src: str) -> list[str]:
    """The same kernel spelled otherwise: np./math. calls, CRLF, tabs, a docstring and comments."""
    lines = src.split("\n")
    return [src, _spelled(src, "np."), _spelled(src, "math."), src.replace("\n", "\r\n"), src.replace("    ", "\t"),
            "\n".join([lines[0], '    """A row kernel: over the last axis."""', *lines[1:]]),
            "# row kernel\n" + src.replace("\n    return", "  # step\n    return")]


def test_hand_written_row_kernels_agree():
    sources = [v for src in HAND for v in _variants(src)]
    got = assert_agree(sources)
    assert not any(g.startswith("error") for g in got)
    programs = compile_batch(sources, mode="traditional").results
    assert all(p.reduces for p in programs)
    assert len({g for g in got}) == len(HAND)  # spelling changes nothing of the IR


def test_the_documented_ir():
    got = assert_agree([REAL["logsumexp"][0], REAL["softmax"][0], REAL["max_abs"][0]])
    assert got[0] == "%0 = param 0\n%1 = amax %0\n%2 = sub %0 %1\n%3 = exp %2\n%4 = sum %3\n%5 = log %4\n%6 = add %1 %5\nret %6"
    assert got[1] == "%0 = param 0\n%1 = amax %0\n%2 = sub %0 %1\n%3 = exp %2\n%4 = sum %3\n%5 = div %3 %4\nret %5"
    assert got[2] == "%0 = param 0\n%1 = abs %0\n%2 = amax %1\nret %2"


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("prefix", ["", "np.", "math."])
def test_arity_of_reductions(name, prefix):
    """0, 1, 2, 8 and 9 arguments, at the top, inside an expression, inside another reduction, as a
    statement's value on a later line, and split over lines: sum/mean take one; min/max 1 to 8."""
    sources = []
    for n in (0, 1, 2, 8, 9):
        call = f"{prefix}{name}({', '.join(['x', 'y', '1.5'][i % 3] for i in range(n))})"
        sources += [f"def f(x, y):\n    return {call}\n", f"def f(x, y):\n    return x - 2 * {call}\n",
                    f"def f(x, y):\n    return sum(exp(x - {call}))\n", f"def f(x, y): return max(x) + {call}\n",
                    f"def f(x, y):\n    z = x\n    z -= {call}\n    return z / sum(z)\n",
                    f"def f(x, y):\n    z = (x +\n         {call})\n    return mean(z)\n"]
    got = assert_agree(sources)
    results = compile_batch(sources, mode="traditional").results
    per_n = {n: got[6 * k:6 * k + 6] for k, n in enumerate((0, 1, 2, 8, 9))}
    bad = {0, 2, 8, 9} if name in ("sum", "mean") else {0, 9}
    for n, texts in per_n.items():
        if n in bad:
            assert all(t.startswith("error arity") for t in texts), (n, texts)
        else:
            assert not any(t.startswith("error") for t in texts), (n, texts)
    one = results[6]
    assert one.text().count(spec.REDUCTIONS[name]) == 1
    wrong = results[6 * 3 + 1]  # 8 arguments
    if name in ("sum", "mean"):
        assert wrong.message.startswith(f"{name}() takes 1 argument, got 8")
    else:
        assert not any(op in spec.REDUCTION_OPS for op in wrong.ops)  # an elementwise fold
    assert (results[6 * 4].line, results[6 * 4].col) == (2, 12)
    assert results[6 * 4].message.startswith(f"{name}() takes {'1 argument' if name in ('sum', 'mean') else '1 to 8 arguments'}, got 9")


NESTED = [
    "max(x - max(x))", "sum(exp(x - max(x)))", "mean(x - mean(x - mean(x)))", "max(max(max(x)))", "min(min(x), x, 1)",
    "sum(2.0) + max(1) + mean(True)", "sum(x > 0) / mean(x < y)", "max(x > y)", "max(x, y) - max(x)", "min((x))",
    "sum(x,)", "max(x,)", "np.max(np.abs(x)) + math.min(y)", "sum(x if y > 0 else -x)", "max(x) if sum(y) > 0 else min(x)",
    "sum(\n        x * y)", "mean(x\n        )", "max(min(x, y))", "max(min(x), min(y))", "sum(sum(x) * x) - sum(x) ** 2",
    "clip(x, min(x), max(x))", "where(x == max(x), 1.0, 0.0)", "not max(x)", "-min(-x)", "x ** sum(y) ** max(x)",
    "atan2(sum(x), mean(y))", "sum(x) // max(y) % min(x)", "pow(mean(x), 2)", "hypot(max(x), min(y)) and sum(x)",
]

STATEMENTS = [
    "def f(x):\n    x -= max(x)\n    x = exp(x)\n    return x / sum(x)\n",
    "def f(x, y):\n    y = x\n    m = max(y)\n    return y - m\n",
    "def f(x, y):\n    m = max(x)\n    m += min(y)\n    m **= mean(x * y)\n    return m\n",
    "def f(max, x):\n    return np.max(max) + math.max(x)\n",
    "def f(max, x):\n    return max(x)\n",
    "def f(sum):\n    return sum(sum)\n",
    "def f(x):\n    s = sum\n    return s\n",
    "def f(x):\n    return sum\n",
    "def f(x):\n    return sum(x)(x)\n",
    "def f(x):\n    return x.sum()\n",
    "def f(x):\n    return np.sum(x, axis=-1)\n",
    "def f(x):\n    return sum(*x)\n",
    "def f(x):\n    return sum(x for x in x)\n",
    "def f(x):\n    return sum([x])\n",
    "def f(x):\n    return mean(x, y)\n",
    "def f(x):\n    return mean(foo(x))\n",
    "def f(x):\n    return foo(mean())\n",
    "def f(x):\n    return mean(sum(x, x), min())\n",
    "def f(x):\n    return sum(mean(x, x))\n",
    "def f(x):\n    return sum(z)\n",
    "def f(x):\n    z = sum(z)\n    return z\n",
    "def f(x):\n    return max(x) < min(x) < 0\n",
    "def f(): return sum(1.0)\n",
    "def f(x): return max(x)",
    "def f(x):\r\n    return sum(x)\r\n",
    "def f(x):\n    return sum(x) + mean(x) + max(x) + min(x) + sum(x) * mean(x)" + " + max(x)" * 200 + "\n",
]


def test_nested_reductions_and_neighbours_agree():
    sources = [f"def f(x, y):\n    return {e}\n" for e in NESTED] + STATEMENTS
    got = assert_agree(sources)
    assert not any(g.startswith("error") for g in got[: len(NESTED)])
    assert sum(g.startswith("error") for g in got[len(NESTED):]) >= 15


@pytest.mark.parametrize("seed", range(3))
def test_generated_row_kernels_and_their_mutants_agree(seed):
    knobs = [{}, {"statements": (0, 2), "max_depth": 3}, {"max_chars": 120}][seed]
    sources = generate.generate_batch(500, 3000 + seed, rows=1.0, **knobs)
    mutants = [m for m, _ in generate.mutate_batch(sources, 3100 + seed)]
    targeted = [m for m, _ in generate.mutate_batch(sources, 3200 + seed, only="reduction")]
    arity = [m for m, _ in generate.mutate_batch(sources, 3300 + seed, only="arity")]
    got = assert_agree(sources)
    assert not any(g.startswith("error") for g in got)
    assert all(p.reduces for p in compile_batch(sources, mode="traditional").results)
    assert all(g.startswith("error arity") for g in assert_agree(arity))
    assert sum(g.startswith("error") for g in assert_agree(targeted)) > 200
    assert_agree(mutants)


def test_row_kernels_pack_as_the_serial_programs():
    """The device ProgramBatch of row kernels (and of the arity errors beside them) equals the serial
    compiler's results packed: the reductions' op codes, their single operand, the -1 operands after it."""
    sources = generate.generate_batch(300, 3400, rows=1.0)
    sources += [m for m, _ in generate.mutate_batch(sources, 3401, only="reduction")] + HAND
    got = compile_batch(sources, mode="traditional").batch
    want = ProgramBatch.from_results(compile_batch(sources, mode="serial").results)
    n = want.ops.shape[1]
    assert torch.equal(got.ops[:, :n], want.ops) and torch.equal(got.args[:, :n], want.args)
    assert torch.equal(got.lengths, want.lengths) and torch.equal(got.error[:, :2], want.error[:, :2])
    reduction_codes = torch.tensor([spec.IR_OP_INDEX[op] for op in spec.REDUCTION_OPS])
    at = torch.isin(got.ops, reduction_codes)
    assert at.sum() > 500 and (got.args[..., 1:][at] == -1).all() and (got.args[..., 0][at] >= 0).all()


def test_row_kernels_in_worker_processes_and_chunks(monkeypatch):
    """Chunked and regrouped (small chunks: many), row kernels compile to what one chunk gives."""
    from jupyter_gpuiter.compilers.traditional import driver

    sources = generate.generate_batch(400, 3500, rows=0.5) + HAND
    whole = assert_agree(sources)
    monkeypatch.setattr(driver, "CHUNK_CELLS", 20_000)
    assert traditional.compile_batch(sources, workers=1).canonical() == whole
