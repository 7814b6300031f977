"""Shared by the tests that talk to a real kernel through jupyter_client (tests/front/conftest.py makes its
fixtures the front tests').

Fixtures for cell tests (module-scoped: one kernel per test module / xdist worker):

    gpuiter_kernel  a started, ready `BlockingKernelClient` on a `gpuiter` kernel installed from this
                    checkout into a temporary Jupyter path (`.manager` is its `KernelManager`)
    execute         `execute(code, timeout=60) -> (status, outputs)` on that kernel: `status` is the
                    execute_reply status ("ok" / "error" / "aborted"), `outputs` the cell's iopub
                    outputs in order as nbformat-style dicts: {"output_type": "stream", "name", "text"},
                    {"output_type": "execute_result" | "display_data" | "update_display_data", "data",
                    "metadata"}, {"output_type": "error", "ename", "evalue", "traceback"},
                    {"output_type": "clear_output", "wait"}

    def test_something(execute):
        status, outputs = execute("1 + 1")
        assert status == "ok" and outputs[0]["data"]["text/plain"] == "2"

`run_cell(client, code)` is the same helper for a client of your own; `stdout(outputs)` joins the
stdout stream text.
"""

from __future__ import annotations

import functools
import queue
import time
from pathlib import Path

import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import start_new_kernel

from jupyter_gpuiter.front.jupyter_kernel import install as install_mod
from jupyter_gpuiter.front.jupyter_kernel.spec import KERNEL_NAME


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


OUTPUT_TYPES = ("stream", "execute_result", "display_data", "update_display_data", "error", "clear_output")


START_TIMEOUT = 60


def run_cell(client, code: str, timeout: float = 60) -> tuple[str, list[dict]]:
    """Execute `code`; collect its iopub outputs until the kernel is idle again, then its reply."""
    msg_id = client.execute(code)
    deadline = time.monotonic() + timeout
    outputs: list[dict] = []
    for msg in iopub_until_idle(client, msg_id, timeout):
        if msg["msg_type"] in OUTPUT_TYPES:
            out = {"output_type": msg["msg_type"], **msg["content"]}
            out.pop("execution_count", None)
            outputs.append(out)
    while True:
        left = max(deadline - time.monotonic(), 1.0)
        reply = client.get_shell_msg(timeout=left)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]["status"], outputs


def stdout(outputs: list[dict]) -> str:
    return "".join(o["text"] for o in outputs if o["output_type"] == "stream" and o["name"] == "stdout")


@pytest.fixture(scope="module")
def gpuiter_jupyter_path(tmp_path_factory):
    """A temporary prefix with the gpuiter kernelspec installed by `install()`, first on JUPYTER_PATH.

    Also points IPython's and Jupyter's per-user folders at temporary ones so that the kernel sees no
    user profile and writes nothing into the home folder.
    """
    base = tmp_path_factory.mktemp("gpuiter-kernel")
    spec_dir = install_mod.install(prefix=str(base / "prefix"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", str(base / "prefix" / "share" / "jupyter"))
        mp.setenv("JUPYTER_RUNTIME_DIR", str(base / "runtime"))
        mp.setenv("IPYTHONDIR", str(base / "ipython"))
        yield Path(spec_dir), base


def start_kernel(spec_dir: Path, cwd: Path, **kwargs):
    found = KernelSpecManager().get_kernel_spec(KERNEL_NAME).resource_dir
    assert Path(found).resolve() == spec_dir.resolve(), f"JUPYTER_PATH finds {found}, not the spec under test"
    t0 = time.perf_counter()
    km, kc = start_new_kernel(kernel_name=KERNEL_NAME, startup_timeout=START_TIMEOUT, cwd=str(cwd), **kwargs)
    km.gpuiter_start_seconds = time.perf_counter() - t0  # start-up until kernel_info answered
    kc.manager = km
    return km, kc


@pytest.fixture(scope="module")
def gpuiter_kernel(gpuiter_jupyter_path):
    """A running gpuiter kernel (module-scoped); yields its ready `BlockingKernelClient`."""
    spec_dir, base = gpuiter_jupyter_path
    km, kc = start_kernel(spec_dir, base)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)


@pytest.fixture(scope="module")
def execute(gpuiter_kernel):
    """`execute(code, timeout=60) -> (status, outputs)` on the module's gpuiter kernel."""
    return functools.partial(run_cell, gpuiter_kernel)


def kernel_info(client, timeout: float = 30) -> dict:
    return client.kernel_info(reply=True, timeout=timeout)["content"]
