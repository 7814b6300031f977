"""`gpuiter bench compile`: what it reports and writes (never how fast: tests do not assert times)."""

import itertools
import json
import os
import stat
import subprocess
import sys

import pytest
import torch

from jupyter_gpuiter.compilers import traditional
from jupyter_gpuiter.compilers.serial import compile_sources
from jupyter_gpuiter.generate import generate_batch
from jupyter_gpuiter.ir import Program
from jupyter_gpuiter.runtime import workers
from jupyter_gpuiter.tools.bench import compile as bench_compile
from jupyter_gpuiter.tools.bench.common import write_json

PASSES = ["plan", "pack", "lex", "regroup", "rules", "parse", "semantic", "exact", "codegen"]


def test_report_is_consistent_and_restores_threads(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(traditional.driver.WORKERS_ENV, "2")  # the batch shared out to two worker processes, as on a 2-core CPU
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        report = bench_compile.run(n=48, seed=3, device="cpu", repeats=1, json_path=tmp_path / "compile.json")
        assert torch.get_num_threads() == 2  # the one-thread row puts the thread count back
    finally:
        torch.set_num_threads(threads)
        workers.shutdown()
    sources = generate_batch(48, 3, rows=0)  # elementwise; row kernels are timed beside them
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
    assert out.count("x serial") == 4 + 2  # and the row kernels' two traditional rows
    rows = report["row_kernels"]
    row_sources = generate_batch(48, 3, rows=1.0)
    assert rows["programs"] == 48 and rows["bytes"] == sum(len(s.encode()) for s in row_sources)
    assert rows["valid"] == rows["reducing"] == 48 and rows["reductions"] >= 48
    assert rows["ratio_device_vs_serial"] == rows["serial_s"] / rows["traditional_device_s"]
    assert "row kernels beside them: 48 generated" in out
    assert report["ratio_device_vs_serial_by_round"] == [report["ratio_device_vs_serial"]]  # one round: its ratio


def test_variants_are_measured_in_rounds(monkeypatch, capsys):
    calls = []
    real_serial = bench_compile.compile_sources
    monkeypatch.setattr(bench_compile, "compile_sources", lambda s: calls.append("serial") or real_serial(s))
    real_device = traditional.compile_to_batches
    monkeypatch.setattr(traditional, "compile_to_batches",
                        lambda *a, **k: calls.append(f"device {k.get('workers')}") or real_device(*a, **k))
    report = bench_compile.run(n=24, seed=5, device="cpu", repeats=3)
    serial_at = [i for i, c in enumerate(calls) if c == "serial"]  # the elementwise batch's, then the row kernels'
    assert len(serial_at) == 6 and all(b - a > 1 for a, b in itertools.pairwise(serial_at))  # not two in a row
    assert all(calls[i + 1] == f"device {report['workers']}" for i in serial_at)  # each: serial, then the device batch
    ratios = report["ratio_device_vs_serial_by_round"]
    assert len(ratios) == 3 and min(ratios) <= report["ratio_device_vs_serial"] <= max(ratios)
    assert "by round" in capsys.readouterr().out


def test_cli_writes_json(tmp_path):
    r = subprocess.run([sys.executable, "-m", "jupyter_gpuiter.tools.cli", "bench", "compile", "--n", "16", "--repeats", "1",
                        "--device", "cpu", "--out", str(tmp_path)], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "compile.json").read_text())
    assert report["suite"] == "compile" and report["valid"] == 16 and report["machine"]["device"] == "cpu"


# -- bad arguments and where the results go: clear errors, no traceback, nothing written through a link --


@pytest.mark.parametrize("args", [["--n", "0"], ["--repeats", "0"], ["--n", "-3"], ["--n", "many"],
                                  ["--held-out", "0"], ["--samples", "0"], ["--iterations", "0"], ["--tests", "0"],
                                  ["--candidates", "0"]])
def test_bench_counts_below_one_are_usage_errors(args, capsys):
    from jupyter_gpuiter.tools import cli

    with pytest.raises(SystemExit) as info:
        cli.main(["bench", "compile", *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {args[0]}: " in err and ("must be at least 1" in err or "whole number" in err)
    assert "Traceback" not in err


def test_bench_compile_run_refuses_zero_programs_or_repeats():
    with pytest.raises(ValueError, match="n .generated programs. must be >= 1"):
        bench_compile.run(n=0, device="cpu")
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        bench_compile.run(n=4, repeats=0, device="cpu")


def test_write_json_replaces_a_symlink_instead_of_writing_through_it(tmp_path):
    victim = tmp_path / "precious.txt"
    victim.write_text("do not touch\n")
    out = tmp_path / "results"
    out.mkdir()
    (out / "compile.json").symlink_to(victim)
    p = write_json({"suite": "compile"}, out / "compile.json")
    assert victim.read_text() == "do not touch\n"
    assert not p.is_symlink() and json.loads(p.read_text()) == {"suite": "compile"}
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask  # as a plainly created file
    assert sorted(x.name for x in out.iterdir()) == ["compile.json"]  # no temporary file left
    write_json({"suite": "compile", "n": 2}, p)  # and over a regular file
    assert json.loads(p.read_text()) == {"suite": "compile", "n": 2}


def test_bench_cli_never_writes_through_a_symlinked_result(tmp_path, monkeypatch, capsys):
    from jupyter_gpuiter.tools import cli

    def fake_run(n, seed, device, repeats, json_path):  # the suite, without its minutes of timing
        write_json({"suite": "compile", "n": n}, json_path)

    monkeypatch.setattr(bench_compile, "run", fake_run)
    victim = tmp_path / "precious.txt"
    victim.write_text("do not touch\n")
    out = tmp_path / "results"
    out.mkdir()
    (out / "compile.json").symlink_to(victim)
    assert cli.main(["bench", "compile", "--n", "4", "--out", str(out)]) == 0
    assert victim.read_text() == "do not touch\n"
    assert json.loads((out / "compile.json").read_text()) == {"suite": "compile", "n": 4}


def test_bench_cli_refuses_an_unusable_results_folder_before_running(tmp_path, monkeypatch, capsys):
    from jupyter_gpuiter.tools import cli

    ran = []
    monkeypatch.setattr(bench_compile, "run", lambda **kw: ran.append(kw))
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert cli.main(["bench", "compile", "--out", str(a_file)]) == 2
    assert "cannot create the results folder" in capsys.readouterr().err
    (tmp_path / "out" / "compile.json").mkdir(parents=True)
    assert cli.main(["bench", "compile", "--out", str(tmp_path / "out")]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert ran == []

    def failing_run(**kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(bench_compile, "run", failing_run)
    assert cli.main(["bench", "compile", "--out", str(tmp_path / "fine")]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and "Traceback" not in err
