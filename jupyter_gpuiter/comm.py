"""The `jupyter_gpuiter` comm: Session status and each verdict, as JSON, for the JupyterLab extension.

Messages are documented in docs/protocol.md. Sending never fails a cell: without a kernel (plain
IPython, tests) or without a frontend listening, messages are dropped.
"""

from __future__ import annotations

import math

TARGET = "jupyter_gpuiter"
PROTOCOL_VERSION = 1
_comm = None


def _finite(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def verdict_message(name: str, mode: str, verdict, seconds: dict[str, float]) -> dict:
    cx = verdict.counterexample
    return {
        "type": "verdict", "version": PROTOCOL_VERSION, "name": name, "mode": mode, "passed": verdict.passed,
        "exhaustive": verdict.exhaustive, "tests": verdict.tests_run, "failures": verdict.failures,
        "epsilon": _finite(verdict.epsilon), "delta": verdict.delta, "sentence": verdict.sentence,
        "counterexample": None if cx is None else {"inputs": {k: _finite(v) for k, v in cx.inputs.items()},
                                                   "got": _finite(cx.got), "expected": _finite(cx.expected)},
        "error": None if verdict.error is None else {"kind": verdict.error.kind, "line": verdict.error.line,
                                                     "col": verdict.error.col, "message": verdict.error.message},
        "seconds": {k: float(v) for k, v in seconds.items()},
    }


def status_message(session) -> dict:
    last = next((h for h in reversed(session.history) if h.verdict is not None), None)
    return {"type": "status", "version": PROTOCOL_VERSION, "device": str(session.device),
            "cached_kernels": session.cached_kernels, "iterations": len(session.history),
            "last": None if last is None else {"name": last.name, "passed": last.verdict.passed,
                                               "sentence": last.verdict.sentence}}


def send(message: dict) -> bool:
    """Send one message on the comm (opened on first use); False when no kernel can carry it."""
    global _comm
    try:
        from ipykernel.kernelbase import Kernel

        if not Kernel.initialized():
            return False
        if _comm is None:
            from comm import create_comm

            _comm = create_comm(target_name=TARGET, data={"type": "hello", "version": PROTOCOL_VERSION})
        _comm.send(message)
        return True
    except Exception:  # noqa: BLE001 - a frontend that cannot take messages must not break the cell
        return False
