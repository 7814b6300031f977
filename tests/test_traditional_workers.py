"""A CPU batch shared out to resident worker processes (runtime/workers.py) compiles to
exactly what one process gives, and a broken or missing pool never loses a batch.

The tests never rely on timing: a worker is made busy for as long as a test wants by
worker_helpers.hold (a gate the test opens), an interrupt is sent once the workers are known to be
busy, a worker's call is known to be in flight because its results are more than its pipe holds,
and every process a test starts is killed by its pid when the test ends, whatever happened (but
for a healthy idle pool, handed on to the next test and killed when the module's tests end)."""

import contextlib
import fcntl
import functools
import itertools
import operator
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest
import torch
import worker_helpers
from edge_cases import COLLIDING, INVALID, VALID

from jupyter_gpuiter import generate
from jupyter_gpuiter.compilers import traditional
from jupyter_gpuiter.compilers.traditional import driver
from jupyter_gpuiter.lang import spec
from jupyter_gpuiter.runtime import workers

HERE = os.path.dirname(os.path.abspath(__file__))


_SPAWNED: list[subprocess.Popen] = []  # every worker the module's tests spawned in this process
_ALTERED: list[workers.WorkerPool] = []  # pools a test changed (their pipes): never handed on


def _kill(procs) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _reusable(pool) -> bool:
    """Whether a test may hand `pool` on to the next: two started workers, all running, no call in
    flight, nothing about it changed (a worker's state is only the compiler's tables)."""
    return (pool is not None and not pool.broken and pool.pid == os.getpid() and pool.workers == 2
            and all(pool._ready) and not pool._busy.locked() and all(p.poll() is None for p in pool._procs)
            and not any(pool is altered for altered in _ALTERED))


def _end_pool() -> None:
    """The resident pool's workers killed by their pids, then the pool shut down."""
    if workers._POOL is not None:
        _kill(workers._POOL._procs)
    workers.shutdown()


@pytest.fixture(scope="module", autouse=True)
def _module_workers():
    """Every worker the module's tests spawned is killed by its pid once the module's tests are done."""
    try:
        yield
    finally:
        try:
            _kill(_SPAWNED)
            _SPAWNED.clear()
        finally:
            _end_pool()


@pytest.fixture(autouse=True)
def spawned(monkeypatch):
    """The workers this test spawns: each killed by its pid at the test's end, whatever happened (a test
    that failed midway may have left a busy one), except the two of a healthy idle pool, which the next
    test may use (starting two workers costs two interpreters importing torch). A pool in any other
    state is killed before the test and after it. (Idle workers that exit by themselves:
    test_workers_never_outlive_their_parent.)"""
    # (the workers import worker_helpers by name)
    monkeypatch.setenv("PYTHONPATH", HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if not _reusable(workers._POOL):
        _end_pool()
    monkeypatch.setattr(workers, "_START_FAILED", False)
    procs: list[subprocess.Popen] = []
    real_spawn = workers.WorkerPool._spawn

    def spawn(self, threads):
        real_spawn(self, threads)
        procs.append(self._procs[-1])
        _SPAWNED.append(self._procs[-1])

    monkeypatch.setattr(workers.WorkerPool, "_spawn", spawn)
    try:
        yield procs
    finally:
        kept = workers._POOL._procs if _reusable(workers._POOL) else []
        try:
            _kill([p for p in procs if p not in kept])
        finally:
            if not kept:
                _end_pool()
            _SPAWNED[:] = [p for p in _SPAWNED if p.poll() is None]


@pytest.fixture
def no_pool():
    """A test that starts from no pool at all."""
    _end_pool()


class Gate:
    """A Unix socket (abstract: no file) where workers running worker_helpers.hold report and wait until
    the test releases them. Waits on it are bounded by START_TIMEOUT, a liveness bound, not a timing."""

    def __init__(self):
        self.address = f"\0gpuiter-test-gate-{uuid.uuid4().hex}"
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.address)
        self._server.listen()
        self._held: list[socket.socket] = []

    def arrivals(self, n: int) -> list[int]:
        """Block until n workers have arrived: their pids (socket.timeout past START_TIMEOUT)."""
        deadline = time.monotonic() + workers.START_TIMEOUT
        pids = []
        while len(pids) < n:
            self._server.settimeout(max(0.001, deadline - time.monotonic()))
            conn, _ = self._server.accept()
            self._held.append(conn)
            conn.settimeout(max(0.001, deadline - time.monotonic()))
            line = b""
            while not line.endswith(b"\n"):
                data = conn.recv(64)
                if not data:
                    raise EOFError("a worker left the gate before saying who it is")
                line += data
            pids.append(int(line))
        return pids

    def release(self, word: str = "go") -> None:
        """Let the workers held go on: hold returns `word` in each."""
        for conn in self._held:
            with contextlib.suppress(OSError):
                conn.sendall(word.encode())
        self.close()

    def close(self) -> None:
        """Close the gate: workers held go on (hold returns ""), an arrivals() waiting raises OSError."""
        for conn in self._held:
            conn.close()
        self._held = []
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)  # (wakes an accept() in another thread)
        self._server.close()


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
    _ALTERED.append(pool)
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


def test_workers_run_apart_from_the_callers_process_group_and_report_their_errors(no_pool):
    assert workers.running() == 0
    pool = driver.worker_pool(2)
    assert workers.running() == 2  # (what %gpuiter status reports)
    # a kernel interrupt (SIGINT to the kernel's process group) misses them
    assert all(os.getpgid(p.pid) not in (os.getpgrp(), os.getpid()) for p in pool._procs)
    assert pool.map(operator.add, [(1, 2), (3, 4)]) == [3, 7]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        pool.map(operator.truediv, [(1, 0)])
    assert pool.map(operator.mul, [(6, 7)]) == [42] and not pool.broken  # a failing call leaves the pool usable


def test_workers_have_built_the_compilers_tables_when_they_say_they_are_ready():
    pool = driver.worker_pool(2)
    # (eval: a picklable callable that reads the worker's own state, before any compile was asked of it)
    lex_tables = "__import__('sys').modules['jupyter_gpuiter.compilers.traditional.batch_lexer']._TABLES"
    assert pool.map(eval, [(f"__import__('torch').device('cpu') in {lex_tables}",)] * 2) == [True, True]


def test_workers_never_outlive_their_parent():
    script = ("import sys\n"
              "from jupyter_gpuiter.runtime import workers\n"
              "print(*[p.pid for p in workers.pool(2)._procs], flush=True)\n"
              "sys.stdin.read()\n")  # (until the test kills it, or its end of the pipe closes)
    parent = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    pids = []
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        parent.kill()
        parent.wait()
        assert _gone(pids, timeout=workers.START_TIMEOUT)  # a liveness bound, not a timing
    finally:
        parent.kill()
        parent.wait()
        parent.stdin.close()
        parent.stdout.close()
        for pid in pids:  # (not our children: killed by pid only while they are still running)
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _gone(pids, timeout: float) -> bool:
    """Wait until none of pids (any processes, not only children) runs: True, or False after timeout."""
    deadline = time.monotonic() + timeout
    fds = []
    try:
        for pid in pids:
            try:
                fds.append(os.pidfd_open(pid))  # readable once the process has exited
            except ProcessLookupError:
                pass
        while fds and time.monotonic() < deadline:
            ready, _, _ = select.select(fds, [], [], max(0.0, deadline - time.monotonic()))
            for fd in ready:
                fds.remove(fd)
                os.close(fd)
    except (AttributeError, OSError):  # no pidfd_open (an old kernel): look every 0.1 s instead
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        for fd in fds:
            os.close(fd)
    return not any(_alive(p) for p in pids)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def test_an_interrupt_while_waiting_ends_the_busy_workers_at_once():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("a signal's handler runs in the main thread only")
    pool = driver.worker_pool(2)
    procs = list(pool._procs)
    gate = Gate()
    arrived = []

    def ctrl_c():  # Ctrl-C in a notebook, once both workers are busy with the call
        try:
            arrived.extend(gate.arrivals(2))
        except (OSError, EOFError):  # the call ended without them (the gate closed), or they never came
            for proc in procs:  # (a call still waiting for them then ends: the test fails, not hangs)
                if proc.poll() is None:
                    proc.kill()
            return
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # (it interrupts the wait)

    # Python raises KeyboardInterrupt for SIGINT only where it found SIGINT's default action at start:
    # a background job of a non-interactive shell (`make test &`) starts with SIGINT ignored
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    sender = threading.Thread(target=ctrl_c)
    try:
        sender.start()
        with pytest.raises(KeyboardInterrupt):
            pool.map(worker_helpers.hold, [(gate.address,)] * 2)  # they would hold until the gate opens
    finally:
        gate.close()
        sender.join()
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
    assert sorted(arrived) == sorted(p.pid for p in procs)
    assert pool.broken and all(p.poll() is not None for p in procs)
    assert traditional.compile_to_batches(generate.generate_batch(50, 45), workers=2)[0]  # a new pool


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


def test_a_pool_in_use_is_not_replaced_under_its_caller():
    pool = driver.worker_pool(2)
    gate = Gate()
    got = []
    call = threading.Thread(target=lambda: got.append(pool.map(worker_helpers.hold, [(gate.address,)] * 2)))
    call.start()
    try:
        assert sorted(gate.arrivals(2)) == sorted(p.pid for p in pool._procs)  # the call is in flight
        assert driver.worker_pool(3) is None  # another size is asked for while the call is in flight: not now
        gate.release("done")
    finally:
        gate.close()
        call.join(workers.START_TIMEOUT)  # (a failure: the fixture's kill ends the call)
    assert got == [["done", "done"]] and not pool.broken
    assert driver.worker_pool(3) is not pool and driver.worker_pool(3).workers == 3


def test_a_forked_child_leaves_the_pool_to_its_parent():
    pool = driver.worker_pool(2)
    child = os.fork()
    if child == 0:  # the child must neither use nor close its parent's workers
        os._exit(0 if workers._POOL is None and pool.broken and not pool._procs else 1)
    assert os.waitpid(child, 0)[1] == 0
    assert pool.map(operator.add, [(1, 2), (3, 4)]) == [3, 7] and not pool.broken


def test_default_workers_fit_the_cores_and_half_the_memory_left(monkeypatch, no_pool):  # (none running)
    from jupyter_gpuiter.runtime import host

    monkeypatch.delenv(driver.WORKERS_ENV, raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 8)
    monkeypatch.setattr(host, "usable_cores", lambda: 4)
    monkeypatch.setattr(host, "memory_headroom", lambda: None)
    assert driver.default_workers() == 4
    monkeypatch.setattr(host, "usable_cores", lambda: 1)  # a container's one-CPU quota: in-process
    assert driver.default_workers() == 1
    monkeypatch.setattr(host, "usable_cores", lambda: 4)
    for budgets, n in ((0, 1), (3, 1), (4, 2), (100, 4)):  # memory left, in workers' budgets
        free = budgets * driver.WORKER_BYTES
        monkeypatch.setattr(host, "memory_headroom", lambda free=free: free)
        assert driver.default_workers() == n, free
    # a running pool's workers count as memory of its own: its size holds while memory stays as it is
    monkeypatch.setattr(host, "memory_headroom", lambda: 2 * driver.WORKER_BYTES)
    monkeypatch.setattr(workers, "running", lambda: 2)
    assert driver.default_workers() == 2


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


def test_an_error_in_a_streamed_part_comes_after_the_other_parts_and_leaves_the_pool_usable():
    pool = driver.worker_pool(2)
    events = []
    with (pytest.raises(RuntimeError, match="failed after 3 items"),
          pool.streaming(worker_helpers.count_then_fail, [(3, True), (5, False)]) as stream):
        events.extend(stream)
    assert sorted(e for e in events if e[0] == "item") == [("item", 0, i) for i in range(3)] + [
        ("item", 1, i) for i in range(5)]
    assert ("done", 1, 5) in events and not pool.broken
    with pool.streaming(worker_helpers.count_then_fail, [(2, False)]) as stream:
        assert list(stream) == [("item", 0, 0), ("item", 0, 1), ("done", 0, 2)]
