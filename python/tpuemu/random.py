# SPDX-License-Identifier: MIT
"""jax.random's host-side names, for the docs' examples as written: keys,
split, normal, uniform, randint, bernoulli and permutation give NumPy arrays
from NumPy's PCG64 seeded by the key. Deterministic for a key, but not
JAX's threefry values: compare against references of the same inputs."""
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


def key(seed):
    return _Key(seed)


PRNGKey = key


def split(k, num=2):
    return tuple(_Key(k.seed, k.path + (i + 1,)) for i in range(int(num)))


def fold_in(k, data):
    return _Key(k.seed, k.path + (int(data) + (1 << 20),))


def _dtype(dtype):
    from ._trace import as_dtype
    if dtype is None:
        return _float32
    d = as_dtype(dtype)
    if d.name == "bfloat16":
        raise TypeError("jax.random: bfloat16 samples are not supported here; "
                        "draw float32 and convert with tpuemu.to_bf16")
    return _np.dtype(d.np_name)


def _shape(shape):
    return (int(shape),) if _np.isscalar(shape) else tuple(int(d) for d in shape)


def normal(k, shape=(), dtype=None):
    return k._generator().standard_normal(_shape(shape)).astype(_dtype(dtype))


def uniform(k, shape=(), dtype=None, minval=0.0, maxval=1.0):
    g = k._generator()
    return g.uniform(minval, maxval, _shape(shape)).astype(_dtype(dtype))


def randint(k, shape, minval, maxval, dtype=None):
    dt = _np.dtype(_np.int32) if dtype is None else _dtype(dtype)
    return k._generator().integers(minval, maxval, _shape(shape)).astype(dt)


def bernoulli(k, p=0.5, shape=()):
    return k._generator().random(_shape(shape)) < p


def permutation(k, x):
    g = k._generator()
    return g.permutation(int(x)) if _np.isscalar(x) else g.permutation(_np.asarray(x))
