# SPDX-License-Identifier: MIT
"""JAX's threefry2x32 keys inside kernels: jax.random on them gives the
host's jax.random bits for the same key (_threefry.py), as JAX's Pallas
TPU lowering of threefry2x32 does.

A threefry key passed to a pallas_call (jax.random.key, split, in SMEM or
VMEM; or its uint32 key data, JAX's legacy keys) reads back as a FryKey:
its two uint32 words, scalar-core reads in SMEM, vector reads in VMEM
(or Python ints, for a key made in the kernel of a constant seed). The
hash runs on the vector unit over a counter iota: the 20 rounds over
traced uint32 values, each step bound to a local, so a draw is ~60
statements whatever its shape. Draws are computed on a 2-D (rows, last
dimension) block and reshaped, as the core's stateful draws are.
fold_in, split (a few keys) and key(seed) work in kernels too; their
words are then (1, 1) vector values. Key outputs (ShapeDtypeStruct(shape,
key.dtype)) are uint32 words of shape + (2,), given back as keys."""
import math

import numpy as _np

from .. import _threefry
from .. import _trace
from . import _keys

_M = 0xFFFFFFFF
_ROTATIONS = _threefry._ROTATIONS
_PARITY = int(_threefry._PARITY)


class FryKey:
    """A threefry key in a kernel: @words, two uint32 scalars, vector
    values broadcasting against a 2-D block, or Python ints."""
    shape = ()
    ndim = 0

    def __init__(self, k0, k1):
        self.words = (k0, k1)

    @property
    def dtype(self):
        from ..random import _KeyDtype
        return _KeyDtype()

    @property
    def constant(self):
        return all(isinstance(w, int) for w in self.words)

    def __repr__(self):
        return "<threefry key %s>" % (", ".join(_trace._fmt(w) for w in self.words),)


class FryKeys(tuple):
    """split(key, n) in a kernel: a tuple of n FryKeys (indexing and
    unpacking as JAX's key array)."""

    @property
    def shape(self):
        return (len(self),)


def _local(v):
    return v if isinstance(v, int) else _trace.local(v)


def _add(a, b):
    return (a + b) & _M if isinstance(a, int) and isinstance(b, int) else a + b


def _rotl(x, r):
    if isinstance(x, int):
        return ((x << r) | (x >> (32 - r))) & _M
    return (x << r) | (x >> (32 - r))


def hash2x32(k0, k1, x0, x1):
    """Threefry-2x32 of (x0, x1) under (k0, k1), traced uint32 values (or
    Python ints): the output words, each round one statement per word.
    Counts that are not vectors are made (1, 1) ones: on the scalar core
    the rounds would be one expression (it inlines its locals)."""
    words = (k0, k1, x0, x1)
    if not all(isinstance(w, int) for w in words) and \
            not any(isinstance(w, _trace.Value) and not w.scalar for w in words):
        from .. import numpy as jnp
        x1 = _trace.local(jnp.zeros((1, 1), jnp.uint32) + x1)
    k2 = _local(k0 ^ k1 ^ _PARITY)
    ks = (k0, k1, k2)
    x0, x1 = _local(_add(x0, ks[0])), _local(_add(x1, ks[1]))
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = _local(_add(x0, x1))
            x1 = _local(x0 ^ _rotl(x1, r))
        x0 = _local(_add(x0, ks[(i + 1) % 3]))
        x1 = _local(_add(_add(x1, ks[(i + 2) % 3]), i + 1))
    return x0, x1


# --- keys into kernels ---

def key_of(k, what):
    """@k as a FryKey: a FryKey, or JAX's legacy key data read in the
    kernel (a uint32 block of shape (2,) read whole); else None."""
    if isinstance(k, FryKey):
        return k
    if isinstance(k, _trace.Value) and k.dt is _trace.uint32 and \
            tuple(k.shape or ()) == (2,) and getattr(k, "whole_of", None) is not None:
        ref = k.whole_of
        return FryKey(ref._read((0,)), ref._read((1,)))
    if isinstance(k, _trace.Value):
        raise _trace.trace_error(
            "jax.random.%s inside a kernel on %s: a threefry key read from its ref "
            "(key_ref[...]), or uint32 key data of shape (2,) read whole" % (what, k.render()))
    return None


def read_key(ref, idx, prefix=()):
    """@ref[@idx] of a ref of threefry keys (@prefix: an .at[] view's
    indices): the key at the batch indices, its two words."""
    nb = ref.fry_batch
    idx = tuple(prefix) + (idx if isinstance(idx, tuple) else (idx,))
    idx = tuple(e for e in idx if e is not Ellipsis)
    idx = tuple(e for e in idx if not (isinstance(e, slice) and e == slice(None)))
    if len(idx) != nb:
        raise _trace.trace_error(
            "ref '%s' holds threefry keys of batch shape %r: read one key, ref[%s]"
            % (ref.name, ref.shape[:nb], ", ".join(["i"] * nb) or "..."))
    if ref.space not in ("smem", "vmem"):
        raise _trace.trace_error("ref '%s': threefry keys in %s; give them "
                                 "BlockSpec(memory_space=pltpu.SMEM) or VMEM"
                                 % (ref.name, ref.space.upper()))
    return FryKey(ref._read(idx + (0,)), ref._read(idx + (1,)))


def store_key(ref, idx, key):
    """@ref[@idx] = @key: a threefry key's words into a ref of keys (a
    word computed in the kernel, a (1, 1) vector, goes to VMEM only)."""
    if not isinstance(key, FryKey):
        raise _trace.trace_error("ref '%s' holds threefry keys: store a key (key_ref[...], "
                                 "fold_in, split), not %r" % (ref.name, key))
    nb = ref.fry_batch
    idx = idx if isinstance(idx, tuple) else (idx,)
    idx = tuple(e for e in idx if e is not Ellipsis)
    if len(idx) != nb:
        raise _trace.trace_error("ref '%s' holds threefry keys of batch shape %r: store one "
                                 "key, ref[%s] = key" % (ref.name, ref.shape[:nb],
                                                         ", ".join(["i"] * nb) or "..."))
    from .. import numpy as jnp
    from . import ds
    for k, w in enumerate(key.words):
        if isinstance(w, _trace.Value) and not w.scalar:
            if ref.space != "vmem":
                raise _trace.trace_error(
                    "ref '%s': a threefry key computed in the kernel (fold_in, split) has "
                    "vector words; output it in VMEM, not %s" % (ref.name, ref.space.upper()))
            # a window of one element: the word's (1, 1) block reshaped to it
            ref[tuple(ds(i, 1) for i in idx) + (ds(k, 1),)] = jnp.reshape(w, (1,) * (nb + 1))
        else:
            ref[idx + (k,)] = w


class KeyView(_keys.KeyView):
    """Some threefry keys of a ref (their batch: the ref's fry_batch)."""
    batch_attr = "fry_batch"

    @staticmethod
    def key_dtype():
        from ..random import _KeyDtype
        return _KeyDtype()

    def __getitem__(self, idx):
        return read_key(self.ref, idx, self.prefix)


def key_at(ref):
    """key_ref.at of a ref of threefry keys."""
    return _keys.KeyAt(ref, (), KeyView)


def seed_key(seed):
    """jax.random.key(seed) in a kernel: a constant seed's words (x64 off:
    [0, seed mod 2**32]), or a traced int32 scalar's bits in the low word."""
    if isinstance(seed, (int, _np.integer)):
        return FryKey(*(int(w) for w in _threefry.seed(int(seed))))
    if isinstance(seed, _trace.Value) and seed.dt in (_trace.int32, _trace.uint32):
        return FryKey(0, _vec(seed))
    raise _trace.trace_error("jax.random.key(%r) inside a kernel: an int or an int32 "
                             "value" % (seed,))


def _vec(x):
    """@x (an int, an int32 or uint32 scalar or value) as a (1, 1) uint32
    vector value, to hash against key words."""
    from .. import numpy as jnp
    if isinstance(x, (int, _np.integer)):
        return int(x) & _M
    v = jnp.zeros((1, 1), jnp.int32) + x if x.dt is _trace.int32 else \
        jnp.zeros((1, 1), jnp.uint32) + x
    return _trace.local(v if v.dt is _trace.uint32 else _bitcast(v, jnp.uint32))


def _bitcast(v, dt):
    from .. import lax
    return lax.bitcast_convert_type(v, dt)


# --- key functions ---

def _pair_words(key):
    """The hash of each count pair (Python ints) under @key, memoized."""
    memo = {}

    def h(p):
        if p not in memo:
            memo[p] = hash2x32(*key.words, *p)
        return memo[p]
    return h


def fold_in(key, data):
    """threefry_fold_in: the hash of the data's seed words (0, data)."""
    if key.constant and isinstance(data, (int, _np.integer)):
        w = _threefry.fold_in(_np.array(key.words, _np.uint32), int(data))
        return FryKey(int(w[0]), int(w[1]))
    d = _vec(data)
    return FryKey(*hash2x32(*key.words, 0, d))


def split(key, num, partitionable):
    """threefry_split into @num keys (a small Python int): key i is the
    hash of (0, i) (partitionable), or JAX's older layout of the hash of
    the counts 0 .. 2 num - 1 cut in halves."""
    try:
        n = int(num)
    except TypeError:
        raise _trace.trace_error("jax.random.split(key, %r) inside a kernel: a number of "
                                 "keys (an int)" % (num,)) from None
    if n > 16:
        raise _trace.trace_error("jax.random.split(key, %d) inside a kernel: at most 16 "
                                 "keys (each is a hash of its own)" % n)
    if key.constant:
        w = _threefry.split(_np.array(key.words, _np.uint32), (n,), partitionable)
        return FryKeys(FryKey(int(a), int(b)) for a, b in w)
    h = _pair_words(key)
    if partitionable:
        return FryKeys(FryKey(*h((0, i))) for i in range(n)) if n else FryKeys()

    def word(t):	# word t of threefry_2x32(key, arange(2n)), as _threefry's
        return h((t, t + n))[0] if t < n else h((t - n, t))[1]
    return FryKeys(FryKey(word(2 * i), word(2 * i + 1)) for i in range(n))


# --- bits ---

def _block_shape(shape, what):
    try:
        shape = tuple(int(d) for d in shape)
    except TypeError:
        raise _trace.trace_error("jax.random.%s inside a kernel: the shape must be a tuple "
                                 "of ints, not %r" % (what, shape)) from None
    if not 1 <= len(shape) <= 4:
        raise _trace.trace_error("jax.random.%s%r inside a kernel: shapes have 1 to 4 "
                                 "dimensions" % (what, shape))
    if math.prod(shape) > _M:
        raise _trace.trace_error("jax.random.%s%r inside a kernel: more than 2**32 - 1 "
                                 "counts" % (what, shape))
    return shape


def _counts(rows, last):
    """Each element's row-major index in a (rows, last) block, uint32."""
    from .. import lax
    from .. import numpy as jnp
    i = lax.broadcasted_iota(jnp.int32, (rows, last), 0)
    j = lax.broadcasted_iota(jnp.int32, (rows, last), 1)
    return _trace.local(_bitcast(i * last + j, jnp.uint32))


def random_bits(key, shape, partitionable, what="bits"):
    """threefry_random_bits of 32-bit words: uint32 of @shape, the host's
    _threefry.random_bits for the same key and layout."""
    from .. import numpy as jnp
    shape = _block_shape(shape, what)
    size = math.prod(shape)
    rows, last = size // shape[-1], shape[-1]
    n = _counts(rows, last)
    if partitionable:
        # the 64-bit count's high word is 0 (size < 2**32); the words xor-ed
        b0, b1 = hash2x32(*key.words, 0, n)
        bits = _trace.local(b0 ^ b1)
    else:
        # threefry_2x32 of arange(size) (a zero word padded when odd): the
        # first half of the counts is x0, the second x1; element i < h is
        # word 0 of pair i, element i >= h word 1 of pair i - h
        h = (size + 1) // 2
        first = _trace.local(n < h)
        j = _trace.local(jnp.where(first, n, n - h))
        x1 = j + h if size % 2 == 0 else jnp.where(j + h < size, j + h, 0)
        b0, b1 = hash2x32(*key.words, j, _trace.local(x1))
        bits = _trace.local(jnp.where(first, b0, b1))
    return bits if len(shape) == 2 else _trace.local(jnp.reshape(bits, shape))


def bits(key, shape, dtype, partitionable):
    d = _trace.as_dtype(dtype) if dtype is not None else _trace.uint32
    if d is not _trace.uint32:
        raise _trace.trace_error("jax.random.bits(dtype=%s) of a threefry key inside a "
                                 "kernel: uint32 (32-bit draws) only" % _trace.dtype_text(d))
    return random_bits(key, shape, partitionable)


def _float_dtype(dtype, what):
    d = _trace.as_dtype(dtype) if dtype is not None else _trace.float32
    if d is not _trace.float32:
        raise _trace.trace_error("jax.random.%s(dtype=%s) of a threefry key inside a "
                                 "kernel: float32 only" % (what, _trace.dtype_text(d)))


def _f32(x):
    return float(_np.float32(x)) if isinstance(x, (int, float, _np.number)) else x


def uniform(key, shape, dtype, minval, maxval, partitionable, what="uniform"):
    """JAX's float32 uniform: 23 random mantissa bits under exponent 0 give
    [1, 2), less 1, scaled to [minval, maxval), all float32 (maxval -
    minval rounded to float32 as the host's float32 subtraction does)."""
    from .. import numpy as jnp
    _float_dtype(dtype, what)
    b = random_bits(key, shape, partitionable, what)
    f = _trace.local(_bitcast((b >> 9) | 0x3F800000, jnp.float32) - 1.0)
    lo, hi = _f32(minval), _f32(maxval)
    if isinstance(lo, float) and isinstance(hi, float):
        span = float(_np.float32(hi) - _np.float32(lo))
    else:
        span = hi - lo
    return _trace.local(jnp.maximum(lo, f * span + lo))


def normal(key, shape, dtype, partitionable):
    """JAX's normal: sqrt(2) * erf_inv(u), u uniform in [nextafter(-1, 0), 1)."""
    from .. import lax
    _float_dtype(dtype, "normal")
    lo = float(_np.nextafter(_np.float32(-1), _np.float32(0)))
    u = uniform(key, shape, None, lo, 1.0, partitionable, "normal")
    return _trace.local(lax.erf_inv(u) * float(_np.float32(_np.sqrt(2))))


def bernoulli(key, p, shape, partitionable):
    if shape is None:
        raise _trace.trace_error("jax.random.bernoulli of a threefry key inside a kernel: "
                                 "give the shape")
    if not isinstance(p, (float, _np.floating)):
        raise _trace.trace_error("jax.random.bernoulli(p=%r) of a threefry key inside a "
                                 "kernel: p a Python float" % (p,))
    return uniform(key, shape, None, 0.0, 1.0, partitionable, "bernoulli") < _f32(p)


def randint(key, shape, minval, maxval, dtype, partitionable):
    """JAX's randint of int32 (x64 off) with Python int bounds: two draws
    under the key's split, (higher % span) * (2**32 % span) + lower % span,
    mod span, wrapping in 32 bits."""
    from .. import numpy as jnp
    d = _trace.as_dtype(dtype) if dtype is not None else _trace.int32
    if d not in (_trace.int32, _trace.uint32):
        raise _trace.trace_error("jax.random.randint(dtype=%s) of a threefry key inside a "
                                 "kernel: int32 or uint32" % _trace.dtype_text(d))
    if not all(isinstance(b, (int, _np.integer)) for b in (minval, maxval)):
        raise _trace.trace_error("jax.random.randint inside a kernel: Python int bounds")
    info = _np.iinfo(_np.int32 if d is _trace.int32 else _np.uint32)
    lo, hi = int(minval), int(maxval)
    # the host's (JAX's) rules: bounds clipped, maxval past the top one more
    out_of_range = hi > info.max
    lo, hi = min(max(lo, info.min), info.max), min(max(hi, info.min), info.max)
    span = (hi - lo) & _M
    span = 1 if hi <= lo else span + 1 if out_of_range else span
    span &= _M
    k1, k2 = split(key, 2, partitionable)
    higher = random_bits(k1, shape, partitionable, "randint")
    lower = random_bits(k2, shape, partitionable, "randint")
    if span == 0:
        # uint32's whole range: XLA's x % 0 is x, and the multiplier 0
        off = lower
    else:
        mult = (1 << 16) % span
        mult = ((mult * mult) & _M) % span	# squared in uint32, as the host
        off = _trace.local(((higher % span) * mult + lower % span) % span)
    r = _trace.local(off + (lo & _M))
    return r if d is _trace.uint32 else _trace.local(_bitcast(r, jnp.int32))
