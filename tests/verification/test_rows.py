"""Row kernels verified on pools of rows (verification/rows.py): real kernels pass, subtly wrong ones are caught
with a shrunk, in-domain row on which the candidate really disagrees with the reference (re-evaluated on the
host by the reference evaluator), the bound counts rows, per-row and per-element results, callables on rows,
row_lengths checked and cached by."""

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import jupyter_gpuiter as gi
from jupyter_gpuiter.runtime import reference as host
from jupyter_gpuiter.verification import api
from jupyter_gpuiter.verification.compare import default_tolerances
from jupyter_gpuiter.verification.pools import (
    DEFAULT_ROW_LENGTHS,
    Domain,
    InputPool,
    as_row_lengths,
    domain_edges,
    make_rows,
    split_rows,
)
from jupyter_gpuiter.verification.verdict import Counterexample, format_row
from tests.support.row_kernels import REAL, WRONG

SOFTMAX = REAL["softmax"][0]
LOGSUMEXP = REAL["logsumexp"][0]


def domain_of(name: str) -> dict:
    """The kernel's own domains, else every parameter in [-100, 100] (float32 overflows x * x beyond ~1e19)."""
    src, _, dom = REAL[name]
    return dom or dict.fromkeys(gi.compile(src, mode="serial").params, "-100:100")


def fails_on_host(candidate: str, numpy_ref, cx: Counterexample, dtype: str = "float32") -> bool:
    """Whether the candidate, evaluated by the reference evaluator in `dtype` on the counterexample's row,
    disagrees with the NumPy float64 reference rounded to `dtype` (compare.py's rule, its default tolerances)."""
    program = gi.compile(candidate, mode="serial").program
    args = [cx.inputs[p][None, :] for p in program.param_names]
    got = host.evaluate(program, args, dtype).astype(np.float64).reshape(-1)
    with np.errstate(all="ignore"):
        want = np.asarray(numpy_ref(*[a.astype(np.float64) for a in args]), dtype=np.float64).astype(dtype)
    want = want.astype(np.float64).reshape(-1)
    rtol, atol = default_tolerances(dtype)
    with np.errstate(invalid="ignore"):
        close = (got == want) | (np.isnan(got) & np.isnan(want)) | (
            np.isfinite(got) & np.isfinite(want) & (np.abs(got - want) <= atol + rtol * np.abs(want)))
    return not close.all()


# --- real kernels pass ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(REAL))
def test_real_row_kernels_verify_against_numpy_in_float64(name):
    src, fn, _ = REAL[name]
    v = gi.verify(src, fn, dtype="float64", domain=domain_of(name))
    assert v.passed, (v, v.counterexample)
    assert v.tests_run == 6905 and v.row_lengths == DEFAULT_ROW_LENGTHS and "6,905 rows" in v.sentence


@pytest.mark.parametrize("name", sorted(set(REAL) - {"layernorm"}))
def test_real_row_kernels_in_float32_verify_against_numpy_and_their_float64_kernels(name):
    src, fn, _ = REAL[name]
    assert gi.verify(src, fn, domain=domain_of(name)).passed
    assert gi.verify(src, gi.current_session().reference(src), domain=domain_of(name), tests=3000).passed


def test_a_float32_layernorm_is_caught_on_near_constant_rows_where_float32_cancels():
    # near-constant rows (a special row kind) put x - mean(x) at the mercy of float32 rounding: the verifier
    # reports a real difference from the float64 truth, on a short near-constant row
    src, fn, _ = REAL["layernorm"]
    v = gi.verify(src, fn, domain=domain_of("layernorm"))
    assert not v.passed
    cx = v.counterexample
    assert cx.row_length <= 3 and fails_on_host(src, fn, cx)
    assert gi.verify(src, fn, domain=domain_of("layernorm"), rtol=0.05, atol=0.05).passed


# --- wrong kernels are caught ---------------------------------------------------------------------------------

@pytest.mark.parametrize("row_lengths", [None, (7, 32, 128)])
@pytest.mark.parametrize("wrong", sorted(WRONG))
def test_subtly_wrong_kernels_are_caught_with_a_shrunk_in_domain_row_that_really_fails(wrong, row_lengths):
    src, real = WRONG[wrong]
    real_src, fn, _ = REAL[real]
    dom = domain_of(real)
    for reference in (fn, real_src):
        v = gi.verify(src, reference, domain=dom, row_lengths=row_lengths)
        assert not v.passed and v.failures > 0
        cx = v.counterexample
        assert cx.is_row and cx.found_length in (row_lengths or DEFAULT_ROW_LENGTHS)
        assert 1 <= cx.row_length <= min(3, cx.found_length)  # shrunk
        assert set(cx.inputs) == set(gi.compile(src, mode="serial").params)
        for name, row in cx.inputs.items():
            assert isinstance(row, np.ndarray) and row.shape == (cx.row_length,)
            lo, hi = domain_edges(Domain(*map(float, dom[name].split(":"))), "float32")
            assert ((row >= lo) & (row <= hi)).all(), (name, row)
            assert np.array_equal(row.astype(np.float32).astype(np.float64), row)  # float32 values
        assert fails_on_host(src, fn, cx), cx
        per_row = gi.compile(src, mode="serial").program.returns_per_row()
        assert (cx.position is None) == per_row
        assert (cx.got_row is None) == per_row


def test_a_row_counterexample_shows_length_position_and_neighbours():
    v = gi.verify(WRONG["softmax_without_max"][0], SOFTMAX, domain={"x": (-100, 100)}, row_lengths=[7])
    cx = v.counterexample
    text = str(cx)
    assert f"row of {cx.row_length} element" in text and f"element {cx.position} fails" in text
    assert f"row {cx.row_index} of the 7-element rows" in text
    assert format_row(np.arange(20.0), at=10) == "[… 7 more, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, … 6 more]"
    assert format_row(np.arange(20.0)) == "[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, … 13 more]"
    assert format_row([1.5, 2.0]) == "[1.5, 2.0]"


def test_a_row_that_fails_only_when_long_stays_long_enough():
    # wrong only on rows of at least 5 elements: the shrunk row keeps 5
    bad = "def f(x):\n    return x / sum(1.0) if sum(1.0) < 5 else x\n"
    v = gi.verify(bad, "def f(x):\n    return x / sum(1.0)\n", domain={"x": (-10, 10)}, row_lengths=[1, 33])
    cx = v.counterexample
    assert not v.passed and cx.row_length == 5 and cx.found_length == 33
    assert all(x in (0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5) for x in cx.inputs["x"]), cx


# --- pools of rows --------------------------------------------------------------------------------------------

def group(pool_x: torch.Tensor, n: int) -> np.ndarray:
    return pool_x.to(torch.float64).numpy().reshape(pool_x.shape[0], -1, n)


@pytest.mark.parametrize("n", [2, 3, 33, 1000])
def test_pools_hold_constant_one_extreme_and_edge_rows_inside_the_domain(n):
    pool = InputPool("cpu")
    x = group(pool.get_rows(1, 600, n, "float32", [Domain(-5, 5)], seed=3), n)[0]
    assert ((x >= -5) & (x <= 5)).all()
    constant = (x == x[:, :1]).all(axis=1)
    edges = np.isin(x, [-5.0, 5.0]).all(axis=1) & ~constant
    at_edge = np.isin(x, [-5.0, 5.0])
    one_extreme = (at_edge.sum(axis=1) == 1) & (np.abs(np.where(at_edge, 0, x)) <= 0.5 + 1e-6).all(axis=1)
    spread = x.max(axis=1) - x.min(axis=1)
    near_constant = ~constant & (spread <= np.abs(x).max(axis=1) * 2.0 ** -8)
    assert constant.any() and edges.any() and one_extreme.any() and near_constant.any()
    assert (constant | edges | one_extreme).mean() < 0.2  # most rows are ordinary


def test_rows_without_a_domain_keep_ordinary_rows_finite_and_put_specials_in_special_rows():
    x = group(make_rows(1, 500, 128, seed=0), 128)[0]
    finite = np.isfinite(x).all(axis=1)
    assert 0.01 < (~finite).mean() < 0.1  # inf and nan live in the "specials" rows only
    assert np.isnan(x).any() and np.isinf(x).any()
    assert (np.abs(x[finite]) == np.finfo(np.float32).max).any()  # the extremes, edges of the float32 range


def test_row_pools_are_seeded_per_length_and_parameter():
    def same(a, b):  # bit for bit, so that nan == nan
        return torch.equal(a.view(torch.int32), b.view(torch.int32))

    a = make_rows(2, 50, 7, domains=[None, Domain(0, 1)], seed=1)
    assert same(a, make_rows(2, 50, 7, domains=[None, Domain(0, 1)], seed=1))
    assert not same(a, make_rows(2, 50, 7, domains=[None, Domain(0, 1)], seed=2))
    assert same(a[0], make_rows(2, 50, 7, domains=[None, None], seed=1)[0])  # parameter 1's domain aside
    assert not same(a[0, :7], make_rows(1, 50, 8, seed=1)[0, :7])  # another length, other rows


def test_tests_are_split_equally_over_the_lengths_shortest_first():
    assert split_rows(6905, DEFAULT_ROW_LENGTHS) == [628] * 8 + [627] * 3
    assert split_rows(5, (1, 2, 3, 7, 9, 11)) == [1, 1, 1, 1, 1, 0]
    for tests in (1, 10, 11, 12, 999):
        counts = split_rows(tests, DEFAULT_ROW_LENGTHS)
        assert sum(counts) == tests and max(counts) - min(counts) <= 1 and counts == sorted(counts, reverse=True)


# --- what a test is -------------------------------------------------------------------------------------------

def test_the_bound_counts_rows():
    v = gi.verify(SOFTMAX, SOFTMAX, tests=2000, delta=1e-2, row_lengths=[3, 64])
    assert v.passed and v.tests_run == 2000 and v.row_lengths == (3, 64)
    assert v.epsilon == pytest.approx(1 - 1e-2 ** (1 / 2000))
    assert v.sentence.endswith("over 2,000 rows")
    bad = gi.verify(WRONG["logsumexp_max_twice"][0], LOGSUMEXP, tests=2000, row_lengths=[3, 64])
    assert not bad.passed and bad.sentence.startswith("failed ") and bad.sentence.endswith("rows")
    assert 0 < bad.failures <= bad.tests_run <= 2000


def test_an_elementwise_candidate_runs_per_element_of_the_rows():
    v = gi.verify("def f(x):\n    return exp(x)\n", np.exp, row_lengths=[5, 40], tests=500)
    assert v.passed and v.tests_run == 500 and v.row_lengths == (5, 40)
    # without row_lengths an elementwise pair is verified exactly as before: values, not rows
    plain = gi.verify("def f(x):\n    return exp(x)\n", np.exp, tests=500)
    assert plain.passed and plain.row_lengths is None and plain.sentence.endswith("500 tests")
    bad = gi.verify("def f(x):\n    return x * 2\n", lambda x: 2 * x + (x > 3), row_lengths=[5],
                    domain={"x": (-10, 10)})
    assert not bad.passed and bad.counterexample.is_row and bad.counterexample.row_length == 1


def test_an_elementwise_candidate_against_a_per_element_row_reference():
    # sum(x) - sum(x) + x is x, per element: an elementwise x matches it; x + 1 does not
    ref = "def f(x):\n    return x + (sum(x) - sum(x))\n"
    assert gi.verify("def f(x):\n    return x\n", ref, domain={"x": (-5, 5)}).passed
    v = gi.verify("def f(x):\n    return x + 1\n", ref, domain={"x": (-5, 5)})
    assert not v.passed and v.counterexample.row_length == 1


# --- per-row and per-element results --------------------------------------------------------------------------

def test_a_per_row_result_against_a_per_element_reference_fails_with_a_reason():
    v = gi.verify(LOGSUMEXP, SOFTMAX)
    assert not v.passed and v.tests_run == 0 and v.counterexample is None
    assert v.reason == "the candidate returns one value per row but the reference returns one value per element"
    assert v.sentence == f"not comparable: {v.reason}"
    w = gi.verify("def f(x):\n    return exp(x)\n", LOGSUMEXP)
    assert not w.passed and "returns one value per element but the reference returns one value per row" in w.reason
    u = gi.verify(SOFTMAX, lambda x: x.max(-1))  # a callable's kind is read from its result
    assert not u.passed and "reference returns one value per row" in u.reason


def test_verify_batch_mixes_right_wrong_broken_and_mismatched_row_candidates():
    cands = [SOFTMAX, WRONG["softmax_without_max"][0], "def softmax(x):\n    return q\n", LOGSUMEXP,
             SOFTMAX.replace("e = ", "e  =  "), REAL["log_softmax"][0]]
    vs = gi.verify_batch(cands, REAL["softmax"][1], domain={"x": (-100, 100)}, tests=3000)
    assert [v.passed for v in vs] == [True, False, False, False, True, False]
    assert vs[2].error is not None and vs[3].reason and vs[5].counterexample.is_row
    assert vs[0].tests_run == vs[4].tests_run == 3000 and vs[0].epsilon == vs[4].epsilon
    assert fails_on_host(cands[1], REAL["softmax"][1], vs[1].counterexample)


# --- callables on rows ----------------------------------------------------------------------------------------

def test_a_callable_reference_receives_float64_rows_and_may_return_per_row_or_per_element():
    shapes = []

    def ref(x):
        shapes.append((x.dtype, x.shape))
        return np.log(np.exp(x - x.max(-1, keepdims=True)).sum(-1)) + x.max(-1)

    v = gi.verify(LOGSUMEXP, ref, row_lengths=[4, 9], tests=100, domain={"x": (-50, 50)})
    assert v.passed
    assert shapes == [(np.float64, (50, 4)), (np.float64, (50, 9))]
    keepdims = gi.verify(LOGSUMEXP, lambda x: np.log(np.exp(x).sum(-1, keepdims=True)), row_lengths=[4],
                         domain={"x": (-20, 20)})
    assert keepdims.passed  # [tests, 1] is one value per row too


@pytest.mark.parametrize(("returns", "match"), [
    (lambda x: x[:, :1].repeat(3, 1), r"shape \(\d+, 3\) for \d+ rows of 4 elements"),
    (lambda x: None, "returned None"),
    (lambda x: x.astype(complex), "complex"),
    (lambda x: x.max(-1) if x.shape[1] == 4 else x, "one value per row for rows of 4 elements but one per element"),
])
def test_a_callable_reference_with_a_bad_result_is_a_clear_value_error(returns, match):
    with pytest.raises(ValueError, match=match):
        gi.verify(SOFTMAX, returns, row_lengths=[4, 8], tests=20)


# --- options --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("value", "match"), [
    (0, ">= 1"), (-3, ">= 1"), ([4, 0], ">= 1"), (2.5, "whole numbers"), ([4, 3.0], "whole numbers"),
    ("8", "whole numbers"), ([], "at least one"), (True, "whole numbers"), (1 << 30, "at most"),
])
def test_bad_row_lengths_are_a_clear_value_error(value, match):
    with pytest.raises(ValueError, match=match):
        as_row_lengths(value)
    with pytest.raises(ValueError, match=match):
        gi.verify(SOFTMAX, SOFTMAX, row_lengths=value)
    assert gi.verify(SOFTMAX, SOFTMAX, row_lengths=[3], tests=30).passed  # nothing lost


def test_row_lengths_are_sorted_and_deduplicated_and_one_number_is_one_length():
    assert as_row_lengths([128, 3, 3, np.int64(7)]) == (3, 7, 128)
    assert as_row_lengths(5) == (5,)
    assert as_row_lengths(None) == DEFAULT_ROW_LENGTHS


def test_exhaustive_and_rows_do_not_mix():
    with pytest.raises(ValueError, match="exhaustive"):
        gi.verify(SOFTMAX, SOFTMAX, dtype="float16", exhaustive=True)
    with pytest.raises(ValueError, match="exhaustive"):
        gi.verify("def f(x):\n    return x\n", "def f(x):\n    return x\n", dtype="float16", exhaustive=True,
                  row_lengths=[4])


def test_a_row_kernel_without_parameters_is_a_clear_value_error():
    const = "def f():\n    return sum(1.0)\n"
    with pytest.raises(ValueError, match="takes none"):
        gi.verify(const, const)
    with pytest.raises(ValueError, match="takes none"):
        gi.verify("def f():\n    return 1.0\n", "def f():\n    return 1.0\n", row_lengths=[3])


def test_too_many_rows_for_memory_is_a_clear_value_error():
    sess = gi.Session("cpu")
    sess.pool.max_bytes = 1 << 20
    with pytest.raises(ValueError, match="N too large for memory: 100,000 rows"):
        sess.verify(SOFTMAX, SOFTMAX, tests=100_000)
    assert sess.verify(SOFTMAX, SOFTMAX, tests=100, row_lengths=[8]).passed


def test_a_trivial_row_reference_is_flagged():
    v = gi.verify(SOFTMAX, "def f(x):\n    return x * 0 + (max(x) - max(x))\n", domain={"x": (-5, 5)})
    assert not v.passed and "zero" in v.trivial
    # softmax of one-element rows is always 1: on those rows alone the reference says nothing
    assert gi.verify(SOFTMAX, SOFTMAX, row_lengths=[1]).trivial


# --- evaluator paths ------------------------------------------------------------------------------------------

@pytest.fixture(params=["fused", "torch-vm"])
def path(request, monkeypatch):
    if request.param != "fused":
        monkeypatch.setattr(api, "FUSED_DEVICES", ())
    return request.param


def test_every_evaluator_path_gives_the_same_verdicts(path):
    cands = [SOFTMAX, WRONG["softmax_without_max"][0], REAL["log_softmax"][0]]
    sess = gi.Session("cpu")
    vs = sess.verify_batch(cands, REAL["softmax"][1], domain={"x": (-100, 100)}, tests=1500, row_lengths=[2, 7, 130])
    assert [v.passed for v in vs] == [True, False, False]
    assert vs[0].tests_run == 1500 and vs[0].max_abs_err <= 1e-5
    assert fails_on_host(cands[1], REAL["softmax"][1], vs[1].counterexample)
    assert math.isfinite(vs[2].max_abs_err)


@pytest.mark.parametrize("path_", ["fused", "torch-vm"])
def test_blocks_of_rows_give_the_verdicts_of_one_pass(path_, monkeypatch):
    cands = [SOFTMAX, WRONG["softmax_without_max"][0]]
    options = {"domain": {"x": (-100, 100)}, "tests": 900, "row_lengths": [3, 40]}
    if path_ != "fused":
        monkeypatch.setattr(api, "FUSED_DEVICES", ())
    whole = gi.Session("cpu").verify_batch(cands, SOFTMAX, **options)
    monkeypatch.setattr(api, "BLOCK", 64)  # a few rows a block (fused): 21 rows of 3, 1 row of 40
    monkeypatch.setattr(api, "TORCH_ELEMENTS", 128)  # the same for the torch VM over two candidates
    blocks = gi.Session("cpu").verify_batch(cands, SOFTMAX, **options)
    assert [v.passed for v in blocks] == [v.passed for v in whole] == [True, False]
    assert blocks[0].tests_run == whole[0].tests_run == 900
    a, b = blocks[1].counterexample, whole[1].counterexample
    assert (a.row_index, a.found_length) == (b.row_index, b.found_length)
    assert blocks[1].tests_run <= whole[1].tests_run  # both stop early, blocks at least as soon


def test_progress_counts_rows():
    seen = []
    gi.current_session().verify(SOFTMAX, SOFTMAX, tests=300, row_lengths=[2, 5, 9],
                                progress=lambda done, total: seen.append((done, total)))
    assert seen == [(100, 300), (200, 300), (300, 300)]


MUTATIONS = [("sum(", "mean("), ("mean(", "sum("), ("max(", "min("), ("exp(", "expm1("), ("1e-5", "1e-2"),
             ("1e-6", "1e-1"), ("x - ", "x + "), ("** 2", "** 3"), ("log(", "log1p("), ("* g", "* g * 1.001"),
             ("p * ", "q * ")]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(REAL)), st.sampled_from(MUTATIONS), st.integers(0, 3),
       st.lists(st.sampled_from([1, 2, 3, 7, 31, 33, 128]), min_size=1, max_size=3, unique=True))
def test_every_counterexample_of_a_mutated_kernel_is_in_domain_shrunk_and_really_fails(name, mutation, seed, lengths):
    src, fn, _ = REAL[name]
    assume(mutation[0] in src)
    mutated = src.replace(*mutation)
    v = gi.verify(mutated, fn, domain=domain_of(name), seed=seed, row_lengths=lengths, tests=300)
    if v.passed or v.error is not None or v.counterexample is None:
        return
    cx = v.counterexample
    assert cx.found_length in lengths and 1 <= cx.row_length <= cx.found_length
    for p, row in cx.inputs.items():
        lo, hi = domain_edges(Domain(*map(float, domain_of(name)[p].split(":"))), "float32")
        assert ((row >= lo) & (row <= hi)).all()
    assert fails_on_host(mutated, fn, cx), (mutated, cx)


def test_long_rows_count_the_evaluators_registers_against_the_budget():
    # a tile holds whole rows: a 2^20-element row of a 30-instruction kernel keeps 31 registers of 2^20 a thread,
    # far more than its inputs and outputs (8 MiB): refused with the reason, before anything is allocated
    sess = gi.Session("cpu")
    sess.pool.max_bytes = 64 << 20
    long_kernel = "def f(x):\n    y = x\n" + "".join(f"    y = y * 1.0{i} + {i}.5\n" for i in range(15)) + \
        "    return y / sum(y)\n"
    with pytest.raises(ValueError, match=r"evaluator registers \(\d+ instructions\)"):
        sess.verify(long_kernel, long_kernel, tests=1, row_lengths=[1 << 20])
    assert sess.verify(long_kernel, long_kernel, tests=50, row_lengths=[64]).passed
