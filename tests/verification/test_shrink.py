"""Counterexample shrinking (verification/shrink.py): a shrunk point stays inside its bounds, still fails, is no
more complex than where it started, and is as simple as the failing set allows."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import jupyter_gpuiter as gi
from jupyter_gpuiter.verification.shrink import complexity, shrink, simpler_values


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
