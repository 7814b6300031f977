"""Statistics of probabilistic verification: bounds, Beta posterior, SPRT, sentences.

References are computed independently here: with the decimal module (50 digits: logarithms,
binomial sums for integer Beta shapes), closed forms and Simpson integration; never with the
module under test.
"""

import math
import random
from decimal import Decimal, localcontext

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jupyter_gpuiter.verify import confidence as C

SETTINGS = settings(max_examples=150, deadline=None)

deltas = st.floats(1e-15, 0.999)
small_eps = st.floats(1e-9, 0.999)
counts = st.integers(0, 10**12)


def rel(a, b):
    return abs(a - b) / abs(b)


# ---------------------------------------------------------------- decimal references (50 digits)


def dec_epsilon(n, delta):
    """1 - delta**(1/n) to 50 digits."""
    with localcontext() as ctx:
        ctx.prec = 50
        return float(1 - (Decimal(delta).ln() / n).exp())


def dec_tests_needed(eps, delta):
    """ceil(ln(delta) / ln(1 - eps)) to 50 digits, with eps and delta the exact binary floats."""
    with localcontext() as ctx:
        ctx.prec = 50
        ratio = Decimal(delta).ln() / (1 - Decimal(eps)).ln()
        return int(ratio.to_integral_value(rounding="ROUND_CEILING"))


def binomial_lower_tail(a, b, x):
    """For integer a, b: 1 - I_x(a, b) = P(Binomial(a+b-1, x) <= a-1), to 50 digits."""
    with localcontext() as ctx:
        ctx.prec = 50
        n, xd = a + b - 1, Decimal(x)
        yd = 1 - xd
        term = yd**n
        total = term
        for j in range(1, a):
            term = term * (n - j + 1) / j * xd / yd
            total += term
        return total


def simpson_cdf(a, b, x, intervals=2000):
    """I_x(a, b) for integer a, b >= 1 by Simpson's rule on x**(a-1) (1-x)**(b-1), over exact B(a, b)."""

    def f(t):
        return t ** (a - 1) * (1.0 - t) ** (b - 1)

    h = x / intervals
    total = f(0.0) + f(x)
    for i in range(1, intervals):
        total += (4 if i % 2 else 2) * f(i * h)
    beta = math.factorial(a - 1) * math.factorial(b - 1) / math.factorial(a + b - 1)
    return total * h / 3 / beta


# ---------------------------------------------------------------- epsilon_bound / tests_needed


def test_epsilon_bound_exact_values():
    eps = C.epsilon_bound(2995, 0.05)
    assert f"{eps:.3g}" == "0.001"
    assert rel(eps, dec_epsilon(2995, 0.05)) < 1e-14
    assert C.epsilon_bound(0, 0.05) == 1.0
    assert C.epsilon_bound(1, 0.25) == pytest.approx(0.75, rel=1e-15)
    assert C.epsilon_bound(2, 0.25) == pytest.approx(0.5, rel=1e-15)
    assert rel(C.epsilon_bound(30_000, 1e-3), dec_epsilon(30_000, 1e-3)) < 1e-14


@pytest.mark.parametrize("n,delta", [(10**15, 1e-300), (10**12, 1e-3), (7, 1e-300), (10**18, 0.5), (10**9, 1e-12)])
def test_epsilon_bound_accurate_for_tiny_delta_and_huge_n(n, delta):
    # the naive 1 - delta**(1/n) loses most digits here (1 - 0.99999999999 ...)
    assert rel(C.epsilon_bound(n, delta), dec_epsilon(n, delta)) < 1e-13


@pytest.mark.parametrize("eps,delta", [(1e-4, 1e-3), (1e-3, 0.05), (1e-3, 1e-3), (0.1, 0.05), (1e-6, 1e-9),
                                       (0.5, 0.25), (2.5e-7, 1e-300)])
def test_tests_needed_matches_a_50_digit_ceiling(eps, delta):
    assert C.tests_needed(eps, delta) == dec_tests_needed(eps, delta)


def test_tests_needed_documented_examples():
    assert C.tests_needed(1e-4, 1e-3) == 69_075 == dec_tests_needed(1e-4, 1e-3)
    assert C.tests_needed(1e-3, 0.05) == 2_995 == dec_tests_needed(1e-3, 0.05)
    # 0.5 = 1 - 0.25**(1/2) exactly: the boundary itself counts as reached
    assert C.tests_needed(0.5, 0.25) == 2
    assert C.tests_needed(1.0, 0.01) == 0


@SETTINGS
@given(small_eps, deltas)
def test_tests_needed_is_the_boundary_of_epsilon_bound(eps, delta):
    n = C.tests_needed(eps, delta)
    assert n >= 1
    assert C.epsilon_bound(n, delta) <= eps
    assert C.epsilon_bound(n - 1, delta) > eps
    # and it is the textbook ceiling, up to the float rounding of the ratio itself
    assert abs(n - math.ceil(math.log(delta) / math.log1p(-eps))) <= 1


@SETTINGS
@given(counts, deltas, deltas)
def test_epsilon_bound_decreases_in_n_and_in_delta(n, d1, d2):
    # more tests tighten the bound; more confidence (a smaller delta) loosens it
    lo, hi = sorted((d1, d2))
    assert C.epsilon_bound(n + 1, lo) <= C.epsilon_bound(n, lo)
    assert C.epsilon_bound(n, lo) >= C.epsilon_bound(n, hi)
    if n >= 1 and hi > lo * (1 + 1e-9):
        assert C.epsilon_bound(n, lo) > C.epsilon_bound(n, hi) or C.epsilon_bound(n, hi) == 0.0
    assert 0.0 <= C.epsilon_bound(n, lo) <= 1.0
    if n < 10**9:  # strictly, where the difference is representable
        assert C.epsilon_bound(n + 1, lo) < C.epsilon_bound(n, lo)


@SETTINGS
@given(st.integers(10**6, 10**15), st.floats(1e-12, 0.5))
def test_epsilon_bound_is_about_ln_one_over_delta_over_n(n, delta):
    approx = math.log(1 / delta) / n
    assert C.epsilon_bound(n, delta) <= approx  # 1 - e^-u <= u
    assert rel(C.epsilon_bound(n, delta), approx) <= approx


# ---------------------------------------------------------------- Bonferroni and false-accept risk


def test_per_candidate_delta():
    assert C.per_candidate_delta(1e-3, 1) == 1e-3
    assert C.per_candidate_delta(1e-3, 8) == 1.25e-4
    # with k candidates, each bound is looser than for one candidate
    assert C.epsilon_bound(10_000, C.per_candidate_delta(1e-3, 16)) > C.epsilon_bound(10_000, 1e-3)


@SETTINGS
@given(st.integers(1, 10**12), st.floats(1e-12, 0.5), st.integers(1, 1000))
def test_false_accept_risk_inverts_the_bound(n, delta, k):
    # a candidate exactly at the bound passes N tests with probability delta (or delta/k each)
    eps = C.epsilon_bound(n, C.per_candidate_delta(delta, k))
    assert C.false_accept_risk(eps, n, k) == pytest.approx(delta, rel=1e-9)


@SETTINGS
@given(st.floats(0.0, 1.0), st.integers(0, 10**9), st.integers(1, 10**6))
def test_false_accept_risk_is_a_capped_decreasing_probability(eps, n, k):
    risk = C.false_accept_risk(eps, n, k)
    assert 0.0 <= risk <= 1.0
    assert C.false_accept_risk(eps, n + 1000, k) <= risk
    assert C.false_accept_risk(eps, n, k + 1) >= risk


def test_false_accept_risk_values():
    assert C.false_accept_risk(1e-3, 0) == 1.0
    assert C.false_accept_risk(0.0, 10**6) == 1.0
    assert C.false_accept_risk(1.0, 5) == 0.0
    assert C.false_accept_risk(0.5, 3, k=2) == pytest.approx(0.25, rel=1e-15)
    assert C.false_accept_risk(0.5, 1, k=3) == 1.0  # capped
    # (1 - 1e-12)**(1e12) = 1/e; the naive power would lose about 4 digits
    assert C.false_accept_risk(1e-12, 10**12) == pytest.approx(math.exp(-1), rel=1e-11)


# ---------------------------------------------------------------- the Beta distribution


@pytest.mark.parametrize("a,b", [(1, 1), (2, 3), (3, 2), (5, 5), (1, 7), (4, 9)])
@pytest.mark.parametrize("x", [0.05, 0.3, 0.5, 0.77, 0.97])
def test_betainc_matches_simpson_integration(a, b, x):
    assert C.betainc(a, b, x) == pytest.approx(simpson_cdf(a, b, x), rel=1e-10, abs=1e-13)


@pytest.mark.parametrize("a,b", [(2, 3), (5, 5), (1, 7), (4, 9)])
@pytest.mark.parametrize("q", [0.01, 0.5, 0.95, 0.999])
def test_quantile_inverts_the_integrated_cdf(a, b, q):
    x = C.betainc_inv(a, b, q)
    assert simpson_cdf(a, b, x) == pytest.approx(q, rel=1e-9)


@pytest.mark.parametrize("a,b", [(3, 40), (40, 3), (20, 500), (100, 100), (1, 10**9), (3, 10**9), (25, 10**8)])
@pytest.mark.parametrize("q", [1e-9, 0.05, 0.5, 0.999, 1 - 1e-9])
def test_tails_and_quantiles_match_exact_binomial_sums(a, b, q):
    x = C.betainc_inv(a, b, q)
    below, above = x - 2 * math.ulp(x), x + 2 * math.ulp(x)  # the quantile to within 2 ulps
    upper = binomial_lower_tail(a, b, x)  # exact 1 - I_x(a, b) at the float x
    if q > 0.5:  # the small upper tail, relative to itself (not as 1 - something)
        target = Decimal(1 - q)
        assert binomial_lower_tail(a, b, above) * (1 - Decimal("1e-12")) <= target
        assert target <= binomial_lower_tail(a, b, below) * (1 + Decimal("1e-12"))
        assert rel(C.betaincc(a, b, x), float(upper)) < 1e-12
    else:
        target = Decimal(q)
        assert (1 - binomial_lower_tail(a, b, below)) * (1 - Decimal("1e-12")) <= target
        assert target <= (1 - binomial_lower_tail(a, b, above)) * (1 + Decimal("1e-12"))
        assert rel(C.betainc(a, b, x), float(1 - upper)) < 1e-12


def within_ulps_of_quantile(post, x, q, ulps=4, tol=1e-11):
    """q lies between the CDF a few ulps either side of x: x is the quantile as well as a double can say."""
    below, above = max(0.0, x - ulps * math.ulp(x)), min(1.0, x + ulps * math.ulp(x))
    if q <= 0.5:
        return post.cdf(below) * (1 - tol) <= q <= post.cdf(above) * (1 + tol)
    return post.sf(above) * (1 - tol) <= 1 - q <= post.sf(below) * (1 + tol)


@pytest.mark.parametrize("a,b,x", [(0.5, 0.5, 0.25), (0.3, 7.5, 0.001), (2.5, 0.2, 0.9921875), (1e-3, 1e-3, 0.5)])
def test_betainc_symmetry(a, b, x):
    # I_x(a, b) + I_{1-x}(b, a) = 1, with x chosen so that 1 - x is exact
    assert C.betainc(a, b, x) + C.betainc(b, a, 1 - x) == pytest.approx(1.0, abs=1e-14)
    assert C.betaincc(a, b, x) == pytest.approx(C.betainc(b, a, 1 - x), rel=1e-13)


@SETTINGS
@given(st.floats(0.05, 50.0), st.floats(1e-6, 1 - 1e-6))
def test_betainc_closed_forms_for_non_integer_shapes(a, x):
    assert rel(C.betainc(a, 1.0, x), x**a) < 1e-12  # I_x(a, 1) = x**a
    assert rel(C.betaincc(1.0, a, x), (1 - x) ** a) < 1e-12 or (1 - x) ** a < 1e-300


@SETTINGS
@given(st.integers(0, 10**12), st.floats(1e-12, 1 - 1e-12))
def test_posterior_with_no_failures_matches_closed_form(n, q):
    post = C.beta_posterior(n, 0)
    closed = -math.expm1(math.log1p(-q) / (n + 1))  # 1 - (1 - q)**(1/(n+1))
    assert rel(post.quantile(q), closed) < 1e-12


@SETTINGS
@given(st.integers(0, 10**12), st.floats(1e-9, 0.5))
def test_posterior_upper_bound_equals_frequentist_bound_one_test_later(n, delta):
    # uniform prior, no failures: the 1-delta upper credible bound is 1 - delta**(1/(n+1))
    post = C.beta_posterior(n, 0)
    delta = 1 - (1 - delta)  # the delta that a confidence level near 1 can carry
    assert rel(post.upper(1 - delta), C.epsilon_bound(n + 1, delta)) < 1e-12


@SETTINGS
@given(st.integers(0, 10**9), st.data(), st.sampled_from([(1.0, 1.0), (0.5, 0.5), (2.0, 50.0)]))
def test_posterior_bounds_bracket_the_mean(n, data, prior):
    f = data.draw(st.integers(0, n))
    post = C.beta_posterior(n, f, prior=prior)
    assert post.alpha == prior[0] + f and post.beta == prior[1] + n - f
    assert post.lower(0.999) <= post.mean <= post.upper(0.999)
    assert post.upper(0.9) <= post.upper(0.999) <= post.upper(0.999999)
    q = data.draw(st.floats(1e-6, 1 - 1e-6))
    assert within_ulps_of_quantile(post, post.quantile(q), q)


def test_posterior_values():
    post = C.beta_posterior(98, 2)
    assert (post.alpha, post.beta) == (3.0, 97.0)
    assert post.mean == 0.03
    assert C.beta_posterior(0, 0).upper(0.95) == pytest.approx(0.95, rel=1e-14)  # uniform
    # Jeffreys prior Beta(1/2, 1/2) is the arcsine law: median 1/2, quantile sin(pi q / 2)**2
    arcsine = C.beta_posterior(0, 0, prior=(0.5, 0.5))
    assert arcsine.quantile(0.1) == pytest.approx(math.sin(math.pi * 0.05) ** 2, rel=1e-13)


def test_quantile_edges():
    assert C.betainc_inv(2, 3, 0.0) == 0.0 and C.betainc_inv(2, 3, 1.0) == 1.0
    assert C.betainc(2, 3, 0.0) == 0.0 and C.betainc(2, 3, 1.0) == 1.0
    assert C.betainc_inv(0.1, 1, 1e-300) == 0.0  # the true quantile, 1e-3000, is below any double
    assert rel(C.betainc_inv(0.1, 1, 1e-30), 1e-300) < 1e-12


# ---------------------------------------------------------------- SPRT


def passes_needed(p0, p1, alpha, beta):
    """Consecutive passes from the start until Wald's lower boundary log(beta / (1 - alpha)) is crossed."""
    with localcontext() as ctx:
        ctx.prec = 50
        one = Decimal(1)
        per_pass = ((one - Decimal(p1)) / (one - Decimal(p0))).ln()
        boundary = (Decimal(beta) / (one - Decimal(alpha))).ln()
        return int((boundary / per_pass).to_integral_value(rounding="ROUND_CEILING"))


def test_sprt_accepts_a_clean_stream_at_walds_boundary():
    sprt = C.Sprt(1e-4, 1e-3, alpha=1e-3, beta=1e-3)
    expected = passes_needed(1e-4, 1e-3, 1e-3, 1e-3)
    assert 7000 < expected < 8000  # about log(999) / 9e-4
    assert sprt.passes_to_accept() == expected
    decisions = [sprt.update(1) for _ in range(expected)]
    assert decisions[-1] == "accept" and set(decisions[:-1]) == {"continue"}
    assert sprt.n == expected and sprt.failures == 0
    # same order of magnitude as the fixed-size test for epsilon = p1
    assert 0.5 < expected / C.tests_needed(1e-3, 1e-3) < 2


def test_sprt_rejects_a_stream_failing_at_ten_times_p1():
    for seed in range(5):
        rng = random.Random(seed)
        sprt = C.Sprt.for_epsilon(1e-3)  # p0 = 1e-4, p1 = 1e-3
        decision = "continue"
        while decision == "continue":
            decision = sprt.update(1, int(rng.random() < 1e-2))
        assert decision == "reject"
        assert sprt.n < 2000  # three or four failures suffice: expected about 300 tests


def test_sprt_accepts_a_stream_failing_at_p0_mostly():
    accepted = 0
    for seed in range(5):
        rng = random.Random(100 + seed)
        sprt = C.Sprt(1e-3, 1e-2, alpha=1e-2, beta=1e-2)
        while sprt.decision == "continue":
            sprt.update(100, sum(rng.random() < 1e-3 for _ in range(100)))
        accepted += sprt.decision == "accept"
    assert accepted >= 4


def test_sprt_llr_and_chunks():
    a, b = C.Sprt(1e-3, 1e-2, alpha=0.05, beta=0.05), C.Sprt(1e-3, 1e-2, alpha=0.05, beta=0.05)
    a.update(50, 2)
    for i in range(50):
        b.update(1, int(i in (10, 30)))
    with localcontext() as ctx:
        ctx.prec = 50
        expected = 2 * (Decimal("1e-2") / Decimal("1e-3")).ln() + 48 * (Decimal("0.99") / Decimal("0.999")).ln()
    assert a.llr == pytest.approx(float(expected), rel=1e-12)
    assert b.llr == pytest.approx(a.llr, rel=1e-12)
    assert (a.n, a.failures) == (50, 2)


def test_sprt_decisions_are_sticky():
    sprt = C.Sprt(1e-3, 1e-2)
    assert sprt.update(0, 0) == "continue" and sprt.decision == "continue"
    assert sprt.update(10, 5) == "reject"
    assert sprt.update(100_000, 0) == "reject"  # the LLR is now far below the accept boundary
    assert sprt.llr < sprt.accept_at and sprt.decision == "reject"
    assert (sprt.n, sprt.failures) == (100_010, 5)
    assert sprt.passes_to_accept() == 0
    good = C.Sprt(1e-3, 1e-2)
    assert good.update(10_000) == "accept"
    assert good.update(100, 100) == "accept"


def test_sprt_tiny_rates_stay_finite():
    # 1 - 1e-17 == 1.0 in floats: the per-pass LLR must come from log1p, or no pass ever counts
    sprt = C.Sprt(1e-18, 1e-17)
    assert sprt.llr_pass == pytest.approx(-9e-18, rel=1e-12)
    assert sprt.passes_to_accept() == pytest.approx(passes_needed(1e-18, 1e-17, 1e-3, 1e-3), rel=1e-12)
    assert sprt.update(10**18) == "accept"


# ---------------------------------------------------------------- sentences


def test_confidence_sentences():
    assert C.confidence_sentence(True, 30_000, 1e-3) == "failure rate ≤ 2.31e-04 with confidence 99.9% over 30,000 tests"
    assert C.confidence_sentence(True, 2_995, 0.05) == "failure rate ≤ 1e-03 with confidence 95% over 2,995 tests"
    assert C.confidence_sentence(True, 1, 1e-3) == "failure rate ≤ 0.999 with confidence 99.9% over 1 test"
    assert C.confidence_sentence(True, 100, 1e-9) == "failure rate ≤ 0.188 with confidence 99.9999999% over 100 tests"
    assert C.confidence_sentence(True, 65_536, 1e-3, exhaustive=True) == "proved over all 65,536 inputs"
    assert C.confidence_sentence(True, 70_000, 1e-3, True, 65_536) == "proved over all 65,536 inputs"
    assert C.confidence_sentence(False, 30_000, 1e-3, failures=3) == "failed 3 of 30,000 tests"
    assert C.confidence_sentence(False, 1_024, 1e-3) == "failed within 1,024 tests"
    assert C.confidence_sentence(False, 65_536, 1e-3, True, 65_536, failures=12) == "failed 12 of all 65,536 inputs"
    assert C.confidence_sentence(True, 0, 1e-3).startswith("no tests run")


@pytest.mark.parametrize("x,text", [(0.0, "0"), (1.0, "1"), (0.0123, "0.0123"), (0.5, "0.5"), (0.123456, "0.124"),
                                    (2.302e-4, "2.31e-04"), (1e-3, "1e-03"), (9.9951e-5, "1e-04"), (3e-300, "3e-300")])
def test_format_rate(x, text):
    assert C.format_rate(x) == text


@SETTINGS
@given(st.floats(1e-300, 1.0))
def test_format_rate_rounds_up_to_three_digits(x):
    shown = float(C.format_rate(x))
    assert x * (1 - 1e-9) <= shown <= x * 1.01 + 1e-300  # still a bound, and 3 significant digits


def test_format_count():
    assert C.format_count(30000) == "30,000" and C.format_count(7) == "7"


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("call", [
    lambda: C.epsilon_bound(-1, 0.05),
    lambda: C.epsilon_bound(10, 0.0),
    lambda: C.epsilon_bound(10, 1.0),
    lambda: C.epsilon_bound(10, float("nan")),
    lambda: C.epsilon_bound(2.5, 0.05),
    lambda: C.epsilon_bound(True, 0.05),
    lambda: C.tests_needed(0.0, 0.05),
    lambda: C.tests_needed(-1e-3, 0.05),
    lambda: C.tests_needed(1e-3, 1.5),
    lambda: C.tests_needed(1e-320, 0.05),
    lambda: C.per_candidate_delta(0.05, 0),
    lambda: C.false_accept_risk(1.5, 10),
    lambda: C.false_accept_risk(0.1, 10, k=0),
    lambda: C.beta_posterior(10, 11),
    lambda: C.beta_posterior(10, -1),
    lambda: C.beta_posterior(10, 1, prior=(0.0, 1.0)),
    lambda: C.beta_posterior(10, 1, prior=1.0),
    lambda: C.BetaPosterior(-1.0, 2.0),
    lambda: C.BetaPosterior(1.0, 2.0).upper(1.0),
    lambda: C.betainc(1.0, 2.0, 1.5),
    lambda: C.betainc_inv(1.0, 2.0, -0.1),
    lambda: C.Sprt(1e-2, 1e-3),
    lambda: C.Sprt(1e-3, 1e-3),
    lambda: C.Sprt(1e-3, 1e-2, alpha=0.6, beta=0.5),
    lambda: C.Sprt(0.0, 1e-2),
    lambda: C.Sprt.for_epsilon(1e-3, ratio=1.0),
    lambda: C.Sprt(1e-3, 1e-2).update(5, 6),
    lambda: C.Sprt(1e-3, 1e-2).update(-1, 0),
    lambda: C.confidence_sentence(True, 10, 1e-3, failures=2),
    lambda: C.confidence_sentence(False, 10, 1e-3, failures=11),
    lambda: C.confidence_sentence(True, 100, 1e-3, exhaustive=True, domain_size=65_536),
    lambda: C.confidence_sentence(True, 100, 0.0),
    lambda: C.format_rate(-1.0),
])
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_error_messages_say_what_to_do():
    with pytest.raises(ValueError, match=r"delta must be strictly between 0 and 1.*99\.9% confidence"):
        C.epsilon_bound(100, 5)
    with pytest.raises(ValueError, match="p0 must be below p1"):
        C.Sprt(0.1, 0.01)
    with pytest.raises(ValueError, match="failures .11. cannot exceed n_tests .10."):
        C.beta_posterior(10, 11)
