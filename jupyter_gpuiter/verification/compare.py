"""On-device comparison of candidate outputs with reference outputs.

``compare`` is pure tensor code (no host synchronisation): it returns tensors that stay on the
device, and only the caller decides which scalars to bring back.

Semantics (docs/verification.md, "What is compared"):

* a pair is **close** iff both are finite and ``|got - exp| <= atol + rtol * |exp|`` (computed in
  float64), or ``got == exp`` (this covers the same infinity, and +0 / -0), or both are nan.
  nan where the reference is not nan fails; a finite value where the reference is nan fails; an
  infinity of the other sign, or a finite value against an infinity, fails.
* **bool** outputs (either side bool, or ``dtype="bool"``) compare exactly (True == 1.0).
* Default tolerances are those of ``torch.testing.assert_close`` for the kernel dtype.
* **Error reductions** (per candidate, over the N values) are taken over pairs where both values
  are finite; mismatched nan/inf pairs show up only in ``failures`` / ``first_failure``. A
  candidate with no finite pair reports 0.
  - ``max_abs_err``: ``max |got - exp|``.
  - ``max_rel_err``: ``max |got - exp| / |exp|`` over pairs with ``exp != 0`` (pairs with a zero
    reference are skipped: their error is absolute, see ``max_abs_err``).
  - ``max_ulp_err``: the number of representable values of the kernel dtype between ``got`` and
    ``exp`` after rounding both to that dtype (floats mapped onto a monotonic integer line, so
    +0 and -0 are 0 apart, and the smallest subnormals of opposite sign are 2 apart). Exact for
    float16/bfloat16/float32; for float64 exact up to 2^53 and approximate above (as a float64).
    For exact (bool) comparisons it is ``|got - exp|``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .pools import FLOAT_DTYPES, as_dtype

__all__ = ["Comparison", "compare", "default_tolerances", "trivial_reference", "ulp_distance"]

# torch.testing.assert_close's defaults (torch/testing/_comparison.py, _DTYPE_PRECISIONS): (rtol, atol)
_TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}

_INT_TWIN = {
    torch.float16: (torch.int16, -(1 << 15)),
    torch.bfloat16: (torch.int16, -(1 << 15)),
    torch.float32: (torch.int32, -(1 << 31)),
    torch.float64: (torch.int64, -(1 << 63)),
}


def _kernel_dtype(dtype) -> torch.dtype:
    if dtype is torch.bool or (isinstance(dtype, str) and dtype.strip().lower() in ("bool", "torch.bool")):
        return torch.bool
    return as_dtype(dtype)


def default_tolerances(dtype) -> tuple[float, float]:
    """``(rtol, atol)`` that ``torch.testing.assert_close`` uses for ``dtype`` ((0, 0) for bool)."""
    dt = _kernel_dtype(dtype)
    if dt is torch.bool:
        return 0.0, 0.0
    return _TOLERANCES[dt]


@dataclass
class Comparison:
    """Per-value and per-candidate results of :func:`compare`; every tensor is on the device.

    ``ok`` is ``[B, N]`` bool; ``failures`` ``[B]`` int64; ``first_failure`` ``[B]`` int64 (index,
    or -1 when none); ``max_abs_err``, ``max_rel_err``, ``max_ulp_err`` ``[B]`` float64;
    ``evaluated`` ``[B]`` int64, the values each row's counts cover (N, unless ``tile`` stopped it).
    """

    ok: torch.Tensor
    failures: torch.Tensor
    first_failure: torch.Tensor
    max_abs_err: torch.Tensor
    max_rel_err: torch.Tensor
    max_ulp_err: torch.Tensor
    rtol: float
    atol: float
    dtype: torch.dtype  # the kernel dtype (torch.bool for exact comparisons)
    evaluated: torch.Tensor | None = None

    @property
    def passed(self) -> torch.Tensor:
        """``[B]`` bool: no failing value."""
        return self.failures == 0

    @property
    def batch_size(self) -> int:
        return self.ok.shape[0]


def _monotonic_keys(x: torch.Tensor) -> torch.Tensor:
    """Floats of x's dtype as int64 keys on a line where neighbouring floats differ by 1."""
    itype, imin = _INT_TWIN[x.dtype]
    i = x.view(itype).to(torch.int64)
    # sign-magnitude -> two's complement order: negative floats become -(magnitude bits); -0 -> 0
    return torch.where(i < 0, imin - i, i)


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise number of representable steps between a and b (same float dtype), as float64.

    Meaningful for non-nan values; ±inf sit one step beyond the largest finite value.
    """
    if a.dtype != b.dtype or a.dtype not in _INT_TWIN:
        raise ValueError(f"ulp_distance needs two tensors of one float dtype, got {a.dtype} and {b.dtype}")
    ka, kb = _monotonic_keys(a), _monotonic_keys(b)
    if a.dtype != torch.float64:
        return (ka - kb).abs().to(torch.float64)
    same_side = (ka >= 0) == (kb >= 0)
    near = (ka - kb).abs().to(torch.float64)  # exact when both keys lie on one side of zero
    far = ka.abs().to(torch.float64) + kb.abs().to(torch.float64)  # no int64 overflow across zero
    return torch.where(same_side, near, far)


def _as_batch(t: torch.Tensor, name: str) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    if t.dim() == 1:
        return t.unsqueeze(0)
    if t.dim() == 2:
        return t
    raise ValueError(f"{name} must have shape [N] or [B, N], got {list(t.shape)}")


def _rowmax(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    masked = torch.where(mask, values, torch.zeros((), dtype=values.dtype, device=values.device))
    if masked.shape[1] == 0:
        return torch.zeros(masked.shape[0], dtype=values.dtype, device=values.device)
    return masked.amax(dim=1)


def compare(got: torch.Tensor, expected: torch.Tensor, *, rtol: float | None = None,
            atol: float | None = None, dtype=None, tile: int | None = None) -> Comparison:
    """Compare candidate outputs ``got`` ([B, N] or [N]) with reference outputs ``expected``
    ([N], broadcast over the batch, or [B, N]).

    ``dtype`` is the kernel dtype (a torch dtype or name; "bool" for exact comparison); it picks
    the default tolerances and the ULP grid. Default: ``got``'s floating dtype, else
    ``expected``'s. A tolerance left None takes the dtype's default. See the module docstring.

    ``tile``: count each row only up to the end of the tile (``tile`` values, from index 0) that
    holds its first failure, as an evaluator that stops a candidate at its first failing tile does
    (runtime/fused.py): ``failures``, the error maxima and ``evaluated`` then cover those values;
    ``ok`` and ``first_failure`` are unchanged.
    """
    g = _as_batch(got, "got")
    e = _as_batch(expected, "expected")
    if e.device != g.device:
        e = e.to(g.device)
    if g.shape[1] != e.shape[1]:
        raise ValueError(f"got has {g.shape[1]} values per candidate but expected has {e.shape[1]}")
    if g.shape[0] != e.shape[0] and 1 not in (g.shape[0], e.shape[0]):
        raise ValueError(f"got has {g.shape[0]} candidates but expected has {e.shape[0]} rows")
    # a single row on either side broadcasts in the elementwise ops below (no [B, N] copy of it)

    if dtype is not None:
        kd = _kernel_dtype(dtype)
    elif g.dtype.is_floating_point and g.dtype in FLOAT_DTYPES:
        kd = g.dtype
    elif e.dtype.is_floating_point and e.dtype in FLOAT_DTYPES:
        kd = e.dtype
    else:
        kd = torch.bool  # integers or bools on both sides: exact
    exact = kd is torch.bool or g.dtype == torch.bool or e.dtype == torch.bool
    if exact:
        kd = torch.bool
        rtol_, atol_ = 0.0, 0.0
    else:
        d_rtol, d_atol = default_tolerances(kd)
        rtol_ = d_rtol if rtol is None else float(rtol)
        atol_ = d_atol if atol is None else float(atol)
        if not (rtol_ >= 0 and atol_ >= 0):
            raise ValueError(f"rtol and atol must be non-negative numbers, got rtol={rtol!r}, atol={atol!r}")

    work = torch.float32 if g.device.type == "mps" else torch.float64
    g64, e64 = g.to(work), e.to(work)
    both_nan = torch.isnan(g64) & torch.isnan(e64)
    finite = torch.isfinite(g64) & torch.isfinite(e64)
    diff = (g64 - e64).abs()
    ok = (g64 == e64) | both_nan
    if not exact:
        ok = ok | (finite & (diff <= atol_ + rtol_ * e64.abs()))

    bad = ~ok
    n = ok.shape[1]
    if n:
        index = torch.arange(n, device=ok.device).expand_as(ok)
        first = torch.where(bad, index, torch.full_like(index, n)).amin(dim=1)
        first_failure = torch.where(first == n, torch.full_like(first, -1), first)
    else:
        first = torch.zeros((ok.shape[0],), dtype=torch.int64, device=ok.device)
        first_failure = torch.full((ok.shape[0],), -1, dtype=torch.int64, device=ok.device)
    if tile is not None and n:
        if int(tile) < 1:
            raise ValueError(f"tile must be a positive number of values, got {tile!r}")
        evaluated = torch.clamp((first // int(tile) + 1) * int(tile), max=n)  # first == n: no failure, all n
        counted = index < evaluated[:, None]
        bad = bad & counted
        finite = finite & counted
    else:
        evaluated = torch.full((ok.shape[0],), n, dtype=torch.int64, device=ok.device)
    failures = bad.sum(dim=1)

    max_abs = _rowmax(diff, finite)
    nonzero = finite & (e64 != 0)
    rel = diff / torch.where(nonzero, e64.abs(), torch.ones((), dtype=work, device=e64.device))
    max_rel = _rowmax(rel, nonzero)
    if exact or kd not in _INT_TWIN:
        max_ulp = max_abs
    else:
        gk, ek = g.to(kd), e.to(kd)
        finite_k = torch.isfinite(gk) & torch.isfinite(ek)
        if tile is not None and n:
            finite_k = finite_k & counted
        max_ulp = _rowmax(ulp_distance(gk, ek), finite_k)
    return Comparison(ok, failures, first_failure, max_abs.to(torch.float64), max_rel.to(torch.float64),
                      max_ulp.to(torch.float64), rtol_, atol_, kd, evaluated)


#: values per block of trivial_reference's passes: its temporaries are O(block), whatever the output count
TRIVIAL_BLOCK = 1 << 20


def trivial_reference(expected: torch.Tensor, *, rtol: float | None = None, atol: float | None = None,
                      dtype=None) -> str | None:
    """Why the reference outputs are too trivial to verify against, or None when they are fine.

    Flagged: no outputs; all nan; all nan or infinite; all zero; and (with at least two finite
    values) *nearly constant* — one constant ``c`` (the midpoint of the finite range) is within
    ``atol + rtol * |exp|`` of every finite output, so a candidate returning ``c`` would pass on
    those values. Tolerances default to the dtype's (bool: exactly constant). Reads the outputs in
    blocks of ``TRIVIAL_BLOCK`` (two passes), so its temporaries stay small for any count; brings a
    few scalars per block to the host.
    """
    e = expected.reshape(-1)
    n = e.numel()
    if n == 0:
        return "the reference produced no outputs"
    blocks = [e[lo:lo + TRIVIAL_BLOCK] for lo in range(0, n, TRIVIAL_BLOCK)]
    is_bool = e.dtype == torch.bool or (dtype is not None and _kernel_dtype(dtype) is torch.bool)
    if is_bool:
        count = sum(int((b.to(torch.bool) if b.dtype == torch.bool else b != 0).sum()) for b in blocks)
        if n >= 2 and count in (0, n):
            return f"the reference output is constant: {count == n} for all {n:,} inputs"
        return None
    work = torch.float32 if e.device.type == "mps" else torch.float64
    kd = _kernel_dtype(dtype) if dtype is not None else (e.dtype if e.dtype in FLOAT_DTYPES else torch.float64)
    d_rtol, d_atol = default_tolerances(kd)
    rtol_ = d_rtol if rtol is None else float(rtol)
    atol_ = d_atol if atol is None else float(atol)
    n_finite = n_nan = n_zero = 0
    lo, hi = math.inf, -math.inf
    for b in blocks:
        x = b.to(work)
        finite = torch.isfinite(x)
        stats = torch.stack([
            finite.sum().to(work),
            torch.isnan(x).sum().to(work),
            (x == 0).sum().to(work),
            torch.where(finite, x, torch.full_like(x, math.inf)).amin(),
            torch.where(finite, x, torch.full_like(x, -math.inf)).amax(),
        ]).tolist()  # one transfer per block
        n_finite, n_nan, n_zero = n_finite + int(stats[0]), n_nan + int(stats[1]), n_zero + int(stats[2])
        lo, hi = min(lo, stats[3]), max(hi, stats[4])
    if n_nan == n:
        return f"the reference output is nan for all {n:,} inputs"
    if n_finite == 0:
        return f"the reference output is nan or infinite for all {n:,} inputs"
    if n_zero == n:
        return f"the reference output is zero for all {n:,} inputs"
    if n_finite >= 2:
        c = lo / 2 + hi / 2
        for b in blocks:
            x = b.to(work)
            if not bool((((x - c).abs() <= atol_ + rtol_ * x.abs()) | ~torch.isfinite(x)).all()):
                return None
        others = n - n_finite
        extra = f" ({others:,} nan/inf outputs aside)" if others else ""
        if lo == hi:
            what = f"the reference output is constant: {lo!r} for all {n_finite:,} finite outputs"
        else:
            what = (f"the reference output is nearly constant: every finite output is within "
                    f"atol={atol_:g} + rtol={rtol_:g}*|expected| of {c!r}")
        return what + extra
    return None
