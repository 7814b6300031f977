"""Resident worker processes that share work out over the CPU's cores (a GPU runs in-process).

Its user is the traditional compiler, which shares a big CPU batch out to the pool: torch's intra-op
threads split each of the passes' many small operations, which made two cores only 1.45x one; two
processes of one thread, each compiling its own part of the batch, come close to 2x (docs/compiler.md,
"Worker processes on a CPU", has the design and why it is not ProcessPoolExecutor). What is the
compiler's own (the workers' setup, the size of a batch worth sharing, a worker's memory) stays in
compilers/traditional/driver.py; this module knows nothing of compiling.

Each worker is a fresh interpreter (`_serve`) in a session of its own, talking to its parent over two
pipes with multiprocessing's Connection (length-prefixed pickles); it runs the pool's `setup` (a
module-level function) before it says it is ready, and exits when the parent's end closes. The pool
serves one call at a time: `map` (a result a worker) or `streaming` (a generator function's items as
each worker makes them, so that the caller works on them while the workers go on). Whatever goes wrong
with it (a worker that cannot start or dies, a call from another thread in flight, an interrupt) leaves
the work, or the items not delivered yet, to the caller, who does it in-process; an interrupt is raised
again once the workers are gone.
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import os
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from multiprocessing.connection import Connection, wait

import torch

from . import host

try:
    import fcntl
except ImportError:  # not POSIX: no worker processes (default_workers), so no pipes to size
    fcntl = None

#: worker processes a pool may have at most
MAX_WORKERS = 8
#: seconds a worker may take to start (an interpreter importing torch: ~1.5 s on the 2-core CPU)
START_TIMEOUT = 120
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class WorkerLost(RuntimeError):
    """A worker died (or its pipe broke) during a streamed call: the pool is closed, and the items not
    yet received are the caller's to make."""


def available() -> bool:
    """Whether this platform can run workers (their pipes are passed as inherited file descriptors)."""
    return os.name == "posix"


def default_workers(env: str, worker_bytes: int) -> int:
    """Processes to share work out to: the environment variable `env` if set, else as many as torch's
    intra-op threads and the usable cores (a container's CPU quota included) allow, and as fit in half
    the memory this process can still get (a container's limit included) at `worker_bytes` a worker,
    counting the running workers' as its own; at most MAX_WORKERS (1: in-process)."""
    if not available():
        return 1
    value = os.environ.get(env, "").strip()
    if value:
        try:
            return min(max(1, int(value)), MAX_WORKERS)
        except ValueError:
            raise ValueError(f"{env}={value!r}: expected a whole number of worker processes (1: none)") from None
    n = min(torch.get_num_threads(), host.usable_cores(), MAX_WORKERS)
    free = host.memory_headroom()
    if free is not None:
        n = min(n, (free + running() * worker_bytes) // (2 * worker_bytes))
    return max(1, n)


class WorkerPool:
    """`workers` processes, each with threads // workers intra-op threads (at least one), each running
    `setup()` (a module-level function, or None) before it says it is ready. Raises OSError if one cannot
    be spawned (the ones spawned are ended)."""

    def __init__(self, workers: int, threads: int, setup: Callable[[], object] | None = None):
        self.workers, self.broken, self.pid, self.setup = workers, False, os.getpid(), setup
        self._procs: list[subprocess.Popen] = []
        self._inbox: list[Connection] = []  # from each worker
        self._outbox: list[Connection] = []  # to each worker
        self._ready = [False] * workers
        self._busy = threading.Lock()  # one call at a time: replies are read in order
        self._listening = threading.Lock()  # one thread reads the workers' "ready" at a time
        try:
            for _ in range(workers):
                self._spawn(max(1, threads // workers))
        except BaseException:
            self.close(kill=True)
            raise

    def _spawn(self, threads: int) -> None:
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        self._inbox.append(Connection(up_r, writable=False))
        self._outbox.append(Connection(down_w, readable=False))
        try:
            for fd in (down_w, up_r):  # a chunk's results are megabytes: 1 MiB pipes (Linux) take fewer turns
                with contextlib.suppress(AttributeError, OSError):  # (AttributeError: not Linux)
                    fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
            serve = f"from {__name__} import _serve; _serve({down_r}, {up_w}, {threads})"
            self._procs.append(subprocess.Popen([sys.executable, "-c", serve], pass_fds=(down_r, up_w),
                                                start_new_session=True,
                                                cwd=_PACKAGE_PARENT))  # (so that the package imported is this one)
        finally:
            os.close(down_r)
            os.close(up_w)
        self._outbox[-1].send(self.setup)  # (a few bytes: the pipe holds them until the worker reads them)

    def _hear_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not all(self._ready):
            waiting = [c for c, r in zip(self._inbox, self._ready) if not r]
            heard = wait(waiting, max(0.0, deadline - time.monotonic()))
            for conn in heard:
                conn.recv()  # "ready", or EOFError: the worker died starting
                self._ready[self._inbox.index(conn)] = True
            if not heard:
                return

    def _listen(self, timeout: float) -> None:
        """Read the workers' "ready" for up to `timeout` seconds; a pool that fails to start is killed."""
        try:
            self._hear_ready(timeout)
        except BaseException as e:  # a worker died starting, or an interrupt lost a "ready" on the way
            self.close(kill=True)
            if not isinstance(e, (EOFError, OSError)):
                raise

    def ready(self) -> bool:
        """Whether every worker has started (run its setup); never blocks (False while another
        thread listens for the workers)."""
        if not self._listening.acquire(blocking=False):
            return False
        try:
            if not self.broken:
                self._listen(0)
        finally:
            self._listening.release()
        return not self.broken and all(self._ready)

    def wait(self) -> bool:
        """Block until every worker has started (at most START_TIMEOUT); False if the pool broke."""
        with self._listening:
            if not self.broken and not all(self._ready):
                self._listen(START_TIMEOUT)
                if not all(self._ready):
                    self.close(kill=True)
        return not self.broken

    def map(self, fn: Callable, parts: Sequence[tuple]) -> list | None:
        """[fn(*part) for part in parts] with a worker each (at most `workers` parts; fn a module-level
        function). None when the pool is busy with another thread's call, or broke (which closes it):
        the caller then does the work itself. An error in fn is raised here."""
        with self.streaming(fn, parts) as events:
            if events is None:
                return None
            results: list = [None] * len(parts)
            try:
                for event, k, value in events:
                    if event == "done":
                        results[k] = value
            except WorkerLost:
                return None
            return results

    @contextlib.contextmanager
    def streaming(self, fn: Callable, parts: Sequence[tuple]):
        """Run fn(*part) in a worker each (fn a module-level function), as a context: its value is an
        iterator of events, ("item", part index, item) for each item of a generator function as it
        arrives and ("done", part index, fn's return value), or None when the pool cannot take the call
        (busy with another thread's, or broken). The iterator raises WorkerLost when a worker dies on
        the way (the pool is then closed), and an error in fn once the other workers are done. Leaving
        the block once the parts are sent and before the iterator ends closes the pool (the items in
        flight would answer the next call)."""
        if len(parts) > self.workers:
            raise ValueError(f"{len(parts)} parts for {self.workers} workers")
        if not self._busy.acquire(blocking=False):
            yield None
            return
        try:
            if not self.wait():
                yield None
                return
            done = [False] * len(parts)
            events = self._events(fn, parts, done)
            try:
                yield events
            finally:  # (an iterator never started sent nothing)
                if inspect.getgeneratorstate(events) != inspect.GEN_CREATED and not all(done):
                    self.close(kill=True)
        finally:
            self._busy.release()

    def _events(self, fn: Callable, parts: Sequence[tuple], done: list[bool]) -> Iterator[tuple]:
        inbox, outbox = self._inbox[:len(parts)], self._outbox[:len(parts)]
        failed = []
        try:
            for out, part in zip(outbox, parts):
                out.send((fn, part))
            while not all(done):
                for conn in wait([c for c, d in zip(inbox, done) if not d]):
                    k = inbox.index(conn)
                    tag, value = conn.recv()
                    if tag == "item":
                        yield "item", k, value
                        continue
                    done[k] = True
                    if tag:
                        yield "done", k, value
                    else:
                        failed.append(value)
        except (EOFError, OSError):
            self.close(kill=True)
            raise WorkerLost("a worker process died during the call") from None
        except BaseException:  # an interrupt, or the caller leaving: the workers go at once
            self.close(kill=True)
            raise
        if failed:
            raise RuntimeError(f"a worker process failed:\n{failed[0]}")

    def close(self, kill: bool = False) -> None:
        """End the workers: idle ones exit when their pipe closes (a stuck one is killed after 5 s);
        kill=True ends busy ones at once."""
        self.broken = True
        for conn in self._outbox + self._inbox:
            conn.close()
        for proc in self._procs:
            if kill:
                proc.kill()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._outbox, self._inbox, self._procs = [], [], []

    def forget(self) -> None:
        """In a forked child: drop this process's copies of the pipes, leaving the workers to the parent."""
        self.broken = True
        for conn in self._outbox + self._inbox:
            conn.close()
        self._outbox, self._inbox, self._procs = [], [], []


_POOL: WorkerPool | None = None
_POOL_LOCK = threading.Lock()
_START_FAILED = False  # a pool failed to start: batches stop trying to start one by default


def pool(workers: int, wait: bool = True, setup: Callable[[], object] | None = None) -> WorkerPool | None:
    """The resident pool of `workers` processes whose workers ran `setup()`, started if need be (a broken
    one, or one of another size or setup that no call is using, is replaced). wait=False: None until it
    has started, without blocking, and None for good once a pool has failed to start in this process.
    Also None when the pool cannot start or another size or setup is in use."""
    global _POOL, _START_FAILED
    with _POOL_LOCK:
        if _POOL is not None and (_POOL.broken or _POOL.workers != workers or _POOL.setup != setup):
            if not _POOL._busy.acquire(blocking=False):
                return None  # another thread's call is using it
            _POOL.close()
            _POOL._busy.release()
            _POOL = None
        if _POOL is None:
            if _START_FAILED and not wait:
                return None
            try:
                _POOL = WorkerPool(workers, torch.get_num_threads(), setup)
            except OSError:
                _START_FAILED = True
                return None
        current = _POOL
    started = current.wait() if wait else current.ready()
    if current.broken and not all(current._ready):
        _START_FAILED = True
    return current if started else None


def running() -> int:
    """Worker processes the resident pool has up (0: none, or none started yet)."""
    current = _POOL
    return 0 if current is None or current.broken else sum(current._ready)


@atexit.register
def shutdown() -> None:
    """Stop the resident pool, once a call in flight has ended (a later call of pool() starts a new one)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None:
            busy = _POOL._busy.acquire(timeout=10)
            _POOL.close(kill=not busy)
            if busy:
                _POOL._busy.release()
            _POOL = None


def _forget_after_fork() -> None:
    global _POOL, _POOL_LOCK
    _POOL_LOCK = threading.Lock()  # (a lock held by another thread at the fork would never be released)
    if _POOL is not None and _POOL.pid != os.getpid():
        _POOL.forget()
        _POOL = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _serve(down: int, up: int, threads: int) -> None:
    """A worker's loop: the pool's setup first (before the worker says it is ready; an error in it ends
    the worker, which the pool sees as a worker that died starting), then (function, arguments) in,
    (True, result) or (False, traceback text) out; a generator function's items go out first, each as
    ("item", item), and its return value is the result."""
    torch.set_num_threads(threads)
    inbox, outbox = Connection(down, writable=False), Connection(up, readable=False)
    try:
        setup = inbox.recv()
    except (EOFError, OSError):  # the parent closed the pool before the worker started
        return
    if setup is not None:
        setup()
    try:
        outbox.send("ready")
        while True:
            fn, args = inbox.recv()
            try:
                result = fn(*args)
                if inspect.isgenerator(result):
                    result = _send_items(result, outbox)
                reply = True, result
            except _ParentGone:
                return
            except Exception:  # noqa: BLE001 - every failure goes back to the caller
                reply = False, traceback.format_exc()
            outbox.send(reply)
    except (EOFError, OSError):  # the parent closed the pool, or exited
        return


class _ParentGone(Exception):
    """The pipe to the parent broke while a worker sent an item."""


def _send_items(gen, outbox: Connection):
    """Send a generator's items as ("item", item); its return value."""
    while True:
        try:
            item = next(gen)
        except StopIteration as stop:
            return stop.value
        try:
            outbox.send(("item", item))
        except (EOFError, OSError):
            raise _ParentGone from None
