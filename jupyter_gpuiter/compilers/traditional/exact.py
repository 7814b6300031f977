"""Pass 6, exact: the byte spans the passes took as equal by their 64-bit hashes, compared byte by byte.

Two decisions rest on hashes: a name resolves to the latest binding of the same hash (semantic), and
a line's indentation matches the first body line's when hash and length agree (rules). A polynomial
hash modulo 2^64 can be made to collide on purpose (two 1,024-byte Thue-Morse strings do), so each
pair taken as equal is checked here, and a row where one differs is flagged for the serial compiler
(compile_batch recompiles it on the host). Ordinary sources are never flagged.

Every token has two spans, its indentation [indent start, start) (after the line start and any form
feed; checked only at the first token of a line, so the checked spans are disjoint) and its own text [start, end). A span that needs a check
adds the other span's offset at its start and takes it off at its end: one scatter and one prefix
sum give every byte the offset to the byte it must equal (0 for bytes outside such spans, which are
compared with themselves). O(B*L) in about a dozen operations, no loops.
"""

from __future__ import annotations

import torch

from .batch_lexer import Tokens
from .batch_rules import Structure
from .common import ne
from .semantic import Semantics


def collisions(tk: Tokens, st: Structure, sm: Semantics) -> torch.Tensor:
    """[B] bool: rows where two spans taken as equal by hash differ in their bytes."""
    data = tk.data_padded
    B, L = data.shape
    T = tk.kind.shape[1]
    start, end, indent_start = tk.start, tk.end, tk.indent_start
    # 0/1 int32 flags (a bool would be converted in every product)
    bound = (sm.binding >> 31).add_(1)
    indented = (st.indent_like >> 31).add_(1)
    binding = sm.binding.clamp(min=0).long()
    other = start.gather(1, binding)
    # names: a different length is already a collision
    length_differs = ne(end - start, end.gather(1, binding) - other).bitwise_and_(bound.bool()).view(torch.uint8).amax(1)
    # offsets to the other span (0 where nothing is compared: padding too), added at a span's start and
    # taken off at its end; positions < 2^14 (lex refuses longer rows), so offsets fit an int16
    off_indent = (st.indent_like - indent_start).mul_(indented).short()
    off_name = (other - start).mul_(bound).short()
    at = torch.stack([indent_start, start, end], 2).view(B, 3 * T).long()  # the indentation ends where the name starts
    add = torch.stack([off_indent, off_name - off_indent, -off_name], 2).view(B, 3 * T)
    per_byte = torch.zeros((B, L + 1), dtype=torch.int16, device=data.device)
    per_byte.scatter_add_(1, at, add)
    pos = torch.arange(L, dtype=torch.int16, device=data.device)
    there = per_byte[:, :L].cumsum(1, dtype=torch.int16).add_(pos).long()
    differs = ne(data.gather(1, there), data).view(torch.uint8).amax(1)
    return (differs | length_differs).bool()
