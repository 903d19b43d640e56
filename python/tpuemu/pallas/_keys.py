# SPDX-License-Identifier: MIT
"""Pallas PRNG keys (JAX's "pallas_tpu" key impl): pltpu.to_pallas_key on
the host, jax.random's samplers on them inside kernels.

A key's data is two 32-bit words, shape (1, 2) per key as JAX's. On the
host a key array is a PallasKey (batch shape, words); passed to a
pallas_call it is an int32 operand of shape batch + (1, 2) whose ref reads
back as a KernelKey: the two words as scalar-core values. A sampler on a
KernelKey seeds the core's PRNG with the words (pltpu.prng_seed) and draws
from it, as JAX's impl does, so the same key gives the same bits in any
kernel (pallas_call or emit_pipeline body) and another key other bits.
Key outputs (ShapeDtypeStruct(shape, key.dtype)), key scratch
(pltpu.SMEM(shape, key.dtype)) and refs of keys (jax.new_ref,
pl.run_state) are the same words.
fold_in mixes the data in with a bijection of the words (+ and * only:
what the scalar core does), so distinct data give distinct keys, the same
on the host and in kernels. The bits are Philox's, not the TPU's."""
import numpy as _np

from .. import _trace

_M = 0xFFFFFFFF
# odd constants of the fold_in mix (golden ratio, a Murmur3 multiplier)
_C0 = 0x9E3779B1
_C1 = 0x27D4EB2F


def _s32(v):
    v &= _M
    return v - (1 << 32) if v >= 1 << 31 else v


class KeyDtype:
    """The dtype of Pallas keys, key<pl> as JAX prints it."""
    name = "key<pl>"
    key_shape = (1, 2)

    def __repr__(self):
        return self.name

    def __eq__(self, other):
        return isinstance(other, KeyDtype)

    def __hash__(self):
        return hash(self.name)


key_dtype = KeyDtype()


class PallasKey:
    """A host array of Pallas keys: @data is uint32 of shape shape + (1, 2)."""
    _pallas_key = True

    def __init__(self, data):
        data = _np.asarray(data)
        if data.shape[-2:] != (1, 2):
            raise ValueError("Pallas key data has shape (..., 1, 2), not %r" % (data.shape,))
        self.data = _np.ascontiguousarray(data.astype(_np.int64) & _M).astype(_np.uint32)

    shape = property(lambda self: self.data.shape[:-2])
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(_np.prod(self.shape, dtype=_np.int64)))
    dtype = key_dtype

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of an unsized key array")
        return self.shape[0]

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if any(e is Ellipsis for e in idx):
            raise IndexError("Pallas key arrays: index the batch dimensions (no Ellipsis)")
        return PallasKey(self.data[idx])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def reshape(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and not _np.isscalar(shape[0]) else shape
        return PallasKey(self.data.reshape(tuple(shape) + (1, 2)))

    def __repr__(self):
        return "Array(%r, dtype=key<pl>)" % (self.data.reshape(self.data.shape[:-2] + (2,)),)

    def __array__(self, *a, **kw):
        raise TypeError("a Pallas key array is not a NumPy array: take "
                        "jax.random.key_data(key) for its words")


def _mix(k0, k1, data):
    """fold_in's mix of @data into the words (Python ints or traced
    scalars): k1 + data, then k0 += k1 * C0, k1 += k0 * C1, each step a
    bijection of the pair, wrapping in 32 bits."""
    k1 = k1 + data
    k0 = k0 + k1 * _s32(_C0)
    k1 = k1 + k0 * _s32(_C1)
    return k0, k1


def host_fold_in(key, data):
    d = key.data.astype(_np.int64)
    k0, k1 = d[..., 0], d[..., 1]
    data = int(_np.asarray(data).astype(_np.int64)) & _M
    k1 = (k1 + data) & _M
    k0 = (k0 + k1 * _C0) & _M
    k1 = (k1 + k0 * _C1) & _M
    return PallasKey(_np.stack([k0, k1], axis=-1))


def to_pallas_key(key):
    """pltpu.to_pallas_key: a jax.random key (or a batch of them) as a
    Pallas key: its words are jax.random.bits(key, (1, 2), uint32), as
    JAX's (so a threefry key gives JAX's own Pallas key words)."""
    from .. import random
    from . import _fry
    if isinstance(key, PallasKey):
        return key
    if isinstance(key, _fry.FryKey):
        # in a kernel: a key made there of a constant seed has host words
        if not key.constant:
            raise _trace.trace_error("pltpu.to_pallas_key inside a kernel: of a key made there "
                                     "of a constant seed (the core's PRNG is seeded from "
                                     "scalars; pass the Pallas key in SMEM instead)")
        w = random._bits(random._Key(_np.array(key.words, _np.uint32)), 32, (1, 2), "to_pallas_key")
        return KernelKey(_s32(int(w[0, 0])), _s32(int(w[0, 1])))
    if isinstance(key, (tuple, list)) and all(isinstance(k, random._Key) for k in key):
        return PallasKey(_np.stack([to_pallas_key(k).data for k in key]))
    if isinstance(key, random._Key) or (isinstance(key, _np.ndarray) and key.dtype == _np.uint32
                                        and key.shape[-1:] == (2,)):
        # a batch of keys (or of legacy key data): each key's bits, in its place
        keys = random._as_key(key, "to_pallas_key", batched=True)[0]
        flat = keys.reshape(-1)
        words = [random.bits(flat[i], (1, 2), _np.uint32) for i in range(flat.size)]
        return PallasKey(_np.stack(words).reshape(keys.shape + (1, 2)))
    raise _trace.trace_error("pltpu.to_pallas_key: a jax.random key (jax.random.key, "
                             "PRNGKey, split), not %r" % (key,))


def wrap_key_data(data):
    return PallasKey(data)


def refuse_on_host(what):
    # as JAX's: a Pallas key's sampler lowers to the core's PRNG only
    raise NotImplementedError("MLIR translation rule for primitive 'prng_seed' not found "
                              "for platform cpu: jax.random.%s of a Pallas key runs inside "
                              "kernels only" % what)


def split_refused():
    raise NotImplementedError("Cannot split a Pallas key. Use fold_in instead to generate "
                              "new keys.")


# --- inside kernels ---

class KernelKey:
    """A Pallas key read in a kernel: its two words, int32 scalar-core values."""
    dtype = key_dtype
    shape = ()
    ndim = 0

    def __init__(self, k0, k1):
        self.words = (k0, k1)

    def __repr__(self):
        return "<Pallas key %s>" % (", ".join(_trace._fmt(w) for w in self.words),)


def _check_space(ref):
    if ref.space != "smem":
        raise _trace.trace_error(
            "ref '%s': a Pallas key in %s; the core's PRNG is seeded from scalars, give "
            "the key BlockSpec(memory_space=pltpu.SMEM)"
            % (ref.name, ref.space.upper()))


def read_key(ref, idx, prefix=()):
    """@ref[@idx] of a key ref (@prefix: indices of an .at[] view): the key
    at the batch indices (Python ints or traced scalars), whole."""
    nb = ref.key_batch
    idx = tuple(prefix) + (idx if isinstance(idx, tuple) else (idx,))
    idx = tuple(e for e in idx if e is not Ellipsis)
    idx = tuple(e for e in idx if not (isinstance(e, slice) and e == slice(None)))
    if len(idx) != nb:
        raise _trace.trace_error(
            "ref '%s' holds Pallas keys of batch shape %r: read one key, "
            "ref[%s]" % (ref.name, ref.shape[:nb], ", ".join(["i"] * nb) or "..."))
    _check_space(ref)
    return KernelKey(ref._read(idx + (0, 0)), ref._read(idx + (0, 1)))


def store_key(ref, idx, key):
    """@ref[@idx] = @key: a key's two words into a key ref (SMEM)."""
    if not isinstance(key, KernelKey):
        raise _trace.trace_error("ref '%s' holds Pallas keys: store a key (key_ref[...], "
                                 "fold_in, wrap_pallas_seed), not %r" % (ref.name, key))
    nb = ref.key_batch
    idx = idx if isinstance(idx, tuple) else (idx,)
    idx = tuple(e for e in idx if e is not Ellipsis)
    if len(idx) != nb:
        raise _trace.trace_error("ref '%s' holds Pallas keys of batch shape %r: store one "
                                 "key, ref[%s] = key" % (ref.name, ref.shape[:nb],
                                                         ", ".join(["i"] * nb) or "..."))
    _check_space(ref)
    ref[idx + (0, 0)] = key.words[0]
    ref[idx + (0, 1)] = key.words[1]


class KeyAt:
    """key_ref.at[i, ...]: a view of some keys of a key ref (@view: the
    view's class, KeyView or a subclass for other keys)."""

    def __init__(self, ref, prefix=(), view=None):
        self.ref, self.prefix, self.view = ref, prefix, view or KeyView

    def __getitem__(self, idx):
        return self.view(self.ref, self.prefix + (idx if isinstance(idx, tuple) else (idx,)))


class KeyView:
    """Some keys of a key ref: their batch dimensions after @prefix (the
    ref's attribute batch_attr counts them), read as keys."""
    batch_attr = "key_batch"

    def __init__(self, ref, prefix):
        self.ref, self.prefix = ref, prefix
        self.name, self.space, self.dtype = ref.name, ref.space, self.key_dtype()
        self.shape = ref.shape[len(prefix):getattr(ref, self.batch_attr)]

    @staticmethod
    def key_dtype():
        return key_dtype

    @property
    def at(self):
        return KeyAt(self.ref, self.prefix, type(self))

    def __getitem__(self, idx):
        return read_key(self.ref, idx, self.prefix)


def unwrap_pallas_seed(key):
    """The two words of a key (plrandom.unwrap_pallas_seed)."""
    if not isinstance(key, KernelKey):
        raise _trace.trace_error("unwrap_pallas_seed: a Pallas key read in a kernel "
                                 "(key_ref[...]), not %r" % (key,))
    return key.words


def wrap_pallas_seed(k0, k1, impl="pallas_tpu"):
    return KernelKey(k0, k1)


def _word(x):
    from .. import numpy as jnp
    if isinstance(x, (int, _np.integer)):
        return _s32(int(x))
    if isinstance(x, _trace.Value) and x.dt is not None and x.dt != _trace.int32:
        return x.astype(jnp.int32)
    return x


def fold_in(key, data):
    k0, k1 = _mix(*key.words, _word(data))
    return KernelKey(k0, k1)


def seed(key):
    from . import tpu
    tpu.prng_seed(*key.words)


def sample(what, key, *args, **kwargs):
    """jax.random.@what(key, ...) on a KernelKey: the core's PRNG seeded by it."""
    from . import tpu
    seed(key)
    if what == "bits":
        shape = args[0] if args else kwargs.pop("shape", ())
        return tpu.stateful_bits(shape, *args[1:], **kwargs)
    if what == "uniform":
        return tpu.stateful_uniform(*args, **kwargs)
    if what == "normal":
        return tpu.stateful_normal(*args, **kwargs)
    if what == "bernoulli":
        p = args[0] if args else kwargs.pop("p", 0.5)
        shape = args[1] if len(args) > 1 else kwargs.pop("shape", None)
        return tpu.stateful_bernoulli(p, shape)
    raise _trace.trace_error("jax.random.%s of a Pallas key inside a kernel is not "
                             "supported (bits, uniform, normal, bernoulli are)" % what)


def sample_block(sampler_fn, global_key, block_size, tile_size, total_size,
                 block_index=None, **kwargs):
    """pltpu.sample_block: the block at @block_index of a @total_size
    array sampled tile by tile, each tile with the key (a Pallas or a
    threefry one) folded in with its global (row-major) tile number, so the
    values do not depend on the block size or grid order (tile_size
    divides the blocks)."""
    from . import program_id
    from .. import numpy as jnp
    block_size, tile_size = tuple(block_size), tuple(tile_size)
    total_size = tuple(total_size)
    if len(block_size) != len(tile_size):
        raise ValueError("block_size (%d) and tile_size (%d) must have the same length."
                         % (len(block_size), len(tile_size)))
    if len(total_size) != len(block_size) or \
            any(b % t or n % t for b, t, n in zip(block_size, tile_size, total_size)):
        raise ValueError("sample_block: tile_size %r must divide block_size %r and "
                         "total_size %r" % (tile_size, block_size, total_size))
    from . import _fry
    from .. import random
    if not isinstance(global_key, (KernelKey, _fry.FryKey)):
        raise _trace.trace_error("pltpu.sample_block: a Pallas key read in the kernel (or a "
                                 "threefry key: key_ref[...]), not %r" % (global_key,))
    if block_index is None:
        block_index = tuple(program_id(a) for a in range(len(block_size)))
    per = [b // t for b, t in zip(block_size, tile_size)]
    tiles_of = [n // t for n, t in zip(total_size, tile_size)]

    def tile(t):
        lin = 0
        for d, (bi, k) in enumerate(zip(block_index, t)):
            lin = lin * tiles_of[d] + (bi * per[d] + k)
        return sampler_fn(random.fold_in(global_key, lin), shape=tile_size, **kwargs)

    def build(d, t):
        if d == len(per):
            return tile(t)
        parts = [build(d + 1, t + (k,)) for k in range(per[d])]
        return parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=d)
    return build(0, ())
