"""The `jupyter_gpuiter` comm: Session status and each verdict, as JSON, for the JupyterLab extension.

Messages are documented in docs/protocol.md. They come from the Session's events: `attach()` (called when
the IPython extension loads, and when the gpuiter kernel starts) subscribes to the current Session, and
each iteration becomes its message: a verify its `verdict` (then a `status`), a compile that failed (not
one a verify made) a `verdict` carrying the error, a verify_batch a `status`. So a `%%gpucompile` cell and
`gi.verify(...)` typed in a cell reach the panel alike, once each.

Sending never fails a cell: without a kernel (plain IPython, tests) or without a frontend listening,
messages are dropped (and not even built). The verdicts sent in this kernel are kept (the last MAX_LOG),
so that a frontend that attaches later (a reloaded page, a second tab) gets the history by sending `sync`.
"""

from __future__ import annotations

import logging
import math
import time
from collections import deque

from ..session import current_session, function_name, subscribe_current

TARGET = "jupyter_gpuiter"
PROTOCOL_VERSION = 1
MAX_LOG = 1000
_comm = None
_log: deque[dict] = deque(maxlen=MAX_LOG)  # verdict messages sent in this kernel, oldest first


def _finite(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def _error(error) -> dict | None:
    return None if error is None else {"kind": error.kind, "line": error.line, "col": error.col,
                                       "message": error.message}


def _counterexample(cx) -> dict:
    """A counterexample's message: inputs as numbers, or for a row kernel the shown part of each row
    (`row` says where it lies: docs/protocol.md)."""
    if not cx.is_row:
        return {"inputs": {k: _finite(v) for k, v in cx.inputs.items()}, "got": _finite(cx.got),
                "expected": _finite(cx.expected)}
    lo, hi = cx.window()
    return {"inputs": {k: [_finite(float(x)) for x in v[lo:hi]] for k, v in cx.inputs.items()},
            "got": _finite(cx.got), "expected": _finite(cx.expected),
            "row": {"length": cx.row_length, "position": cx.position, "start": lo}}


def verdict_message(name: str, mode: str, verdict, seconds: dict[str, float]) -> dict:
    cx = verdict.counterexample
    return {
        "type": "verdict", "version": PROTOCOL_VERSION, "name": name, "mode": mode, "passed": verdict.passed,
        "exhaustive": verdict.exhaustive, "tests": verdict.tests_run, "failures": verdict.failures,
        "epsilon": _finite(verdict.epsilon), "delta": verdict.delta, "sentence": verdict.sentence,
        "counterexample": None if cx is None else _counterexample(cx),
        "error": _error(verdict.error),
        "seconds": {k: float(v) for k, v in seconds.items()},
        "at": time.time(),
    }


def error_message(name: str, mode: str, error, seconds: dict[str, float]) -> dict:
    """A `verdict` for a cell that did not compile: not passed, no tests, `error` set."""
    return {
        "type": "verdict", "version": PROTOCOL_VERSION, "name": name, "mode": mode, "passed": False,
        "exhaustive": False, "tests": 0, "failures": 0, "epsilon": None, "delta": None,
        "sentence": error.format(caret=False),
        "counterexample": None, "error": _error(error), "seconds": {k: float(v) for k, v in seconds.items()},
        "at": time.time(),
    }


def status_message(session) -> dict:
    status = session.status()
    return {"type": "status", "version": PROTOCOL_VERSION, "device": status["device"],
            "cached_kernels": status["cached_kernels"], "iterations": status["iterations"], "last": status["last"]}


def history_message() -> dict:
    return {"type": "history", "version": PROTOCOL_VERSION, "verdicts": list(_log)}


def _on_msg(msg) -> None:
    """A frontend that attached to the open comm asks for what it missed (`sync`). Anything else, a
    message that is not a JSON object included, is ignored (logged at debug level): a handler that
    raised would print a traceback into the notebook."""
    content = msg.get("content") if isinstance(msg, dict) else None
    data = content.get("data") if isinstance(content, dict) else None
    if not isinstance(data, dict) or data.get("type") != "sync":
        _log_ignored(msg)
        return
    if _comm is None:
        return
    try:
        _comm.send(history_message())
        _comm.send(status_message(current_session()))
    except Exception:  # a reply that cannot be sent must not print a traceback
        logging.getLogger(__name__).debug("jupyter_gpuiter comm: could not answer sync", exc_info=True)


def _log_ignored(msg) -> None:
    logging.getLogger(__name__).debug("jupyter_gpuiter comm: ignored a message that is not a sync: %.200r", msg)


def _closed(comm) -> None:
    global _comm
    if _comm is comm:
        _comm = None  # closed by a frontend (or none had the target): the next message opens a new one


def _kernel() -> bool:
    """Whether a kernel runs that can carry messages."""
    try:
        from ipykernel.kernelbase import Kernel

        return Kernel.initialized()
    except Exception:  # noqa: BLE001 - no ipykernel, or a broken one: nothing to send on
        return False


def send(message: dict) -> bool:
    """Send one message on the comm (opened on first use); False when no kernel can carry it."""
    global _comm
    try:
        if not _kernel():
            return False
        if message.get("type") == "verdict":
            _log.append(message)
        if _comm is None:
            from comm import create_comm

            _comm = create_comm(target_name=TARGET, data={"type": "hello", "version": PROTOCOL_VERSION})
            _comm.on_msg(_on_msg)
            _comm.on_close(lambda msg, c=_comm: _closed(c))
        _comm.send(message)
        return True
    except Exception:  # noqa: BLE001 - a frontend that cannot take messages must not break the cell
        return False


def send_status() -> bool:
    """The current Session's `status` (`%gpuiter status`)."""
    return send(status_message(current_session())) if _kernel() else False


def messages(iteration) -> list[dict]:
    """The messages one of the Session's iterations becomes (docs/protocol.md): none for a compile that
    succeeded or that a verify made (the verify reports it)."""
    if iteration.kind == "compile":
        if iteration.error is None or iteration.inner:
            return []
        return [error_message(iteration.name, iteration.mode, iteration.error, iteration.seconds)]
    if iteration.kind == "verify":
        if iteration.error is not None:
            first = error_message(iteration.name, iteration.mode, iteration.error, iteration.seconds)
        else:
            first = verdict_message(iteration.name, iteration.mode, iteration.verdict, iteration.seconds)
        return [first, status_message(current_session())]
    if iteration.kind == "verify_batch":
        return [status_message(current_session())]
    return []


def on_iteration(iteration) -> None:
    """The current Session's subscriber: each iteration's messages, when a kernel can carry them."""
    if not _kernel():
        return
    for message in messages(iteration):
        send(message)


_unsubscribe = None


def attach() -> None:
    """Forward the current Session's iterations to the panel (idempotent)."""
    global _unsubscribe
    if _unsubscribe is None:
        _unsubscribe = subscribe_current(on_iteration)


def detach() -> None:
    """Stop forwarding (what `attach` started)."""
    global _unsubscribe
    if _unsubscribe is not None:
        _unsubscribe()
        _unsubscribe = None


__all__ = ["MAX_LOG", "PROTOCOL_VERSION", "TARGET", "attach", "detach", "error_message", "function_name",
           "history_message", "messages", "on_iteration", "send", "send_status", "status_message",
           "verdict_message"]
