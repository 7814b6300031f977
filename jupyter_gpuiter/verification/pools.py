"""Test-input pools generated on the device: seeded, recorded, with domains and special values.

Everything here is tensor code on the requested device (CPU or CUDA); only scalars that describe
the request (domain edges, counts) are computed on the host, never the data.

Choices (docs/verification.md, "What is compared"):

* **Domains** are finite intervals ``[low, high]`` with ``low < high``. ``inf``/``nan`` bounds are
  rejected: leave the parameter without a domain to get ±inf and nan as special values.
* **Log spacing** samples ``log|x|`` uniformly. It needs both bounds on the same side of zero:
  ``low > 0`` (positive magnitudes) or ``high < 0`` (negative values, magnitudes in
  ``[-high, -low]``). A range that contains zero has no lower magnitude, so ``log`` with
  ``low <= 0 <= high`` is a ``ValueError`` (the default mix below already covers log-spaced
  magnitudes of both signs).
* **Default domain** (a parameter without a domain): each value is, with probability 1/2,
  uniform in ``[-10, 10]``, else a log-uniform magnitude in ``[1e-6, 1e6]`` (the top clipped to
  the dtype's largest finite value, so float16 gets no accidental infinities) with a random sign.
* **Specials**: ``round(special_share * n)`` positions per parameter, chosen independently per
  parameter (one at random inside each of that many equal strata of the row, so every chunk of
  the pool gets its share), are overwritten. A parameter *without* a domain gets the full :func:`special_values`
  set (±0, ±inf, nan, ±1, ±tiny, ±smallest subnormal, ±huge, a few ordinary values), tiled in a
  random order so that every special appears once the count allows. A parameter *with* a domain
  gets its two edges (the smallest and largest values of the dtype inside ``[low, high]``; always
  inserted, even when the share rounds to zero, as long as ``n`` allows) followed by the specials
  that lie inside the domain (e.g. 0 and ±1 for ``-5:5``) — so every value of a domain parameter
  stays inside ``[low, high]``.
* **Rounding**: samples are drawn in float32 (float64 for float64 kernels), rounded to the kernel
  dtype and clamped to the domain's representable edges, so rounding never leaves the domain.
  Bounds beyond the dtype's finite range are clipped to it; a domain with no finite value of the
  dtype is a ``ValueError``.
* **Seeds**: parameter ``i`` uses its own generator seeded from ``(seed, i)``, so each row depends
  only on the seed, its index, its domain, ``n``, the dtype and the device type (CPU and CUDA
  generators produce different streams). A row longer than ``SAMPLE_BLOCK`` values is drawn block by
  block from its generator, so generating it takes O(block) work memory.
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch

from ..runtime.device import resolve

__all__ = [
    "DEFAULT_ROW_LENGTHS",
    "FLOAT_DTYPES",
    "ROW_KINDS",
    "Domain",
    "InputPool",
    "as_domain",
    "as_dtype",
    "as_row_lengths",
    "exhaustive_inputs",
    "make_inputs",
    "make_rows",
    "parse_domain",
    "parse_domains",
    "special_values",
    "split_rows",
]

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

_DTYPE_NAMES = {
    "float16": torch.float16,
    "half": torch.float16,
    "fp16": torch.float16,
    "f16": torch.float16,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float32": torch.float32,
    "float": torch.float32,
    "fp32": torch.float32,
    "f32": torch.float32,
    "float64": torch.float64,
    "double": torch.float64,
    "fp64": torch.float64,
    "f64": torch.float64,
}

# Bit-level integer twins of the float dtypes (same width).
_INT_TWIN = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float32: torch.int32,
    torch.float64: torch.int64,
}

DEFAULT_UNIFORM = (-10.0, 10.0)
DEFAULT_LOG_MAGNITUDES = (1e-6, 1e6)


def as_dtype(dtype) -> torch.dtype:
    """A floating torch dtype from a torch dtype or a name such as ``"float32"`` / ``"bf16"``."""
    if isinstance(dtype, torch.dtype):
        dt = dtype
    elif isinstance(dtype, str):
        name = dtype.strip().lower()
        name = name.removeprefix("torch.")
        if name not in _DTYPE_NAMES:
            raise ValueError(
                f"unknown dtype {dtype!r}: expected one of float16, bfloat16, float32, float64"
            )
        dt = _DTYPE_NAMES[name]
    else:
        raise TypeError(f"dtype must be a torch dtype or a name such as 'float32', not {dtype!r}")
    if dt not in FLOAT_DTYPES:
        raise ValueError(f"unsupported dtype {dt}: expected one of float16, bfloat16, float32, float64")
    return dt


# ---------------------------------------------------------------------------------------------
# Domains


@dataclass(frozen=True)
class Domain:
    """A finite input interval ``[low, high]``; ``log`` samples magnitudes log-uniformly.

    ``log`` needs ``low > 0`` or ``high < 0`` (see the module docstring).
    """

    low: float
    high: float
    log: bool = False

    def __post_init__(self):
        try:
            low, high = float(self.low), float(self.high)
        except (TypeError, ValueError):
            raise ValueError(f"domain bounds must be numbers, got low={self.low!r}, high={self.high!r}") from None
        if math.isnan(low) or math.isnan(high):
            raise ValueError("domain bounds must be numbers, not nan")
        if math.isinf(low) or math.isinf(high):
            raise ValueError(
                f"domain bounds must be finite, got {low:g}:{high:g}; leave the parameter without a "
                "domain to test ±inf and nan as special values"
            )
        if not low < high:
            raise ValueError(f"domain low must be below high, got {low:g}:{high:g}")
        if self.log and low <= 0.0 <= high:
            raise ValueError(
                f"log spacing needs both bounds on the same side of zero (e.g. 1e-3:1e3:log or "
                f"-1e3:-1e-3:log), got {low:g}:{high:g}; use a linear domain or no domain for ranges "
                "around zero"
            )
        object.__setattr__(self, "low", low)
        object.__setattr__(self, "high", high)
        object.__setattr__(self, "log", bool(self.log))

    def __str__(self) -> str:
        return f"{self.low!r}:{self.high!r}" + (":log" if self.log else "")


_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FORM = "NAME=LOW:HIGH or NAME=LOW:HIGH:log (e.g. x=-5:5 or x=1e-3:1e3:log)"


def _parse_bound(text: str, which: str, whole: str) -> float:
    t = text.strip()
    try:
        value = float(t)
    except ValueError:
        raise ValueError(f"domain {whole!r}: {which} bound {t!r} is not a number; expected {_FORM}") from None
    if math.isnan(value):
        raise ValueError(f"domain {whole!r}: {which} bound must be a number, not nan")
    if math.isinf(value):
        raise ValueError(
            f"domain {whole!r}: {which} bound must be finite, got {t!r}; leave the parameter without a "
            "domain to test ±inf and nan as special values"
        )
    return value


def _parse_range(spec: str, whole: str) -> Domain:
    parts = spec.split(":")
    log = False
    if len(parts) == 3:
        if parts[2].strip().lower() != "log":
            raise ValueError(
                f"domain {whole!r}: unknown option {parts[2].strip()!r}; the only option is 'log', "
                f"expected {_FORM}"
            )
        log = True
        parts = parts[:2]
    if len(parts) != 2:
        raise ValueError(f"domain {whole!r} must look like {_FORM}")
    low = _parse_bound(parts[0], "low", whole)
    high = _parse_bound(parts[1], "high", whole)
    if not low < high:
        raise ValueError(f"domain {whole!r}: low ({low:g}) must be below high ({high:g})")
    try:
        return Domain(low, high, log)
    except ValueError as err:
        raise ValueError(f"domain {whole!r}: {err}") from None


def parse_domain(text: str) -> tuple[str, Domain]:
    """Parse ``"x=-5:5"`` or ``"x=1e-3:1e3:log"`` into ``("x", Domain(...))``.

    Raises ``ValueError`` with a message saying what was expected.
    """
    if not isinstance(text, str):
        raise TypeError(f"domain must be a string like 'x=-5:5', not {type(text).__name__}")
    whole = text.strip()
    if "=" not in whole:
        raise ValueError(f"domain {whole!r} must look like {_FORM}")
    name, _, spec = whole.partition("=")
    name = name.strip()
    if not _NAME_RE.match(name):
        raise ValueError(f"domain {whole!r}: {name!r} is not a parameter name; expected {_FORM}")
    if not spec.strip():
        raise ValueError(f"domain {whole!r} must look like {_FORM}")
    return name, _parse_range(spec, whole)


def parse_domains(texts) -> dict[str, Domain]:
    """Parse several domains (a list of strings, or one string separated by commas/semicolons).

    A parameter named twice is a ``ValueError``.
    """
    if isinstance(texts, str):
        texts = [t for t in re.split(r"[,;]", texts) if t.strip()]
    out: dict[str, Domain] = {}
    for text in texts:
        name, dom = parse_domain(text)
        if name in out:
            raise ValueError(f"domain for parameter {name!r} given twice ({out[name]} and {dom})")
        out[name] = dom
    return out


def as_domain(value) -> Domain | None:
    """A ``Domain`` (or None) from a Domain, ``(low, high)``, ``(low, high, log)`` or ``"LOW:HIGH[:log]"``."""
    if value is None or isinstance(value, Domain):
        return value
    if isinstance(value, str):
        return _parse_range(value.strip(), value.strip())
    if isinstance(value, (tuple, list)) and len(value) in (2, 3):
        return Domain(*value)
    raise ValueError(f"a domain must be (low, high), (low, high, log), 'LOW:HIGH[:log]' or a Domain, not {value!r}")


# ---------------------------------------------------------------------------------------------
# Special values


def _bits_value(bits: int, dtype: torch.dtype) -> float:
    """The float whose bit pattern is ``bits`` (a non-negative integer below 2^(width-1))."""
    return float(torch.tensor([bits], dtype=_INT_TWIN[dtype]).view(dtype)[0])


def smallest_subnormal(dtype) -> float:
    return _bits_value(1, as_dtype(dtype))


ORDINARY_VALUES = (0.5, -2.0, 3.0, -0.1)


def special_values(dtype, device=None) -> torch.Tensor:
    """±0, ±inf, nan, ±1, ±tiny (smallest normal), ±smallest subnormal, ±huge (largest finite),
    and a few ordinary values (0.5, -2, 3, -0.1), as a 1-D tensor of ``dtype``."""
    dt = as_dtype(dtype)
    fi = torch.finfo(dt)
    sub = smallest_subnormal(dt)
    inf = math.inf
    vals = [0.0, -0.0, inf, -inf, math.nan, 1.0, -1.0, fi.tiny, -fi.tiny, sub, -sub, fi.max, -fi.max]
    vals += list(ORDINARY_VALUES)
    return torch.tensor(vals, dtype=torch.float64).to(dt).to(resolve(device))


# ---------------------------------------------------------------------------------------------
# Sampling


def _mix_seed(seed: int, index: int) -> int:
    """splitmix64 of (seed, index): independent, well-spread generator seeds per parameter."""
    mask = (1 << 64) - 1
    z = (int(seed) * 0x9E3779B97F4A7C15 + (index + 1) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    z ^= z >> 31
    return z & ((1 << 63) - 1)


def _generator(device: torch.device, seed: int, index: int) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(_mix_seed(seed, index))
    return g


def _round_toward(value: float, dtype: torch.dtype, up: bool) -> float:
    """The nearest value of ``dtype`` that is >= value (up) or <= value (down)."""
    t = torch.tensor(value, dtype=torch.float64).to(dtype)
    v = float(t)
    if (up and v < value) or (not up and v > value):
        t = torch.nextafter(t, torch.tensor(math.inf if up else -math.inf, dtype=dtype))
        v = float(t)
    return v


def domain_edges(domain: Domain, dtype) -> tuple[float, float]:
    """The smallest and largest finite values of ``dtype`` inside ``domain`` (ValueError if none)."""
    dt = as_dtype(dtype)
    fmax = torch.finfo(dt).max
    lo = _round_toward(max(domain.low, -fmax), dt, up=True)
    hi = _round_toward(min(domain.high, fmax), dt, up=False)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi) or (domain.log and not (lo * hi > 0)):
        raise ValueError(f"domain {domain} contains no finite {str(dt).replace('torch.', '')} value")
    return lo, hi


def _log_uniform(u: torch.Tensor, a: float, b: float) -> torch.Tensor:
    la, lb = math.log(a), math.log(b)
    return torch.exp(la + (lb - la) * u)


#: values sampled per generator call: a larger row is drawn in blocks of this many, so generating it needs
#: O(block) work memory whatever its length (smaller rows are one call, as they always were)
SAMPLE_BLOCK = 1 << 22


def _sample_row(n, dt, work, domain, g, device, out=None):
    """n samples of one parameter in dtype dt (into `out` when given), drawn in blocks of SAMPLE_BLOCK."""
    if n <= SAMPLE_BLOCK:
        x = _sample_block(n, dt, work, domain, g, device)
        if out is None:
            return x
        out.copy_(x)
        return out
    out = torch.empty(n, dtype=dt, device=device) if out is None else out
    for lo in range(0, n, SAMPLE_BLOCK):
        hi = min(n, lo + SAMPLE_BLOCK)
        out[lo:hi] = _sample_block(hi - lo, dt, work, domain, g, device)
    return out


def _sample_block(n, dt, work, domain, g, device):
    if domain is None:
        u = torch.rand((4, n), generator=g, dtype=work, device=device)
        lo, hi = DEFAULT_UNIFORM
        uniform = lo + (hi - lo) * u[0]
        mmin, mmax = DEFAULT_LOG_MAGNITUDES
        mag = _log_uniform(u[1], mmin, min(mmax, torch.finfo(dt).max))
        signed = torch.where(u[2] < 0.5, -mag, mag)
        return torch.where(u[3] < 0.5, uniform, signed).to(dt)
    lo, hi = domain_edges(domain, dt)
    u = torch.rand(n, generator=g, dtype=work, device=device)
    if domain.log:
        a, b = (lo, hi) if lo > 0 else (-hi, -lo)
        x = _log_uniform(u, a, b)
        if lo < 0:
            x = -x
    else:
        x = lo * (1.0 - u) + hi * u  # no overflow of (hi - lo) for huge ranges
    return x.to(dt).clamp_(lo, hi)


def _insert_values(dt, domain):
    """Host-side description of what to insert: (list of edge values, list of other candidates)."""
    specials = special_values(dt, device="cpu").tolist()
    if domain is None:
        return [], specials
    lo, hi = domain_edges(domain, dt)
    # the finite specials strictly inside (both 0.0 and -0.0 when zero is inside)
    inside = [s for s in specials if math.isfinite(s) and lo <= s <= hi and s not in (lo, hi)]
    return [lo, hi], inside


def _spread_positions(n: int, m: int, g: torch.Generator, device) -> torch.Tensor:
    """m distinct random positions in [0, n): one uniformly inside each of m equal strata.

    O(m) memory (no permutation of n), and every prefix of the pool gets its share of specials,
    which matters to a verifier that stops at the first failing chunk.
    """
    starts = torch.arange(m + 1, device=device, dtype=torch.int64) * n // m
    widths = starts[1:] - starts[:-1]  # >= 1 because m <= n
    work = torch.float32 if torch.device(device).type == "mps" else torch.float64
    offsets = (torch.rand(m, generator=g, device=device, dtype=work) * widths).long()
    return starts[:-1] + torch.minimum(offsets, widths - 1)


def make_inputs(
    n_params: int,
    n: int,
    *,
    dtype="float32",
    domains=None,
    seed: int = 0,
    device=None,
    special_share: float = 0.02,
) -> torch.Tensor:
    """Test inputs of shape ``[n_params, n]`` in ``dtype`` on ``device``, deterministic for ``seed``.

    ``domains`` is None or a list with one entry per parameter: a :class:`Domain`, ``None`` (the
    default mix), or anything :func:`as_domain` accepts. See the module docstring for the sampling
    rules, the special values and how domains interact with them.
    """
    dt = as_dtype(dtype)
    dev = resolve(device)
    n_params, n = int(n_params), int(n)
    if n_params < 0 or n < 0:
        raise ValueError(f"n_params and n must be non-negative, got n_params={n_params}, n={n}")
    share = float(special_share)
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"special_share must be between 0 and 1, got {special_share!r}")
    if domains is None:
        domains = [None] * n_params
    else:
        domains = [as_domain(d) for d in domains]
        if len(domains) != n_params:
            raise ValueError(f"got {len(domains)} domains for {n_params} parameters (use None for no domain)")
    work = torch.float64 if dt == torch.float64 else torch.float32
    if dev.type == "mps":  # no float64 on MPS
        work = torch.float32
    out = torch.empty((n_params, n), dtype=dt, device=dev)
    n_special = round(share * n)
    for i, dom in enumerate(domains):
        g = _generator(dev, seed, i)
        if n == 0:
            continue
        _sample_row(n, dt, work, dom, g, dev, out=out[i])
        edges, pool = _insert_values(dt, dom)
        m = min(n, max(n_special, len(edges)))
        if m == 0 or not (edges or pool):
            continue
        pool_t = torch.tensor(pool, dtype=torch.float64).to(dt).to(dev)
        if len(pool):
            pool_t = pool_t[torch.randperm(len(pool), generator=g, device=dev)]
        values = torch.cat([torch.tensor(edges, dtype=torch.float64).to(dt).to(dev), pool_t])
        values = values[torch.arange(m, device=dev) % values.numel()]
        out[i, _spread_positions(n, m, g, dev)] = values
    return out


# ---------------------------------------------------------------------------------------------
# Rows (row kernels: docs/verification.md, "Row kernels")

#: the row lengths a row kernel is checked on unless told otherwise: the shortest rows, lengths around the
#: powers of two an implementation blocks by (31, 32, 33, 127, 128, 129) and one long row
DEFAULT_ROW_LENGTHS = (1, 2, 3, 7, 31, 32, 33, 127, 128, 129, 1000)
#: the longest row a pool holds (a longer one is a clear ValueError, not an allocation)
MAX_ROW_LENGTH = 1 << 20
#: the share of a length's rows that are special rows (at least one of each kind while rows allow)
ROW_SPECIAL_SHARE = 0.125
#: the kinds of special rows, in the order they are first placed (docs/verification.md, "Row kernels")
ROW_KINDS = ("constant", "extreme", "edges", "near-constant", "specials")
#: in a "specials" row, the share of elements replaced by special values
ROW_SPECIALS_DENSITY = 0.25


def as_row_lengths(value) -> tuple[int, ...]:
    """Row lengths as a sorted tuple without repeats: None gives DEFAULT_ROW_LENGTHS; a whole number or an
    iterable of whole numbers >= 1 (ValueError naming the bad entry otherwise: 0, negatives, non-integers,
    bools, an empty list)."""
    if value is None:
        return DEFAULT_ROW_LENGTHS
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        value = [value]
    lengths = []
    for v in value:
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise ValueError(f"row_lengths must be whole numbers of elements (>= 1), got {v!r}")
        n = int(v.__index__())
        if n < 1:
            raise ValueError(f"row_lengths must be >= 1 (a row has at least one element), got {n}")
        if n > MAX_ROW_LENGTH:
            raise ValueError(f"row_lengths must be at most {MAX_ROW_LENGTH:,} elements, got {n:,}")
        lengths.append(n)
    if not lengths:
        raise ValueError("row_lengths must name at least one row length, got an empty list")
    return tuple(sorted(set(lengths)))


def split_rows(tests: int, lengths) -> list[int]:
    """Rows per length for `tests` rows: an equal share each, the remainder one each to the shortest lengths
    (so a length may get no row when tests < len(lengths))."""
    k = len(lengths)
    return [tests // k + (i < tests % k) for i in range(k)]


def _row_seed(seed: int, length: int) -> int:
    """The seed of one length's rows: each length's pool is independent of the others."""
    return _mix_seed(seed, (1 << 40) + int(length))


def _pick(values: torch.Tensor, count: int, g: torch.Generator) -> torch.Tensor:
    """count values drawn uniformly (with replacement) from the 1-D tensor `values`."""
    i = torch.randint(0, values.numel(), (count,), generator=g, device=values.device)
    return values[i]


def _special_rows(x, kinds, dt, work, domain, g, dev):
    """Overwrite rows of x [R, n] (their kinds given per row, indices into ROW_KINDS) with special rows.

    constant: every element one value (the row's first sample, a domain edge or a finite special inside);
    extreme: ordinary values (the middle tenth of the domain; [-10, 10] without one) and one extreme value
    (a domain edge; without a domain ±largest finite, ±1e4 or ±100) at a random position; edges: each
    element one of the two edges (±largest finite without a domain); near-constant: one value (an edge or
    the row's first sample) plus relative noise of 2^-10, clamped to the domain; specials: a quarter of
    the elements replaced by special values inside the domain (the full special set without one)."""
    n = x.shape[1]
    fmax = torch.finfo(dt).max
    if domain is None:
        lo, hi = -fmax, fmax
        inside = [s for s in special_values(dt, device="cpu").tolist() if math.isfinite(s)]
        extremes = [v for v in (fmax, -fmax, 1e4, -1e4, 100.0, -100.0) if abs(v) <= fmax]
        mid_lo, mid_hi = DEFAULT_UNIFORM
        specials = special_values(dt, device="cpu").tolist()
    else:
        lo, hi = domain_edges(domain, dt)
        inside = [lo, hi] + _insert_values(dt, domain)[1]
        extremes = [lo, hi]
        c, w = lo / 2 + hi / 2, (hi / 2 - lo / 2) * 0.1
        mid_lo, mid_hi = max(lo, c - w), min(hi, c + w)
        specials = inside

    def tensor(values):
        return torch.tensor(values, dtype=torch.float64).to(dt).to(dev)

    def inside_domain(t):
        return t.to(dt).clamp_(lo, hi)

    for k, kind in enumerate(ROW_KINDS):
        rows = (kinds == k).nonzero().flatten()
        r = rows.numel()
        if r == 0:
            continue
        if kind == "constant":
            pick = torch.cat([x[rows, 0], _pick(tensor(inside), r, g)])
            choose = torch.rand(r, generator=g, device=dev, dtype=work) < 1 / (len(inside) + 1)
            v = torch.where(choose, pick[:r], pick[r:])
            x[rows] = v[:, None].expand(r, n)
        elif kind == "extreme":
            u = torch.rand((r, n), generator=g, device=dev, dtype=work)
            base = inside_domain(mid_lo * (1.0 - u) + mid_hi * u)
            at = torch.randint(0, n, (r,), generator=g, device=dev)
            base[torch.arange(r, device=dev), at] = _pick(tensor(extremes), r, g)
            x[rows] = base
        elif kind == "edges":
            u = torch.rand((r, n), generator=g, device=dev, dtype=work)
            x[rows] = torch.where(u < 0.5, tensor([lo]), tensor([hi]))
        elif kind == "near-constant":
            first = x[rows, 0].to(work)
            edge = _pick(torch.tensor([lo, hi], dtype=work, device=dev), r, g)
            v = torch.where(torch.rand(r, generator=g, device=dev, dtype=work) < 0.5, edge, first)
            u = torch.rand((r, n), generator=g, device=dev, dtype=work) * 2 - 1
            x[rows] = inside_domain(v[:, None] * (1 + u * 2.0 ** -10))
        else:  # specials
            hit = torch.rand((r, n), generator=g, device=dev, dtype=work) < ROW_SPECIALS_DENSITY
            values = _pick(tensor(specials), r * n, g).reshape(r, n)
            x[rows] = torch.where(hit, values, x[rows])


def make_rows(n_params: int, rows: int, length: int, *, dtype="float32", domains=None, seed: int = 0,
              device=None, special_share: float = ROW_SPECIAL_SHARE) -> torch.Tensor:
    """Rows for row kernels: shape ``[n_params, rows * length]`` (row r of parameter i is
    ``x[i, r*length:(r+1)*length]``), deterministic for (seed, length, parameter, domain, dtype, device type).

    Ordinary rows are drawn as :func:`make_inputs` draws values (without its special values, so a long
    ordinary row is finite); ``round(special_share * rows)`` rows per parameter, at least one of each of
    ROW_KINDS while rows allow, spread over the pool, are special rows (see `_special_rows`). Every value
    of a parameter with a domain stays inside it.
    """
    dt = as_dtype(dtype)
    dev = resolve(device)
    n_params, rows, length = int(n_params), int(rows), int(length)
    if n_params < 0 or rows < 0 or length < 1:
        raise ValueError(f"n_params and rows must be non-negative and length positive, got n_params={n_params}, "
                         f"rows={rows}, length={length}")
    share = float(special_share)
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"special_share must be between 0 and 1, got {special_share!r}")
    domains = [None] * n_params if domains is None else [as_domain(d) for d in domains]
    if len(domains) != n_params:
        raise ValueError(f"got {len(domains)} domains for {n_params} parameters (use None for no domain)")
    work = torch.float64 if dt == torch.float64 else torch.float32
    if dev.type == "mps":
        work = torch.float32
    out = torch.empty((n_params, rows * length), dtype=dt, device=dev)
    n_special = min(rows, max(round(share * rows), len(ROW_KINDS))) if share > 0 else 0
    for i, dom in enumerate(domains):
        g = _generator(dev, _row_seed(seed, length), i)
        if rows == 0:
            continue
        _sample_row(rows * length, dt, work, dom, g, dev, out=out[i])
        if n_special == 0:
            continue
        x = out[i].view(rows, length)
        at = _spread_positions(rows, n_special, g, dev)
        # every kind once (in a random order) before any twice
        order = torch.randperm(len(ROW_KINDS), generator=g, device=dev)
        kinds = torch.full((rows,), -1, dtype=torch.int64, device=dev)
        kinds[at] = order[torch.arange(n_special, device=dev) % len(ROW_KINDS)]
        _special_rows(x, kinds, dt, work, dom, g, dev)
    return out


# ---------------------------------------------------------------------------------------------
# Exhaustive inputs


def exhaustive_inputs(n_params: int, dtype, device=None) -> torch.Tensor:
    """All 65,536 bit patterns of float16 or bfloat16 for one parameter: shape ``[1, 65536]``,
    in bit-pattern order 0x0000 .. 0xFFFF (so +0 first, -0 at 0x8000, nans included)."""
    dt = as_dtype(dtype)
    if dt not in (torch.float16, torch.bfloat16):
        raise ValueError(
            f"exhaustive inputs exist only for float16 and bfloat16 (65,536 values per parameter), "
            f"not {str(dt).replace('torch.', '')}; use random tests instead"
        )
    if n_params == 2:
        raise ValueError(
            "exhaustive inputs for two 16-bit parameters are 2^32 pairs (8 GiB of pairs per pass): "
            "that is only feasible on a GPU, in chunks, and is not provided as a pool; use one "
            "parameter or random tests"
        )
    if n_params != 1:
        raise ValueError(f"exhaustive inputs need exactly one 16-bit parameter, got {n_params}")
    dev = resolve(device)
    bits = torch.arange(65536, dtype=torch.int32, device=dev)
    bits = torch.where(bits >= 32768, bits - 65536, bits).to(torch.int16)
    return bits.view(dt).reshape(1, 65536)


# ---------------------------------------------------------------------------------------------
# Resident pools


class InputPool:
    """Memoised input tensors kept resident on one device, within a memory budget.

    ``get`` returns the cached tensor for the same ``(n_params, n, dtype, domains, seed,
    special_share)``; callers must not modify it. A request larger than ``max_bytes`` raises
    ``ValueError`` before allocating; otherwise least-recently-used entries are evicted to make
    room. The budget counts the resident pools, not the transient work buffers of generation
    (about 16 bytes per value of a block of at most ``SAMPLE_BLOCK`` values, while it is sampled).
    """

    def __init__(self, device=None, max_bytes: int = 1 << 30):
        self.device = resolve(device)
        if int(max_bytes) <= 0:
            raise ValueError(f"max_bytes must be positive, got {max_bytes!r}")
        self.max_bytes = int(max_bytes)
        self._cache: OrderedDict[tuple, torch.Tensor] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _key(n_params, n, dtype, domains, seed, special_share):
        dt = as_dtype(dtype)
        if domains is not None:
            domains = tuple(as_domain(d) for d in domains)
            if all(d is None for d in domains) and len(domains) == int(n_params):
                domains = None
        return (int(n_params), int(n), dt, domains, int(seed), float(special_share))

    def get(self, n_params: int, n: int, dtype="float32", domains=None, seed: int = 0,
            special_share: float = 0.02) -> torch.Tensor:
        key = self._key(n_params, n, dtype, domains, seed, special_share)
        return self._fetch(key, key[0], key[1], key[2], lambda: make_inputs(
            key[0], key[1], dtype=key[2], domains=key[3] and list(key[3]), seed=key[4], device=self.device,
            special_share=key[5]))

    def get_rows(self, n_params: int, rows: int, length: int, dtype="float32", domains=None, seed: int = 0,
                 special_share: float = ROW_SPECIAL_SHARE) -> torch.Tensor:
        """The rows of one length for row kernels (:func:`make_rows`): ``[n_params, rows * length]``,
        cached like ``get`` under a key that includes the row length."""
        key = ("rows", int(length), *self._key(n_params, rows, dtype, domains, seed, special_share))
        return self._fetch(key, key[2], key[3] * key[1], key[4], lambda: make_rows(
            key[2], key[3], key[1], dtype=key[4], domains=key[5] and list(key[5]), seed=key[6], device=self.device,
            special_share=key[7]))

    def _fetch(self, key: tuple, n_params: int, n: int, dt: torch.dtype, make) -> torch.Tensor:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return hit
            itemsize = torch.empty((), dtype=dt).element_size()
            requested = max(n_params, 0) * max(n, 0) * itemsize
            if requested > self.max_bytes:
                raise ValueError(
                    f"N too large for memory: {requested:,} bytes requested ({n_params} parameters x "
                    f"{n:,} values x {itemsize} bytes), budget "
                    f"{self.max_bytes:,} bytes; use fewer tests per pass or a larger max_bytes"
                )
            while self._cache and self._nbytes() + requested > self.max_bytes:
                self._cache.popitem(last=False)
            x = make()
            self._cache[key] = x
            self.misses += 1
            return x

    def _nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._cache.values())

    @property
    def nbytes(self) -> int:
        """Bytes held by the resident pools."""
        with self._lock:
            return self._nbytes()

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def __len__(self) -> int:
        return len(self._cache)

    def __repr__(self) -> str:
        return (f"InputPool(device={str(self.device)!r}, entries={len(self)}, nbytes={self.nbytes:,}, "
                f"max_bytes={self.max_bytes:,})")
