"""Small tensor helpers shared by the passes: neighbours, scans, gathers, table lookups, error keys."""

from __future__ import annotations

import functools
from typing import ClassVar

import torch

BIG = 1 << 40
# An error is one int64 key, ordered as the language orders errors: by line, column, priority, kind
# code; the low bits carry the message id. Min-reducing keys picks the first error.
_COL, _PRIO, _CODE, _MSG = 1 << 14, 1 << 12, 8, 256


_AT = _PRIO * _CODE * _MSG  # weight of (line * _COL + col) in a key


def _constant(priority: int, code: int, msg: int) -> int:
    """The part of an error key after its place."""
    return (priority + 1) * (_CODE * _MSG) + code * _MSG + msg


def error_key(line, col, priority, code, msg):
    """The key of an error at (line, col) (tensors of any integer dtype, or ints): int64."""
    if isinstance(line, torch.Tensor):
        line = line.long()
    return (line * _COL + col) * _AT + _constant(priority, code, msg)


def decode_key(key: int) -> tuple[int, int, int, int]:
    """(line, col, kind code, message id) of an error key."""
    msg = key % _MSG
    key //= _MSG
    code = key % _CODE
    key //= _CODE * _PRIO
    return key // _COL, key % _COL, code, msg


def decode_keys(keys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """On the device: ([B, 3] (kind code, line, col), [B] message id) of error keys."""
    msg = keys % _MSG
    k = keys // _MSG
    code = k % _CODE
    k = k // (_CODE * _PRIO)
    return torch.stack([code, k // _COL, k % _COL], 1), msg


NO_ERROR = error_key(1 << 20, 0, 0, 0, 0)


class FirstError:
    """The first error of each program across many rules located at tokens.

    A rule is a mask over tokens [B, T] plus a constant (priority, kind code, message id). A key
    orders by place first, so until the end only each token's smallest constant matters: the
    constants a caller may use (at most 255) are ranked once, and each rule is one uint8 maximum over
    [B, T] (255 - rank, 0 for none: a quarter of the memory traffic of int32, and no conversion of
    the mask); `key` then reads the first failing token of each row and builds its int64 key there."""

    _TABLES: ClassVar[dict] = {}  # (constants, device) -> (gain per constant, 0-dim uint8 tensors, constant per gain)

    def __init__(self, line: torch.Tensor, col: torch.Tensor, valid: torch.Tensor, constants: tuple):
        """line, col [B, T]: the tokens' places; valid: where errors count; constants: every
        (priority, kind code, message id) at_tokens may be given."""
        self._key = torch.full((line.shape[0],), NO_ERROR, dtype=torch.long, device=line.device)
        self._line, self._col, self._valid = line, col, valid
        self._gain: torch.Tensor | None = None  # [B, T] uint8: 255 - rank of the smallest constant there, or 0
        if (constants, line.device) not in self._TABLES:
            ranked = sorted({_constant(*c) for c in constants})
            assert len(ranked) < 256, "a FirstError ranks at most 255 constants"
            gain = {c: 255 - i for i, c in enumerate(ranked)}
            by_gain = torch.zeros(256, dtype=torch.long, device=line.device)
            by_gain[list(gain.values())] = torch.tensor(list(gain), device=line.device)
            tensors = {g: torch.tensor(g, dtype=torch.uint8, device=line.device) for g in gain.values()}
            self._TABLES[constants, line.device] = (gain, tensors, by_gain)
        self._gain_of, self._tensors, self._by_gain = self._TABLES[constants, line.device]

    def at_tokens(self, mask: torch.Tensor, priority: int, code: int, msg: int) -> None:
        """Record the rule that fails at the tokens where `mask`."""
        g = mask.view(torch.uint8) * self._tensors[self._gain_of[_constant(priority, code, msg)]]
        self._gain = g if self._gain is None else torch.maximum(self._gain, g, out=self._gain)

    @property
    def key(self) -> torch.Tensor:
        """[B] the first error's key, NO_ERROR where none."""
        if self._gain is not None:
            first = first_true(self._gain.bool() & self._valid)
            at = first.clamp(min=0).long()[:, None]  # (torch < 2.8 gathers by int64 indices only)
            place = self._line.gather(1, at)[:, 0] * _COL + self._col.gather(1, at)[:, 0]  # fits an int32
            key = place.long() * _AT + self._by_gain[self._gain.gather(1, at)[:, 0].long()]
            self._key = torch.minimum(self._key, torch.where(first >= 0, key, NO_ERROR))
            self._gain = None
        return self._key

    def add_rows(self, mask: torch.Tensor, key) -> None:
        """Record a per-program error [B] (a key or one key for all rows) where `mask`."""
        # an int key is a clamp bound: made a tensor, it would be an upload, and on CUDA a sync
        capped = self._key.clamp(max=key) if isinstance(key, int) else torch.minimum(self._key, key)
        self._key = torch.where(mask, capped, self._key)


def eq(x: torch.Tensor, c) -> torch.Tensor:
    """x == c for integer tensors (c a tensor or an int). Below 64 bits as ~(x ^ c).bool(): on a CPU an
    xor, a nonzero test and a not cost 12-16 us on [500, 200] against 22 for `==` (`gpuiter bench ops`);
    for int64 they cost more (33), so int64 keeps `==`."""
    return x == c if x.dtype == torch.int64 else ~(x ^ c).bool()


def ne(x: torch.Tensor, c) -> torch.Tensor:
    """x != c for integer tensors, as (x ^ c).bool(): 8-19 us against 22-27 for `!=` at every width."""
    return (x ^ c).bool()


def select(mask: torch.Tensor, a, b) -> torch.Tensor:
    """torch.where(mask, a, b) for integer values (tensors of one dtype, or a tensor and an int).

    On a CPU as arithmetic, (a - b) * mask + b with one temporary (exact under wrapping): torch's CPU
    `where` over a full [B, T] mask is not vectorised (~0.5-3.5 ns an element, depending on how
    regular the mask is, against ~0.1 for an int32 operation)."""
    if mask.is_cuda or not (isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor)):
        return torch.where(mask, a, b)
    return (a - b).mul_(mask).add_(b)


def shift_right(x: torch.Tensor, fill) -> torch.Tensor:
    """x[:, i-1] at i (fill at 0)."""
    return torch.cat([torch.full_like(x[:, :1], fill), x[:, :-1]], 1)


def shift_left(x: torch.Tensor, fill) -> torch.Tensor:
    """x[:, i+1] at i (fill at the end)."""
    return torch.cat([x[:, 1:], torch.full_like(x[:, :1], fill)], 1)


def positions(x: torch.Tensor, dtype: torch.dtype = torch.int32) -> torch.Tensor:
    """[B, T] token positions (a broadcast view)."""
    B, T = x.shape[:2]
    return torch.arange(T, dtype=dtype, device=x.device).expand(B, T)


@functools.lru_cache(maxsize=64)
def _countdown(T: int, device: torch.device) -> torch.Tensor:
    return torch.arange(T, 0, -1, dtype=torch.int32, device=device)


def last_true(mask: torch.Tensor, inclusive: bool = True) -> torch.Tensor:
    """Largest j <= i (j < i when not inclusive) with mask[j], or -1 (int32)."""
    v = (mask * (positions(mask, torch.int32) + 1)).cummax(1).values - 1  # int32: several times cheaper
    return v if inclusive else shift_right(v, -1)


def next_true(mask: torch.Tensor) -> torch.Tensor:
    """Smallest j > i with mask[j], or T (the row length) if there is none (int32)."""
    T = mask.shape[1]
    v = T - mask * _countdown(T, mask.device)  # j where mask, else T
    return shift_left(v, T).flip(1).cummin(1).values.flip(1)


def first_true(mask: torch.Tensor) -> torch.Tensor:
    """[B] index of the first True per row, or -1 (int32): an int32 row maximum of T - position."""
    T = mask.shape[1]
    left = (mask * _countdown(T, mask.device)).amax(1)
    return torch.where(left > 0, T - left, -1)


def gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """x[b, idx[b, ...]] with idx (any integer dtype) clamped into range (callers mask invalid indices)."""
    idx = idx.clamp(0, x.shape[1] - 1).long()
    if idx.dim() == 1:
        return x.gather(1, idx[:, None])[:, 0]
    return x.gather(1, idx)


def take(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """table[idx] for a 1-D table and in-range indices (int32 or int64) of any shape: one
    index_select on the flattened indices, quicker than indexing or an expanded gather on a CPU."""
    return table.index_select(0, idx.reshape(-1)).view(idx.shape)


def signed64(v: int) -> int:
    """v modulo 2^64 as a signed (wrapping) int64 value."""
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v


def perfect_hash(keys: list[int], bits: int) -> tuple[int, list[int]]:
    """(multiplier, slots): the first odd multiple of the golden-ratio constant whose products with
    `keys` (mod 2^64) have pairwise different top `bits` bits, and those slots."""
    for i in range(1, 1 << 16, 2):
        mult = signed64(0x9E3779B97F4A7C15 * i)
        slots = [(signed64(k * mult) >> (64 - bits)) & ((1 << bits) - 1) for k in keys]
        if len(set(slots)) == len(slots):
            return mult, slots
    raise ValueError("no collision-free multiplier for these keys")
