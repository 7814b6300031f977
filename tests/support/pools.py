"""The worker-pool tests' fixtures and tools (runtime/workers.py, and the traditional compiler's use of it).

The tests never rely on timing: a worker is made busy for as long as a test wants by
worker_helpers.hold (a Gate the test opens), an interrupt is sent once the workers are known to be
busy, a worker's call is known to be in flight because its results are more than its pipe holds,
and every process a test starts is killed by its pid when the test ends, whatever happened (but
for a healthy idle pool, handed on to the next test and killed when the module's tests end). A test
module takes the fixtures with `pytestmark = pytest.mark.usefixtures("worker_processes", "spawned")`
(the root conftest registers this module as a plugin)."""

import contextlib
import os
import select
import socket
import subprocess
import time
import uuid

import pytest

from jupyter_gpuiter.runtime import workers
from tests.support import ROOT

SPAWNED: list[subprocess.Popen] = []  # every worker the module's tests spawned in this process


ALTERED: list[workers.WorkerPool] = []  # pools a test changed (their pipes): never handed on


def kill(procs) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def reusable(pool) -> bool:
    """Whether a test may hand `pool` on to the next: two started workers, all running, no call in
    flight, nothing about it changed (a worker's state is only the compiler's tables)."""
    return (pool is not None and not pool.broken and pool.pid == os.getpid() and pool.workers == 2
            and all(pool._ready) and not pool._busy.locked() and all(p.poll() is None for p in pool._procs)
            and not any(pool is altered for altered in ALTERED))


def end_pool() -> None:
    """The resident pool's workers killed by their pids, then the pool shut down."""
    if workers._POOL is not None:
        kill(workers._POOL._procs)
    workers.shutdown()


@pytest.fixture(scope="module")
def worker_processes():
    """Every worker the module's tests spawned is killed by its pid once the module's tests are done."""
    try:
        yield
    finally:
        try:
            kill(SPAWNED)
            SPAWNED.clear()
        finally:
            end_pool()


@pytest.fixture
def spawned(monkeypatch):
    """The workers this test spawns: each killed by its pid at the test's end, whatever happened (a test
    that failed midway may have left a busy one), except the two of a healthy idle pool, which the next
    test may use (starting two workers costs two interpreters importing torch). A pool in any other
    state is killed before the test and after it. (Idle workers that exit by themselves:
    test_workers_never_outlive_their_parent.)"""
    # (the workers import tests.support.worker_helpers by name)
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if not reusable(workers._POOL):
        end_pool()
    monkeypatch.setattr(workers, "_START_FAILED", False)
    procs: list[subprocess.Popen] = []
    real_spawn = workers.WorkerPool._spawn

    def spawn(self, threads):
        real_spawn(self, threads)
        procs.append(self._procs[-1])
        SPAWNED.append(self._procs[-1])

    monkeypatch.setattr(workers.WorkerPool, "_spawn", spawn)
    try:
        yield procs
    finally:
        kept = workers._POOL._procs if reusable(workers._POOL) else []
        try:
            kill([p for p in procs if p not in kept])
        finally:
            if not kept:
                end_pool()
            SPAWNED[:] = [p for p in SPAWNED if p.poll() is None]


@pytest.fixture
def no_pool():
    """A test that starts from no pool at all."""
    end_pool()


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


def gone(pids, timeout: float) -> bool:
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
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        for fd in fds:
            os.close(fd)
    return not any(alive(p) for p in pids)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False
