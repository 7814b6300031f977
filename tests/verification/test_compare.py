"""On-device comparison: tolerances, nan/inf semantics, error reductions, ULP distance, trivial references."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuiter.verification import compare as compare_module
from jupyter_gpuiter.verification.compare import compare, default_tolerances, trivial_reference, ulp_distance

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INF, NAN = math.inf, math.nan


def t(values, dtype=torch.float32):
    return torch.tensor(values, dtype=torch.float64).to(dtype)


def step(x: torch.Tensor, k: int, toward=INF) -> torch.Tensor:
    """x moved k representable values toward `toward` (torch.nextafter, independent of compare's bit trick)."""
    target = torch.full_like(x, toward)
    for _ in range(k):
        x = torch.nextafter(x, target)
    return x


def passes_assert_close(got, exp, **kw) -> bool:
    try:
        torch.testing.assert_close(got, exp, **kw)
        return True
    except AssertionError:
        return False


# --------------------------------------------------------------------------------------------
# tolerances


def test_default_tolerance_table():
    assert default_tolerances(torch.float16) == (1e-3, 1e-5)
    assert default_tolerances("bfloat16") == (1.6e-2, 1e-5)
    assert default_tolerances("float32") == (1.3e-6, 1e-5)
    assert default_tolerances(torch.float64) == (1e-7, 1e-7)
    assert default_tolerances("bool") == (0.0, 0.0)
    from torch.testing._comparison import default_tolerances as torch_defaults  # private; cross-check only

    for dt in DTYPES:
        assert default_tolerances(dt) == torch_defaults(dt)
    with pytest.raises(ValueError):
        default_tolerances("int8")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exp", [1.0, -3.0, 100.0, 0.0, 7.5e-3])
def test_tolerance_boundary_agrees_with_assert_close(dtype, exp):
    """Candidates a few ULPs either side of exp ± (atol + rtol|exp|): same verdict as assert_close.

    compare() evaluates |got - exp| <= atol + rtol|exp| in float64, so it agrees exactly with
    assert_close on the float64 upcast with the dtype's default tolerances. assert_close on the
    native dtype evaluates the bound in that dtype (float16 rounds atol=1e-5 to 1.0014e-5), so
    there the verdicts must agree except within one ULP (of the bound) of the boundary.
    """
    rtol, atol = default_tolerances(dtype)
    e = t([exp], dtype)
    allowed = atol + rtol * abs(float(e))
    a = t([allowed], dtype)
    spacing = float(step(a, 1).double() - a.double())
    verdicts, native = [], []
    for edge in (float(e) + allowed, float(e) - allowed):
        b = t([edge], dtype)
        for k in range(4):
            for toward in (INF, -INF):
                g = step(b, k, toward)
                ours = bool(compare(g, e).ok[0, 0])
                assert ours == passes_assert_close(g.double(), e.double(), rtol=rtol, atol=atol), float(g)
                if abs(abs(float(g) - float(e)) - allowed) > spacing:
                    assert ours == passes_assert_close(g, e), (float(g), float(e))
                    native.append(ours)
                verdicts.append(ours)
    assert True in verdicts and False in verdicts  # the probe straddles the boundary
    assert True in native and False in native  # and so do the points checked against native assert_close


@pytest.mark.parametrize("dtype", DTYPES)
def test_explicit_tolerances(dtype):
    e = t([1.0, 2.0], dtype)
    g = step(e, 1)
    assert bool(compare(g, e).ok.all())  # one ulp is within the defaults
    c = compare(g, e, rtol=0.0, atol=0.0)
    assert not bool(c.ok.any()) and (c.rtol, c.atol) == (0.0, 0.0)
    c = compare(g, e, rtol=0.0)  # atol keeps its default
    assert c.atol == default_tolerances(dtype)[1]
    with pytest.raises(ValueError, match="non-negative"):
        compare(g, e, rtol=-1.0)
    with pytest.raises(ValueError, match="non-negative"):
        compare(g, e, atol=NAN)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(-1e6, 1e6),
    st.floats(-1e6, 1e6),
    st.floats(0, 0.5),
    st.floats(0, 10),
)
def test_closeness_matches_isclose_in_float64(a, b, rtol, atol):
    got, exp = t([a], torch.float64), t([b], torch.float64)
    ours = bool(compare(got, exp, rtol=rtol, atol=atol).ok[0, 0])
    assert ours == bool(torch.isclose(got, exp, rtol=rtol, atol=atol)[0])


# --------------------------------------------------------------------------------------------
# nan / inf / bool semantics


def test_nan_and_inf_semantics():
    cases = [  # (got, expected, ok)
        (NAN, NAN, True),
        (NAN, 1.0, False),
        (1.0, NAN, False),
        (NAN, INF, False),
        (INF, NAN, False),
        (INF, INF, True),
        (-INF, -INF, True),
        (INF, -INF, False),
        (3.4e38, INF, False),  # largest float32 is not infinity
        (INF, 3.4e38, False),
        (0.0, -0.0, True),
        (1.0, 1.0, True),
    ]
    got = t([c[0] for c in cases])
    exp = t([c[1] for c in cases])
    ok = compare(got, exp, rtol=1.0, atol=1.0).ok[0].tolist()  # loose tolerances must not rescue specials
    assert ok == [c[2] for c in cases]


def test_bool_outputs_compare_exactly():
    got = torch.tensor([[True, False, True], [True, True, True]])
    exp = torch.tensor([True, False, False])
    c = compare(got, exp, rtol=0.5, atol=0.5)
    assert c.ok.tolist() == [[True, True, False], [True, False, False]]
    assert c.dtype is torch.bool and (c.rtol, c.atol) == (0.0, 0.0)
    assert c.failures.tolist() == [1, 2] and c.max_abs_err.tolist() == [1.0, 1.0]
    # bool candidate against a float reference (True == 1.0), and dtype="bool" on floats
    assert compare(torch.tensor([True, False]), t([1.0, 0.5])).ok.tolist() == [[True, False]]
    assert compare(t([1.0, 1.0 + 1e-7]), t([1.0, 1.0]), dtype="bool").ok.tolist() == [[True, False]]


# --------------------------------------------------------------------------------------------
# shapes and reductions


def test_shapes_and_broadcast():
    e = t([1.0, 2.0, 3.0])
    assert compare(e, e).ok.shape == (1, 3)
    c = compare(torch.stack([e, e + 1, e]), e)
    assert c.ok.shape == (3, 3) and c.failures.tolist() == [0, 3, 0]
    assert c.passed.tolist() == [True, False, True] and c.batch_size == 3
    c = compare(torch.stack([e, e + 1]), torch.stack([e + 1, e + 1]))
    assert c.failures.tolist() == [3, 0]
    assert compare(e, torch.stack([e, e + 1])).failures.tolist() == [0, 3]  # one candidate, two rows
    with pytest.raises(ValueError, match="3 values per candidate but expected has 2"):
        compare(e, e[:2])
    with pytest.raises(ValueError, match="2 candidates but expected has 3 rows"):
        compare(torch.stack([e, e]), torch.stack([e, e, e]))
    with pytest.raises(ValueError, match=r"\[N\] or \[B, N\]"):
        compare(e.reshape(1, 1, 3), e)
    empty = compare(torch.zeros(2, 0), torch.zeros(0))
    assert empty.failures.tolist() == [0, 0] and empty.first_failure.tolist() == [-1, -1]
    assert empty.max_ulp_err.tolist() == [0.0, 0.0]


def test_failures_and_first_failure():
    e = t([0.0] * 10)
    got = e.repeat(3, 1)
    got[1, 4] = 1.0
    got[1, 7] = NAN
    got[2, 0] = -INF
    c = compare(got, e)
    assert c.failures.tolist() == [0, 2, 1]
    assert c.first_failure.tolist() == [-1, 4, 0]
    assert c.failures.dtype == torch.int64 and c.first_failure.dtype == torch.int64


def test_abs_and_rel_errors_over_finite_pairs():
    exp = t([1.0, -4.0, 0.0, 1e-3, NAN, INF, 2.0], torch.float64)
    got = t([1.5, -4.5, 0.25, 2e-3, 5.0, 1.0, NAN], torch.float64)
    c = compare(got, exp)
    # finite pairs: errors 0.5, 0.5, 0.25 (exp 0: absolute only), 1e-3 (relative 1.0)
    assert c.max_abs_err.tolist() == [0.5]
    assert c.max_rel_err.tolist() == [pytest.approx(1.0)]
    assert c.failures.tolist() == [7]
    clean = compare(t([1.0, 2.0]), t([1.0, 2.0]))
    assert clean.max_abs_err.tolist() == [0.0] and clean.max_rel_err.tolist() == [0.0]
    assert c.max_abs_err.dtype == torch.float64


# --------------------------------------------------------------------------------------------
# ULP distance


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("base", [1.0, -1.0, 0.0, -0.0, 1000.0, -2.5e-3])
def test_ulp_error_exact_on_neighbours(dtype, base):
    b = t([base], dtype)
    for k in (0, 1, 2, 5, 37):
        for toward in (INF, -INF):
            g = step(b, k, toward)
            c = compare(g, b, rtol=0.0, atol=0.0)
            assert c.max_ulp_err.tolist() == [float(k)], (dtype, base, k, toward)
            assert ulp_distance(b, g).tolist() == [float(k)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_ulp_across_zero_and_at_the_ends(dtype):
    fi = torch.finfo(dtype)
    sub = step(t([0.0], dtype), 1)
    assert ulp_distance(sub, -sub).item() == 2.0
    assert ulp_distance(t([0.0], dtype), t([-0.0], dtype)).item() == 0.0
    assert ulp_distance(-sub, t([0.0], dtype)).item() == 1.0
    top = t([fi.max], dtype)
    assert ulp_distance(top, t([INF], dtype)).item() == 1.0
    assert ulp_distance(step(top, 1, -INF), top).item() == 1.0
    assert ulp_distance(t([fi.tiny], dtype), step(t([fi.tiny], dtype), 1, -INF)).item() == 1.0
    span = ulp_distance(-top, top).item()
    width = {torch.float16: 16, torch.bfloat16: 16, torch.float32: 32, torch.float64: 64}[dtype]
    exponent_bits = {torch.float16: 5, torch.bfloat16: 8, torch.float32: 8, torch.float64: 11}[dtype]
    want = 2 * ((2**exponent_bits - 1) * 2 ** (width - 1 - exponent_bits) - 1)  # 2 x bits of +max
    assert span == pytest.approx(want, rel=1e-15)


def test_ulp_error_is_measured_in_the_kernel_dtype():
    exp = t([1.0], torch.float64)
    got = t([1.0 + 1e-12], torch.float64)
    assert compare(got, exp, dtype="float32").max_ulp_err.tolist() == [0.0]  # same float32
    assert compare(got, exp).max_ulp_err.tolist() == [4504.0]  # float64 ULPs: 1e-12 / 2^-52 rounded
    one_up = t([1.0 + 2.0**-23], torch.float64)
    assert compare(one_up, exp, dtype="float32").max_ulp_err.tolist() == [1.0]
    # non-finite pairs do not count
    assert compare(t([NAN, INF, 1.0]), t([1.0, 5.0, 1.0])).max_ulp_err.tolist() == [0.0]


def test_compare_counts_to_the_first_failing_tile_like_the_fused_evaluator():
    want = torch.zeros(5000)
    got = torch.zeros(3, 5000)
    got[1, [1500, 1600, 4000]] = 1.0  # failures in tile 1 (and one later)
    got[2, 4999] = 1.0  # in the last, partial tile
    c = compare(got, want, tile=1024)
    assert c.failures.tolist() == [0, 2, 1] and c.evaluated.tolist() == [5000, 2048, 5000]
    assert c.first_failure.tolist() == [-1, 1500, 4999]
    assert compare(got, want).failures.tolist() == [0, 3, 1]


# --------------------------------------------------------------------------------------------
# trivial references


def test_trivial_references_flagged():
    assert "zero" in trivial_reference(torch.zeros(1000))
    assert "zero" in trivial_reference(t([0.0, -0.0, 0.0]))
    assert "constant: 3.0" in trivial_reference(torch.full((100,), 3.0))
    near = 1000.0 + 1e-4 * torch.linspace(-1, 1, 1000)  # within rtol*|exp| of 1000 in float32
    assert "nearly constant" in trivial_reference(near)
    assert "nan for all" in trivial_reference(torch.full((10,), NAN))
    assert "nan or infinite" in trivial_reference(t([NAN, INF, -INF]))
    with_specials = t([2.0, 2.0, NAN, 2.0, INF])
    msg = trivial_reference(with_specials)
    assert "constant" in msg and "2 nan/inf outputs aside" in msg
    assert "constant: True" in trivial_reference(torch.ones(50, dtype=torch.bool))
    assert "constant: False" in trivial_reference(torch.zeros(50, dtype=torch.bool))
    assert "constant" in trivial_reference(t([1.0, 1.0]), dtype="bool")
    assert "no outputs" in trivial_reference(torch.zeros(0))


def test_ordinary_references_not_flagged():
    x = torch.linspace(-5, 5, 1000)
    assert trivial_reference(torch.sin(x)) is None
    assert trivial_reference(torch.relu(x)) is None  # half zeros is fine
    assert trivial_reference(t([1.0])) is None  # one value: nothing to call constant
    assert trivial_reference(torch.tensor([True, False, True])) is None
    assert trivial_reference(t([NAN, 1.0, 2.0])) is None
    spread = 1000.0 + 1e-1 * torch.linspace(-1, 1, 1000)  # beyond float32 tolerance
    assert trivial_reference(spread) is None
    assert "nearly constant" in trivial_reference(spread, rtol=1e-3)  # but within a looser one
    h = (1.0 + 1e-2 * torch.linspace(-1, 1, 100)).to(torch.bfloat16)  # within bfloat16's rtol 1.6e-2
    assert "nearly constant" in trivial_reference(h)
    assert trivial_reference(h, dtype="float32") is None


@pytest.mark.parametrize("values", [
    torch.zeros(5000), torch.full((5000,), 3.0), 1000.0 + 1e-4 * torch.linspace(-1, 1, 5000),
    torch.cat([torch.full((4000,), 2.0), torch.tensor([NAN, INF]), torch.full((994,), 2.0)]),
    torch.cat([torch.full((4999,), 2.0), torch.tensor([2.5])]), torch.sin(torch.linspace(-5, 5, 5000)),
    torch.full((5000,), NAN), torch.cat([torch.full((4999,), NAN), torch.tensor([1.0])]),
    torch.tensor([True, False] * 2500), torch.ones(5000, dtype=torch.bool),
])
def test_trivial_reference_in_blocks_says_what_it_says_in_one(values, monkeypatch):
    """Outputs are read in blocks (bounded temporaries for any count): the verdict is the same."""
    whole = trivial_reference(values)
    monkeypatch.setattr(compare_module, "TRIVIAL_BLOCK", 1000)
    assert trivial_reference(values) == whole


@pytest.mark.gpu
def test_compare_on_cuda_stays_on_device():
    e = torch.linspace(-3, 3, 1001, device="cuda")
    got = torch.stack([e, e + 1, step(e, 2)])
    c = compare(got, e)
    for tensor in (c.ok, c.failures, c.first_failure, c.max_abs_err, c.max_rel_err, c.max_ulp_err):
        assert tensor.device.type == "cuda"
    assert c.failures.tolist() == [0, 1001, 0] and c.max_ulp_err.tolist()[2] == 2.0
    assert trivial_reference(torch.zeros(10, device="cuda")) is not None
