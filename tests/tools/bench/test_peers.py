"""`gpuiter bench peers`: runs with small settings, writes well-formed JSON, and every peer's check is a real check.

No test here asserts a time."""

import json
import math
import shutil
import subprocess

import numpy as np
import pytest
import torch

from jupyter_gpuiter import compile as gi_compile
from jupyter_gpuiter import compilers
from jupyter_gpuiter.runtime.device import resolve
from jupyter_gpuiter.tools.bench import SUITES
from jupyter_gpuiter.tools.bench import peers as bench_peers
from jupyter_gpuiter.tools.bench.peer_kernels import KERNELS
from jupyter_gpuiter.tools.bench.peers import (
    BUG_FACTOR,
    PEERS,
    cuda_program,
    fresh_process_script,
    make_peers,
    markdown_table,
    run,
    table_rows,
)
from jupyter_gpuiter.tools.cli import main

CPU = resolve("cpu")


def test_peers_is_a_suite():
    assert "peers" in SUITES


def test_small_run_writes_well_formed_json(tmp_path, capsys):
    path = tmp_path / "peers.json"
    report = run(device="cpu", iterations=2, tests=256, kernels=["gelu", "huber"], json_path=str(path))
    data = json.loads(path.read_text())
    assert data == json.loads(json.dumps(report))
    assert data["suite"] == "peers" and data["iterations"] == 2 and data["tests"] == 256
    assert set(data["kernels"]) == {"gelu", "huber"}
    assert list(data["peers"]) == list(PEERS)  # every peer, measured or skipped
    for key, entry in data["peers"].items():
        assert entry["label"] and entry["does"]
        assert entry["status"] in ("measured", "skipped"), key
        if entry["status"] == "skipped":
            assert isinstance(entry["reason"], str) and entry["reason"].strip(), key
            continue
        assert entry["all_passed"] is True, key
        assert entry["median_s"] > 0 and entry["ratio_vs_gpuiter"] > 0
        for name, k in entry["per_kernel"].items():
            assert k["edits"] == 2 and len(k["times_s"]) == 2 and all(t > 0 for t in k["times_s"])
            assert k["median_s"] > 0 and k["all_passed"] is True
            assert k["detects_wrong_kernel"] is True, (key, name)
            assert math.isfinite(k["ratio_vs_gpuiter"])
    peers = data["peers"]
    for always in ("gpuiter", "gpuiter-serial", "torch-eager", "torch-compile", "fresh-process"):
        assert peers[always]["status"] == "measured", peers[always].get("reason")
    assert peers["gpuiter"]["ratio_vs_gpuiter"] == pytest.approx(1.0)
    split = peers["gpuiter"]["per_kernel"]["gelu"]["split_median_s"]  # where gpuiter's edit time goes
    assert split["compile"] > 0 and "execute_and_compare" in split
    assert peers["numba"]["status"] == ("measured" if bench_peers.installed("numba") else "skipped")
    if "hybrid" not in compilers.MODES:
        assert "hybrid" in peers["gpuiter-hybrid"]["reason"]
    if not torch.cuda.is_available():
        assert "CUDA" in peers["cupy"]["reason"] and "CUDA" in peers["nvcc"]["reason"]
    html = path.with_suffix(".html")
    assert html.exists() and "plotly" in html.read_text()[:100_000].lower()
    out = capsys.readouterr().out
    assert "gpuiter bench peers" in out and "vs gpuiter" in out
    rows = table_rows(report)
    assert len(rows) == 1 + len(PEERS) and all(len(r) == len(rows[0]) for r in rows)
    md = markdown_table(report).splitlines()
    assert len(md) == 2 + len(PEERS) and all(line.count(" | ") == len(rows[0]) - 1 for line in md if "---" not in line)


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("key", PEERS)
def test_each_peer_check_detects_a_wrong_kernel(key, kernel):
    """The edited kernel passes each peer's check; the same edit with a bug (constant x1.5) fails it."""
    peer = next(p for p in make_peers(CPU, 512, 3) if p.key == key)
    reason = peer.unavailable()
    if reason:
        pytest.skip(reason)
    k = KERNELS[kernel]
    peer.prepare(k)
    c = k.base * 1.0123
    assert peer.iterate(k, c, c) is True
    assert peer.iterate(k, BUG_FACTOR * c, c) is False


def test_numba_is_optional(tmp_path, monkeypatch):
    # numba is a dependency (the fused evaluator); without it the numba.vectorize peer still says so
    real = bench_peers.installed
    monkeypatch.setattr(bench_peers, "installed", lambda name: name != "numba" and real(name))
    report = run(device="cpu", iterations=1, tests=64, kernels=["softplus"], peers=["gpuiter", "numba"],
                 json_path=str(tmp_path / "p.json"), plot=False)
    assert report["peers"]["numba"]["status"] == "skipped"
    assert "numba is not installed" in report["peers"]["numba"]["reason"]
    assert report["peers"]["gpuiter"]["status"] == "measured"


def test_plotly_is_optional_for_the_figures(tmp_path, monkeypatch, capsys):
    # a bare GPU machine (scripts/gpu-check.sh) has torch but not plotly: the JSON is written, no plot
    real = bench_peers.installed
    monkeypatch.setattr(bench_peers, "installed", lambda name: name != "plotly" and real(name))
    report = run(device="cpu", iterations=1, tests=64, kernels=["softplus"], peers=["gpuiter"],
                 json_path=str(tmp_path / "p.json"))
    assert json.loads((tmp_path / "p.json").read_text())["peers"]["gpuiter"]["status"] == "measured"
    assert report["peers"]["gpuiter"]["status"] == "measured"
    assert not (tmp_path / "p.html").exists() and "no plot: plotly is not installed" in capsys.readouterr().out


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_idioms_compute_the_same_function(kernel, root):
    """Every idiom of a kernel computes what its kernel-language form computes (in float64), and the
    kernel-language form is the example in examples/kernels."""
    k = KERNELS[kernel]
    c = k.base * 1.37
    xs = [a.astype(np.float64) for a in k.inputs(300, 1)]
    want = gi_compile(k.source("gpuiter", c), mode="serial", dtype="float64")(*xs)
    np.testing.assert_allclose(k.numpy_function(c)(*xs), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.vectorize(k.python_function(c))(*xs), want, rtol=1e-12, atol=1e-12)
    got = k.torch_function(c)(*[torch.from_numpy(a) for a in xs]).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    example = (root / "examples" / "kernels" / k.example).read_text()
    if kernel == "softplus":  # the example is the slope-1 case
        np.testing.assert_allclose(gi_compile(example, mode="serial", dtype="float64")(*xs),
                                   gi_compile(k.source("gpuiter", 1.0), mode="serial", dtype="float64")(*xs),
                                   rtol=1e-15, atol=0)
    else:
        assert gi_compile(example, mode="serial").ir() == gi_compile(k.source("gpuiter", k.base), mode="serial").ir()


def test_fresh_process_draws_the_suites_inputs():
    k = KERNELS["bs_call"]
    ns = {}
    with pytest.raises(SystemExit) as exit_:
        exec(fresh_process_script(k, 0.5, 0.5, 100, 7), ns)  # noqa: S102
    assert exit_.value.code == 0
    for a, b in zip(ns["xs"], k.inputs(100, 7)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_nvcc_program_compiles(kernel, tmp_path):
    """The nvcc peer's program builds (running it needs a GPU)."""
    src = tmp_path / f"{kernel}.cu"
    src.write_text(cuda_program(KERNELS[kernel], 0.6, 0.6, 1000, 0))
    build = subprocess.run(["nvcc", "-O2", "-o", str(tmp_path / kernel), str(src)], capture_output=True, text=True,
                           check=False)
    assert build.returncode == 0, build.stderr


def test_cli(tmp_path, capsys):
    assert main(["bench", "peers", "--iterations", "1", "--tests", "64", "--peers", "gpuiter,torch-eager",
                 "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "peers.json").read_text())
    assert list(data["peers"]) == ["gpuiter", "torch-eager"]
    assert main(["bench", "peers", "--peers", "gpuiter,nope", "--out", str(tmp_path)]) == 2
    assert "unknown kernel or peer 'nope'" in capsys.readouterr().err
