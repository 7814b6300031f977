"""The neural compiler: a seq2seq transformer that samples k candidate programs per source in one batch.

Unverified on its own (mode "neural"): a candidate is whatever the model wrote, decoded deterministically
into the IR. The hybrid compiler (compilers/hybrid.py) verifies candidates against the traditional
compiler before trusting them. The shipped checkpoint is `checkpoint.pt` next to this file;
`checkpoint.json` records how it was trained and what it scored; `gpuiter train-neural` retrains it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from ...ir import Program, ProgramBatch
from ...lang.errors import CompileError
from ..result import BatchResult
from . import tokens as tk
from .model import ModelConfig, Seq2Seq, pad_inputs

CHECKPOINT = Path(__file__).with_name("checkpoint.pt")
MODEL_CARD = Path(__file__).with_name("checkpoint.json")
_LOADED: dict[tuple[str, str], Seq2Seq] = {}


def load_model(path: str | Path | None = None, device=None) -> Seq2Seq:
    """The model of a checkpoint on a device, loaded once per process (the resident copy)."""
    path = Path(path) if path is not None else CHECKPOINT
    device = torch.device(device or "cpu")
    key = (str(path.resolve()), str(device))
    if key not in _LOADED:
        if not path.exists():
            raise FileNotFoundError(f"no neural checkpoint at {path}; train one with `gpuiter train-neural`")
        ck = torch.load(path, map_location="cpu", weights_only=False)
        model = Seq2Seq(ModelConfig(**ck["model_config"]))
        model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in ck["model"].items()})
        _LOADED[key] = model.to(device).eval()
    return _LOADED[key]


def model_card() -> dict:
    """What the shipped checkpoint was trained on and scored (checkpoint.json)."""
    return json.loads(MODEL_CARD.read_text()) if MODEL_CARD.exists() else {}


@dataclass
class Candidates:
    """Per source: the encoded input (or the CompileError that stopped it) and k decoded candidates."""

    encoded: list[tk.Encoded | CompileError]
    programs: list[list[Program | tk.DecodeError]]  # empty for sources that did not encode


def sample_candidates(sources: Sequence[str], k: int = 1, temperature: float = 0.0, seed: int = 0,
                      model: Seq2Seq | None = None, device=None, batch_sequences: int = 2048) -> Candidates:
    """k candidates per source in batched decodes (temperature 0: greedy, so k copies of one program).

    Sources are sorted by length and decoded `batch_sequences // k` at a time.
    """
    model = model or load_model(device=device)
    dev = next(model.parameters()).device
    encoded: list[tk.Encoded | CompileError] = []
    for s in sources:
        try:
            encoded.append(tk.encode(s))
        except CompileError as e:
            encoded.append(e)
    ok = [i for i, e in enumerate(encoded) if isinstance(e, tk.Encoded)]
    ok.sort(key=lambda i: len(encoded[i].ids))
    programs: list[list] = [[] for _ in sources]
    generator = torch.Generator(device=dev).manual_seed(seed)
    per = max(1, batch_sequences // max(k, 1))
    for start in range(0, len(ok), per):
        rows = ok[start: start + per]
        encs = [encoded[i] for i in rows]
        src, depth, n_slots, n_params, n_literals = pad_inputs(encs)
        # A postfix program is shorter than its source's tokens (each of its tokens stands for a distinct
        # source token, and the header alone has six), so decoding stops at the input width.
        out = model.sample(src.to(dev), depth.to(dev), n_slots, n_params, n_literals, k=k,
                           temperature=temperature, generator=generator, max_len=src.shape[1]).cpu()
        for j, (i, e) in enumerate(zip(rows, encs)):
            for seq in out[j].tolist():
                words = [tk.VOCAB[t] for t in seq]
                if "<eos>" not in words:
                    programs[i].append(tk.DecodeError(f"unfinished: no end within {len(words)} tokens"))
                    continue
                words = words[: words.index("<eos>")]
                try:
                    programs[i].append(tk.decode(words, e))
                except tk.DecodeError as err:
                    programs[i].append(err)
    return Candidates(encoded, programs)


def compile_batch(sources: Sequence[str], device=None, model: Seq2Seq | None = None,
                  model_path: str | Path | None = None) -> BatchResult:
    """Mode "neural": the greedy candidate per source, unverified (`model_path`: another checkpoint)."""
    from ...runtime.device import resolve

    device = resolve(device)
    model = model or load_model(model_path, device)
    cands = sample_candidates(sources, k=1, model=model)
    results: list[Program | CompileError] = []
    for s, enc, progs in zip(sources, cands.encoded, cands.programs):
        if isinstance(enc, CompileError):
            results.append(enc)
        elif isinstance(progs[0], Program):
            results.append(progs[0])
        else:
            results.append(CompileError("neural", 1, 1, f"the neural compiler wrote no valid program "
                                        f"({progs[0]}); use mode='hybrid' or 'traditional'", s))
    return BatchResult(results, "neural", batch=ProgramBatch.from_results(results, device=device))


__all__ = ["CHECKPOINT", "Candidates", "compile_batch", "load_model", "model_card", "sample_candidates"]
