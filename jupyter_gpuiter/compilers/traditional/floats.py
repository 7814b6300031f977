"""Decimal to float64 on the device: m * 10^q correctly rounded, by the Eisel-Lemire algorithm on int64 tensors.

A literal's digits make an integer mantissa m and a decimal exponent q (batch_lexer.py). The float64 nearest to
m * 10^q (ties to even) is found, as in fast_float (Lemire, "Number parsing at a gigabyte per second",
2021), from the high bits of the product of m, shifted up to its top bit, and a 128-bit truncation of
5^q: one 64 x 64 -> 128-bit multiplication, and a second one where the first leaves the rounding in
doubt. Mushtak and Lemire ("Fast number parsing without fallback", 2023) proved the result exact for
every mantissa below 2^64, so no case is left to a slower path. The multiplications work on unsigned
values held in int64 tensors (arithmetic wraps modulo 2^64), split into 32-bit halves; unsigned shifts
and comparisons are written out. About sixty element-wise operations on the number tokens alone.
"""

from __future__ import annotations

import torch

from .common import signed64

SMALLEST_Q, LARGEST_Q = -342, 308  # beyond them every m >= 1 rounds to 0, or overflows to inf
_M32 = (1 << 32) - 1
_TABLES: dict = {}


def _power_of_five_128(q: int) -> int:
    """5^q as a 128-bit number with its top bit set (truncated; for q < 0 a reciprocal rounded up), as
    fast_float's table_generation.py makes them."""
    if q >= 0:
        p = 5 ** q
        n = p.bit_length() - 128  # its top bit brought to bit 127 (a right shift truncates, as halving does)
        return p >> n if n > 0 else p << -n
    p = 5 ** -q
    z = p.bit_length()  # the least z with 2^z >= p (no power of 5 above 1 is one of 2)
    if q >= -27:
        return 2 ** (z + 127) // p + 1
    c = 2 ** (2 * z + 128) // p + 1
    return c >> max(0, c.bit_length() - 128)


def _tables(device) -> tuple[torch.Tensor, torch.Tensor]:
    """(high 64 bits, low 64 bits) of _power_of_five_128(q) for q in SMALLEST_Q..LARGEST_Q, as int64."""
    if device not in _TABLES:
        powers = [_power_of_five_128(q) for q in range(SMALLEST_Q, LARGEST_Q + 1)]
        _TABLES[device] = (torch.tensor([signed64(p >> 64) for p in powers], device=device),
                           torch.tensor([signed64(p) for p in powers], device=device))
    return _TABLES[device]


def _shr(x: torch.Tensor, n) -> torch.Tensor:
    """x >> n as unsigned 64-bit values (0 < n < 64, an int or a tensor)."""
    return (x >> n) & ((1 << (64 - n)) - 1 if isinstance(n, int) else (torch.ones_like(x) << (64 - n)) - 1)


def _mul128(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The full product of unsigned 64-bit a and b: (high 64 bits, low 64 bits)."""
    a_lo, a_hi, b_lo, b_hi = a & _M32, _shr(a, 32), b & _M32, _shr(b, 32)
    lo_lo, lo_hi, hi_lo = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo  # each below 2^64 as unsigned
    mid = _shr(lo_lo, 32) + (lo_hi & _M32) + (hi_lo & _M32)  # below 3 * 2^32
    low = (lo_lo & _M32) | (mid << 32)
    high = a_hi * b_hi + _shr(lo_hi, 32) + _shr(hi_lo, 32) + _shr(mid, 32)
    return high, low


def _below(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a < b as unsigned 64-bit values."""
    return (a ^ (-1 << 63)) < (b ^ (-1 << 63))


def _bit_length(x: torch.Tensor) -> torch.Tensor:
    """Bits of 1 <= x < 2^63 (int64): from the float64 exponent, corrected where rounding to float64
    carried into the next power of two."""
    n = torch.frexp(x.to(torch.float64)).exponent.long()
    return n - ((x >> (n - 1)) == 0).long()


def to_float64(m: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """The float64 nearest to m * 10^q (ties to even), for int64 tensors 0 <= m < 2^63 and any q."""
    hi5, lo5 = _tables(m.device)
    zero = (m == 0) | (q < SMALLEST_Q)
    inf = ~zero & (q > LARGEST_Q)
    q = q.clamp(SMALLEST_Q, LARGEST_Q)
    index = q - SMALLEST_Q
    w = torch.where(zero, 1, m)
    lz = 64 - _bit_length(w)
    w = w << lz  # top bit set
    # both halves of 5^q's 128 bits times w at once; the second one's high half matters only where the
    # bits below the result's last one and its rounding bit are all ones (the carry of the truncated
    # part then decides)
    (high, high2), (low, _) = _mul128(w, torch.stack([hi5[index], lo5[index]]))
    doubt = (high & 0x1FF) == 0x1FF
    low_sum = low + high2
    low = torch.where(doubt, low_sum, low)
    high = high + (doubt & _below(low_sum, high2)).long()

    upper = _shr(high, 63)
    shift = upper + 9  # 64 - 52 explicit mantissa bits - 3
    mantissa = _shr(high, shift)  # 54 or 55 bits: the result's 53, a rounding bit, maybe one more
    power2 = (((152170 + 65536) * q) >> 16) + 63 + upper - lz + 1023

    # subnormal results: shift down to the smallest exponent, then round half up (no ties there)
    sub = (mantissa >> (1 - power2).clamp(0, 63)) * (power2 > -63)
    sub = (sub + (sub & 1)) >> 1  # reaching 2^52 makes it the smallest normal, as its bits already say

    # normal results: an exact tie (the product's dropped bits all zero) rounds to even
    tie = (low >= 0) & (low <= 1) & (q >= -4) & (q <= 23) & ((mantissa & 3) == 1) & ((mantissa << shift) == high)
    mantissa = mantissa & ~tie.long()
    mantissa = (mantissa + (mantissa & 1)) >> 1
    carry = mantissa >> 53  # rounding carried into a 54th bit: the mantissa is 2^53, one power of two up
    power2 = power2 + carry
    normal = (power2.clamp(0, 0x7FF) << 52) | (mantissa >> carry) & ((1 << 52) - 1) * (power2 < 0x7FF)

    bits = torch.where(power2 > 0, normal, sub)
    return torch.where(zero, 0.0, torch.where(inf | (power2 >= 0x7FF), float("inf"), bits.view(torch.float64)))
