# SPDX-License-Identifier: MIT
"""int16 arrays: held in int32 words on the device (sign-extended), with
XLA's int16 semantics: results wrap in 16 bits, casts from floats
saturate, jnp's promotions (int8/uint8 with int16 is int16, int16 with
int32 is int32). References are NumPy's int16 arithmetic."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

I16 = jnp.int16
_rng = np.random.default_rng(16)


def _i16(shape, lo=-32768, hi=32768):
    return _rng.integers(lo, hi, shape).astype(np.int16)


def _run(kernel, out_dtype, *args, shape=(8, 128)):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shape, out_dtype))(*args)


_BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "max": (jnp.maximum, np.maximum),
    "and": (lambda a, b: a & b, np.bitwise_and),
    "xor": (lambda a, b: a ^ b, np.bitwise_xor),
}


@pytest.mark.parametrize("name", sorted(_BINARY))
def test_binary_wraps_in_16_bits(name):
    fn, ref = _BINARY[name]
    x, y = _i16((8, 128)), _i16((8, 128))

    def kernel(x_ref, y_ref, o_ref, w_ref):
        v = fn(x_ref[...], y_ref[...])
        assert v.dtype == I16
        o_ref[...] = v
        w_ref[...] = v.astype(jnp.int32)	# the words themselves: wrapped

    out, w = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct((8, 128), I16),
                                               jax.ShapeDtypeStruct((8, 128), jnp.int32)))(x, y)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, ref(x, y))
        np.testing.assert_array_equal(w, ref(x, y).astype(np.int32))
    assert out.dtype == np.int16


def test_unary_and_division_edges():
    """-x, abs and square of -32768 wrap; // and % floor; -32768 // -1 wraps."""
    x = _i16((8, 128))
    x[0, :4] = [-32768, 32767, -1, 0]
    d = _i16((8, 128), 1, 300) * np.where(_rng.random((8, 128)) < 0.5, -1, 1).astype(np.int16)
    d[0, 0] = -1

    def kernel(x_ref, d_ref, n_ref, a_ref, s_ref, q_ref, r_ref):
        x, d = x_ref[...], d_ref[...]
        n_ref[...] = (-x).astype(jnp.int32)
        a_ref[...] = jnp.abs(x).astype(jnp.int32)
        s_ref[...] = jnp.square(x).astype(jnp.int32)
        q_ref[...] = (x // d).astype(jnp.int32)
        r_ref[...] = (x % d).astype(jnp.int32)

    sds = jax.ShapeDtypeStruct((8, 128), jnp.int32)
    n, a, sq, q, r = pl.pallas_call(kernel, out_shape=(sds,) * 5)(x, d)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(n, -x)
        np.testing.assert_array_equal(a, np.abs(x))
        np.testing.assert_array_equal(sq, np.square(x))
        assert n[0, 0] == a[0, 0] == -32768 and sq[0, 1] == 1
        np.testing.assert_array_equal(q, x // d)
        np.testing.assert_array_equal(r, x % d)


def test_shifts_popcount_clz_in_16_bits():
    x = _i16((8, 128))
    k = _rng.integers(0, 16, (8, 128)).astype(np.int16)

    def kernel(x_ref, k_ref, l_ref, a_ref, lg_ref, p_ref, c_ref):
        x, k = x_ref[...], k_ref[...]
        l_ref[...] = (x << k).astype(jnp.int32)
        a_ref[...] = (x >> k).astype(jnp.int32)
        lg_ref[...] = lax.shift_right_logical(x, k).astype(jnp.int32)
        p_ref[...] = lax.population_count(x).astype(jnp.int32)
        c_ref[...] = lax.clz(x).astype(jnp.int32)

    sds = jax.ShapeDtypeStruct((8, 128), jnp.int32)
    sl, sa, lg, pc, cz = pl.pallas_call(kernel, out_shape=(sds,) * 5)(x, k)
    u = x.view(np.uint16)
    np.testing.assert_array_equal(sl, (x.astype(np.int32) << k).astype(np.int16))
    np.testing.assert_array_equal(sa, x >> k)
    np.testing.assert_array_equal(lg, (u >> k.astype(np.uint16)).view(np.int16))
    np.testing.assert_array_equal(pc, [[bin(int(v)).count("1") for v in row] for row in u])
    np.testing.assert_array_equal(cz, [[16 - int(v).bit_length() for v in row] for row in u])


def test_casts_wrap_and_saturate():
    """int32 to int16 keeps the low 16 bits; float32 saturates (NaN is 0);
    int16 to int8 wraps, to float32 is exact; a Python int stored wraps."""
    w = _rng.integers(-2**31, 2**31, (8, 128)).astype(np.int32)
    f = (_rng.standard_normal((8, 128)) * 40000).astype(np.float32)
    f[0, :3] = [np.nan, np.inf, -np.inf]

    def kernel(w_ref, f_ref, a_ref, b_ref, c_ref, d_ref, e_ref):
        a_ref[...] = w_ref[...].astype(I16).astype(jnp.int32)
        b = f_ref[...].astype(I16)
        b_ref[...] = b
        c_ref[...] = b.astype(jnp.int8)
        d_ref[...] = b.astype(jnp.float32) * 0.5
        e_ref[...] = w_ref[...]		# stored into int16: wrapped as a cast
        e_ref[0, 0] = 70000

    shapes = [jax.ShapeDtypeStruct((8, 128), t)
              for t in (jnp.int32, I16, jnp.int8, jnp.float32, I16)]
    a, b, c, d, e = pl.pallas_call(kernel, out_shape=shapes)(w, f)
    np.testing.assert_array_equal(a, w.astype(np.int16).astype(np.int32))
    sat = np.where(np.isnan(f), 0, np.clip(np.nan_to_num(f, posinf=4e4, neginf=-4e4),
                                           -32768, 32767)).astype(np.int16)
    np.testing.assert_array_equal(b, sat)
    np.testing.assert_array_equal(c, sat.astype(np.int8))
    np.testing.assert_array_equal(d, sat.astype(np.float32) * 0.5)
    want = w.astype(np.int16)
    want[0, 0] = np.int16(70000 - 65536)
    np.testing.assert_array_equal(e, want)


def test_promotion_and_sum():
    """int8 + int16 is int16 (wrapping), int16 + int32 is int32, a sum of
    int16 is int32 (jnp's), max stays int16."""
    x = _i16((8, 128))
    b = _rng.integers(-128, 128, (8, 128)).astype(np.int8)
    i = _rng.integers(-2**20, 2**20, (8, 128)).astype(np.int32)
    seen = []

    def kernel(x_ref, b_ref, i_ref, p_ref, q_ref, s_ref, m_ref):
        p = (x_ref[...] + b_ref[...]) * 3
        q = x_ref[...] * i_ref[...]
        s = jnp.sum(x_ref[...], axis=1, keepdims=True)
        m = jnp.max(x_ref[...], axis=0, keepdims=True)
        seen.append((p.dtype, q.dtype, s.dtype, m.dtype))
        p_ref[...], q_ref[...], s_ref[...], m_ref[...] = p, q, s, m

    shapes = [jax.ShapeDtypeStruct(s, t) for s, t in
              (((8, 128), I16), ((8, 128), jnp.int32), ((8, 1), jnp.int32), ((1, 128), I16))]
    p, q, s, m = pl.pallas_call(kernel, out_shape=shapes)(x, b, i)
    assert seen == [(I16, jnp.int32, jnp.int32, I16)]
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(p, (x + b.astype(np.int16)) * np.int16(3))
        np.testing.assert_array_equal(q, x.astype(np.int32) * i)
    np.testing.assert_array_equal(s, x.astype(np.int32).sum(1, keepdims=True))
    np.testing.assert_array_equal(m, x.max(0, keepdims=True))


def test_smem_int16_scalars_wrap_and_grid_blocks():
    """int16 SMEM elements in scalar-core arithmetic (wrapping there too),
    and int16 VMEM blocks over a grid with an int16 scratch accumulator."""
    s = np.array([30000, 10000, -20000, 5], np.int16)
    x = _i16((32, 128), -1000, 1000)

    def kernel(s_ref, x_ref, o_ref, t_ref, acc):
        t_ref[0] = s_ref[0] + s_ref[1]			# 40000 wraps
        t_ref[1] = s_ref[2] * s_ref[3]			# -100000 wraps
        t_ref[2] = (s_ref[0] + s_ref[1]).astype(jnp.int32)	# the int16 sum, then widened
        t_ref[3] = s_ref[0].astype(jnp.int32) + s_ref[1]	# int32 arithmetic

        @pl.when(pl.program_id(0) == 0)
        def _():
            acc[...] = jnp.zeros_like(acc)

        acc[...] += x_ref[...] * 40
        o_ref[...] = acc[...] // 3		# floors the wrapped sums

    out, t = pl.pallas_call(
        kernel, grid=(4,),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                  pl.BlockSpec((8, 128), lambda i: (i, 0))],
        out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0)),
                   pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_shape=[jax.ShapeDtypeStruct((32, 128), I16),
                   jax.ShapeDtypeStruct((4,), jnp.int32)],
        scratch_shapes=[pltpu.VMEM((8, 128), I16)])(s, x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(t, [np.int16(-25536), np.int16(31072),
                                          -25536, 40000])
        acc = np.zeros((8, 128), np.int16)
        want = []
        for i in range(4):
            acc = acc + x[8 * i:8 * i + 8] * np.int16(40)
            want.append(acc // np.int16(3))
    np.testing.assert_array_equal(out, np.concatenate(want))


def test_int16_bitcasts_to_16_and_32_bits():
    # to bfloat16 (and uint16, test_uint16.py): the 16 bits, by arithmetic
    # on the int32 words; to a 32-bit type, two rows a word as pltpu.bitcast
    # packs them (low half the even row), also of a ref; to int8, refused
    x = _i16((8, 128))
    x = np.where((x & 0x7F80) == 0x7F80, x & -0x7F81, x).astype(np.int16)	# no NaN/inf

    def kernel(x_ref, o_ref):
        o_ref[...] = pltpu.bitcast(x_ref[...], jnp.bfloat16)
    b = _run(kernel, jnp.bfloat16, x)
    np.testing.assert_array_equal((np.asarray(b).view(np.uint32) >> 16).astype(np.uint16),
                                  x.view(np.uint16))

    def wide(x_ref, o_ref, back_ref):
        w = pltpu.bitcast(x_ref[...], jnp.int32)
        o_ref[...] = w
        back_ref[...] = pltpu.bitcast(w ^ 0, jnp.int16)
    w, back = pl.pallas_call(wide, out_shape=(jax.ShapeDtypeStruct((4, 128), jnp.int32),
                                              jax.ShapeDtypeStruct((8, 128), I16)))(x)
    u = x.view(np.uint16).astype(np.uint32)
    np.testing.assert_array_equal(w, (u[0::2] | u[1::2] << 16).view(np.int32))
    np.testing.assert_array_equal(back, x)

    def ref_view(x_ref, o_ref):
        o_ref[...] = x_ref.bitcast(jnp.bfloat16)[...]
    np.testing.assert_array_equal(np.asarray(_run(ref_view, jnp.bfloat16, x)), np.asarray(b))

    def narrow(x_ref, o_ref):
        o_ref[...] = pltpu.bitcast(x_ref[...], jnp.int8)
    with pytest.raises(pl.TraceError, match="int16 arrays are held in int32 words"):
        _run(narrow, jnp.int8, x, shape=(16, 128))


def test_int16_constants_from_dtype_arguments():
    """jnp.full/zeros with dtype=int16 are int16 values: their arithmetic
    wraps (30000 * 2 is negative) before a compare sees it."""
    def kernel(o_ref, c_ref):
        v = jnp.full((8, 128), 30000, dtype=I16) * 2 + jnp.zeros((8, 128), I16)
        assert v.dtype == I16
        o_ref[...] = v
        c_ref[...] = (v < 0).astype(jnp.int32)

    v, c = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct((8, 128), I16),
                                             jax.ShapeDtypeStruct((8, 128), jnp.int32)))()
    np.testing.assert_array_equal(v, np.full((8, 128), 60000 - 65536, np.int16))
    np.testing.assert_array_equal(c, np.ones((8, 128), np.int32))


def test_int8_with_uint8_promotes_to_int16():
    """jnp's lattice: int8 with uint8 is int16 (not int32); a product times 3
    leaves int16's range and wraps there."""
    a = (np.arange(8 * 128) % 256 - 128).astype(np.int8).reshape(8, 128)
    b = (np.arange(8 * 128) * 7 % 256).astype(np.uint8).reshape(8, 128)

    def k(a_ref, b_ref, s_ref, p_ref):
        s = a_ref[...] + b_ref[...]
        assert s.dtype == jnp.int16
        s_ref[...] = s
        p_ref[...] = a_ref[...] * b_ref[...] * 3

    i16 = jax.ShapeDtypeStruct((8, 128), jnp.int16)
    s, p = pl.pallas_call(k, out_shape=(i16, i16))(a, b)
    np.testing.assert_array_equal(s, a.astype(np.int16) + b.astype(np.int16))
    np.testing.assert_array_equal(p, a.astype(np.int16) * b.astype(np.int16) * np.int16(3))
