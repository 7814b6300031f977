"""The kernel language's meaning in CPython itself: run a source as a real Python function.

Builtins that Python lacks (where, clip, sigmoid, the np. namespace) get their documented meanings.
Tests check compiled programs against it; `%%gpucompile --ref python` uses it as the reference.
"""

from __future__ import annotations

import inspect
import math
from types import SimpleNamespace

import numpy as np


def _clip(x, lo, hi):
    x = lo if (x < lo or math.isnan(lo)) and not math.isnan(x) else x  # np.maximum propagates nan
    return hi if (x > hi or math.isnan(hi)) and not math.isnan(x) else x


FUNCS = {
    "abs": abs, "min": min, "max": max, "pow": pow, "float": float,
    "where": lambda c, a, b: a if c else b, "clip": _clip,
    "sigmoid": lambda x: 1 / (1 + math.exp(-x)),
    **{n: getattr(math, n) for n in ["sqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos",
                                     "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "erf",
                                     "floor", "ceil", "copysign", "hypot", "isnan", "isinf"]},
}
CONSTS = {"pi": math.pi, "e": math.e, "inf": math.inf, "nan": math.nan}
NAMESPACE = SimpleNamespace(**FUNCS, **CONSTS)


def python_function(source: str):
    """The function defined by `source`, executed by CPython with the language's builtins."""
    env = {**FUNCS, **CONSTS, "math": NAMESPACE, "np": NAMESPACE, "__builtins__": {}}
    exec(compile(source, "<kernel>", "exec"), env)  # noqa: S102 - running the kernel as Python is the point
    return next(v for k, v in env.items() if callable(v) and getattr(v, "__code__", None)
                and v.__code__.co_filename == "<kernel>")


def call_scalar(fn, args):
    """fn(*args) as a float, or None where Python raises or leaves the reals."""
    try:
        r = fn(*args)
    except (ZeroDivisionError, ValueError, OverflowError):
        return None
    if isinstance(r, complex):
        return None
    return float(r)


def numpy_reference(source: str):
    """A callable on NumPy arrays that runs the source's function element by element in CPython
    (float64), with nan where Python raises or leaves the reals."""
    fn = python_function(source)

    def scalar(*args):
        r = call_scalar(fn, [float(a) for a in args])
        return float("nan") if r is None else r

    vectorized = np.vectorize(scalar, otypes=[np.float64])
    n_params = fn.__code__.co_argcount

    def reference(*arrays):
        return vectorized(*arrays) if arrays else np.asarray(scalar())

    reference.__signature__ = inspect.Signature(
        [inspect.Parameter(f"x{i}", inspect.Parameter.POSITIONAL_ONLY) for i in range(n_params)])
    return reference
