"""The latency / energy / risk model (theory.py): hand-computed values, brute-force references."""

import doctest
import itertools
import math
import statistics
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jupyter_gpuiter as gi
from jupyter_gpuiter import theory as T
from jupyter_gpuiter.session import Iteration
from jupyter_gpuiter.theory import CostModel, calibrate, false_accept_risk, optimise, pass_at_k, pass_at_k_unbiased
from jupyter_gpuiter.verification.verdict import Verdict

SETTINGS = settings(max_examples=100, deadline=None)


# ---------------------------------------------------------------- latency and energy, by hand


def test_paper_worked_example_cpu_loop():
    m = CostModel()
    assert m.latency("cpu") == 10 + 1 + 100 + 100 + 1 == 212
    assert m.breakdown("cpu") == {"generate": 10, "pcie": 1, "cpu_compile": 100, "execute_test": 100, "copy_back": 1}
    # the paper's 10-1000 ms range for execute and test
    assert CostModel(execute_test_ms=10).latency("cpu") == 122
    assert CostModel(execute_test_ms=1000).latency("cpu") == 1112
    # the CPU loop ignores k, N and p
    assert m.latency("cpu", k=50, n_tests=10, p=0.1) == 212


def test_device_modes_by_hand():
    m = CostModel()
    verify_1 = 0.5 + 6905 * 5e-5
    assert m.latency("traditional") == pytest.approx(10 + 45 + verify_1 + 1)
    assert m.latency("neural") == pytest.approx(10 + 5 + verify_1 + 1)
    assert m.latency("hybrid") == pytest.approx(10 + 5 + verify_1 + 1 + 0.1 * (45 + verify_1))
    # k candidates: k x N tests in one pass; 65 candidates need two decodes of 64
    assert m.latency("neural", k=8, n_tests=1000) == pytest.approx(10 + 5 + 0.5 + 8 * 1000 * 5e-5 + 1)
    assert m.latency("neural", k=65, n_tests=1000) == pytest.approx(10 + 10 + 0.5 + 65 * 1000 * 5e-5 + 1)
    assert m.latency("hybrid", k=3, n_tests=1000, p=0.5) == pytest.approx(
        10 + 5 + 0.5 + 3000 * 5e-5 + 1 + 0.125 * (45 + 0.5 + 1000 * 5e-5))
    # no tests: no verification pass
    assert m.verify_ms(4, 0) == 0.0
    assert m.latency("traditional", n_tests=0) == 10 + 45 + 1


def test_speedups_land_in_the_papers_ranges_with_the_defaults():
    m = CostModel()
    assert m.speedup("cpu") == 1.0
    assert 2.0 <= m.speedup("traditional") <= 5.0
    assert 10.0 <= m.speedup("neural") <= 100.0
    assert m.speedup("traditional") == pytest.approx(212 / m.latency("traditional"))
    # at the low end of the paper's execute-and-test range traditional is still >= 2x
    assert 2.0 <= CostModel(execute_test_ms=10).speedup("traditional") <= 5.0


def test_energy_by_hand():
    m = CostModel()
    gpu_busy, cpu_busy = 700 + 50, 150 + 75  # busy device + the other idle
    cpu_j = (10 * gpu_busy + 1 * cpu_busy + 100 * cpu_busy + 100 * gpu_busy + 1 * cpu_busy) / 1000
    assert m.energy("cpu") == pytest.approx(cpu_j) == pytest.approx(105.45)
    lat = m.breakdown("traditional")
    trad_j = ((lat["generate"] + lat["gpu_compile"] + lat["verify"]) * gpu_busy + lat["copy_back"] * cpu_busy) / 1000
    assert m.energy("traditional") == pytest.approx(trad_j)
    assert CostModel(gpu_power_w=0, cpu_power_w=0, gpu_idle_w=0, cpu_idle_w=0).energy("hybrid") == 0.0


def test_breakdown_sums_to_latency_for_every_mode():
    m = CostModel(execute_test_ms=333)
    for mode in T.PARADIGMS:
        for k in (1, 7, 64, 100):
            b = m.breakdown(mode, k, 12345, 0.3)
            assert set(b) <= set(T.PHASE_DEVICE)
            assert m.latency(mode, k, 12345, 0.3) == pytest.approx(sum(b.values()))


def test_bad_arguments():
    m = CostModel()
    with pytest.raises(ValueError, match="unknown mode"):
        m.latency("gpu")
    with pytest.raises(ValueError, match="k"):
        m.latency("neural", k=0)
    with pytest.raises(ValueError, match="p"):
        m.latency("hybrid", p=1.5)
    with pytest.raises(ValueError, match="cpu_compile_ms"):
        CostModel(cpu_compile_ms=-1)
    with pytest.raises(ValueError, match="gpu_compile_ms"):
        CostModel(gpu_compile_ms=math.inf)
    with pytest.raises(ValueError, match="neural_batch"):
        CostModel(neural_batch=0)
    with pytest.raises(ValueError):
        m.replace(p=2)
    assert m.replace(execute_test_ms=10).latency("cpu") == 122


# ---------------------------------------------------------------- probabilities


def test_pass_at_k_by_hand():
    assert pass_at_k(0.5, 1) == 0.5
    assert pass_at_k(0.5, 3) == pytest.approx(0.875)
    assert pass_at_k(0.9, 2) == pytest.approx(0.99)
    assert pass_at_k(0.0, 10) == 0.0
    assert pass_at_k(1.0, 1) == 1.0
    assert pass_at_k(0.3, 0) == 0.0
    assert pass_at_k(1e-12, 3) == pytest.approx(3e-12, rel=1e-9)  # no cancellation
    with pytest.raises(ValueError):
        pass_at_k(-0.1, 2)
    with pytest.raises(ValueError):
        pass_at_k(0.5, -1)


@SETTINGS
@given(st.floats(0, 1), st.integers(0, 200))
def test_pass_at_k_matches_the_formula(p, k):
    assert pass_at_k(p, k) == pytest.approx(1 - (1 - p) ** k, abs=1e-12)


def test_false_accept_risk_by_hand():
    assert false_accept_risk(0.01, 100) == pytest.approx(0.99**100)
    assert false_accept_risk(0.01, 100, 2) == pytest.approx(2 * 0.99**100)
    assert false_accept_risk(1e-3, 6905, 8) == pytest.approx(8 * (1 - 1e-3) ** 6905)
    assert false_accept_risk(0.5, 1, 4) == 1.0  # min(1, ...)
    assert false_accept_risk(0.2, 0, 1) == 1.0


def brute_force_pass_at_k(n, c, k):
    """Over all k-subsets of n samples (c correct): the share that contains a correct one."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(samples[i] for i in s) for s in subsets), len(subsets))


def test_unbiased_estimator_against_brute_force():
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k_unbiased(n, c, k) == pytest.approx(float(brute_force_pass_at_k(n, c, k)), abs=1e-15)


def test_unbiased_estimator_is_unbiased():
    """E over c ~ Binomial(n, p) of the estimator is exactly pass@k = 1 - (1-p)^k."""
    for n, k, p in [(10, 1, 0.3), (10, 4, 0.3), (20, 7, 0.05), (12, 12, 0.5)]:
        expectation = math.fsum(math.comb(n, c) * p**c * (1 - p) ** (n - c) * pass_at_k_unbiased(n, c, k)
                                for c in range(n + 1))
        assert expectation == pytest.approx(pass_at_k(p, k), rel=1e-12)


def test_unbiased_estimator_stable_and_both_paths_agree():
    # tiny values keep their relative accuracy (no 1 - r cancellation)
    exact = 1 - Fraction(math.comb(10**6 - 1, 3), math.comb(10**6, 3))
    assert pass_at_k_unbiased(10**6, 1, 3) == pytest.approx(float(exact), rel=1e-14)
    # the log-product path (min(k, n-k) > 4096) against exact fractions
    n, c, k = 20_000, 3, 5_000
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k_unbiased(n, c, k) == pytest.approx(float(exact), rel=1e-12)
    assert pass_at_k_unbiased(10, 0, 3) == 0.0
    assert pass_at_k_unbiased(10, 8, 3) == 1.0  # n - c < k
    for bad in [(0, 0, 1), (5, 6, 1), (5, 2, 0), (5, 2, 6)]:
        with pytest.raises(ValueError):
            pass_at_k_unbiased(*bad)


# ---------------------------------------------------------------- the optimiser


def brute_force_optimum(model, target, eps, p, ks, n_limit, mode="hybrid"):
    best = None
    for k in ks:
        for n in range(n_limit):
            if false_accept_risk(eps, n, k) <= target:
                ms = model.latency(mode, k, n, p)
                if best is None or ms < best[2]:
                    best = (k, n, ms)
                break  # latency grows with N: the first admissible N is this k's best
    return best


def brute_force_optimum_full(model, target, eps, p, ks, n_limit, mode="hybrid"):
    """No monotonicity assumption: every (k, N) of the grid."""
    cands = [(model.latency(mode, k, n, p), k, n) for k in ks for n in range(n_limit)
             if false_accept_risk(eps, n, k) <= target]
    ms, k, n = min(cands)
    return k, n, ms


@pytest.mark.parametrize("model, target, eps, p", [
    (CostModel(), 1e-2, 0.05, 0.9),
    (CostModel(), 1e-3, 0.02, 0.5),
    (CostModel(), 1e-3, 0.02, 0.05),
    (CostModel(verify_ms_per_test=1e-2, gpu_compile_ms=200), 1e-3, 0.02, 0.3),
    (CostModel(neural_batch=2, neural_sample_ms=3), 1e-2, 0.05, 0.7),
])
def test_optimiser_meets_target_and_is_minimal(model, target, eps, p):
    ks = range(1, 9)
    k, n, ms = optimise(model, target, eps, p, ks=ks)
    assert false_accept_risk(eps, n, k) <= target
    assert ms == pytest.approx(model.latency("hybrid", k, n, p))
    assert (k, n, ms) == brute_force_optimum(model, target, eps, p, ks, 2000)
    bk, bn, bms = brute_force_optimum_full(model, target, eps, p, ks, 1000)
    assert (k, n) == (bk, bn) and ms == pytest.approx(bms)
    # n is the least admissible for its k
    assert false_accept_risk(eps, n - 1, k) > target


def test_optimiser_other_modes_and_limits():
    m = CostModel()
    k, n, _ = optimise(m, 1e-3, 1e-2, mode="traditional")
    assert k == 1  # more candidates only cost more tests in the traditional loop
    assert n == T.tests_needed(1e-2, 1e-3)
    k, n, _ = optimise(m, 1e-3, 1e-2, p=0.2, n_max=700)
    assert n <= 700 and false_accept_risk(1e-2, n, k) <= 1e-3
    with pytest.raises(ValueError, match="no k"):
        optimise(m, 1e-3, 1e-2, n_max=10)
    with pytest.raises(ValueError):
        optimise(m, 0.0, 1e-2)
    with pytest.raises(ValueError):
        optimise(m, 1e-3, 1.5)
    with pytest.raises(ValueError):
        optimise(m, 1e-3, 1e-2, mode="cpu")


@SETTINGS
@given(st.floats(1e-9, 0.5), st.floats(1e-5, 0.5), st.integers(1, 64))
def test_tests_for_risk_is_least(target, eps, k):
    n = T._tests_for_risk(target, eps, k)
    assert false_accept_risk(eps, n, k) <= target
    assert n == 0 or false_accept_risk(eps, n - 1, k) > target


# ---------------------------------------------------------------- calibration


def it(kind, seconds, cache_hit=False, tests=None, **extra):
    verdict = None if tests is None else Verdict(True, tests, 0, 0.01, 1e-3)
    return Iteration(kind, "f", seconds, cache_hit, verdict, extra)


def test_calibrate_uses_medians_of_measurements():
    m = CostModel()
    history = [
        it("compile", {"compile": 0.010}),
        it("compile", {"compile": 0.030}),
        it("compile", {"compile": 0.020}),
        it("compile", {"compile": 0.000001}, cache_hit=True),  # a cache hit is not a compile
        it("compile", {"compile": 0.004}, mode="neural"),
        it("verify", {"compile": 0.1, "setup": 0.002, "execute_and_compare": 0.004}, tests=1000),
        it("verify", {"compile": 0.1, "setup": 0.001, "execute_and_compare": 0.004}, tests=1000),
        it("verify", {"compile": 0.1, "setup": 0.003, "execute_and_compare": 0.004}, tests=1000),
    ]
    c = calibrate(m, history)
    assert c.gpu_compile_ms == pytest.approx(20.0)
    assert c.neural_sample_ms == pytest.approx(4.0)
    assert c.verify_setup_ms == pytest.approx(2.0)
    assert c.verify_ms_per_test == pytest.approx(4e-3)  # one N only: median of t / N
    assert set(c.calibrated) == {"gpu_compile_ms", "neural_sample_ms", "verify_setup_ms", "verify_ms_per_test"}
    # what was not measured keeps its value
    for name in ("generate_ms", "pcie_ms", "cpu_compile_ms", "execute_test_ms", "copy_back_ms", "gpu_power_w"):
        assert getattr(c, name) == getattr(m, name)
    assert m.calibrated == ()  # the input is not changed


def test_calibrate_fits_a_line_when_test_counts_differ():
    # t = 2 ms + 1e-6 s per test (1e-3 ms), exact: Theil-Sen recovers it
    history = [it("verify", {"setup": 0.001, "execute_and_compare": 0.002 + 1e-6 * n}, tests=n)
               for n in (100, 1000, 10_000, 100_000)]
    history.append(it("verify_batch", {"compile": 0.1, "verify": 0.002 + 1e-6 * 64 * 500}, candidates=64, tests=500))
    history.append(it("verify_batch", {"compile": 0.1, "verify": 1.0}))  # no counts recorded: skipped
    c = calibrate(CostModel(), history)
    assert c.verify_ms_per_test == pytest.approx(1e-3)
    assert c.verify_setup_ms == pytest.approx(1.0 + 2.0)
    assert c.gpu_compile_ms == CostModel().gpu_compile_ms  # no compile iterations


def test_calibrate_counts_auto_compiles_by_the_compiler_that_ran():
    history = [it("compile", {"compile": 0.010}, mode="auto", path="traditional"),
               it("compile", {"compile": 0.030}, mode="auto", path="traditional"),
               it("compile", {"compile": 0.0001}, mode="auto", path="serial"),  # CPython, not the device compiler
               it("compile", {"compile": 0.5}, mode="hybrid", path="neural")]  # sampling plus verification
    c = calibrate(CostModel(), history)
    assert c.gpu_compile_ms == pytest.approx(20.0)
    assert c.calibrated == ("gpu_compile_ms",)


def test_calibrate_without_measurements_changes_nothing():
    m = CostModel(execute_test_ms=500)
    assert calibrate(m, []) == m
    assert calibrate(m, [it("compile", {"compile": 1.0}, cache_hit=True)]) == m


def test_calibrate_from_a_real_session():
    s = gi.Session("cpu")
    for n in (1_000, 10_000, 100_000):
        s.verify("def f(x):\n    return x * x + 1\n", "def f(x):\n    return x ** 2 + 1\n", tests=n)
    for src in ("def g(x):\n    return x + 2\n", "def h(x):\n    return x * 3\n"):
        s.compile(src, mode="traditional")  # verify's own compiles ran the serial compiler (mode auto)
    c = calibrate(CostModel(), s)  # the Session itself, or s.history
    assert c == calibrate(CostModel(), s.history)
    compiles = [i.seconds["compile"] for i in s.history if i.kind == "compile" and not i.cache_hit
                and i.extra.get("path") == "traditional"]
    assert c.gpu_compile_ms == pytest.approx(1e3 * statistics.median(compiles))
    assert 0 < c.verify_ms_per_test < 1.0 and c.verify_setup_ms > 0
    assert set(c.calibrated) == {"gpu_compile_ms", "verify_setup_ms", "verify_ms_per_test"}


# ---------------------------------------------------------------- docs


def test_module_doctests():
    result = doctest.testmod(T, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_theory_doc_examples(root):
    result = doctest.testfile(str(root / "docs" / "theory.md"), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
