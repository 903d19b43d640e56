# SPDX-License-Identifier: MIT
"""JAX's "pallas_threefry2x32" key impl: threefry2x32 keys (seed, split
and fold_in are threefry's) whose bits a pallas_call draws, the hash of
each element's count (high word 0) with its two output words xor-ed.
That is jax.random.bits of a threefry key with jax_threefry_partitionable
on, which the bits equal whatever the flag, as JAX's kernel's do."""
from .prng_utils import BLOCK_SIZE, draw  # noqa: F401


def _words(k0, k1, n):
    from .... import _fry
    from ..... import _trace
    b0, b1 = _fry.hash2x32(k0, k1, 0, n)
    return (_trace.local(b0 ^ b1),)


def plthreefry_random_bits(key_data, bit_width, shape):
    """uint32 bits of @shape under the key's words (32-bit only, as JAX's)."""
    if bit_width != 32:
        raise ValueError("Only 32-bit PRNG supported.")
    return draw(_words, key_data, shape, 1)[0]
