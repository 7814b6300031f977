"""Counterexample shrinking: move a failing input toward simple values while it still fails."""

from __future__ import annotations

import math
from collections.abc import Callable


def complexity(v: float) -> float:
    """How simple a value looks to a person: 0 < ±1 < ±2 < ±0.5 < integers < short decimals < the rest."""
    if not math.isfinite(v):
        return 50.0
    for rank, c in enumerate((0.0, 1.0, 2.0, 0.5)):
        if abs(v) == c:
            return float(rank)
    if v == int(v) and abs(v) < 1e15:
        return 4.0 + len(str(int(abs(v))))
    for d in range(1, 4):
        if round(v, d) == v:
            return 20.0 + d + len(str(int(abs(v))))
    return 100.0


def simpler_values(v: float, low: float = -math.inf, high: float = math.inf) -> list[float]:
    """Candidates simpler than v inside [low, high], simplest first: 0, ±1, ±2, ±0.5, the domain's simplest
    integers (its edges rounded inward), v rounded to 0..3 decimals."""
    cands = [0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5]
    if math.isfinite(low):
        cands += [float(math.ceil(low)), low]
    if math.isfinite(high):
        cands += [float(math.floor(high)), high]
    if math.isfinite(v):
        cands += [float(round(v, d)) for d in range(4)]
    out: list[float] = []
    for c in sorted(cands, key=complexity):
        if low <= c <= high and complexity(c) < complexity(v) and c not in out:
            out.append(c)
    return out


def shrink(point: list[float], fails: Callable[[list[list[float]]], list[bool]], rounds: int = 3,
           bounds: list[tuple[float, float]] | None = None,
           representable: Callable[[float], float] = float) -> list[float]:
    """Greedy shrinking: per parameter, the simplest replacement inside its bounds that keeps the input
    failing. `representable` maps a value to the one the kernel dtype actually holds (a trial is that
    value, so the result fails as shown); `fails` evaluates many points in one call."""
    current = list(point)
    bounds = bounds or [(-math.inf, math.inf)] * len(current)
    for _ in range(rounds):
        changed = False
        for i in range(len(current)):
            low, high = bounds[i]
            values = []
            for c in simpler_values(current[i], low, high):
                r = representable(c)
                if low <= r <= high and r != current[i] and r not in values:
                    values.append(r)
            trials = [current[:i] + [c] + current[i + 1:] for c in values]
            if not trials:
                continue
            verdicts = fails(trials)
            for t, bad in zip(trials, verdicts):
                if bad:
                    current, changed = t, True
                    break
        if not changed:
            break
    return current
