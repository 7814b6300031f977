"""`gpuiter bench neural` reports row kernels beside elementwise programs (a small run, any model)."""

import json

import torch

from jupyter_gpuiter.compilers.neural.model import ModelConfig, Seq2Seq
from jupyter_gpuiter.tools.bench import neural as bench


def test_bench_neural_reports_row_kernels(monkeypatch, tmp_path, capsys):
    torch.manual_seed(0)
    tiny = Seq2Seq(ModelConfig(d_model=32, heads=2, encoder_layers=1, decoder_layers=1, ff=64)).eval()
    monkeypatch.setattr(bench, "load_model", lambda **_: tiny)
    report = bench.run(n=12, samples=2, pass_programs=4, hybrid_programs=6, device="cpu",
                       json_path=str(tmp_path / "neural.json"))
    for key in ("exact_match_k1", "exact_match_k1_rows"):
        assert report[key]["<=160"]["programs"] == 12, key
        assert 0.0 <= report[key]["<=160"]["exact_match"] <= 1.0
    longer = report["exact_match_k1_rows_longer"]
    assert longer["chars"] == "161-320" and longer["programs"] == 3
    assert report["hybrid_rows"]["programs"] == 6 and report["hybrid_rows"]["wrong_programs"] == 0
    assert report["hybrid"]["wrong_programs"] == 0
    assert json.loads((tmp_path / "neural.json").read_text())["exact_match_k1_rows"] == report["exact_match_k1_rows"]
    out = capsys.readouterr().out
    assert "row kernels: " in out and "row kernels of 161-320 chars" in out
