# SPDX-License-Identifier: MIT
"""jax.random's host-side names, for the docs' examples as written: keys,
split, normal, uniform, randint, bernoulli and permutation give NumPy arrays
from NumPy's PCG64 seeded by the key. Deterministic for a key, but not
JAX's threefry values: compare against references of the same inputs.
Pallas keys (impl="pallas_tpu", pltpu.to_pallas_key) sample inside
kernels only: pallas/_keys.py."""
import numpy as _np

_float32 = _np.float32


class _Key:
    """A PRNG key: a seed and the path of splits that led to it."""

    def __init__(self, seed, path=()):
        self.seed = int(seed)
        self.path = tuple(path)

    def _generator(self):
        return _np.random.Generator(_np.random.PCG64(
            _np.random.SeedSequence([self.seed & 0xFFFFFFFF, *self.path])))

    def __repr__(self):
        return "Key(%d, %r)" % (self.seed, self.path)


def _pallas(k):
    from .pallas import _keys
    return isinstance(k, (_keys.PallasKey, _keys.KernelKey))


def _in_kernel(k, what):
    """Whether @k is a Pallas key read in a kernel; a host Pallas key is
    refused, as JAX refuses to lower its sampler outside kernels."""
    from .pallas import _keys
    from . import _trace
    if isinstance(k, _keys.PallasKey):
        _keys.refuse_on_host(what)
    if _trace._rec is not None and not isinstance(k, _keys.KernelKey):
        # a host key's samples would be a host array the kernel cannot hold
        raise _trace.trace_error(
            "jax.random.%s inside a kernel on %r: only Pallas keys read in the kernel "
            "are supported (pass pltpu.to_pallas_key(key) with BlockSpec(memory_space="
            "pltpu.SMEM)); threefry keys in kernels are not" % (what, k))
    return isinstance(k, _keys.KernelKey)


def key(seed, *, impl=None):
    """A key; impl="pallas_tpu" is a Pallas key of the seed in both words
    (JAX's seed rule for it); other impls are this module's keys."""
    from . import _trace
    if impl == "pallas_tpu" and _trace._rec is not None:
        from .pallas import _keys	# in a kernel: the seed in both words
        w = _keys._word(seed)
        return _keys.KernelKey(w, w)
    if impl == "pallas_tpu":
        from .pallas import _keys
        return _keys.PallasKey(_np.full((1, 2), int(seed) & 0xFFFFFFFF, _np.uint32))
    return _Key(seed)


def PRNGKey(seed, *, impl=None):
    return key(seed, impl=impl)


def split(k, num=2):
    if _pallas(k):
        from .pallas import _keys
        _keys.split_refused()
    return tuple(_Key(k.seed, k.path + (i + 1,)) for i in range(int(num)))


def fold_in(k, data):
    from .pallas import _keys
    if isinstance(k, _keys.KernelKey):
        return _keys.fold_in(k, data)
    if isinstance(k, _keys.PallasKey):
        return _keys.host_fold_in(k, data)
    return _Key(k.seed, k.path + (int(data) + (1 << 20),))


def key_data(k):
    """The words of a key: a Pallas key's (..., 1, 2) uint32; this module's
    keys, two words drawn from their generator."""
    if _pallas(k):
        return k.data.copy() if hasattr(k, "data") else k.words
    if isinstance(k, (tuple, list)):
        return _np.stack([key_data(x) for x in k])
    return k._generator().integers(0, 1 << 32, (2,), dtype=_np.uint32)


def wrap_key_data(data, *, impl=None):
    if impl not in (None, "pallas_tpu"):
        raise NotImplementedError("jax.random.wrap_key_data: impl=%r; Pallas keys "
                                  "(impl=\"pallas_tpu\") only" % (impl,))
    from .pallas import _keys
    return _keys.PallasKey(data)


def bits(k, shape=(), dtype=None):
    if _in_kernel(k, "bits"):
        from .pallas import _keys
        return _keys.sample("bits", k, shape, dtype)
    dt = _np.dtype(_np.uint32) if dtype is None else _np.dtype(dtype)
    if dt not in (_np.dtype(_np.uint32), _np.dtype(_np.uint8), _np.dtype(_np.uint16)):
        raise TypeError("jax.random.bits: dtype %s; unsigned integers" % dt)
    return k._generator().integers(0, 1 << (8 * dt.itemsize), _shape(shape), dtype=dt)


def _dtype(dtype):
    from ._trace import as_dtype
    if dtype is None:
        return _float32
    d = as_dtype(dtype)
    if d.name == "bfloat16":
        return "bfloat16"	# drawn in float32, rounded (a host bf16 array)
    return _np.dtype(d.np_name)


def _cast(x, dt):
    """Samples as jnp's host arrays (x.astype(jnp.bfloat16), x.at[...])."""
    from .numpy import round_bf16, BF16Array, HostArray
    if isinstance(dt, str):
        return round_bf16(x).view(BF16Array)
    return x.astype(dt).view(HostArray)


def _shape(shape):
    return (int(shape),) if _np.isscalar(shape) else tuple(int(d) for d in shape)


def normal(k, shape=(), dtype=None):
    if _in_kernel(k, 'normal'):
        from .pallas import _keys
        return _keys.sample('normal', k, shape, **({} if dtype is None else {'dtype': dtype}))
    return _cast(k._generator().standard_normal(_shape(shape)), _dtype(dtype))


def uniform(k, shape=(), dtype=None, minval=0.0, maxval=1.0):
    if _in_kernel(k, 'uniform'):
        from .pallas import _keys
        return _keys.sample('uniform', k, shape, minval=minval, maxval=maxval,
                            **({} if dtype is None else {'dtype': dtype}))
    g = k._generator()
    r = _cast(g.uniform(minval, maxval, _shape(shape)), _dtype(dtype))
    if isinstance(_dtype(dtype), str):
        # rounding to bf16 may reach maxval: such samples get the largest
        # bf16 value below it (the interval stays half-open, as JAX's)
        from .numpy import _bf16_storage, BF16Array
        s = _bf16_storage(r)
        top = _np.float32(maxval)
        b = _bf16_storage(BF16Array.from_bits(
            (_np.array(top, _np.float32).reshape(1).view(_np.uint32) >> 16).astype(_np.uint16)))
        bits = int(b.view(_np.uint32)[0] >> 16)	# maxval truncated toward zero
        if b[0] >= top:
            bits = bits - 1 if top > 0 else 0x8001 if top == 0 else bits + 1
        below = _bf16_storage(BF16Array.from_bits(_np.array([bits], _np.uint16)))[0]
        s[s >= top] = below
    return r


def randint(k, shape, minval, maxval, dtype=None):
    if _in_kernel(k, 'randint'):
        from .pallas import _keys
        return _keys.sample('randint', k)
    dt = _np.dtype(_np.int32) if dtype is None else _dtype(dtype)
    if isinstance(dt, str):
        raise TypeError("jax.random.randint: dtype must be an integer type, not bfloat16")
    return _cast(k._generator().integers(minval, maxval, _shape(shape)), dt)


def bernoulli(k, p=0.5, shape=()):
    if _in_kernel(k, 'bernoulli'):
        from .pallas import _keys
        return _keys.sample('bernoulli', k, p, shape)
    return k._generator().random(_shape(shape)) < p


def permutation(k, x):
    if _in_kernel(k, 'permutation'):
        from .pallas import _keys
        return _keys.sample('permutation', k)
    g = k._generator()
    return g.permutation(int(x)) if _np.isscalar(x) else g.permutation(_np.asarray(x))
