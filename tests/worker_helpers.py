"""Module-level generator functions for the worker tests: a worker process imports them by name."""


def count_then_fail(n: int, fail: bool):
    """Yields 0 .. n-1, then raises if `fail`, else returns n."""
    yield from range(n)
    if fail:
        raise ValueError(f"failed after {n} items")
    return n
