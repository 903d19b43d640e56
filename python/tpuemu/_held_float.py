# SPDX-License-Identifier: MIT
"""The floats narrower than bfloat16's range or precision (float16 and the
float8s): the device has no such dtype, so their arrays live in float32
words holding values exact in the type, as XLA computes them in float32
and rounds. Every result that can leave the type is rounded to nearest
even here, on the device by the vector unit's integer ops on the words'
bits and on the host by the same formula in NumPy (float16's host arrays
are NumPy's own)."""
import numpy as _np


class Format:
    """A binary float format: @mant stored mantissa bits, @emin the least
    normal exponent, @max the largest finite value; @inf whether it has
    infinities (else a value past @max is NaN, as ml_dtypes' and XLA's
    non-saturating casts give); @fnuz: no negative zero (its -0 is +0)."""

    def __init__(self, mant, emin, max_value, inf, fnuz=False):
        self.mant = mant
        self.emin = emin
        self.max = max_value
        self.inf = inf
        self.fnuz = fnuz
        self.shift = 23 - mant			# float32 mantissa bits dropped
        self.max_bits = int(_np.float32(max_value).view(_np.uint32))
        self.min_normal_bits = int(_np.float32(2.0 ** emin).view(_np.uint32))
        # |x| + C - C rounds |x| < 2^emin to a multiple of the subnormal
        # quantum 2^(emin - mant): float32's ulp at C is that quantum
        self.sub_magic = 2.0 ** (emin - mant + 23)
        self.overflow_bits = 0x7F800000 if inf else 0x7FC00000


FORMATS = {
    "float16": Format(10, -14, 65504.0, True),
    "float8_e5m2": Format(2, -14, 57344.0, True),
    "float8_e4m3fn": Format(3, -6, 448.0, False),
    "float8_e4m3fnuz": Format(3, -7, 240.0, False, fnuz=True),
    "float8_e5m2fnuz": Format(2, -15, 57344.0, False, fnuz=True),
    "float8_e4m3b11fnuz": Format(3, -10, 30.0, False, fnuz=True),
}

_NAN_BITS = 0x7FC00000
_INF_BITS = 0x7F800000


def round_host(x, name):
    """float32 values (anything NumPy converts) rounded to the nearest value
    of format @name, ties to even, kept in float32."""
    f = FORMATS[name]
    a = _np.asarray(x, dtype=_np.float32)
    u = a.view(_np.uint32).astype(_np.int64)
    sign, mag = u & 0x80000000, u & 0x7FFFFFFF
    r = (mag + (1 << (f.shift - 1)) - 1 + ((mag >> f.shift) & 1)) & ~((1 << f.shift) - 1)
    with _np.errstate(all="ignore"):
        sub = ((_np.abs(a) + _np.float32(f.sub_magic)) - _np.float32(f.sub_magic))
    r = _np.where(mag < f.min_normal_bits, sub.view(_np.uint32).astype(_np.int64), r)
    r = _np.where(r > f.max_bits, f.overflow_bits, r)
    r = _np.where(mag > _INF_BITS, _NAN_BITS, r)
    out = _np.where((r == 0) & f.fnuz, 0, r | sign)
    return out.astype(_np.uint32).view(_np.float32).reshape(_np.shape(x))


def round_constant(c, name):
    """A Python number meeting an array of format @name: the value it is
    converted to (JAX's weak types take the array's dtype)."""
    return float(round_host(float(c), name))


def round_traced(v, d):
    """Traced float32 words @v rounded to held float dtype @d (a Value
    whose dt becomes @d): the same formula as round_host, by the vector
    unit's int32 ops on the bits. The scalar core has no bitwise ops, so
    a scalar-core value is refused."""
    from . import _trace
    if v.scalar:
        raise _trace.trace_error("a %s scalar (an SMEM element or a value of one): the scalar "
                                 "core cannot round to %s; keep %s values in VMEM"
                                 % (d.name, d.name, d.name))
    from . import numpy as jnp
    f = FORMATS[d.name]
    shape = v.shape
    if v.dt is not _trace.float32 and v.dt not in _trace._HELD_FLOATS:
        v = v.astype(_trace.float32)	# an integer's, a bool's, a bf16's
    w = _trace.local(_trace.bitcast_words(v, _trace.int32))
    mag = _trace.local(w & 0x7FFFFFFF)
    # each step bound to a local: the statements stay short
    r = _trace.local((mag + ((1 << (f.shift - 1)) - 1) + ((mag >> f.shift) & 1))
                     & -(1 << f.shift))
    a = _trace.bitcast_words(mag, _trace.float32)
    sub = _trace.bitcast_words((a + f.sub_magic) - f.sub_magic, _trace.int32)
    r = _trace.local(jnp.where(mag < f.min_normal_bits, sub, r))
    r = _trace.local(jnp.where(mag > _INF_BITS, _NAN_BITS,
                               jnp.where(r > f.max_bits, f.overflow_bits, r)))
    out = r | (w ^ mag)			# the sign bit back
    if f.fnuz:
        out = jnp.where(r == 0, 0, out)
    out = _trace.local(_trace.bitcast_words(out, _trace.float32))
    out.dt, out.shape = d, shape
    return out
