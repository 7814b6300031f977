"""Verdict: what a verification says (docs/verification.md), as host scalars."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..lang.errors import CompileError

#: elements of a row shown on each side of the failing one (a longer row is shown with "…" and a count)
ROW_CONTEXT = 3


@dataclass
class Counterexample:
    """A failing input with the candidate's output and the reference's, rounded to the kernel dtype (what
    was compared).

    Elementwise kernels: `inputs` maps each parameter to a float, `got` and `expected` are floats.
    Row kernels: `inputs` maps each parameter to the row (a 1-D float64 NumPy array holding values of the
    kernel dtype; every parameter's row has the same length). `got` and `expected` are floats: the values
    of the result's row (a per-row result), or the values at `position`, the first failing element of the
    row (a per-element result), whose whole rows are `got_row` and `expected_row`. `row_index` and
    `found_length` say where the failure was found: the index of the failing row among the pool's rows of
    that length, before shrinking made the row shorter and simpler.
    """

    inputs: dict[str, float | np.ndarray]
    got: float
    expected: float
    position: int | None = None
    got_row: np.ndarray | None = None
    expected_row: np.ndarray | None = None
    row_index: int | None = None
    found_length: int | None = None

    @property
    def is_row(self) -> bool:
        """Whether this is a row kernel's counterexample (its inputs are rows)."""
        return self.found_length is not None

    @property
    def row_length(self) -> int | None:
        """The number of elements of the (shrunk) row, or None for an elementwise counterexample."""
        if not self.is_row:
            return None
        return len(next(iter(self.inputs.values()))) if self.inputs else 0

    def window(self, context: int = ROW_CONTEXT) -> tuple[int, int]:
        """The elements [lo, hi) of the row worth showing: all of a short row, else those around the
        failing element (what str(), the panel and the JupyterLab extension show)."""
        return row_window(self.row_length or 0, self.position, context)

    def __str__(self) -> str:
        if not self.is_row:
            args = ", ".join(f"{k}={v!r}" for k, v in self.inputs.items())
            return f"f({args}) = {self.got!r}, expected {self.expected!r}"
        at = self.position
        args = ", ".join(f"{k}={format_row(v, at)}" for k, v in self.inputs.items())
        n = self.row_length
        where = f"a row of {n} element{'' if n == 1 else 's'}"
        if self.row_index is not None:
            where += f" (shrunk from row {self.row_index} of the {self.found_length}-element rows)"
        if at is None:
            return f"f({args}) = {self.got!r}, expected {self.expected!r}; {where}, one value per row"
        return (f"f({args}) = {format_row(self.got_row, at)}, expected {format_row(self.expected_row, at)}; "
                f"element {at} fails ({self.got!r}, expected {self.expected!r}) in {where}")


def row_window(n: int, at: int | None = None, context: int = ROW_CONTEXT) -> tuple[int, int]:
    """The slice [lo, hi) of an n-element row to show: all of it when short, else 2 * context + 1
    elements around `at` (the start when None). The text, the panel and the comm show the same one."""
    width = 2 * context + 1
    if n <= width + 2:
        return 0, n
    lo = max(0, min((0 if at is None else at) - context, n - width))
    return lo, lo + width


def format_row(row, at: int | None = None, context: int = ROW_CONTEXT) -> str:
    """A row as a short list: every element when it is short, else the elements around `at` (the start
    when None) with the count of those left out, e.g. `[… 12 more, 0.5, 1.0, 2.0, … 3 more]`."""
    values = [float(v) for v in np.asarray(row).reshape(-1)]
    n = len(values)
    lo, hi = row_window(n, at, context)
    parts = [repr(v) for v in values[lo:hi]]
    if lo:
        parts.insert(0, f"… {lo} more")
    if hi < n:
        parts.append(f"… {n - hi} more")
    return "[" + ", ".join(parts) + "]"


@dataclass
class Verdict:
    passed: bool
    tests_run: int
    failures: int
    epsilon: float  # failure-rate bound at confidence 1 - delta (0 when proved exhaustively)
    delta: float
    counterexample: Counterexample | None = None
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    max_ulp_err: float = 0.0
    exhaustive: bool = False  # the whole input domain was checked: a proof, not a bound
    trivial: str | None = None  # why the reference was rejected as trivial
    error: CompileError | None = None  # the candidate did not compile
    dtype: str = "float32"
    timings: dict[str, float] = field(default_factory=dict)
    compiler: str | None = None  # the compiler that produced the candidate (mode "auto" picks one)
    row_lengths: tuple[int, ...] | None = None  # row kernels: the row lengths checked (tests then count rows)
    reason: str | None = None  # why the candidate could not be compared (e.g. per-row result, per-element reference)

    def __getattribute__(self, name):
        value = object.__getattribute__(self, name)
        if name == "counterexample" and value is not None and not isinstance(value, Counterexample):
            value = value.resolve()  # shrunk when first read: a batch pays only for what is looked at
            object.__setattr__(self, name, value)
        return value

    @property
    def posterior(self):
        """Beta posterior of the failure rate (uniform prior) given the tests run and failures seen."""
        from .confidence import beta_posterior

        return beta_posterior(self.tests_run, self.failures)

    @property
    def sentence(self) -> str:
        """The confidence sentence shown to people."""
        from .confidence import confidence_sentence

        if self.error is not None:
            return f"did not compile: {self.error}"
        if self.trivial:
            return f"reference rejected: {self.trivial}"
        if self.reason:
            return f"not comparable: {self.reason}"
        return confidence_sentence(self.passed, self.tests_run, self.delta, exhaustive=self.exhaustive,
                                   domain_size=self.tests_run if self.exhaustive else None,
                                   failures=None if self.passed else self.failures,
                                   noun="test" if self.row_lengths is None else "row")

    def __repr__(self) -> str:
        return f"<Verdict {'PASS' if self.passed else 'FAIL'}: {self.sentence}>"
