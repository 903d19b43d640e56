# SPDX-License-Identifier: MIT
"""JAX's "pallas_philox4x32" key impl: Philox-4x32 with 10 rounds
(Salmon et al. 2011) as JAX's Pallas kernel computes it, over the
counter (0, count + offset, 0, 0) of each element under the key's two
words, the key bumped by the golden-ratio and sqrt(3) Weyl constants
after every round but the last. bits are the first two output words
xor-ed; split(key, shape)'s keys and fold_in(key, data)'s (the count 0
offset by data) are those two words. seed is threefry's. The product's
high and low words come from 16-bit halves (mul32_hi_lo), what a 32-bit
unit computes; the same code runs on host uint32 and in kernels."""
import numpy as np

from .prng_utils import draw

_WEYL = (0x9E3779B9, 0xBB67AE85)
_MUL = (0xCD9E8D57, 0xD2511F53)


def _local(v):
    from ..... import _trace
    return v if isinstance(v, int) else _trace.local(v)


def mul32_hi_lo(x, y):
    """The high and low 32-bit words of the 64-bit product x * y (uint32
    scalars, arrays or traced values, or Python ints below 2**32)."""
    if isinstance(x, int) and isinstance(y, int):
        return (x * y) >> 32, (x * y) & 0xFFFFFFFF
    s, m = 16, 0xFFFF
    if isinstance(x, (np.ndarray, np.generic)) or isinstance(y, (np.ndarray, np.generic)):
        # host arrays: every step in uint32 (NumPy 1's promotion of a
        # uint32 and a Python int is int64)
        x, y = np.asarray(x, np.uint32), np.asarray(y, np.uint32)
        s, m = np.uint32(s), np.uint32(m)
    xhi, yhi = x >> s, y >> s
    xlo, ylo = x & m, y & m
    hh, ll = _local(xhi * yhi), _local(xlo * ylo)
    hl, lh = _local(xhi * ylo), _local(xlo * yhi)
    # the middle column's sum and what it carries into the high word
    mid = _local((hl & m) + (lh & m) + (ll >> s))
    hi = hh + (hl >> s) + (lh >> s) + (mid >> s)
    lo = (mid << s) + (ll & m)
    return _local(hi), _local(lo)


def philox_4x32(hi0, lo0, hi1, lo1, k_hi, k_lo, rounds=10):
    """The four output words of the counter (hi0, lo0, hi1, lo1)."""
    for r in range(rounds):
        a_hi, a_lo = mul32_hi_lo(hi1, _MUL[0])
        b_hi, b_lo = mul32_hi_lo(hi0, _MUL[1])
        hi0, lo0 = _local(a_hi ^ lo0 ^ k_hi), a_lo
        hi1, lo1 = _local(b_hi ^ lo1 ^ k_lo), b_lo
        if r != rounds - 1:
            k_hi, k_lo = _local(k_hi + _WEYL[0]), _local(k_lo + _WEYL[1])
    return hi0, lo0, hi1, lo1


def _pair(offset):
    def words(k0, k1, n):
        from .... import _fry
        c = n + offset if offset else n
        # the key as (1, 1) vectors: the scalar core inlines its locals, so
        # ten rounds of bumps would grow past one scalar expression
        o1, o2, _, _ = philox_4x32(0, _local(c), 0, 0, _fry._vec(k0), _fry._vec(k1))
        return o1, o2
    return words


def philox_random_bits(key_data, bit_width, shape):
    if bit_width != 32:
        raise ValueError("Only 32-bit PRNG supported.")
    from ..... import _trace

    def fused(k0, k1, n):
        o1, o2 = _pair(0)(k0, k1, n)
        return (_trace.local(o1 ^ o2),)
    return draw(fused, key_data, shape, 1)[0]


def philox_split(key_data, shape):
    """Keys of @shape + (2,): each the two words of its count."""
    o1, o2 = draw(_pair(0), key_data, shape, 2)
    return np.stack([o1, o2], axis=-1)


def philox_fold_in(key_data, data):
    """The key of the count 0 offset by @data (mod 2**32)."""
    o1, o2 = draw(_pair(int(data) & 0xFFFFFFFF), key_data, (), 2)
    return np.array([o1, o2], np.uint32)
