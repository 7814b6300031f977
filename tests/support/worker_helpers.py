"""Module-level functions for the worker tests: a worker process imports them by name (tests.support.pools puts
the repository's root on the workers' PYTHONPATH)."""

import os
import socket


def count_then_fail(n: int, fail: bool):
    """Yields 0 .. n-1, then raises if `fail`, else returns n."""
    yield from range(n)
    if fail:
        raise ValueError(f"failed after {n} items")
    return n


def hold(address: str) -> str:
    """Report to the test's gate (a Unix socket at `address`: tests/support/pools.py's Gate)
    with this process's pid, then wait there until the test releases it: returns what the test sent,
    "" if it closed the gate instead. A worker running this is busy for exactly as long as the test
    wants, without a sleep."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(address)
        sock.sendall(f"{os.getpid()}\n".encode())
        return sock.recv(64).decode()


_SET_UP = False


def set_up() -> None:
    """A pool's setup: marks this worker as set up (was_set_up)."""
    global _SET_UP
    _SET_UP = True


def was_set_up() -> bool:
    return _SET_UP


def fail_to_set_up() -> None:
    """A pool's setup that fails: the worker ends before it says it is ready."""
    raise RuntimeError("this setup fails")
