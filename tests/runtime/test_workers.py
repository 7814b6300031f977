"""The resident worker pool (runtime/workers.py): setup before ready, map and streaming calls, errors that
come back, and a pool that never outlives its parent, survives a fork, is not replaced under its caller and
ends its busy workers at an interrupt."""

import contextlib
import operator
import os
import signal
import subprocess
import sys
import threading

import pytest
import torch

from jupyter_gpuiter.runtime import workers
from tests.support import worker_helpers
from tests.support.pools import Gate, alive, gone

pytestmark = pytest.mark.usefixtures("worker_processes", "spawned")

ENV, BYTES = "GPUITER_TEST_WORKERS", 384 << 20  # a pool user's environment variable and memory a worker


def test_a_pool_runs_its_setup_in_each_worker_before_it_says_it_is_ready(no_pool):
    pool = workers.pool(2, setup=worker_helpers.set_up)
    assert pool.setup is worker_helpers.set_up and all(pool._ready)
    assert pool.map(worker_helpers.was_set_up, [()] * 2) == [True, True]
    plain = workers.pool(2)  # another setup: the idle pool is replaced
    assert plain is not pool and pool.broken and plain.map(worker_helpers.was_set_up, [()] * 2) == [False, False]
    assert workers.pool(2) is plain


def test_a_setup_that_fails_is_a_pool_that_cannot_start(monkeypatch, no_pool):
    assert workers.pool(2, setup=worker_helpers.fail_to_set_up) is None
    assert workers._START_FAILED and workers.running() == 0
    assert workers.pool(2, wait=False, setup=worker_helpers.fail_to_set_up) is None  # not tried again unasked

def test_workers_run_apart_from_the_callers_process_group_and_report_their_errors(no_pool):
    assert workers.running() == 0
    pool = workers.pool(2)
    assert workers.running() == 2  # (what %gpuiter status reports)
    # a kernel interrupt (SIGINT to the kernel's process group) misses them
    assert all(os.getpgid(p.pid) not in (os.getpgrp(), os.getpid()) for p in pool._procs)
    assert pool.map(operator.add, [(1, 2), (3, 4)]) == [3, 7]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        pool.map(operator.truediv, [(1, 0)])
    assert pool.map(operator.mul, [(6, 7)]) == [42] and not pool.broken  # a failing call leaves the pool usable


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
        assert len(pids) == 2 and all(alive(p) for p in pids)
        parent.kill()
        parent.wait()
        assert gone(pids, timeout=workers.START_TIMEOUT)  # a liveness bound, not a timing
    finally:
        parent.kill()
        parent.wait()
        parent.stdin.close()
        parent.stdout.close()
        for pid in pids:  # (not our children: killed by pid only while they are still running)
            if alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_an_interrupt_while_waiting_ends_the_busy_workers_at_once():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("a signal's handler runs in the main thread only")
    pool = workers.pool(2)
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
    again = workers.pool(2)  # a new pool
    assert again is not pool and again.map(operator.add, [(1, 2)]) == [3]


def test_a_pool_in_use_is_not_replaced_under_its_caller():
    pool = workers.pool(2)
    gate = Gate()
    got = []
    call = threading.Thread(target=lambda: got.append(pool.map(worker_helpers.hold, [(gate.address,)] * 2)))
    call.start()
    try:
        assert sorted(gate.arrivals(2)) == sorted(p.pid for p in pool._procs)  # the call is in flight
        assert workers.pool(3) is None  # another size is asked for while the call is in flight: not now
        gate.release("done")
    finally:
        gate.close()
        call.join(workers.START_TIMEOUT)  # (a failure: the fixture's kill ends the call)
    assert got == [["done", "done"]] and not pool.broken
    assert workers.pool(3) is not pool and workers.pool(3).workers == 3


def test_a_forked_child_leaves_the_pool_to_its_parent():
    pool = workers.pool(2)
    child = os.fork()
    if child == 0:  # the child must neither use nor close its parent's workers
        os._exit(0 if workers._POOL is None and pool.broken and not pool._procs else 1)
    assert os.waitpid(child, 0)[1] == 0
    assert pool.map(operator.add, [(1, 2), (3, 4)]) == [3, 7] and not pool.broken


def test_default_workers_follow_the_environment_then_fit_the_cores_and_half_the_memory_left(monkeypatch, no_pool):
    # (none running)
    monkeypatch.setenv(ENV, "3")
    assert workers.default_workers(ENV, BYTES) == 3
    monkeypatch.setenv(ENV, "99")
    assert workers.default_workers(ENV, BYTES) == workers.MAX_WORKERS
    monkeypatch.setenv(ENV, "many")
    with pytest.raises(ValueError, match=ENV):
        workers.default_workers(ENV, BYTES)
    from jupyter_gpuiter.runtime import host

    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 8)
    monkeypatch.setattr(host, "usable_cores", lambda: 4)
    monkeypatch.setattr(host, "memory_headroom", lambda: None)
    assert workers.default_workers(ENV, BYTES) == 4
    monkeypatch.setattr(host, "usable_cores", lambda: 1)  # a container's one-CPU quota: in-process
    assert workers.default_workers(ENV, BYTES) == 1
    monkeypatch.setattr(host, "usable_cores", lambda: 4)
    for budgets, n in ((0, 1), (3, 1), (4, 2), (100, 4)):  # memory left, in workers' budgets
        free = budgets * BYTES
        monkeypatch.setattr(host, "memory_headroom", lambda free=free: free)
        assert workers.default_workers(ENV, BYTES) == n, free
    # a running pool's workers count as memory of its own: its size holds while memory stays as it is
    monkeypatch.setattr(host, "memory_headroom", lambda: 2 * BYTES)
    monkeypatch.setattr(workers, "running", lambda: 2)
    assert workers.default_workers(ENV, BYTES) == 2


def test_an_error_in_a_streamed_part_comes_after_the_other_parts_and_leaves_the_pool_usable():
    pool = workers.pool(2)
    events = []
    with (pytest.raises(RuntimeError, match="failed after 3 items"),
          pool.streaming(worker_helpers.count_then_fail, [(3, True), (5, False)]) as stream):
        events.extend(stream)
    assert sorted(e for e in events if e[0] == "item") == [("item", 0, i) for i in range(3)] + [
        ("item", 1, i) for i in range(5)]
    assert ("done", 1, 5) in events and not pool.broken
    with pool.streaming(worker_helpers.count_then_fail, [(2, False)]) as stream:
        assert list(stream) == [("item", 0, 0), ("item", 0, 1), ("done", 0, 2)]
