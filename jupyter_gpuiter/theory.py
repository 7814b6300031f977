"""Latency / energy / risk model of one iteration of the code loop (docs/theory.md).

A loop iteration is a sequence of named *phases*, each with a duration in milliseconds and the
device that is busy during it. Four ways to run the loop are modelled:

- ``cpu``: the paper's worked example — generate, copy the source over PCIe, compile on the CPU,
  execute and test (inputs across the bus, a host-side check), copy the results back;
- ``traditional``: the data-parallel compiler on the device, then on-device verification of N tests;
- ``neural``: k candidates sampled in batched decodes, all k verified on the device;
- ``hybrid``: neural plus, with probability (1-p)^k (no candidate passes), the traditional fallback.

The defaults reproduce the paper's example (arXiv 2512.11200: generate 10 ms, PCIe 1 ms, compile on
the CPU 100 ms, execute and test 10-1000 ms, copy back 1 ms); the device-side figures are stated
assumptions, chosen so the modelled speedups land in the paper's claimed ranges, and
:func:`calibrate` replaces them with medians measured by the Session.

>>> m = CostModel()
>>> m.latency("cpu")
212.0
>>> round(m.speedup("traditional"), 2)
3.73
>>> round(pass_at_k(0.5, 3), 3)
0.875
>>> k, n, ms = optimise(m, target_risk=1e-3, epsilon=1e-3, p=0.9)
>>> (k, n), false_accept_risk(1e-3, n, k) <= 1e-3
((2, 7598), True)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace

from .verification.confidence import as_count, as_probability, tests_needed
from .verification.confidence import false_accept_risk as _false_accept_risk

__all__ = [
    "PARADIGMS",
    "PHASE_DEVICE",
    "CostModel",
    "calibrate",
    "false_accept_risk",
    "optimise",
    "pass_at_k",
    "pass_at_k_unbiased",
]

#: The ways to run one loop iteration that the model compares, in the order the widgets draw them (the paper's
#: paradigms: "cpu" is the CPU loop, not a compiler mode; compilers.MODES is the registry of compiler modes).
PARADIGMS = ("cpu", "traditional", "neural", "hybrid")

#: Which device is busy during each phase (the other one idles): used by :meth:`CostModel.energy`.
#: Transfers are driven by the host; the CPU loop's "execute and test" is dominated by the kernel
#: running on the GPU.
PHASE_DEVICE = {
    "generate": "gpu",
    "pcie": "cpu",
    "cpu_compile": "cpu",
    "execute_test": "gpu",
    "gpu_compile": "gpu",
    "neural_sample": "gpu",
    "verify": "gpu",
    "fallback": "gpu",
    "copy_back": "cpu",
}


# ---------------------------------------------------------------------------------------------
# the cost model


@dataclass(frozen=True)
class CostModel:
    """Durations of the phases of one loop iteration (milliseconds) and power draws (watts).

    Every field can be set by the user (``CostModel(execute_test_ms=1000)``) or measured
    (:func:`calibrate`); ``calibrated`` names the fields that came from measurements.
    """

    # -- the paper's worked example (the CPU loop) --
    generate_ms: float = 10.0  # an AI model writes the candidate source (on the GPU)
    pcie_ms: float = 1.0  # source (and compiled code) across PCIe
    cpu_compile_ms: float = 100.0  # a conventional compiler on the host
    execute_test_ms: float = 100.0  # execute and test; the paper gives 10-1000 ms
    copy_back_ms: float = 1.0  # results back to the host
    # -- the device loop (assumptions; calibrate() replaces them with measurements) --
    gpu_compile_ms: float = 45.0  # traditional compiler on the device (assumed; puts traditional at 2-5x)
    neural_sample_ms: float = 5.0  # one batched decode of up to neural_batch candidates
    neural_batch: int = 64  # candidates per decode
    verify_setup_ms: float = 0.5  # launch / sync overhead of one verification pass
    verify_ms_per_test: float = 5e-5  # per test input per candidate, inputs resident on the device
    # -- energy --
    cpu_power_w: float = 150.0  # one busy server CPU socket
    gpu_power_w: float = 700.0  # H200 SXM board power
    cpu_idle_w: float = 50.0
    gpu_idle_w: float = 75.0
    # -- defaults for the knobs --
    n_tests: int = 6905  # tests per candidate: epsilon <= 1e-3 at delta = 1e-3, verify()'s default
    p: float = 0.9  # probability that one neural candidate is correct (assumed)
    calibrated: tuple[str, ...] = ()

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "calibrated":
                object.__setattr__(self, f.name, tuple(v))
            elif f.name in ("neural_batch", "n_tests"):
                object.__setattr__(self, f.name, as_count(f.name, v, minimum=1 if f.name == "neural_batch" else 0))
            elif f.name == "p":
                object.__setattr__(self, f.name, as_probability("p", v))
            else:
                if isinstance(v, bool):
                    raise ValueError(f"{f.name} must be a number, got the bool {v!r}")
                x = float(v)
                if not (0.0 <= x < math.inf):
                    raise ValueError(f"{f.name} must be finite and >= 0, got {v!r}")
                object.__setattr__(self, f.name, x)

    # -- pieces --

    def _args(self, mode: str, k, n_tests, p) -> tuple[int, int, float]:
        if mode not in PARADIGMS:
            raise ValueError(f"unknown mode {mode!r}: expected one of {', '.join(PARADIGMS)}")
        k = as_count("k (number of candidates)", k, minimum=1)
        n = self.n_tests if n_tests is None else as_count("n_tests", n_tests)
        pp = self.p if p is None else as_probability("p", p)
        return k, n, pp

    def verify_ms(self, k: int = 1, n_tests: int | None = None) -> float:
        """One on-device verification pass: k candidates x N tests (0 when no test runs)."""
        k = as_count("k (number of candidates)", k, minimum=1)
        n = self.n_tests if n_tests is None else as_count("n_tests", n_tests)
        return 0.0 if n == 0 else self.verify_setup_ms + k * n * self.verify_ms_per_test

    def neural_ms(self, k: int = 1) -> float:
        """Sampling k candidates: ceil(k / neural_batch) batched decodes."""
        k = as_count("k (number of candidates)", k, minimum=1)
        return self.neural_sample_ms * math.ceil(k / self.neural_batch)

    def breakdown(self, mode: str, k: int = 1, n_tests: int | None = None, p: float | None = None) -> dict[str, float]:
        """Expected milliseconds per phase of one iteration (phase names: :data:`PHASE_DEVICE`)."""
        k, n, pp = self._args(mode, k, n_tests, p)
        if mode == "cpu":
            return {"generate": self.generate_ms, "pcie": self.pcie_ms, "cpu_compile": self.cpu_compile_ms,
                    "execute_test": self.execute_test_ms, "copy_back": self.copy_back_ms}
        if mode == "traditional":
            return {"generate": self.generate_ms, "gpu_compile": self.gpu_compile_ms,
                    "verify": self.verify_ms(1, n), "copy_back": self.copy_back_ms}
        phases = {"generate": self.generate_ms, "neural_sample": self.neural_ms(k), "verify": self.verify_ms(k, n)}
        if mode == "hybrid":  # no candidate passed (probability (1-p)^k): compile traditionally and test that
            phases["fallback"] = (1.0 - pass_at_k(pp, k)) * (self.gpu_compile_ms + self.verify_ms(1, n))
        phases["copy_back"] = self.copy_back_ms
        return phases

    # -- the model --

    def latency(self, mode: str, k: int = 1, n_tests: int | None = None, p: float | None = None) -> float:
        """Expected latency of one iteration in milliseconds.

        cpu:          generate + pcie + cpu_compile + execute_test + copy_back
        traditional:  generate + gpu_compile + verify(1, N) + copy_back
        neural:       generate + neural(k) + verify(k, N) + copy_back
        hybrid:       neural + (1-p)^k * (gpu_compile + verify(1, N))
        with verify(k, N) = verify_setup_ms + k N verify_ms_per_test and
        neural(k) = neural_sample_ms * ceil(k / neural_batch).
        ``n_tests`` and ``p`` default to the model's fields; cpu and traditional ignore k and p.
        """
        return math.fsum(self.breakdown(mode, k, n_tests, p).values())

    def energy(self, mode: str, k: int = 1, n_tests: int | None = None, p: float | None = None) -> float:
        """Expected energy of one iteration in joules: per phase, its duration times the busy device's
        power plus the other device's idle power."""
        total = 0.0
        for phase, ms in self.breakdown(mode, k, n_tests, p).items():
            if PHASE_DEVICE[phase] == "gpu":
                watts = self.gpu_power_w + self.cpu_idle_w
            else:
                watts = self.cpu_power_w + self.gpu_idle_w
            total += ms * 1e-3 * watts
        return total

    def speedup(self, mode: str, k: int = 1, n_tests: int | None = None, p: float | None = None) -> float:
        """latency("cpu") / latency(mode): how many times faster than the CPU loop."""
        return self.latency("cpu", k, n_tests, p) / self.latency(mode, k, n_tests, p)

    def replace(self, **changes) -> CostModel:
        """A copy with some fields changed (validated)."""
        return replace(self, **changes)


# ---------------------------------------------------------------------------------------------
# probabilities


def pass_at_k(p: float, k: int) -> float:
    """Probability that at least one of k independent candidates, each correct with probability p, is
    correct: ``1 - (1-p)**k`` (computed as ``-expm1(k log1p(-p))``)."""
    pp = as_probability("p", p)
    kk = as_count("k", k)
    if kk == 0:
        return 0.0
    if pp == 1.0:
        return 1.0
    return -math.expm1(kk * math.log1p(-pp))


def false_accept_risk(epsilon: float, n_tests: int, k: int = 1) -> float:
    """Bound ``min(1, k (1-eps)**N)`` on the chance that one of k candidates whose failure rate is at
    least epsilon passes all N of its tests (union bound; ``verify.confidence.false_accept_risk``)."""
    return _false_accept_risk(epsilon, n_tests, k)


def pass_at_k_unbiased(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator of Chen et al. 2021 from n samples of which c are correct:
    ``1 - C(n-c, k) / C(n, k)``.

    Exact integer arithmetic (one correctly rounded division) while the binomials are of moderate
    size, otherwise the product ``prod_{i=n-c+1}^{n} (1 - k/i)`` in logarithms.

    >>> pass_at_k_unbiased(10, 3, 1)
    0.3
    """
    n = as_count("n", n, minimum=1)
    c = as_count("c", c)
    k = as_count("k", k, minimum=1)
    if c > n:
        raise ValueError(f"c (correct samples) cannot exceed n (samples): c={c}, n={n}")
    if k > n:
        raise ValueError(f"k cannot exceed the number of samples n: k={k}, n={n}")
    if n - c < k:
        return 1.0
    if c == 0:
        return 0.0
    if min(k, n - k) <= 4096:
        total = math.comb(n, k)
        return (total - math.comb(n - c, k)) / total
    log_fail = math.fsum(math.log1p(-k / i) for i in range(n - c + 1, n + 1))
    return -math.expm1(log_fail)


# ---------------------------------------------------------------------------------------------
# the (k, N) optimiser


def _tests_for_risk(target_risk: float, epsilon: float, k: int) -> int:
    """Smallest N with ``k (1-eps)**N <= target``: tests_needed(eps, target/k), settled against the bound."""
    n = tests_needed(epsilon, target_risk / k)
    while n > 0 and false_accept_risk(epsilon, n - 1, k) <= target_risk:
        n -= 1
    while false_accept_risk(epsilon, n, k) > target_risk:
        n += 1
    return n


def optimise(model: CostModel, target_risk: float, epsilon: float, p: float | None = None,
             ks: Iterable[int] = range(1, 65), mode: str = "hybrid",
             n_max: int | None = None) -> tuple[int, int, float]:
    """Choose (k, N) minimising the modelled latency of ``mode`` subject to false-accept risk
    ``k (1-eps)**N <= target_risk``; returns ``(k, n_tests, latency_ms)``.

    For each k the smallest N meeting the risk is ``tests_needed(epsilon, target_risk / k)`` (the same
    condition: ``1 - (target/k)**(1/N) <= eps`` iff ``k (1-eps)**N <= target``); latency grows with N,
    so that N is the best for its k, and the answer is the k with the least latency (ties: smaller k).
    ``n_max`` (e.g. the input pool's budget) drops the ks that would need more tests.

    >>> optimise(CostModel(), 1e-3, 1e-2, p=0.5, ks=[1, 2, 4])[:2]
    (4, 826)
    """
    if mode not in ("traditional", "neural", "hybrid"):
        raise ValueError(f"optimise needs a mode that verifies on the device (traditional, neural, hybrid), got {mode!r}")
    target = float(target_risk)
    if not 0.0 < target < 1.0:
        raise ValueError(f"target_risk must be strictly between 0 and 1, got {target_risk!r}")
    eps = float(epsilon)
    if not 0.0 < eps < 1.0:
        raise ValueError(f"epsilon must be strictly between 0 and 1, got {epsilon!r}")
    best = None
    for k in ks:
        k = as_count("k", k, minimum=1)
        n = _tests_for_risk(target, eps, k)
        if n_max is not None and n > n_max:
            continue
        ms = model.latency(mode, k, n, p)
        if best is None or ms < best[2] or (ms == best[2] and k < best[0]):
            best = (k, n, ms)
    if best is None:
        raise ValueError(f"no k in {ks!r} meets risk {target!r} at epsilon {eps!r} within n_max={n_max} tests")
    return best


# ---------------------------------------------------------------------------------------------
# calibration from a Session's history


def _median_ms(values: list[float]) -> float | None:
    return statistics.median(values) * 1e3 if values else None


def _theil_sen(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(slope, intercept) of t = intercept + slope * n by Theil-Sen (median of pairwise slopes), or None
    when fewer than two distinct n or a slope that is not positive (timer noise)."""
    points = points[-200:]  # O(m^2) pairs
    slopes = [(t2 - t1) / (n2 - n1) for i, (n1, t1) in enumerate(points) for n2, t2 in points[i + 1:] if n2 != n1]
    if not slopes:
        return None
    slope = statistics.median(slopes)
    if slope <= 0.0:
        return None
    return slope, max(0.0, statistics.median(t - slope * n for n, t in points))


def calibrate(model: CostModel, history) -> CostModel:
    """A copy of ``model`` with the device-side durations replaced by medians measured in a Session's
    history (a list of ``session.Iteration``, or the Session itself). Fields without measurements keep
    their values; ``calibrated`` lists the replaced ones.

    - ``gpu_compile_ms``: median ``seconds["compile"]`` of "compile" iterations that were not cache hits
      and whose ``mode`` (or ``extra["mode"]``), if recorded, is traditional (for mode auto: whose
      ``extra["path"]``, the compiler that ran, is);
    - ``neural_sample_ms``: the same for "compile" iterations whose mode is "neural";
    - ``verify_ms_per_test`` and ``verify_setup_ms``: from the verification passes, each a point
      (work W = candidates x tests, time t): "verify" iterations give W = ``verdict.tests_run`` and
      t = ``seconds["execute_and_compare"]``; "verify_batch" iterations that record
      ``extra["candidates"]`` and ``extra["tests"]`` give t = ``seconds["verify"]``. With two or more
      distinct W, t = a + b W is fitted by Theil-Sen (the median of the pairwise slopes, then the
      median intercept): ``verify_ms_per_test = b`` and ``verify_setup_ms`` = the median
      ``seconds["setup"]`` of "verify" iterations plus a. Otherwise the median of t / W (which counts
      the fixed cost per pass as per-test cost, so it is pessimistic for small N) and the median setup.
    """
    entries = list(getattr(history, "history", history))
    compiles, neural, setups, work = [], [], [], []
    for it in entries:
        kind = getattr(it, "kind", None)
        seconds = getattr(it, "seconds", None) or {}
        extra = getattr(it, "extra", None) or {}
        if kind == "compile" and not getattr(it, "cache_hit", False) and "compile" in seconds:
            mode = getattr(it, "mode", None) or extra.get("mode", "traditional")
            if mode == "auto":  # auto picks a compiler per batch: "path" records which one ran
                mode = extra.get("path")
            if mode == "traditional":
                compiles.append(seconds["compile"])
            elif mode == "neural":
                neural.append(seconds["compile"])
        elif kind == "verify":
            if "setup" in seconds:
                setups.append(seconds["setup"])
            verdict = getattr(it, "verdict", None)
            n = getattr(verdict, "tests_run", 0) if verdict is not None else extra.get("tests", 0)
            if n and "execute_and_compare" in seconds:
                work.append((n, seconds["execute_and_compare"]))
        elif kind == "verify_batch" and "verify" in seconds:
            w = extra.get("candidates", 0) * extra.get("tests", 0)
            if w:
                work.append((w, seconds["verify"]))
    changes = {"gpu_compile_ms": _median_ms(compiles), "neural_sample_ms": _median_ms(neural),
               "verify_setup_ms": _median_ms(setups), "verify_ms_per_test": None}
    fit = _theil_sen(work)
    if fit is not None:
        changes["verify_ms_per_test"] = fit[0] * 1e3
        if setups:
            changes["verify_setup_ms"] += fit[1] * 1e3
    elif work:
        changes["verify_ms_per_test"] = _median_ms([t / w for w, t in work])
    changes = {k: v for k, v in changes.items() if v is not None}
    done = tuple(dict.fromkeys((*model.calibrated, *changes)))
    return replace(model, **changes, calibrated=done)
