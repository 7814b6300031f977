"""Statistics of probabilistic verification (DESIGN.md section 7, "Confidence"; section 8 uses the risk).

A candidate kernel that passes N independent tests drawn from the input distribution has, with
confidence 1 - delta, a failure rate (the probability that one random input fails) of at most
``eps = 1 - delta**(1/N)`` (about ``ln(1/delta)/N``). With k candidates checked at once, each gets
``delta/k`` (Bonferroni), so the chance that *any* bound is wrong stays <= delta. The Beta posterior
is the Bayesian counterpart, and :class:`Sprt` decides as early as the evidence allows when tests
arrive in chunks.

Pure Python (``math`` only): the Beta distribution is implemented here, not taken from SciPy.

>>> round(epsilon_bound(2995, 0.05), 6)
0.001
>>> tests_needed(1e-3, 0.05)
2995
>>> confidence_sentence(True, 30_000, 1e-3)
'failure rate ≤ 2.31e-04 with confidence 99.9% over 30,000 tests'
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from decimal import Decimal

__all__ = [
    "BetaPosterior",
    "Sprt",
    "as_count",
    "as_probability",
    "beta_posterior",
    "betainc",
    "betainc_inv",
    "betaincc",
    "confidence_sentence",
    "epsilon_bound",
    "false_accept_risk",
    "format_count",
    "format_rate",
    "per_candidate_delta",
    "tests_needed",
]


# ---------------------------------------------------------------------------------------------
# input checks


def as_count(name: str, value, minimum: int = 0) -> int:
    """An integer >= minimum (bool and float are refused: a count of 2.5 tests is a caller bug)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer count, got the bool {value!r}")  # noqa: TRY004 - contract: ValueError
    try:
        n = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer count, got {value!r} ({type(value).__name__})") from None
    if n < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {n}")
    return n


def _real(name: str, value) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got the bool {value!r}")  # noqa: TRY004 - contract: ValueError
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    if math.isnan(x):
        raise ValueError(f"{name} must be a number, got nan")
    return x


def as_probability(name: str, value) -> float:
    """A probability in [0, 1]."""
    x = _real(name, value)
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
    return x


def _open_prob(name: str, value, hint: str = "") -> float:
    """A probability strictly between 0 and 1."""
    x = _real(name, value)
    if not 0.0 < x < 1.0:
        raise ValueError(f"{name} must be strictly between 0 and 1, got {value!r}{hint}")
    return x


_DELTA_HINT = " (delta is the chance the bound is wrong: e.g. 1e-3 for 99.9% confidence)"


# ---------------------------------------------------------------------------------------------
# the frequentist bound


def epsilon_bound(n_tests: int, delta: float) -> float:
    """Failure-rate bound ``1 - delta**(1/N)`` after N passing tests, holding with confidence 1 - delta.

    Computed as ``-expm1(log(delta)/N)``, accurate for tiny delta and huge N. N = 0 gives 1.0.
    """
    n = as_count("n_tests", n_tests)
    d = _open_prob("delta", delta, _DELTA_HINT)
    if n == 0:
        return 1.0
    return -math.expm1(math.log(d) / n)


def tests_needed(epsilon: float, delta: float) -> int:
    """Smallest N with ``epsilon_bound(N, delta) <= epsilon`` (about ``ln(1/delta)/epsilon``)."""
    eps = _real("epsilon", epsilon)
    d = _open_prob("delta", delta, _DELTA_HINT)
    if eps <= 0.0:
        raise ValueError(f"epsilon must be > 0 (no finite number of tests bounds the failure rate by {eps!r})")
    if eps >= 1.0:
        return 0
    ratio = math.log(d) / math.log1p(-eps)
    if not math.isfinite(ratio) or ratio > 2.0**62:
        raise ValueError(f"epsilon={eps!r} is too small: it would need about {ratio:.3g} tests")
    n = max(1, math.ceil(ratio))
    # The float formula can be off by one at the boundary; settle it against epsilon_bound itself.
    for _ in range(4):
        if n > 1 and epsilon_bound(n - 1, d) <= eps:
            n -= 1
        elif epsilon_bound(n, d) > eps:
            n += 1
        else:
            break
    return n


tests_needed.__test__ = False  # its name starts with "test": keep pytest from collecting it where imported


def per_candidate_delta(delta: float, k: int) -> float:
    """Bonferroni: each of k candidates gets delta/k, so all k bounds hold together with confidence 1 - delta."""
    d = _open_prob("delta", delta, _DELTA_HINT)
    return d / as_count("k (number of candidates)", k, minimum=1)


def false_accept_risk(epsilon: float, n_tests: int, k: int = 1) -> float:
    """Upper bound ``min(1, k*(1-eps)**N)`` on the chance that some of k candidates whose failure rate is
    at least epsilon passes all N of its tests (union bound)."""
    eps = _real("epsilon", epsilon)
    if not 0.0 <= eps <= 1.0:
        raise ValueError(f"epsilon must be a failure rate in [0, 1], got {epsilon!r}")
    n = as_count("n_tests", n_tests)
    kk = as_count("k (number of candidates)", k, minimum=1)
    if n == 0 or eps == 0.0:
        return 1.0
    if eps == 1.0:
        return 0.0
    log_risk = math.log(kk) + n * math.log1p(-eps)
    return 1.0 if log_risk >= 0.0 else math.exp(log_risk)


# ---------------------------------------------------------------------------------------------
# the Beta distribution, from scratch

_LN_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
# Stirling series: B_2k / (2k (2k-1)) for k = 1..8; error below 2e-18 for x >= 10.
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400)


def _lgammacor(x: float) -> float:
    """lgamma(x) - ((x - 1/2) log x - x + log sqrt(2 pi)), for x >= 10, without the cancellation."""
    inv = 1.0 / x
    inv2 = inv * inv
    acc = 0.0
    for c in reversed(_STIRLING):
        acc = acc * inv2 + c
    return acc * inv


def _lbeta(a: float, b: float) -> float:
    """log B(a, b), accurate when a parameter is huge (the R / TOMS 708 arrangement)."""
    p, q = (a, b) if a <= b else (b, a)
    if p >= 10.0:
        corr = _lgammacor(p) + _lgammacor(q) - _lgammacor(p + q)
        log_share = math.log(p / (p + q))
        return -0.5 * math.log(q) + _LN_SQRT_2PI + corr + (p - 0.5) * log_share + q * math.log1p(-p / (p + q))
    if q >= 10.0:
        corr = _lgammacor(q) - _lgammacor(p + q)
        return math.lgamma(p) + corr + p - p * math.log(p + q) + (q - 0.5) * math.log1p(-p / (p + q))
    return math.lgamma(p) + math.lgamma(q) - math.lgamma(p + q)


def _log1pmx(u: float) -> float:
    """log(1 + u) - u, accurate for small u."""
    if u <= -1.0:
        return -math.inf
    if abs(u) > 0.5:
        return math.log1p(u) - u
    # log1p(u) = 2 atanh(r), r = u / (2 + u); and 2 r - u = -u r.
    r = u / (2.0 + u)
    r2 = r * r
    term, acc, k = r * r2, 0.0, 3
    while True:
        nxt = acc + term / k
        if nxt == acc:
            break
        acc, term, k = nxt, term * r2, k + 2
    return -u * r + 2.0 * acc


def _logs(x: float, y: float) -> tuple[float, float]:
    """(log x, log y) for y = 1 - x, each taken from whichever of x, y is the smaller (and exact) one."""
    if x <= y:
        return math.log(x), math.log1p(-x)
    return math.log1p(-y), math.log(y)


def _log_xa_yb_over_beta(a: float, b: float, x: float, y: float) -> float:
    """log(x**a * y**b / B(a, b)) with y = 1 - x given separately (so either may be tiny and exact)."""
    if x == 0.0 or y == 0.0:
        return -math.inf
    if min(a, b) < 10.0:
        log_x, log_y = _logs(x, y)
        return a * log_x + b * log_y - _lbeta(a, b)
    # Both large: expand about the mean x0 = a/(a+b), where the terms of order (a+b) cancel exactly.
    s = a + b
    d = s * x - a if x <= y else b - s * y  # (a+b) (x - x0)
    corr = _lgammacor(s) - _lgammacor(a) - _lgammacor(b)
    return a * _log1pmx(d / a) + b * _log1pmx(-d / b) + 0.5 * math.log(a * b / s) - _LN_SQRT_2PI + corr


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction for the incomplete beta (Numerical Recipes ``betacf``, modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    max_iter = 1000 + int(20.0 * math.sqrt(max(a, b)))
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = 1.0
    d = 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, max_iter + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        step = d * c
        h *= step
        if abs(step - 1.0) < eps:
            return h
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b}, x={x})")


def _check_shape(a, b) -> tuple[float, float]:
    a, b = _real("alpha", a), _real("beta", b)
    if not (0.0 < a < math.inf and 0.0 < b < math.inf):
        raise ValueError(f"Beta shape parameters must be positive and finite, got alpha={a!r}, beta={b!r}")
    return a, b


def _bfrac(a: float, b: float, x: float, y: float, lam: float) -> float:
    """I_x(a, b) divided by x**a y**b / B(a, b), for x <= a/(a+b), given lam = (a+b) y - b = a - (a+b) x.

    The continued fraction of TOMS 708 (Didonato and Morris, ``bfrac``): it takes 1 - x only through
    the accurately formed lam, so it stays accurate where x is close to 1, which ``betacf`` does not.
    """
    eps = 1e-15
    max_iter = 1000 + int(20.0 * math.sqrt(max(a, b)))
    c = lam + 1.0
    c0 = b / a
    c1 = 1.0 / a + 1.0
    yp1 = y + 1.0
    n, p, s = 0.0, 1.0, a + 1.0
    an, bn, anp1, bnp1 = 0.0, 1.0, 1.0, c / c1
    r = c1 / c
    for _ in range(max_iter):
        n += 1.0
        t = n / a
        w = n * (b - n) * x
        e = a / s
        alpha = p * (p + c0) * e * e * (w * x)
        e = (t + 1.0) / (c1 + t + t)
        beta = n + w / s + e * (c + n * yp1)
        p = t + 1.0
        s += 2.0
        an, anp1 = anp1, alpha * an + beta * anp1
        bn, bnp1 = bnp1, alpha * bn + beta * bnp1
        r0, r = r, anp1 / bnp1
        if abs(r - r0) <= eps * r:
            return r
        an, bn, anp1, bnp1 = an / bnp1, bn / bnp1, r, 1.0
    raise ArithmeticError(f"incomplete beta continued fraction did not converge (a={a}, b={b}, x={x})")


def _tails(a: float, b: float, x: float, y: float) -> tuple[float, float]:
    """(I_x(a, b), 1 - I_x(a, b)) for y = 1 - x; the smaller one (the one a tail needs) is computed directly.

    ``betacf`` on the side of the mode Numerical Recipes picks, unless its argument there is close to
    1 (a huge parameter against a small one: e.g. no failures in 10**9 tests), where 1 - argument
    loses digits; then ``bfrac``.
    """
    if x <= 0.0:
        return 0.0, 1.0
    if y <= 0.0:
        return 1.0, 0.0
    front = math.exp(_log_xa_yb_over_beta(a, b, x, y))
    if front == 0.0:  # far out in a tail: the small side is 0 to double precision
        return (0.0, 1.0) if x * (a + b) < a else (1.0, 0.0)
    lower_side = x < (a + 1.0) / (a + b + 2.0)
    if lower_side and x <= 0.5:
        lower = front * _betacf(a, b, x) / a
        return lower, 1.0 - lower
    if not lower_side and y <= 0.5:
        upper = front * _betacf(b, a, y) / b
        return 1.0 - upper, upper
    lam = a - (a + b) * x if x <= y else (a + b) * y - b
    if lam >= 0.0:
        lower = front * _bfrac(a, b, x, y, lam)
        return lower, 1.0 - lower
    upper = front * _bfrac(b, a, y, x, -lam)
    return 1.0 - upper, upper


def _checked_tails(a: float, b: float, x: float) -> tuple[float, float]:
    a, b = _check_shape(a, b)
    x = _real("x", x)
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"x must be in [0, 1], got {x!r}")
    return _tails(a, b, x, 1.0 - x)


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b): the CDF of Beta(a, b) at x."""
    return _checked_tails(a, b, x)[0]


def betaincc(a: float, b: float, x: float) -> float:
    """1 - I_x(a, b), computed directly (accurate where it is tiny): P(X > x) for X ~ Beta(a, b)."""
    return _checked_tails(a, b, x)[1]


def _log_pdf(a: float, b: float, x: float, y: float) -> float:
    log_x, log_y = _logs(x, y)
    return _log_xa_yb_over_beta(a, b, x, y) - log_x - log_y


def betainc_inv(a: float, b: float, q: float) -> float:
    """The q-quantile of Beta(a, b): x with I_x(a, b) = q, to about 1e-13 relative accuracy.

    Safeguarded Newton on the log of the smaller tail, in log x (lower tail) or log(1 - x) (upper
    tail), where the tails are close to linear; bisection whenever a step leaves the bracket.
    """
    a, b = _check_shape(a, b)
    q = _real("q", q)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be a probability in [0, 1], got {q!r}")
    if q == 0.0:
        return 0.0
    if q == 1.0:
        return 1.0
    lower_tail = q <= 0.5
    target = q if lower_tail else 1.0 - q
    log_target = math.log(target)
    lo, hi = 0.0, 1.0
    x = a / (a + b)
    for _ in range(400):
        y = 1.0 - x
        low, up = _tails(a, b, x, y)
        tail = low if lower_tail else up
        if tail <= 0.0:  # underflow far out in the tail: just move toward the root
            h = -math.inf
        else:
            ratio = tail / target  # log of the ratio, not a difference of two large logs
            h = math.log(ratio) if 0.0 < ratio < math.inf else math.log(tail) - log_target
        if h == 0.0:
            return x
        # lower tail increases with x, upper tail decreases: h > 0 means x is past the root (lower) ...
        if (h > 0.0) == lower_tail:
            hi = x
        else:
            lo = x
        new = None
        if math.isfinite(h):
            log_density = _log_pdf(a, b, x, y)
            if lower_tail:  # d log I / d log x = x pdf / I
                slope = math.exp(log_density + _logs(x, y)[0] - math.log(tail))
                new = x * math.exp(-h / slope) if slope > 0.0 else None
            else:  # d log S / d log(1-x) = (1-x) pdf / S
                slope = math.exp(log_density + _logs(x, y)[1] - math.log(tail))
                # 1 - y e^t, written so that a small x keeps its relative accuracy
                new = x - y * math.expm1(-h / slope) if slope > 0.0 else None
        if new is None or not lo < new < hi:  # bisect; geometrically while the bracket spans decades
            if lo == 0.0:
                new = hi * 2.0**-50
                if new == 0.0:  # the quantile is below the smallest double
                    return 0.0
            elif hi > 16.0 * lo:
                new = math.sqrt(lo * hi)
            else:
                new = 0.5 * (lo + hi)
        tol = max(1e-15 * min(new, 1.0 - new), 2.0 * math.ulp(new))
        if abs(new - x) <= tol or hi - lo <= tol:
            return new
        x = new
    return x


@dataclass(frozen=True)
class BetaPosterior:
    """Beta(alpha, beta) belief about the failure rate; alpha counts failures, beta passes (plus the prior)."""

    alpha: float
    beta: float

    def __post_init__(self):
        _check_shape(self.alpha, self.beta)

    @property
    def mean(self) -> float:
        """Posterior mean failure rate alpha / (alpha + beta)."""
        return self.alpha / (self.alpha + self.beta)

    def cdf(self, x: float) -> float:
        """P(failure rate <= x)."""
        return betainc(self.alpha, self.beta, x)

    def sf(self, x: float) -> float:
        """P(failure rate > x), accurate where it is tiny."""
        return betaincc(self.alpha, self.beta, x)

    def quantile(self, q: float) -> float:
        """The failure rate below which the posterior puts probability q."""
        return betainc_inv(self.alpha, self.beta, q)

    def upper(self, confidence: float = 0.999) -> float:
        """Upper credible bound: the failure rate is below this with posterior probability `confidence`."""
        return self.quantile(_open_prob("confidence", confidence, " (e.g. 0.999)"))

    def lower(self, confidence: float = 0.999) -> float:
        """Lower credible bound: the failure rate is above this with posterior probability `confidence`."""
        return self.quantile(1.0 - _open_prob("confidence", confidence, " (e.g. 0.999)"))


def beta_posterior(n_tests: int, failures: int, prior: tuple[float, float] = (1.0, 1.0)) -> BetaPosterior:
    """Posterior over the failure rate after `failures` of `n_tests` failed; prior (1, 1) is uniform."""
    n = as_count("n_tests", n_tests)
    f = as_count("failures", failures)
    if f > n:
        raise ValueError(f"failures ({f}) cannot exceed n_tests ({n})")
    try:
        a0, b0 = prior
    except (TypeError, ValueError):
        raise ValueError(f"prior must be a pair (alpha, beta), got {prior!r}") from None
    a0, b0 = _check_shape(a0, b0)
    return BetaPosterior(a0 + f, b0 + (n - f))


# ---------------------------------------------------------------------------------------------
# sequential test


class Sprt:
    """Wald's sequential probability ratio test on Bernoulli failures.

    H0: failure rate <= p0 (the candidate is good) against H1: failure rate >= p1 (bad), p0 < p1.
    ``alpha`` bounds the chance of rejecting a good candidate, ``beta`` of accepting a bad one.
    ``update`` returns "accept" (H0 accepted: the candidate is good), "reject" (H1: bad) or "continue".
    A chunk is judged at its end (the order inside it is unknown); Wald's error inequalities still hold,
    since a decision is only taken beyond a boundary. A decision is final: later updates still count
    tests (``n``, ``failures``, ``llr``) but never change it.
    """

    def __init__(self, p0: float, p1: float, alpha: float = 1e-3, beta: float = 1e-3):
        self.p0 = _open_prob("p0", p0, " (the failure rate of a good candidate)")
        self.p1 = _open_prob("p1", p1, " (the failure rate of a bad candidate)")
        if not self.p0 < self.p1:
            raise ValueError(f"p0 must be below p1 (good rate < bad rate), got p0={p0!r}, p1={p1!r}")
        self.alpha = _open_prob("alpha", alpha, " (chance of rejecting a good candidate, e.g. 1e-3)")
        self.beta = _open_prob("beta", beta, " (chance of accepting a bad candidate, e.g. 1e-3)")
        if self.alpha + self.beta >= 1.0:
            raise ValueError(f"alpha + beta must be below 1, got {self.alpha + self.beta!r}")
        # log-likelihood ratio of H1 to H0, per failure and per pass
        self.llr_failure = math.log(self.p1) - math.log(self.p0)
        self.llr_pass = math.log1p(-self.p1) - math.log1p(-self.p0)
        self.reject_at = math.log1p(-self.beta) - math.log(self.alpha)  # log((1 - beta) / alpha)
        self.accept_at = math.log(self.beta) - math.log1p(-self.alpha)  # log(beta / (1 - alpha))
        self._n = 0
        self._failures = 0
        self._decision = "continue"

    @classmethod
    def for_epsilon(cls, epsilon: float, ratio: float = 10.0, alpha: float = 1e-3, beta: float = 1e-3) -> Sprt:
        """Bad means a failure rate >= epsilon, good means <= epsilon / ratio."""
        if _real("ratio", ratio) <= 1.0:
            raise ValueError(f"ratio must be > 1 (good rate = epsilon / ratio), got {ratio!r}")
        eps = _open_prob("epsilon", epsilon)
        return cls(eps / ratio, eps, alpha, beta)

    @property
    def n(self) -> int:
        """Tests seen so far."""
        return self._n

    @property
    def failures(self) -> int:
        """Failures seen so far."""
        return self._failures

    @property
    def llr(self) -> float:
        """log P(data | p1) / P(data | p0): high means bad, low means good."""
        return self._failures * self.llr_failure + (self._n - self._failures) * self.llr_pass

    @property
    def decision(self) -> str:
        """The decision so far: "accept" (good), "reject" (bad) or "continue"."""
        return self._decision

    def passes_to_accept(self) -> int:
        """Further consecutive passing tests that would reach "accept" (0 once decided)."""
        if self._decision != "continue":
            return 0
        return max(1, math.ceil((self.accept_at - self.llr) / self.llr_pass))

    def update(self, n_new_tests: int, n_new_failures: int = 0) -> str:
        """Add a chunk of tests with its failures; return the (sticky) decision."""
        k = as_count("n_new_tests", n_new_tests)
        f = as_count("n_new_failures", n_new_failures)
        if f > k:
            raise ValueError(f"n_new_failures ({f}) cannot exceed n_new_tests ({k})")
        self._n += k
        self._failures += f
        if self._decision == "continue":
            llr = self.llr
            if llr >= self.reject_at:
                self._decision = "reject"
            elif llr <= self.accept_at:
                self._decision = "accept"
        return self._decision

    def __repr__(self) -> str:
        return (f"Sprt(p0={self.p0!r}, p1={self.p1!r}, alpha={self.alpha!r}, beta={self.beta!r}; "
                f"n={self._n}, failures={self._failures}, llr={self.llr:.4g}, decision={self._decision!r})")


# ---------------------------------------------------------------------------------------------
# words


def format_count(n: int) -> str:
    """Thousands separators: 30000 -> '30,000'."""
    return f"{as_count('count', n):,}"


def format_rate(x: float, round_up: bool = True) -> str:
    """Three significant digits: 0.0123 -> '0.0123', 2.302e-4 -> '2.31e-04'.

    Rounds up by default, so a printed upper bound is still a bound (float noise below 1e-9 relative
    is not rounded up: 1e-3 prints as '0.001').
    """
    x = _real("rate", x)
    if x < 0.0 or not math.isfinite(x):
        raise ValueError(f"a rate must be finite and >= 0, got {x!r}")
    if x == 0.0:
        return "0"
    exp10 = math.floor(math.log10(x))
    scaled = x / 10.0**exp10 * 100.0  # in [100, 1000) up to rounding
    digits = math.floor(scaled)
    if not round_up:
        digits = round(scaled)
    elif scaled - digits > 1e-9 * scaled:
        digits += 1
    if digits >= 1000:
        digits, exp10 = digits // 10, exp10 + 1
    if exp10 >= -2:  # 0.01 and above: plain decimal
        return format(Decimal(digits).scaleb(exp10 - 2).normalize(), "f")
    mantissa = format(Decimal(digits).scaleb(-2).normalize(), "f")
    return f"{mantissa}e-{-exp10:02d}"


def _percent(delta: float) -> str:
    """1 - delta as a percentage, delta to 3 significant digits rounded up: 1e-3 -> '99.9', 0.05 -> '95'."""
    return format(Decimal(100) - Decimal(format_rate(100.0 * delta)), "f")


def _tests(n: int, noun: str = "test") -> str:
    return f"{format_count(n)} {noun}{'' if n == 1 else 's'}"


def confidence_sentence(passed: bool, n_tests: int, delta: float, exhaustive: bool = False,
                        domain_size: int | None = None, *, failures: int | None = None) -> str:
    """One line for a verdict.

    >>> confidence_sentence(True, 65_536, 1e-3, exhaustive=True)
    'proved over all 65,536 inputs'
    >>> confidence_sentence(False, 30_000, 1e-3, failures=3)
    'failed 3 of 30,000 tests'
    """
    n = as_count("n_tests", n_tests)
    d = _open_prob("delta", delta, _DELTA_HINT)
    size = None if domain_size is None else as_count("domain_size", domain_size, minimum=1)
    f = None if failures is None else as_count("failures", failures)
    if f is not None and f > n:
        raise ValueError(f"failures ({f}) cannot exceed n_tests ({n})")
    if bool(passed):
        if f:
            raise ValueError(f"a passing verdict cannot have failures ({f})")
        if exhaustive:
            if size is None and n == 0:
                raise ValueError("an exhaustive pass needs n_tests or domain_size > 0")
            if size is not None and n < size:
                raise ValueError(f"an exhaustive pass must cover the domain: {n} tests < domain_size {size}")
            return f"proved over all {_tests(size if size is not None else n, 'input')}"
        if n == 0:
            return "no tests run: no bound on the failure rate"
        eps = format_rate(epsilon_bound(n, d))
        return f"failure rate ≤ {eps} with confidence {_percent(d)}% over {_tests(n)}"
    if exhaustive:
        where = f"all {_tests(size, 'input')}" if size is not None else _tests(n, "input")
    else:
        where = _tests(n)
    if not f:  # failed for another reason (e.g. a trivial reference), or the count is unknown
        return f"failed within {where}"
    return f"failed {format_count(f)} of {where}"
