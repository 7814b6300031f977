"""The `gpuiter` kernelspec (kernel.json) and where its static copy lives.

The spec names the interpreter as plain ``"python"``, never a build-time path: Jupyter
(`jupyter_client.KernelManager.format_kernel_cmd`) replaces a bare ``python`` / ``python3`` /
``python3.X`` with the ``sys.executable`` of the Jupyter server that launches the kernel, so the
wheel's copy (``share/jupyter/kernels/gpuiter/kernel.json`` inside the environment, see
pyproject.toml) starts the kernel with the interpreter of the environment it was installed into.
`gpuiter install-kernel` writes ``sys.executable`` instead for --user and system-wide installs,
which are shared by every environment (see `install.py`).

`resources/kernel.json` is the static copy of `kernel_json()`; tests/front/test_jupyter_kernel.py checks that
the two agree.
"""

from __future__ import annotations

from pathlib import Path

KERNEL_NAME = "gpuiter"
DISPLAY_NAME = "gpuiter (Python 3)"
RESOURCES = Path(__file__).resolve().parent / "resources"


def kernel_json(executable: str = "python") -> dict:
    """The kernel.json dict; `executable` is argv[0] ("python" = the launching server's interpreter)."""
    return {
        "argv": [executable, "-m", "jupyter_gpuiter.front.jupyter_kernel", "-f", "{connection_file}"],
        "display_name": DISPLAY_NAME,
        "language": "python",
        # Same as ipykernel's own spec: the kernel is an IPythonKernel, so the JupyterLab debugger
        # works when debugpy is installed (kernel_info's supported_features says whether it is).
        "metadata": {"debugger": True},
    }
