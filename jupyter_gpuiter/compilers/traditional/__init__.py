"""The traditional compiler: every pass a data-parallel tensor program over a batch of sources.

    sources --pack--> bytes [B, L] --lex--> tokens [B, T] --rules--> structure, first token-level error
            --parse--> trees --semantic--> bindings, errors --codegen--> ProgramBatch [B, N]

The same code runs on CPU and CUDA tensors. Inside a chunk there is no Python loop over programs;
the parser reads one flag every few rounds to stop at its fixpoint, and the results cross to the host
once, at the end. Batches are sorted by length and split into chunks that fit a memory budget.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from ...ir import ProgramBatch
from ...lang import spec
from ...lang.errors import KIND_CODES
from ...lang.lexer import number_value
from . import dfa
from .codegen import codegen
from .common import NO_ERROR, error_key
from .lex import lex
from .parse import parse
from .rules import MESSAGES as RULE_MESSAGES
from .rules import check
from .semantic import MESSAGES as SEM_MESSAGES
from .semantic import MSG_BASE, analyse

PASSES = ("pack", "lex", "rules", "parse", "semantic", "codegen")
LEX_MSG_BASE = 64
#: byte cells (programs x padded length) per chunk; bounds memory to roughly 400 bytes a cell
CHUNK_CELLS = 1 << 21


def message_for(msg_id: int) -> str:
    if msg_id >= MSG_BASE:
        return SEM_MESSAGES[msg_id - MSG_BASE][1]
    if msg_id >= LEX_MSG_BASE:
        return dfa.LEX_ERRORS[msg_id - LEX_MSG_BASE][1]
    return RULE_MESSAGES[msg_id][1]


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def compile_chunk(sources: list[str], device, timings: dict | None = None) -> tuple[ProgramBatch, torch.Tensor]:
    """One chunk through all passes. Returns the batch and a [B] message-id tensor (for errors)."""
    from .pack import pack

    t = timings if timings is not None else {}

    def tick(name, t0):
        if timings is not None:
            _sync(device)
            t[name] = t.get(name, 0.0) + time.perf_counter() - t0
        return time.perf_counter()

    t0 = time.perf_counter()
    data, lengths = pack(sources, device)
    t0 = tick("pack", t0)
    max_tokens = min(data.shape[1] + 1, 2 * spec.MAX_TOKENS + 2)
    tk = lex(data, lengths, max_tokens)
    t0 = tick("lex", t0)
    st = check(tk, (tk.lex_error == 0) & ~tk.truncated)
    lex_kind = torch.tensor([KIND_CODES[dfa.LEX_ERRORS[c][0]] if c else 0 for c in range(len(dfa.LEX_ERRORS) + 1)],
                            device=tk.kind.device)[tk.lex_error]
    lex_key = error_key(tk.lex_line, tk.lex_col, -1, lex_kind, LEX_MSG_BASE + tk.lex_error)
    b_error = torch.where(tk.lex_error != 0, torch.minimum(lex_key, st.error), st.error)
    t0 = tick("rules", t0)
    tr = parse(tk, st, b_error == NO_ERROR)
    t0 = tick("parse", t0)
    sm = analyse(tk, st, tr, tr.rounds)
    error = torch.where(b_error != NO_ERROR, b_error, sm.error)
    t0 = tick("semantic", t0)
    ops, args, imm, imm_tok, n_inst = codegen(tk, tr, sm, tr.rounds)
    # decode the error keys on the device: (kind code, line, col) and the message id
    msg = error % 256
    k = error // 256
    code = k % 8
    k = k // (8 * (1 << 12))
    err = torch.stack([code, k // (1 << 14), k % (1 << 14)], 1)
    err = torch.where((error == NO_ERROR)[:, None], 0, err)
    ok = error == NO_ERROR
    lengths_out = torch.where(ok, n_inst, 0)
    batch = ProgramBatch(ops.to(torch.int32), args.to(torch.int32), imm, lengths_out.to(torch.int32),
                         sm.n_params.to(torch.int32), err.to(torch.int32))
    batch.imm_token = torch.where(imm_tok >= 0, imm_tok, -1)
    batch.token_span = (tk.start, tk.end)
    batch.norm_data = tk.data_padded
    tick("codegen", t0)
    return batch, msg


def _fix_slow_numbers(results, batch, sel):
    """Host fix-up of the rare literals whose exact value the device left to the host."""
    imm_tok = batch.imm_token.cpu().numpy()
    rows, cols = np.nonzero(imm_tok >= 0)
    if len(rows) == 0:
        return
    starts, ends = batch.token_span[0].cpu().numpy(), batch.token_span[1].cpu().numpy()
    data = batch.norm_data.cpu().numpy()
    for r, c in zip(rows.tolist(), cols.tolist()):
        prog = results[sel[r]]
        if hasattr(prog, "imms") and c < len(prog.imms):
            tok = imm_tok[r, c]
            text = data[r, starts[r, tok]:ends[r, tok]].astype(np.uint8).tobytes().decode()
            prog.imms[c] = number_value(text)


def compile_batch(sources: Sequence[str], device=None, timings: dict | None = None):
    """Compile sources with the data-parallel passes; returns a BatchResult."""
    from ...ir import Program
    from ...lang.errors import CompileError
    from ..result import BatchResult

    device = torch.device(device or "cpu")
    sources = list(sources)
    results: list = [None] * len(sources)
    sizes = np.array([len(s.encode("utf-8", errors="surrogatepass")) for s in sources], dtype=np.int64)
    for i in np.nonzero(sizes > spec.MAX_SOURCE_BYTES)[0].tolist():
        results[i] = CompileError("too-large", 1, 1, f"source is {sizes[i]:,} bytes; the limit is "
                                  f"{spec.MAX_SOURCE_BYTES:,}", sources[i])
    order = [i for i in np.argsort(sizes, kind="stable").tolist() if sizes[i] <= spec.MAX_SOURCE_BYTES]
    batches = []
    start = 0
    while start < len(order):
        width = int(sizes[order[start]]) + 1
        stop = start + 1
        while stop < len(order) and (stop - start + 1) * (int(sizes[order[stop]]) + 1) <= CHUNK_CELLS:
            stop += 1
        sel = order[start:stop]
        del width
        batch, msg = compile_chunk([sources[i] for i in sel], device, timings)
        batches.append((sel, batch, msg))
        start = stop
    for sel, batch, msg in batches:
        names = None
        unpacked = batch.to_results()
        msgs = msg.cpu().tolist()
        for j, r in enumerate(unpacked):
            i = sel[j]
            if isinstance(r, CompileError):
                r = CompileError(r.kind, r.line, r.col, message_for(msgs[j]), sources[i])
            results[i] = r
        _fix_slow_numbers(results, batch, sel)
        del names
    for i, r in enumerate(results):
        if isinstance(r, Program):
            _name_program(r, sources[i])
    return BatchResult(results, "traditional", timings=dict(timings or {}))


def _name_program(program, source: str) -> None:
    """Parameter and function names for display (the IR itself is nameless)."""
    head = source.split("(", 1)
    program.name = head[0].replace("def", "", 1).strip() or "kernel"
    params = head[1].split(")", 1)[0] if len(head) > 1 else ""
    program.param_names = [p.strip() for p in params.split(",") if p.strip()]
