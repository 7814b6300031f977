#!/usr/bin/env bash
# One prepared visit to a CUDA machine: GPU-marked tests and the GPU benchmarks, figures in one folder.
# Usage: scripts/gpu-check.sh [OUT_DIR]   (under 8 minutes on one modern GPU)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-gpu-results}}"
mkdir -p "$OUT"
PY="${PYTHON:-.venv/bin/python}"
if [ ! -x "$PY" ]; then
  python3 -m venv .venv && .venv/bin/pip -q install --upgrade pip && .venv/bin/pip -q install torch && \
    .venv/bin/pip -q install -e ".[test]" && PY=.venv/bin/python
fi
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
} > "$OUT/machine.txt" 2>&1
# GPU-marked tests (differential traditional-vs-serial on CUDA, ...)
timeout 240 "$PY" -m pytest -q -m gpu -p no:cacheprovider tests > "$OUT/gpu-tests.txt" 2>&1
echo "gpu tests exit $?" >> "$OUT/gpu-tests.txt"
# benchmarks: compile throughput at the design's batch size and at a large one
timeout 120 "$PY" -m jupyter_gpuiter.cli bench compile --device cuda --n 4096 --out "$OUT/b4096" > "$OUT/bench-compile-4096.txt" 2>&1
timeout 150 "$PY" -m jupyter_gpuiter.cli bench compile --device cuda --n 65536 --repeats 2 --out "$OUT/b65536" > "$OUT/bench-compile-65536.txt" 2>&1
timeout 90 "$PY" -m jupyter_gpuiter.cli bench vm --device cuda --out "$OUT/vm" > "$OUT/bench-vm.txt" 2>&1
timeout 90 "$PY" -m jupyter_gpuiter.cli bench verify --device cuda --out "$OUT/verify" > "$OUT/bench-verify.txt" 2>&1
tail -n +1 "$OUT"/*.txt
