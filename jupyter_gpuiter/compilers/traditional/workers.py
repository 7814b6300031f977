"""Resident worker processes that share a big batch out over the CPU's cores (a GPU runs in-process).

torch's intra-op threads split each operation, and the passes make many small ones (~10,000 a chunk
over arrays of 10^4-10^5 cells): on the 2-core CPU two threads run them ~1.45x faster than one, while
two processes of one thread, each compiling its own part of the batch, run about 2x faster
(docs/performance.md). Python threads cannot do it: the passes hold the GIL between operations.

Each worker is a fresh interpreter (`_serve`: no inherited threads, CUDA state or kernel sockets) in
a session of its own, so that a Jupyter interrupt (SIGINT to the kernel's process group) does not
kill it and ipykernel's shutdown, which ends its group's children one signal at a time, does not
wait on it. It talks to the parent over two pipes with multiprocessing's Connection
(length-prefixed pickles) and exits when the parent's end closes, so it never outlives the parent.
concurrent.futures' ProcessPoolExecutor was the first choice, but its queues' semaphores start
multiprocessing's resource tracker, a child in the kernel's group that ignores SIGTERM: ipykernel
then took 29 s to shut down.

The pool starts once and is kept, like the kernel's other resident state. `compile_to_batches` asks
for it with `wait=False` and compiles in-process while it starts. A pool that breaks (a worker
killed, an interrupt while waiting on one) is closed, that call runs in-process and a later one
starts a new pool. Results cross as numpy arrays: twice as fast here as torch's shared-memory tensor
handles, which cost a round trip per tensor.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait

import torch

try:
    import fcntl
except ImportError:  # not POSIX: no worker processes (default_workers), so no pipes to size
    fcntl = None

#: worker processes for big CPU batches: 0 or 1 compiles in-process (default: one per intra-op thread
#: torch may use, at most MAX_WORKERS)
ENV = "GPUITER_COMPILE_WORKERS"
MAX_WORKERS = 8
_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def default_workers() -> int:
    """Processes a big CPU batch is shared out to: $GPUITER_COMPILE_WORKERS, else as many as torch's
    intra-op threads and the usable cores allow (1: in-process)."""
    if os.name != "posix":  # the workers' pipes are passed as inherited file descriptors
        return 1
    env = os.environ.get(ENV, "").strip()
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise ValueError(f"{ENV}={env!r}: expected a whole number of worker processes (1: none)") from None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(torch.get_num_threads(), cores, MAX_WORKERS))


class WorkerPool:
    """`workers` processes, each with threads // workers intra-op threads (at least one)."""

    def __init__(self, workers: int, threads: int):
        self.workers, self.broken = workers, False
        self._procs: list[subprocess.Popen] = []
        self._inbox: list[Connection] = []  # from each worker
        self._outbox: list[Connection] = []  # to each worker
        self._ready = [False] * workers
        self._busy = threading.Lock()  # one call at a time: replies are read in order
        self._listening = threading.Lock()  # one thread reads the workers' "ready" at a time
        for _ in range(workers):
            down_r, down_w = os.pipe()
            up_r, up_w = os.pipe()
            serve = f"from {__name__} import _serve; _serve({down_r}, {up_w}, {max(1, threads // workers)})"
            proc = subprocess.Popen([sys.executable, "-c", serve], pass_fds=(down_r, up_w), start_new_session=True,
                                    cwd=_PACKAGE_PARENT)  # (so that the package imported is this one)
            os.close(down_r)
            os.close(up_w)
            for fd in (down_w, up_r):  # a chunk's results are megabytes: 1 MiB pipes (Linux) take fewer turns
                with contextlib.suppress(AttributeError, OSError):  # (AttributeError: not Linux)
                    fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
            self._procs.append(proc)
            self._inbox.append(Connection(up_r, writable=False))
            self._outbox.append(Connection(down_w, readable=False))

    def _hear_ready(self, timeout: float | None) -> None:
        waiting = [c for c, r in zip(self._inbox, self._ready) if not r]
        for conn in wait(waiting, timeout) if waiting else []:
            conn.recv()  # "ready", or EOFError: the worker died starting
            self._ready[self._inbox.index(conn)] = True

    def ready(self) -> bool:
        """Whether every worker has started (imported the compiler); never blocks (False while another
        thread listens for the workers)."""
        if not self._listening.acquire(blocking=False):
            return False
        try:
            if not self.broken:
                self._hear_ready(0)
        except (EOFError, OSError):
            self.close()
        finally:
            self._listening.release()
        return not self.broken and all(self._ready)

    def wait(self) -> bool:
        """Block until every worker has started; False if the pool broke on the way."""
        with self._listening:
            while not self.broken and not all(self._ready):
                try:
                    self._hear_ready(None)
                except (EOFError, OSError):
                    self.close()
        return not self.broken

    def map(self, fn: Callable, parts: Sequence[tuple]) -> list | None:
        """[fn(*part) for part in parts] with a worker each (at most `workers` parts; fn a module-level
        function). None when the pool is busy with another thread's call, or broke (which closes it):
        the caller then does the work itself. An error in fn is raised here."""
        if len(parts) > self.workers:
            raise ValueError(f"{len(parts)} parts for {self.workers} workers")
        if not self._busy.acquire(blocking=False):
            return None
        try:
            return self._map(fn, parts)
        finally:
            self._busy.release()

    def _map(self, fn: Callable, parts: Sequence[tuple]) -> list | None:
        if not self.wait():
            return None
        try:
            for out, part in zip(self._outbox, parts):
                out.send((fn, part))
            replies: dict = {}
            while len(replies) < len(parts):  # as they come: a worker done first is not left blocked writing
                for conn in wait([c for c in self._inbox[:len(parts)] if c not in replies]):
                    replies[conn] = conn.recv()
            replies = [replies[inbox] for inbox in self._inbox[:len(parts)]]
        except (EOFError, OSError):
            self.close(kill=True)
            return None
        except BaseException:  # an interrupt: the replies on their way would answer the next call, so the
            self.close(kill=True)  # workers go at once (they hold nothing but their part)
            raise
        failed = [text for ok, text in replies if not ok]
        if failed:
            raise RuntimeError(f"a compile worker failed:\n{failed[0]}")
        return [value for _, value in replies]

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


_POOL: WorkerPool | None = None


def pool(workers: int, wait: bool = True) -> WorkerPool | None:
    """The resident pool of `workers` processes, started if need be (a pool of another size, or a
    broken one, is replaced). wait=False: None until it has started, without blocking."""
    global _POOL
    if _POOL is not None and (_POOL.broken or _POOL.workers != workers):
        _POOL.close()
        _POOL = None
    if _POOL is None:
        _POOL = WorkerPool(workers, torch.get_num_threads())
    if wait:
        return _POOL if _POOL.wait() else None
    return _POOL if _POOL.ready() else None


@atexit.register
def shutdown() -> None:
    """Stop the resident pool (a later big batch starts a new one)."""
    global _POOL
    if _POOL is not None:
        _POOL.close()
        _POOL = None


def _serve(down: int, up: int, threads: int) -> None:
    """A worker's loop: (function, arguments) in, (True, result) or (False, traceback text) out."""
    torch.set_num_threads(threads)
    from . import compile_to_batches  # noqa: F401 - import the compiler before saying it is ready

    inbox, outbox = Connection(down, writable=False), Connection(up, readable=False)
    outbox.send("ready")
    while True:
        try:
            fn, args = inbox.recv()
        except EOFError:  # the parent closed the pool, or exited
            return
        try:
            reply = True, fn(*args)
        except Exception:  # noqa: BLE001 - every failure goes back to the caller
            reply = False, traceback.format_exc()
        outbox.send(reply)
