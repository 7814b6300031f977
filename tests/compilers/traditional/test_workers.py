"""A CPU batch shared out to resident worker processes (runtime/workers.py, through driver.worker_pool)
compiles to exactly what one process gives, and a broken or missing pool never loses a batch
(tests/support/pools.py has the fixtures and how the tests avoid relying on timing)."""

import fcntl
import functools
import itertools
import os
import signal
import subprocess
import sys
import threading

import pytest
import torch

from jupyter_gpuiter import generate
from jupyter_gpuiter.compilers import traditional
from jupyter_gpuiter.compilers.traditional import driver
from jupyter_gpuiter.lang import spec
from jupyter_gpuiter.runtime import workers
from tests.support.edge_cases import COLLIDING, INVALID, VALID
from tests.support.pools import ALTERED

pytestmark = pytest.mark.usefixtures("worker_processes", "spawned")

@functools.cache
def _sources():
    sources = generate.generate_batch(700, 41)
    return sources + [m for m, _ in generate.mutate_batch(sources, 42)] + VALID + [s for s, _ in INVALID] + COLLIDING


def _edge_sources(seed: int):
    """A smaller batch with the edge cases in it (hash collisions among them)."""
    return generate.generate_batch(300, seed) + VALID + [s for s, _ in INVALID] + COLLIDING


def _big(seed: int):
    """A batch just past POOL_MIN_BYTES: by default, shared out to the workers once they have started."""
    sources = generate.generate_batch(500, seed)
    ends = itertools.accumulate(len(s.encode()) for s in sources)
    n = next(k for k, end in enumerate(ends, 1) if end >= driver.POOL_MIN_BYTES)
    return sources[:n]


def _pooled(batches) -> bool:
    """Whether chunks came from worker processes: theirs bring the host's literals as text."""
    kinds = {c.imm_token is None and c.literals is not None for _, c in batches}
    assert len(kinds) == 1
    return kinds.pop()


def _more_than_the_pipes_hold(monkeypatch, pool, chunk_cells: int) -> None:
    """Each worker's chunks become more than its pipe holds, with several chunks a worker: a worker
    cannot have sent them all, let alone finished, before the caller reads on. Chunks of at most
    chunk_cells cells (in-process as well: only the chunking changes), pipes of one page (the least
    Linux allows; they are empty between calls)."""
    monkeypatch.setattr(driver, "CHUNK_CELLS", chunk_cells)
    ALTERED.append(pool)
    for conn in pool._inbox:
        fcntl.fcntl(conn.fileno(), fcntl.F_SETPIPE_SZ, os.sysconf("SC_PAGE_SIZE"))


def test_workers_compile_exactly_what_one_process_does():
    sources = _sources()
    timings = {}
    pooled = traditional.compile_batch(sources, timings=timings, workers=2)
    alone = traditional.compile_batch(sources, workers=1)
    assert pooled.canonical() == alone.canonical()
    assert pooled.batch.messages == alone.batch.messages
    for name in ("ops", "args", "lengths", "n_params", "error"):
        assert torch.equal(getattr(pooled.batch, name), getattr(alone.batch, name)), name
    assert torch.equal(pooled.batch.imm.nan_to_num(7.5), alone.batch.imm.nan_to_num(7.5))
    assert set(timings) == set(traditional.PASSES) and all(v > 0 for v in timings.values())
    batches, sizes = traditional.compile_to_batches(sources, workers=2)
    assert _pooled(batches)
    rows = sorted(r for sel, _ in batches for r in sel)
    assert rows == [i for i, n in enumerate(sizes) if n <= spec.MAX_SOURCE_BYTES]  # every source once
    flagged = sorted(sel[j] for sel, c in batches for j in torch.nonzero(c.recheck).flatten().tolist())
    assert flagged == [len(sources) - len(COLLIDING) + i for i in range(4)]  # the hash collisions, found in a worker


def test_a_killed_worker_costs_one_call_in_process_and_the_next_starts_a_new_pool():
    sources = generate.generate_batch(100, 43)
    want = traditional.compile_batch(sources, workers=1).canonical()
    pool = driver.worker_pool(2)
    victim = pool._procs[0]
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(30)
    batches, _ = traditional.compile_to_batches(sources, workers=2)
    assert not _pooled(batches) and pool.broken
    assert traditional.compile_batch(sources, workers=2).canonical() == want
    assert driver.worker_pool(2) is not pool and not driver.worker_pool(2).broken


def test_by_default_big_batches_wait_for_no_pool_and_small_ones_need_none(monkeypatch, no_pool):
    monkeypatch.setenv(driver.WORKERS_ENV, "2")
    big = _big(44)
    small = big[:50]
    first, _ = traditional.compile_to_batches(big)  # the pool starts meanwhile (a worker imports torch first)
    assert not _pooled(first)
    assert driver.worker_pool(2).wait()
    later, _ = traditional.compile_to_batches(big)
    assert _pooled(later)
    assert not _pooled(traditional.compile_to_batches(small)[0])
    assert not _pooled(traditional.compile_to_batches(big, workers=1)[0])
    monkeypatch.setenv(driver.WORKERS_ENV, "1")
    assert not _pooled(traditional.compile_to_batches(big)[0])


def test_default_workers_follow_the_environment_then_torch_threads(monkeypatch):
    monkeypatch.setenv(driver.WORKERS_ENV, "3")
    assert driver.default_workers() == 3
    monkeypatch.setenv(driver.WORKERS_ENV, "many")
    with pytest.raises(ValueError, match=driver.WORKERS_ENV):
        driver.default_workers()
    monkeypatch.delenv(driver.WORKERS_ENV)
    assert 1 <= driver.default_workers() <= torch.get_num_threads()


def test_workers_have_built_the_compilers_tables_when_they_say_they_are_ready():
    pool = driver.worker_pool(2)
    # (eval: a picklable callable that reads the worker's own state, before any compile was asked of it)
    lex_tables = "__import__('sys').modules['jupyter_gpuiter.compilers.traditional.batch_lexer']._TABLES"
    assert pool.map(eval, [(f"__import__('torch').device('cpu') in {lex_tables}",)] * 2) == [True, True]


def test_calls_from_two_threads_at_once_get_their_own_results():
    batches = [generate.generate_batch(200, 46 + k) for k in range(2)]
    want = [traditional.compile_batch(b, workers=1).canonical() for b in batches]
    driver.worker_pool(2)
    got = [None, None]

    def compile_one(k):
        got[k] = traditional.compile_batch(batches[k], workers=2).canonical()

    threads = [threading.Thread(target=compile_one, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert got == want


def test_a_pool_busy_with_another_call_leaves_the_batch_to_the_caller():
    sources = generate.generate_batch(100, 47)
    pool = driver.worker_pool(2)
    with pool._busy:  # another thread's call in flight
        batches, _ = traditional.compile_to_batches(sources, workers=2)
    assert not _pooled(batches) and not pool.broken
    assert _pooled(traditional.compile_to_batches(sources, workers=2)[0])


def test_a_pool_that_cannot_start_leaves_batches_in_process_and_no_descriptors_behind(monkeypatch, no_pool):
    real_popen, spawned = subprocess.Popen, []

    def popen_once(*args, **kwargs):  # the second worker cannot be spawned (say, out of processes)
        if spawned:
            raise OSError("no more processes")
        spawned.append(real_popen(*args, **kwargs))
        return spawned[-1]

    monkeypatch.setattr(workers.subprocess, "Popen", popen_once)
    monkeypatch.setenv(driver.WORKERS_ENV, "2")
    fds = len(os.listdir("/proc/self/fd"))
    sources = _big(48)
    batches, _ = traditional.compile_to_batches(sources, workers=2)
    assert not _pooled(batches) and spawned[0].wait(30) is not None  # the one spawned is ended
    assert len(os.listdir("/proc/self/fd")) == fds
    assert not _pooled(traditional.compile_to_batches(sources)[0]) and workers._POOL is None  # not tried again
    assert traditional.compile_batch(sources, workers=2).canonical() == traditional.compile_batch(
        sources, workers=1).canonical()


#: ("small", always run): a smaller batch in smaller chunks, through pipes of one page;
#: ("full", a slow sweep): a batch of the default chunks more than the default pipes hold
SCALES = ["small", pytest.param("full", marks=pytest.mark.slow)]


@pytest.mark.parametrize("scale", SCALES)
def test_chunks_stream_in_while_the_workers_go_on_and_a_worker_lost_midway_loses_no_row(monkeypatch, scale):
    # (each worker's chunks are more than its pipe holds, a worker sends several: it cannot be done by
    # the time the first chunk is read; "full": ~4 MB a worker through 1 MiB pipes)
    sources = generate.generate_batch(300 if scale == "small" else 4096, 49)
    want = traditional.compile_batch(sources, workers=1).canonical()
    pool = driver.worker_pool(2)
    if scale == "small":
        _more_than_the_pipes_hold(monkeypatch, pool, 1 << 15)  # (six chunks a worker, ~50 KB each)
    chunks, _ = traditional.compile_stream(sources, workers=2)
    first = next(chunks)
    assert pool._busy.locked() and _pooled([first])  # the call is still in flight: the chunk came as it was done
    for proc in pool._procs:  # both workers die with chunks of theirs still to come
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    rest = list(chunks)
    assert pool.broken and not pool._busy.locked()
    assert any(not _pooled([c]) for c in rest)  # the rows not delivered were compiled here
    rows = sorted(r for sel, _ in [first, *rest] for r in sel)
    assert rows == list(range(len(sources)))  # every row exactly once
    assert traditional.compile_batch(sources, workers=2).canonical() == want  # (a new pool)


@pytest.mark.parametrize("scale", SCALES)
def test_compile_batch_with_its_workers_lost_midway_gives_what_one_process_does(monkeypatch, scale):
    # (more than the pipes hold, as above; the edge cases among them)
    sources = _edge_sources(52) if scale == "small" else _sources() + generate.generate_batch(3000, 52)
    alone = traditional.compile_batch(sources, workers=1)
    real = traditional.compile_stream
    lost = []

    def killing_after_the_first_chunk(*args, **kwargs):
        chunks, sizes = real(*args, **kwargs)

        def chunks_then_kill():
            for k, chunk in enumerate(chunks):
                yield chunk
                if k == 0:
                    for proc in workers._POOL._procs:
                        os.kill(proc.pid, signal.SIGKILL)
                        proc.wait(30)
                elif not _pooled([chunk]):
                    lost.append(chunk)
        return chunks_then_kill(), sizes

    pool = driver.worker_pool(2)
    if scale == "small":
        _more_than_the_pipes_hold(monkeypatch, pool, 1 << 16)
    monkeypatch.setattr(driver, "compile_stream", killing_after_the_first_chunk)
    got = traditional.compile_batch(sources, workers=2)
    assert workers._POOL is pool and pool.broken and not pool._busy.locked()
    assert lost  # rows compiled here after the workers died
    assert got.canonical() == alone.canonical() and got.batch.messages == alone.batch.messages
    for name in ("ops", "args", "lengths", "n_params", "error"):
        assert torch.equal(getattr(got.batch, name), getattr(alone.batch, name)), name


def test_an_interrupt_while_compile_batch_unpacks_a_chunk_ends_the_workers(monkeypatch):
    """compile_batch closes its stream: the pool is not left held by a suspended stream (which Jupyter's
    last traceback would keep alive), and the next batch gets a new pool."""
    sources = generate.generate_batch(300, 51)
    pool = driver.worker_pool(2)
    procs = list(pool._procs)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(driver, "_fix_slow_numbers", interrupted)  # the first chunk's host unpacking
    try:
        traditional.compile_batch(sources, workers=2)
    except KeyboardInterrupt:
        last = sys.exc_info()  # kept, as IPython keeps sys.last_traceback (with compile_batch's frame)
    assert last[0] is KeyboardInterrupt
    assert pool.broken and not pool._busy.locked() and all(p.poll() is not None for p in procs)
    monkeypatch.undo()
    assert _pooled(traditional.compile_to_batches(sources, workers=2)[0])


def test_a_caller_leaving_a_stream_ends_its_workers():
    sources = generate.generate_batch(300, 50)
    pool = driver.worker_pool(2)
    procs = list(pool._procs)
    chunks, _ = traditional.compile_stream(sources, workers=2)
    next(chunks)
    chunks.close()  # their chunks in flight would otherwise answer the next call
    assert pool.broken and all(p.poll() is not None for p in procs)
    assert _pooled(traditional.compile_to_batches(sources, workers=2)[0])
