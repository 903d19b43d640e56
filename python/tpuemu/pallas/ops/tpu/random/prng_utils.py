# SPDX-License-Identifier: MIT
"""The skeleton of JAX's Pallas PRNG kernels: a draw of @shape computed in
(256, 256) blocks of its last two dimensions (padded up to whole blocks,
cut back after), each element hashed from its row-major count in the
unpadded shape, as JAX's blocked_iota plus the block's offset give it.
Scalars and vectors are drawn as (1, 1) and (1, n) blocks, as JAX's."""
import math

import numpy as np

BLOCK_SIZE = (256, 256)


def round_up(x, y):
    return (x + y - 1) // y * y


def counts(block, total):
    """In a kernel: each element's row-major count in @total (uint32) for
    the current block (the grid runs over every dimension of @total, the
    last two in @block-sized steps)."""
    from .... import program_id
    from ..... import lax
    from ..... import numpy as jnp
    nd = len(total)
    i = lax.broadcasted_iota(jnp.int32, block, 0) + program_id(nd - 2) * block[0]
    j = lax.broadcasted_iota(jnp.int32, block, 1) + program_id(nd - 1) * block[1]
    lead = 0
    for d in range(nd - 2):
        lead = lead * total[d] + program_id(d)
    # int32 arithmetic wraps as uint32's would: the bits are the count's
    n = (lead * total[-2] + i) * total[-1] + j
    return lax.bitcast_convert_type(n, jnp.uint32)


def draw(words, key_data, shape, nout):
    """@nout uint32 host arrays of @shape: words(k0, k1, counts) in a
    kernel gives them for a block, from the key's words (SMEM scalars)."""
    from .... import BlockSpec, pallas_call
    from .... import tpu as pltpu
    from ..... import ShapeDtypeStruct
    from ..... import numpy as jnp
    shape = tuple(int(d) for d in shape)
    if not shape:
        return [a[0, 0] for a in draw(words, key_data, (1, 1), nout)]
    if len(shape) == 1:
        return [a[0] for a in draw(words, key_data, (1,) + shape, nout)]
    if math.prod(shape) > np.iinfo(np.uint32).max:
        raise ValueError("Shape too large: %d > %d"
                         % (math.prod(shape), np.iinfo(np.uint32).max))
    b = BLOCK_SIZE
    padded = shape[:-2] + (round_up(shape[-2], b[0]), round_up(shape[-1], b[1]))
    grid = shape[:-2] + (padded[-2] // b[0], padded[-1] // b[1])

    def kernel(k_ref, *o_refs):
        outs = words(k_ref[0], k_ref[1], counts(b, shape))
        for o, v in zip(o_refs, outs):
            o[...] = v
    spec = BlockSpec((None,) * (len(shape) - 2) + b, lambda *idx: idx)
    key_data = np.ascontiguousarray(np.asarray(key_data, np.uint32).reshape(2))
    res = pallas_call(kernel, grid=grid, in_specs=[BlockSpec(memory_space=pltpu.SMEM)],
                      out_specs=[spec] * nout,
                      out_shape=[ShapeDtypeStruct(padded, jnp.uint32)] * nout)(key_data)
    return [np.asarray(r)[..., :shape[-2], :shape[-1]] for r in res]
