"""The traditional compiler's driver: a batch of sources through the passes, chunk by chunk.

The same code runs on CPU and CUDA tensors. Inside a chunk there is no Python loop over programs;
one read after lexing (five scalars and the rows' token counts) sizes the token arrays and the loops
of later passes, and the results cross to the host once, at the end. Batches are sorted by length and
split into chunks that fit a memory budget and waste little padding; lexed rows are then regrouped by
token count for the later passes. The serial compiler recompiles the rows where exact.py finds that a
hash collision misled a pass (crafted sources only). The pipeline is drawn in the package's docstring.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import torch

from ...ir import Program, ProgramBatch, gc_paused
from ...lang import diagnostics, spec
from ...lang.errors import KIND_CODES, CompileError
from ...lang.lexer import number_value
from ...runtime import workers as worker_processes
from .. import serial
from .batch_lexer import Tokens, host_hints, lex
from .batch_rules import check
from .codegen import codegen
from .common import NO_ERROR, decode_keys, error_key
from .diagnose import LEX_KIND_CODES, LEX_MSG_BASE, compile_error
from .exact import collisions
from .pack import encode, pack
from .parse import parse
from .plan import by_size, split
from .regroup import regroup
from .semantic import analyse

PASSES = ("plan", "pack", "lex", "regroup", "rules", "parse", "semantic", "exact", "codegen")
#: byte cells (programs x padded length) per chunk at most, on a CPU. A chunk's memory peaks at 225-410
#: bytes a cell (peak RSS on the CPU, from 2 M to 16 M cells: more for larger chunks), budgeted as BYTES_PER_CELL
CHUNK_CELLS = 1 << 21
BYTES_PER_CELL = 400
#: on CUDA, chunks may take a quarter of the device's free memory, up to this many cells (every int32
#: flat index stays below 2^31: the largest, codegen's, spans B * N * 3 <= 3 cells)
CUDA_CHUNK_CELLS = 1 << 24
#: A chunk that already has this many cells (per device type) stops growing once padding to the next
#: program's length would make it PAD_WASTE times its programs' bytes: every pass costs B x L, so a
#: batch with short and long programs is cheaper in a few length-homogeneous chunks (1.7x on 4,096
#: generated programs on the 2-core CPU). A GPU pays ~1,000 kernel launches a chunk whatever its size,
#: so it prefers fewer, larger chunks (the CUDA figures are not measured yet: `gpuiter bench chunks`).
MIN_CHUNK_CELLS = {"cpu": 1 << 17, "cuda": 1 << 22}
PAD_WASTE = 1.1
#: PAD_WASTE on a CPU with one intra-op thread (a worker process's), where a chunk closing sooner is
#: faster: two workers took 7-9% less time on 4,096 generated programs (`gpuiter bench settings`,
#: two seeds; 1.0-1.07 alike); with two threads in one process 1.1 is the faster, as each operation's
#: fork and join favours larger arrays (docs/performance.md)
PAD_WASTE_ONE_THREAD = 1.05
#: lexed chunks are held, to be regrouped by token count, until they make this many chunk budgets of cells
#: (their Tokens hold ~30 bytes a cell, a thirteenth of a chunk's working memory of ~400)
REGROUP_CHUNKS = 2
#: a CPU batch of this many source bytes or more is shared out to the resident worker processes once
#: they have started (runtime/workers.py). Two workers against one process on the 2-core CPU (`gpuiter bench
#: compile --n 128|256|512|1024|4096`): 1.29x at 0.05 MB, even at 0.11 MB, 1.20x at 0.22 MB, 1.34x at
#: 0.43 MB, 1.27x at 1.75 MB; small batches gain unevenly (halves pad more, the round trip is fixed)
#: and little in absolute terms, so they stay in-process
POOL_MIN_BYTES = 1 << 17
#: worker processes for big CPU batches: 0 or 1 compiles in-process (default: one per intra-op thread
#: torch may use and usable core, as memory allows: runtime/workers.py); at most workers.MAX_WORKERS
WORKERS_ENV = "GPUITER_COMPILE_WORKERS"
#: a compile worker's resident memory, budgeted (330-345 MB measured after a 4,096-program batch on the CPU)
WORKER_BYTES = 384 << 20


def chunk_cells(device: torch.device) -> int:
    """The most byte cells one chunk may have on `device` (its memory budget)."""
    if device.type != "cuda":
        return CHUNK_CELLS
    free, _ = torch.cuda.mem_get_info(device)
    return int(min(CUDA_CHUNK_CELLS, max(CHUNK_CELLS, free // (4 * BYTES_PER_CELL))))


@functools.cache
def _lex_kind_codes(device: torch.device) -> torch.Tensor:
    """LEX_KIND_CODES on `device`, uploaded once (an upload per chunk would be a sync on CUDA)."""
    return torch.tensor(LEX_KIND_CODES, device=device)


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Chunk:
    """One chunk's output: the programs, per-program error message ids, and what the host needs to
    value the literals the device left to it (a worker process's chunk brings those literals' text
    instead: `literals`)."""

    batch: ProgramBatch
    message: torch.Tensor  # [B] message id of each program's error
    recheck: torch.Tensor  # [B] rows a hash collision misled: the serial compiler's to compile
    tokens: list[int]  # tokens of each row (host-side: lex read them): the token arrays are [B, max(tokens)]
    imm_token: torch.Tensor | None  # [B, N] token of a literal valued on the host, else -1
    token_start: torch.Tensor | None  # [B, T]
    token_end: torch.Tensor | None  # [B, T]
    data: torch.Tensor | None  # normalised bytes [B, L + 1]
    literals: tuple | None = None  # host_literals(), once read

    def host_literals(self) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """(row, instruction, source text) of each literal of a valid program that the device left to the
        host to value."""
        if self.literals is None:
            imm_tok = self.imm_token.cpu().numpy()
            rows, cols = np.nonzero(imm_tok >= 0)
            keep = (cols < self.batch.lengths.cpu().numpy()[rows]) & (self.batch.error[:, 0].cpu().numpy()[rows] == 0)
            rows, cols = rows[keep], cols[keep]
            texts = []
            if len(rows):
                data = self.data.cpu().numpy()
                toks = imm_tok[rows, cols]
                base = rows * data.shape[1]  # the token's text in the flat bytes of the chunk
                starts = (base + self.token_start.cpu().numpy()[rows, toks]).tolist()
                ends = (base + self.token_end.cpu().numpy()[rows, toks]).tolist()
                text = data.astype(np.uint8).tobytes()
                texts = [text[s:e].decode() for s, e in zip(starts, ends)]
            self.literals = rows, cols, texts
        return self.literals


class _Ticks:
    """Per-pass wall times into `timings` (the device synchronised at each tick), or nothing when it is None."""

    def __init__(self, timings: dict | None, device):
        self.timings, self.device, self.t0 = timings, device, time.perf_counter()

    def __call__(self, name: str) -> None:
        if self.timings is not None:
            _sync(self.device)
            now = time.perf_counter()
            self.timings[name] = self.timings.get(name, 0.0) + now - self.t0
            self.t0 = now


def compile_chunk(sources: Sequence[str | bytes], device, timings: dict | None = None) -> Chunk:
    """One chunk of sources (str, or bytes from pack.encode) through all passes."""
    return _token_passes(_lex_chunk(sources, device, timings), device, timings)


# a program that reaches every pass's tables: a comment, a hard literal (floats.py), a builtin, a ternary
_WARM_UP_SOURCE = "def warm(x, y):\n    z = -x ** 2 + abs(y) * 1.5e300  # c\n    return math.sin(z) if x < y else 0.1\n"


def warm_up(device=None) -> None:
    """Build every pass's lookup tables on `device` by compiling one small program: a process's first
    compile otherwise pays ~0.2 s for them (lex's DFA tables above all). Worker processes call it before
    they say they are ready, the gpuiter kernel in its preload thread."""
    compile_chunk([encode(_WARM_UP_SOURCE)], torch.device(device or "cpu"))


def _lex_chunk(sources: Sequence[str | bytes], device, timings: dict | None = None) -> Tokens:
    """pack and lex: one chunk's Tokens (their row counts on the host too: lex's one read)."""
    tick = _Ticks(timings, device)
    # no autograd bookkeeping: the passes run ~10% faster on a CPU (bench compile, 2 threads)
    with torch.inference_mode():
        # read on the host (no sync). On a GPU the operations they let lex skip (~70 a chunk) cost less than
        # the host's scan of every source (1-2 us a program), which bounds the programs/s there
        hints = host_hints(sources) if torch.device(device).type == "cpu" else (True, True)
        data, lengths = pack(sources, device)
        tick("pack")
        max_tokens = min(data.shape[1] + 1, 2 * spec.MAX_TOKENS + 2)
        tk = lex(data, lengths, max_tokens, *hints)
        tick("lex")
    return tk


def _token_passes(tk: Tokens, device, timings: dict | None = None) -> Chunk:
    """rules to codegen over one chunk's Tokens."""
    tick = _Ticks(timings, device)
    with torch.inference_mode():
        st = check(tk, (tk.lex_error == 0) & ~tk.truncated)
        lex_kind = _lex_kind_codes(tk.kind.device)[tk.lex_error]
        lex_key = error_key(tk.lex_line, tk.lex_col, -1, lex_kind, LEX_MSG_BASE + tk.lex_error)
        b_error = torch.where(tk.lex_error != 0, torch.minimum(lex_key, st.error), st.error)
        tick("rules")
        tr = parse(tk, st, b_error == NO_ERROR)
        tick("parse")
        sm = analyse(tk, st, tr)
        error = torch.where(b_error != NO_ERROR, b_error, sm.error)
        tick("semantic")
        recheck = collisions(tk, st, sm)
        tick("exact")
        ok = error == NO_ERROR
        # invalid rows as ProgramBatch.from_results packs them: all padding, no instructions, no parameters
        ops, args, imm, imm_tok, n_inst = codegen(tk, tr, sm, ok)
        err, msg = decode_keys(error)
        err = torch.where(ok[:, None], 0, err).to(torch.int32)
        tick("codegen")
    # inference tensors cannot be updated in place outside inference mode (as _fix_slow_numbers and a
    # batch's users may): the batch leaves as ordinary tensors, a copy of its few MB
    batch = ProgramBatch(ops.clone(), args.clone(), imm.clone(), n_inst.clone(), sm.n_params * ok, err.clone())
    return Chunk(batch, msg, recheck, tk.row_tokens.tolist(), imm_tok, tk.start, tk.end, tk.data_padded)


def _fix_slow_numbers(chunk: Chunk, imms: list, lengths: list[int]) -> None:
    """Host fix-up of the rare literals whose exact value the device left to the host: in the chunk's
    flat host immediates (as ProgramBatch.host_rows gives them) and in its device batch."""
    rows, cols, texts = chunk.host_literals()
    if len(rows) == 0:
        return
    n = np.asarray(lengths, dtype=np.int64)
    values = [number_value(t) for t in texts]
    for i, v in zip((np.cumsum(n)[rows] - n[rows] + cols).tolist(), values):  # flat index: row start + column
        imms[i] = v
    dev = chunk.batch.imm.device
    chunk.batch.imm[torch.as_tensor(rows, device=dev), torch.as_tensor(cols, device=dev)] = torch.tensor(
        values, dtype=torch.float64, device=dev)


def compile_to_batches(sources: list[str], device=None, timings: dict | None = None, workers: int | None = None):
    """The device part: per chunk (indices into `sources`, Chunk), and the sources' sizes in bytes. Sources
    over the size limit are left out (compile_batch reports them).

    Sources are lexed in chunks of similar byte length (lex's arrays are [B, L]), then regrouped by token
    count for the later passes (their arrays are [B, T]: rows of one byte length differ in tokens by ±30%,
    and sorted by bytes alone 29% of the token cells are padding). Lexed chunks are held until
    REGROUP_CHUNKS chunk budgets' worth of cells, which bounds the memory.

    On a CPU a batch may be shared out to resident worker processes (runtime/workers.py), each compiling every
    n-th source by length with its share of the memory budget: `workers` None shares a batch of
    POOL_MIN_BYTES or more out to default_workers() processes once they have started (and
    compiles in-process while they start); 0 or 1 compiles in-process; n >= 2 waits for n workers
    (for batches of at least n sources). What the workers cannot take, or leave undelivered when one
    dies, is compiled in-process; a Python error in a worker is raised here. timings then add up the
    workers' times."""
    chunks, sizes = compile_stream(sources, device, timings, workers)
    return list(chunks), sizes


def compile_stream(sources: list[str], device=None, timings: dict | None = None, workers: int | None = None):
    """compile_to_batches as (an iterator of its chunks, the sizes): each chunk comes as soon as it is
    compiled (a worker's as soon as it arrives), so that the caller can work on it meanwhile. The
    timings are complete once the iterator is done. Exhaust the iterator or close it: one left
    suspended holds the worker pool (a caller that closes it early ends the workers)."""
    device = torch.device(device or "cpu")
    tick = _Ticks(timings, device)
    encoded, sizes, order = by_size(sources)
    tick("plan")
    max_cells = chunk_cells(device)
    if device.type != "cpu" or not worker_processes.available():
        n = 1
    elif workers is None:
        n = default_workers() if sum(sizes[order].tolist()) >= POOL_MIN_BYTES else 1
    else:
        n = min(max(1, workers), worker_processes.MAX_WORKERS)
    pool = worker_pool(n, wait=workers is not None) if 1 < n <= len(order) else None
    return _stream(encoded, order, sizes, device, max_cells, timings, pool, n), sizes


def default_workers() -> int:
    """Processes a big CPU batch is shared out to: $GPUITER_COMPILE_WORKERS, else as many as torch's
    intra-op threads, the usable cores and half the memory left allow (runtime.workers.default_workers)."""
    return worker_processes.default_workers(WORKERS_ENV, WORKER_BYTES)


def worker_pool(workers: int, wait: bool = True):
    """The resident pool of `workers` compile workers, each of which has built the passes' tables
    (warm_up) before it says it is ready (runtime.workers.pool: None when it cannot take a batch now)."""
    return worker_processes.pool(workers, wait, setup=warm_up)


def _stream(encoded: list[bytes], order: list[int], sizes, device, max_cells: int, timings: dict | None, pool, n: int):
    """The chunks of compile_stream: from the pool's n workers if it takes the batch, else in this
    process. A worker that dies ends the pool, and the rows of every part not delivered by then are
    compiled here after."""
    if pool is not None:
        parts = [order[k::n] for k in range(n)]
        left = [set(range(len(part))) for part in parts]  # rows of each part not delivered yet
        with pool.streaming(_compile_part, [([encoded[i] for i in part], max_cells // n) for part in parts]) as events:
            if events is not None:
                try:
                    for event, k, value in events:
                        if event == "item":
                            rows, wire = value
                            left[k].difference_update(rows)
                            yield [parts[k][j] for j in rows], _from_wire(wire)
                        elif timings is not None:
                            for name, seconds in value.items():
                                timings[name] = timings.get(name, 0.0) + seconds
                    return
                except worker_processes.WorkerLost:
                    rest = {parts[k][j] for k in range(n) for j in left[k]}
                    order = [i for i in order if i in rest]
    yield from _batches(encoded, order, sizes + 1, device, max_cells, timings)


def chunk_closing(device: torch.device, max_cells: int) -> tuple[int, float]:
    """(cells past which a chunk may close, the padding that closes it) for chunks of up to max_cells on
    `device` in this process (a CPU's one-thread worker closes sooner)."""
    min_cells = min(MIN_CHUNK_CELLS.get(device.type, max_cells), max_cells)
    waste = PAD_WASTE_ONE_THREAD if device.type == "cpu" and torch.get_num_threads() == 1 else PAD_WASTE
    return min_cells, waste


def _batches(encoded: list[bytes], order: list[int], width, device, max_cells: int, timings: dict | None):
    """Chunks compiled in this process, each as soon as it is done: (indices into encoded, Chunk), for the
    rows in `order` (sorted by length, within the size limit)."""
    tick = _Ticks(timings, device)
    min_cells, waste = chunk_closing(device, max_cells)
    lexed, held = [], 0
    byte_chunks = split(order, width, width, max_cells, min_cells, waste)
    tick("plan")
    for k, sel in enumerate(byte_chunks):
        lexed.append((sel, _lex_chunk([encoded[i] for i in sel], device, timings)))
        held += len(sel) * int(width[sel[-1]])
        if held >= REGROUP_CHUNKS * max_cells or k == len(byte_chunks) - 1:
            for rows, tk in _regrouped(lexed, width, max_cells, min_cells, waste, device, timings):
                yield rows, _token_passes(tk, device, timings)
            lexed, held = [], 0


def _compile_part(encoded: list[bytes], max_cells: int):
    """A worker process's part of a batch (sources sorted by length, within the size limit): yields its
    chunks as (rows of the part, _to_wire of the chunk) as they are compiled; returns its pass timings."""
    timings: dict = {}
    width = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)) + 1
    for rows, chunk in _batches(encoded, list(range(len(encoded))), width, torch.device("cpu"), max_cells, timings):
        yield rows, _to_wire(chunk)
    return timings


_LOCATING = ("imm_token", "token_start", "token_end", "data")  # what host_literals reads


def _to_wire(chunk: Chunk) -> dict:
    """A Chunk as what crosses from a worker process: its fields with numpy arrays for tensors. The
    tensors that locate the host's literals stay behind (a third of the bytes): their text crosses
    instead; and the instructions are cut to the longest program's (codegen sizes them by tokens)."""
    literals = chunk.host_literals()
    wire = {f.name: getattr(chunk, f.name) for f in fields(Chunk) if f.name not in _LOCATING + ("batch",)}
    wire = {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in wire.items()}
    wire["literals"] = literals
    b = chunk.batch.trimmed()
    wire["batch"] = {f.name: getattr(b, f.name).numpy() for f in fields(ProgramBatch) if f.name != "messages"}
    return wire


def _from_wire(wire: dict) -> Chunk:
    """The Chunk of _to_wire (on the CPU, sharing the arrays' memory)."""
    batch = ProgramBatch(**{k: torch.from_numpy(v) for k, v in wire["batch"].items()})
    rest = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in wire.items() if k != "batch"}
    return Chunk(batch, **rest, **dict.fromkeys(_LOCATING))


def _regrouped(lexed, width, max_cells: int, min_cells: int, pad_waste: float, device, timings):
    """Lexed chunks' rows in new chunks of similar token counts, made one at a time as the caller asks for
    them: (source indices, Tokens) per chunk."""
    tick = _Ticks(timings, device)
    # the held rows, in lexed order (by byte length), numbered from 0: their sources, lexed chunk, row in it
    rows = np.concatenate([np.asarray(sel, dtype=np.int64) for sel, _ in lexed])
    part_of = np.repeat(np.arange(len(lexed)), [len(sel) for sel, _ in lexed])
    row_of = np.concatenate([np.arange(len(sel)) for sel, _ in lexed])
    tokens = np.concatenate([tk.row_tokens for _, tk in lexed])
    order = np.argsort(tokens, kind="stable")  # ties keep the byte-length order
    groups = split(order, width[rows], tokens, max_cells, min_cells, pad_waste)
    tick("regroup")
    for group in groups:
        tick = _Ticks(timings, device)  # (the caller's passes run between the chunks)
        g = np.asarray(group)
        g = g[np.argsort(part_of[g], kind="stable")]  # by lexed chunk
        parts, starts = np.unique(part_of[g], return_index=True)
        if len(parts) == 1 and len(g) == len(lexed[parts[0]][0]):
            sel, tk = lexed[parts[0]]  # a lexed chunk as it is
        else:
            with torch.inference_mode():
                pieces = zip(parts, np.split(g, starts[1:]))
                tk = regroup([(lexed[p][1], row_of[piece]) for p, piece in pieces], int(width[rows[g]].max()) - 1)
            sel = rows[g].tolist()
        tick("regroup")
        yield sel, tk


def compile_batch(sources: Sequence[str], device=None, timings: dict | None = None, workers: int | None = None):
    """Compile sources with the data-parallel passes (on a CPU maybe in worker processes: see
    compile_to_batches); returns a BatchResult."""
    from ..result import BatchResult

    sources = list(sources)
    chunks, sizes = compile_stream(sources, device, timings, workers)
    batches = []  # (rows, Chunk), kept for _assemble
    results: list = [None] * len(sources)
    for i in np.nonzero(sizes > spec.MAX_SOURCE_BYTES)[0].tolist():
        results[i] = diagnostics.error("source_too_large", 1, 1, sources[i], size=int(sizes[i]))
    rechecked = []  # rows the serial compiler compiled again (exact.py)
    with contextlib.closing(chunks), gc_paused():  # (an interrupt here must not leave the pool held)
        for sel, chunk in chunks:  # each as it comes: worker processes compile the next ones meanwhile
            batches.append((sel, chunk))
            ops, args, imms, lengths, n_params, errors = chunk.batch.host_rows()
            _fix_slow_numbers(chunk, imms, lengths)
            msgs = chunk.message.cpu().tolist()
            start = 0
            for j, (kind, line, col) in enumerate(errors):
                source = sources[sel[j]]
                end = start + lengths[j]
                if kind:
                    results[sel[j]] = compile_error(msgs[j], source, line, col)
                else:
                    name, param_names = _names(source)
                    results[sel[j]] = Program(ops[start:end], args[start:end], imms[start:end], n_params[j],
                                              param_names, name)
                start = end
            for j in torch.nonzero(chunk.recheck).flatten().tolist():
                results[sel[j]] = serial.compile_sources([sources[sel[j]]])[0]
                rechecked.append(sel[j])
    batch = _assemble(batches, sizes, device, {i: results[i] for i in rechecked}) if sources else None
    if batch is not None:
        batch.messages = [r.message if isinstance(r, CompileError) else None for r in results]
    return BatchResult(results, "traditional", batch=batch, timings=dict(timings or {}))


def _assemble(batches, sizes, device, rechecked: dict | None = None) -> ProgramBatch:
    """One ProgramBatch on the device, rows in the caller's order (sources over the size limit are
    `too-large` rows, `rechecked` rows the serial compiler's results)."""
    device = torch.device(device or "cpu")
    rechecked = rechecked or {}
    B = len(sizes)
    again = ProgramBatch.from_results(list(rechecked.values()), device) if rechecked else None
    # as wide as the longest program (a chunk's arrays are sized by its tokens, ~4x wider)
    parts = [(sel, c.batch.trimmed()) for sel, c in batches] + ([(list(rechecked), again)] if again else [])
    N = max([b.ops.shape[1] for _, b in parts] + [1])
    ops = torch.full((B, N), -1, dtype=torch.int32, device=device)
    args = torch.full((B, N, 3), -1, dtype=torch.int32, device=device)
    imm = torch.zeros((B, N), dtype=torch.float64, device=device)
    lengths = torch.zeros(B, dtype=torch.int32, device=device)
    n_params = torch.zeros(B, dtype=torch.int32, device=device)
    error = torch.tensor([[KIND_CODES["too-large"], 1, 1]], dtype=torch.int32, device=device).repeat(B, 1)
    for sel, b in parts:
        rows = torch.as_tensor(sel, device=device)
        w = b.ops.shape[1]
        if b is again:  # its rows hold their chunk's programs, which may be longer
            ops[rows], args[rows], imm[rows] = -1, -1, 0.0
        ops[rows, :w], args[rows, :w], imm[rows, :w] = b.ops, b.args, b.imm
        lengths[rows], n_params[rows], error[rows] = b.lengths, b.n_params, b.error
    return ProgramBatch(ops, args, imm, lengths, n_params, error)


# a valid program's head: blank, comment and backslash-ended lines, then `def NAME(params)`, where a
# comment or a backslash may end a line inside the parentheses (and a comment may hold a parenthesis).
# Unambiguous, so that a failed match cannot backtrack exponentially: a lone CR is one not before LF,
# and a comment runs to its line's end
_HEAD = re.compile(r"(?:[ \t\f]*(?:#[^\r\n]*|\\)?(?:\r\n|\r(?!\n)|\n))*[ \t\f]*def[\s\\]+([^\s\\(]+)[\s\\]*"
                   r"\(((?:[^)#]|#[^\r\n]*(?![^\r\n]))*)\)")
_COMMENT = re.compile(r"#[^\r\n]*")


def _names(source: str) -> tuple[str, list[str]]:
    """The function and parameter names of a valid program (names are ASCII), for display: the IR
    itself is nameless."""
    head = _HEAD.match(source)
    if head is None:  # (not a program the compiler accepted)
        return "kernel", []
    params = _COMMENT.sub("", head.group(2)).split(",")
    return head.group(1), [p for p in (q.strip(" \t\f\r\n\\") for q in params) if p]
