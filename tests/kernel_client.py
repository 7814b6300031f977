"""Shared by the tests that talk to a real kernel through jupyter_client."""

import queue
import time


def iopub_until_idle(client, msg_id: str, timeout: float = 60) -> list[dict]:
    """The iopub messages a request caused, in order, until the kernel reports idle for it."""
    deadline = time.monotonic() + timeout
    out: list[dict] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no idle status within {timeout} s; got {out}")
        try:
            msg = client.get_iopub_msg(timeout=left)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return out
        out.append(msg)
