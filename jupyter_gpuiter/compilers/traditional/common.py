"""Small tensor helpers shared by the passes: neighbours, scans, gathers, table lookups, error keys."""

from __future__ import annotations

import functools

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

    A rule is a mask over tokens [B, T] plus a constant (priority, kind code, message id). Two kinds:

    - `at_tokens`: the error is located at the failing tokens themselves. A key orders by place
      first, so until the end only each token's smallest constant matters: one int32 maximum over
      [B, T] per rule (of _NONE - constant); `key` then reads the first failing token of each row.
    - `add`: errors located elsewhere (a base [B, T] of error_base keys): a masked int64 row minimum.
    """

    _NONE = _AT  # above every constant (priority, kind, message)

    def __init__(self, rows: int, device, line=None, col=None, valid=None):
        """line, col [B, T]: the tokens' places, for `at_tokens`; valid: where such errors count."""
        self._key = torch.full((rows,), NO_ERROR, dtype=torch.long, device=device)
        self._line, self._col, self._valid = line, col, valid
        self._gain: torch.Tensor | None = None  # [B, T] int32: _NONE - smallest constant failing there, or 0
        self._gains: dict[int, torch.Tensor] = {}

    def at_tokens(self, mask: torch.Tensor, priority: int, code: int, msg: int) -> None:
        """Record the rule that fails at the tokens where `mask`."""
        gain = self._NONE - (priority + 1) * (_CODE * _MSG) - code * _MSG - msg
        if gain not in self._gains:
            self._gains[gain] = torch.tensor(gain, dtype=torch.int32, device=mask.device)
        g = mask * self._gains[gain]
        self._gain = g if self._gain is None else torch.maximum(self._gain, g)

    @property
    def key(self) -> torch.Tensor:
        """[B] the first error's key, NO_ERROR where none."""
        if self._gain is not None:
            hit = self._gain > 0
            first = first_true(hit if self._valid is None else hit & self._valid)
            at = first.clamp(min=0)[:, None]
            place = self._line.gather(1, at)[:, 0] * _COL + self._col.gather(1, at)[:, 0]
            key = place * _AT + (self._NONE - self._gain.gather(1, at)[:, 0])
            self._key = torch.minimum(self._key, torch.where(first >= 0, key, NO_ERROR))
            self._gain = None
        return self._key

    def add(self, mask: torch.Tensor, base: torch.Tensor, code: int, msg: int) -> None:
        """Record the rule that fails where `mask`, at places `base`; bases >= NO_ERROR never count."""
        first = torch.where(mask, base, NO_ERROR).amin(1)
        self._key = torch.minimum(self._key, first + (code * _MSG + msg))

    def add_rows(self, mask: torch.Tensor, key) -> None:
        """Record a per-program error [B] (a key or one key for all rows) where `mask`."""
        self._key = torch.where(mask, torch.minimum(self._key, torch.as_tensor(key, device=self._key.device)), self._key)


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


def positions(x: torch.Tensor, dtype: torch.dtype = torch.long) -> torch.Tensor:
    """[B, T] token positions (a broadcast view)."""
    B, T = x.shape[:2]
    return torch.arange(T, dtype=dtype, device=x.device).expand(B, T)


@functools.lru_cache(maxsize=64)
def _countdown(T: int, device: torch.device) -> torch.Tensor:
    return torch.arange(T, 0, -1, dtype=torch.int32, device=device)


def last_true(mask: torch.Tensor, inclusive: bool = True) -> torch.Tensor:
    """Largest j <= i (j < i when not inclusive) with mask[j], or -1."""
    v = (mask * (positions(mask, torch.int32) + 1)).cummax(1).values - 1  # int32: several times cheaper
    return (v if inclusive else shift_right(v, -1)).long()


def next_true(mask: torch.Tensor) -> torch.Tensor:
    """Smallest j > i with mask[j], or T (the row length) if there is none."""
    T = mask.shape[1]
    v = T - mask * _countdown(T, mask.device)  # j where mask, else T
    return shift_left(v, T).flip(1).cummin(1).values.flip(1).long()


def first_true(mask: torch.Tensor) -> torch.Tensor:
    """[B] index of the first True per row, or -1: an int32 row maximum of T - position."""
    T = mask.shape[1]
    left = (mask * _countdown(T, mask.device)).amax(1)
    return torch.where(left > 0, T - left, -1).long()


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
