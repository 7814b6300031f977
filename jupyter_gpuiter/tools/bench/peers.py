"""`gpuiter bench peers`: the edit-compile-run-check loop of gpuiter against the tools people use for it.

The same kernels (GELU, a Black-Scholes call, the Huber loss, softplus: `peer_kernels.py`) are edited `iterations`
times — one constant changes on every edit, so no compiled-code cache (in memory or on disk, this run or an
earlier one: the constants carry a random salt) can serve an edit — and each edit goes through every peer:
compile it, run it on `tests` inputs, check the result against a float64 reference with the same constant.
Peers run interleaved (their order rotates every edit), so they share the machine's state; the figure is the
median latency of one edit, and its ratio to gpuiter's, per kernel and overall.

After the timed edits, each peer gets one wrong edit (the constant ×1.5 against the reference's) and must
report a failure: the checks being timed are real checks.

Peers that cannot run here (no GPU, numba or CuPy not installed, no hybrid compiler in this build) are
reported as skipped with the reason; numba and CuPy are imported only when their peer runs.
"""

from __future__ import annotations

import importlib.util
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ... import compilers
from ...runtime.device import resolve
from ...session import Session
from ...verification.confidence import tests_needed
from .common import machine, write_json
from .peer_kernels import KERNELS, NUMPY_PRELUDE, PeerKernel


def installed(package: str) -> bool:
    """Whether `package` can be imported here (without importing it): peers that need a missing one are
    skipped."""
    return importlib.util.find_spec(package) is not None


EDIT_STEP = 1e-3  # edit i (from 0) sets the constant to base * (1 + EDIT_STEP * (i + 1) + salt)
BUG_FACTOR = 1.5  # the wrong edit: the candidate's constant is 1.5x the reference's
# what a peer may raise when it cannot run here (a missing compiler, a failed build, a device error)
RUN_ERRORS: tuple[type[BaseException], ...] = (RuntimeError, OSError, ValueError, TypeError, ArithmeticError,
                                               ImportError, subprocess.SubprocessError)


def host_check(got, want: np.ndarray, kernel: PeerKernel) -> bool:
    """The NumPy check: every value within atol + rtol * |want| of the float64 reference (nan where it is nan)."""
    got = np.asarray(got, dtype=np.float64)
    return got.shape == want.shape and bool(
        np.isclose(got, want, rtol=kernel.rtol, atol=kernel.atol, equal_nan=True).all())


def float64_reference(fn):
    """A NumPy reference that computes in float64 whatever dtype its inputs come in."""
    def reference(*arrays):
        return fn(*(np.asarray(a, dtype=np.float64) for a in arrays))

    return reference


class Peer:
    """One way of running the loop. `iterate` compiles the kernel with constant `c`, runs it on the test inputs
    and checks it against the reference with constant `c_ref`; it returns whether the check passed."""

    key = ""
    label = ""
    does = ""  # one edit, in words
    split: dict[str, float] | None = None  # where the last edit's time went, when the peer knows

    def __init__(self, device: torch.device, tests: int, seed: int):
        self.device, self.tests, self.seed = device, tests, seed

    def unavailable(self) -> str | None:
        """Why this peer cannot run here, or None."""
        return None

    def errors(self) -> tuple[type[BaseException], ...]:
        return RUN_ERRORS

    def prepare(self, kernel: PeerKernel) -> None:
        """Untimed, once per kernel: put the test inputs where the peer keeps them (resident, like gpuiter's)."""

    def iterate(self, kernel: PeerKernel, c: float, c_ref: float) -> bool:
        raise NotImplementedError


class GpuiterPeer(Peer):
    def __init__(self, device, tests, seed, mode: str = "traditional"):
        super().__init__(device, tests, seed)
        self.mode = mode
        self.key = "gpuiter" if mode == "traditional" else f"gpuiter-{mode}"
        self.label = f"gpuiter resident ({mode})"
        self.does = (f"Session.compile ({mode} compiler) + Session.verify against the NumPy float64 reference on the "
                     f"Session's device-resident inputs")
        self.session: Session | None = None

    def unavailable(self) -> str | None:
        if self.mode not in compilers.MODES:
            return (f"no {self.mode} compiler in this build (jupyter_gpuiter.compilers.MODES: "
                    f"{', '.join(compilers.MODES)})")
        try:  # e.g. the hybrid compiler needs the neural checkpoint
            compilers.compile_batch(["def probe(x):\n    return x\n"], mode=self.mode, device=self.device)
        except RUN_ERRORS as e:
            return f"the {self.mode} compiler cannot run here: {type(e).__name__}: {str(e)[:300]}"
        return None

    def prepare(self, kernel):
        if self.session is None:
            self.session = Session(self.device)

    def iterate(self, kernel, c, c_ref):
        if self.session is None:
            self.session = Session(self.device)
        verdict = self.session.verify(kernel.source("gpuiter", c), float64_reference(kernel.numpy_function(c_ref)),
                                      mode=self.mode, tests=self.tests, domain=kernel.domain_dict, rtol=kernel.rtol,
                                      atol=kernel.atol, seed=self.seed)
        self.split = dict(self.session.history[-1].seconds)  # compile, setup, execute_and_compare, counterexample
        return bool(verdict.passed)


class NumbaPeer(Peer):
    key, label = "numba", "numba.vectorize"
    does = "numba.vectorize (CPU target) with a float32 signature (eager JIT) + run on NumPy inputs + NumPy check"

    def unavailable(self):
        if not installed("numba"):
            return "numba is not installed (pip install numba)"
        return None

    def errors(self):
        from numba.core.errors import NumbaError

        return (*RUN_ERRORS, NumbaError)

    def prepare(self, kernel):
        self.xs = kernel.inputs(self.tests, self.seed)
        self.xs64 = [a.astype(np.float64) for a in self.xs]

    def iterate(self, kernel, c, c_ref):
        import numba

        signature = f"float32({', '.join(['float32'] * len(kernel.params))})"
        ufunc = numba.vectorize([signature])(kernel.python_function(c))
        got = ufunc(*self.xs)
        return host_check(got, kernel.numpy_function(c_ref)(*self.xs64), kernel)


class TorchPeer(Peer):
    def __init__(self, device, tests, seed, compiled: bool):
        super().__init__(device, tests, seed)
        self.compiled = compiled
        self.key = "torch-compile" if compiled else "torch-eager"
        self.label = "torch.compile" if compiled else "torch eager"
        self.does = (("torch.compile (Inductor) of the edited function + run" if compiled else
                      "exec of the edited torch function + run") +
                     " on device-resident float32 tensors + torch.testing.assert_close against torch float64")

    def prepare(self, kernel):
        self.xs = [torch.from_numpy(a).to(self.device) for a in kernel.inputs(self.tests, self.seed)]
        self.xs64 = [x.double() for x in self.xs]

    def iterate(self, kernel, c, c_ref):
        fn = kernel.torch_function(c)
        if self.compiled:
            fn = torch.compile(fn)
        got = fn(*self.xs)
        want = kernel.torch_function(c_ref)(*self.xs64)
        try:
            torch.testing.assert_close(got.double(), want, rtol=kernel.rtol, atol=kernel.atol, equal_nan=True)
        except AssertionError:
            return False
        return True


def fresh_process_script(kernel: PeerKernel, c: float, c_ref: float, n: int, seed: int) -> str:
    """The program the fresh-process peer runs: the edited kernel in NumPy (float32), the reference (float64), the
    inputs drawn as `PeerKernel.inputs` draws them, exit status 0 when the check passes and 1 when it fails."""
    return "\n".join([
        NUMPY_PRELUDE, "import sys", "",
        kernel.source("numpy", c), f"candidate = {kernel.name}", "",
        kernel.source("numpy", c_ref), f"reference = {kernel.name}", "",
        f"rng = np.random.default_rng({seed})",
        f"xs = [rng.uniform(lo, hi, {n}).astype(np.float32) for lo, hi in {kernel.domain!r}]",
        "got = np.asarray(candidate(*xs), dtype=np.float64)",
        "want = reference(*[x.astype(np.float64) for x in xs])",
        (f"ok = got.shape == want.shape and bool(np.isclose(got, want, rtol={kernel.rtol!r}, atol={kernel.atol!r}, "
         "equal_nan=True).all())"),
        "sys.exit(0 if ok else 1)", ""])


class FreshProcessPeer(Peer):
    key, label = "fresh-process", "fresh process per edit"
    does = ("a new Python process per edit, as nvcc4jupyter runs one nvcc + binary per cell: import NumPy, evaluate "
            "the float32 kernel on seeded inputs, check against float64, exit status = verdict")

    def iterate(self, kernel, c, c_ref):
        script = fresh_process_script(kernel, c, c_ref, self.tests, self.seed)
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                              check=False)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"the fresh process exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
        return proc.returncode == 0


class CupyPeer(Peer):
    key, label = "cupy", "CuPy ElementwiseKernel"
    does = ("cupy.ElementwiseKernel (NVRTC) of the edited CUDA C++ + run on device-resident CuPy arrays + "
            "NumPy check on the host")

    def __init__(self, device, tests, seed):
        super().__init__(device, tests, seed)
        self.count = 0

    def unavailable(self):
        if self.device.type != "cuda":
            return f"needs a CUDA device (this run is on {self.device})"
        if not installed("cupy"):
            return "CuPy is not installed (pip install 'jupyter_gpuiter[cuda]')"
        return None

    def errors(self):
        import cupy

        extra = [getattr(cupy.cuda.compiler, "CompileException", None),
                 getattr(cupy.cuda.runtime, "CUDARuntimeError", None)]
        return (*RUN_ERRORS, *[e for e in extra if e is not None])

    def prepare(self, kernel):
        import cupy

        xs = kernel.inputs(self.tests, self.seed)
        with cupy.cuda.Device(self.device.index or 0):
            self.xs = [cupy.asarray(a) for a in xs]
        self.xs64 = [a.astype(np.float64) for a in xs]

    def iterate(self, kernel, c, c_ref):
        import cupy

        self.count += 1
        params = ", ".join(kernel.params)
        elementwise = cupy.ElementwiseKernel(
            ", ".join(f"float32 {p}" for p in kernel.params), "float32 y", f"y = {kernel.name}<float>({params})",
            name=f"peer_{kernel.name}_{self.count}", preamble=kernel.cuda_function(c))
        with cupy.cuda.Device(self.device.index or 0):
            got = cupy.asnumpy(elementwise(*self.xs))
        return host_check(got, kernel.numpy_function(c_ref)(*self.xs64), kernel)


def cuda_program(kernel: PeerKernel, c: float, c_ref: float, n: int, seed: int) -> str:
    """A whole CUDA C++ program, as one would write it for nvcc: inputs drawn on the host, the edited kernel run on
    the device, the reference (the same code in double) on the host; exit status 0 when the check passes, 1 when it
    fails, 2 on a CUDA error."""
    p = range(len(kernel.params))
    decl = ", ".join(f"const float* __restrict__ in{i}" for i in p)
    draw = "\n".join(f"        h{i}[j] = (float)uniform({lo!r}, {hi!r});" for i, (lo, hi) in enumerate(kernel.domain))
    return f"""#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

{kernel.cuda_function(c, "candidate", "__device__")}
{kernel.cuda_function(c_ref, "reference", "__host__")}
__global__ void run_candidate(int n, {decl}, float* __restrict__ out)
{{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n) out[j] = candidate<float>({", ".join(f"in{i}[j]" for i in p)});
}}

static uint64_t state = {seed}ULL;

static double uniform(double lo, double hi)  // splitmix64
{{
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return lo + (hi - lo) * (double)(z >> 11) * (1.0 / 9007199254740992.0);
}}

#define CHECK(call) do {{ cudaError_t e = (call); if (e != cudaSuccess) {{ \\
    std::fprintf(stderr, "%s: %s\\n", #call, cudaGetErrorString(e)); return 2; }} }} while (0)

int main()
{{
    const int n = {n};
    const size_t bytes = n * sizeof(float);
    {" ".join(f"std::vector<float> h{i}(n);" for i in p)} std::vector<float> h_out(n);
    for (int j = 0; j < n; ++j) {{
{draw}
    }}
    {" ".join(f"float* d{i};" for i in p)} float* d_out;
{chr(10).join(f"    CHECK(cudaMalloc(&d{i}, bytes)); CHECK(cudaMemcpy(d{i}, h{i}.data(), bytes, cudaMemcpyHostToDevice));"
              for i in p)}
    CHECK(cudaMalloc(&d_out, bytes));
    run_candidate<<<(n + 255) / 256, 256>>>(n, {", ".join(f"d{i}" for i in p)}, d_out);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(h_out.data(), d_out, bytes, cudaMemcpyDeviceToHost));
    int failures = 0;
    for (int j = 0; j < n; ++j) {{
        double want = reference<double>({", ".join(f"(double)h{i}[j]" for i in p)});
        double got = (double)h_out[j];
        bool ok = (std::isnan(want) && std::isnan(got)) || got == want ||
                  std::fabs(got - want) <= {kernel.atol!r} + {kernel.rtol!r} * std::fabs(want);
        failures += !ok;
    }}
    std::printf("%d of %d failed\\n", failures, n);
    return failures ? 1 : 0;
}}
"""


class NvccPeer(Peer):
    key, label = "nvcc", "nvcc + fresh binary"
    does = "write a .cu file, nvcc -O2 it, run the binary (inputs, kernel, float64 host check), exit status = verdict"

    def __init__(self, device, tests, seed, arch: str = "native"):
        super().__init__(device, tests, seed)
        self.arch = arch

    def unavailable(self):
        if self.device.type != "cuda":
            return f"needs a CUDA device (this run is on {self.device})"
        if shutil.which("nvcc") is None:
            return "nvcc is not on PATH"
        return None

    def iterate(self, kernel, c, c_ref):
        with tempfile.TemporaryDirectory(prefix="gpuiter-nvcc-") as tmp:
            src, exe = Path(tmp) / f"{kernel.name}.cu", Path(tmp) / kernel.name
            src.write_text(cuda_program(kernel, c, c_ref, self.tests, self.seed))
            build = subprocess.run(["nvcc", "-O2", f"-arch={self.arch}", "-o", str(exe), str(src)],
                                   capture_output=True, text=True, timeout=600, check=False)
            if build.returncode:
                raise RuntimeError(f"nvcc failed: {build.stderr.strip()[-500:]}")
            env = dict(os.environ)
            if self.device.index is not None:
                env["CUDA_VISIBLE_DEVICES"] = str(self.device.index)
            proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600, check=False, env=env)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"the binary exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
        return proc.returncode == 0


PEERS = ("gpuiter", "gpuiter-serial", "gpuiter-hybrid", "numba", "torch-compile", "torch-eager", "fresh-process",
         "cupy", "nvcc")


def make_peers(device, tests: int, seed: int) -> list[Peer]:
    """Every peer, in the order of PEERS."""
    return [GpuiterPeer(device, tests, seed, "traditional"), GpuiterPeer(device, tests, seed, "serial"),
            GpuiterPeer(device, tests, seed, "hybrid"),
            NumbaPeer(device, tests, seed), TorchPeer(device, tests, seed, compiled=True),
            TorchPeer(device, tests, seed, compiled=False), FreshProcessPeer(device, tests, seed),
            CupyPeer(device, tests, seed), NvccPeer(device, tests, seed)]


def edited_constant(kernel: PeerKernel, i: int, salt: float) -> float:
    return kernel.base * (1.0 + EDIT_STEP * (i + 1) + salt)


def run(device=None, iterations: int = 20, tests: int | None = None, kernels: Sequence[str] | None = None,
        peers: Sequence[str] | None = None, seed: int = 0, salt: float | None = None, check_bugs: bool = True,
        json_path: str | None = None, plot: bool = True) -> dict:
    """Run the suite; returns (and writes as JSON, with a plotly HTML beside it) the report."""
    dev = resolve(device)
    n = tests if tests is not None else tests_needed(1e-3, 1e-3)
    if iterations < 1 or n < 1:
        raise ValueError("iterations and tests must be at least 1")
    if salt is None:
        salt = int.from_bytes(os.urandom(3), "little") * 1e-13  # < 1.7e-6: a new constant every run
    names = list(kernels) if kernels else list(KERNELS)
    unknown = [k for k in names if k not in KERNELS] + [p for p in (peers or ()) if p not in PEERS]
    if unknown:
        raise ValueError(f"unknown kernel or peer {unknown[0]!r}; kernels: {', '.join(KERNELS)}; "
                         f"peers: {', '.join(PEERS)}")
    chosen = [p for p in make_peers(dev, n, seed) if peers is None or p.key in peers]
    reasons = {p.key: p.unavailable() for p in chosen}
    errors = {p.key: p.errors() for p in chosen if reasons[p.key] is None}
    records = {p.key: {k: {"times_s": [], "passed": []} for k in names} for p in chosen}
    print(f"gpuiter bench peers: {len(names)} kernels x {iterations} edits, {n:,} test inputs each, device {dev}",
          flush=True)

    def attempt(peer: Peer, where: str, fn, *args):
        """fn(*args), or None with the peer marked skipped when it raises what it may raise here."""
        try:
            return fn(*args)
        except errors[peer.key] as e:
            reasons[peer.key] = f"failed on {where}: {type(e).__name__}: {str(e)[:300]}"
            return None

    for name in names:
        kernel = KERNELS[name]
        t_kernel = time.perf_counter()
        for peer in chosen:
            if reasons[peer.key] is None:
                attempt(peer, f"{name} (preparing)", peer.prepare, kernel)
        for i in range(iterations):
            c = edited_constant(kernel, i, salt)
            active = [p for p in chosen if reasons[p.key] is None]
            for peer in active[i % len(active):] + active[:i % len(active)] if active else ():
                t0 = time.perf_counter()
                ok = attempt(peer, f"{name} (edit {i + 1})", peer.iterate, kernel, c, c)
                if ok is not None:
                    records[peer.key][name]["times_s"].append(time.perf_counter() - t0)
                    records[peer.key][name]["passed"].append(ok)
                    if peer.split is not None:
                        records[peer.key][name].setdefault("splits", []).append(peer.split)
        if check_bugs:
            c_ref = edited_constant(kernel, iterations, salt)
            for peer in chosen:
                if reasons[peer.key] is None:
                    ok = attempt(peer, f"{name} (wrong edit)", peer.iterate, kernel, BUG_FACTOR * c_ref, c_ref)
                    records[peer.key][name]["detects_wrong_kernel"] = None if ok is None else not ok
        print(f"  {name}: {time.perf_counter() - t_kernel:.1f} s", flush=True)
    report = _report(dev, n, iterations, seed, salt, names, chosen, reasons, records)
    print_table(report)
    if json_path:
        print(f"  wrote {write_json(report, json_path)}")
        if plot:
            for path in write_plot(report, Path(json_path).with_suffix(".html")):
                print(f"  wrote {path}")
    return report


def _median(xs):
    return statistics.median(xs) if xs else None


def _report(dev, n, iterations, seed, salt, names, chosen, reasons, records) -> dict:
    peers = {}
    for peer in chosen:
        entry = {"label": peer.label, "does": peer.does}
        if reasons[peer.key] is not None:
            peers[peer.key] = {**entry, "status": "skipped", "reason": reasons[peer.key]}
            continue
        per_kernel = {}
        for name in names:
            r = records[peer.key][name]
            per_kernel[name] = {"median_s": _median(r["times_s"]), "first_s": r["times_s"][0], "min_s": min(r["times_s"]),
                                "times_s": r["times_s"], "edits": len(r["times_s"]), "all_passed": all(r["passed"]),
                                "detects_wrong_kernel": r.get("detects_wrong_kernel")}
            if r.get("splits"):  # median seconds of each part of an edit
                per_kernel[name]["split_median_s"] = {part: _median([x.get(part, 0.0) for x in r["splits"]])
                                                      for part in r["splits"][0]}
        every = [t for name in names for t in records[peer.key][name]["times_s"]]
        peers[peer.key] = {**entry, "status": "measured", "median_s": _median(every), "per_kernel": per_kernel,
                           "all_passed": all(k["all_passed"] for k in per_kernel.values())}
    base = peers.get("gpuiter", {})
    for entry in peers.values():
        if entry["status"] != "measured" or base.get("status") != "measured":
            continue
        ratios = []
        for name, k in entry["per_kernel"].items():
            k["ratio_vs_gpuiter"] = k["median_s"] / base["per_kernel"][name]["median_s"]
            ratios.append(k["ratio_vs_gpuiter"])
        entry["ratio_vs_gpuiter"] = math.exp(statistics.fmean(math.log(r) for r in ratios))
    return {"suite": "peers", "machine": machine(dev), "iterations": iterations, "tests": n, "seed": seed,
            "salt": salt, "edit": f"constant = base * (1 + {EDIT_STEP:g} * (i + 1) + salt), i = 0..{iterations - 1}",
            "wrong_edit": f"candidate constant = {BUG_FACTOR:g} x the reference's",
            "ratio": "peer median / gpuiter median per kernel; overall: geometric mean over kernels",
            "kernels": {name: {"title": KERNELS[name].title, "params": list(KERNELS[name].params),
                               "domain": KERNELS[name].domain_dict, "rtol": KERNELS[name].rtol,
                               "atol": KERNELS[name].atol, "gpuiter_source": KERNELS[name].gpuiter}
                        for name in names},
            "peers": peers}


def _ms(s) -> str:
    return "-" if s is None else f"{s * 1e3:,.1f} ms" if s < 10 else f"{s:,.1f} s"


def table_rows(report: dict) -> list[list[str]]:
    """Header and rows of the result table (also used for BENCHMARKS.md)."""
    names = list(report["kernels"])
    rows = [["peer", *names, "median, all", "vs gpuiter", "checks"]]
    for entry in report["peers"].values():
        if entry["status"] != "measured":
            rows.append([entry["label"], *["-"] * len(names), "-", "-", f"skipped: {entry['reason']}"])
            continue
        ks = entry["per_kernel"]
        caught = [k["detects_wrong_kernel"] for k in ks.values()]
        checks = ("edits pass" if entry["all_passed"] else "AN EDIT FAILED") + (
            ", wrong edit caught" if all(c is True for c in caught) else
            ", wrong edit NOT caught" if any(c is False for c in caught) else "")
        ratio = entry.get("ratio_vs_gpuiter")
        rows.append([entry["label"], *[_ms(ks[n]["median_s"]) for n in names], _ms(entry["median_s"]),
                     "-" if ratio is None else f"{ratio:,.2f}x", checks])
    return rows


def markdown_table(report: dict) -> str:
    """The result table as Markdown (BENCHMARKS.md)."""
    rows = table_rows(report)
    titles = [report["kernels"][n]["title"] for n in report["kernels"]]
    rows[0] = ["peer", *titles, *rows[0][1 + len(titles):]]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * (len(rows[0]))]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows[1:]]
    return "\n".join(lines) + "\n"


def print_table(report: dict) -> None:
    rows = table_rows(report)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    print(f"  median latency of one edit (compile + run {report['tests']:,} inputs + check), "
          f"{report['iterations']} edits per kernel; vs gpuiter = geometric mean of per-kernel ratios")
    for r in rows:
        print("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
              + "  " + r[-1])


def write_plot(report: dict, html_path) -> list[Path]:
    """A plotly bar chart (log scale) of the median edit latency per kernel and peer; a PNG too where kaleido is
    installed; none where plotly is missing (a bare device machine: the JSON has the figures)."""
    if not installed("plotly"):
        print("  no plot: plotly is not installed")
        return []
    import plotly.graph_objects as go

    names = list(report["kernels"])
    fig = go.Figure()
    for entry in report["peers"].values():
        if entry["status"] != "measured":
            continue
        ks = entry["per_kernel"]
        fig.add_bar(name=entry["label"], x=[report["kernels"][n]["title"] for n in names],
                    y=[ks[n]["median_s"] * 1e3 for n in names],
                    customdata=[ks[n].get("ratio_vs_gpuiter") or float("nan") for n in names],
                    hovertemplate="%{x}: %{y:.2f} ms (%{customdata:.2f}x gpuiter)<extra>" + entry["label"] + "</extra>")
    m = report["machine"]
    fig.update_layout(barmode="group", yaxis_type="log", yaxis_title="median latency of one edit (ms, log)",
                      title=f"Edit, compile, run {report['tests']:,} inputs, check: median of {report['iterations']} "
                            f"edits<br><sup>{m['cpu']}, {m['cores']} cores, device {m['device']}, torch {m['torch']}, "
                            f"{m['date']}</sup>")
    path = Path(html_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.write_html(path, include_plotlyjs=True)
    written = [path]
    if installed("kaleido"):
        try:
            fig.write_image(path.with_suffix(".png"), width=1100, height=550)
            written.append(path.with_suffix(".png"))
        except (ValueError, RuntimeError, OSError) as e:
            print(f"  no PNG: kaleido could not render ({e})")
    return written
