"""The seq2seq transformer and its batched, grammar-constrained sampler.

A pre-norm encoder-decoder (token + position + bracket-depth embeddings in, tied output projection).
Decoding runs all B×k sequences in one loop over output positions with a key/value cache, on whatever
device the model is on. The sampler masks tokens the postfix grammar cannot take next (stack underflow,
a slot the source does not have, more `NUM`s than literals, `RET` before one value is left): a check
on the syntax of the output, not on its meaning, which the hybrid's verification covers.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import tokens as tk


@dataclass
class ModelConfig:
    d_model: int = 128
    heads: int = 4
    encoder_layers: int = 3
    decoder_layers: int = 2
    ff: int = 512
    dropout: float = 0.0
    vocab: int = len(tk.VOCAB)
    max_in: int = tk.MAX_IN
    max_out: int = tk.MAX_OUT
    max_depth: int = tk.MAX_DEPTH

    def to_dict(self) -> dict:
        return asdict(self)


def pad_inputs(encoded: list[tk.Encoded]) -> tuple[torch.Tensor, ...]:
    """What the model reads for a list of encoded sources: src and depth [B, L] (PAD-filled), then
    n_slots, n_params and n_literals [B]."""
    width = max(len(e.ids) for e in encoded)
    src = torch.full((len(encoded), width), tk.PAD, dtype=torch.long)
    depth = torch.zeros((len(encoded), width), dtype=torch.long)
    for i, e in enumerate(encoded):
        src[i, : len(e.ids)] = torch.tensor(e.ids)
        depth[i, : len(e.ids)] = torch.tensor(e.depth)
    meta = torch.tensor([[e.n_slots, e.n_params, len(e.literals)] for e in encoded], dtype=torch.long)
    return src, depth, meta[:, 0], meta[:, 1], meta[:, 2]


class _Attention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * d)
        self.out = nn.Linear(d, d)

    def split(self, x):
        b, t, d = x.shape
        return x.view(b, t, self.heads, d // self.heads).transpose(1, 2)

    def keys_values(self, x):
        k, v = self.kv(x).chunk(2, dim=-1)
        return self.split(k), self.split(v)

    def forward(self, x, k, v, mask=None, causal=False):
        q = self.split(self.q(x))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        b, h, t, dh = y.shape
        return self.out(y.transpose(1, 2).reshape(b, t, h * dh))


class _EncoderLayer(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.attn = _Attention(c.d_model, c.heads)
        self.ff = nn.Sequential(nn.Linear(c.d_model, c.ff), nn.GELU(), nn.Linear(c.ff, c.d_model))
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x, mask):
        h = self.n1(x)
        k, v = self.attn.keys_values(h)
        x = x + self.drop(self.attn(h, k, v, mask))
        return x + self.drop(self.ff(self.n2(x)))


class _DecoderLayer(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.n1, self.n2, self.n3 = (nn.LayerNorm(c.d_model) for _ in range(3))
        self.self_attn = _Attention(c.d_model, c.heads)
        self.cross = _Attention(c.d_model, c.heads)
        self.ff = nn.Sequential(nn.Linear(c.d_model, c.ff), nn.GELU(), nn.Linear(c.ff, c.d_model))
        self.drop = nn.Dropout(c.dropout)

    def forward(self, x, memory_kv, memory_mask, cache=None):
        h = self.n1(x)
        k, v = self.self_attn.keys_values(h)
        if cache is None:
            x = x + self.drop(self.self_attn(h, k, v, causal=True))
            new_cache = None
        else:  # one new position: attend to everything cached so far
            if cache[0] is not None:
                k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)
            x = x + self.self_attn(h, k, v)
            new_cache = (k, v)
        x = x + self.drop(self.cross(self.n2(x), *memory_kv, memory_mask))
        return x + self.drop(self.ff(self.n3(x))), new_cache


class Seq2Seq(nn.Module):
    """Abstracted source tokens → postfix IR tokens."""

    def __init__(self, config: ModelConfig | None = None):
        super().__init__()
        c = self.config = config or ModelConfig()
        self.embed = nn.Embedding(c.vocab, c.d_model, padding_idx=tk.PAD)
        self.pos_in = nn.Embedding(c.max_in, c.d_model)
        self.pos_out = nn.Embedding(c.max_out + 1, c.d_model)
        self.depth = nn.Embedding(c.max_depth, c.d_model)
        self.encoder = nn.ModuleList(_EncoderLayer(c) for _ in range(c.encoder_layers))
        self.decoder = nn.ModuleList(_DecoderLayer(c) for _ in range(c.decoder_layers))
        self.enc_norm, self.dec_norm = nn.LayerNorm(c.d_model), nn.LayerNorm(c.d_model)
        self.scale = c.d_model ** 0.5
        nn.init.normal_(self.embed.weight, std=c.d_model ** -0.5)

    @staticmethod
    def _key_mask(src):  # [B, 1, 1, L] additive mask over padded source positions
        return torch.zeros(src.shape, dtype=torch.float32, device=src.device).masked_fill(
            src == tk.PAD, float("-inf"))[:, None, None, :]

    def encode(self, src, depth):
        """Memory key/values per decoder layer, and the source padding mask."""
        pos = torch.arange(src.shape[1], device=src.device)
        x = self.embed(src) * self.scale + self.pos_in(pos) + self.depth(depth)
        mask = self._key_mask(src).to(x.dtype)
        for layer in self.encoder:
            x = layer(x, mask)
        memory = self.enc_norm(x)
        return [layer.cross.keys_values(memory) for layer in self.decoder], mask

    def _embed_out(self, tgt, start: int = 0):
        pos = torch.arange(start, start + tgt.shape[1], device=tgt.device)
        return self.embed(tgt) * self.scale + self.pos_out(pos)

    def forward(self, src, depth, tgt_in):
        """Teacher-forced logits [B, T, V]."""
        memory_kv, mask = self.encode(src, depth)
        x = self._embed_out(tgt_in)
        for layer, kv in zip(self.decoder, memory_kv):
            x, _ = layer(x, kv, mask)
        return self.dec_norm(x) @ self.embed.weight.T

    @torch.no_grad()
    def sample(self, src, depth, n_slots, n_params, n_literals, k: int = 1, temperature: float = 0.0,
               generator: torch.Generator | None = None, max_len: int | None = None):
        """k postfix sequences per source in one batched decode: token ids [B, k, T] (EOS-padded).

        temperature 0 is greedy; otherwise sampling at that temperature. Constrained by the postfix
        grammar (see the module docstring); sequences that cannot finish stay unfinished (no EOS).
        """
        c = self.config
        b = src.shape[0]
        dev = src.device
        memory_kv, mask = self.encode(src, depth)
        memory_kv = [(kk.repeat_interleave(k, 0), vv.repeat_interleave(k, 0)) for kk, vv in memory_kv]
        mask = mask.repeat_interleave(k, 0)
        n = b * k
        n_slots = n_slots.to(dev).repeat_interleave(k)
        literals_left = n_literals.to(dev).repeat_interleave(k).clone()
        g = _Grammar(dev)
        stack = torch.zeros(n, dtype=torch.long, device=dev)
        state = torch.zeros(n, dtype=torch.long, device=dev)  # 0 free, 1 after SET, 2 after a fold op
        n_params = n_params.to(dev).repeat_interleave(k)
        bound = torch.arange(tk.MAX_SLOTS, device=dev)[None, :] < n_params[:, None]  # parameters are bound
        done = torch.zeros(n, dtype=torch.bool, device=dev)
        out = torch.full((n, 0), tk.EOS, dtype=torch.long, device=dev)
        token = torch.full((n, 1), tk.BOS, dtype=torch.long, device=dev)
        caches = [(None, None)] * len(self.decoder)
        limit = min(max_len or c.max_out, c.max_out)
        for t in range(limit):
            x = self._embed_out(token, t)
            new = []
            for layer, kv, cache in zip(self.decoder, memory_kv, caches):
                x, cache = layer(x, kv, mask, cache)
                new.append(cache)
            caches = new
            logits = (self.dec_norm(x[:, -1]) @ self.embed.weight.T).float()
            allowed = g.allowed(stack, state, n_slots, bound, literals_left, done)
            logits = logits.masked_fill(~allowed, float("-inf"))
            if temperature > 0:
                probs = torch.softmax(logits / temperature, -1)
                nxt = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            else:
                nxt = logits.argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, tk.EOS), nxt)
            stack, state, bound, literals_left = g.step(nxt, stack, state, bound, literals_left)
            done = done | (nxt == tk.EOS)
            out = torch.cat([out, nxt[:, None]], 1)
            token = nxt[:, None]
            if bool(done.all()):  # one host sync per step; decoding stops when every sequence ended
                break
        return out.view(b, k, -1)


class _Grammar:
    """Vectorised next-token masks of the postfix language."""

    def __init__(self, device):
        pops, pushes = tk.stack_effects()
        self.pops = torch.tensor(pops, device=device)
        need = list(pops)
        for f in tk._FOLDS:
            need[tk.INDEX[f]] = 2  # a fold op pops nothing itself, but its count token needs 2 or more
        self.need = torch.tensor(need, device=device)
        self.pushes = torch.tensor(pushes, device=device)
        v = len(tk.VOCAB)
        idx = torch.arange(v, device=device)
        self.is_slot = (idx >= tk.INDEX["S0"]) & (idx < tk.INDEX["S0"] + tk.MAX_SLOTS)
        self.slot_of = (idx - tk.INDEX["S0"]).clamp(0, tk.MAX_SLOTS - 1)
        self.is_count = torch.zeros(v, dtype=torch.bool, device=device)
        self.is_count[[tk.INDEX[f"#{n}"] for n in range(2, tk._MAX_FOLD + 1)]] = True
        self.is_fold = torch.zeros(v, dtype=torch.bool, device=device)
        self.is_fold[[tk.INDEX[f] for f in tk._FOLDS]] = True
        self.num, self.set, self.ret = tk.INDEX["NUM"], tk.INDEX["SET"], tk.INDEX["RET"]

    def allowed(self, stack, state, n_slots, bound, literals_left, done):
        n = stack.shape[0]
        ok = (self.need[None, :] >= 0) & (self.need[None, :] <= stack[:, None])
        ok &= ~self.is_slot[None, :] | bound[:, self.slot_of]
        ok[:, self.num] &= literals_left > 0
        ok[:, tk.EOS] = False
        ok[:, self.ret] &= (stack == 1) & (literals_left == 0)
        ok[:, self.set] &= n_slots > 0
        ok &= ~self.is_count[None, :]
        free = state == 0
        ok &= free[:, None]
        after_set = (state == 1)[:, None] & self.is_slot[None, :] & (self.slot_of[None, :] < n_slots[:, None])
        after_fold = (state == 2)[:, None] & self.is_count[None, :] & (self.pops[None, :] <= stack[:, None])
        ok = ok | after_set | after_fold
        finished = (state == 3) | done
        ok[finished] = False
        ok[:, tk.EOS] |= finished | ~ok.any(1)  # a sequence with no way on ends unfinished
        return ok.reshape(n, -1)

    def step(self, nxt, stack, state, bound, literals_left):
        was_set = state == 1
        delta = self.pushes[nxt] - self.pops[nxt]
        stack = torch.where(was_set, stack, stack + delta)  # the slot after SET pushes nothing
        bound = bound.clone()
        rows = torch.arange(nxt.shape[0], device=nxt.device)
        bound[rows, self.slot_of[nxt]] |= was_set & self.is_slot[nxt]
        literals_left = literals_left - (nxt == self.num).long()
        new_state = torch.zeros_like(state)
        new_state = torch.where(nxt == self.set, 1, new_state)
        new_state = torch.where(self.is_fold[nxt] & ~was_set, 2, new_state)
        new_state = torch.where((nxt == self.ret) | (state == 3), 3, new_state)
        return stack, new_state, bound, literals_left
