"""Small tensor helpers shared by the passes: neighbours, scans, gathers, table lookups, error keys."""

from __future__ import annotations

import torch

BIG = 1 << 40
# An error is one int64 key, ordered as the language orders errors: by line, column, priority, kind
# code; the low bits carry the message id. Min-reducing keys picks the first error.
_COL, _PRIO, _CODE, _MSG = 1 << 14, 1 << 12, 8, 256


_AT = _PRIO * _CODE * _MSG  # weight of (line * _COL + col) in a key


def error_base(line, col, priority):
    """The part of an error key that varies by token: its place and priority (tensors or ints)."""
    return (line * _COL + col) * _AT + (priority + 1) * (_CODE * _MSG)


def error_key(line, col, priority, code, msg):
    return error_base(line, col, priority) + code * _MSG + msg


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
    """The first error of each program across many rules.

    A rule is a mask over tokens [B, T] plus a constant (kind code, message id); its first error in a
    row is the masked minimum of a precomputed base (error_base of the tokens' places) plus that
    constant. So a rule costs one `where` and one row minimum instead of a key per token. When the
    base never decreases along a row (errors at the tokens themselves, one priority) the minimum is
    at the first masked token, found by an int32 row maximum: several times cheaper than a masked
    int64 minimum on a CPU."""

    def __init__(self, rows: int, device):
        self.key = torch.full((rows,), NO_ERROR, dtype=torch.long, device=device)
        self._countdown: torch.Tensor | None = None  # T - position, int32

    def add(self, mask: torch.Tensor, base: torch.Tensor, code: int, msg: int, ordered: bool = False) -> None:
        """Record the rule that fails where `mask`; bases >= NO_ERROR never count (padding).
        `ordered`: base is non-decreasing along each row."""
        if ordered:
            T = mask.shape[1]
            if self._countdown is None or self._countdown.shape[0] != T:
                self._countdown = torch.arange(T, 0, -1, dtype=torch.int32, device=mask.device)
            left = (mask * self._countdown).amax(1)  # T - first masked position, 0 if none
            at = base.gather(1, (T - left).clamp_(max=T - 1).long()[:, None])[:, 0]
            first = torch.where(left > 0, at, NO_ERROR) + (code * _MSG + msg)
        else:
            first = torch.where(mask, base, NO_ERROR).amin(1) + (code * _MSG + msg)
        self.key = torch.minimum(self.key, first)

    def add_rows(self, mask: torch.Tensor, key) -> None:
        """Record a per-program error [B] (a key or one key for all rows) where `mask`."""
        self.key = torch.where(mask, torch.minimum(self.key, torch.as_tensor(key, device=self.key.device)), self.key)


def select(mask: torch.Tensor, a, b) -> torch.Tensor:
    """torch.where(mask, a, b) for integer values (tensors of one dtype, or a tensor and an int).

    On a CPU as arithmetic, b + (a - b) * mask, exact under wrapping: torch's CPU `where` over a full
    bool mask is not vectorised (about 1.8 ns an element, against 0.3 for three int32 operations)."""
    if mask.is_cuda:
        return torch.where(mask, a, b)
    if isinstance(b, torch.Tensor):
        return (a - b) * mask + b
    return (a - b) * mask + b if isinstance(a, torch.Tensor) else torch.where(mask, a, b)


def shift_right(x: torch.Tensor, fill) -> torch.Tensor:
    """x[:, i-1] at i (fill at 0)."""
    return torch.cat([torch.full_like(x[:, :1], fill), x[:, :-1]], 1)


def shift_left(x: torch.Tensor, fill) -> torch.Tensor:
    """x[:, i+1] at i (fill at the end)."""
    return torch.cat([x[:, 1:], torch.full_like(x[:, :1], fill)], 1)


def positions(x: torch.Tensor) -> torch.Tensor:
    B, T = x.shape[:2]
    return torch.arange(T, device=x.device).expand(B, T)


def last_true(mask: torch.Tensor, inclusive: bool = True) -> torch.Tensor:
    """Largest j <= i (j < i when not inclusive) with mask[j], or -1."""
    v = torch.where(mask, positions(mask), -1).cummax(1).values
    return v if inclusive else shift_right(v, -1)


def next_true(mask: torch.Tensor) -> torch.Tensor:
    """Smallest j > i with mask[j], or BIG."""
    v = torch.where(mask, positions(mask), BIG)
    return shift_left(v, BIG).flip(1).cummin(1).values.flip(1)


def first_true(mask: torch.Tensor) -> torch.Tensor:
    """[B] index of the first True per row, or -1."""
    return torch.where(mask.any(1), mask.long().argmax(1), -1)


def gather(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """x[b, idx[b, ...]] with idx clamped into range (callers mask invalid indices)."""
    if idx.dim() == 1:
        return x.gather(1, idx.clamp(0, x.shape[1] - 1)[:, None])[:, 0]
    return x.gather(1, idx.clamp(0, x.shape[1] - 1))


def take(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """table[idx] for a 1-D table and in-range indices [B, ...]: a gather on the table expanded over
    the rows, several times faster than indexing on the CPU."""
    if idx.dim() == 1:
        return table.index_select(0, idx)
    flat = idx.reshape(idx.shape[0], -1)
    return table.expand(flat.shape[0], -1).gather(1, flat).view(idx.shape)


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
