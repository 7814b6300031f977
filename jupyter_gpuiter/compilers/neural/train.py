"""Training the neural compiler: data from the program generator and the serial compiler, resumable.

`gpuiter train-neural` calls `train()`. Data: generated programs of at most `max_chars` characters
(sizes drawn uniformly up to it), a share `rows` of them row kernels, their abstracted tokens as input and
the postfix of their serial IR as target. Every `eval_every` steps the model is scored on fixed held-out
sets (another seed; elementwise programs and row kernels apart) and a checkpoint is written; `--resume`
continues from the last one. `init` starts from another checkpoint's weights instead (fine-tuning): one
made for an older vocabulary gets the tokens added since as new embedding rows, the trained rows kept.

Nothing read back can run code: checkpoints are loaded with `weights_only=True` and the generated
training data is cached as JSON (`data-*.json`), checked field by field when it is read.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import torch.nn.functional as F

from ...generate import generate
from ...lang.errors import CompileError
from . import model_from_checkpoint, read_checkpoint
from . import tokens as tk
from .model import ModelConfig, Seq2Seq, pad_inputs

DATA_FORMAT = "gpuiter-neural-data/1"
_TRAINING_KEYS = ("model", "model_config", "optimizer", "step", "history", "train_config")


@dataclass
class TrainConfig:
    examples: int = 200_000
    data_seed: int = 1
    eval_seed: int = 2
    eval_examples: int = 400
    min_chars: int = 40
    max_chars: int = 220
    batch: int = 96
    lr: float = 2e-3
    warmup: int = 400
    steps: int = 30_000
    minutes: float = 120.0
    eval_every: int = 1000
    seed: int = 0
    threads: int = 0  # 0: torch's default
    rows: float = 0.35  # the share of row kernels among the training programs (generate's `rows`)
    init: str = ""  # a checkpoint whose weights a new run starts from (fine-tuning); "" for random ones


def make_example(source: str) -> tuple[tk.Encoded, list[int]] | None:
    """(encoded input, target ids) for a valid source the model can take, else None."""
    try:
        enc = tk.encode(source)
    except CompileError:
        return None
    target = [tk.INDEX[t] for t in tk.postfix(source, enc)] + [tk.EOS]
    return (enc, target) if len(target) < tk.MAX_OUT else None


def make_dataset(n: int, seed: int, min_chars: int, max_chars: int, progress=None, rows: float = 0.0,
                 longer_than: int = 0) -> list[tuple]:
    """`n` examples from one seeded stream of generated programs with sizes spread over the range, a share
    `rows` of them row kernels (1.0: only row kernels); `longer_than`: keep only longer sources."""
    rng = random.Random(seed)
    data = []
    while len(data) < n:
        src = generate(rng, max_chars=rng.randint(min_chars, max_chars), rows=rows)
        ex = make_example(src) if len(src) > longer_than else None
        if ex is not None:
            data.append((src, *ex))
            if progress is not None:
                progress.update(1)
    return data


def save_data(path: Path, data: list[tuple], key: dict) -> None:
    """The training examples as JSON (no pickle: a cache left in a folder cannot carry code)."""
    rows = [[src, asdict(enc), target] for src, enc, target in data]
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"format": DATA_FORMAT, "key": key, "examples": rows}))
    tmp.replace(path)


def load_data(path: Path, key: dict) -> list[tuple]:
    """Examples saved by save_data for the same `key`; ValueError naming the file for anything else."""
    def bad(why: str):
        return ValueError(f"{path} is not a training data cache of this version ({why}); delete it and the "
                          "data is generated again")

    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise bad(f"unreadable JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != DATA_FORMAT:
        raise bad(f"format is not {DATA_FORMAT!r}")
    if doc.get("key") != key:
        raise bad(f"made for {doc.get('key')!r}, not {key!r}")
    rows = doc.get("examples")
    if not isinstance(rows, list) or len(rows) != key["examples"]:
        raise bad(f"expected a list of {key['examples']} examples")
    names = [f.name for f in fields(tk.Encoded)]
    vocab = len(tk.VOCAB)

    def ints(v, hi=None) -> bool:
        return isinstance(v, list) and all(type(x) is int and 0 <= x and (hi is None or x < hi) for x in v)

    data = []
    for n, row in enumerate(rows):
        ok = isinstance(row, list) and len(row) == 3 and isinstance(row[0], str) and isinstance(row[1], dict)
        enc = row[1] if ok else {}
        ok = ok and sorted(enc) == sorted(names) and ints(enc["ids"], vocab) and ints(enc["depth"], tk.MAX_DEPTH)
        ok = ok and len(enc["ids"]) == len(enc["depth"]) <= tk.MAX_IN and ints(row[2], vocab) and len(row[2]) > 0
        ok = ok and all(type(enc[f]) is int for f in ("n_slots", "n_params")) and isinstance(enc["fn_name"], str)
        ok = ok and isinstance(enc["literals"], list) and all(type(x) in (int, float) for x in enc["literals"])
        ok = ok and isinstance(enc["slot_names"], list) and all(isinstance(x, str) for x in enc["slot_names"])
        if not ok:
            raise bad(f"example {n} is malformed")
        data.append((row[0], tk.Encoded(**{**enc, "literals": [float(x) for x in enc["literals"]]}), row[2]))
    return data


def collate(examples, device="cpu"):
    """Padded tensors: src, depth, tgt_in, tgt_out, n_slots, n_params, n_literals."""
    src, depth, n_slots, n_params, n_literals = pad_inputs([e for _, e, _ in examples])
    lo = max(len(t) for _, _, t in examples)
    tgt_in = torch.full((len(examples), lo), tk.PAD, dtype=torch.long)
    tgt_out = torch.full((len(examples), lo), tk.PAD, dtype=torch.long)
    for i, (_, _, t) in enumerate(examples):
        tgt_in[i, 0] = tk.BOS
        tgt_in[i, 1: len(t)] = torch.tensor(t[:-1])
        tgt_out[i, : len(t)] = torch.tensor(t)
    return [x.to(device) for x in (src, depth, tgt_in, tgt_out, n_slots, n_params, n_literals)]


def exact_match(model: Seq2Seq, examples, batch: int = 128, device="cpu") -> float:
    """Share of examples whose greedy decode is exactly the target."""
    model.eval()
    hits = 0
    for i in range(0, len(examples), batch):
        chunk = examples[i: i + batch]
        src, depth, _, _, n_slots, n_params, n_lit = collate(chunk, device)
        out = model.sample(src, depth, n_slots, n_params, n_lit, k=1)[:, 0]
        for row, (_, _, t) in zip(out.tolist(), chunk):
            hits += row[: len(t)] == t
    return hits / max(len(examples), 1)


def save_checkpoint(path: Path, model: Seq2Seq, opt, step: int, cfg: TrainConfig, history: list,
                    minutes: float) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step, "minutes": minutes,
                "model_config": model.config.to_dict(), "train_config": asdict(cfg), "history": history,
                "vocab": list(tk.VOCAB)}, tmp)
    tmp.replace(path)


def init_model(path: str | Path, seed: int = 0) -> Seq2Seq:
    """A model with a checkpoint's weights, to fine-tune. A checkpoint made for an older vocabulary (whose
    ids are a prefix of this one's, tokens.PAST_VOCAB_SIZES) gets an embedding row per token added since,
    drawn like a new model's; the trained rows, and the tied output projection with them, are kept."""
    ck = read_checkpoint(path)
    cfg = ck["model_config"]
    old = cfg.get("vocab") if isinstance(cfg, dict) else None
    if old in tk.PAST_VOCAB_SIZES and "embed.weight" in ck["model"]:
        w = ck["model"]["embed.weight"].float()
        g = torch.Generator().manual_seed(seed)
        extra = torch.randn(len(tk.VOCAB) - old, w.shape[1], generator=g) * w.shape[1] ** -0.5
        ck = {**ck, "model": {**ck["model"], "embed.weight": torch.cat([w, extra])},
              "model_config": {**cfg, "vocab": len(tk.VOCAB)}}
    return model_from_checkpoint(ck, path)


def export(checkpoint: str | Path, out: str | Path, notes: dict | None = None) -> Path:
    """A shippable copy of a training checkpoint: float16 weights, configs and the recorded scores."""
    ck = read_checkpoint(checkpoint, _TRAINING_KEYS[:2] + ("train_config", "step", "history"))
    model_from_checkpoint(ck, checkpoint)  # the weights fit their config
    state = {k: v.half() if v.is_floating_point() else v for k, v in ck["model"].items()}
    out = Path(out)
    torch.save({"model": state, "model_config": ck["model_config"], "train_config": ck["train_config"],
                "step": ck["step"], "history": ck["history"], "notes": notes or {}, "vocab": list(tk.VOCAB)}, out)
    return out


def held_out_accuracy(model: Seq2Seq, held_out: int = 1000, seed: int = 90_000, device="cpu") -> dict:
    """Exact match at k=1 on held-out generated programs (seed `seed`): elementwise ones of up to 80 and
    160 characters, row kernels of up to 160 characters, and row kernels longer than 160 (161-320)."""
    elementwise = make_dataset(held_out, seed, 30, 160)
    rows = make_dataset(held_out, seed, 30, 160, rows=1.0)
    longer = make_dataset(held_out // 4, seed, 161, 320, rows=1.0, longer_than=160)
    return {"held_out_programs": held_out, "held_out_seed": seed,
            **{f"exact_match_k1_le{b}": exact_match(model, [d for d in elementwise if len(d[0]) <= b],
                                                     device=device) for b in (80, 160)},
            "row_kernels": held_out, "exact_match_k1_rows_le160": exact_match(model, rows, device=device),
            "longer_row_kernels": len(longer), "exact_match_k1_rows_161_320": exact_match(model, longer,
                                                                                           device=device)}


def write_card(checkpoint: str | Path, card_path: str | Path, command: str, held_out: int = 1000,
               seed: int = 90_000, notes: dict | None = None) -> dict:
    """checkpoint.json: how a checkpoint was made and its exact match at k=1 on held-out programs."""
    ck = read_checkpoint(checkpoint, _TRAINING_KEYS[:2] + ("train_config", "step", "history"))
    model = model_from_checkpoint(ck, checkpoint).eval()
    card = {"command": command, "step": ck["step"], "train_config": ck["train_config"],
            "model_config": ck["model_config"], "data_seed": ck["train_config"]["data_seed"],
            "parameters": sum(v.numel() for v in ck["model"].values()),
            "accuracy": held_out_accuracy(model, held_out, seed), **(notes or {}),
            "history": ck["history"]}
    Path(card_path).write_text(json.dumps(card, indent=2) + "\n")
    return card


def _log(*args) -> None:
    print(*args, flush=True)  # a run in the background writes to a file: each line as it comes


def train(out_dir: str | Path, cfg: TrainConfig | None = None, model_config: ModelConfig | None = None,
          resume: bool = False, device: str = "cpu", log=_log) -> Path:
    """Train (or resume) and return the path of the last checkpoint."""
    from tqdm.auto import tqdm

    cfg = cfg or TrainConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    ckpt = out / "last.pt"
    state = read_checkpoint(ckpt, _TRAINING_KEYS) if resume and ckpt.exists() else None
    if state is not None:
        saved = state["train_config"]
        known = {f.name for f in fields(TrainConfig)}
        if not isinstance(saved, dict) or set(saved) - known:
            raise ValueError(f"{ckpt}: 'train_config' must be a dict with keys among {sorted(known)}")
        cfg = TrainConfig(**{**asdict(cfg), **{k: v for k, v in saved.items()
                                                if k not in ("minutes", "steps", "threads", "eval_every")}})
        model = model_from_checkpoint(state, ckpt).to(device)
    elif cfg.init:
        model = init_model(cfg.init, cfg.seed).to(device)
        log(f"starting from the weights of {cfg.init}")
    else:
        model = Seq2Seq(model_config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), weight_decay=0.01)
    step, history = 0, []
    if state is not None:
        try:
            opt.load_state_dict(state["optimizer"])
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{ckpt}: its optimizer state does not fit the model: {e}") from None
        step, history = state["step"], state["history"]
        if type(step) is not int or not isinstance(history, list):
            raise ValueError(f"{ckpt}: 'step' must be an int and 'history' a list")
        log(f"resumed at step {step}")
    (out / "config.json").write_text(json.dumps({"train": asdict(cfg), "model": model.config.to_dict()}, indent=2))
    log(f"model: {sum(p.numel() for p in model.parameters()):,} parameters")
    key = {"examples": cfg.examples, "data_seed": cfg.data_seed, "min_chars": cfg.min_chars,
           "max_chars": cfg.max_chars, "rows": cfg.rows}
    stem = f"data-{cfg.examples}-{cfg.data_seed}-{cfg.min_chars}-{cfg.max_chars}-rows{cfg.rows:g}"
    cache = out / f"{stem}.json"
    if (out / f"{stem}.pt").exists():
        log(f"ignoring {out / f'{stem}.pt'}: pickled data caches are no longer read (they can run code)")
    if cache.exists():  # a resumed run reads the same programs back instead of generating them again
        data = load_data(cache, key)
    else:
        with tqdm(total=cfg.examples, desc="data", unit="prog", mininterval=5) as bar:
            data = make_dataset(cfg.examples, cfg.data_seed, cfg.min_chars, cfg.max_chars, bar, rows=cfg.rows)
        save_data(cache, data, key)
    held_out = make_dataset(cfg.eval_examples, cfg.eval_seed, cfg.min_chars, 160)
    held_out_rows = make_dataset(cfg.eval_examples, cfg.eval_seed, cfg.min_chars, 160, rows=1.0)
    # Batches of similar input length waste less padding.
    data.sort(key=lambda e: len(e[1].ids))
    batches = [data[i: i + cfg.batch] for i in range(0, len(data), cfg.batch)]
    rng = random.Random(cfg.seed + step)

    # The schedule follows whichever budget runs out first, steps or minutes, so a run on a busy machine
    # still anneals its learning rate before it stops.
    spent = state.get("minutes", 0.0) if state is not None else 0.0

    def lr_at(s, minutes):
        if s < cfg.warmup:
            return cfg.lr * (s + 1) / cfg.warmup
        progress = max((s - cfg.warmup) / max(1, cfg.steps - cfg.warmup), minutes / cfg.minutes)
        return cfg.lr * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))

    t0 = time.monotonic() - spent * 60
    bar = tqdm(total=cfg.steps, initial=step, desc="train", unit="step", mininterval=10)
    model.train()
    losses = []
    while step < cfg.steps and (time.monotonic() - t0) < cfg.minutes * 60:
        chunk = rng.choice(batches)
        src, depth, tgt_in, tgt_out, *_ = collate(chunk, device)
        logits = model(src, depth, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=tk.PAD)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, (time.monotonic() - t0) / 60)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        step += 1
        bar.update(1)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            acc = exact_match(model, held_out, device=device)
            acc_rows = exact_match(model, held_out_rows, device=device)
            model.train()
            entry = {"step": step, "loss": sum(losses) / len(losses), "exact_match_le160": acc,
                     "exact_match_rows_le160": acc_rows, "minutes": (time.monotonic() - t0) / 60}
            history.append(entry)
            losses = []
            log(json.dumps(entry))
            save_checkpoint(ckpt, model, opt, step, cfg, history, entry["minutes"])
    bar.close()
    save_checkpoint(ckpt, model, opt, step, cfg, history, (time.monotonic() - t0) / 60)
    return ckpt
