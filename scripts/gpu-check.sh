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
# Worst case of the timeouts below: 7.9 minutes.
# GPU-marked tests (differential traditional-vs-serial on CUDA, ...)
timeout 140 "$PY" -m pytest -q -m gpu -p no:cacheprovider tests > "$OUT/gpu-tests.txt" 2>&1
echo "gpu tests exit $?" >> "$OUT/gpu-tests.txt"
bench() {  # bench NAME TIMEOUT SUITE ARGS...: one suite, its JSON under $OUT/NAME, its output in $OUT/bench-NAME.txt
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$PY" -m jupyter_gpuiter.cli bench "$@" --device cuda --out "$OUT/$name" > "$OUT/bench-$name.txt" 2>&1
}
bench compile-4096 45 compile --n 4096
bench compile-65536 75 compile --n 65536 --repeats 2
bench vm 40 vm
bench verify 40 verify
bench neural 60 neural
bench peers 60 peers --iterations 5  # CuPy and nvcc join here; torch.compile costs ~1 s an edit
# the per-op costs behind the passes, at a GPU-sized chunk (compare with the CPU table in docs/performance.md)
timeout 15 "$PY" scripts/op-costs.py --device cuda --rows 8000 --cols 256 > "$OUT/op-costs.txt" 2>&1
tail -n +1 "$OUT"/*.txt
