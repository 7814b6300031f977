"""After pass 1, regroup: lexed rows -> Tokens [B', T'] of rows of similar token count, for the later passes.

Lexing wants chunks of similar byte length (its arrays are [B, L]), every later pass chunks of similar
token count ([B, T]); rows of one byte length differ in tokens by about 30%, so compile_to_batches
sorts lexed rows by their token counts (lex read them to the host with its maxima) and cuts new
chunks, whose Tokens this pass copies out of the lexed chunks': one index_select a field and lexed
chunk, written in place. O(B*T) copies, no sync; the row indices are the only upload (pinned and
asynchronous on CUDA).
"""

from __future__ import annotations

import numpy as np
import torch

from .batch_lexer import Tokens

_TOKEN_FIELDS = ("kind", "start", "end", "line", "col", "line_start", "key", "hash", "indent_hash", "indent_start",
                 "value", "slow_number", "prefix_bad")
_ROW_FIELDS = ("count", "truncated", "lex_error", "lex_line", "lex_col", "ends_continued", "lengths")


def regroup(parts: list[tuple[Tokens, np.ndarray]], most_bytes: int) -> Tokens:
    """The Tokens of rows taken from other chunks' Tokens, in order: parts are (Tokens, row indices as an
    int64 array), most_bytes the rows' longest source (the host knows it). Arrays are as wide as lex makes
    them for these rows (the most tokens; the bytes, pack's padding byte and lex's end position), padded
    with zeros as lex pads them; the loop bounds are the parts' maxima, bounds still. One index_select a
    field and part, written in place; nothing uploaded but the row indices (pinned and asynchronous on
    CUDA)."""
    first = parts[0][0]
    device = first.kind.device
    row_tokens = np.concatenate([tk.row_tokens[rows] for tk, rows in parts])
    T = max(1, int(row_tokens.max(initial=0)))
    B = len(row_tokens)
    idx = [_upload(rows, device) for _, rows in parts]

    def rows_of(name: str, width: int | None) -> torch.Tensor:
        ref = getattr(first, name)
        out = torch.empty((B, *(() if width is None else (width,))), dtype=ref.dtype, device=device)
        a = 0
        for (tk, rows), i in zip(parts, idx):
            src, b = getattr(tk, name), a + len(rows)
            if width is None:
                torch.index_select(src, 0, i, out=out[a:b])
            else:
                w = min(width, src.shape[1])
                torch.index_select(src[:, :w], 0, i, out=out[a:b, :w])
                if w < width:
                    out[a:b, w:] = 0
            a = b
        return out

    fields = {name: rows_of(name, T) for name in _TOKEN_FIELDS}
    fields.update({name: rows_of(name, None) for name in _ROW_FIELDS})
    return Tokens(**fields, data_padded=rows_of("data_padded", most_bytes + 2),
                  longest_line=max(tk.longest_line for tk, _ in parts), most_lines=max(tk.most_lines for tk, _ in parts),
                  deepest=max(tk.deepest for tk, _ in parts), row_tokens=row_tokens)


def _upload(rows, device) -> torch.Tensor:
    index = torch.from_numpy(np.asarray(rows, dtype=np.int64))
    if device.type != "cuda":
        return index.to(device)
    return index.pin_memory().to(device, non_blocking=True)  # no wait for the queued work
