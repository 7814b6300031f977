"""Verification: input pools, comparison, confidence bounds, counterexamples, exhaustive proofs."""

from .api import verify_program, verify_programs
from .verdict import Counterexample, Verdict

__all__ = ["Counterexample", "Verdict", "verify_program", "verify_programs"]
