"""Counterexample shrinking: move a failing input toward simple values while it still fails."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from itertools import islice


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


def simpler_row_values(v: float, low: float = -math.inf, high: float = math.inf) -> list[float]:
    """simpler_values, and powers of ten of v's sign below its magnitude (±10 … ±1e15): an element of a row
    is often failing for being large (an overflowing exp), which a smaller power of ten still is."""
    cands = simpler_values(v, low, high)
    if math.isfinite(v) and abs(v) > 10:
        sign = math.copysign(1.0, v)
        cands += [sign * 10.0 ** k for k in range(1, 16) if 10.0 ** k < abs(v) and low <= sign * 10.0 ** k <= high]
    out: list[float] = []
    for c in sorted(cands, key=complexity):
        if complexity(c) < complexity(v) and c not in out:
            out.append(c)
    return out


#: rows up to this long have their values simplified one element at a time (longer ones: whole rows at once)
ELEMENTWISE_VALUES = 64
#: trials per call of `fails` while shortening a row
TRIALS_PER_CALL = 64
#: Elements the trials of one chunk size may copy together: a long row's shortening stops at coarser chunks
#: (a row of n elements at chunks of at least n^2 / SHRINK_ELEMENTS), so that it costs O(n), not O(n^2). Rows of
#: up to 4,096 elements shorten down to single elements.
SHRINK_ELEMENTS = 1 << 24


def shrink_row(rows: list[list[float]], fails: Callable[[list[list[list[float]]]], list[bool]], rounds: int = 3,
               bounds: list[tuple[float, float]] | None = None,
               representable: Callable[[float], float] = float) -> list[list[float]]:
    """Greedy shrinking of a row kernel's failing input: `rows` holds one row per parameter (all of one
    length); a trial is such a list of rows, and `fails(trials)` says which still fail (trials may differ
    in length). Shorter first (one element alone, then chunks of halving size dropped), then simpler values
    (per element for rows up to ELEMENTWISE_VALUES long, else whole rows rounded to fewer decimals), then
    shorter again, while something changes. Values stay inside `bounds` (per parameter) and are what the
    kernel dtype holds (`representable`)."""
    current = [list(r) for r in rows]
    bounds = bounds or [(-math.inf, math.inf)] * len(current)
    for _ in range(rounds):
        shorter = _shorten(current, fails)
        simpler = _simplify(shorter, fails, bounds, representable)
        changed = simpler != current
        current = simpler
        if not changed:
            break
    return current


def _take(rows: list[list[float]], keep: list[int]) -> list[list[float]]:
    return [[r[i] for i in keep] for r in rows]


def _first_failing(trials: Iterable, fails) -> tuple[int, list] | None:
    """(index, trial) of the first trial that fails, asking about TRIALS_PER_CALL trials at a time; the trials
    are made only as they are asked about."""
    it, lo = iter(trials), 0
    while batch := list(islice(it, TRIALS_PER_CALL)):
        for i, bad in enumerate(fails(batch)):
            if bad:
                return lo + i, batch[i]
        lo += len(batch)
    return None


def _shorten(rows: list[list[float]], fails) -> list[list[float]]:
    """One element alone if one fails so; else drop chunks of n/2, n/4, … 1 elements while the row fails
    (a chunk size's trials from where the last one was dropped)."""
    n = len(rows[0]) if rows else 0
    if n <= 1:
        return rows
    alone = _first_failing((_take(rows, [i]) for i in range(n)), fails)
    if alone is not None:
        return alone[1]
    size = n // 2
    while size >= 1 and -(-len(rows[0]) // size) * len(rows[0]) <= SHRINK_ELEMENTS:
        start = 0
        while len(rows[0]) > size and start < len(rows[0]):
            n = len(rows[0])
            starts = range(start, n, size)
            hit = _first_failing((_take(rows, [i for i in range(n) if not lo <= i < lo + size]) for lo in starts),
                                 fails)
            if hit is None:
                break
            rows, start = hit[1], starts[hit[0]]  # the elements after the dropped chunk moved to its place
        size //= 2
    return rows


def _simplify(rows: list[list[float]], fails, bounds, representable) -> list[list[float]]:
    """Simpler values, simplest first, keeping each replacement only while the row still fails."""
    current = [list(r) for r in rows]
    n = len(current[0]) if current else 0
    for p, (low, high) in enumerate(bounds):
        if n > ELEMENTWISE_VALUES:  # whole rows: every element rounded to d decimals
            trials = []
            for d in range(4):
                row = [representable(float(round(v, d))) if math.isfinite(v) else v for v in current[p]]
                if row != current[p] and all(low <= v <= high for v in row if math.isfinite(v)):
                    trials.append(current[:p] + [row] + current[p + 1:])
            hit = _first_failing(trials, fails)
            if hit is not None:
                current = hit[1]
            continue
        for i in range(n):
            values = []
            for c in simpler_row_values(current[p][i], low, high):
                r = representable(c)
                if low <= r <= high and r != current[p][i] and r not in values:
                    values.append(r)
            trials = [current[:p] + [current[p][:i] + [v] + current[p][i + 1:]] + current[p + 1:] for v in values]
            hit = _first_failing(trials, fails)
            if hit is not None:
                current = hit[1]
    return current
