# SPDX-License-Identifier: MIT
"""Integer arithmetic wraps around in the result's width, two's complement,
as XLA's does (doc/numerics.md, "Integers"): hash kernels whose multiplies
overflow int32, jnp.sum of int32 past 2^31, int8 and uint8 adds, abs and
negation of the minimum, square and integer powers, iota offsets, int32
accumulation of an int8 dot, and scalar-core products stored to SMEM. Each
reference is NumPy's wrap-around arithmetic in the same dtype; float to
integer casts still truncate and saturate. jnp functions of Python ints
alone in a kernel fold in int32, as JAX's weak constants."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

_SHAPE = (8, 128)
_I32_MIN, _I32_MAX = -2**31, 2**31 - 1


def _run(kernel, out_dtype, *args, shape=_SHAPE):
    return np.asarray(pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(shape, out_dtype))(*args))


def _hashed_int32(seed=0):
    """Bit patterns of every magnitude, the int32 edges first."""
    u = (np.arange(8 * 128, dtype=np.uint64) * 2654435761 + seed) % 2**32
    x = u.astype(np.uint32).view(np.int32).reshape(_SHAPE).copy()
    x[0, :6] = [0, 1, -1, _I32_MAX, _I32_MIN, _I32_MIN + 1]
    return x


def _edges(dtype):
    """Every value of an 8-bit type, tiled to a block."""
    info = np.iinfo(dtype)
    return np.tile(np.arange(info.min, info.max + 1).astype(dtype), 4).reshape(_SHAPE)


def test_int32_hash_multiplies_wrap():
    """A multiplicative hash in int32 (Knuth's constant as a signed int32,
    murmur3's fmix32 with logical shifts): every multiply overflows."""
    x = _hashed_int32()

    def kernel(x_ref, o_ref):
        h = x_ref[...] * -1640531535		# 0x9E3779B1
        h = h ^ lax.shift_right_logical(h, 16)
        h = h * -2048144789			# 0x85EBCA6B
        h = h ^ lax.shift_right_logical(h, 13)
        h = h * -1028477387			# 0xC2B2AE35
        o_ref[...] = h ^ lax.shift_right_logical(h, 16)

    out = _run(kernel, jnp.int32, x)
    with np.errstate(over="ignore"):
        h = x.view(np.uint32) * np.uint32(0x9E3779B1)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x85EBCA6B)
        h ^= h >> np.uint32(13)
        h *= np.uint32(0xC2B2AE35)
        h ^= h >> np.uint32(16)
    np.testing.assert_array_equal(out, h.view(np.int32))


def test_int32_hash_by_a_constant_past_int32():
    """x * 0x9E3779B1 of int32: the Python int does not fit int32, so it
    raises OverflowError while tracing, as JAX's weak-typed conversion
    does; the constant's bits as an int32 give the wrapped product."""
    x = _hashed_int32(1)

    def bad(x_ref, o_ref):
        o_ref[...] = (x_ref[...] * 0x9E3779B1) ^ 0x7F4A7C15

    with pytest.raises(OverflowError, match="2654435761 too large to convert to int32"):
        _run(bad, jnp.int32, x)
    c = int(np.uint32(0x9E3779B1).view(np.int32))

    def kernel(x_ref, o_ref):
        o_ref[...] = (x_ref[...] * c) ^ 0x7F4A7C15

    out = _run(kernel, jnp.int32, x)
    with np.errstate(over="ignore"):
        want = (x * np.int32(c)) ^ np.int32(0x7F4A7C15)
    np.testing.assert_array_equal(out, want)


def test_weak_ints_past_the_dtype_raise():
    """int8 + 300, uint8 + 256 and int32 + 2**31 raise OverflowError as
    jnp's do; in range (and negative with unsigned) they are taken."""
    for dt, c in ((jnp.int8, 300), (jnp.int8, -129), (jnp.uint8, 256),
                  (jnp.int32, 2 ** 31), (jnp.uint32, 2 ** 32)):
        x = np.zeros((8, 128), np.dtype(dt.np_name if hasattr(dt, "np_name") else dt))

        def k(x_ref, o_ref):
            o_ref[...] = x_ref[...] + c

        with pytest.raises(OverflowError, match="too large to convert"):
            _run(k, dt, x)
    x = np.full((8, 128), 7, np.uint32)

    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + (2 ** 32 - 1)

    np.testing.assert_array_equal(_run(k, jnp.uint32, x), np.full((8, 128), 6, np.uint32))


def test_host_side_jnp_of_int32_wraps_as_numpy():
    """Outside a kernel jnp is NumPy's, narrowed to 32 bits as JAX's
    without x64: sums, products and abs of int32 arrays wrap."""
    a = np.array([_I32_MAX, _I32_MIN, 3, -1], np.int32)
    assert jnp.sum(jnp.array([_I32_MAX, 1], dtype=jnp.int32)) == _I32_MIN
    assert jnp.sum(a).dtype == np.int32
    np.testing.assert_array_equal(jnp.add(a, a), np.array([-2, 0, 6, -2], np.int32))
    np.testing.assert_array_equal(jnp.abs(a)[:2], [_I32_MAX, _I32_MIN])
    np.testing.assert_array_equal(jnp.cumsum(a)[:2], [_I32_MAX, -1])


def test_jnp_of_python_ints_in_a_kernel_folds_in_int32():
    """jnp.add, jnp.multiply, jnp.negative of Python ints alone in a
    kernel are JAX's weakly typed int32 constants: they wrap before the
    compare sees them (x < jnp.add(2**31 - 1, 1) is x < -2**31: never)."""
    x = _hashed_int32(4)

    def kernel(x_ref, l_ref, s_ref):
        v = x_ref[...]
        l_ref[...] = (v < jnp.add(_I32_MAX, 1)).astype(jnp.int32)
        s_ref[...] = v + jnp.multiply(65536, 65537) + jnp.negative(_I32_MIN)

    o = jax.ShapeDtypeStruct(_SHAPE, jnp.int32)
    lt, s = pl.pallas_call(kernel, out_shape=(o, o))(x)
    assert not np.asarray(lt).any()
    with np.errstate(over="ignore"):
        want = x + np.int32(65536) + np.int32(_I32_MIN)	# 65536 * 65537 is 2^32 + 65536
    np.testing.assert_array_equal(s, want)


def test_int32_add_sub_mul_of_two_blocks_wrap():
    """(a + b), (a - b), a * b of int32 blocks past the range: NumPy's."""
    a, b = _hashed_int32(), _hashed_int32(12345)

    def kernel(a_ref, b_ref, s_ref, d_ref, p_ref):
        s_ref[...] = a_ref[...] + b_ref[...]
        d_ref[...] = a_ref[...] - b_ref[...]
        p_ref[...] = a_ref[...] * b_ref[...]

    t = jax.ShapeDtypeStruct(_SHAPE, jnp.int32)
    s, d, p = pl.pallas_call(kernel, out_shape=(t, t, t))(a, b)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(s, a + b)
        np.testing.assert_array_equal(d, a - b)
        np.testing.assert_array_equal(p, a * b)
    assert np.asarray(s)[0, 3] == -2		# INT32_MAX + INT32_MAX


def test_int32_max_plus_one_is_min():
    """INT32_MAX + 1 wraps to INT32_MIN; INT32_MIN - 1 to INT32_MAX."""
    x = np.full(_SHAPE, _I32_MAX, np.int32)
    x[1] = _I32_MIN

    def kernel(x_ref, o_ref):
        v = x_ref[...]
        o_ref[...] = jnp.where(v > 0, v + 1, v - 1)

    out = _run(kernel, jnp.int32, x)
    assert (out[0] == _I32_MIN).all() and (out[1] == _I32_MAX).all()


@pytest.mark.parametrize("axis", [0, 1])
def test_int32_sum_overflows_as_numpy(axis):
    """jnp.sum of int32 rows or columns past 2^31 wraps, as XLA's reduce."""
    x = np.abs(_hashed_int32(7)) | 0x40000000
    x = x.astype(np.int32)
    shape = (1, 128) if axis == 0 else (8, 1)

    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.sum(x_ref[...], axis=axis, keepdims=True)

    out = _run(kernel, jnp.int32, x, shape=shape)
    np.testing.assert_array_equal(out, np.sum(x, axis=axis, keepdims=True, dtype=np.int32))


def test_int32_sum_of_everything_wraps():
    """jnp.sum(x) of a whole int32 block (both axes) wraps."""
    x = np.full(_SHAPE, _I32_MAX // 100, np.int32)

    def kernel(x_ref, o_ref):
        o_ref[0, 0] = jnp.sum(x_ref[...])

    out = pl.pallas_call(kernel, out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
                         out_shape=jax.ShapeDtypeStruct((1, 1), jnp.int32))(x)
    assert np.asarray(out)[0, 0] == np.sum(x, dtype=np.int32)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_8_bit_add_sub_mul_wrap(dtype):
    """int8 and uint8 +, -, * of every value pair in a block: 127 + 1 is
    -128, 255 + 1 is 0, as XLA's s8 and u8 (not the saturating pixel
    arithmetic of some DSPs)."""
    a = _edges(dtype)
    b = np.roll(a, 37, axis=1)
    t = {np.int8: jnp.int8, np.uint8: jnp.uint8}[dtype]

    def kernel(a_ref, b_ref, s_ref, d_ref, p_ref):
        s_ref[...] = a_ref[...] + b_ref[...]
        d_ref[...] = a_ref[...] - b_ref[...]
        p_ref[...] = a_ref[...] * b_ref[...]

    o = jax.ShapeDtypeStruct(_SHAPE, t)
    s, d, p = pl.pallas_call(kernel, out_shape=(o, o, o))(a, b)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(s, a + b)
        np.testing.assert_array_equal(d, a - b)
        np.testing.assert_array_equal(p, a * b)


def test_int8_weak_int_operands_wrap():
    """x + 1 and x * 3 of int8 keep int8 (weak Python ints) and wrap."""
    a = _edges(np.int8)

    def kernel(a_ref, s_ref, p_ref):
        s_ref[...] = a_ref[...] + 1
        p_ref[...] = a_ref[...] * 3

    o = jax.ShapeDtypeStruct(_SHAPE, jnp.int8)
    s, p = pl.pallas_call(kernel, out_shape=(o, o))(a)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(s, a + np.int8(1))
        np.testing.assert_array_equal(p, a * np.int8(3))
    assert np.asarray(s).ravel()[255] == -128	# 127 + 1


@pytest.mark.parametrize("dtype", [np.int8, np.int32])
def test_abs_and_negation_of_the_minimum(dtype):
    """abs(INT_MIN) and -INT_MIN are INT_MIN, as XLA's (and NumPy's)."""
    x = _edges(np.int8).astype(dtype)
    x[0, 0] = np.iinfo(dtype).min
    t = {np.int8: jnp.int8, np.int32: jnp.int32}[dtype]

    def kernel(x_ref, a_ref, n_ref):
        a_ref[...] = jnp.abs(x_ref[...])
        n_ref[...] = -x_ref[...]

    o = jax.ShapeDtypeStruct(_SHAPE, t)
    a, n = pl.pallas_call(kernel, out_shape=(o, o))(x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(a, np.abs(x))
        np.testing.assert_array_equal(n, -x)
    assert np.asarray(a)[0, 0] == np.iinfo(dtype).min


def test_square_and_integer_powers_wrap():
    """jnp.square, x ** 3, lax.integer_pow(x, 5) and jnp.power of int32
    by an int32 array of exponents 0..9: repeated multiplies that wrap."""
    x = _hashed_int32(3) >> 8
    e = (np.arange(8 * 128, dtype=np.int32) % 10).reshape(_SHAPE)

    def kernel(x_ref, e_ref, s_ref, c_ref, f_ref, p_ref):
        v = x_ref[...]
        s_ref[...] = jnp.square(v)
        c_ref[...] = v ** 3
        f_ref[...] = lax.integer_pow(v, 5)
        p_ref[...] = jnp.power(v, e_ref[...])

    o = jax.ShapeDtypeStruct(_SHAPE, jnp.int32)
    s, c, f, p = pl.pallas_call(kernel, out_shape=(o, o, o, o))(x, e)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(s, x * x)
        np.testing.assert_array_equal(c, x * x * x)
        np.testing.assert_array_equal(f, x * x * x * x * x)
        np.testing.assert_array_equal(p, np.power(x, e))


def test_iota_plus_an_offset_wraps():
    """broadcasted_iota + an offset near INT32_MAX wraps at the column
    where it passes 2^31."""
    def kernel(o_ref):
        o_ref[...] = lax.broadcasted_iota(jnp.int32, _SHAPE, 1) + (_I32_MAX - 63)

    out = _run(kernel, jnp.int32)
    with np.errstate(over="ignore"):
        want = np.broadcast_to(np.arange(128, dtype=np.int32), _SHAPE) + np.int32(_I32_MAX - 63)
    np.testing.assert_array_equal(out, want)
    assert out[0, 64] == _I32_MIN


def test_int32_floor_division_keeps_its_meaning():
    """// and % stay floor division and Python's modulo; INT32_MIN // -1
    wraps to INT32_MIN (XLA's) and INT32_MIN % -1 is 0; max, min and
    compares are unchanged."""
    x = _hashed_int32(11)
    y = _hashed_int32(5) >> 20
    y[y == 0] = 7
    x[0, 0], y[0, 0] = _I32_MIN, -1

    def kernel(x_ref, y_ref, q_ref, r_ref, m_ref, c_ref):
        a, b = x_ref[...], y_ref[...]
        q_ref[...] = a // b
        r_ref[...] = a % b
        m_ref[...] = jnp.maximum(a, b) - jnp.minimum(a, b)
        c_ref[...] = (a < b).astype(jnp.int32)

    o = jax.ShapeDtypeStruct(_SHAPE, jnp.int32)
    q, r, m, c = pl.pallas_call(kernel, out_shape=(o, o, o, o))(x, y)
    with np.errstate(over="ignore", divide="ignore"):
        want_q = x.astype(np.int64) // y
        want_r = x.astype(np.int64) % y
        np.testing.assert_array_equal(q, want_q.astype(np.int32))
        np.testing.assert_array_equal(r, want_r.astype(np.int32))
        np.testing.assert_array_equal(m, np.maximum(x, y) - np.minimum(x, y))
    np.testing.assert_array_equal(c, (x < y).astype(np.int32))
    assert np.asarray(q)[0, 0] == _I32_MIN and np.asarray(r)[0, 0] == 0


def test_lax_div_and_rem_of_the_minimum_by_minus_one():
    """lax.div (truncating) of INT32_MIN by -1 is INT32_MIN and lax.rem 0,
    as XLA's; other quotients truncate toward zero, remainders take x's sign."""
    x = _hashed_int32(13)
    y = (_hashed_int32(6) >> 24) | 1
    x[0, 0], y[0, 0] = _I32_MIN, -1

    def kernel(x_ref, y_ref, q_ref, r_ref):
        q_ref[...] = lax.div(x_ref[...], y_ref[...])
        r_ref[...] = lax.rem(x_ref[...], y_ref[...])

    o = jax.ShapeDtypeStruct(_SHAPE, jnp.int32)
    q, r = pl.pallas_call(kernel, out_shape=(o, o))(x, y)
    x64, y64 = x.astype(np.int64), y.astype(np.int64)
    want_q = np.trunc(x64 / y64).astype(np.int64)
    want_q[0, 0] = _I32_MIN
    np.testing.assert_array_equal(q, want_q.astype(np.int32))
    np.testing.assert_array_equal(r, np.fmod(x64, y64).astype(np.int32))


def test_uint8_negation_and_square_wrap():
    """-x and x * x of uint8 wrap modulo 256 (-1 is 255), as XLA's u8."""
    x = _edges(np.uint8)

    def kernel(x_ref, n_ref, s_ref):
        n_ref[...] = -x_ref[...]
        s_ref[...] = jnp.square(x_ref[...])

    o = jax.ShapeDtypeStruct(_SHAPE, jnp.uint8)
    n, s = pl.pallas_call(kernel, out_shape=(o, o))(x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(n, -x)
        np.testing.assert_array_equal(s, x * x)


def test_float_to_int32_casts_still_saturate():
    """astype from float truncates toward zero and saturates (NaN is 0), as
    before: only integer arithmetic wraps."""
    v = np.array([3e9, -3e9, np.inf, -np.inf, np.nan, 2.7, -2.7, 2147483520.0],
                 np.float32)
    x = np.tile(v, 128).reshape(_SHAPE)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...].astype(jnp.int32)

    out = _run(kernel, jnp.int32, x)
    want = np.array([_I32_MAX, _I32_MIN, _I32_MAX, _I32_MIN, 0, 2, -2, 2147483520])
    np.testing.assert_array_equal(out[0, :8], want)


def test_int8_dot_accumulates_in_int32_with_wrap():
    """An int8 matmul accumulated in an int32 scratch over 40 k steps:
    -128 * -128 * 163840 is 2^31 + 2^29, which wraps (XLA's s32 dot and
    add); the step sums stay exact."""
    bk, steps = 4096, 40
    x = np.full((8, bk * steps), -128, np.int8)
    y = np.full((bk * steps, 128), -128, np.int8)
    y[:, 1] = 127

    def kernel(x_ref, y_ref, o_ref, acc_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            acc_ref[...] = jnp.zeros_like(acc_ref)

        acc_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.int32)

        @pl.when(pl.program_id(0) == steps - 1)
        def _():
            o_ref[...] = acc_ref[...]

    out = pl.pallas_call(
        kernel, grid=(steps,),
        in_specs=[pl.BlockSpec((8, bk), lambda k: (0, k)),
                  pl.BlockSpec((bk, 128), lambda k: (k, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda k: (0, 0)),
        scratch_shapes=[pltpu.VMEM((8, 128), jnp.int32)],
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32))(x, y)
    want = (x[:1].astype(np.int64) @ y.astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(out), np.broadcast_to(want, (8, 128)))
    assert np.asarray(out)[0, 0] == -2**31 + 2**29


def test_scalar_core_product_stored_to_int32_smem_wraps():
    """The scalar core computes in 64 bits; a store to an int32 SMEM ref
    keeps the low 32 bits, so a product that overflows int32 stores what
    XLA's s32 multiply gives."""
    x = np.array([65536, 46341, -2**31, 123456789, 7, -1, 2**30, 3], np.int32)

    def kernel(x_ref, o_ref):
        for i in range(8):
            o_ref[i] = x_ref[i] * x_ref[(i + 1) % 8] + x_ref[i]

    out = pl.pallas_call(
        kernel, in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct((8,), jnp.int32))(x)
    with np.errstate(over="ignore"):
        want = x * np.roll(x, -1) + x
    np.testing.assert_array_equal(np.asarray(out), want)


def test_smem_scalar_operand_wraps_in_a_vector_add():
    """An int32 SMEM scalar near the top plus a block: each sum wraps."""
    s = np.array([_I32_MAX, _I32_MIN], np.int32)
    x = _hashed_int32(2)

    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + s_ref[0] * 3 + s_ref[1]

    out = pl.pallas_call(
        kernel, in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                          pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_shape=jax.ShapeDtypeStruct(_SHAPE, jnp.int32))(s, x)
    with np.errstate(over="ignore"):
        want = x + s[0] * np.int32(3) + s[1]
    np.testing.assert_array_equal(np.asarray(out), want)
