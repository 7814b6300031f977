"""tests/ mirrors the package (tests/lang/ for jupyter_gpuiter/lang/, ...); what tests share is in tests/support/."""

import os

import pytest

from tests.support import ROOT

pytest_plugins = ["tests.support.pools", "tests.support.cuda_programs"]  # fixtures: worker pools; g++ and NVRTC

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `-n auto` runs one worker per core: torch's default of one intra-op thread per core then
    # oversubscribes the machine and its OpenMP pool spends its time waiting (the traditional compiler
    # ran 7x slower that way on a loaded 2-core machine). Kernels the tests start inherit the variable.
    import torch

    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

# The traditional compiler would share big CPU batches out to worker processes, started in the
# background on first use: tests choose that path explicitly (tests/compilers/traditional/test_workers.py), so
# that which path a test takes never depends on the tests before it. Kernels the tests start inherit it.
os.environ["GPUITER_COMPILE_WORKERS"] = "1"


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", help="run the long sweeps marked slow")


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - any CUDA failure means no GPU tests
        has_cuda = False
    skip_slow = pytest.mark.skip(reason="slow sweep: use --runslow or -m slow")
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    selected_slow = "slow" in (config.getoption("-m") or "")
    for item in items:
        if "slow" in item.keywords and not (config.getoption("--runslow") or selected_slow):
            item.add_marker(skip_slow)
        if "gpu" in item.keywords and not has_cuda:
            item.add_marker(skip_gpu)


@pytest.fixture
def root():
    return ROOT
