"""The hybrid compiler: neural candidates verified against traditional, with a strict fallback."""

import pytest
import torch

from jupyter_gpuiter import compile, compile_batch
from jupyter_gpuiter.compilers import hybrid
from jupyter_gpuiter.compilers.neural import Candidates
from jupyter_gpuiter.compilers.neural import tokens as tk
from jupyter_gpuiter.compilers.neural.model import ModelConfig, Seq2Seq
from jupyter_gpuiter.compilers.serial import compile_source
from jupyter_gpuiter.generate import generate_batch, mutate_batch
from tests.support.row_kernels import REAL
from tests.support.row_kernels import WRONG as WRONG_ROWS

SRC = "def f(x, y):\n    return x * y + 1\n"
SAME_MEANING = "def f(x, y):\n    return y * x + 1\n"  # other text, same values (multiplication commutes)
WRONG = "def f(x, y):\n    return x * y - 1\n"
OTHER = "def f(x, y):\n    return x + y\n"


def fake_sampler(candidate_sources):
    """A stand-in for the model that proposes the given programs, in turn across rounds, for every source."""
    proposed = []

    def sample(sources, k=1, **_):
        encoded = [tk.encode(s) for s in sources]
        chosen = candidate_sources[len(proposed): len(proposed) + k]
        proposed.extend(chosen)
        return Candidates(encoded, [[compile_source(c) for c in chosen] for _ in sources])

    return sample


@pytest.fixture
def tiny_model():
    torch.manual_seed(0)
    return Seq2Seq(ModelConfig(d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ff=64)).eval()


def test_strict_rejects_other_text_and_falls_back(monkeypatch, tiny_model):
    monkeypatch.setattr(hybrid, "sample_candidates", fake_sampler([WRONG, SAME_MEANING]))
    r = hybrid.compile_batch([SRC], k=2, model=tiny_model)
    assert r.paths == ["traditional"] and r.canonical() == [compile_source(SRC).text()]
    assert r.stats["passed_tests"] >= 1 and r.stats["accepted"] == 0


def test_non_strict_accepts_what_passes_the_tests(monkeypatch, tiny_model):
    monkeypatch.setattr(hybrid, "sample_candidates", fake_sampler([WRONG, SAME_MEANING]))
    r = hybrid.compile_batch([SRC], k=2, strict=False, model=tiny_model)
    assert r.paths == ["neural"] and r.canonical() == [compile_source(SAME_MEANING).text()]
    assert r.stats["accepted_text_differs"] == 1 and r.stats["winning_candidate"] == [1]


def test_first_passing_candidate_wins(monkeypatch, tiny_model):
    monkeypatch.setattr(hybrid, "sample_candidates", fake_sampler([SRC]))
    r = hybrid.compile_batch([SRC, WRONG], k=4, model=tiny_model)
    assert r.paths == ["neural", "traditional"]  # the fake proposes SRC for WRONG too: rejected
    assert r.canonical() == [compile_source(SRC).text(), compile_source(WRONG).text()]
    assert r.stats["winning_candidate"][0] == 0


def test_check_pairs_tells_right_from_wrong():
    a, b, c = compile_source(SRC), compile_source(SAME_MEANING), compile_source(WRONG)
    assert hybrid.check_pairs([a, b, c], [a, a, a], 128, "cpu").tolist() == [True, True, False]


def test_check_pairs_on_row_kernels():
    """Rows of CHECK_ROW values: sum, mean, max and min of a row differ, a per-row result differs from a
    per-element one with the same values, and elementwise pairs in the same pass still compare."""
    def c(body):
        return compile_source(f"def f(x):\n    return {body}\n")

    softmax, naive = compile_source(REAL["softmax"][0]), compile_source(WRONG_ROWS["softmax_without_max"][0])
    total, mean, top, low = c("sum(x)"), c("mean(x)"), c("max(x)"), c("min(x)")
    spread = c("sum(x) + x * 0")  # the row's sum at every element: per element, not per row
    ew, ew2 = c("x + 1"), c("1 + x")
    got = hybrid.check_pairs([softmax, naive, total, mean, top, low, spread, ew, ew2, total],
                             [softmax, softmax, total, total, low, low, total, ew, ew, ew], 256, "cpu")
    assert got.tolist() == [True, False, True, False, False, True, False, True, True, False]
    assert hybrid.CHECK_ROW > 1


def test_row_kernels_strict_accepts_only_the_traditional_program(monkeypatch, tiny_model):
    softmax, naive = REAL["softmax"][0], WRONG_ROWS["softmax_without_max"][0]
    monkeypatch.setattr(hybrid, "sample_candidates", fake_sampler([naive, softmax]))
    r = hybrid.compile_batch([softmax], k=2, model=tiny_model)
    assert r.paths == ["neural"] and r.stats["winning_candidate"] == [1]
    assert r.stats["passed_tests"] == 1  # the softmax without max() fails on the rows' random inputs
    assert r.canonical() == [compile_source(softmax).text()]
    monkeypatch.setattr(hybrid, "sample_candidates", fake_sampler([softmax, softmax]))
    r = hybrid.compile_batch([naive], k=2, model=tiny_model)
    assert r.paths == ["traditional"] and r.canonical() == [compile_source(naive).text()]


def test_untrained_model_still_gives_the_traditional_programs(tiny_model):
    """A model that is useless still yields a correct hybrid: every program falls back."""
    sources = generate_batch(40, seed=41, max_chars=120) + [m for m, _ in mutate_batch(
        generate_batch(20, seed=42, max_chars=120), seed=43)]
    sources += [s for s, *_ in REAL.values()] + generate_batch(30, seed=44, max_chars=160, rows=1.0)
    sources += [m for m, _ in mutate_batch(generate_batch(20, seed=45, max_chars=160, rows=1.0), seed=46)]
    got = hybrid.compile_batch(sources, k=2, model=tiny_model)
    assert got.canonical() == compile_batch(sources, mode="serial").canonical()
    assert set(got.paths) <= {"traditional", "error", "neural"}


def hybrid_matches_traditional(sources):
    """Programs as the traditional compiler's, errors as the serial compiler's (kind, line and column)."""
    got = compile_batch(sources, mode="hybrid", k=4)
    want = compile_batch(sources, mode="traditional").canonical()
    serial = compile_batch(sources, mode="serial").canonical()
    assert got.canonical() == serial
    assert [g for g in got.canonical() if not g.startswith("error")] == [w for w in want if not w.startswith("error")]
    return got


def test_hybrid_with_the_shipped_model_is_correct_and_mostly_neural():
    valid = generate_batch(300, seed=51, max_chars=160)
    invalid = [m for m, _ in mutate_batch(generate_batch(100, seed=52, max_chars=160), seed=53)]
    got = hybrid_matches_traditional(valid + invalid)
    assert got.paths[: len(valid)].count("neural") >= 0.8 * len(valid)


def test_hybrid_on_row_kernels_is_correct_and_mostly_neural():
    valid = [s for s, *_ in REAL.values()] + generate_batch(150, seed=54, max_chars=160, rows=1.0)
    invalid = [m for m, _ in mutate_batch(generate_batch(60, seed=55, max_chars=160, rows=1.0), seed=56)]
    got = hybrid_matches_traditional(valid + invalid)
    assert got.paths[: len(valid)].count("neural") >= 0.8 * len(valid)


@pytest.mark.slow
def test_hybrid_sweep_10000():
    """The issue's sweep: 10,000 programs, every valid one correct, every invalid one the right error."""
    sources = generate_batch(7000, seed=61, max_chars=160)
    sources += [m for m, _ in mutate_batch(generate_batch(3000, seed=62, max_chars=160), seed=63)]
    for i in range(0, len(sources), 1000):
        hybrid_matches_traditional(sources[i: i + 1000])


def test_modes_through_compile_and_the_kernel_runs():
    import numpy as np

    k = compile(SRC, mode="hybrid", k=2)
    assert k(np.float32([2.0]), np.float32([3.0]))[0] == 7.0
    with pytest.raises(TypeError, match="takes no option"):
        compile_batch([SRC], mode="traditional", k=2)
    with pytest.raises(ValueError, match="between 1 and 1024"):
        compile_batch([SRC], mode="hybrid", k=0)


def test_an_absurd_k_or_tests_is_refused_before_any_work(monkeypatch):
    """k=100000 once allocated ~10 GB in one decode and died in the allocator."""
    from jupyter_gpuiter.compilers import traditional

    def must_not_run(*_, **__):
        raise AssertionError("the refusal must come before compiling, loading or decoding")

    monkeypatch.setattr(traditional, "compile_batch", must_not_run)
    monkeypatch.setattr(hybrid, "load_model", must_not_run)
    monkeypatch.setattr(hybrid, "sample_candidates", must_not_run)
    with pytest.raises(ValueError, match=r"between 1 and 1024, got 100,000: each candidate is decoded"):
        compile_batch([SRC], mode="hybrid", k=100_000)
    with pytest.raises(ValueError, match=r"tests must be between 1 and 1,048,576"):
        compile_batch([SRC], mode="hybrid", tests=10**9)
    with pytest.raises(TypeError, match="must be an int"):
        compile_batch([SRC], mode="hybrid", k=2.5)


def test_sampling_runs_in_bounded_rounds_and_stops_when_all_are_found(monkeypatch, tiny_model):
    """Past the greedy round, each sub-round decodes at most ROUND_PAIRS candidates; sources that found a
    program take no further samples."""
    calls = []

    def sample(sources, k=1, **_):
        calls.append((len(sources), k))
        proposal = SRC if len(calls) >= 3 else OTHER  # the third round finds SRC's program
        return Candidates([tk.encode(s) for s in sources], [[compile_source(proposal)] * k for _ in sources])

    monkeypatch.setattr(hybrid, "sample_candidates", sample)
    monkeypatch.setattr(hybrid, "ROUND_PAIRS", 4)
    r = hybrid.compile_batch([SRC, WRONG], k=1000, model=tiny_model)
    assert calls[:3] == [(2, 1), (2, 2), (2, 2)]  # greedy, then 4 // 2 samples per open source
    assert all(n * k <= 4 for n, k in calls[1:])
    assert r.paths == ["neural", "traditional"] and r.stats["winning_candidate"][0] == 3
    assert calls[3:] and all(n == 1 for n, _ in calls[3:])  # only WRONG kept sampling
    assert sum(k for _, k in calls) == 1000 and r.stats["candidates"] == 2 * 5 + 1 * 995


def test_check_pairs_in_bounded_vm_passes(monkeypatch):
    from jupyter_gpuiter.runtime import vm

    a, b, c = compile_source(SRC), compile_source(SAME_MEANING), compile_source(WRONG)
    sizes = []
    run = vm.run

    def recording(batch, x, dtype, **kw):
        sizes.append(len(batch) * x.shape[1])
        return run(batch, x, dtype, **kw)

    monkeypatch.setattr(vm, "run", recording)
    monkeypatch.setattr(hybrid, "CHECK_VALUES", 256)
    got = hybrid.check_pairs([a, b, c, c, b, a, a], [a, a, a, b, c, c, b], 128, "cpu").tolist()
    assert got == [True, True, False, False, False, False, True]
    assert max(sizes) <= 256 and len(sizes) == 8  # 4 passes of 2 candidates, each with its references


def test_where_the_compilers_disagree_the_serial_verdict_stands(monkeypatch, tiny_model):
    """A source the traditional compiler wrongly rejects (or states with another column) gets the serial
    compiler's result: its error, or its program as the reference for the candidates."""
    from jupyter_gpuiter.compilers import traditional
    from jupyter_gpuiter.compilers.result import BatchResult
    from jupyter_gpuiter.lang.errors import CompileError

    def wrong(sources, device=None):
        return BatchResult([CompileError("syntax", 1, 1, "made up", s) for s in sources], "traditional")

    monkeypatch.setattr(traditional, "compile_batch", wrong)
    monkeypatch.setattr(hybrid, "sample_candidates", fake_sampler([SRC, SRC]))
    bad = "def f(x, y):\n    return 1 +\n"
    r = hybrid.compile_batch([SRC, WRONG, bad], k=2, model=tiny_model)
    assert r.canonical() == compile_batch([SRC, WRONG, bad], mode="serial").canonical()
    assert r.paths == ["neural", "serial", "error"]
    assert r.batch.error[2].tolist()[1:] == [2, 15]  # the device batch has the serial column too
