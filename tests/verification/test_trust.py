"""Verdicts to trust: the reference sees the candidate's inputs, a correct kernel passes against its float64
version at the dtype's edges (fused and torch paths), counterexamples lie in the domain and fail on the
host, memory stays bounded, and bad options are clear ValueErrors."""

import gc
import json
import math
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import jupyter_gpuiter as gi
from jupyter_gpuiter.ir import ProgramBatch
from jupyter_gpuiter.verification import api
from jupyter_gpuiter.verification.compare import default_tolerances
from jupyter_gpuiter.verification.pools import exhaustive_inputs
from tests.support import ROOT

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
HOST = {"float16": np.float16, "bfloat16": np.float32, "float32": np.float32, "float64": np.float64}  # NumPy arrays
SQUARE, DOUBLE, EXP = ("def f(x):\n    return x * x\n", "def f(x):\n    return x * 2\n",
                       "def f(x):\n    return exp(x)\n")
BLACK_SCHOLES = Path(ROOT, "examples", "kernels", "black_scholes_call.py").read_text()
BS_DOMAIN = {"s": (5, 30), "t": (0.25, 10), "v": (0.1, 0.5)}


@pytest.fixture(params=["fused", "torch"])
def path(request, monkeypatch):
    """Run verify on the fused evaluator (CPU) or on the torch-op VM and compare.py (the CUDA path, here
    on CPU tensors)."""
    if request.param == "torch":
        monkeypatch.setattr(api, "FUSED_DEVICES", ())
    return request.param


def rounded(values, dtype: str) -> np.ndarray:
    """float64 values rounded to the dtype, as float64 (NumPy's casts; bfloat16 by torch)."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        if dtype == "bfloat16":
            return torch.from_numpy(values.astype(np.float32)).to(torch.bfloat16).double().numpy()
        if dtype == "float16":
            return values.astype(np.float32).astype(np.float16).astype(np.float64)
        return values.astype(dtype).astype(np.float64)


def host_fails(candidate: str, reference, inputs: dict, dtype: str, rtol=None, atol=None) -> bool:
    """Re-evaluate a counterexample on the host: the candidate Kernel on NumPy arrays of the dtype against
    the reference (source compiled in the dtype, or a NumPy callable), by compare.py's rule."""
    values = list(inputs.values())
    assert np.array_equal(rounded(values, dtype), values, equal_nan=True), f"inputs {inputs} are not {dtype} values"
    args = [np.array([v], dtype=HOST[dtype]) for v in values]
    got = float(np.asarray(gi.compile(candidate, dtype=dtype)(*args), dtype=np.float64)[0])
    if isinstance(reference, str):
        reference = gi.compile(reference, dtype=dtype)
    with np.errstate(all="ignore"):
        want = float(rounded(np.asarray(reference(*args), dtype=np.float64).reshape(-1)[:1], dtype)[0])
    d_rtol, d_atol = default_tolerances(dtype)
    rtol, atol = (d_rtol if rtol is None else rtol), (d_atol if atol is None else atol)
    close = got == want or (math.isnan(got) and math.isnan(want)) or (
        math.isfinite(got) and math.isfinite(want) and abs(got - want) <= atol + rtol * abs(want))
    return not close


def inside(inputs: dict, domain: dict) -> bool:
    return all(lo <= inputs[name] <= hi for name, (lo, hi) in domain.items())


# --- the reference sees exactly the candidate's inputs -----------------------------------------------


def test_float64_verification_against_a_python_reference_is_not_rounded_to_float32():
    v = gi.verify("def f(x):\n    return x - 0.1\n", lambda x: x - 0.1, dtype="float64")
    assert v.passed, v.counterexample


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_a_python_reference_receives_the_candidates_inputs(dtype):
    seen = []

    def reference(x):
        seen.append(x.copy())
        return x * 2

    v = gi.verify(DOUBLE, reference, dtype=dtype, tests=3000, seed=5)
    assert v.passed
    x = gi.current_session().pool.get(1, 3000, dtype, [None], 5)
    assert seen[0].dtype == HOST[dtype]
    np.testing.assert_array_equal(seen[0], x[0].to(torch.float64).numpy().astype(HOST[dtype]))


def test_a_narrower_reference_kernel_runs_wide_enough_for_the_inputs():
    src = "def f(x):\n    return x - 0.1\n"
    assert gi.verify(src, gi.compile(src, dtype="float32"), dtype="float64").passed  # ran in float64
    exact = "def f(x):\n    return x * 2 + 1\n"  # exact literals: only the inputs' rounding could differ
    assert gi.verify(exact, gi.compile(exact, dtype="bfloat16"), dtype="float16", exhaustive=True).passed  # float32


# --- a correct kernel passes against its float64 version, overflow and underflow included -----------


def edge_values(dtype: str) -> torch.Tensor:
    """Every value of a 16-bit dtype; for float32 and float64 the neighbours of where x * x, x * 2 and
    exp(x) overflow and underflow, of the largest and smallest values, and both signs."""
    if dtype in ("float16", "bfloat16"):
        return exhaustive_inputs(1, dtype)[0]
    t = TORCH[dtype]
    fi = torch.finfo(t)
    sub = float(torch.tensor(1, dtype={torch.float32: torch.int32, torch.float64: torch.int64}[t]).view(t))
    centres = [math.sqrt(fi.max), fi.max / 2, math.log(fi.max), fi.max, math.sqrt(fi.tiny), math.sqrt(sub),
               fi.tiny, sub, math.log(sub), math.log(fi.tiny), 1.0]
    vals = []
    for c in centres:
        x = torch.tensor(c, dtype=t)
        up, down = x.clone(), x.clone()
        for _ in range(40):
            vals += [float(up), float(down)]
            up = torch.nextafter(up, torch.tensor(math.inf, dtype=t))
            down = torch.nextafter(down, torch.tensor(-math.inf, dtype=t))
    vals += [0.0, math.inf, math.nan]
    return torch.tensor(vals + [-v for v in vals], dtype=torch.float64).to(t)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("src", [SQUARE, DOUBLE, EXP])
def test_a_correct_kernel_passes_against_its_float64_version(dtype, src, path):
    reference = gi.current_session().compile(src, dtype="float64")  # what %%gpucompile checks against by default
    if dtype == "float32":
        v = gi.verify(src, reference, dtype=dtype, tests=20_000)
        assert v.passed, v.counterexample
        # overflow, then underflow (outputs below atol: exact ops compare with atol=0, so the reference is
        # not near-constant under the tolerance in use)
        domains = {SQUARE: [(1.8e19, 1.9e19, None), (-1e-22, 1e-22, 0.0)],
                   DOUBLE: [(1.6e38, 1.75e38, None), (-1e-37, 1e-37, 0.0)],
                   EXP: [(88.5, 89.0, None), (-104.0, 2.0, None)]}[src]
        for lo, hi, atol in domains:
            v = gi.verify(src, reference, dtype=dtype, tests=20_000, domain={"x": (lo, hi)}, atol=atol)
            assert v.passed, (lo, hi, v.counterexample, v.trivial)
    else:
        v = gi.verify(src, reference, dtype=dtype, exhaustive=True)
        assert v.passed and v.exhaustive, v.counterexample
    if src != EXP:  # exact operations: the correctly rounded result, no tolerance needed
        exact = {"exhaustive": True} if dtype != "float32" else {"tests": 20_000}
        assert gi.verify(src, reference, dtype=dtype, rtol=0, atol=0, **exact).passed


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("src", [SQUARE, DOUBLE, EXP])
def test_compare_torch_accepts_the_rounded_float64_reference_at_the_edges(dtype, src):
    """_compare_torch (the CUDA path) on CPU tensors: overflow to inf matches a float64 reference beyond the
    dtype's range; a wrong kernel still fails there."""
    x = edge_values(dtype)[None]
    right = gi.compile(src, dtype=dtype).program
    wrong = gi.compile(src.replace("return ", "return 1.25 * "), dtype=dtype).program
    reference = api.Reference(gi.compile(src, dtype="float64"), 1, dtype)
    want = api._round_to(reference(x), dtype)
    rtol, atol = default_tolerances(dtype)
    if src != EXP:
        rtol = atol = 0.0  # exact operations
    cmp = api._compare_torch(ProgramBatch.from_results([right, wrong]), x, want, dtype, rtol, atol)
    assert cmp.failures[0] == 0 and cmp.evaluated[0] == x.shape[1], x[0, cmp.first_failure[0]]
    assert cmp.failures[1] > 0 and cmp.first_failure[1] >= 0
    # the same verdict from the fused evaluator
    fused_cmp = api._compare_fused(api.fused.ProgramArrays.from_programs([right, wrong]), x, want, dtype, rtol,
                                   atol, None)
    assert fused_cmp.failures.tolist() == cmp.failures.tolist()
    assert fused_cmp.first_failure.tolist() == cmp.first_failure.tolist()
    assert fused_cmp.evaluated.tolist() == cmp.evaluated.tolist()


# --- counterexamples: inside the domain, where the reference is defined, failing on the host --------


def test_black_scholes_counterexample_lies_in_the_domain_where_the_reference_is_defined(path):
    wrong = BLACK_SCHOLES.replace("0.5 * v * v", "0.6 * v * v")
    v = gi.verify(wrong, BLACK_SCHOLES, domain=BS_DOMAIN, tests=5000)
    assert not v.passed
    cx = v.counterexample
    assert inside(cx.inputs, BS_DOMAIN) and not math.isnan(cx.expected), cx
    assert host_fails(wrong, BLACK_SCHOLES, cx.inputs, "float32"), cx


def _bs_reference_defined_on_its_domain_only(s, k, t, r, v):
    """Black-Scholes in NumPy that refuses inputs outside the domain it was written for."""
    assert np.all((s >= 5) & (s <= 30)) and np.all((t >= 0.25) & (t <= 10)), "outside the domain"
    assert np.all((v >= 0.1) & (v <= 0.5)), "outside the domain"
    erf = np.vectorize(math.erf, otypes=[np.float64])
    sqrt_t = np.sqrt(t)
    d1 = (np.log(s / k) + (r + 0.5 * v * v) * t) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    return s * 0.5 * (1 + erf(d1 / np.sqrt(2))) - k * np.exp(-r * t) * 0.5 * (1 + erf(d2 / np.sqrt(2)))


def test_a_reference_that_raises_outside_its_domain_gives_a_fail_not_an_exception(path):
    wrong = BLACK_SCHOLES.replace("0.5 * v * v", "0.6 * v * v")
    v = gi.verify(wrong, _bs_reference_defined_on_its_domain_only, domain=BS_DOMAIN, tests=5000)
    assert not v.passed
    cx = v.counterexample
    assert inside(cx.inputs, BS_DOMAIN) and not math.isnan(cx.expected), cx
    assert host_fails(wrong, _bs_reference_defined_on_its_domain_only, cx.inputs, "float32"), cx


def test_a_reference_nan_start_moves_to_a_point_where_the_reference_is_defined():
    # the candidate gives numbers where log is nan (x < 0) and is wrong for x > 1 too: report the latter
    v = gi.verify("def f(x):\n    return log(abs(x)) + (x > 1)\n", "def f(x):\n    return log(x)\n", tests=3000)
    assert not v.passed and not math.isnan(v.counterexample.expected), v.counterexample
    # only where the reference is nan: that is the counterexample, and it is one
    v = gi.verify("def f(x):\n    return log(abs(x))\n", "def f(x):\n    return log(x)\n", tests=3000)
    cx = v.counterexample
    assert math.isnan(cx.expected) and not math.isnan(cx.got) and cx.inputs["x"] < 0, cx


def test_a_failure_the_host_does_not_reproduce_shows_what_the_device_compared(monkeypatch):
    """The torch path runs the candidate with torch ops and the reference on the host: where the two
    evaluators disagree (here a device exp 1% off), the counterexample shows the device's output."""
    from jupyter_gpuiter.runtime.torch_ops import TORCH_OPS

    monkeypatch.setattr(api, "FUSED_DEVICES", ())
    monkeypatch.setitem(TORCH_OPS, "exp", lambda x: torch.exp(x) * 1.01)
    v = gi.Session().verify(EXP, EXP, tests=2000, domain={"x": (-2, 2)})
    cx = v.counterexample
    assert not v.passed and -2 <= cx.inputs["x"] <= 2
    assert cx.got == pytest.approx(1.01 * math.exp(cx.inputs["x"]), rel=1e-5), cx
    assert cx.expected == pytest.approx(math.exp(cx.inputs["x"]), rel=1e-5), cx


KERNELS = [  # (source, constant to change, its parameters)
    ("def f(x):\n    return 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))\n", "0.044715", "x"),
    ("def f(x):\n    return log1p(exp(-abs(x))) + max(x, 0.0)\n", "0.0", "x"),
    ("def f(r, d):\n    a = abs(r)\n    return where(a <= d, 0.5 * r * r, d * (a - 0.5 * d))\n", "0.5 * d", "rd"),
    ("def f(x, y):\n    return sqrt(x) * log(y) + 1.5\n", "1.5", "xy"),
    ("def f(x):\n    return x * x * x - 3.0 * x + 2.0\n", "3.0", "x"),
    (BLACK_SCHOLES, "0.5 * v * v", "sktrv"),
]


@st.composite
def wrong_kernels(draw):
    src, const, params = draw(st.sampled_from(KERNELS))
    factor = draw(st.sampled_from([1.5, 0.7, 1.01, -1.0]))
    if const.replace(".", "").isdigit():
        wrong = src.replace(const, repr(float(const) * factor if float(const) else factor - 1.0), 1)
    else:
        wrong = src.replace(const, f"{factor!r} * {const}", 1)
    domain = {}
    for p in params:
        if draw(st.booleans()):
            lo = draw(st.floats(-50, 50, allow_nan=False).map(lambda v: round(v, 2)))
            width = draw(st.sampled_from([0.5, 3.0, 40.0]))
            domain[p] = (lo, lo + width)
    if src is BLACK_SCHOLES:
        domain.update(BS_DOMAIN)
    dtype = draw(st.sampled_from(["float32", "float64", "float16", "bfloat16"]))
    return src, wrong, domain, dtype, draw(st.integers(0, 3))


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=wrong_kernels())
def test_every_counterexample_is_in_the_domain_and_fails_on_the_host(case, path):
    src, wrong, domain, dtype, seed = case
    try:
        v = gi.verify(wrong, src, domain=domain, dtype=dtype, tests=2000, seed=seed)
    except ValueError as e:  # a domain with no value of a 16-bit dtype (e.g. beyond float16's range)
        assert "contains no finite" in str(e)
        return
    event("passed" if v.passed else "trivial" if v.trivial else "counterexample")
    if v.passed or v.trivial:
        return
    cx = v.counterexample
    assert inside(cx.inputs, domain), (domain, cx)
    assert host_fails(wrong, src, cx.inputs, dtype), (wrong, dtype, cx)
    got = float(np.asarray(gi.compile(wrong, dtype=dtype)(*[np.array([x], HOST[dtype]) for x in cx.inputs.values()]),
                           dtype=np.float64)[0])
    assert got == cx.got or (math.isnan(got) and math.isnan(cx.got)), (got, cx)


def test_exhaustive_counterexamples_stay_in_the_domain():
    bad = "def f(x):\n    return x * 2.01 if x > 3 or x < 1 else x + x\n"  # wrong below 1 and above 3
    assert gi.verify(bad, DOUBLE, dtype="float16", exhaustive=True).counterexample.inputs["x"] < 1
    v = gi.verify(bad, DOUBLE, dtype="float16", exhaustive=True, domain={"x": (1, 5)})
    assert not v.passed and 3 < v.counterexample.inputs["x"] <= 5, v.counterexample
    assert host_fails(bad, DOUBLE, v.counterexample.inputs, "float16")


# --- verify and verify_batch agree; tests_run; trivial references ------------------------------------


GELU = "def gelu(x):\n    return 0.5 * x * (1.0 + tanh(0.7978845608 * (x + 0.044715 * x * x * x)))\n"
CANDIDATES = [GELU.replace("0.044715", c) for c in ("0.044715", "0.05", "0.0447", "0.04472")] + [
    "def gelu(x):\n    return q\n", "def gelu(x):\n    return x if x < 5000 else 0.0\n"]


def test_verify_and_verify_batch_agree_on_each_candidate(path):
    s = gi.Session()
    batch = s.verify_batch(CANDIDATES, GELU, tests=20_000)
    for src, b in zip(CANDIDATES, batch):
        one = s.verify(src, GELU, tests=20_000)
        assert (one.passed, one.failures, one.tests_run, one.error is None) == \
            (b.passed, b.failures, b.tests_run, b.error is None), src
        assert (one.max_abs_err, one.max_rel_err, one.max_ulp_err) == (b.max_abs_err, b.max_rel_err, b.max_ulp_err)
        assert str(one.counterexample) == str(b.counterexample)
    assert batch[0].passed and not batch[1].passed and batch[4].error is not None and not batch[5].passed


def test_fused_and_torch_paths_give_the_same_verdicts(monkeypatch):
    fused_v = gi.Session().verify_batch(CANDIDATES, GELU, tests=20_000, domain={"x": (-6, 6)})
    monkeypatch.setattr(api, "FUSED_DEVICES", ())
    torch_v = gi.Session().verify_batch(CANDIDATES, GELU, tests=20_000, domain={"x": (-6, 6)})
    for a, b in zip(fused_v, torch_v):
        assert (a.passed, a.failures, a.tests_run, str(a.counterexample)) == \
            (b.passed, b.failures, b.tests_run, str(b.counterexample))


def test_tests_run_counts(path):
    s = gi.Session()
    ok, wrong, broken = s.verify_batch([DOUBLE, "def f(x):\n    return x * 2 if x < 3 else x\n",
                                        "def f(x):\n    return y\n"], DOUBLE, tests=10_000)
    assert ok.tests_run == 10_000 and broken.tests_run == 0
    # a failing candidate stops at its first failing tile of 1,024 inputs
    x = s.pool.get(1, 10_000, "float32", [None], 0)[0]
    first = int(torch.nonzero((x >= 3) & torch.isfinite(x))[0])
    assert wrong.tests_run == min(10_000, (first // 1024 + 1) * 1024) and wrong.failures >= 1
    assert s.verify(DOUBLE, DOUBLE, tests=1).tests_run == 1
    assert s.verify(DOUBLE, DOUBLE, dtype="bfloat16", exhaustive=True).tests_run == 65_536
    default = s.verify(DOUBLE, DOUBLE)
    assert default.tests_run == api.tests_needed(api.DEFAULT_EPSILON, 1e-3) and default.epsilon <= 1e-3


def test_trivial_references_are_rejected_on_both_paths(path):
    v = gi.verify("def f(x):\n    return 0.0\n", "def f(x):\n    return 0.0\n", tests=5000)
    assert not v.passed and "zero" in v.trivial and v.failures == 0
    near = gi.verify_batch(["def f(x):\n    return 3.0\n"], lambda x: 3.0 + 0 * x, tests=5000)[0]
    assert not near.passed and "constant" in near.trivial


# --- bad options -------------------------------------------------------------------------------------


@pytest.mark.parametrize("call,match", [
    (lambda: gi.verify_batch([DOUBLE], DOUBLE, tests=0), "tests must be >= 1"),
    (lambda: gi.verify(DOUBLE, DOUBLE, tests=0), "tests must be >= 1"),
    (lambda: gi.verify(DOUBLE, DOUBLE, tests=1.5), "integer"),
    (lambda: gi.verify(DOUBLE, DOUBLE, tests=True), "bool"),
    (lambda: gi.verify_batch([DOUBLE, DOUBLE], DOUBLE, tests=True), "bool"),
    (lambda: gi.verify(DOUBLE, lambda x: None, tests=100), "returned None"),
    (lambda: gi.verify(DOUBLE, lambda x: print(end=""), tests=100), "returned None"),
    (lambda: gi.verify(DOUBLE, lambda x: x * 1j, tests=100), "complex"),
    (lambda: gi.verify(DOUBLE, lambda x: np.array(["a"] * len(x)), tests=100), "numbers"),
    (lambda: gi.verify(DOUBLE, DOUBLE, dtype="float16", exhaustive=True, tests=100), "exhaustive"),
    (lambda: gi.verify_batch([DOUBLE], DOUBLE, dtype="float16", exhaustive=True, tests=100), "exhaustive"),
    (lambda: gi.verify(DOUBLE, DOUBLE, dtype="float16", exhaustive="yes"), "exhaustive"),
    (lambda: gi.verify(DOUBLE, DOUBLE, tests=100, seed=1.5), "seed"),
    (lambda: gi.verify(DOUBLE, DOUBLE, tests=100, rtol="a"), "rtol"),
    (lambda: gi.verify(DOUBLE, DOUBLE, tests=100, atol=-1), "atol"),
    (lambda: gi.verify(DOUBLE, DOUBLE, dtype="float16", tests=3 * 10 ** 8), "memory"),
])
def test_bad_options_are_clear_value_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_exhaustive_with_a_domain_checks_every_value_inside_it(dtype):
    seen = []

    def reference(x):
        seen.append(x.copy())
        return x * 2

    v = gi.verify(DOUBLE, reference, dtype=dtype, exhaustive=True, domain={"x": (-1.5, 2.25)})
    every = exhaustive_inputs(1, dtype)[0].to(torch.float64)
    inside_ = every[(every >= -1.5) & (every <= 2.25)]
    assert v.passed and v.exhaustive and v.tests_run == inside_.numel() and v.epsilon == 0.0
    assert sorted(np.concatenate(seen).astype(np.float64).tolist()) == sorted(inside_.tolist())


# --- bounded memory ----------------------------------------------------------------------------------


def test_the_outputs_cache_and_verdicts_do_not_keep_pools_alive():
    s = gi.Session()
    v = s.verify("def f(x):\n    return x * 3\n", DOUBLE, tests=50_000, seed=11)
    (pool_tensor,) = list(s.pool._cache.values())
    ref = weakref.ref(pool_tensor)
    del pool_tensor
    s.pool.clear()
    gc.collect()
    assert ref() is None  # the verdict (its counterexample not yet read) and the outputs cache let it go
    lazy = object.__getattribute__(v, "counterexample")
    assert lazy.args[2].untyped_storage().nbytes() == 4  # its own copy of the failing point, not a view of the pool
    assert v.counterexample.inputs["x"] != 0
    assert not s.verify("def f(x):\n    return x * 3\n", DOUBLE, tests=50_000, seed=11).passed


MEMORY_SCRIPT = r"""
import json, resource, sys, time
import jupyter_gpuiter as gi
from jupyter_gpuiter.verification import api
G = "def f(x):\n    return x * 2\n"
gi.verify(G, G, tests=100)
gi.verify(G, lambda x: x * 2, tests=100)
def status(key):
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(key))
limit = status("VmSize:") + int(sys.argv[1])  # address space beyond what the warm process has: no OOM
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
for case in sys.argv[2:]:
    t0 = time.perf_counter()
    api.FUSED_DEVICES = () if case.startswith("torch:") else ("cpu",)  # torch: the CUDA path, on the CPU
    try:
        if case == "batch10k":
            r = sum(v.passed for v in gi.verify_batch([G] * 10_000, G))
        elif case == "torch:batch2k":
            r = sum(v.passed for v in gi.verify_batch([G] * 2_000, G))
        elif case == "batch100k":
            r = sum(v.passed for v in gi.verify_batch([G] * 100_000, G))
        elif case.startswith("tests="):
            r = gi.verify(G, lambda x: x * 2, tests=int(float(case[6:]))).passed
        elif case.startswith("pair="):
            r = [v.passed for v in gi.verify_batch([G, G.replace("2", "3")], G, tests=int(float(case[5:])))]
        elif case == "refused":
            r = gi.verify(G, G, dtype="float16", tests=3 * 10 ** 8).passed
    except (ValueError, MemoryError, RuntimeError) as e:  # RuntimeError: torch could not allocate
        r = f"{type(e).__name__}: {e}"
    gi.current_session().pool.clear()
    if hasattr(gi.current_session(), "outputs"):
        gi.current_session().outputs.clear()
    print(json.dumps({"case": case, "result": r, "seconds": time.perf_counter() - t0,
                      "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}), flush=True)
"""


def run_memory_cases(*cases, address_space=3 << 30):
    out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(address_space), *cases], check=False,
                         capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return {r["case"]: r for r in map(json.loads, out.stdout.splitlines())}


def test_verify_memory_stays_bounded():
    r = run_memory_cases("batch10k", "torch:batch2k", "tests=2e7", "refused")
    assert r["batch10k"]["result"] == 10_000 and r["torch:batch2k"]["result"] == 2_000, r
    assert r["tests=2e7"]["result"] is True, r["tests=2e7"]
    assert r["refused"]["result"].startswith("ValueError: N too large for memory"), r["refused"]
    assert max(v["peak_rss"] for v in r.values()) < 3 << 30


@pytest.mark.slow
def test_verify_memory_stays_bounded_at_1e8_tests_and_100k_candidates():
    r = run_memory_cases("tests=1e8", "pair=1e8", "batch100k")
    assert r["tests=1e8"]["result"] is True, r
    assert r["pair=1e8"]["result"] == [True, False], r
    assert r["batch100k"]["result"] == 100_000, r
    assert max(v["peak_rss"] for v in r.values()) < 3 << 30, r
