"""What the tests share: hand-written edge cases (edge_cases.py), CUDA test programs (cuda_programs.py), a
kernel client's helpers (kernel_client.py), functions worker processes import by name (worker_helpers.py), the
worker-pool fixtures (pools.py) and the serial oracle's comparison (differential.py)."""

from pathlib import Path

#: the repository's root folder
ROOT = Path(__file__).resolve().parents[2]
