"""The front's tests share a gpuiter kernel's fixtures (tests/support/kernel_client.py)."""

from tests.support.kernel_client import execute, gpuiter_jupyter_path, gpuiter_kernel  # noqa: F401 - fixtures
