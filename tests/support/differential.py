"""The traditional compiler against the serial oracle: what agreeing means (docs/compiler.md): byte-identical
canonical text for valid programs; for invalid ones the same kind, line, diagnostic and message, and the same
column unless it is a syntax error."""

from jupyter_gpuiter import CompileError, compile_batch


def comparable(canonical: str) -> str:
    """Syntax errors agree on kind and line only."""
    return canonical.rsplit(":", 1)[0] if canonical.startswith("error syntax") else canonical


def worded(result) -> tuple | None:
    """An error's diagnostic and message (both compilers state it in the same words: lang/diagnostics.py)."""
    return (result.id, result.message) if isinstance(result, CompileError) else None


def assert_agree(sources, device=None):
    trad = compile_batch(sources, mode="traditional", device=device)
    ser = compile_batch(sources, mode="serial")
    got, want = trad.canonical(), ser.canonical()
    bad = [(s, g, w, worded(a), worded(b)) for s, g, w, a, b in zip(sources, got, want, trad, ser)
           if comparable(g) != comparable(w) or worded(a) != worded(b)]
    assert not bad, f"{len(bad)} of {len(sources)} disagree; first: {bad[0]!r}"
    return got
