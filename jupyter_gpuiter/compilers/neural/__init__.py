"""The neural compiler: a seq2seq transformer that samples k candidate programs per source in one batch.

Unverified on its own (mode "neural"): a candidate is whatever the model wrote, decoded deterministically
into the IR. Only sources the serial compiler accepts reach the model; every other source gets the serial
compiler's CompileError. The hybrid compiler (compilers/hybrid.py) verifies candidates against the
traditional compiler before trusting them. The shipped checkpoint is `checkpoint.pt` next to this file;
`checkpoint.json` records how it was trained and what it scored; `gpuiter train-neural` retrains it.

Checkpoints are read with `torch.load(weights_only=True)`: tensors, numbers, strings and containers
only, so a checkpoint file cannot run code when it is loaded.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import torch

from ...ir import Program, ProgramBatch
from ...lang.diagnostics import error
from ...lang.errors import CompileError
from ..result import BatchResult
from . import tokens as tk
from .model import ModelConfig, Seq2Seq, pad_inputs

CHECKPOINT = Path(__file__).with_name("checkpoint.pt")
MODEL_CARD = Path(__file__).with_name("checkpoint.json")
#: Most candidates per source. Decoding is chunked, so memory does not grow with k, but time does: a
#: source the model misses in this many samples is one it has not learnt, and it falls back anyway.
MAX_K = 1024
_LOADED: dict[tuple[str, str], Seq2Seq] = {}


def read_checkpoint(path: str | Path, need: Sequence[str] = ("model", "model_config")) -> dict:
    """The dict saved in a checkpoint file, read without running code (`weights_only=True`).

    Raises FileNotFoundError for a missing file and ValueError, naming the file, for anything that is not a
    checkpoint dict holding the keys in `need`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no neural checkpoint at {path}; train one with `gpuiter train-neural`")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols before failing: the error says it
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            ck = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many types for a bad file; all mean "not a checkpoint"
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"{path} is not a loadable neural checkpoint (only tensors, numbers, strings and "
                         f"containers are read, never pickled code): {first}") from None
    if not isinstance(ck, dict):
        raise ValueError(  # noqa: TRY004 - the file's content is wrong, not an argument's type
            f"{path} is not a neural checkpoint: it holds a {type(ck).__name__}, not a dict")
    missing = [k for k in need if k not in ck]
    if missing:
        raise ValueError(f"{path} is not a neural checkpoint: no {', '.join(map(repr, missing))} entry")
    if "model" in need:
        state = ck["model"]
        if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                  for k, v in state.items()):
            raise ValueError(f"{path} is not a neural checkpoint: 'model' is not a dict of named tensors")
    return ck


def model_config_of(ck: dict, path: str | Path) -> ModelConfig:
    """The ModelConfig a checkpoint dict names, checked against what the tokens and sampler need."""
    cfg = ck.get("model_config")
    names = {f.name for f in fields(ModelConfig)}
    if not isinstance(cfg, dict) or set(cfg) - names:
        raise ValueError(f"{path}: 'model_config' must be a dict with keys among {sorted(names)}, got {cfg!r}")
    config = ModelConfig(**cfg)
    for f in fields(ModelConfig):
        v = getattr(config, f.name)
        number = (int, float) if f.name == "dropout" else int
        if not isinstance(v, number) or isinstance(v, bool) or v < 0:
            raise ValueError(f"{path}: model_config[{f.name!r}] must be a non-negative "
                             f"{'number' if f.name == 'dropout' else 'int'}, got {v!r}")
    if config.vocab != len(tk.VOCAB) or config.max_in < tk.MAX_IN or config.max_depth < tk.MAX_DEPTH:
        raise ValueError(f"{path}: the model was made for other tokens (vocab {config.vocab}, max_in "
                         f"{config.max_in}, max_depth {config.max_depth}; this version needs vocab "
                         f"{len(tk.VOCAB)}, max_in >= {tk.MAX_IN}, max_depth >= {tk.MAX_DEPTH})")
    if config.heads < 1 or config.d_model % config.heads:
        raise ValueError(f"{path}: d_model {config.d_model} is not a multiple of heads {config.heads}")
    return config


def model_from_checkpoint(ck: dict, path: str | Path) -> Seq2Seq:
    """A float32 Seq2Seq on the CPU from a checkpoint dict; ValueError when the weights do not fit it."""
    config = model_config_of(ck, path)
    vocab = ck.get("vocab")  # the token list, in checkpoints written since row kernels
    if vocab is not None and (not isinstance(vocab, list) or vocab != tk.VOCAB):
        if not isinstance(vocab, list):
            raise ValueError(f"{path}: 'vocab' must be a list of tokens, got a {type(vocab).__name__}")
        first = next((i for i, (a, b) in enumerate(zip(vocab, tk.VOCAB)) if a != b), min(len(vocab), len(tk.VOCAB)))
        raise ValueError(f"{path}: the model was made for other tokens (its vocabulary differs from this "
                         f"version's at id {first})")
    # Shapes are compared on the meta device first, so a config that does not match its weights (or
    # asks for a huge model) is refused before anything is allocated.
    with torch.device("meta"):
        want = {k: tuple(v.shape) for k, v in Seq2Seq(config).state_dict().items()}
    got = {k: tuple(v.shape) for k, v in ck["model"].items()}
    if want != got:
        diff = sorted(set(want) ^ set(got)) or [k for k in want if want[k] != got[k]]
        raise ValueError(f"{path}: the weights do not fit its model_config (first mismatch: {diff[0]!r})")
    model = Seq2Seq(config)
    model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in ck["model"].items()})
    return model


def load_model(path: str | Path | None = None, device=None) -> Seq2Seq:
    """The model of a checkpoint on a device, loaded once per process (the resident copy)."""
    path = Path(path) if path is not None else CHECKPOINT
    device = torch.device(device or "cpu")
    key = (str(path.resolve()), str(device))
    if key not in _LOADED:
        _LOADED[key] = model_from_checkpoint(read_checkpoint(path), path).to(device).eval()
    return _LOADED[key]


def model_card() -> dict:
    """What the shipped checkpoint was trained on and scored (checkpoint.json)."""
    return json.loads(MODEL_CARD.read_text()) if MODEL_CARD.exists() else {}


def check_k(k, limit: int = MAX_K) -> int:
    """k as an int in 1..limit, else a TypeError or ValueError saying why."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"k (candidates per source) must be an int, got {k!r}")
    if not 1 <= k <= limit:
        raise ValueError(f"k (candidates per source) must be between 1 and {limit}, got {k:,}: each candidate "
                         f"is decoded and checked, and a source the model misses {limit} times falls back to "
                         "the traditional compiler anyway")
    return k


@dataclass
class Candidates:
    """Per source: the encoded input (or the CompileError that stopped it) and k decoded candidates."""

    encoded: list[tk.Encoded | CompileError]
    programs: list[list[Program | tk.DecodeError]]  # empty for sources that did not encode


def sample_candidates(sources: Sequence[str], k: int = 1, temperature: float = 0.0, seed: int = 0,
                      model: Seq2Seq | None = None, device=None, batch_sequences: int = 2048,
                      generator: torch.Generator | None = None) -> Candidates:
    """k candidates per source in batched decodes (temperature 0: greedy, so k copies of one program).

    The raw model: sources are not checked beyond encoding (compile_batch checks them first). Sources
    are sorted by length; one decode holds at most `batch_sequences` sequences (a source's k candidates
    are split across decodes past that). `generator`: a random stream to continue instead of `seed`'s.
    """
    check_k(k)
    if batch_sequences < 1:
        raise ValueError(f"batch_sequences must be at least 1, got {batch_sequences}")
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
    if generator is None:
        generator = torch.Generator(device=dev).manual_seed(seed)
    k_step = min(k, batch_sequences)
    per = max(1, batch_sequences // k_step)
    for start in range(0, len(ok), per):
        rows = ok[start: start + per]
        encs = [encoded[i] for i in rows]
        src, depth, n_slots, n_params, n_literals = pad_inputs(encs)
        src, depth = src.to(dev), depth.to(dev)
        for done in range(0, k, k_step):
            # A postfix program is shorter than its source's tokens (each of its tokens stands for a distinct
            # source token, and the header alone has six), so decoding stops at the input width.
            out = model.sample(src, depth, n_slots, n_params, n_literals, k=min(k_step, k - done),
                               temperature=temperature, generator=generator, max_len=src.shape[1]).cpu()
            for j, (i, e) in enumerate(zip(rows, encs)):
                for seq in out[j].tolist():
                    programs[i].append(_decode(seq, e))
    return Candidates(encoded, programs)


def _decode(seq: list[int], enc: tk.Encoded) -> Program | tk.DecodeError:
    words = [tk.VOCAB[t] for t in seq]
    if "<eos>" not in words:
        return tk.DecodeError(f"unfinished: no end within {len(words)} tokens")
    try:
        return tk.decode(words[: words.index("<eos>")], enc)
    except tk.DecodeError as err:
        return err


def compile_batch(sources: Sequence[str], device=None, model: Seq2Seq | None = None,
                  model_path: str | Path | None = None) -> BatchResult:
    """Mode "neural": the greedy candidate per valid source, unverified (`model_path`: another checkpoint).

    The serial compiler checks every source first: an invalid one gets its CompileError, never a program.
    """
    from ...runtime.device import resolve
    from ..serial import compile_sources

    device = resolve(device)
    model = model or load_model(model_path, device)  # first, so a bad model_path fails on any batch
    results = compile_sources(sources)
    valid = [i for i, r in enumerate(results) if isinstance(r, Program)]
    cands = sample_candidates([sources[i] for i in valid], k=1, model=model)
    for i, enc, progs in zip(valid, cands.encoded, cands.programs):
        if isinstance(enc, CompileError):  # valid, but beyond the model's input size
            results[i] = enc
        elif isinstance(progs[0], Program):
            results[i] = progs[0]
        else:
            results[i] = error("neural_no_program", 1, 1, sources[i], reason=progs[0])
    return BatchResult(results, "neural", batch=ProgramBatch.from_results(results, device=device))


__all__ = ["CHECKPOINT", "MAX_K", "Candidates", "check_k", "compile_batch", "load_model", "model_card",
           "model_from_checkpoint", "read_checkpoint", "sample_candidates"]
