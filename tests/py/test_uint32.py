# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""uint32 arrays end to end, with JAX's (XLA's) semantics: ports of JAX's
uint32 uses in tests/pallas/ops_test.py OpsTest (test_binary's integer
functions with their uint32 parametrization, test_comparison), the PRNG
idiom of JAX's TPU random tests (the bits bitcast to uint32, floats in
[0, 1) made from them with shift_right_logical), lax_test's
shift_right_logical and shift_right_arithmetic of uint32, and the edges:
wrap-around, division by zero, shifts by 32 or more, casts of NaN,
negative and huge floats, weak Python ints, jnp.iinfo, reductions, scalar
prefetch, and the refusals (SMEM, dot). Each reference is NumPy's
uint32 arithmetic (with XLA's rules spelled out where NumPy differs)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

_SHAPE = (8, 128)


def _u32(a):
    return np.asarray(a, np.int64).astype(np.uint32)


# ops_test.py's test_binary operands, tiled to a block
_X = np.tile(np.array([1, 3, -4, -6, 2, 5, 4, -7]), 128).reshape(_SHAPE)
_Y = np.tile(np.array([3, 1, -4, -5, 2, -2, 2, 4]), 128).reshape(_SHAPE)
_Y_SHIFT = np.tile(np.array([3, 1, 4, 5, 2, 2, 2, 4]), 128).reshape(_SHAPE)


def _run(kernel, out_dtype, *args, shape=_SHAPE):
    return np.asarray(pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(shape, out_dtype))(*args))


# --- ops_test.py OpsTest.test_binary, its uint32 parametrization ---

@pytest.mark.parametrize("fn", [
    "floor_divide", "add", "subtract", "multiply", "remainder", "bitwise_and",
    "bitwise_or", "bitwise_xor", "left_shift", "right_shift"])
def test_binary(fn):
    """jnp binary functions of two uint32 blocks give uint32, as NumPy's
    (negative test values wrap to large ones: -7 is 4294967289)."""
    f = getattr(jnp, fn)
    x = _u32(_X)
    y = _u32(_Y_SHIFT if fn.endswith("shift") else _Y)

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = f(x_ref[...], y_ref[...])

    out = _run(kernel, jnp.uint32, x, y)
    assert out.dtype == np.uint32
    with np.errstate(over="ignore"):
        want = getattr(np, fn)(x, y)
    np.testing.assert_array_equal(out, want)


def test_operators_wrap_modulo_2_32():
    """+, -, * on uint32 wrap (a hash's multiply), as XLA's u32 does; a
    Python int keeps the array's dtype (weak typing), even one a float32
    cannot hold exactly."""
    x = (np.arange(8 * 128, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
    x = x.reshape(_SHAPE)
    x[0, :4] = [0, 1, 0xFFFFFFFF, 0x80000000]

    def kernel(x_ref, o_ref):
        a = x_ref[...]
        h = a * 0x9E3779B9 + 0x7F4A7C15
        o_ref[...] = (h ^ (h >> 16)) - 3

    out = _run(kernel, jnp.uint32, x)
    with np.errstate(over="ignore"):
        h = x * np.uint32(0x9E3779B9) + np.uint32(0x7F4A7C15)
        want = (h ^ (h >> np.uint32(16))) - np.uint32(3)
    np.testing.assert_array_equal(out, want)
    assert out[0, 0] == np.uint32(0x7F4A7C15 ^ (0x7F4A7C15 >> 16)) - 3


# --- ops_test.py OpsTest.test_comparison with uint32 (also in test_jax_ports5) ---

@pytest.mark.parametrize("fn", ["equal", "not_equal", "less", "less_equal", "greater",
                                "greater_equal", "maximum", "minimum"])
def test_unsigned_order(fn):
    """Compares, maximum and minimum order uint32 unsigned: 0x80000000 is
    above 0x7fffffff, 0xffffffff above everything."""
    x = _u32(_X)
    y = _u32(_Y)
    x[0, :3] = [0x80000000, 0xFFFFFFFF, 0]
    y[0, :3] = [0x7FFFFFFF, 0, 0xFFFFFFFF]
    f = getattr(jnp, fn)

    def kernel(x_ref, y_ref, o_ref):
        r = f(x_ref[...], y_ref[...])
        o_ref[...] = r if fn in ("maximum", "minimum") else r.astype(jnp.uint32)

    out = _run(kernel, jnp.uint32, x, y)
    np.testing.assert_array_equal(out, getattr(np, fn)(x, y).astype(np.uint32))


def test_division_by_zero_as_xla():
    """lax.div and lax.rem of uint32 by 0: XLA gives x / 0 = UINT32_MAX and
    x % 0 = x (the device does not fault, unlike signed // by zero)."""
    x = _u32(np.arange(8 * 128).reshape(_SHAPE) * 77777)
    y = _u32(np.arange(8 * 128).reshape(_SHAPE) % 5)

    def kernel(x_ref, y_ref, q_ref, r_ref):
        q_ref[...] = x_ref[...] // y_ref[...]
        r_ref[...] = x_ref[...] % y_ref[...]

    q, r = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct(_SHAPE, jnp.uint32),
                                             jax.ShapeDtypeStruct(_SHAPE, jnp.uint32)))(x, y)
    safe = np.where(y == 0, 1, y).astype(np.uint32)
    np.testing.assert_array_equal(q, np.where(y == 0, np.uint32(0xFFFFFFFF), x // safe))
    np.testing.assert_array_equal(r, np.where(y == 0, x, x % safe))


# --- lax_test: shift_right_logical / shift_right_arithmetic of uint32 ---

def test_shifts_by_any_count():
    """Shifts of uint32 by counts 0 to 40: XLA's shift_left and
    shift_right_logical give 0 from 32 on; shift_right_arithmetic copies
    the top bit in (all ones from 32 on when it is set)."""
    x = _u32(np.arange(8 * 128).reshape(_SHAPE) * 2654435761 % 2**32)
    x[0, :2] = [0x80000000, 0xFFFFFFFF]
    s = _u32(np.arange(8 * 128).reshape(_SHAPE) % 41)

    def kernel(x_ref, s_ref, l_ref, r_ref, a_ref):
        a, n = x_ref[...], s_ref[...]
        l_ref[...] = lax.shift_left(a, n)
        r_ref[...] = lax.shift_right_logical(a, n)
        a_ref[...] = lax.shift_right_arithmetic(a, n)

    u = jax.ShapeDtypeStruct(_SHAPE, jnp.uint32)
    lo, ro, ao = pl.pallas_call(kernel, out_shape=(u, u, u))(x, s)
    big = s >= 32
    c = np.minimum(s, 31).astype(np.uint32)
    np.testing.assert_array_equal(lo, np.where(big, 0, x << c))
    np.testing.assert_array_equal(ro, np.where(big, 0, x >> c))
    signed = x.view(np.int32) >> c.astype(np.int32)
    want = np.where(big, np.where(x >> 31 == 1, 0xFFFFFFFF, 0), signed.view(np.uint32))
    np.testing.assert_array_equal(ao, want.astype(np.uint32))
    assert ao.flat[0] == 0x80000000 and ao.flat[1] == 0xFFFFFFFF


# --- the PRNG idiom: bits bitcast to uint32, floats from the top bits ---

def test_prng_bits_as_uint32_to_uniform_floats():
    """JAX's TPU random tests view pltpu.prng_random_bits as uint32
    (lax.bitcast_convert_type / pltpu.bitcast) and make floats in [0, 1)
    from the top 23 bits: (u >> 9) | 0x3F800000 as float32, minus 1. The
    uint32 output is the int32 bits' reinterpretation, and the floats are
    uniform."""
    shape = (64, 256)

    def kernel(b_ref, u_ref, f_ref):
        pltpu.prng_seed(7)
        bits = pltpu.prng_random_bits(shape)
        b_ref[...] = bits
        u = lax.bitcast_convert_type(bits, jnp.uint32)
        u_ref[...] = u
        f_ref[...] = pltpu.bitcast((u >> 9) | 0x3F800000, jnp.float32) - 1.0

    b, u, f = pl.pallas_call(kernel, out_shape=(
        jax.ShapeDtypeStruct(shape, jnp.int32), jax.ShapeDtypeStruct(shape, jnp.uint32),
        jax.ShapeDtypeStruct(shape, jnp.float32)))()
    np.testing.assert_array_equal(np.asarray(u), np.asarray(b).view(np.uint32))
    want = ((np.asarray(u) >> np.uint32(9)) | np.uint32(0x3F800000)).view(np.float32) - 1.0
    np.testing.assert_array_equal(f, want)
    f = np.asarray(f).ravel()
    assert f.min() >= 0.0 and f.max() < 1.0
    assert abs(f.mean() - 0.5) < 0.01
    assert (np.asarray(u) >= 2**31).mean() == pytest.approx(0.5, abs=0.02)


def test_bitcasts_between_f32_int32_and_uint32():
    """Same-width bitcasts keep the bits: f32 -> uint32 -> int32 -> f32."""
    x = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 3.5e-39, 1e30] * 128,
                 np.float32).reshape(_SHAPE)

    def kernel(x_ref, u_ref, i_ref):
        u = lax.bitcast_convert_type(x_ref[...], jnp.uint32)
        u_ref[...] = u
        i_ref[...] = pltpu.bitcast(u, jnp.int32)

    u, i = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct(_SHAPE, jnp.uint32),
                                             jax.ShapeDtypeStruct(_SHAPE, jnp.int32)))(x)
    np.testing.assert_array_equal(u, x.view(np.uint32))
    np.testing.assert_array_equal(i, x.view(np.int32))


# --- casts: ops_test.py's test_cast pairs with uint32, XLA's convert ---

def test_float_to_uint32_truncates_and_saturates():
    """f32 -> uint32 as XLA: toward zero, NaN and negatives 0, 2^32 and up
    UINT32_MAX; uint32 -> f32 to nearest even."""
    v = np.array([np.nan, -np.inf, -1e30, -1.0, -0.99, -0.0, 0.5, 1.99, 3e9,
                  4294967040.0, 4294967296.0, 1e30, np.inf, 16777217.0, 2.5, 7.0],
                 np.float32)
    x = np.tile(v, 64).reshape(_SHAPE)
    want = np.tile(np.array([0, 0, 0, 0, 0, 0, 0, 1, 3000000000, 4294967040,
                             0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 16777216, 2, 7],
                            np.uint32), 64).reshape(_SHAPE)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...].astype(jnp.uint32)

    np.testing.assert_array_equal(_run(kernel, jnp.uint32, x), want)

    u = _u32(np.tile(np.array([0, 1, 16777217, 16777219, 0x7FFFFFFF, 0x80000000,
                               0xFFFFFF7F, 0xFFFFFF80, 0xFFFFFFFF, 12345]), 103)[:1024]
             ).reshape(_SHAPE)

    def back(u_ref, o_ref):
        o_ref[...] = u_ref[...].astype(jnp.float32)

    np.testing.assert_array_equal(_run(back, jnp.float32, u), u.astype(np.float32))


def test_integer_casts_keep_the_low_bits():
    """uint32 <-> int32 and to uint8 keep the low bits (XLA's convert)."""
    u = _u32(np.tile(np.array([0, 255, 256, 300, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
                               0x12345678]), 128)).reshape(_SHAPE)

    def kernel(u_ref, i_ref, b_ref, r_ref):
        i = u_ref[...].astype(jnp.int32)
        i_ref[...] = i
        b_ref[...] = u_ref[...].astype(jnp.uint8)
        r_ref[...] = i.astype(jnp.uint32)

    i, b, r = pl.pallas_call(kernel, out_shape=(
        jax.ShapeDtypeStruct(_SHAPE, jnp.int32), jax.ShapeDtypeStruct(_SHAPE, jnp.uint8),
        jax.ShapeDtypeStruct(_SHAPE, jnp.uint32)))(u)
    np.testing.assert_array_equal(i, u.view(np.int32))
    np.testing.assert_array_equal(b, (u & 0xFF).astype(np.uint8))
    np.testing.assert_array_equal(r, u)


# --- reductions, bit counts, where ---

def test_reductions_wrap_and_order_unsigned():
    """jnp.sum of uint32 wraps modulo 2^32; max and min are unsigned."""
    x = _u32(np.arange(8 * 128).reshape(_SHAPE) * 2654435761 % 2**32)

    def kernel(x_ref, s_ref, m_ref, n_ref):
        a = x_ref[...]
        s_ref[...] = jnp.sum(a, axis=1, keepdims=True)
        m_ref[...] = jnp.max(a, axis=1, keepdims=True)
        n_ref[...] = jnp.min(a, axis=0, keepdims=True)

    s, m, n = pl.pallas_call(kernel, out_shape=(
        jax.ShapeDtypeStruct((8, 1), jnp.uint32), jax.ShapeDtypeStruct((8, 1), jnp.uint32),
        jax.ShapeDtypeStruct((1, 128), jnp.uint32)))(x)
    np.testing.assert_array_equal(s, x.sum(axis=1, keepdims=True, dtype=np.uint32))
    np.testing.assert_array_equal(m, x.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(n, x.min(axis=0, keepdims=True))


def test_bit_counts_where_and_iinfo():
    """lax.population_count and lax.clz of uint32; jnp.where with a
    jnp.iinfo(jnp.uint32).max branch; ~x is 2^32 - 1 - x."""
    x = _u32(np.arange(8 * 128).reshape(_SHAPE) * 2654435761 % 2**32)
    x[0, :3] = [0, 1, 0xFFFFFFFF]

    def kernel(x_ref, p_ref, c_ref, w_ref):
        a = x_ref[...]
        p_ref[...] = lax.population_count(a)
        c_ref[...] = lax.clz(a)
        w_ref[...] = jnp.where(a > 2**31, jnp.iinfo(jnp.uint32).max, ~a)

    u = jax.ShapeDtypeStruct(_SHAPE, jnp.uint32)
    p, c, w = pl.pallas_call(kernel, out_shape=(u, u, u))(x)
    bits = (x[..., None] >> np.arange(32, dtype=np.uint32)) & 1
    np.testing.assert_array_equal(p, bits.sum(-1))
    clz = np.array([32 - int(v).bit_length() for v in x.ravel()]).reshape(_SHAPE)
    np.testing.assert_array_equal(c, clz)
    np.testing.assert_array_equal(w, np.where(x > 2**31, np.uint32(0xFFFFFFFF), ~x))


def test_scalar_prefetch_of_uint32():
    """A uint32 scalar prefetch keeps its bits in SMEM and reads back
    unsigned: compared with 2^31 and added to a uint32 block."""
    s = np.array([5, 0xFFFFFFFE, 0x80000000], np.uint32)
    x = _u32(np.arange(8 * 128).reshape(_SHAPE))

    def kernel(s_ref, x_ref, o_ref):
        v = s_ref[pl.program_id(0)]
        o_ref[...] = jnp.where(v >= 2**31, x_ref[...] + v, x_ref[...])

    gs = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(3,),
        in_specs=[pl.BlockSpec((8, 128), lambda i, s: (0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, s: (i, 0)))
    out = pl.pallas_call(kernel, grid_spec=gs,
                         out_shape=jax.ShapeDtypeStruct((24, 128), jnp.uint32))(s, x)
    with np.errstate(over="ignore"):
        want = np.concatenate([x, x + s[1], x + s[2]])
    np.testing.assert_array_equal(out, want)


# --- refusals, by name ---

def test_refusals_name_uint32():
    """What the device does not do with uint32 says so: a dot. (A uint32
    SMEM scratch is allowed: its words, read zero-extended.)"""
    x = _u32(np.ones(_SHAPE))

    def smem(x_ref, o_ref, s_ref):
        o_ref[...] = x_ref[...]

    out = pl.pallas_call(smem, out_shape=jax.ShapeDtypeStruct(_SHAPE, jnp.uint32),
                         scratch_shapes=[pltpu.SMEM((8,), jnp.uint32)])(x)
    np.testing.assert_array_equal(out, x)

    def dot(x_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], x_ref[...].T)

    with pytest.raises(Exception, match="uint32"):
        pl.pallas_call(dot, out_shape=jax.ShapeDtypeStruct((8, 8), jnp.uint32))(x)
