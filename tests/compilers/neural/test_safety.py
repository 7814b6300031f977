"""Files the neural compiler reads (checkpoints, training data caches) can never run code, and a file that
is not a valid checkpoint is refused with an error naming it."""

import json
import pickle
from pathlib import Path

import pytest
import torch

import jupyter_gpuiter as gi
from jupyter_gpuiter.compilers import neural
from jupyter_gpuiter.compilers.neural import CHECKPOINT, load_model, read_checkpoint
from jupyter_gpuiter.compilers.neural import tokens as tk
from jupyter_gpuiter.compilers.neural.model import ModelConfig, Seq2Seq
from jupyter_gpuiter.compilers.neural.train import TrainConfig, export, make_dataset, save_data, train, write_card
from jupyter_gpuiter.tools import cli

SRC = "def f(x):\n    return x * 2 + 1\n"
TINY = ModelConfig(d_model=16, heads=2, encoder_layers=1, decoder_layers=1, ff=32)


class Payload:
    """Unpickling this calls open(marker, "w"): the file appears only if the loader ran pickled code."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(params=["plain-pickle", "torch-zip", "torch-legacy"])
def evil(request, tmp_path):
    """(path of a file whose loading by pickle would create `marker`, marker)."""
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pt"
    if request.param == "plain-pickle":
        path.write_bytes(pickle.dumps(Payload(marker)))
    else:  # a real torch checkpoint (either of torch's formats) with the payload among its entries
        state = Seq2Seq(TINY).state_dict()
        torch.save({"model": state, "model_config": TINY.to_dict(), "notes": Payload(marker)}, path,
                   _use_new_zipfile_serialization=request.param == "torch-zip")
    assert not marker.exists()
    return path, marker


@pytest.fixture(autouse=True)
def fresh_models():
    saved = dict(neural._LOADED)
    neural._LOADED.clear()
    yield
    neural._LOADED.clear()
    neural._LOADED.update(saved)


def test_the_shipped_checkpoint_loads_without_pickled_objects():
    ck = torch.load(CHECKPOINT, map_location="cpu", weights_only=True)
    assert {"model", "model_config"} <= set(ck)
    assert CHECKPOINT.stat().st_size <= 4 * 2**20
    assert not load_model().training


@pytest.mark.parametrize("mode", ["neural", "hybrid"])
def test_compile_with_a_malicious_model_path_refuses_it(evil, mode):
    path, marker = evil
    with pytest.raises(ValueError, match=f"{path.name}.*not a loadable neural checkpoint"):
        gi.compile(SRC, mode=mode, model_path=str(path))
    with pytest.raises(ValueError, match=path.name):  # whatever the batch holds, even only invalid sources
        gi.compile_batch(["def f(x):\n    return y\n"], mode=mode, model_path=path)
    assert not marker.exists()


def test_the_magic_refuses_a_malicious_model(evil):
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    path, marker = evil
    ip = start_ipython() or get_ipython()  # None when another test started the shell already
    ip.run_line_magic("load_ext", "jupyter_gpuiter")
    with pytest.raises(ValueError, match=path.name):
        ip.run_cell_magic("gpucompile", f"--mode neural --model {path} --no-verify", SRC)
    assert not marker.exists()


def test_export_and_model_card_refuse_a_malicious_checkpoint(evil, tmp_path):
    path, marker = evil
    with pytest.raises(ValueError, match=path.name):
        export(path, tmp_path / "out.pt")
    with pytest.raises(ValueError, match=path.name):
        write_card(path, tmp_path / "card.json", "test")
    assert not marker.exists() and not (tmp_path / "out.pt").exists()


@pytest.mark.parametrize("content, why", [
    (b"", "not a loadable"),
    (b"not a checkpoint at all", "not a loadable"),
    (None, "holds a Tensor"),
    ({"model_config": TINY.to_dict()}, "no 'model' entry"),
    ({"model": {"w": 1}, "model_config": TINY.to_dict()}, "not a dict of named tensors"),
    ({"model": Seq2Seq(TINY).state_dict(), "model_config": {**TINY.to_dict(), "colour": 1}}, "model_config"),
    ({"model": Seq2Seq(TINY).state_dict(), "model_config": {**TINY.to_dict(), "d_model": 32}}, "do not fit"),
    ({"model": Seq2Seq(TINY).state_dict(), "model_config": {**TINY.to_dict(), "vocab": 7}}, "other tokens"),
    ({"model": Seq2Seq(TINY).state_dict(), "model_config": TINY.to_dict(), "vocab": tk.VOCAB[::-1]},
     "other tokens.*at id 0"),  # the right number of tokens, in another order
    ({"model": Seq2Seq(TINY).state_dict(), "model_config": TINY.to_dict(), "vocab": "abc"}, "list of tokens"),
    ({"model": Seq2Seq(TINY).state_dict(), "model_config": {**TINY.to_dict(), "d_model": 10**9}},
     "do not fit"),  # refused on the meta device, before allocating a huge model
])
def test_not_a_checkpoint_gets_a_clear_error(tmp_path, content, why):
    path = tmp_path / "bad.pt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(torch.zeros(3) if content is None else content, path)
    with pytest.raises(ValueError, match=why) as info:
        load_model(path)
    assert str(path) in str(info.value)


def test_a_missing_checkpoint_says_how_to_make_one(tmp_path):
    with pytest.raises(FileNotFoundError, match="train-neural"):
        read_checkpoint(tmp_path / "none.pt")


def tiny_run(out: Path, resume=False, **kw):
    cfg = TrainConfig(examples=24, eval_examples=4, steps=2, eval_every=1, batch=8, warmup=1, **kw)
    return train(out, cfg, model_config=TINY, resume=resume, log=lambda *_: None)


def test_training_ignores_a_pickled_data_cache_and_resumes_without_pickle(tmp_path, evil):
    path, marker = evil
    out = tmp_path / "run"
    out.mkdir()
    (out / "data-24-1-40-220-rows0.35.pt").write_bytes(path.read_bytes())  # a pickled cache's name, no --resume
    last = tiny_run(out)
    assert not marker.exists()
    cache = out / "data-24-1-40-220-rows0.35.json"
    assert json.loads(cache.read_text())["format"] == "gpuiter-neural-data/1"
    torch.load(last, weights_only=True)  # what training writes reads back without pickle
    tiny_run(out, resume=True)  # resumes from last.pt and the JSON cache
    assert torch.load(last, weights_only=True)["step"] == 2
    exported = export(last, tmp_path / "ship.pt")
    assert not load_model(exported).training


def test_resume_refuses_a_malicious_last_checkpoint(tmp_path, evil):
    path, marker = evil
    out = tmp_path / "run"
    out.mkdir()
    (out / "last.pt").write_bytes(path.read_bytes())
    with pytest.raises(ValueError, match="last.pt"):
        tiny_run(out, resume=True)
    assert not marker.exists()
    assert cli.main(["train-neural", "--out", str(out), "--resume", "--examples", "24", "--steps", "1"]) == 2
    assert not marker.exists()


@pytest.mark.parametrize("mangle, why", [
    (lambda d: "{not json", "unreadable JSON"),
    (lambda d: json.dumps({**d, "format": "pickle"}), "format"),
    (lambda d: json.dumps({**d, "key": {**d["key"], "data_seed": 9}}), "made for"),
    (lambda d: json.dumps({**d, "examples": d["examples"][:-1]}), "list of 6"),
    (lambda d: json.dumps({**d, "examples": [[1, {}, []]] * 6}), "example 0"),
    (lambda d: json.dumps({**d, "examples": d["examples"][:5] + [[d["examples"][5][0], {
        **d["examples"][5][1], "ids": [10**6]}, d["examples"][5][2]]]}), "example 5"),
])
def test_a_bad_data_cache_gets_a_clear_error(tmp_path, mangle, why):
    out = tmp_path / "run"
    out.mkdir()
    cache = out / "data-6-1-40-220-rows0.5.json"
    key = {"examples": 6, "data_seed": 1, "min_chars": 40, "max_chars": 220, "rows": 0.5}
    save_data(cache, make_dataset(6, 1, 40, 220, rows=0.5), key)
    cache.write_text(mangle(json.loads(cache.read_text())))
    with pytest.raises(ValueError, match=f"data-6-1-40-220-rows0.5.json.*{why}"):
        train(out, TrainConfig(examples=6, eval_examples=2, steps=1, batch=4, rows=0.5), model_config=TINY,
              log=lambda *_: None)
