"""`gpuiter bench loop` and `gpuiter bench compile --crossover` run end to end (small sizes) and report what
they measured; the loop's paths must agree on every verdict (the suite raises otherwise)."""

import json

from jupyter_gpuiter.tools.bench import SUITES, crossover, loop
from jupyter_gpuiter.tools.cli import main


def test_loop_suite_times_every_path_and_checks_their_verdicts(tmp_path):
    report = loop.run(device="cpu", n_candidates=8, tests=300, repeats=1, edits=2, numba_candidates=1,
                      json_path=str(tmp_path / "loop.json"))
    assert "loop" in SUITES
    saved = json.loads((tmp_path / "loop.json").read_text())
    assert set(saved["candidates_per_s"]) >= {"gpuiter", "torch_eager", "torch_op_vm", "numba_vectorize"}
    assert all(v > 0 for v in report["candidates_per_s"].values())
    assert report["edit_ms"]["gpuiter"] > 0 and report["edit_ms"]["torch_eager"] > 0
    phases = report["gpuiter_phase_ms"]  # the Session's own split of its time
    assert set(phases["batch"]) == {"compile", "verify"} and {"compile", "execute_and_compare"} <= set(phases["edit"])
    assert all(v > 0 for split in phases.values() for v in split.values())


def test_the_loop_candidates_are_three_correct_in_four():
    sources, correct = loop.candidates(8, "t")
    assert correct == [True, True, True, False] * 2 and len(set(sources)) == 8


def test_crossover_reports_both_compilers_per_size(tmp_path):
    report = crossover.run(device="cpu", sizes=(1, 2), repeats=1, json_path=str(tmp_path / "c.json"))
    assert set(report["seconds"]) == {"1", "2"}
    assert all(t["serial"] > 0 and t["traditional"] > 0 for t in report["seconds"].values())


def test_cli_runs_the_crossover(tmp_path, capsys):
    assert main(["bench", "compile", "--crossover", "--repeats", "1", "--device", "cpu", "--out", str(tmp_path)]) == 0
    assert "traditional is faster from" in capsys.readouterr().out
    assert (tmp_path / "compile-crossover.json").exists()
