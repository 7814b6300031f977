"""Statistics of probabilistic verification (docs/verification.md, "What a pass means"; theory.py uses the risk).

A candidate kernel that passes N independent tests drawn from the input distribution has, with
confidence 1 - delta, a failure rate (the probability that one random input fails) of at most
``eps = 1 - delta**(1/N)`` (about ``ln(1/delta)/N``). With k candidates checked at once, each gets
``delta/k`` (Bonferroni), so the chance that *any* bound is wrong stays <= delta. The Beta posterior
(``Verdict.posterior``) is the Bayesian counterpart; its distribution functions come from SciPy,
imported on first use. The bound itself is a closed form in ``math``.

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
import struct
from dataclasses import dataclass
from decimal import Decimal

__all__ = [
    "BetaPosterior",
    "as_count",
    "as_probability",
    "beta_posterior",
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
# the Beta posterior


def _special():
    """scipy.special, imported on first use: it would add about 0.1 s to ``import jupyter_gpuiter``."""
    import scipy.special

    return scipy.special


def _tail_slack(a: float, b: float) -> float:
    """Slack, relative to the tail, when checking SciPy's quantile: above the distribution function's own
    error, which grows with the shapes (below 1e-12 up to about 1e7, 3e-11 at 1e9), and below the
    inverse's: at shapes of a few thousand the inverse can be 1,400 ulps off (Beta(1559, 1594) at 1e-6)
    with the tail then 4.4e-11 from its target, which a fixed slack of 1e-10 let through."""
    return max(1e-12, 1e-19 * (a + b))
_ONE_BITS = 0x3FF0000000000000  # the bits of 1.0; doubles in [0, 1] are ordered as their bits


def _double(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<q", bits))[0]


def _check_shape(a, b) -> tuple[float, float]:
    a, b = _real("alpha", a), _real("beta", b)
    if not (0.0 < a < math.inf and 0.0 < b < math.inf):
        raise ValueError(f"Beta shape parameters must be positive and finite, got alpha={a!r}, beta={b!r}")
    return a, b


def _unit(name: str, value) -> float:
    x = _real(name, value)
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {x!r}")
    return x


@dataclass(frozen=True)
class BetaPosterior:
    """Beta(alpha, beta) belief about the failure rate; alpha counts failures, beta passes (plus the prior).

    The distribution functions are SciPy's (``scipy.special.betainc`` and relatives); each tail is
    computed directly, so a tiny tail probability or a quantile near 1 keeps its relative accuracy.
    """

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
        return float(_special().betainc(self.alpha, self.beta, _unit("x", x)))

    def sf(self, x: float) -> float:
        """P(failure rate > x), accurate where it is tiny."""
        return float(_special().betaincc(self.alpha, self.beta, _unit("x", x)))

    def quantile(self, q: float) -> float:
        """The failure rate below which the posterior puts probability q.

        SciPy's inverse, checked against SciPy's distribution function, the more reliable of the two:
        with scipy 1.17 the inverse is far off where a shape is exactly 1000 (999 failures, uniform
        prior), nan for tails below about 1e-17, and its tail is off by about 5e-17 * beta for beta up
        to 1e9. Where the check fails, bisection over the doubles, on the distribution function.
        """
        q = _unit("q", q)
        if q == 0.0 or q == 1.0:
            return q
        sc, a, b = _special(), self.alpha, self.beta
        if q <= 0.5:  # the lower tail, rising to q
            sign, target, tail = 1.0, q, sc.betainc
            x = float(sc.betaincinv(a, b, q))
        else:  # the upper tail, falling to 1 - q (exact here): its small values keep their digits
            sign, target, tail = -1.0, 1.0 - q, sc.betaincc
            x = float(sc.betainccinv(a, b, target))

        def past(t: float, slack: float = 0.0) -> bool:  # is t at or beyond the quantile (slack: relative)?
            return sign * (float(tail(a, b, t)) - target) >= -slack * target

        # x is the quantile, to 2 ulps and the distribution function's accuracy, if the tail crosses
        # the target between its neighbours
        slack = _tail_slack(a, b)
        if 0.0 <= x <= 1.0 and not past(max(0.0, x - 2.0 * math.ulp(x)), -slack) \
                and past(min(1.0, x + 2.0 * math.ulp(x)), slack):
            return x
        lo, hi = 0, _ONE_BITS  # not past at 0.0, past at 1.0
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if past(_double(mid)):
                hi = mid
            else:
                lo = mid
        return _double(hi)

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
                        domain_size: int | None = None, *, failures: int | None = None, noun: str = "test") -> str:
    """One line for a verdict; `noun` names a test ("row" for row kernels, where a test is one row).

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
        return f"failure rate ≤ {eps} with confidence {_percent(d)}% over {_tests(n, noun)}"
    if exhaustive:
        where = f"all {_tests(size, 'input')}" if size is not None else _tests(n, "input")
    else:
        where = _tests(n, noun)
    if not f:  # failed for another reason (e.g. a trivial reference), or the count is unknown
        return f"failed within {where}"
    return f"failed {format_count(f)} of {where}"
