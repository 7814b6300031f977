"""Host: which of a batch's sources go together in a chunk (compile_to_batches).

Every pass costs B x L cells, so sources are sorted by length, and a chunk closes where the next row
would make it pad too much or outgrow the memory budget. On a GPU, where a chunk holds tens of
thousands of programs, the host's work per program bounds the programs/s, so nothing here takes a
Python step per row but the encoding: the cut is greedy from the first row, and each chunk's end is
found by numpy over a window of the rows after its start (running maximum of widths, prefix sum of
heights). `gpuiter bench host` times this and the rest of the host's share.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...lang import spec
from .pack import encode


def by_size(sources: Sequence[str]) -> tuple[list[bytes], np.ndarray, list[int]]:
    """(the sources encoded, their sizes in bytes, the indices of those within the size limit sorted by
    size; ties keep the sources' order)."""
    encoded = [encode(s) for s in sources]
    sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    order = np.argsort(sizes, kind="stable")
    return encoded, sizes, order[sizes[order] <= spec.MAX_SOURCE_BYTES].tolist()


def split(order, width, height, max_cells: int, min_cells: int, pad_waste: float) -> list[list[int]]:
    """`order` (rows sorted by height) cut into chunks of consecutive rows: a chunk's cells (its rows
    times the widest's width) stay within max_cells (a row alone may exceed it), and past min_cells it
    closes where padding its rows to the next one's height would make them pad_waste times their
    heights. width and height are indexed by row; widths are at least 1."""
    order = np.asarray(order, dtype=np.int64)
    heights = np.asarray(height, dtype=np.int64)[order]
    widths = np.asarray(width, dtype=np.int64)[order]
    chunks, start, n, guess = [], 0, len(order), 64
    while start < n:
        # past this many rows after start the cells exceed max_cells whatever the widths: the end lies within
        bound = min(n, start + max_cells // max(int(widths[start]), 1) + 1)
        size = guess
        while True:
            end = min(bound, start + size)
            k = np.arange(1, end - start + 1)  # rows in the chunk if it ends after each row of the window
            cells = k * np.maximum.accumulate(widths[start:end])
            closes = (cells > max_cells) | ((cells > min_cells)
                                            & (k * heights[start:end] > pad_waste * np.cumsum(heights[start:end])))
            closes[0] = False  # a chunk has at least one row
            hits = np.flatnonzero(closes)
            if hits.size or end == bound:
                stop = start + int(hits[0]) if hits.size else end
                break
            size *= 2
        chunks.append(order[start:stop].tolist())
        guess = max(64, 2 * (stop - start))
        start = stop
    return chunks
