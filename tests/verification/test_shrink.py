"""Counterexample shrinking (verification/shrink.py): a shrunk point stays inside its bounds, still fails, is no
more complex than where it started, and is as simple as the failing set allows."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import jupyter_gpuiter as gi
from jupyter_gpuiter.verification.shrink import (
    TRIALS_PER_CALL,
    complexity,
    shrink,
    shrink_row,
    simpler_row_values,
    simpler_values,
)


def test_counterexamples_are_shrunk_toward_simple_values():
    v = gi.verify("def f(x):\n    return x * 2 if x > 3 else x\n", "def f(x):\n    return x\n", tests=5000,
                  domain={"x": (-10, 10)})
    assert not v.passed
    assert v.counterexample.inputs["x"] in (4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0), v.counterexample


def test_simplicity_orders_zero_ones_twos_halves_integers_decimals_non_finite_then_the_rest():
    ordered = [0.0, 1.0, 2.0, 0.5, 7.0, 12.0, 0.25, 12.125, math.inf, 3.14159]
    assert [complexity(v) for v in ordered] == sorted(complexity(v) for v in ordered)
    assert complexity(-1.0) == complexity(1.0) and complexity(math.nan) == complexity(math.inf)


def test_simpler_values_lie_inside_the_bounds_and_are_simpler():
    assert simpler_values(0.0) == []  # nothing is simpler than 0
    assert simpler_values(3.7) == [0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 4.0]
    inside = simpler_values(7.25, 3.5, 9.0)
    assert inside and all(3.5 <= c <= 9.0 and complexity(c) < complexity(7.25) for c in inside)
    assert inside[:3] == [4.0, 9.0, 7.0] and set(inside[3:]) == {3.5, 7.2}  # the simplest integers first


def _fails_where(predicate):
    """A `fails` for shrink: many points at once, each failing where predicate says so."""
    calls = []

    def fails(points):
        calls.append(len(points))
        return [predicate(*p) for p in points]

    return fails, calls


def test_shrink_keeps_the_point_failing_and_moves_each_parameter_to_its_simplest_candidate_that_does():
    fails, calls = _fails_where(lambda x, y: x > 3 and y < 0)
    got = shrink([7.318, -0.4471], fails)  # x: 0, ±1, ±2, ±0.5 pass, 7.318 rounded (7) fails; y: -1 fails
    assert got == [7.0, -1.0] and fails([got]) == [True]
    assert calls and all(n > 0 for n in calls)


def test_shrink_leaves_a_point_with_no_simpler_failing_neighbour_as_it_is():
    fails, _ = _fails_where(lambda x: x == 1.2345)
    assert shrink([1.2345], fails) == [1.2345]


def test_shrink_stays_inside_the_bounds_even_where_simpler_values_outside_would_fail():
    fails, _ = _fails_where(lambda x, y: True)  # everything fails: only the bounds hold the point
    got = shrink([123.456, -55.5], fails, bounds=[(100.0, 200.0), (-60.0, -50.5)])
    assert 100.0 <= got[0] <= 200.0 and -60.0 <= got[1] <= -50.5
    assert got == [100.0, -60.0]  # the bounds' simplest integers


def test_a_representable_value_is_what_is_tried_and_returned():
    float16 = lambda v: float(np.float16(v))
    seen = []

    def fails(points):
        seen.extend(points)
        return [x > 3 for (x,) in points]

    got = shrink([5000.123], fails, representable=float16)
    assert got == [5000.0] and all(x == float16(x) for (x,) in seen)  # tried as the dtype holds them


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=3), st.data())
def test_shrunk_points_fail_lie_in_their_bounds_and_are_no_more_complex(point, data):
    bounds = [(min(v, data.draw(st.floats(-1e6, 1e6))), max(v, data.draw(st.floats(-1e6, 1e6)))) for v in point]
    threshold = data.draw(st.floats(-1e6, 1e6))
    predicate = lambda *p: sum(p) >= min(sum(point), threshold)
    got = shrink(point, lambda pts: [predicate(*p) for p in pts], bounds=bounds)
    assert predicate(*got)
    assert all(lo <= v <= hi for v, (lo, hi) in zip(got, bounds))
    assert all(complexity(g) <= complexity(p) for g, p in zip(got, point))


def test_rounds_bound_the_work():
    fails, calls = _fails_where(lambda x, y: True)
    shrink([7.5, 9.25], fails, rounds=1)
    assert len(calls) == 2  # one call a parameter in the one round


# --- rows -------------------------------------------------------------------------------------------------------

def _rows_failing_where(predicate):
    """A `fails` for shrink_row: each trial (a list of rows, one per parameter) fails where predicate says so."""
    calls = []

    def fails(trials):
        calls.append(len(trials))
        assert all(len({len(r) for r in t}) == 1 and len(t[0]) >= 1 for t in trials)  # rows of one length
        return [predicate(*t) for t in trials]

    return fails, calls


def test_a_row_shrinks_to_the_one_element_that_fails_it_made_simple():
    fails, _ = _rows_failing_where(lambda x: max(x) > 88.7)  # an overflowing exp
    row = [0.25 * i for i in range(200)]
    row[137] = 93.71
    assert shrink_row([row], fails, bounds=[(-100.0, 100.0)]) == [[94.0]]  # two digits are simpler than three


def test_a_row_keeps_the_elements_that_must_be_there_together():
    # fails when the row has two elements at least 50 apart: it shrinks to two simple ones
    fails, _ = _rows_failing_where(lambda x, y: max(x) - min(x) >= 50 and sum(y) != 0)
    x = [3.3, -40.1, 7.7, 12.0, 21.21, 9.5]
    y = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]
    got = shrink_row([x, y], fails, bounds=[(-50.0, 50.0), (0.0, 1.0)])
    assert len(got[0]) == 2 and fails([got]) == [True]
    assert sorted(got[0]) == [-50.0, 0.0] or sorted(got[0]) == [0.0, 50.0]
    assert got[1] in ([0.0, 1.0], [1.0, 0.0])


def test_simpler_row_values_add_smaller_powers_of_ten():
    assert simpler_row_values(3.4e38)[:8] == [0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 10.0]
    assert 1e15 in simpler_row_values(3.4e38) and -10.0 in simpler_row_values(-777.0)
    assert -100.0 not in simpler_row_values(-777.0)  # as many digits: not simpler
    inside = simpler_row_values(-77777.0, -90000.0, -500.0)
    assert -1000.0 in inside and all(-90000.0 <= v <= -500.0 for v in inside)
    assert simpler_row_values(5.0) == simpler_values(5.0)  # nothing beyond for small values


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1e4, 1e4, allow_nan=False), min_size=1, max_size=70), st.data())
def test_shrunk_rows_fail_stay_in_bounds_are_no_longer_and_no_more_complex(row, data):
    lo = min(row) - data.draw(st.floats(0, 10))
    hi = max(row) + data.draw(st.floats(0, 10))
    threshold = data.draw(st.floats(-1e4, 1e4))
    predicate = lambda x: max(x) >= min(max(row), threshold)
    fails, _ = _rows_failing_where(predicate)
    got = shrink_row([row], fails, bounds=[(lo, hi)])
    assert predicate(got[0]) and 1 <= len(got[0]) <= len(row)
    assert all(lo <= v <= hi for v in got[0])
    assert max(map(complexity, got[0])) <= max(map(complexity, row))
    assert len(got[0]) == 1  # one element alone fails: a max over the row


def test_shortening_asks_in_batches():
    fails, calls = _rows_failing_where(lambda x: len(x) >= 3 and x[0] < x[-1])
    got = shrink_row([[float(i) for i in range(500)]], fails)
    assert len(got[0]) == 3 and fails([got]) == [True]
    assert max(calls) <= TRIALS_PER_CALL


def test_shortening_a_long_row_that_cannot_shorten_copies_o_n_elements(monkeypatch):
    """A row that fails only whole: the trials of each chunk size together copy at most SHRINK_ELEMENTS elements,
    so the shortening stops at coarser chunks instead of trying all n one-element drops of n-element rows."""
    from jupyter_gpuiter.verification import shrink

    monkeypatch.setattr(shrink, "SHRINK_ELEMENTS", 1 << 14)
    n, seen = 4096, []

    def fails(trials):
        seen.append(sum(len(t[0]) for t in trials))
        return [len(t[0]) == n for t in trials]

    row = [float(i % 7) for i in range(n)]
    assert shrink._shorten([row], fails) == [row]
    # one element alone (n one-element trials), then chunks of 2,048 and 1,024 only (n^2 / 2^14 = 1,024)
    assert sum(seen) <= n + 2 * (1 << 14)
    short = [1.0, 2.0, 3.0]
    assert shrink._shorten([short], lambda t: [2.0 in r[0] and 3.0 in r[0] for r in t]) == [[2.0, 3.0]]
