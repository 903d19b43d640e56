# SPDX-License-Identifier: MIT
"""jnp functions a kernel body gets as compositions of the device's ops
(the vector unit has no instruction for them): the inverse and hyperbolic
functions, expm1, cbrt and friends from exp, log, sqrt and Cephes'
single-precision arctangent polynomial; cumulative sums, products and
extrema by Hillis-Steele doubling (log2(n) rolls, each masked by an iota);
jnp.prod by halving; var and std from means; tril, triu, flip and repeat
from iotas, gathers and strided stores. Float results are float32 to a
few ulp of NumPy's. numpy.py wraps each for the host, where NumPy's own
function of the same name runs."""
import math

from . import _trace
from ._trace import Value, trace_error

_PI = math.pi
_l = _trace.local	# a value used more than once, computed once (statements cap terms)
_LN2 = math.log(2.0)


def _np():
    from . import numpy as jnp
    return jnp


def _lax():
    from . import lax
    return lax


def _f32(x):
    """@x as float32 (an integer or bool value as jnp's float functions take it)."""
    jnp = _np()
    if isinstance(x, Value) and isinstance(x.dt, _trace.DType) and not _trace.is_float_dt(x.dt):
        return x.astype(jnp.float32)
    return x


def _shape(x, fn):
    s = getattr(x, "shape", None)
    if s is None:
        raise trace_error("jnp.%s of %s: its shape is not known while tracing"
                          % (fn, x.render() if hasattr(x, "render") else repr(x)))
    return tuple(s)


def _axis(axis, rank, fn):
    a = int(axis)
    if not -rank <= a < rank:
        raise ValueError("jnp.%s: axis %d is out of bounds for an array of rank %d"
                         % (fn, a, rank))
    return a % rank


# --- elementwise ---

def signbit(x):
    """The sign bit: -0.0 and negative NaNs have it (a float's bits < 0)."""
    jnp = _np()
    if isinstance(x, Value) and x.dt is jnp.bool_:
        return x & False
    if isinstance(x, Value) and _trace.is_float_dt(x.dt):
        if getattr(x, "scalar", False):
            # a scalar has no bitcast here: x < 0, or -0.0 by 1 / x; the
            # sign of a NaN is not seen (the compositions mask NaNs apart)
            x = _l(_f32(x))
            return (x < 0.0) | ((x == 0.0) & (1.0 / x < 0.0))
        return _lax().bitcast_convert_type(_f32(x), jnp.int32) < 0
    return x < 0


def copysign(a, b):
    jnp = _np()
    a = _l(jnp.abs(_f32(a)))
    return jnp.where(signbit(_f32(b)), -a, a)


def fabs(x):
    return _np().abs(_f32(x))


def absolute(x):
    return _np().abs(x)


def positive(x):
    return +x


def trunc(x):
    jnp = _np()
    return jnp.where(x < 0, jnp.ceil(x), jnp.floor(x))


fix = trunc


def deg2rad(x):
    return _f32(x) * (_PI / 180.0)


def rad2deg(x):
    return _f32(x) * (180.0 / _PI)


radians, degrees = deg2rad, rad2deg


def log2(x):
    return _np().log(_f32(x)) * (1.0 / _LN2)


def log10(x):
    return _np().log(_f32(x)) * (1.0 / math.log(10.0))


def expm1(x):
    """Kahan's: (u - 1) * x / log(u) for u = exp(x) keeps the digits
    exp(x) - 1 cancels near 0."""
    jnp = _np()
    x = _l(_f32(x))
    u = _l(jnp.exp(x))
    um1 = _l(u - 1.0)
    r = _l(jnp.where(u == 1.0, x, um1 * x / jnp.log(jnp.where(u == 1.0, 2.0, u))))
    r = _l(jnp.where(um1 == -1.0, -1.0, r))
    return jnp.where(u == jnp.inf, jnp.inf, r)


def cbrt(x):
    """exp(log|x| / 3), one Newton step, x's sign."""
    jnp = _np()
    x = _l(_f32(x))
    a = _l(jnp.abs(x))
    safe = _l(jnp.where((a == 0.0) | (a == jnp.inf), 1.0, a))
    y = _l(jnp.exp(jnp.log(safe) * (1.0 / 3.0)))
    y = _l(y - (y * y * y - safe) / (3.0 * y * y))
    y = _l(jnp.where(a == 0.0, 0.0, jnp.where(a == jnp.inf, jnp.inf, y)))
    return jnp.where(jnp.isnan(x), x, copysign(y, x))


def _half_exp(a):
    """e^a / 2 past e^a's overflow: (e^(a/2) / 2) * e^(a/2), a/2 exact
    (e^(a - ln 2) would round a - ln 2 first: ulps of error per unit of a)."""
    h = _l(_np().exp(0.5 * a))
    return (0.5 * h) * h


def sinh(x):
    jnp = _np()
    x = _l(_f32(x))
    a = _l(jnp.abs(x))
    e = _l(expm1(a))
    small = 0.5 * (e + e / (e + 1.0))	# exact near 0
    big = _half_exp(a)
    return copysign(jnp.where(a > 20.0, big, small), x)


def cosh(x):
    jnp = _np()
    a = _l(jnp.abs(_f32(x)))
    return jnp.where(a > 20.0, _half_exp(a), 0.5 * (jnp.exp(a) + jnp.exp(-a)))


def arcsinh(x):
    jnp = _np()
    x = _l(_f32(x))
    a = _l(jnp.abs(x))
    small = jnp.log1p(a + a * a / (1.0 + jnp.sqrt(1.0 + a * a)))
    big = jnp.log(a) + _LN2		# a * a would overflow
    return copysign(jnp.where(a > 1e9, big, small), x)


def arccosh(x):
    jnp = _np()
    x = _l(_f32(x))
    t = _l(x - 1.0)
    small = jnp.log1p(t + jnp.sqrt(t * (x + 1.0)))
    r = jnp.where(x > 1e9, jnp.log(x) + _LN2, small)
    return jnp.where(x < 1.0, jnp.nan, r)


def arctanh(x):
    jnp = _np()
    x = _l(_f32(x))
    return 0.5 * (jnp.log1p(x) - jnp.log1p(-x))	# each term exact where the other is not


def arctan(x):
    """Cephes' atanf: |x| reduced to [0, tan(pi/8)] by pi/4 and pi/2
    offsets, then its degree-9 odd polynomial."""
    jnp = _np()
    x = _l(_f32(x))
    a = _l(jnp.abs(x))
    big = _l(a > 2.414213562373095)
    mid = _l((a > 0.4142135623730950) & (a <= 2.414213562373095))
    z = _l(jnp.where(big, -1.0 / jnp.where(big, a, 1.0), jnp.where(mid, (a - 1.0) / (a + 1.0), a)))
    base = _l(jnp.where(big, _PI / 2, jnp.where(mid, _PI / 4, 0.0)))
    zz = _l(z * z)
    p = (((8.05374449538e-2 * zz - 1.38776856032e-1) * zz + 1.99777106478e-1) * zz
         - 3.33329491539e-1) * zz * z + z
    r = _l(jnp.where(a == jnp.inf, _PI / 2, base + p))
    return jnp.where(jnp.isnan(x), x, copysign(r, x))


def arctan2(y, x):
    """The angle of (x, y): arctan of the smaller over the larger
    magnitude, reflected into the quadrant; NumPy's signed zeros and
    infinities."""
    jnp = _np()
    y, x = _l(_f32(y)), _l(_f32(x))
    ax, ay = _l(jnp.abs(x)), _l(jnp.abs(y))
    mx, mn = _l(jnp.maximum(ax, ay)), _l(jnp.minimum(ax, ay))
    both_inf = (ax == jnp.inf) & (ay == jnp.inf)
    t = _l(jnp.where(both_inf, 1.0, jnp.where(mx == 0.0, 0.0, mn / jnp.where(mx == 0.0, 1.0, mx))))
    r = _l(arctan(t))
    r = _l(jnp.where(ay > ax, _PI / 2 - r, r))
    r = _l(jnp.where(signbit(x), _PI - r, r))
    r = _l(copysign(r, y))
    return jnp.where(jnp.isnan(x) | jnp.isnan(y), x + y, r)


def arcsin(x):
    jnp = _np()
    x = _l(_f32(x))
    return arctan2(x, jnp.sqrt((1.0 - x) * (1.0 + x)))


def arccos(x):
    jnp = _np()
    x = _l(_f32(x))
    return arctan2(jnp.sqrt((1.0 - x) * (1.0 + x)), x)


def hypot(a, b):
    jnp = _np()
    a, b = _l(jnp.abs(_f32(a))), _l(jnp.abs(_f32(b)))
    mx, mn = _l(jnp.maximum(a, b)), _l(jnp.minimum(a, b))
    q = _l(mn / jnp.where(mx == 0.0, 1.0, mx))
    r = _l(jnp.where(mx == 0.0, 0.0, mx * jnp.sqrt(1.0 + q * q)))
    return jnp.where((a == jnp.inf) | (b == jnp.inf), jnp.inf, r)


def sinc(x):
    jnp = _np()
    x = _l(_f32(x))
    px = _l(x * _PI)
    r = jnp.where(x == 0.0, 1.0, jnp.sin(px) / jnp.where(x == 0.0, 1.0, px))
    # pi x would be infinite (sin(inf) is NaN): 0 but for infinities
    return jnp.where(jnp.abs(x) > 1e30, jnp.where(jnp.isinf(x), jnp.nan, 0.0), r)


def logaddexp(a, b):
    jnp = _np()
    a, b = _l(_f32(a)), _l(_f32(b))
    m = _l(jnp.maximum(a, b))
    r = _l(m + jnp.log1p(jnp.exp(-jnp.abs(a - b))))
    return jnp.where(a == b, a + _LN2, r)	# equal infinities: a - b is NaN


def logaddexp2(a, b):
    jnp = _np()
    a, b = _l(_f32(a)), _l(_f32(b))
    m = _l(jnp.maximum(a, b))
    r = _l(m + jnp.log1p(jnp.exp2(-jnp.abs(a - b))) * (1.0 / _LN2))
    return jnp.where(a == b, a + 1.0, r)


def ldexp(x, n):
    """x * 2**n exactly: 2**k made from its exponent bits, in two halves
    so that n past the float32 exponent range still scales in steps."""
    jnp = _np()
    lax = _lax()
    x = _l(_f32(x))
    # a Python int clipped here (the device clips arrays only)
    n = max(-300, min(300, int(n))) if isinstance(n, int) else _l(jnp.clip(n, -300, 300))
    h = n // 2

    def pow2(k):
        if isinstance(k, int):
            return float(2.0 ** max(-126, min(127, k)))
        return lax.bitcast_convert_type((jnp.clip(k, -126, 127) + 127) << 23, jnp.float32)
    return x * pow2(h) * pow2(n - h)


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    jnp = _np()
    if not (isinstance(x, Value) and _trace.is_float_dt(x.dt)):
        return x
    big = 3.4028234663852886e38
    x = _l(jnp.where(jnp.isnan(x), nan, x))
    x = _l(jnp.where(x == jnp.inf, big if posinf is None else posinf, x))
    return jnp.where(x == -jnp.inf, -big if neginf is None else neginf, x)


def heaviside(x, h0):
    jnp = _np()
    x = _l(_f32(x))
    return jnp.where(jnp.isnan(x), x, jnp.where(x < 0.0, 0.0, jnp.where(x == 0.0, h0, 1.0)))


def fmax(a, b):
    """The larger, NaN only where both are."""
    jnp = _np()
    return jnp.where(jnp.isnan(a), b, jnp.where(jnp.isnan(b), a, jnp.maximum(a, b)))


def fmin(a, b):
    jnp = _np()
    return jnp.where(jnp.isnan(a), b, jnp.where(jnp.isnan(b), a, jnp.minimum(a, b)))


def logical_xor(a, b):
    jnp = _np()
    return jnp.not_equal(jnp.not_equal(a, 0), jnp.not_equal(b, 0))


def float_power(a, b):
    return _np().power(_f32(a), _f32(b))	# float32: kernels have no float64


# --- along an axis ---

def _iota(shape, axis):
    return _lax().broadcasted_iota(_np().int32, shape, axis)


def _scan(x, axis, op, fill, reverse, fn):
    """Hillis-Steele: after step s every element holds op of the 2s
    elements ending at it; elements with fewer before them take @fill
    (None: themselves, for max and min)."""
    jnp = _np()
    shape = _shape(x, fn)
    if axis is None:
        if len(shape) != 1:
            x = jnp.reshape(x, (-1,))
            shape = _shape(x, fn)
        axis = 0
    a = _axis(axis, len(shape), fn)
    n = shape[a]
    pos = _iota(shape, a)
    s = 1
    while s < n:
        moved = _l(jnp.roll(x, -s if reverse else s, axis=a))
        ok = pos < n - s if reverse else pos >= s
        x = _l(op(x, jnp.where(ok, moved, x if fill is None else fill)))
        s *= 2
    return x


def _widened(x, dtype):
    return _trace.widened(x, dtype, bools=True)	# jnp's: bools count as int32


def cumsum(a, axis=None, dtype=None, *, reverse=False):
    return _scan(_widened(a, dtype), axis, lambda p, q: p + q, 0, reverse, "cumsum")


def cumprod(a, axis=None, dtype=None, *, reverse=False):
    return _scan(_widened(a, dtype), axis, lambda p, q: p * q, 1, reverse, "cumprod")


def cummax(a, axis=0, *, reverse=False):
    return _scan(a, axis, _np().maximum, None, reverse, "cummax")


def cummin(a, axis=0, *, reverse=False):
    return _scan(a, axis, _np().minimum, None, reverse, "cummin")


cumulative_sum, cumulative_prod = cumsum, cumprod


def prod(a, axis=None, keepdims=False, dtype=None):
    """Products of halves until one element is left along each axis (ones
    pad it to a power of two first)."""
    jnp = _np()
    x = _widened(a, dtype)
    shape = _shape(x, "prod")
    axes = range(len(shape)) if axis is None else \
        [axis] if isinstance(axis, int) else list(axis)
    axes = sorted({_axis(d, len(shape), "prod") for d in axes})
    for d in axes:
        n = _shape(x, "prod")[d]
        p = 1
        while p < n:
            p *= 2
        if p > n:
            pad = list(_shape(x, "prod"))
            pad[d] = p - n
            x = jnp.concatenate([x, jnp.ones(tuple(pad), x.dt)], axis=d)
        while p > 1:
            p //= 2
            lo = tuple(slice(0, p) if k == d else slice(None) for k in range(len(shape)))
            hi = tuple(slice(p, 2 * p) if k == d else slice(None) for k in range(len(shape)))
            x = _l(x[lo] * x[hi])
    if keepdims:
        return x
    return jnp.reshape(x, tuple(n for k, n in enumerate(shape) if k not in axes) or (1,)) \
        if len(axes) < len(shape) else jnp.reshape(x, ())


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None):
    jnp = _np()
    if where is not None or out is not None:
        raise trace_error("jnp.var in a kernel: where= and out= are not supported")
    x = _f32(a) if dtype is None else a.astype(dtype)
    shape = _shape(x, "var")
    ddof = ddof if correction is None else correction
    axes = range(len(shape)) if axis is None else \
        [axis] if isinstance(axis, int) else list(axis)
    n = 1
    for d in {_axis(d, len(shape), "var") for d in axes}:
        n *= shape[d]
    m = _l(jnp.mean(x, axis=axis, keepdims=True))
    d = _l(x - m)
    v = jnp.mean(d * d, axis=axis, keepdims=keepdims)
    return v * (n / (n - ddof)) if ddof else v


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None):
    return _np().sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where,
                          correction=correction))


def _tri_mask(x, k, fn):
    shape = _shape(x, fn)
    if len(shape) < 2:
        raise ValueError("jnp.%s: the array must be at least 2-D, not of shape %r"
                         % (fn, shape))
    r = len(shape)
    return _iota(shape, r - 1) - _iota(shape, r - 2), int(k)


def tril(m, k=0):
    jnp = _np()
    d, k = _tri_mask(m, k, "tril")
    return jnp.where(d <= k, m, jnp.zeros_like(m))


def triu(m, k=0):
    jnp = _np()
    d, k = _tri_mask(m, k, "triu")
    return jnp.where(d >= k, m, jnp.zeros_like(m))


def flip(m, axis=None):
    """Each axis reversed: a gather of n - 1 - iota along it."""
    jnp = _np()
    shape = _shape(m, "flip")
    if len(shape) == 1:	# a row on the device: flipped along its columns
        return jnp.reshape(flip(jnp.reshape(m, (1, shape[0])), 1), shape)
    axes = range(len(shape)) if axis is None else \
        [axis] if isinstance(axis, int) else list(axis)
    for d in sorted({_axis(d, len(shape), "flip") for d in axes}):
        n = shape[d]
        m = _l(jnp.take(m, (n - 1) - _iota((n,), 0), axis=d))
    return m


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


def repeat_in_kernel(a, repeats, axis=None, total_repeat_length=None):
    """Each element @repeats times along @axis (a Python int): the value
    stacked after @axis and merged into it, an interleave along the last."""
    jnp = _np()
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 0:
        raise trace_error("jnp.repeat in a kernel: repeats is a Python int, not %r"
                          % (repeats,))
    shape = _shape(a, "repeat")
    if axis is None:
        if len(shape) != 1:
            a = _l(jnp.reshape(a, (-1,)))
            shape = _shape(a, "repeat")
        axis = 0
    d = _axis(axis, len(shape), "repeat")
    out = shape[:d] + (shape[d] * repeats,) + shape[d + 1:]
    if total_repeat_length is not None and int(total_repeat_length) != out[d]:
        raise trace_error("jnp.repeat in a kernel: total_repeat_length=%r is not the "
                          "repeated length %d" % (total_repeat_length, out[d]))
    if repeats == 1:
        return a
    return jnp.reshape(jnp.stack([a] * repeats, axis=d + 1), out)


def _slice(x, axis, lo, hi):
    idx = [slice(None)] * len(x.shape)
    idx[axis] = slice(lo, hi)
    return x[tuple(idx)]


def pad(array, pad_width, mode="constant", *, constant_values=0):
    """jnp.pad of a value, axis by axis: "constant" concatenates blocks
    of constant_values (a scalar) before and after; "wrap" concatenates
    the runs of x's own slices the modular indices give (widths past the
    axis's length repeat it)."""
    jnp = _np()
    x = array
    shape = _shape(x, "pad")
    if mode not in ("constant", "wrap"):
        raise trace_error("jnp.pad in a kernel: mode %r (constant and wrap are composed)"
                          % (mode,))
    if not isinstance(constant_values, (int, float)) or isinstance(constant_values, bool):
        raise trace_error("jnp.pad in a kernel: constant_values is a Python scalar, not %r"
                          % (constant_values,))
    import numpy as np
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (len(shape), 2))
    for axis, (lo, hi) in enumerate(widths.tolist()):
        if lo < 0 or hi < 0:
            raise ValueError("jnp.pad: negative pad widths (%d, %d)" % (lo, hi))
        if lo == 0 and hi == 0:
            continue
        n = tuple(x.shape)[axis]
        if mode == "constant":
            parts = []
            for w in (lo, hi):
                s_ = list(x.shape)
                s_[axis] = w
                parts.append(jnp.full(tuple(s_), constant_values, x.dtype) if w else None)
            x = jnp.concatenate([p for p in (parts[0], x, parts[1]) if p is not None], axis=axis)
            continue
        if n == 0:
            raise ValueError("jnp.pad: wrap of an empty axis")
        idx = [(i - lo) % n for i in range(lo + n + hi)]
        runs, start = [], 0
        for i in range(1, len(idx) + 1):
            if i == len(idx) or idx[i] != idx[i - 1] + 1:
                runs.append((idx[start], idx[i - 1] + 1))
                start = i
        v = _l(x)
        x = jnp.concatenate([v if (a, b) == (0, n) else _slice(v, axis, a, b) for a, b in runs],
                            axis=axis)
    return x


def diagonal(a, offset=0, axis1=0, axis2=1):
    """jnp.diagonal of a 2-D value: the maximum down the columns (or
    along the rows, for a negative offset) of the value masked to its
    diagonal by iotas, the rest the dtype's lowest (a maximum keeps
    -0.0, infinities and NaNs as they are), then its slice."""
    jnp = _np()
    shape = _shape(a, "diagonal")
    if len(shape) != 2 or sorted((axis1 % 2, axis2 % 2)) != [0, 1]:
        raise trace_error("jnp.diagonal in a kernel: of a 2-D value, axes 0 and 1")
    if axis1 % 2 == 1:
        a = jnp.transpose(a)
        shape = shape[::-1]
    n, m = shape
    k = int(offset)
    length = max(0, min(n, m - k) if k >= 0 else min(n + k, m))
    dt = a.dtype
    if _trace.is_float_dt(a.dt):
        low = -jnp.inf
    elif a.dt is jnp.bool_:
        return diagonal(a.astype(jnp.int32), k).astype(jnp.bool_)
    else:
        low = int(jnp.iinfo(dt).min)
    on = (_iota(shape, 1) - _iota(shape, 0)) == k
    masked = jnp.where(on, a, jnp.full(shape, low, dt))
    if k >= 0:
        return _slice(jnp.max(masked, axis=0), 0, k, k + length)
    return _slice(jnp.max(masked, axis=1), 0, -k, -k + length)


def _is_bf16(x):
    return isinstance(x, Value) and x.dt is _trace.bfloat16


def _in_float32(f):
    """@f of bfloat16 values computed in float32 and rounded back to
    bfloat16 once, as XLA upcasts them (bf16 intermediates would lose the
    digits the compositions keep, and the bit tricks assume float32)."""
    def g(*args, **kw):
        if not any(_is_bf16(a) for a in args):
            return f(*args, **kw)
        jnp = _np()
        r = f(*[a.astype(jnp.float32) if _is_bf16(a) else a for a in args], **kw)
        return r.astype(jnp.bfloat16) if isinstance(r, Value) and r.dt is jnp.float32 else r
    g.__name__, g.__doc__ = f.__name__, f.__doc__
    return g


for _n in ("copysign fabs deg2rad rad2deg log2 log10 expm1 cbrt sinh cosh arcsinh "
           "arccosh arctanh arctan arctan2 arcsin arccos hypot sinc logaddexp logaddexp2 "
           "heaviside").split():
    globals()[_n] = _in_float32(globals()[_n])
radians, degrees = deg2rad, rad2deg


# --- comparisons, counts and shapes ---

def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b| where both are finite; elsewhere equal
    (infinities of one sign), or both NaN with @equal_nan."""
    jnp = _np()
    a, b = _l(_f32(a)), _l(_f32(b))
    finite = jnp.isfinite(a) & jnp.isfinite(b)
    close = jnp.where(finite, jnp.abs(a - b) <= atol + rtol * jnp.abs(b), a == b)
    return close | (jnp.isnan(a) & jnp.isnan(b)) if equal_nan else close


def count_nonzero(a, axis=None, keepdims=False):
    jnp = _np()
    return jnp.sum((a != 0).astype(jnp.int32), axis=axis, keepdims=keepdims)


def _along(a, d, start, stop):
    """a[..., start:stop, ...] along axis @d."""
    return a[(slice(None),) * d + (slice(start, stop),)]


def diff(a, n=1, axis=-1):
    """Differences of neighbours along @axis, @n times."""
    shape = _shape(a, "diff")
    d = _axis(axis, len(shape), "diff")
    for _ in range(int(n)):
        a = _l(a)
        m = _shape(a, "diff")[d]
        a = _along(a, d, 1, m) - _along(a, d, 0, m - 1)
    return a


def outer(a, b):
    jnp = _np()
    a, b = jnp.reshape(a, (-1,)), jnp.reshape(b, (-1,))
    return jnp.reshape(a, (-1, 1)) * jnp.reshape(b, (1, -1))


def split(ary, indices_or_sections, axis=0):
    """Pieces along @axis: @indices_or_sections equal ones, or cut at the
    given indices (Python ints)."""
    shape = _shape(ary, "split")
    d = _axis(axis, len(shape), "split")
    n = shape[d]
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        if k <= 0 or n % k:
            raise ValueError("jnp.split: array split does not result in an equal division "
                             "(%d along axis %d into %d)" % (n, d, k))
        cuts = [n // k * i for i in range(1, k)]
    else:
        cuts = [int(i) for i in indices_or_sections]
    a = _l(ary)
    edges = [0] + [min(max(c, 0), n) for c in cuts] + [n]
    return [_along(a, d, lo, max(lo, hi)) for lo, hi in zip(edges, edges[1:])]


def squeeze(a, axis=None):
    jnp = _np()
    shape = _shape(a, "squeeze")
    if axis is None:
        drop = {d for d, s in enumerate(shape) if s == 1}
    else:
        drop = {_axis(d, len(shape), "squeeze") for d in
                ((axis,) if isinstance(axis, int) else axis)}
        if any(shape[d] != 1 for d in drop):
            raise ValueError("jnp.squeeze: cannot select an axis to squeeze out which has "
                             "size not equal to one (shape %r, axis %r)" % (shape, axis))
    return jnp.reshape(a, tuple(s for d, s in enumerate(shape) if d not in drop))


def eye(N, M=None, k=0, dtype=None):
    """Ones where column - row == @k: two iotas compared."""
    jnp = _np()
    shape = (int(N), int(N if M is None else M))
    one = _iota(shape, 1) - _iota(shape, 0) == int(k)
    return one.astype(jnp.float32 if dtype is None else dtype)


def norm(x, ord=None, axis=None, keepdims=False):
    """jnp.linalg.norm's vector norms (ord None or 2, 1, inf, -inf, 0, or
    another number) along @axis, and the Frobenius norm (ord None or
    'fro') of a whole 2-D value."""
    jnp = _np()
    x = _l(_f32(x))
    shape = _shape(x, "linalg.norm")
    if axis is None and len(shape) == 2 and ord not in (None, "fro"):
        raise trace_error("jnp.linalg.norm in a kernel: a matrix norm other than the "
                          "Frobenius one (ord=%r); give axis= for vector norms" % (ord,))
    axes = tuple(range(len(shape))) if axis is None else axis
    ax = _l(jnp.abs(x))
    if ord in (None, 2, "fro"):
        return jnp.sqrt(jnp.sum(x * x, axis=axes, keepdims=keepdims))
    if ord == 1:
        return jnp.sum(ax, axis=axes, keepdims=keepdims)
    if ord == math.inf:
        return jnp.max(ax, axis=axes, keepdims=keepdims)
    if ord == -math.inf:
        return jnp.min(ax, axis=axes, keepdims=keepdims)
    if ord == 0:
        return jnp.sum((x != 0).astype(jnp.float32), axis=axes, keepdims=keepdims)
    p = float(ord)
    return jnp.sum(ax ** p, axis=axes, keepdims=keepdims) ** (1.0 / p)


NAMES = ("signbit copysign fabs absolute positive trunc fix deg2rad rad2deg radians "
         "degrees log2 log10 expm1 cbrt sinh cosh arcsinh arccosh arctanh arctan arctan2 "
         "arcsin arccos hypot sinc logaddexp logaddexp2 ldexp nan_to_num heaviside fmax "
         "fmin logical_xor float_power cumsum cumprod cumulative_sum cumulative_prod "
         "prod var std tril triu flip fliplr flipud pad diagonal isclose count_nonzero "
         "diff outer split squeeze eye").split()

# JAX's array-API spellings (NumPy 1.24 has only the arc* ones)
ALIASES = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "atan2": "arctan2",
           "asinh": "arcsinh", "acosh": "arccosh", "atanh": "arctanh"}
