#!/usr/bin/env bash
# One prepared visit to a CUDA machine: GPU-marked tests and the GPU benchmarks, figures in one folder.
# Usage: scripts/gpu-check.sh [OUT_DIR]   (under 8 minutes on one modern GPU)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-${OUT:-gpu-results}}"
mkdir -p "$OUT"
# The interpreter: $PYTHON, else this checkout's venv, else python3 (a lent device machine's holds a CUDA
# torch, numpy, hypothesis and pytest, and can fetch nothing: nothing is installed, the tree is imported
# from here, and only the tests that need no Jupyter package run).
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1  # output survives a timeout
if ! "$PY" -c "import torch, numpy" 2>/dev/null; then
  echo "gpu-check: $PY has no torch and numpy" >&2
  exit 1
fi
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.is_available())"
} > "$OUT/machine.txt" 2>&1
# Worst case of the timeouts below: 7.9 minutes.
# GPU-marked tests (differential traditional-vs-serial on CUDA, ...)
timeout 130 "$PY" -m pytest -q -m gpu -p no:cacheprovider $(grep -rl "mark.gpu" tests --include='test_*.py') > "$OUT/gpu-tests.txt" 2>&1
echo "gpu tests exit $?" >> "$OUT/gpu-tests.txt"
bench() {  # bench NAME TIMEOUT SUITE ARGS...: one suite, its JSON under $OUT/NAME, its output in $OUT/bench-NAME.txt
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$PY" -m jupyter_gpuiter.tools.cli bench "$@" --device cuda --out "$OUT/$name" > "$OUT/bench-$name.txt" 2>&1
}
tool() {  # tool NAME TIMEOUT TOOL ARGS...: one of the compiler's measurement tools, its output in $OUT/NAME.txt
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$PY" -u -m jupyter_gpuiter.tools.cli bench "$@" > "$OUT/$name.txt" 2>&1
}
bench compile-4096 45 compile --n 4096
# programs/s on a GPU-sized batch by chunk size (no serial run: 65,536 programs cost it ~40 s), per pass
tool chunk-sweep 75 chunks --device cuda --n 65536 --repeats 2
# where a chunk's time goes on the device, and whether the device waits for the host's launches
tool profile-compile 20 profile --device cuda --n 8192
bench vm 40 vm
bench verify 40 verify
bench neural 50 neural
bench peers 60 peers --iterations 5  # CuPy and nvcc join here; torch.compile costs ~1 s an edit
# the per-op costs behind the passes, at a GPU-sized chunk (compare with the CPU table in docs/performance.md)
tool op-costs 15 ops --device cuda --rows 8000 --cols 256
tail -n +1 "$OUT"/*.txt
