"""`gpuiter bench compile`: what it reports and writes (never how fast: tests do not assert times)."""

import itertools
import json
import subprocess
import sys

import torch

from jupyter_gpuiter.bench import compile as bench_compile
from jupyter_gpuiter.compilers import traditional
from jupyter_gpuiter.compilers.serial import compile_sources
from jupyter_gpuiter.compilers.traditional import workers
from jupyter_gpuiter.ir import Program
from jupyter_gpuiter.lang.generate import generate_batch

PASSES = ["plan", "pack", "lex", "regroup", "rules", "parse", "semantic", "exact", "codegen"]


def test_report_is_consistent_and_restores_threads(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(workers.ENV, "2")  # the batch shared out to two worker processes, as on a 2-core CPU
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        report = bench_compile.run(n=48, seed=3, device="cpu", repeats=1, json_path=tmp_path / "compile.json")
        assert torch.get_num_threads() == 2  # the one-thread row puts the thread count back
    finally:
        torch.set_num_threads(threads)
        workers.shutdown()
    sources = generate_batch(48, 3)
    assert report["programs"] == 48 and report["bytes"] == sum(len(s.encode()) for s in sources)
    assert report["valid"] == sum(isinstance(r, Program) for r in compile_sources(sources)) == 48
    assert report["ratio_device_vs_serial"] == report["serial_s"] / report["traditional_device_s"]
    assert report["ratio_device_1thread_vs_serial"] == report["serial_s"] / report["traditional_device_1thread_s"]
    assert report["workers"] == 2
    assert report["ratio_device_1process_vs_serial"] == report["serial_s"] / report["traditional_device_1process_s"]
    assert list(report["passes_s"]) == PASSES and all(v > 0 for v in report["passes_s"].values())
    host = report["passes_s"]["plan"] + report["passes_s"]["pack"]
    assert report["host_us_per_program"] == host / 48 * 1e6  # the host's share before the passes
    alone, _ = traditional.compile_to_batches(sources, workers=1)  # the workers' literal texts: as many as here
    assert report["host_literals"] == sum(len(c.host_literals()[0]) for _, c in alone)
    assert json.loads((tmp_path / "compile.json").read_text()) == json.loads(json.dumps(report))
    out = capsys.readouterr().out
    assert "(2 worker processes)" in out and "in one process, 2 threads" in out and "in one process, 1 thread" in out
    assert out.count("x serial") == 4
    assert report["ratio_device_vs_serial_by_round"] == [report["ratio_device_vs_serial"]]  # one round: its ratio


def test_variants_are_measured_in_rounds(monkeypatch, capsys):
    calls = []
    real_serial = bench_compile.compile_sources
    monkeypatch.setattr(bench_compile, "compile_sources", lambda s: calls.append("serial") or real_serial(s))
    real_device = traditional.compile_to_batches
    monkeypatch.setattr(traditional, "compile_to_batches",
                        lambda *a, **k: calls.append(f"device {k.get('workers')}") or real_device(*a, **k))
    report = bench_compile.run(n=24, seed=5, device="cpu", repeats=3)
    serial_at = [i for i, c in enumerate(calls) if c == "serial"]
    assert len(serial_at) == 3 and all(b - a > 1 for a, b in itertools.pairwise(serial_at))  # not three in a row
    assert calls[serial_at[0] + 1] == f"device {report['workers']}"  # each round: serial, then the device batch
    ratios = report["ratio_device_vs_serial_by_round"]
    assert len(ratios) == 3 and min(ratios) <= report["ratio_device_vs_serial"] <= max(ratios)
    assert "by round" in capsys.readouterr().out


def test_cli_writes_json(tmp_path):
    r = subprocess.run([sys.executable, "-m", "jupyter_gpuiter.cli", "bench", "compile", "--n", "16", "--repeats", "1",
                        "--device", "cpu", "--out", str(tmp_path)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "compile.json").read_text())
    assert report["suite"] == "compile" and report["valid"] == 16 and report["machine"]["device"] == "cpu"
