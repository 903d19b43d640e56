# SPDX-License-Identifier: MIT
"""JAX's threefry2x32 PRNG on the host, in NumPy uint32 arithmetic: the
hash (Threefry-2x32, 20 rounds, Salmon et al. 2011, as Random123 and
jax/_src/prng.py define it), and the key functions JAX's "threefry2x32"
impl builds on it: seed, split, fold_in and random_bits, in both layouts
of jax_threefry_partitionable (partitionable=True is JAX's default since
0.5.0). Keys are uint32 arrays of shape (2,); everything here is pure
NumPy, so it runs on the host only (kernels take Pallas keys)."""
import math

import numpy as np

_u32 = np.uint32
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = _u32(0x1BD11BDA)	# Threefish's key-schedule constant


def _rotl(x, r):
    return (x << _u32(r)) | (x >> _u32(32 - r))


def hash2x32(k0, k1, x0, x1):
    """Threefry-2x32 of the counter words (x0, x1) under the key (k0, k1):
    uint32 arrays broadcast together; the two output words."""
    k0, k1, x0, x1 = (np.asarray(a, _u32) for a in (k0, k1, x0, x1))
    ks = (k0, k1, k0 ^ k1 ^ _PARITY)
    # uint32 arithmetic wraps, as the hash means it to
    with np.errstate(over="ignore"):
        x0 = x0 + ks[0]
        x1 = x1 + ks[1]
        for i in range(5):
            for r in _ROTATIONS[i % 2]:
                x0 = x0 + x1
                x1 = x0 ^ _rotl(x1, r)
            x0 = x0 + ks[(i + 1) % 3]
            x1 = x1 + ks[(i + 2) % 3] + _u32(i + 1)
    return np.asarray(x0, _u32), np.asarray(x1, _u32)


def threefry_2x32(key, count):
    """jax.extend.random.threefry_2x32: the hash of a flat count array cut
    in halves (padded with a zero word when odd), the two halves of output
    put back in the count's shape."""
    key = np.asarray(key, _u32)
    count = np.asarray(count)
    if count.dtype != _u32 or key.dtype != _u32:
        raise TypeError("threefry_2x32 requires uint32 arguments, got %s" % count.dtype)
    flat = count.ravel()
    odd = flat.size % 2
    if odd:
        flat = np.concatenate([flat, np.zeros(1, _u32)])
    x0, x1 = np.split(flat, 2)
    out = np.concatenate(hash2x32(key[0], key[1], x0, x1))
    return (out[:-1] if odd else out).reshape(count.shape)


def seed(s):
    """threefry_seed with jax_enable_x64 off (tpuemu's only mode): the seed
    as int32 (a wider int keeps its low 32 bits) in the low word."""
    return np.array([0, int(s) & 0xFFFFFFFF], _u32)


def _iota_2x32(shape):
    """The row-major index of each element of @shape as a 64-bit count, in
    (high, low) words (JAX's iota_2x32_shape)."""
    n = np.arange(math.prod(shape), dtype=np.uint64).reshape(shape)
    return (n >> np.uint64(32)).astype(_u32), n.astype(_u32)


def split(key, shape, partitionable=True):
    """threefry_split: keys of shape @shape + (2,)."""
    key = np.asarray(key, _u32)
    shape = tuple(shape)
    if partitionable:
        # each new key the hash of its index: split(k, n)[i] == fold_in(k, i)
        b0, b1 = hash2x32(key[0], key[1], *_iota_2x32(shape))
        return np.stack([b0, b1], axis=-1)
    counts = np.arange(2 * math.prod(shape), dtype=_u32)
    return threefry_2x32(key, counts).reshape(shape + (2,))


def fold_in(key, data):
    """threefry_fold_in: the hash of the data's seed words under the key
    (the same in both layouts)."""
    return threefry_2x32(np.asarray(key, _u32), seed(int(data) & 0xFFFFFFFF))


def random_bits(key, bit_width, shape, partitionable=True):
    """threefry_random_bits: uint@bit_width values of @shape (uint64 for
    64, as JAX's with jax_enable_x64 on)."""
    key = np.asarray(key, _u32)
    shape = tuple(shape)
    if bit_width not in (8, 16, 32, 64):
        raise TypeError("requires 8-, 16-, 32- or 64-bit field width.")
    dtype = np.dtype("uint%d" % bit_width)
    if partitionable:
        b0, b1 = hash2x32(key[0], key[1], *_iota_2x32(shape))
        if bit_width == 64:
            return (b0.astype(np.uint64) << np.uint64(32)) | b1.astype(np.uint64)
        # narrower widths keep the low bits of the xor
        return (b0 ^ b1).astype(dtype)
    size = math.prod(shape)
    words = -(-bit_width * size // 32)
    if words >= 0xFFFFFFFF:
        # JAX splits the key into blocks of 2**32 - 1 counts here
        raise NotImplementedError("threefry random_bits: %d words exceed one block of "
                                  "counts (2**32 - 1)" % words)
    bits = threefry_2x32(key, np.arange(words, dtype=_u32))
    if bit_width == 64:
        hi, lo = np.split(bits, 2)
        bits = (hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)
    elif bit_width < 32:
        # each word's pieces low part first, as bits.view(dtype) on a
        # little-endian machine (JAX's comment), whatever this host is
        per = 32 // bit_width
        sh = (_u32(bit_width) * np.arange(per, dtype=_u32))
        bits = ((bits[:, None] >> sh) & _u32((1 << bit_width) - 1)).ravel()[:size]
        bits = bits.astype(dtype)
    return bits.reshape(shape)
