import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # shared test data (edge_cases)

ROOT = Path(__file__).resolve().parents[1]


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
