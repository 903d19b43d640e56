# SPDX-License-Identifier: MIT
"""jax.random's host-side names on JAX's threefry2x32 keys (_threefry.py):
key, PRNGKey, split, fold_in, key_data, bits, uniform, normal, randint
and bernoulli give JAX's bits and values for the same seeds (permutation
follows JAX's sorts by random bits; no JAX known answer checks it),
as JAX does with jax_enable_x64 off and jax_threefry_partitionable on
(its default; threefry_partitionable(False) gives the older layout).
float32 uniform is JAX's mantissa trick, bit for bit; normal is JAX's
sqrt(2) * erf_inv(u), erf_inv XLA's float32 polynomial, here in NumPy
float32 (whose log1p may differ from XLA's in the last bit, so normal is
within a few ulps of JAX's, not always bit-equal). bfloat16 samples are
the float32 draws rounded, not JAX's 8-bit draws; randint of 8- and
16-bit dtypes is JAX's with jax_safer_randint off (JAX 0.7.2 changed those
to a less biased draw not reproduced here). impl="rbg" and
"unsafe_rbg" keys are threefry keys here (XLA's RngBitGenerator bits are
not reproduced). Pallas keys (impl="pallas_tpu", pltpu.to_pallas_key)
sample inside kernels only: pallas/_keys.py. Threefry keys sample in
kernels too, the same bits as here: pallas/_fry.py. impl=
"pallas_threefry2x32" and "pallas_philox4x32" are JAX's Pallas-kernel
impls, their bits drawn by a pallas_call: pallas/ops/tpu/random/."""
import contextlib as _contextlib

import numpy as _np

from . import _threefry

_float32 = _np.float32
_u32 = _np.uint32
# jax_threefry_partitionable: JAX's default since 0.5.0
_partitionable = [True]


@_contextlib.contextmanager
def threefry_partitionable(enabled=True):
    """jax.threefry_partitionable(flag): the key layout of split and bits
    inside the block (True: JAX's default; False: JAX's older one)."""
    old, _partitionable[0] = _partitionable[0], bool(enabled)
    try:
        yield
    finally:
        _partitionable[0] = old


# impls of two uint32 words: their dtype's tags as JAX prints them; the
# Pallas ones draw their bits with a pallas_call (pallas/ops/tpu/random/)
_TAGS = {"threefry2x32": "fry", "pallas_threefry2x32": "plfry", "pallas_philox4x32": "pllox"}


class _KeyDtype:
    """The dtype of threefry keys, key<fry> as JAX prints it (key<plfry>,
    key<pllox> for JAX's Pallas-kernel impls)."""
    key_shape = (2,)

    def __init__(self, impl="threefry2x32"):
        self.impl = impl
        self.name = "key<%s>" % _TAGS[impl]

    def __repr__(self):
        return self.name

    def __eq__(self, other):
        return isinstance(other, _KeyDtype) and other.impl == self.impl

    def __hash__(self):
        return hash(self.name)


class _Key:
    """An array of threefry2x32 keys: @data is uint32 of shape shape + (2,)
    (JAX's key_data); @impl one of _TAGS' (split, fold_in and key_data
    keep it)."""

    def __init__(self, data, impl="threefry2x32"):
        data = _np.asarray(data)
        if data.ndim < 1 or data.shape[-1] != 2 or data.dtype != _u32:
            raise TypeError("JAX encountered invalid PRNG key data: expected uint32 of "
                            "shape (..., 2); got %s of shape %r" % (data.dtype, data.shape))
        self.data = _np.ascontiguousarray(data)
        self.impl = impl
        self.dtype = _KeyDtype(impl)

    shape = property(lambda self: self.data.shape[:-1])
    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: int(_np.prod(self.shape, dtype=_np.int64)))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if any(e is Ellipsis for e in idx):
            raise IndexError("key arrays: index the batch dimensions (no Ellipsis)")
        if len(idx) > self.ndim:
            raise IndexError("too many indices for a key array of shape %r" % (self.shape,))
        return _Key(self.data[idx], self.impl)

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d key array")
        return (self[i] for i in range(len(self)))

    def reshape(self, *shape):
        shape = tuple(shape[0]) if len(shape) == 1 and not _np.isscalar(shape[0]) else shape
        return _Key(self.data.reshape(tuple(shape) + (2,)), self.impl)

    def __repr__(self):
        return "Array(%r, dtype=%s) overlaying:\n%s" % (self.shape, self.dtype, self.data)

    def __array__(self, *a, **kw):
        # as JAX's: a key's words are key_data's, not the key
        raise TypeError("JAX array with PRNGKey dtype cannot be converted to a NumPy array. "
                        "Use jax.random.key_data(arr) if you wish to extract the underlying "
                        "integer array.")


def _pallas(k):
    from .pallas import _keys
    return isinstance(k, (_keys.PallasKey, _keys.KernelKey))


def _in_kernel(k, what):
    """The key @k as a kernel holds it (None on the host): a Pallas key
    read in the kernel, or a threefry key (pallas/_fry.py: read from a
    ref, legacy key data read whole, or made in the kernel). A host Pallas
    key is refused, as JAX refuses to lower its sampler outside kernels."""
    from .pallas import _keys, _fry
    from . import _trace
    if isinstance(k, _keys.PallasKey):
        _keys.refuse_on_host(what)
    if _trace._rec is None:
        return None
    if isinstance(k, _keys.KernelKey):
        return k
    fk = _fry.key_of(k, what)
    if fk is None:
        # a host key's words would be constants the kernel closes over
        raise _trace.trace_error(
            "jax.random.%s inside a kernel on %r: a key the kernel closes over; pass it "
            "to the pallas_call (a threefry key in SMEM or VMEM, or pltpu.to_pallas_key(key) "
            "in SMEM) or make it in the kernel (jax.random.key(seed))" % (what, k))
    return fk


def _fry(kk):
    """Whether a kernel key is a threefry one."""
    from .pallas import _fry as f
    return isinstance(kk, f.FryKey)


def _as_key(k, what, batched=False):
    """(@k as a _Key, whether it was a raw uint32 key array): JAX's legacy
    keys (PRNGKey data, shape (..., 2)) are taken as threefry keys."""
    if isinstance(k, _Key):
        key, raw = k, False
    elif isinstance(k, _np.ndarray) and k.dtype == _u32 and k.shape[-1:] == (2,):
        key, raw = _Key(k), True
    else:
        raise TypeError("jax.random.%s: unexpected PRNG key type %s" % (what, type(k).__name__))
    if key.ndim and not batched:
        raise TypeError("%s accepts a single key, but was given a key array of shape %r != "
                        "(). Use jax.vmap for batching." % (what, key.shape))
    return key, raw


def _concrete_int(x, what):
    """@x as a Python int; a traced value (in a kernel) is refused by name
    rather than hashed."""
    from . import _trace
    if isinstance(x, (bool, _np.bool_)) or not (isinstance(x, (int, _np.integer)) or (
            isinstance(x, _np.ndarray) and x.ndim == 0 and x.dtype.kind in "iu")):
        if _trace._rec is not None:
            raise _trace.trace_error(
                "jax.random.%s of %r inside a kernel: threefry keys are host keys (pass "
                "pltpu.to_pallas_key(key) in SMEM and fold_in there)" % (what, x))
        if _np.ndim(x):
            raise TypeError("%s accepts a scalar, but was given an array of shape %r"
                            % (what, _np.shape(x)))
        raise TypeError("%s: expected an integer, got %r" % (what, x))
    return int(x)


_IMPLS = (None, "threefry2x32", "rbg", "unsafe_rbg", "pallas_threefry2x32", "pallas_philox4x32")


def key(seed, *, impl=None):
    """A key; impl="pallas_tpu" is a Pallas key of the seed in both words
    (JAX's seed rule for it); otherwise JAX's threefry2x32 key of the seed
    (x64 off: [0, seed mod 2**32])."""
    return _make_key(seed, impl, "key")


def _make_key(seed, impl, who):
    from . import _trace
    if impl in _IMPLS and _trace._rec is not None:
        if impl == "pallas_philox4x32":
            raise _trace.trace_error("jax.random.%s(impl=%r) inside a kernel: its bits are a "
                                     "pallas_call's; make the key outside" % (who, impl))
        from .pallas import _fry	# in a kernel: the seed's words there
        return _fry.seed_key(seed)
    if impl == "pallas_tpu" and _trace._rec is not None:
        from .pallas import _keys	# in a kernel: the seed in both words
        w = _keys._word(seed)
        return _keys.KernelKey(w, w)
    if impl == "pallas_tpu":
        from .pallas import _keys
        return _keys.PallasKey(_np.full((1, 2), int(seed) & 0xFFFFFFFF, _np.uint32))
    if impl not in _IMPLS:
        raise ValueError("jax.random.%s: unknown impl %r (threefry2x32, rbg, unsafe_rbg, "
                         "pallas_tpu, pallas_threefry2x32, pallas_philox4x32)" % (who, impl))
    if isinstance(seed, _Key) or _pallas(seed):
        raise TypeError("%s accepts a scalar seed, but was given a PRNG key array" % who)
    if _trace._rec is not None and not isinstance(seed, (int, _np.integer, _np.ndarray)):
        _concrete_int(seed, who)	# a traced seed: refused by name
    if _np.ndim(seed):
        raise TypeError("%s accepts a scalar seed, but was given an array of shape %r != (). "
                        "Use jax.vmap for batching" % (who, _np.shape(seed)))
    if isinstance(seed, float) or (isinstance(seed, (_np.ndarray, _np.generic))
                                   and _np.asarray(seed).dtype.kind not in "iu"):
        raise TypeError("PRNG key seed must be an integer; got %r" % (seed,))
    s = _concrete_int(seed, who)
    if isinstance(seed, int) and not -(1 << 63) <= s < 1 << 63:
        # as JAX's: a Python int seed is taken as an int64 first
        raise OverflowError("Python int %d too large to convert to int64" % s)
    # the Pallas impls seed as threefry does (JAX's threefry_seed)
    return _Key(_threefry.seed(s), impl if impl in _TAGS else "threefry2x32")


def PRNGKey(seed, *, impl=None):
    """JAX's legacy key constructor: the raw uint32 words of key(seed),
    shape (2,), which every function here takes as a key (and answers
    raw keys for: split, fold_in); a Pallas key stays a key."""
    k = _make_key(seed, impl, "PRNGKey")
    return k.data.copy() if isinstance(k, _Key) else k	# in a kernel: the key


def _ret(data, raw, impl="threefry2x32"):
    return data if raw else _Key(data, impl)


def split(k, num=2):
    if _pallas(k):
        from .pallas import _keys
        _keys.split_refused()
    kk = _in_kernel(k, "split")
    if kk is not None:
        from .pallas import _fry
        return _fry.split(kk, num, _partitionable[0])
    key_, raw = _as_key(k, "split")
    shape = tuple(int(d) for d in num) if isinstance(num, (tuple, list)) else (int(num),)
    if key_.impl == "pallas_philox4x32":
        from .pallas.ops.tpu.random import philox
        return _ret(philox.philox_split(key_.data, shape), raw, key_.impl)
    return _ret(_threefry.split(key_.data, shape, _partitionable[0]), raw, key_.impl)


def fold_in(k, data):
    from .pallas import _keys
    if isinstance(k, _keys.KernelKey):
        return _keys.fold_in(k, data)
    if isinstance(k, _keys.PallasKey):
        return _keys.host_fold_in(k, data)
    kk = _in_kernel(k, "fold_in")
    if kk is not None:
        from .pallas import _fry
        return _fry.fold_in(kk, data)
    key_, raw = _as_key(k, "fold_in")
    d = _concrete_int(data, "fold_in")
    if key_.impl == "pallas_philox4x32":
        from .pallas.ops.tpu.random import philox
        return _ret(philox.philox_fold_in(key_.data, d), raw, key_.impl)
    return _ret(_threefry.fold_in(key_.data, d), raw, key_.impl)


def key_data(k):
    """The words of a key: a Pallas key's (..., 1, 2) uint32, a threefry
    key's (..., 2) uint32."""
    if _pallas(k):
        return k.data.copy() if hasattr(k, "data") else k.words
    from . import _trace
    if _trace._rec is not None and not isinstance(k, (_Key, _np.ndarray)):
        raise _trace.trace_error("jax.random.key_data of %r inside a kernel: a threefry "
                                 "key's words are not an array there (store the data you "
                                 "passed in instead)" % (k,))
    if isinstance(k, (tuple, list)):
        return _np.stack([key_data(x) for x in k])
    return _as_key(k, "key_data", batched=True)[0].data.copy()


def wrap_key_data(data, *, impl=None):
    """Key data as keys: impl="pallas_tpu" Pallas keys ((..., 1, 2)
    words), otherwise threefry keys ((..., 2) words), JAX's default."""
    if impl == "pallas_tpu":
        from .pallas import _keys
        return _keys.PallasKey(data)
    if impl not in (None,) + tuple(_TAGS):
        raise NotImplementedError("jax.random.wrap_key_data: impl=%r; %s and pallas_tpu "
                                  "keys only" % (impl, ", ".join(_TAGS)))
    from . import _trace
    if _trace._rec is not None:
        return _in_kernel(data, "wrap_key_data")	# key data read in the kernel
    return _Key(_np.asarray(data).astype(_u32), impl or "threefry2x32")


def _bits(k, width, shape, what):
    key_ = _as_key(k, what)[0]
    if key_.impl != "threefry2x32":
        # JAX's Pallas impls: a pallas_call draws them, 32-bit words only
        from .pallas.ops.tpu.random import philox, threefry
        f = philox.philox_random_bits if key_.impl == "pallas_philox4x32" else \
            threefry.plthreefry_random_bits
        return f(key_.data, width, _shape(shape))
    return _threefry.random_bits(key_.data, width, _shape(shape), _partitionable[0])


def bits(k, shape=(), dtype=None):
    kk = _in_kernel(k, "bits")
    if _fry(kk):
        from .pallas import _fry as f
        return f.bits(kk, shape, dtype, _partitionable[0])
    if kk is not None:
        from .pallas import _keys
        return _keys.sample("bits", k, shape, dtype)
    dt = _np.dtype(_np.uint32) if dtype is None else _np.dtype(dtype)
    if dt not in (_np.dtype(_np.uint32), _np.dtype(_np.uint8), _np.dtype(_np.uint16)):
        raise TypeError("jax.random.bits: dtype %s; unsigned integers" % dt)
    return _bits(k, 8 * dt.itemsize, shape, "bits")


def _dtype(dtype):
    from ._trace import as_dtype
    if dtype is None:
        return _np.dtype(_float32)
    d = as_dtype(dtype)
    if d.name == "bfloat16":
        return "bfloat16"	# drawn in float32, rounded (a host bf16 array)
    return _np.dtype(d.np_name)


def _cast(x, dt):
    """Samples as jnp's host arrays (x.astype(jnp.bfloat16), x.at[...])."""
    from .numpy import round_bf16, BF16Array, HostArray
    x = _np.asarray(x)
    if isinstance(dt, str):
        return round_bf16(x).view(BF16Array)
    return x.astype(dt).view(HostArray)


def _shape(shape):
    return (int(shape),) if _np.isscalar(shape) else tuple(int(d) for d in shape)


def _uniform32(k, shape, minval, maxval, what="uniform"):
    """JAX's float32 uniform: 23 random mantissa bits under exponent 0 give
    [1, 2), less 1, scaled to [minval, maxval), all in float32."""
    b = _bits(k, 32, shape, what)
    one = _np.array(1.0, _float32).view(_u32)
    f = ((b >> _u32(32 - 23)) | one).view(_float32) - _float32(1)
    lo, hi = _np.asarray(minval, _float32), _np.asarray(maxval, _float32)
    return _np.maximum(lo, f * (hi - lo) + lo)


# XLA's ErfInv32 (Giles' single-precision approximation), w < 5 and w >= 5
_ERFINV_LT5 = tuple(_float32(c) for c in (
    2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
    -0.00125372503, -0.00417768164, 0.246640727, 1.50140941))
_ERFINV_GE5 = tuple(_float32(c) for c in (
    -0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
    -0.0076224613, 0.00943887047, 1.00167406, 2.83297682))


def _erf_inv32(x):
    """lax.erf_inv in float32, XLA's formula step by step."""
    x = _np.asarray(x, _float32)
    with _np.errstate(divide="ignore", invalid="ignore"):
        w = -_np.log1p(-x * x)
        lt = w < _float32(5)
        w = _np.where(lt, w - _float32(2.5), _np.sqrt(w) - _float32(3))
        p = _np.where(lt, _ERFINV_LT5[0], _ERFINV_GE5[0])
        for a, b in zip(_ERFINV_LT5[1:], _ERFINV_GE5[1:]):
            p = _np.where(lt, a, b) + p * w
        # erf_inv(+-1) = +-inf, which the polynomial does not give
        return _np.where(_np.abs(x) == _float32(1), x * _float32(_np.inf), p * x)


def normal(k, shape=(), dtype=None):
    kk = _in_kernel(k, "normal")
    if _fry(kk):
        from .pallas import _fry as f
        return f.normal(kk, shape, dtype, _partitionable[0])
    if kk is not None:
        from .pallas import _keys
        return _keys.sample('normal', k, shape, **({} if dtype is None else {'dtype': dtype}))
    # JAX's: u uniform in [nextafter(-1, 0), 1), sqrt(2) * erf_inv(u)
    lo = _np.nextafter(_float32(-1), _float32(0))
    u = _uniform32(k, shape, lo, _float32(1), "normal")
    return _cast(_float32(_np.sqrt(2)) * _erf_inv32(u), _dtype(dtype))


def uniform(k, shape=(), dtype=None, minval=0.0, maxval=1.0):
    kk = _in_kernel(k, "uniform")
    if _fry(kk):
        from .pallas import _fry as f
        return f.uniform(kk, shape, dtype, minval, maxval, _partitionable[0])
    if kk is not None:
        from .pallas import _keys
        return _keys.sample('uniform', k, shape, minval=minval, maxval=maxval,
                            **({} if dtype is None else {'dtype': dtype}))
    dt = _dtype(dtype)
    if not isinstance(dt, str) and dt.kind != "f":
        raise ValueError("dtype argument to `uniform` must be a float dtype, got %s" % dt)
    r = _cast(_uniform32(k, shape, minval, maxval), dt)
    if isinstance(dt, str):
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


def _rem(a, b):
    # XLA's integer remainder: x % 0 is x
    return _np.where(b == 0, a, a % _np.where(b == 0, 1, b).astype(b.dtype)).astype(a.dtype)


def randint(k, shape, minval, maxval, dtype=None):
    kk = _in_kernel(k, "randint")
    if _fry(kk):
        from .pallas import _fry as f
        return f.randint(kk, shape, minval, maxval, dtype, _partitionable[0])
    if kk is not None:
        from .pallas import _keys
        return _keys.sample('randint', k)
    dt = _np.dtype(_np.int32) if dtype is None else _dtype(dtype)
    if isinstance(dt, str) or dt.kind not in "iu":
        raise TypeError("jax.random.randint: dtype must be an integer type, not %s"
                        % ("bfloat16" if isinstance(dt, str) else dt))
    shape = _shape(shape)
    info = _np.iinfo(dt)
    nbits = info.bits
    udt = _np.dtype("uint%d" % nbits)
    # JAX's: bounds clipped to the dtype, maxval past its top a span one larger
    lo = _np.asarray(minval).astype(_np.int64)
    hi = _np.asarray(maxval).astype(_np.int64)
    out_of_range = hi > info.max
    lo, hi = _np.clip(lo, info.min, info.max), _np.clip(hi, info.min, info.max)
    k1, k2 = split(_as_key(k, "randint")[0])
    higher, lower = (_bits(kk, nbits, shape, "randint") for kk in (k1, k2))
    with _np.errstate(over="ignore"):
        span = ((hi - lo) & ((1 << nbits) - 1)).astype(udt)
        span = _np.where(hi <= lo, udt.type(1), span).astype(udt)
        span = _np.where(out_of_range & (hi > lo), span + udt.type(1), span).astype(udt)
        # (a * b) % span without overflow: b = 2**nbits % span, squared halves
        mult = _rem(_np.asarray(1 << (nbits // 2), udt), span)
        mult = _rem((mult * mult).astype(udt), span)
        off = (_rem(higher, span) * mult).astype(udt) + _rem(lower, span)
        off = _rem(off.astype(udt), span)
        r = (lo + off.astype(_np.int64)) & ((1 << nbits) - 1)
    r = r.astype(udt).view(dt) if dt.kind == "i" else r.astype(dt)
    return _cast(_np.broadcast_to(r, shape), dt)


def bernoulli(k, p=0.5, shape=None):
    kk = _in_kernel(k, "bernoulli")
    if _fry(kk):
        from .pallas import _fry as f
        return f.bernoulli(kk, p, shape, _partitionable[0])
    if kk is not None:
        from .pallas import _keys
        return _keys.sample('bernoulli', k, p, () if shape is None else shape)
    # JAX's: uniform(key, shape, p's float dtype) < p
    p = _np.asarray(p)
    if p.dtype.kind not in "f":
        raise TypeError("bernoulli probability `p` must have a floating dtype, got %s."
                        % p.dtype)
    shape = _np.shape(p) if shape is None else _shape(shape)
    return _np.asarray(_uniform32(k, shape, 0.0, 1.0, "bernoulli") < p.astype(_float32))


def _shuffle(k, x, axis):
    """JAX's _shuffle: sorts by fresh 32-bit keys, enough rounds that ties
    are unlikely (3 ln n / ln(2**32 - 1) of them)."""
    rounds = int(_np.ceil(3 * _np.log(max(1, x.size)) / _np.log(_np.iinfo(_np.uint32).max)))
    key_ = _as_key(k, "permutation")[0]
    for _ in range(rounds):
        key_, sub = split(key_)
        order = _np.argsort(_bits(sub, 32, x.shape, "permutation"), axis=axis, kind="stable")
        x = _np.take_along_axis(x, order, axis)
    return x


def permutation(k, x, axis=0, independent=False):
    kk = _in_kernel(k, "permutation")
    if _fry(kk):
        from . import _trace
        raise _trace.trace_error("jax.random.permutation of a threefry key inside a "
                                 "kernel is not supported (it sorts)")
    if kk is not None:
        from .pallas import _keys
        return _keys.sample('permutation', k)
    if _np.ndim(x) == 0:
        if not isinstance(x, (int, _np.integer)):
            raise TypeError("x must be an integer or at least 1-dimensional")
        return _shuffle(k, _np.arange(int(x), dtype=_np.int32), 0)
    x = _np.asarray(x)
    axis = axis % x.ndim
    if independent or x.ndim == 1:
        return _shuffle(k, x, axis)
    return _np.take(x, _shuffle(k, _np.arange(x.shape[axis], dtype=_np.int32), 0), axis)
