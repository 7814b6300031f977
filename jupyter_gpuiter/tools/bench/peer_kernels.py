"""The kernels of `gpuiter bench peers`, each written once in every tool's own idiom.

Each kernel has one constant that the benchmark edits on every iteration (`{c}` in the templates), so no
compiled-code cache can serve an iteration; the reference (NumPy in float64, or torch in float64 for the torch
peers) takes the same constant, so an edited program is still correct. GELU, the Black-Scholes call and the
Huber loss are examples/kernels/*.py with the edited constant marked; softplus gains a slope `b` (1.0 in
examples/kernels/softplus.py) so that it has a constant to edit.

Idioms: `gpuiter` the kernel language; `python` scalar Python on `math` (numba.vectorize); `numpy` NumPy
arrays (the reference in float64, the fresh-process candidate in float32); `torch` torch ops; `cuda` a CUDA C++
function body over a floating type `T` (CuPy ElementwiseKernel with T=float; the nvcc program runs it with
T=float on the device and T=double on the host as its reference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# NumPy has no erf: math.erf elementwise, in the argument's dtype. Python floats in the templates (never NumPy
# float64 scalars) keep float32 arrays float32 (NEP 50).
NUMPY_PRELUDE = '''import math
import numpy as np


def erf(a):
    a = np.asarray(a)
    return np.vectorize(math.erf, otypes=[a.dtype])(a)
'''


@dataclass(frozen=True)
class PeerKernel:
    name: str
    title: str
    params: tuple[str, ...]
    base: float  # the value of the edited constant in the original kernel
    domain: tuple[tuple[float, float], ...]  # per parameter (low, high)
    rtol: float  # float32 result against the float64 reference, the same for every peer
    atol: float
    gpuiter: str
    python: str
    numpy: str
    torch: str
    cuda: str
    example: str  # the file in examples/kernels it comes from

    def source(self, idiom: str, c: float) -> str:
        """The kernel in one idiom with the edited constant set to `c`."""
        return getattr(self, idiom).replace("{c}", repr(float(c)))

    @property
    def domain_dict(self) -> dict[str, tuple[float, float]]:
        return dict(zip(self.params, self.domain))

    def numpy_function(self, c: float):
        ns: dict = {}
        exec(NUMPY_PRELUDE + self.source("numpy", c), ns)  # noqa: S102 - the benchmark's own templates
        return ns[self.name]

    def python_function(self, c: float):
        ns: dict = {"math": math}
        exec(self.source("python", c), ns)  # noqa: S102
        return ns[self.name]

    def torch_function(self, c: float):
        import torch

        ns: dict = {"math": math, "torch": torch}
        exec(self.source("torch", c), ns)  # noqa: S102
        return ns[self.name]

    def cuda_function(self, c: float, name: str | None = None, qualifiers: str = "__device__") -> str:
        """A C++ function template `name<T>(params...)` around the CUDA body."""
        args = ", ".join(f"T {p}" for p in self.params)
        body = "\n".join("    " + line for line in self.source("cuda", c).strip().splitlines())
        return f"template <typename T>\n{qualifiers} T {name or self.name}({args})\n{{\n{body}\n}}\n"

    def inputs(self, n: int, seed: int) -> list[np.ndarray]:
        """The peers' test inputs: per parameter n float32 values uniform in its domain (the fresh-process peer
        draws the same ones with the same code)."""
        rng = np.random.default_rng(seed)
        return [rng.uniform(lo, hi, n).astype(np.float32) for lo, hi in self.domain]


GELU = PeerKernel(
    name="gelu", title="GELU (tanh)", params=("x",), base=0.7978845608, domain=((-10.0, 10.0),),
    rtol=1.3e-6, atol=1e-5, example="gelu.py",
    gpuiter='''def gelu(x):
    # tanh approximation
    inner = {c} * (x + 0.044715 * x ** 3)
    return 0.5 * x * (1.0 + tanh(inner))
''',
    python='''def gelu(x):
    inner = {c} * (x + 0.044715 * x ** 3)
    return 0.5 * x * (1.0 + math.tanh(inner))
''',
    numpy='''def gelu(x):
    inner = {c} * (x + 0.044715 * x ** 3)
    return 0.5 * x * (1.0 + np.tanh(inner))
''',
    torch='''def gelu(x):
    inner = {c} * (x + 0.044715 * x ** 3)
    return 0.5 * x * (1.0 + torch.tanh(inner))
''',
    cuda='''T inner = T({c}) * (x + T(0.044715) * x * x * x);
return T(0.5) * x * (T(1.0) + tanh(inner));
''')

BLACK_SCHOLES = PeerKernel(
    name="bs_call", title="Black-Scholes call", params=("s", "k", "t", "r", "v"), base=0.5,
    domain=((10.0, 200.0), (10.0, 200.0), (0.05, 3.0), (0.0, 0.1), (0.05, 0.8)),
    rtol=1e-5, atol=2e-4, example="black_scholes_call.py",
    gpuiter='''def bs_call(s, k, t, r, v):
    sqrt_t = sqrt(t)
    d1 = (log(s / k) + (r + {c} * v * v) * t) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    n1 = 0.5 * (1.0 + erf(d1 / sqrt(2.0)))
    n2 = 0.5 * (1.0 + erf(d2 / sqrt(2.0)))
    return s * n1 - k * exp(-r * t) * n2
''',
    python='''def bs_call(s, k, t, r, v):
    sqrt_t = math.sqrt(t)
    d1 = (math.log(s / k) + (r + {c} * v * v) * t) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    n1 = 0.5 * (1.0 + math.erf(d1 / math.sqrt(2.0)))
    n2 = 0.5 * (1.0 + math.erf(d2 / math.sqrt(2.0)))
    return s * n1 - k * math.exp(-r * t) * n2
''',
    numpy='''def bs_call(s, k, t, r, v):
    sqrt_t = np.sqrt(t)
    d1 = (np.log(s / k) + (r + {c} * v * v) * t) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    n1 = 0.5 * (1.0 + erf(d1 / math.sqrt(2.0)))
    n2 = 0.5 * (1.0 + erf(d2 / math.sqrt(2.0)))
    return s * n1 - k * np.exp(-r * t) * n2
''',
    torch='''def bs_call(s, k, t, r, v):
    sqrt_t = torch.sqrt(t)
    d1 = (torch.log(s / k) + (r + {c} * v * v) * t) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    n1 = 0.5 * (1.0 + torch.erf(d1 / math.sqrt(2.0)))
    n2 = 0.5 * (1.0 + torch.erf(d2 / math.sqrt(2.0)))
    return s * n1 - k * torch.exp(-r * t) * n2
''',
    cuda='''T sqrt_t = sqrt(t);
T d1 = (log(s / k) + (r + T({c}) * v * v) * t) / (v * sqrt_t);
T d2 = d1 - v * sqrt_t;
T n1 = T(0.5) * (T(1.0) + erf(d1 / sqrt(T(2.0))));
T n2 = T(0.5) * (T(1.0) + erf(d2 / sqrt(T(2.0))));
return s * n1 - k * exp(-r * t) * n2;
''')

HUBER = PeerKernel(
    name="huber", title="Huber loss", params=("r", "d"), base=0.5, domain=((-10.0, 10.0), (0.1, 5.0)),
    rtol=1.3e-6, atol=1e-5, example="huber.py",
    gpuiter='''def huber(r, d):
    a = abs(r)
    quad = {c} * r * r
    lin = d * (a - 0.5 * d)
    return where(a <= d, quad, lin)
''',
    python='''def huber(r, d):
    a = abs(r)
    quad = {c} * r * r
    lin = d * (a - 0.5 * d)
    return quad if a <= d else lin
''',
    numpy='''def huber(r, d):
    a = np.abs(r)
    quad = {c} * r * r
    lin = d * (a - 0.5 * d)
    return np.where(a <= d, quad, lin)
''',
    torch='''def huber(r, d):
    a = torch.abs(r)
    quad = {c} * r * r
    lin = d * (a - 0.5 * d)
    return torch.where(a <= d, quad, lin)
''',
    cuda='''T a = fabs(r);
T quad = T({c}) * r * r;
T lin = d * (a - T(0.5) * d);
return a <= d ? quad : lin;
''')

SOFTPLUS = PeerKernel(
    name="softplus", title="softplus (slope b)", params=("x",), base=1.0, domain=((-20.0, 20.0),),
    rtol=1.3e-6, atol=1e-5, example="softplus.py",
    gpuiter='''def softplus(x):
    b = {c}
    return (log1p(exp(-abs(b * x))) + max(b * x, 0.0)) / b
''',
    python='''def softplus(x):
    b = {c}
    return (math.log1p(math.exp(-abs(b * x))) + max(b * x, 0.0)) / b
''',
    numpy='''def softplus(x):
    b = {c}
    return (np.log1p(np.exp(-np.abs(b * x))) + np.maximum(b * x, 0.0)) / b
''',
    torch='''def softplus(x):
    b = {c}
    return (torch.log1p(torch.exp(-torch.abs(b * x))) + torch.clamp_min(b * x, 0.0)) / b
''',
    cuda='''T b = T({c});
return (log1p(exp(-fabs(b * x))) + fmax(b * x, T(0.0))) / b;
''')

KERNELS: dict[str, PeerKernel] = {k.name: k for k in (GELU, BLACK_SCHOLES, HUBER, SOFTPLUS)}
