"""The traditional compiler's driver (compilers/traditional/driver.py): chunks cut by bytes, then by tokens,
within the memory budget and the padding allowed, the same result however a batch is cut, pass timings, and
the tables warm_up builds."""

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuiter import compile_batch, generate
from jupyter_gpuiter.compilers import traditional
from jupyter_gpuiter.compilers.traditional import batch_lexer, driver
from jupyter_gpuiter.compilers.traditional.regroup import regroup
from jupyter_gpuiter.ir import Program
from jupyter_gpuiter.lang.errors import CompileError
from tests.support.differential import assert_agree
from tests.support.edge_cases import INVALID


def test_batches_split_into_chunks_give_the_same_result(monkeypatch):
    sources = generate.generate_batch(120, 12) + [s for s, _ in INVALID]
    whole = compile_batch(sources, mode="traditional").canonical()
    monkeypatch.setattr(driver, "CHUNK_CELLS", 4096)
    assert compile_batch(sources, mode="traditional").canonical() == whole


def test_short_programs_are_not_padded_to_the_long_ones(monkeypatch):
    short = generate.generate_batch(300, 13, max_chars=60)
    long = generate.generate_batch(300, 14, statements=(10, 12))
    monkeypatch.setattr(driver, "MIN_CHUNK_CELLS", {"cpu": 1 << 12})
    batches, sizes = traditional.compile_to_batches(short + long)
    assert len(batches) >= 2
    for rows, chunk in batches:  # each chunk pads its token arrays to its most tokens: at most 1.1x, or it is small
        T = chunk.token_start.shape[1]
        assert T == max(chunk.tokens) and len(chunk.tokens) == len(rows)
        assert len(rows) * (max(sizes[rows]) + 1) <= 1 << 12 or len(rows) * T <= driver.PAD_WASTE * sum(chunk.tokens)
    assert_agree(short + long)


def test_lexing_chunks_pad_bytes_and_later_chunks_pad_tokens_at_most_pad_waste():
    from jupyter_gpuiter.compilers.traditional.plan import split

    sizes = np.array([10, 11, 12, 40, 41, 44, 90, 95, 99])
    tokens = np.array([3, 9, 4, 12, 30, 13, 31, 33, 14])
    by_bytes = split(list(range(9)), sizes + 1, sizes + 1, 10**6, 0, 1.1)
    assert by_bytes == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    order = np.argsort(tokens, kind="stable").tolist()
    assert split(order, sizes + 1, tokens, 10**6, 0, 1.1) == [[0], [2], [1], [3, 5, 8], [4, 6, 7]]
    assert split(order, sizes + 1, tokens, 250, 0, 1.1)[-2:] == [[4, 6], [7]]  # 3 rows of up to 96 bytes: 288


def split_by_steps(order, width, height, max_cells, min_cells, pad_waste):
    """The chunk cut as its definition reads, a row at a time: the oracle of plan.split."""
    heights, widths = [int(height[i]) for i in order], [int(width[i]) for i in order]
    chunks, start = [], 0
    while start < len(order):
        stop, used, widest = start + 1, heights[start], widths[start]
        while stop < len(order):
            n, h, widest_next = stop - start + 1, heights[stop], max(widest, widths[stop])
            cells = n * widest_next
            if cells > max_cells or (cells > min_cells and n * h > pad_waste * (used + h)):
                break
            used, widest, stop = used + h, widest_next, stop + 1
        chunks.append(list(order[start:stop]))
        start = stop
    return chunks


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 300), st.integers(0, 90)), max_size=400),
       st.sampled_from([40, 300, 3000, 10 ** 6]), st.sampled_from([0, 200, 2000, 10 ** 7]),
       st.sampled_from([1.0, 1.05, 1.1, 1.5]), st.booleans())
def test_split_cuts_where_a_row_at_a_time_would(rows, max_cells, min_cells, pad_waste, by_tokens):
    from jupyter_gpuiter.compilers.traditional.plan import split

    width, tokens = np.array([w for w, _ in rows], dtype=np.int64), np.array([t for _, t in rows], dtype=np.int64)
    height = tokens if by_tokens else width
    order = np.argsort(height, kind="stable").tolist()
    chunks = split(order, width, height, max_cells, min_cells, pad_waste)
    assert chunks == split_by_steps(order, width, height, max_cells, min_cells, pad_waste)
    assert [i for c in chunks for i in c] == order


def test_loops_sized_by_the_chunk_reach_its_longest_line_deepest_nesting_and_longest_alias_chain(monkeypatch):
    """parse's and semantic's loops run as many rounds as the chunk's longest logical line, deepest
    nesting and most lines need, each just past a power of two here, among short programs in one chunk;
    searches that go past a line (walls', and after an unpaired `else`) come out as none."""
    n = 81  # a logical line of 2n + 6 = 168 tokens with links across 2n - 1 > 128 tokens
    far_right = "def f(a, c):\n    return (a" + "\n        ** a" * n + "\n        or c)\n"  # the first `**` to `or`
    far_left = "def f(a, c):\n    return c * (a" + "\n        + a" * n + ")\n"  # the last `+` to `(`
    deep = "def f(a, c):\n    return " + "(" * 33 + "a" + ")" * 33 + " + c\n"  # 33 groups to see through
    # 103 lines, 100 links from x100 to `a + 1` (a link cut short lands on a name, whose register is y's)
    chain = ("def f(a):\n    x1 = a + 1\n    y = a * 2\n" + "".join(f"    x{i} = x{i - 1}\n" for i in range(2, 101))
             + "    return x100 - y\n")
    aug = chain.replace("return x100 - y", "x100 += y\n    return x100")
    # `+=` is a wall, whose search goes past its line: its node must still start at 0, not in a `**` chain
    augs = "def f(a):\n    y = a\n" + "".join(f"    y = a{' ** a' * (i % 7 + 1)}\n    y += 1\n" for i in range(30))
    augs += "    return y\n"
    # after an unpaired `else`, levels are below 0 and searches pass walls: that `else` is still the error
    # (two, so that searches cut short stop at a wall in one and at a name in the other)
    unpaired = ["def f(a, b):\n    x = a else b\n" + "    y = a\n" * 70 + f"    z = {'-' * k}a if b else a\n    return z\n"
                for k in range(2)]
    short = generate.generate_batch(300, 31, max_chars=60)
    special = [far_right, far_left, deep, chain, aug, augs]
    sources = short[:100] + special[:3] + short[100:200] + special[3:] + short[200:] + unpaired
    monkeypatch.setattr(driver, "MIN_CHUNK_CELLS", {"cpu": driver.CHUNK_CELLS})
    assert len(traditional.compile_to_batches(sources)[0]) == 1
    got = assert_agree(sources)
    assert not any(g.startswith("error") for g in got[100:103] + got[203:206])
    assert all(g.startswith("error syntax 2:") for g in got[-2:])


def test_pass_timings_are_reported():
    timings = {}
    traditional.compile_batch(generate.generate_batch(20, 1), timings=timings)
    assert set(timings) == set(traditional.PASSES) and all(v >= 0 for v in timings.values())


@pytest.mark.parametrize("free_gb, expect", [(0.5, "floor"), (8, "quarter"), (200, "cap")])
def test_cuda_chunks_take_a_quarter_of_free_memory_within_bounds(monkeypatch, free_gb, expect):
    free = int(free_gb * 2**30)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 2 * free))
    cells = traditional.chunk_cells(torch.device("cuda"))  # a device object needs no GPU
    budget = 4 * driver.BYTES_PER_CELL  # bytes of free memory a cell may claim
    if expect == "floor":  # a small GPU still gets the CPU's chunks
        assert cells == driver.CHUNK_CELLS > free // budget
    elif expect == "cap":
        assert cells == driver.CUDA_CHUNK_CELLS < free // budget
    else:
        assert driver.CHUNK_CELLS < cells < driver.CUDA_CHUNK_CELLS
        assert cells * budget <= free < (cells + 1) * budget
    assert traditional.chunk_cells(torch.device("cpu")) == driver.CHUNK_CELLS


def test_batches_leave_as_ordinary_tensors():
    # the passes run under torch.inference_mode; what leaves must accept in-place updates outside it
    sources = ["def f(x):\n    return x * 0x1F + 1e400\n", "def g(x):\n    return y\n"]  # a host-valued literal
    batches, _ = traditional.compile_to_batches(sources, "cpu")
    result = compile_batch(sources, mode="traditional")
    for batch in [c.batch for _, c in batches] + [result.batch]:
        for t in (batch.ops, batch.args, batch.imm, batch.lengths, batch.n_params, batch.error):
            assert not t.is_inference()
        batch.imm.add_(0.0)  # an inference tensor raises here
    assert isinstance(result[0], Program) and isinstance(result[1], CompileError)


def test_regrouped_rows_equal_the_same_rows_lexed_together():
    """regroup's Tokens are those lex makes of the same sources as one chunk, field by field (its loop bounds
    are the parts' maxima: bounds, never below the chunk's own)."""
    sources = [s.encode() for s in generate.generate_batch(60, 17) + [s for s, _ in INVALID]]
    a = sources[:40] + [b"def f(x):\n    return x $ 1\n"]  # a lexical error
    b = sources[40:] + [b'def f(x):\n    return "x\n', b"def f(x):\r\n    return x\r\n",
                        b"def f(x):\n" + b"    y = x\n" * 30 + b"    return y\n"]
    with torch.inference_mode():
        lexed = [driver._lex_chunk(part, "cpu") for part in (a, b)]
        rows = ([5, 0, 40, 17, 3], [1, len(b) - 1, len(b) - 3, 8])  # out of order; the longest; lexical errors
        chosen = [a[i] for i in rows[0]] + [b[i] for i in rows[1]]
        got = regroup([(tk, r) for tk, r in zip(lexed, rows)], max(map(len, chosen)))
        want = driver._lex_chunk(chosen, "cpu")
    for field in dataclasses.fields(want):
        g, w = getattr(got, field.name), getattr(want, field.name)
        if field.name in ("longest_line", "most_lines", "deepest"):
            assert g >= w, field.name
        elif field.name in ("lex_line", "lex_col"):  # (a place only where there is a lexical error)
            errors = want.lex_error != 0
            assert errors.any() and torch.equal(g[errors], w[errors]), field.name
        elif isinstance(w, torch.Tensor):
            assert g.dtype == w.dtype and torch.equal(g, w), field.name
        else:
            assert np.array_equal(g, w), field.name


def test_warm_up_builds_the_tables_a_first_compile_would(monkeypatch):
    lexmod = batch_lexer
    monkeypatch.setattr(lexmod, "_TABLES", {})
    traditional.warm_up("cpu")
    assert torch.device("cpu") in lexmod._TABLES
    sources = generate.generate_batch(40, 3)
    assert traditional.compile_batch(sources, workers=1).canonical() == \
        compile_batch(sources, mode="serial").canonical()
