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
# Worst case of the timeouts below: 7.8 minutes (each far beyond what its step is expected to take).
# numba builds the CPU evaluator (the reference the GPU kernels are checked against) into its disk cache once, so
# that no later step pays for it inside its own limit
timeout 45 "$PY" -c "from jupyter_gpuiter.runtime import fused; fused.warm_up()" > "$OUT/warm-up.txt" 2>&1
echo "warm-up exit $?" >> "$OUT/warm-up.txt"
# GPU-marked tests (differential traditional-vs-serial on CUDA, ...); the row kernels' in their own file, below
timeout 50 "$PY" -m pytest -q -m gpu -p no:cacheprovider $(grep -rl "mark.gpu" tests --include='test_*.py' | grep -v test_cuda_rows) > "$OUT/gpu-tests.txt" 2>&1
echo "gpu tests exit $?" >> "$OUT/gpu-tests.txt"
# Row kernels (reductions): native CUDA C (a team of lanes or a block per row) and the fused verification kernel on rows, against the
# NumPy reference and the CPU evaluator, rows of 1, 2, 31, 32, 33, 1000 and 100,000
timeout 40 "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/runtime/test_cuda_rows.py tests/runtime/test_cuda_rows_fused.py > "$OUT/gpu-row-tests.txt" 2>&1
echo "gpu row tests exit $?" >> "$OUT/gpu-row-tests.txt"
# Row kernels' figure: native kernels against torch's (GB/s over the shapes of a batch), the fused kernel's
# verification of row candidates (rows/s, against the CPU evaluator); rows.json, rows.txt, rows.png
timeout 25 "$PY" - "$OUT" > "$OUT/rows.txt" 2>&1 <<'EOF'
import json, sys, time
import cupy, numpy as np, torch
from jupyter_gpuiter.compilers.serial import compile_source
from jupyter_gpuiter.runtime import cuda, fused, fused_cuda
from tests.support.row_kernels import REAL
out = sys.argv[1]
F = torch.nn.functional
TORCH = {"softmax": lambda x, g, b: torch.softmax(x, -1), "logsumexp": lambda x, g, b: torch.logsumexp(x, -1),
         "layernorm": lambda x, g, b: F.layer_norm(x, x.shape[-1:], g, b, 1e-5),
         "variance": lambda x, g, b: x.var(-1, unbiased=False)}
SHAPES = [(1_000_000, 8), (65_536, 128), (2_048, 4_096), (16, 1_000_000)]
progs = {name: compile_source(REAL[name][0]) for name in TORCH}
cuda.compile_kernels(list(progs.values()), "float32")
def timed(fn, reps=10):
    fn(); torch.cuda.synchronize(); cupy.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        a.record(); fn(); b.record(); b.synchronize()
        times.append(cupy.cuda.get_elapsed_time(a, b) / 1e3)
    return float(np.median(times))
results = {"native": [], "verify": []}
print("native: cuda.launch (its output allocated and poisoned, then the kernel); torch: its own op; GB/s: inputs read "
      "once and the output written, over the time; max err: against torch in float64, over the largest value")
print(f"{'kernel':10} {'rows x n':>16} {'native ms':>10} {'GB/s':>7} {'torch ms':>9} {'GB/s':>7} {'max err':>9}")
for name, p in progs.items():
    for rows, n in SHAPES:
        try:
            x = cupy.random.default_rng(0).standard_normal((rows, n), dtype=cupy.float32)
            g, b = cupy.ones(n, cupy.float32), cupy.zeros(n, cupy.float32)
            args = [x, g, b][: p.n_params]
            t_native = timed(lambda: cuda.launch(p, args, "float32"))
            xt, gt, bt = (torch.from_dlpack(a) for a in (x, g, b))
            t_torch = timed(lambda: TORCH[name](xt, gt, bt))
            mine = torch.from_dlpack(cuda.launch(p, args, "float32")).double()
            theirs = TORCH[name](xt.double(), gt.double(), bt.double())
            err = float((mine - theirs).abs().max() / theirs.abs().max())  # against torch in float64
            nbytes = 4 * (rows * n + (rows if p.returns_per_row() else rows * n))
            row = {"kernel": name, "rows": rows, "n": n, "native_s": t_native, "torch_s": t_torch,
                   "native_GBps": nbytes / t_native / 1e9, "torch_GBps": nbytes / t_torch / 1e9, "max_err": err}
            results["native"].append(row)
            print(f"{name:10} {f'{rows}x{n}':>16} {t_native*1e3:10.3f} {row['native_GBps']:7.0f} {t_torch*1e3:9.3f} "
                  f"{row['torch_GBps']:7.0f} {err:9.1e}", flush=True)
        except Exception as e:  # noqa: BLE001 - one shape's failure is reported, the rest still run
            print(f"{name} {rows}x{n}: {type(e).__name__}: {e}", flush=True)
    json.dump(results, open(f"{out}/rows.json", "w"), indent=1)  # what is done survives a timeout
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(progs), figsize=(4 * len(progs), 3.4), sharey=True)
    for ax, name in zip(axes, progs):
        rs = [r for r in results["native"] if r["kernel"] == name]
        labels = [f"{r['rows']}x{r['n']}" for r in rs]
        pos = np.arange(len(rs))
        ax.bar(pos - 0.2, [r["native_GBps"] for r in rs], 0.4, label="gpuiter (CUDA C)")
        ax.bar(pos + 0.2, [r["torch_GBps"] for r in rs], 0.4, label="torch")
        ax.set_xticks(pos, labels, rotation=45, ha="right", fontsize=7)
        ax.set_title(name)
    axes[0].set_ylabel("GB/s (inputs read once, output written)")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(f"{out}/rows.png", dpi=110)
except Exception as e:  # noqa: BLE001
    print(f"no figure: {type(e).__name__}: {e}")
# verification: B candidates (the real row kernels, repeated) on R rows of n without early exit, the GPU kernel
# against the CPU evaluator (timed on 12 of them: rows/s per candidate is what compares)
cands = [compile_source(s) for s, _, _ in REAL.values()]
fused.warm_up()
for n, rows, B in [(128, 8192, 48), (8, 65536, 48)]:
    try:
        arrays = fused.ProgramArrays.from_programs((cands * B)[:B])
        x = torch.rand(3, rows * n, device="cuda") + 0.01
        want = torch.zeros(rows * n, device="cuda")
        t_gpu = timed(lambda: fused_cuda.compare(arrays, x, want, "float32", 1e-5, 1e-6, False, row=n), 3)
        xh, wh = x.cpu().numpy(), want.cpu().numpy()
        few = fused.ProgramArrays.from_programs(cands)
        t0 = time.perf_counter(); fused.compare(few, xh, wh, "float32", 1e-5, 1e-6, False, row=n)
        t_cpu = (time.perf_counter() - t0) * B / len(cands)
        row = {"candidates": B, "rows": rows, "n": n, "gpu_s": t_gpu, "cpu_s": t_cpu,
               "gpu_rows_per_s": B * rows / t_gpu, "cpu_rows_per_s": B * rows / t_cpu}
        results["verify"].append(row)
        print(f"verify {B} candidates x {rows} rows of {n}: GPU {t_gpu*1e3:.1f} ms "
              f"({row['gpu_rows_per_s']:.3g} rows/s), CPU {t_cpu*1e3:.1f} ms ({row['cpu_rows_per_s']:.3g} rows/s)",
              flush=True)
    except Exception as e:  # noqa: BLE001
        print(f"verify rows of {n}: {type(e).__name__}: {e}", flush=True)
    json.dump(results, open(f"{out}/rows.json", "w"), indent=1)
EOF
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
bench compile-4096 30 compile --n 4096
# where mode auto should switch from serial to traditional on this device (compilers.AUTO_CROSSOVER_CUDA)
bench crossover 40 compile --crossover
# programs/s on a GPU-sized batch by chunk size (no serial run: 65,536 programs cost it ~40 s), per pass
tool chunk-sweep 50 chunks --device cuda --n 65536 --repeats 2
# where a chunk's time goes on the device, and whether the device waits for the host's launches
tool profile-compile 25 profile --device cuda --n 8192
bench vm 25 vm
# the candidate loop and one edit against the torch-eager loop (the GPU target: 100,000 candidates/s)
bench loop 35 loop
bench verify 20 verify
bench neural 25 neural
bench peers 50 peers --iterations 5  # CuPy and nvcc join here; torch.compile costs ~1 s an edit
# the per-op costs behind the passes, at a GPU-sized chunk (compare with the CPU table in docs/performance.md)
tool op-costs 10 ops --device cuda --rows 8000 --cols 256
tail -n +1 "$OUT"/*.txt
