"""Verdict: what a verification says (docs/verification.md), as host scalars."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..lang.errors import CompileError


@dataclass
class Counterexample:
    """A failing input (parameter name -> value) with the candidate's output and the reference's, rounded
    to the kernel dtype (what was compared)."""

    inputs: dict[str, float]
    got: float
    expected: float

    def __str__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.inputs.items())
        return f"f({args}) = {self.got!r}, expected {self.expected!r}"


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
        return confidence_sentence(self.passed, self.tests_run, self.delta, exhaustive=self.exhaustive,
                                   domain_size=self.tests_run if self.exhaustive else None,
                                   failures=None if self.passed else self.failures)

    def __repr__(self) -> str:
        return f"<Verdict {'PASS' if self.passed else 'FAIL'}: {self.sentence}>"
