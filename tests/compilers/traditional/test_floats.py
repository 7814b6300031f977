"""floats.to_float64 (Eisel-Lemire on int64 tensors) against CPython's correctly rounded float()."""

import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuiter.compilers.traditional import floats


def check(ms: list[int], qs: list[int], device: str = "cpu") -> None:
    got = floats.to_float64(torch.tensor(ms, device=device), torch.tensor(qs, device=device)).tolist()
    bad = [(m, q, g) for m, q, g in zip(ms, qs, got) if g != float(f"{m}e{q}")]
    if bad:
        m, q, g = bad[0]
        raise AssertionError(f"{len(bad)} of {len(ms)} differ; first: {m}e{q} gave {g!r}, not {float(f'{m}e{q}')!r}")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2 ** 63 - 1) | st.integers(0, 10 ** 6), st.integers(-400, 400)), min_size=1,
                max_size=50))
def test_any_mantissa_and_exponent(pairs):
    check([m for m, _ in pairs], [q for _, q in pairs])


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_every_power_of_ten_in_range_and_past_it(device):
    rng = random.Random(0)
    ms, qs = [], []
    for q in range(floats.SMALLEST_Q - 5, floats.LARGEST_Q + 6):
        for digits in (1, 8, 16, 17, 18, 19):
            ms.append(rng.randint(10 ** (digits - 1), min(10 ** digits, 2 ** 63) - 1))
            qs.append(q)
    check(ms, qs, device)


def test_exact_ties_round_to_even():
    """m * 10^q exactly halfway between two float64s: m = o with o * 5^q a 54-bit odd number (q >= 0),
    or m = o * 5^k for q = -k (the only ways a decimal can be a tie), and their odd neighbours."""
    rng = random.Random(1)
    ms, qs = [], []
    for q in range(23):
        lo, hi = -(-2 ** 53 // 5 ** q), 2 ** 54 // 5 ** q
        for _ in range(50):
            o = rng.randrange(lo, hi) | 1
            if lo <= o < hi:
                ms += [o, o + 1, o - 1]
                qs += [q] * 3
    for k in range(1, 5):
        for _ in range(50):
            m = (rng.randrange(2 ** 53, 2 ** 54) | 1) * 5 ** k
            if m < 2 ** 63:
                ms += [m, m + 1, m - 1]
                qs += [-k] * 3
    check(ms, qs)


def test_subnormals_extremes_and_specials():
    cases = [(0, 0), (0, 500), (1, -400), (5, -324), (24703282292062327, -340), (24703282292062328, -340),
             (49406564584124654, -340), (22250738585072011, -324), (22250738585072014, -324), (17976931348623157, 292),
             (17976931348623158, 292), (1, 309), (1, 308), (2 ** 63 - 1, 0), (2 ** 53 + 1, 0), (1, -342), (1, -343)]
    rng = random.Random(2)
    cases += [(rng.randint(1, 10 ** 18), rng.randint(-345, -300)) for _ in range(2000)]
    check([m for m, _ in cases], [q for _, q in cases])
