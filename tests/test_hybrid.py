"""The hybrid compiler: neural candidates verified against traditional, with a strict fallback."""

import pytest
import torch

from jupyter_gpuiter import compile, compile_batch
from jupyter_gpuiter.compilers import hybrid
from jupyter_gpuiter.compilers.neural import Candidates
from jupyter_gpuiter.compilers.neural import tokens as tk
from jupyter_gpuiter.compilers.neural.model import ModelConfig, Seq2Seq
from jupyter_gpuiter.compilers.serial import compile_source
from jupyter_gpuiter.lang.generate import generate_batch, mutate_batch

SRC = "def f(x, y):\n    return x * y + 1\n"
SAME_MEANING = "def f(x, y):\n    return y * x + 1\n"  # other text, same values (multiplication commutes)
WRONG = "def f(x, y):\n    return x * y - 1\n"


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


def test_untrained_model_still_gives_the_traditional_programs(tiny_model):
    """A model that is useless still yields a correct hybrid: every program falls back."""
    sources = generate_batch(40, seed=41, max_chars=120) + [m for m, _ in mutate_batch(
        generate_batch(20, seed=42, max_chars=120), seed=43)]
    got = hybrid.compile_batch(sources, k=2, model=tiny_model)
    assert got.canonical() == compile_batch(sources, mode="traditional").canonical()
    assert set(got.paths) <= {"traditional", "error", "neural"}


def hybrid_matches_traditional(sources):
    got = compile_batch(sources, mode="hybrid", k=4)
    want = compile_batch(sources, mode="traditional")
    assert got.canonical() == want.canonical()
    return got


def test_hybrid_with_the_shipped_model_is_correct_and_mostly_neural():
    valid = generate_batch(300, seed=51, max_chars=160)
    invalid = [m for m, _ in mutate_batch(generate_batch(100, seed=52, max_chars=160), seed=53)]
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
    with pytest.raises(ValueError, match="k >= 1"):
        compile_batch([SRC], mode="hybrid", k=0)
