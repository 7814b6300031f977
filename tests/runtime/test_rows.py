"""Row kernels on the CPU/torch evaluators (issue #24): the fused tile evaluator (fused.evaluate / compare with
row=n), the batched torch-op VM (vm.run with row=n), the torch renderer (render.torch_function) and
Kernel.__call__, against the NumPy reference evaluator and an independent oracle.

What is exact and what is compared with a tolerance:

- fused against the oracle, bit for bit on every row: the oracle is the reference evaluator's NumPy ops in
  the compute dtype (float32 for float16 and bfloat16), each result rounded to the kernel dtype, and
  reductions as the language defines them: sum and mean accumulated in float64 in NumPy's pairwise order
  (the order fused documents), rounded once; max and min IEEE 754-2019's maximum and minimum. Programs of
  exactly specified ops only (transcendental ones round differently per library, tests/runtime/test_fused.py).
- fused against the reference evaluator itself (np.sum: the same pairwise order, float64 throughout and up to
  NumPy's 8,192-element cast buffer for the narrower dtypes): bit for bit, but on rows where np.max / np.min
  had to choose between +0 and -0 (NumPy keeps the later one, or whichever its SIMD lanes give).
- the VM and the renderer (torch's summation order, its own) against the oracle: bit for bit on every row
  where no summation order can change a sum or mean as rounded to the kernel dtype (_order_free: every
  partial sum exact, or every result the float64 error bound allows rounding to one value); those rows are
  the majority, the others are counted. Programs of the ops where torch follows the language exactly
  (not sqrt, %, clip, // in 16 bits: TORCH_DEVIATIONS in test_fused.py), literals exact in every dtype.
- the real row kernels (tests/support/row_kernels.py), transcendental ops included: each engine is as
  accurate as the reference evaluator in the same dtype, per row: its largest error against the float64
  reference is at most twice the dtype reference's own plus 4 ULPs of the row's largest output (a
  different ULP in exp or log, or a 1-ULP different sum, moves the result by a few ULPs of the values it
  combines, as the reference's own roundings do). bfloat16 (no NumPy reference): the engines against each
  other the same way.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
import torch

import jupyter_gpuiter as gi
from jupyter_gpuiter.compilers import compile_batch
from jupyter_gpuiter.generate import generate_batch
from jupyter_gpuiter.ir import Program, ProgramBatch
from jupyter_gpuiter.lang.spec import IR_OP_BY_NAME
from jupyter_gpuiter.runtime import fused, reference, vm
from jupyter_gpuiter.runtime.reference import NUMPY_OPS
from jupyter_gpuiter.runtime.render import TORCH_DTYPES, torch_function
from jupyter_gpuiter.runtime.torch_ops import round_once
from jupyter_gpuiter.verification.pools import special_values
from tests.runtime.test_fused import ELEMENTWISE, _bits, _round_array, _round_once, exact_source
from tests.support.row_kernels import REAL, ROW_LENGTHS

DTYPES = ("float16", "bfloat16", "float32", "float64")
LONG_ROW = 100_003  # one row longer than 100,000 (not a multiple of 8, of 128 or of TILE)
LENGTHS = (*ROW_LENGTHS, 2049)  # 2049: a row longer than fused.TILE, a tile of its own
EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """As in test_fused.py: the VM's many small torch ops run faster on one thread of a shared machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _tdt(dtype: str) -> torch.dtype:
    return TORCH_DTYPES[dtype]


def _cdt(dtype: str):
    return np.float32 if dtype in ("float16", "bfloat16") else np.dtype(dtype).type


# --- the oracle ------------------------------------------------------------------------------------------

def _pairwise(a: np.ndarray) -> np.ndarray:
    """NumPy's pairwise summation order (its add.reduce over a contiguous float64 row) over the last axis of
    the float64 array a, vectorised over the other axes: fewer than 8 terms one by one from 0.0, up to 128
    by 8 interleaved accumulators, longer rows as the sum of two halves split at a multiple of 8."""
    n = a.shape[-1]
    if n < 8:
        res = np.zeros(a.shape[:-1])
        for i in range(n):
            res = res + a[..., i]
        return res
    if n <= 128:
        end = n - n % 8
        r = a[..., 0:8].copy()
        for i in range(8, end, 8):
            r = r + a[..., i:i + 8]
        res = ((r[..., 0] + r[..., 1]) + (r[..., 2] + r[..., 3])) + ((r[..., 4] + r[..., 5]) + (r[..., 6] + r[..., 7]))
        for i in range(end, n):
            res = res + a[..., i]
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(a[..., :n2]) + _pairwise(a[..., n2:])


def _round64(v: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded once to the dtype, as float64: NumPy's conversions for float32 and float16
    (direct from the float64 bits), float32 rounded to odd then to nearest even for bfloat16."""
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(all="ignore"):
        if dtype == "float64":
            return v
        if dtype == "float32":
            return v.astype(np.float32).astype(np.float64)
        if dtype == "float16":
            return v.astype(np.float16).astype(np.float64)
        f = v.astype(np.float32)
        back = f.astype(np.float64)
        inexact = (back != v) & np.isfinite(f)
        bits = f.view(np.int32).copy()
        bits[inexact & (np.abs(back) > np.abs(v))] -= 1
        bits[inexact] |= 1
        return torch.from_numpy(bits.view(np.float32)).to(torch.bfloat16).double().numpy()


def _lsb_exponent(f: np.ndarray) -> np.ndarray:
    """Per finite nonzero float64 value, e with the value an odd multiple of 2^e (10**4 for zeros)."""
    m, e = np.frexp(f)
    ints = np.abs(m * 2.0 ** 53).astype(np.int64)
    low = ints & -ints
    tz = np.frexp(low.astype(np.float64))[1] - 1
    return np.where(f != 0, e - 53 + tz, 10 ** 4)


def _order_free(v: np.ndarray, op: str, dtype: str) -> np.ndarray:
    """Per row of v [R, n] (float64): whether every summation order gives the same sum / mean rounded to the
    dtype. True where every partial sum is exact (all terms multiples of 2^q and the sum of magnitudes below
    2^(q+52)), where a nan or an infinity decides it (finite terms far from overflowing), or where the float64
    error bound of any order (n * 2^-53 * sum |x|) keeps every result inside one rounding cell of the dtype."""
    n = v.shape[-1]
    finite = np.isfinite(v)
    f = np.where(finite, v, 0.0)
    total = np.abs(f).sum(-1)
    q = _lsb_exponent(f).min(-1)
    with np.errstate(all="ignore"):
        exact = (q >= 10 ** 4) | (total < np.ldexp(1.0, np.minimum(q + 52, 1023).astype(np.int64)))
    free = np.where(finite.all(-1), exact, total < 1e300)
    if dtype == "float64":
        return free
    bound = n * 2.0 ** -53 * total * 1.01 + n * 2.0 ** -1074  # of any order's error, the pairwise sum's too
    pairwise = 0.0 + _pairwise(f)
    lo, hi = pairwise - 2 * bound, pairwise + 2 * bound  # every order's sum, around the exact one
    if op == "mean":
        lo, hi = lo / n * (1 - 2.0 ** -52), hi / n * (1 + 2.0 ** -52)
        lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    rl, rh = _round64(lo, dtype), _round64(hi, dtype)
    one_cell = (rl == rh) & (np.signbit(rl) == np.signbit(rh))
    return free | (finite.all(-1) & one_cell)


def _extreme(v: np.ndarray, op: str) -> np.ndarray:
    """IEEE 754-2019 maximum / minimum over the last axis: nan if there is one, -0 < +0."""
    nan = np.isnan(v).any(-1)
    if op == "amax":
        r = np.max(np.where(np.isnan(v), -np.inf, v), -1)
        signed_zero = np.where(((v == 0) & ~np.signbit(v)).any(-1), 0.0, -0.0)
    else:
        r = np.min(np.where(np.isnan(v), np.inf, v), -1)
        signed_zero = np.where(((v == 0) & np.signbit(v)).any(-1), -0.0, 0.0)
    return np.where(nan, np.nan, np.where(r == 0, signed_zero, r))


def _oracle(prog: Program, x: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The language on rows, independently of the engines: x [P, R, n] values of the dtype (float64). Returns
    (outputs [R, n] per element in the compute dtype, order_free [R], zero_choice [R]): order_free where no
    summation order changes a sum or mean (_order_free), zero_choice where a max or min chose between +0 and
    -0 (np.max's choice there is its own)."""
    cdt = _cdt(dtype)
    R, n = x.shape[1:]
    free = np.ones(R, dtype=bool)
    zero_choice = np.zeros(R, dtype=bool)
    regs: list[np.ndarray] = []
    with np.errstate(all="ignore"):
        for op, (a, b, c), imm in zip(prog.ops, prog.args, prog.imms):
            if op == "param":
                v = x[int(imm)].astype(cdt)
            elif op in ("const", "bool"):
                v = np.full((R, n), _round_once(float(imm), dtype), dtype=cdt)
            elif op == "ret":
                return regs[a], free, zero_choice
            elif op in ("sum", "mean"):
                w = regs[a].astype(np.float64)
                s = 0.0 + _pairwise(w)
                if op == "mean":
                    s = s / n
                free &= _order_free(w, op, dtype)
                v = np.broadcast_to(_round64(s, dtype).astype(cdt)[:, None], (R, n))
            elif op in ("amax", "amin"):
                w = regs[a]
                r = _extreme(w.astype(np.float64), op)
                zero_choice |= (r == 0) & (w == 0).any(-1) & ((w == 0) & np.signbit(w)).any(-1) & \
                    ((w == 0) & ~np.signbit(w)).any(-1)
                v = np.broadcast_to(r.astype(cdt)[:, None], (R, n))
            else:
                operands = [regs[i] for i in (a, b, c)[: IR_OP_BY_NAME[op].nargs]]
                v = _round_array(np.asarray(NUMPY_OPS[op](*operands)).astype(cdt), dtype)
            regs.append(np.broadcast_to(v, (R, n)))
    raise AssertionError("program without ret")


def test_pairwise_is_numpys_order():
    """The oracle's summation order is np.sum's (float64 rows of every length class), and _round64 rounds
    once (against exact rational rounding)."""
    rng = np.random.default_rng(0)
    for n in (1, 5, 8, 9, 64, 127, 128, 129, 1000, 4099):
        a = rng.standard_normal((20, n)) * np.exp(rng.uniform(-30, 30, (20, n)))
        assert np.array_equal(0.0 + _pairwise(a), np.sum(a, axis=-1))
    v = np.concatenate([rng.standard_normal(3000) * np.exp(rng.uniform(-100, 100, 3000)),
                        [1 + 2 ** -11 + 2 ** -40, 1 + 2 ** -8 - 2 ** -40, 65519.99, 2 ** -25 + 2 ** -60, 1e39, -0.0]])
    for dtype in ("float16", "bfloat16", "float32"):
        got = _round64(v, dtype)
        want = np.array([_round_once(float(t), dtype) for t in v])
        assert np.array_equal(got, want, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(want))


# --- inputs and programs ----------------------------------------------------------------------------------

def _row_inputs(n_params: int, dtype: str, n: int, rows: int, seed: int) -> np.ndarray:
    """[P, rows, n] values of the dtype (as float64), row kinds mixed: moderate random values at a per-row
    scale, small multiples of 1/2, random values with special values (nan, ±inf, ±0, huge, tiny,
    subnormal) placed at random positions, values of mixed magnitudes, constant rows, rows of specials."""
    rng = np.random.default_rng(seed)
    sv = special_values(dtype).double().numpy()
    shape = (n_params, rows, n)
    scale = np.exp(rng.uniform(-3, 3, (n_params, rows, 1)))
    kinds = rng.permutation(np.arange(rows) % 6)[None, :, None]
    normal = rng.standard_normal(shape) * scale
    halves = rng.integers(-16, 17, shape) * 0.5
    span = {"float16": 8.0, "bfloat16": 40.0, "float32": 40.0, "float64": 200.0}[dtype]
    mixed = rng.standard_normal(shape) * np.exp(rng.uniform(-span, span, shape))
    placed = np.where(rng.random(shape) < max(1.5 / n, 0.02), sv[rng.integers(0, len(sv), shape)], normal)
    constant = np.broadcast_to(normal[:, :, :1], shape)
    specials = sv[rng.integers(0, len(sv), shape)]
    with np.errstate(all="ignore"):
        x = np.choose(np.broadcast_to(kinds, shape), [normal, halves, placed, mixed, constant, specials])
        return torch.from_numpy(np.ascontiguousarray(x)).to(_tdt(dtype)).double().numpy()


_DYADIC = ("0.5", "1.0", "2.0", "3.0", "0.25", "1.5", "4.0", "0.0", "100.0", "0.125")
_LITERALS = (*_DYADIC, "0.1", "1e-05", "3.14159", "1e+30", "7.3", "65519.99", "1.00048828125")


def _row_source(rng: np.random.Generator, n_params: int, torch_exact: bool) -> str:
    """A random row kernel of exactly specified ops: nested reductions (sum, mean, one-argument max and min)
    of elementwise expressions, assignments reused, results per element or per row. torch_exact: only ops
    and literals that torch computes as the language does in every dtype (no sqrt, %, //, clip; literals
    exact in float16 and bfloat16)."""
    names = ["x", "y", "z"][:n_params]
    bound = list(names)
    literals = _DYADIC if torch_exact else _LITERALS
    binary = ("+", "-", "*", "/") + (() if torch_exact else ("//", "%"))
    unary = ("abs", "floor", "ceil", "isnan", "isinf", "float") + (() if torch_exact else ("sqrt",))
    reductions = ("sum", "mean", "max", "min")

    def pick(seq):
        return seq[int(rng.integers(len(seq)))]

    def expr(depth: int) -> str:
        r = rng.random()
        if depth <= 0 or r < 0.18:
            return pick(bound) if rng.random() < 0.8 else pick(literals)
        r = rng.random()
        if r < 0.3:
            return f"({expr(depth - 1)} {pick(binary)} {expr(depth - 1)})"
        if r < 0.37:
            return f"({expr(depth - 1)} {pick(('<', '<=', '>', '>=', '==', '!='))} {expr(depth - 1)})"
        if r < 0.4:
            return f"({expr(depth - 1)} {pick(('and', 'or'))} {expr(depth - 1)})"
        if r < 0.44:
            return f"(-{expr(depth - 1)})" if rng.random() < 0.7 else f"(not {expr(depth - 1)})"
        if r < 0.52:
            return f"{pick(unary)}({expr(depth - 1)})"
        if r < 0.59:
            return f"{pick(('min', 'max'))}({expr(depth - 1)}, {expr(depth - 1)})"
        if r < 0.63:
            if not torch_exact and rng.random() < 0.4:
                return f"clip({expr(depth - 1)}, {expr(depth - 1)}, {expr(depth - 1)})"
            return f"where({expr(depth - 1)}, {expr(depth - 1)}, {expr(depth - 1)})"
        return f"{pick(reductions)}({expr(depth - 1)})"

    lines = [f"def k({', '.join(names)}):"]
    for i in range(int(rng.integers(0, 4))):
        lines.append(f"    v{i} = {expr(int(rng.integers(1, 4)))}")
        bound.append(f"v{i}")
    ret = expr(int(rng.integers(1, 5)))
    if not any(f"{r}(" in "\n".join(lines) + ret for r in reductions):
        ret = f"{pick(reductions)}({ret})" if rng.random() < 0.4 else f"({ret} {pick(binary)} {pick(reductions)}(x))"
    lines.append(f"    return {ret}")
    return "\n".join(lines) + "\n"


@cache
def _programs(n: int, seed: int, torch_exact: bool) -> tuple[Program, ...]:
    """n generated row kernels that compile (serial compiler), each with three parameters' worth of inputs."""
    rng = np.random.default_rng(seed)
    out: list[Program] = []
    while len(out) < n:
        src = _row_source(rng, int(rng.integers(1, 4)), torch_exact)
        (p,) = compile_batch([src], mode="serial").results
        if isinstance(p, Program) and p.reduces:
            out.append(p)
    return tuple(out)


def test_generated_programs_cover_the_row_kernel_shapes():
    programs = _programs(150, 1, False)
    ops = {op for p in programs for op in p.ops}
    assert {"sum", "mean", "amax", "amin"} <= ops
    per_row = sum(p.returns_per_row() for p in programs)
    assert 20 < per_row < 130  # per-row and per-element results both common
    nested = sum(any(p.per_row()[a[0]] for op, a in zip(p.ops, p.args) if op in ("sum", "mean", "amax", "amin"))
                 for p in programs)
    assert nested > 5  # reductions of per-row values (sum(2.0), max(x - max(x)) ...)


def _registers(x: np.ndarray, dtype: str) -> np.ndarray:
    """x [P, R, n] (float64 values of the dtype) as the fused evaluator's inputs [P, R * n]."""
    return fused.as_registers(x.reshape(x.shape[0], -1), dtype)


def _kernel_values(a, dtype: str) -> torch.Tensor:
    t = torch.from_numpy(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a
    return t.to(_tdt(dtype))


def _differ(got, want, dtype: str) -> np.ndarray:
    """Per element: bit patterns differ (nan payloads aside), both taken to the kernel dtype."""
    return (_bits(_kernel_values(got, dtype)) != _bits(_kernel_values(want, dtype))).numpy()


def _describe(prog: Program, x: np.ndarray, r: int, got, want) -> str:
    return f"row {r}: inputs {x[:, r].tolist()[:3]}\n got {np.asarray(got)[r][:8]}\nwant {np.asarray(want)[r][:8]}\n" \
           f"{prog.text()}"


# --- fused against the oracle and the reference, bit for bit -----------------------------------------------

def _rows_for(n: int) -> int:
    return max(6, min(120, 3000 // n))


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_matches_the_oracle_on_generated_row_programs(dtype):
    """Generated row kernels on every row length, fused bit for bit equal to the oracle on every row (special
    values placed in rows included), and, in float16/32/64, to the reference evaluator (np.sum's order is the
    one fused sums in) but where np.max chose between +0 and -0."""
    programs = _programs(120, 1, False)
    arrays = fused.ProgramArrays.from_programs(list(programs))
    checked = {"rows": 0, "reference_rows": 0}
    for n in LENGTHS:
        rows = _rows_for(n)
        x = _row_inputs(3, dtype, n, rows, seed=n + 7 * DTYPES.index(dtype))
        got = fused.evaluate(arrays, _registers(x, dtype), dtype, row=n).reshape(len(programs), rows, n)
        for b, prog in enumerate(programs):
            want, _, zero_choice = _oracle(prog, x, dtype)
            differ = _differ(got[b], want, dtype)
            assert not differ.any(), (dtype, n, _describe(prog, x, int(differ.any(-1).argmax()), got[b], want))
            checked["rows"] += rows
            if dtype == "bfloat16" or (n > 8192 and dtype != "float64") or (
                    dtype == "float16" and {"floordiv", "mod"} & set(prog.ops)):
                continue  # NumPy's float16 // and % have their own signed zeros (np.float16(-6e-8) // 3.14 is +0)
            ref = reference.evaluate(prog, [x[i].astype(dtype) for i in range(prog.n_params)], dtype)
            if prog.returns_per_row():
                assert ref.shape == (rows,)
                ref = np.broadcast_to(ref[:, None], (rows, n))
            differ = _differ(got[b], ref, dtype).any(-1) & ~zero_choice
            assert not differ.any(), (dtype, n, "reference", _describe(prog, x, int(differ.argmax()), got[b], ref))
            checked["reference_rows"] += int((~zero_choice).sum())
    print(dtype, checked)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_on_one_long_row(dtype):
    """Rows longer than 100,000 (a tile of their own, registers sized for it): fused against the oracle on a
    few generated programs and the real kernels' exact ones."""
    programs = list(_programs(12, 2, False)) + [gi.compile(REAL[k][0], mode="serial").program
                                                for k in ("variance", "max_abs", "minmax_scale")]
    arrays = fused.ProgramArrays.from_programs(programs)
    x = _row_inputs(3, dtype, LONG_ROW, 2, seed=3)
    got = fused.evaluate(arrays, _registers(x, dtype), dtype, row=LONG_ROW).reshape(len(programs), 2, LONG_ROW)
    for b, prog in enumerate(programs):
        want = _oracle(prog, x[:, :, :], dtype)[0]
        differ = _differ(got[b], want, dtype)
        assert not differ.any(), (dtype, _describe(prog, x, int(differ.any(-1).argmax()), got[b], want))


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_generators_row_kernels(dtype):
    """The program generator's row kernels (generate_batch(rows=1.0)), their transcendental calls swapped for
    exact ops (test_fused.exact_source; copysign left out: it shows a nan's sign): fused bit for bit equal to
    the oracle on rows of several lengths; the VM too on every row no summation order changes, for the
    programs of ops torch computes exactly (float32 and float64: the generator's literals are not all values
    of the 16-bit dtypes, which torch rounds twice)."""
    if not ELEMENTWISE:
        pytest.skip("the program generator makes no row kernels")
    sources = [exact_source(src) for src in generate_batch(160, 11, rows=1.0)]
    programs = [p for p in compile_batch(sources, mode="serial").results
                if isinstance(p, Program) and "copysign" not in p.ops]
    assert len(programs) > 120 and all(p.reduces for p in programs)
    n_params = max(p.n_params for p in programs)
    arrays = fused.ProgramArrays.from_programs(programs)
    torch_exact = [b for b, p in enumerate(programs) if not {"sqrt", "mod", "clip", "floordiv"} & set(p.ops)]
    batch = ProgramBatch.from_results([programs[b] for b in torch_exact])
    for n in (1, 3, 33, 129, 1000):
        rows = _rows_for(n) // 2
        x = _row_inputs(n_params, dtype, n, rows, seed=5 * n + DTYPES.index(dtype))
        got = fused.evaluate(arrays, _registers(x, dtype), dtype, row=n).reshape(len(programs), rows, n)
        frees = {}
        for b, prog in enumerate(programs):
            want, frees[b], _ = _oracle(prog, x, dtype)
            differ = _differ(got[b], want, dtype)
            assert not differ.any(), (dtype, n, _describe(prog, x, int(differ.any(-1).argmax()), got[b], want))
        if dtype in ("float32", "float64"):
            xt = torch.from_numpy(x.reshape(n_params, -1)).to(_tdt(dtype))
            out = vm.run(batch, xt, dtype, row=n).reshape(len(torch_exact), rows, n)
            for i, b in enumerate(torch_exact):
                bad = _differ(out[i], got[b], dtype).any(-1) & frees[b]
                assert not bad.any(), (dtype, n, _describe(programs[b], x, int(bad.argmax()), out[i], got[b]))


# --- the VM and the renderer against the oracle, where the summation order cannot matter --------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_vm_and_renderer_match_the_oracle_where_order_cannot_matter(dtype):
    """vm.run(row=n) and the renderer on generated row kernels of the ops torch computes exactly: bit for bit
    equal to the oracle on every row whose sums no summation order changes (most rows); the other rows only
    differ by torch's summation order, counted."""
    stats = {"rows": 0, "order_free": 0, "renderer_rows": 0}
    for n in (*LENGTHS, LONG_ROW):
        programs = _programs(100, 3, True)[: 20 if n == LONG_ROW else 100]
        batch = ProgramBatch.from_results(list(programs))
        rows = 2 if n == LONG_ROW else _rows_for(n)
        x = _row_inputs(3, dtype, n, rows, seed=11 * n + DTYPES.index(dtype))
        xt = torch.from_numpy(x).to(_tdt(dtype))
        got = vm.run(batch, xt.reshape(3, -1), dtype, row=n).reshape(len(programs), rows, n)
        for b, prog in enumerate(programs):
            want, free, _ = _oracle(prog, x, dtype)
            bad = _differ(got[b], want, dtype).any(-1) & free
            assert not bad.any(), (dtype, n, "vm", _describe(prog, x, int(bad.argmax()), got[b], want))
            stats["rows"] += rows
            stats["order_free"] += int(free.sum())
            if n in (1, 7, 33, 129, 1000, LONG_ROW) and b % 2 == 0:
                out = torch_function(prog, dtype)(*xt[: prog.n_params])
                if prog.returns_per_row():
                    assert out.shape == (rows,)
                    out = out[:, None].expand(rows, n)
                assert out.shape == (rows, n) and out.dtype == (torch.bool if prog.returns_bool() else _tdt(dtype))
                bad = _differ(out, want, dtype).any(-1) & free
                assert not bad.any(), (dtype, n, "renderer", _describe(prog, x, int(bad.argmax()), out, want))
                stats["renderer_rows"] += int(free.sum())
    assert stats["order_free"] > 0.6 * stats["rows"], stats
    print(dtype, stats)


def test_the_order_free_rows_are_where_torch_may_sum_differently():
    """The exemption above is needed and no wider than it should be: torch's float64 sums differ from
    NumPy's order on ordinary rows, and _order_free says so for them."""
    rng = np.random.default_rng(4)
    v = rng.standard_normal((200, 1000))
    torch_sums = torch.from_numpy(v).sum(-1).numpy()
    numpy_sums = 0.0 + _pairwise(v)
    differ = torch_sums != numpy_sums
    assert differ.any()
    assert not _order_free(v, "sum", "float64")[differ].any()
    halves = rng.integers(-16, 17, (200, 1000)) * 0.5
    assert _order_free(halves, "sum", "float64").all()  # exact in any order
    f32 = rng.standard_normal((200, 1000)).astype(np.float32).astype(np.float64)
    assert _order_free(f32, "sum", "float32").mean() > 0.95  # float64 error far below a float32 rounding


# --- real row kernels, transcendental ops included ----------------------------------------------------------

def _real_inputs(name: str, n_params: int, dtype: str, n: int, rows: int, seed: int) -> np.ndarray:
    """[P, rows, n] inputs in the kernel's domain (probabilities for the losses), of the dtype (float64)."""
    rng = np.random.default_rng(seed)
    if REAL[name][2] is not None:
        x = rng.uniform(0.01, 1, (n_params, rows, n))
    else:
        x = rng.standard_normal((n_params, rows, n)) * np.exp(rng.uniform(-2, 2, (n_params, rows, 1)))
        x[:, ::5] = np.round(x[:, ::5] * 4) / 4  # rows of repeated values and zeros
        x[:, 1::7] += 30  # rows far from zero (a mean to cancel, a max to subtract)
    return torch.from_numpy(x).to(_tdt(dtype)).double().numpy()


def _row_errors(got: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of [R, k] outputs: the largest |got - truth| over finite pairs (inf where the two differ in
    class: nan, ±inf), and the largest |truth|."""
    got, truth = got.astype(np.float64), truth.astype(np.float64)
    same_class = (np.isnan(got) == np.isnan(truth)) & (np.isinf(got) == np.isinf(truth)) & \
        (~np.isinf(got) | (got == truth))
    finite = np.isfinite(got) & np.isfinite(truth)
    err = np.where(finite, np.abs(got - truth), 0.0).max(-1)
    return np.where(same_class.all(-1), err, np.inf), np.where(np.isfinite(truth), np.abs(truth), 0.0).max(-1)


def _float64_run(prog: Program, x: np.ndarray, bump: tuple[int, np.ndarray] | None = None):
    """The program in float64 on x [P, R, n] as the reference evaluator runs it, but with instruction bump[0]
    (a sum or mean) moved by bump[1] [R]. Returns (outputs [R, k], {sum/mean instruction: the float64
    error bound of any summation order of its row, n 2^-53 sum |terms| (/ n for mean)})."""
    R, n = x.shape[1:]
    regs: list[np.ndarray] = []
    bounds: dict[int, np.ndarray] = {}
    with np.errstate(all="ignore"):
        for i, (op, (a, b, c), imm) in enumerate(zip(prog.ops, prog.args, prog.imms)):
            if op == "param":
                v = x[int(imm)]
            elif op in ("const", "bool"):
                v = np.full((R, n), imm)
            elif op == "ret":
                out = regs[a][:, :1] if prog.returns_per_row() else regs[a]
                return out, bounds
            elif op in ("sum", "mean"):
                s = reference.REDUCE_OPS[op](regs[a])[:, 0]
                bounds[i] = n * 2.0 ** -53 * np.abs(regs[a]).sum(-1) / (n if op == "mean" else 1)
                if bump is not None and bump[0] == i:
                    s = s + bump[1]
                v = np.broadcast_to(s[:, None], (R, n))
            elif op in ("amax", "amin"):
                v = np.broadcast_to(reference.REDUCE_OPS[op](regs[a]), (R, n))
            else:
                v = np.asarray(NUMPY_OPS[op](*(regs[j] for j in (a, b, c)[: IR_OP_BY_NAME[op].nargs])), np.float64)
            regs.append(np.broadcast_to(v, (R, n)))
    raise AssertionError("program without ret")


def _order_slack(prog: Program, x: np.ndarray) -> np.ndarray:
    """Per row, how far the float64 result can move when every sum and mean moves within its error bound for
    any summation order (first order: each moved alone, the moves added up; inf where one breaks it)."""
    base, bounds = _float64_run(prog, x)
    slack = np.zeros(base.shape[0])
    with np.errstate(all="ignore"):
        for i, bound in bounds.items():
            moved = _float64_run(prog, x, (i, bound))[0]
            err, _ = _row_errors(moved, base)
            slack = slack + err
    return slack


def _engines(prog: Program, x: np.ndarray, dtype: str) -> dict[str, np.ndarray]:
    """Each engine's outputs [R, k] (k = n, or 1 for a per-row result) as float64."""
    P, R, n = x.shape
    xt = torch.from_numpy(x).to(_tdt(dtype))
    arrays = fused.ProgramArrays.from_programs([prog])
    k = 1 if prog.returns_per_row() else n
    out = {
        "fused": fused.evaluate(arrays, _registers(x, dtype), dtype, row=n)[0].reshape(R, n)[:, :k],
        "vm": vm.run(ProgramBatch.from_results([prog]), xt.reshape(P, -1), dtype, row=n)[0].reshape(R, n)[:, :k],
        "renderer": torch_function(prog, dtype)(*xt).reshape(R, k),
        "kernel": gi.Kernel(prog, dtype=dtype)(*xt).reshape(R, k),
    }
    return {name: np.asarray(v.double() if isinstance(v, torch.Tensor) else v, dtype=np.float64)
            for name, v in out.items()}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_row_kernels(name, dtype):
    """The twelve real row kernels on every row length and one long row: each engine as accurate as the
    reference evaluator in the dtype, row by row (see the module docstring), the classes of the results
    (nan, ±inf) the same; where the kernel has only exact ops and the row fits NumPy's buffer, fused equals
    the reference bit for bit."""
    source, _, _ = REAL[name]
    prog = gi.compile(source, mode="serial").program
    exact_ops = not set(prog.ops) & {"exp", "log", "sqrt", "pow"}
    eps = EPS[dtype]
    for n in (*ROW_LENGTHS, LONG_ROW):
        rows = 2 if n == LONG_ROW else max(5, min(40, 4000 // n))
        x = _real_inputs(name, prog.n_params, dtype, n, rows, seed=n)
        truth = reference.evaluate(prog, list(x), "float64").reshape(rows, -1)
        got = _engines(prog, x, dtype)
        if dtype == "bfloat16":  # no NumPy reference: the engines against one another
            errs = {k: _row_errors(v, truth)[0] for k, v in got.items()}
            scale = _row_errors(truth, truth)[1]
            best = np.min(np.stack(list(errs.values())), axis=0)
            for k, err in errs.items():
                assert (err <= 2 * best + 4 * eps * scale).all(), (name, dtype, n, k, err, best)
            continue
        ref = reference.evaluate(prog, [xi.astype(dtype) for xi in x], dtype).reshape(rows, -1)
        ref_err, scale = _row_errors(ref, truth)
        slack = _order_slack(prog, x)
        for k, v in got.items():
            err = _row_errors(v, truth)[0]
            bad = ~(err <= 2 * ref_err + 2 * slack + 4 * eps * scale)
            assert not bad.any(), (name, dtype, n, k, err[bad][:3], ref_err[bad][:3], slack[bad][:3], scale[bad][:3])
        if exact_ops and (n <= 8192 or dtype == "float64"):
            assert not _differ(got["fused"], ref, dtype).any(), (name, dtype, n)


# --- row semantics through every engine ------------------------------------------------------------------------

_SEMANTICS = [
    # (source, rows of the input, expected rows of the output): per-row constants are broadcast before reducing
    ("def f(x):\n    return sum(2.0)\n", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [6.0, 6.0]),
    ("def f(x):\n    return mean(1.5) + max(3.0) - min(-1.0)\n", [[9.0, 9.0]], [5.5]),
    ("def f(x):\n    return max(x - max(x))\n", [[1.0, 5.0, -2.0], [0.5, 0.25, 0.0]], [0.0, 0.0]),
    ("def f(x):\n    return sum(x > 0)\n", [[1.0, -1.0, 2.0], [-1.0, -2.0, 0.0]], [2.0, 0.0]),
    ("def f(x):\n    return mean(x > 0)\n", [[1.0, -1.0, 2.0, 3.0]], [0.75]),
    ("def f(x):\n    return x - mean(x)\n", [[1.0, 2.0, 3.0]], [[-1.0, 0.0, 1.0]]),
    ("def f(x):\n    return sum(x) + x\n", [[1.0, 2.0], [3.0, 4.0]], [[4.0, 5.0], [10.0, 11.0]]),
    ("def f(x):\n    return max(x)\n", [[1.0, float("nan"), 3.0], [-0.0, 0.0, -1.0]], [float("nan"), 0.0]),
    ("def f(x):\n    return min(x)\n", [[0.0, -0.0], [float("inf"), float("-inf")]], [-0.0, float("-inf")]),
    ("def f(x):\n    return sum(x)\n", [[-0.0, -0.0], [float("inf"), 1.0], [float("inf"), float("-inf")]],
     [0.0, float("inf"), float("nan")]),
    ("def f(x):\n    return sum(sum(x))\n", [[1.0, 2.0, 3.0]], [18.0]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", range(len(_SEMANTICS)))
def test_row_semantics_in_every_engine(case, dtype):
    """sum(2.0) is 2n, nested reductions, bools counted, per-row and per-element results, nan propagation,
    signed zeros (max prefers +0, min -0) and an all -0 row summing to +0: fused, VM, renderer and Kernel."""
    source, rows, expected = _SEMANTICS[case]
    prog = gi.compile(source, mode="serial").program
    x = np.array(rows)[None]
    want = np.array(expected, dtype=np.float64)
    want = want[:, None] if want.ndim == 1 else want
    for name, got in _engines(prog, x, dtype).items():
        assert got.shape == want.shape, (name, got.shape)
        assert np.array_equal(got, want, equal_nan=True), (name, got, want)
        number = ~np.isnan(want)  # the sign of a nan an op makes is the CPU's (fused.py)
        assert np.array_equal(np.signbit(got[number]), np.signbit(want[number])), (name, got, want)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_a_sum_rounds_once(dtype):
    """A sum is accumulated in float64 and rounded once to the dtype, in every engine: 1 + eps/2 + tiny (all
    three values of the dtype) rounds up to 1 + eps; accumulated in float32 (or, for the 16-bit dtypes, a
    float64 sum rounded through float32 first) it would lose `tiny`, land on the tie and round to 1."""
    eps = EPS[dtype]
    tiny = {"float16": 2.0 ** -24, "bfloat16": 2.0 ** -40, "float32": 2.0 ** -40}[dtype]  # float64 holds the sum
    x = np.array([[[1.0, eps / 2, tiny]]])
    assert np.array_equal(_round64(x, dtype), x)
    prog = gi.compile("def f(x):\n    return sum(x)\n", mode="serial").program
    for name, got in _engines(prog, x, dtype).items():
        assert got.ravel().tolist() == [1 + eps], (name, got)
    assert round_once(torch.tensor([1 + eps / 2 + tiny], dtype=torch.float64), _tdt(dtype)).item() == 1 + eps


# --- shapes and refusals --------------------------------------------------------------------------------------

def test_kernel_shapes_numpy_and_torch():
    """Per-element results have the broadcast shape, per-row ones drop its last axis; [n] parameters broadcast
    along the rows; a single row [n] gives a 0-d per-row result; bool results stay bools."""
    ln = gi.compile(REAL["layernorm"][0], mode="serial")
    lse = gi.compile(REAL["logsumexp"][0], mode="serial")
    anypos = gi.compile("def f(x):\n    return max(x > 0)\n", mode="serial")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 16))
    g, b = np.linspace(0.5, 1.5, 16), np.zeros(16)
    assert ln(x, g, b).shape == (2, 3, 16) and ln(x, g, b).dtype == np.float32
    assert lse(x).shape == (2, 3) and lse(x[0, 0]).shape == ()
    want = reference.evaluate(lse.program, [x], "float32")
    np.testing.assert_allclose(lse(x), want, rtol=1e-6)  # exp: the C library's and NumPy's, an ULP apart
    t = lse(torch.tensor(x))
    assert isinstance(t, torch.Tensor) and t.shape == (2, 3) and t.dtype == torch.float32
    assert np.array_equal(t.numpy(), lse(x))
    assert np.array_equal(ln(torch.tensor(x), torch.tensor(g), torch.tensor(b)).numpy(), ln(x, g, b))
    flags = anypos(np.array([[1.0, -1.0], [-1.0, -2.0]]))
    assert flags.dtype == bool and flags.tolist() == [True, False]
    assert lse(np.zeros((0, 4))).shape == (0,)
    # the rows are the last axis of the broadcast shape: x [3, 1] against y [5] gives rows of 5
    cos = gi.compile(REAL["cosine_similarity"][0], mode="serial")
    got = cos(np.arange(1.0, 4.0)[:, None], np.ones(5))
    assert got.shape == (3,) and np.allclose(got, 1.0)


def test_empty_rows_and_scalars_are_refused():
    lse = gi.compile(REAL["logsumexp"][0], mode="serial")
    fn = torch_function(lse.program, "float32")
    for bad in (np.ones((3, 0)), np.float64(2.0)):
        with pytest.raises(ValueError, match="row kernel"):
            lse(bad)
        with pytest.raises(ValueError, match="row kernel"):
            lse(torch.as_tensor(bad))
        with pytest.raises(ValueError, match="row kernel"):
            fn(torch.as_tensor(bad))
    cos = gi.compile(REAL["cosine_similarity"][0], mode="serial")
    with pytest.raises(ValueError, match="row kernel"):
        cos(1.0, 2.0)
    elementwise = gi.compile("def f(x):\n    return x + 1\n", mode="serial")
    assert elementwise(2.0) == 3.0  # an elementwise kernel still takes scalars


def test_fused_and_vm_refuse_rows_they_cannot_run():
    prog = gi.compile(REAL["softmax"][0], mode="serial").program
    arrays = fused.ProgramArrays.from_programs([prog])
    assert arrays.reduces and not fused.ProgramArrays.from_programs(
        [gi.compile("def f(x):\n    return x\n", mode="serial").program]).reduces
    x = np.ones((1, 12), dtype=np.float32)
    batch = ProgramBatch.from_results([prog])
    with pytest.raises(ValueError, match="row length"):
        fused.evaluate(arrays, x, "float32")
    with pytest.raises(ValueError, match="row length"):
        fused.compare(arrays, x, x[0], "float32", 0.0, 0.0)
    with pytest.raises(ValueError, match="row length"):
        vm.run(batch, torch.ones(1, 12))
    for bad in (5, -1):
        with pytest.raises(ValueError):
            fused.evaluate(arrays, x, "float32", row=bad)
        with pytest.raises(ValueError):
            vm.run(batch, torch.ones(1, 12), row=bad)
    assert fused.evaluate(arrays, x, "float32", row=4).shape == (1, 12)
    assert fused.evaluate(arrays, x[:, :0], "float32", row=4).shape == (1, 0)


def test_elementwise_programs_run_alike_in_row_mode():
    """A program without a reduction gives the same outputs elementwise and in row mode (any row length)."""
    result = compile_batch(["def f(x, y):\n    return x * y + 0.1\n", "def f(x):\n    return x // 3\n"],
                           mode="serial")
    arrays = fused.ProgramArrays.from_programs(list(result.results))
    x = np.random.default_rng(0).standard_normal((2, 3003)).astype(np.float32)
    flat = fused.evaluate(arrays, x, "float32")
    for n in (1, 7, 33, 1001, 3003):
        assert np.array_equal(flat.view(np.int32), fused.evaluate(arrays, x, "float32", row=n).view(np.int32))
        assert torch.equal(vm.run(result.batch, torch.from_numpy(x), "float32", row=n),
                           vm.run(result.batch, torch.from_numpy(x), "float32"))


def test_vm_chunks_keep_whole_rows():
    programs = list(_programs(20, 5, True))
    batch = ProgramBatch.from_results(programs)
    for n in (7, 129, 1000):
        x = torch.from_numpy(_row_inputs(3, "float64", n, 12, seed=n).reshape(3, -1))
        whole = vm.run(batch, x, "float64", row=n)
        per_row = len(programs) * vm.schedule(batch).n_regs * 8 * n  # register bytes of one row
        for budget in (1, per_row // 3, per_row * 5 // 2):  # under one row, 2.5 rows a chunk (2 are run)
            small = vm.run(batch, x, "float64", row=n, budget=budget)
            assert torch.equal(_bits(whole), _bits(small)), (n, budget)


# --- fused.compare on rows ------------------------------------------------------------------------------------

def _one_bad_element(rows: int, n: int, bad_row: int, seed: int = 0) -> np.ndarray:
    """[1, rows * n] float32 inputs in (-3, 3) holding 0.5 at exactly one position, in row bad_row."""
    x = np.random.default_rng(seed).uniform(-3, 3, (rows, n)).astype(np.float32)
    x[x == 0.5] = 0.75
    x[bad_row, n // 2] = 0.5
    return x.reshape(1, -1)


@pytest.mark.parametrize("n", [1, 3, 33, 1000, 2049])
def test_compare_counts_rows(monkeypatch, n):
    """A candidate wrong on exactly one element of one row: failures 1 (the row), first_failure that row's
    index, evaluated in rows; a per-row candidate wrong on one row (every element of it, once broadcast) is
    one failure too; the max errors are over elements; one lane or several, stop_early or not, the same."""
    softmax = REAL["softmax"][0]
    bad_softmax = softmax.replace("return e / sum(e)", "return e / sum(e) + where(x == 0.5, 1.0, 0.0)")
    lse = REAL["logsumexp"][0]
    bad_lse = lse.replace("return m + log(sum(exp(x - m)))", "return m + log(sum(exp(x - m))) + max(x == 0.5)")
    rows = max(3, min(90, 6000 // n))
    bad_row = rows * 2 // 3
    x = _one_bad_element(rows, n, bad_row)
    per_tile = fused.row_span(n) // n
    for good_src, bad_src in ((softmax, bad_softmax), (lse, bad_lse)):
        good, bad = (gi.compile(s, mode="serial").program for s in (good_src, bad_src))
        want = fused.evaluate(fused.ProgramArrays.from_programs([good]), x, "float32", row=n)[0]
        if good.returns_per_row():  # as the caller broadcasts a per-row reference along its rows
            assert np.array_equal(want.reshape(rows, n), np.repeat(want.reshape(rows, n)[:, :1], n, axis=1))
        arrays = fused.ProgramArrays.from_programs([bad, good])
        got = fused.evaluate(arrays, x, "float32", row=n)[0]
        diff = np.abs(got.astype(np.float64) - want)
        results = []
        for threads, inline in ((1, 1 << 62), (3, 0), (8, 0)):
            with monkeypatch.context() as patch:
                patch.setattr(fused, "threads", lambda t=threads: t)
                patch.setattr(fused, "INLINE_WORK", inline)
                patch.setattr(fused, "_POOL", None)
                try:
                    for stop in (True, False):
                        c = fused.compare(arrays, x, want, "float32", 1e-5, 1e-6, stop_early=stop, row=n)
                        results.append((stop, c))
                finally:
                    if fused._POOL is not None:
                        fused._POOL.shutdown()
        for stop, c in results:
            assert c.failures.tolist() == [1, 0] and c.first_failure.tolist() == [bad_row, -1], (stop, c)
            # evaluated rows: all, or with stop_early those of the tiles up to the failing one (whole rows)
            assert c.evaluated.tolist() == [min(rows, (bad_row // per_tile + 1) * per_tile) if stop else rows, rows]
            assert c.max_abs_err[0] == diff.max() and c.max_abs_err[1] == 0.0 and c.max_ulp_err[1] == 0.0
            assert c.max_ulp_err[0] > 1000


def test_compare_rows_agrees_with_elementwise_counting():
    """Row mode counts the rows holding failures that elementwise counting finds, the first failing row is the
    row of the first failing element, and the error maxima are the same."""
    prog = gi.compile(REAL["rmsnorm"][0], mode="serial").program
    wrong = gi.compile(REAL["rmsnorm"][0].replace("1e-6", "1e-4"), mode="serial").program
    n, rows = 31, 200
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((2, rows, n)) * np.exp(rng.uniform(-4, 2, (1, rows, 1)))).astype(np.float32)
    x = x.reshape(2, -1)
    want = fused.evaluate(fused.ProgramArrays.from_programs([prog]), x, "float32", row=n)[0]
    got = fused.evaluate(fused.ProgramArrays.from_programs([wrong]), x, "float32", row=n)[0]
    identity = fused.ProgramArrays.from_programs([gi.compile("def f(x, y):\n    return x\n", mode="serial").program])
    c_rows = fused.compare(fused.ProgramArrays.from_programs([wrong]), x, want, "float32", 1e-4, 1e-5,
                           stop_early=False, row=n)
    c_elem = fused.compare(identity, np.stack([got, got]), want, "float32", 1e-4, 1e-5, stop_early=False)
    failing = ~np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-4, atol=1e-5)
    assert 0 < c_rows.failures[0] < rows
    assert c_rows.failures[0] == failing.reshape(rows, n).any(-1).sum()
    assert c_rows.first_failure[0] == c_elem.first_failure[0] // n
    assert c_elem.failures[0] == failing.sum() and c_rows.evaluated[0] == rows
    for field in ("max_abs_err", "max_rel_err", "max_ulp_err"):
        assert getattr(c_rows, field)[0] == getattr(c_elem, field)[0], field
