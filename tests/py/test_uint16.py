# SPDX-License-Identifier: MIT
"""uint16 arrays: held in int32 words on the device (zero-extended), with
XLA's uint16 semantics: results wrap modulo 2^16, compares, // and % are
unsigned, >> and shift_right_logical shift zeros in, shift_right_arithmetic
copies bit 15, casts from floats saturate to [0, 65535] (NaN is 0), jnp's
promotions (uint8 with uint16 is uint16, with uint32 uint32, with a signed
type int32) and sums in uint32; bitcasts among int16, uint16 and bfloat16.
A NumPy uint16 array is bfloat16 bits in tpuemu (tpuemu.to_bf16), so the
host's uint16 integers are jnp's (jnp.asarray(x, dtype=jnp.uint16)).
References are NumPy's uint16 arithmetic."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

U16 = jnp.uint16
_rng = np.random.default_rng(1616)


def _u16(shape, lo=0, hi=65536):
    return _rng.integers(lo, hi, shape).astype(np.uint16)


def _dev(a):
    """Host uint16 integers as pallas_call takes them (jnp's array)."""
    return jnp.asarray(a, dtype=U16)


def _sds(t, shape=(8, 128)):
    return jax.ShapeDtypeStruct(shape, t)


def test_host_arrays_are_uint16_and_numpy_uint16_stays_bf16_bits():
    x = _u16((8, 128))
    r = pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]),
                       out_shape=_sds(U16))(_dev(x))
    assert r.dtype == np.uint16
    np.testing.assert_array_equal(r, x)
    # the same bits as a NumPy array: bfloat16, as tpuemu.to_bf16 gives them
    bits = jax.to_bf16(np.full((8, 128), 1.5, np.float32))
    b = pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] * 2),
                       out_shape=_sds(jnp.bfloat16))(bits)
    np.testing.assert_array_equal(np.asarray(b), np.full((8, 128), 3.0, np.float32))


_BINARY = {
    "add": (lambda a, b: a + b, np.add),
    "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply),
    "max": (jnp.maximum, np.maximum),
    "min": (jnp.minimum, np.minimum),
    "and": (lambda a, b: a & b, np.bitwise_and),
    "or": (lambda a, b: a | b, np.bitwise_or),
    "xor": (lambda a, b: a ^ b, np.bitwise_xor),
}


@pytest.mark.parametrize("name", sorted(_BINARY))
def test_binary_wraps_modulo_2_16(name):
    fn, ref = _BINARY[name]
    x, y = _u16((8, 128)), _u16((8, 128))

    def kernel(x_ref, y_ref, o_ref, w_ref):
        v = fn(x_ref[...], y_ref[...])
        assert v.dtype == U16
        o_ref[...] = v
        w_ref[...] = v.astype(jnp.int32)	# the words themselves: wrapped

    out, w = pl.pallas_call(kernel, out_shape=(_sds(U16), _sds(jnp.int32)))(_dev(x), _dev(y))
    np.testing.assert_array_equal(out, ref(x, y))
    np.testing.assert_array_equal(w, ref(x, y).astype(np.int32))
    assert out.dtype == np.uint16


def test_unary_compares_and_division():
    """-x and ~x wrap; compares, // and % are unsigned (65535 > 1); x // 0
    is 65535 and x % 0 is x, as XLA's u16."""
    x = _u16((8, 128))
    x[0, :4] = [65535, 32768, 1, 0]
    d = _u16((8, 128), 1, 70)
    d[0, 1] = 0
    d[0, 2] = 0

    def kernel(x_ref, d_ref, n_ref, i_ref, g_ref, q_ref, r_ref):
        x, d = x_ref[...], d_ref[...]
        n_ref[...] = -x
        i_ref[...] = ~x
        g_ref[...] = (x > d).astype(jnp.int32) + 2 * (x >= 32768).astype(jnp.int32)
        q_ref[...] = x // d
        r_ref[...] = x % d

    n, i, g, q, r = pl.pallas_call(
        kernel, out_shape=(_sds(U16), _sds(U16), _sds(jnp.int32), _sds(U16), _sds(U16)))(
            _dev(x), _dev(d))
    np.testing.assert_array_equal(n, -x)
    np.testing.assert_array_equal(i, ~x)
    np.testing.assert_array_equal(g, (x > d).astype(np.int32) + 2 * (x >= 32768))
    nz = d != 0
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(q[nz], (x // d)[nz])
        np.testing.assert_array_equal(r[nz], (x % d)[nz])
    np.testing.assert_array_equal(q[~nz], 65535)
    np.testing.assert_array_equal(r[~nz], x[~nz])


def test_shifts_popcount_clz():
    x = _u16((8, 128))
    k = _u16((8, 128), 0, 20)		# 16 and more: 0, or bit 15's copies

    def kernel(x_ref, k_ref, l_ref, r_ref, lg_ref, a_ref, p_ref, c_ref):
        x, k = x_ref[...], k_ref[...]
        l_ref[...] = x << k
        r_ref[...] = x >> k
        lg_ref[...] = lax.shift_right_logical(x, k)
        a_ref[...] = lax.shift_right_arithmetic(x, k)
        p_ref[...] = lax.population_count(x)
        c_ref[...] = lax.clz(x)

    sl, sr, lg, sa, pc, cz = pl.pallas_call(kernel, out_shape=(_sds(U16),) * 6)(
        _dev(x), _dev(k))
    x32, k32 = x.astype(np.int64), k.astype(np.int64)
    np.testing.assert_array_equal(sl, np.where(k32 < 16, (x32 << np.minimum(k32, 15)) & 0xFFFF, 0))
    np.testing.assert_array_equal(sr, np.where(k32 < 16, x32 >> np.minimum(k32, 15), 0))
    np.testing.assert_array_equal(lg, sr)
    signed = x.view(np.int16).astype(np.int64)
    np.testing.assert_array_equal(sa, (signed >> np.minimum(k32, 15)) & 0xFFFF)
    np.testing.assert_array_equal(pc, [[bin(int(v)).count("1") for v in row] for row in x])
    np.testing.assert_array_equal(cz, [[16 - int(v).bit_length() for v in row] for row in x])


def test_casts_wrap_and_saturate():
    """int32 and int16 to uint16 keep the low 16 bits; float32 saturates
    to [0, 65535] (NaN is 0); uint16 to int16 wraps, to int32 and uint32
    zero-extends, to float32 is exact; a Python int stored wraps."""
    w = _rng.integers(-2**31, 2**31, (8, 128)).astype(np.int32)
    f = (_rng.standard_normal((8, 128)) * 50000).astype(np.float32)
    f[0, :3] = [np.nan, np.inf, -np.inf]
    s = _rng.integers(-32768, 32768, (8, 128)).astype(np.int16)

    def kernel(w_ref, f_ref, s_ref, a_ref, b_ref, c_ref, d_ref, e_ref, u_ref, t_ref):
        a_ref[...] = w_ref[...].astype(U16).astype(jnp.int32)
        b = f_ref[...].astype(U16)
        b_ref[...] = b
        c_ref[...] = s_ref[...].astype(U16).astype(jnp.int16)	# round trip
        d_ref[...] = b.astype(jnp.float32) * 0.5
        u_ref[...] = b.astype(jnp.uint32) + 1
        e_ref[...] = w_ref[...]		# stored into uint16: wrapped as a cast
        e_ref[0, 0] = 70000
        e_ref[0, 1] = -1
        t_ref[...] = s_ref[...].astype(U16).astype(jnp.int32)

    shapes = [_sds(t) for t in (jnp.int32, U16, jnp.int16, jnp.float32, U16, jnp.uint32,
                                jnp.int32)]
    a, b, c, d, e, u, t = pl.pallas_call(kernel, out_shape=shapes)(w, f, s)
    np.testing.assert_array_equal(a, w.astype(np.uint16).astype(np.int32))
    sat = np.where(np.isnan(f), 0, np.clip(np.nan_to_num(f, posinf=7e4, neginf=-1),
                                           0, 65535)).astype(np.uint16)
    np.testing.assert_array_equal(b, sat)
    np.testing.assert_array_equal(c, s)
    np.testing.assert_array_equal(d, sat.astype(np.float32) * 0.5)
    np.testing.assert_array_equal(u, sat.astype(np.uint32) + 1)
    want = w.astype(np.uint16)
    want[0, 0], want[0, 1] = 70000 - 65536, 65535
    np.testing.assert_array_equal(e, want)
    np.testing.assert_array_equal(t, s.view(np.uint16).astype(np.int32))


def test_promotion_and_reductions():
    """uint8 + uint16 is uint16 (wrapping), uint16 with int16 or int32 is
    int32, with uint32 uint32; a sum of uint16 is uint32 (jnp's), max and
    min stay uint16."""
    x = _u16((8, 128))
    b = _rng.integers(0, 256, (8, 128)).astype(np.uint8)
    i = _rng.integers(-2**20, 2**20, (8, 128)).astype(np.int32)
    v = _rng.integers(0, 2**32, (8, 128), dtype=np.uint64).astype(np.uint32)
    seen = []

    def kernel(x_ref, b_ref, i_ref, v_ref, p_ref, q_ref, r_ref, s_ref, m_ref, n_ref):
        p = (x_ref[...] + b_ref[...]) * 3
        q = x_ref[...] * i_ref[...]
        r = x_ref[...] + v_ref[...]
        s = jnp.sum(x_ref[...], axis=1, keepdims=True)
        m = jnp.max(x_ref[...], axis=0, keepdims=True)
        n = jnp.min(x_ref[...], axis=0, keepdims=True)
        seen.append((p.dtype, q.dtype, r.dtype, s.dtype, m.dtype))
        p_ref[...], q_ref[...], r_ref[...], s_ref[...] = p, q, r, s
        m_ref[...], n_ref[...] = m, n

    shapes = [jax.ShapeDtypeStruct(s, t) for s, t in
              (((8, 128), U16), ((8, 128), jnp.int32), ((8, 128), jnp.uint32),
               ((8, 1), jnp.uint32), ((1, 128), U16), ((1, 128), U16))]
    p, q, r, s, m, n = pl.pallas_call(kernel, out_shape=shapes)(_dev(x), b, i, v)
    assert seen == [(U16, jnp.int32, jnp.uint32, jnp.uint32, U16)]
    np.testing.assert_array_equal(p, (x + b.astype(np.uint16)) * np.uint16(3))
    np.testing.assert_array_equal(q, x.astype(np.int32) * i)
    np.testing.assert_array_equal(r, x.astype(np.uint32) + v)
    np.testing.assert_array_equal(s, x.astype(np.uint32).sum(1, keepdims=True))
    np.testing.assert_array_equal(m, x.max(0, keepdims=True))
    np.testing.assert_array_equal(n, x.min(0, keepdims=True))


def test_grid_copy_with_blockspecs_and_scratch():
    """uint16 blocks over a (4, 2) grid, an accumulator in uint16 scratch
    that wraps, and the edge block of a ragged array."""
    x = _u16((40, 256))

    def kernel(x_ref, o_ref, acc):
        @pl.when(pl.program_id(1) == 0)
        def _():
            acc[...] = jnp.zeros_like(acc)
        acc[...] += x_ref[...] * 5000
        o_ref[...] = x_ref[...] + acc[...]

    out = pl.pallas_call(
        kernel, grid=(5, 2),
        in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)),
        out_shape=_sds(U16, (40, 256)),
        scratch_shapes=[pltpu.VMEM((8, 128), U16)])(_dev(x))
    want = np.empty_like(x)
    for i in range(5):
        acc = np.zeros((8, 128), np.uint16)
        for j in range(2):
            blk = x[8 * i:8 * i + 8, 128 * j:128 * j + 128]
            acc = acc + blk * np.uint16(5000)
            want[8 * i:8 * i + 8, 128 * j:128 * j + 128] = blk + acc
    np.testing.assert_array_equal(out, want)


def test_smem_uint16_scalars():
    """uint16 scalar prefetch read back unsigned, scalar-core arithmetic
    wrapping modulo 2^16, and a block index from it."""
    s = jnp.asarray([65535, 2, 40000, 1], dtype=U16)
    x = np.arange(32 * 128, dtype=np.float32).reshape(32, 128)

    def kernel(s_ref, x_ref, o_ref, t_ref):
        o_ref[...] = x_ref[...]
        t_ref[0] = s_ref[0] + s_ref[1]			# 65537 wraps to 1
        t_ref[1] = (s_ref[2] * s_ref[3]).astype(jnp.int32)
        t_ref[2] = (s_ref[0] > s_ref[2]).astype(jnp.int32)	# unsigned
        t_ref[3] = s_ref[1] - s_ref[3] * 3			# wraps to 65535

    out, t = pl.pallas_call(
        kernel, grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(1,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, s: (s[1] + s[3], 0))],
            out_specs=[pl.BlockSpec((8, 128), lambda i, s: (0, 0)),
                       pl.BlockSpec(memory_space=pltpu.SMEM)]),
        out_shape=[_sds(jnp.float32), jax.ShapeDtypeStruct((4,), jnp.int32)])(s, x)
    np.testing.assert_array_equal(out, x[24:32])
    np.testing.assert_array_equal(t, [1, 40000, 1, 65535])


def test_bitcasts_among_int16_uint16_bfloat16():
    """pltpu.bitcast and lax.bitcast_convert_type of one width: the 16 bits
    reinterpreted (bf16's NaN bits kept quiet); to 32 bits two rows a word;
    to 4 bits refused."""
    u = _u16((8, 128))
    u = np.where((u & 0x7F80) == 0x7F80, u & 0x807F, u).astype(np.uint16)	# no NaN/inf
    s = u.view(np.int16)

    def kernel(u_ref, s_ref, a_ref, b_ref, c_ref, d_ref, e_ref):
        b = pltpu.bitcast(u_ref[...], jnp.bfloat16)
        a_ref[...] = b
        b_ref[...] = lax.bitcast_convert_type(b, U16)
        c_ref[...] = lax.bitcast_convert_type(u_ref[...], jnp.int16)
        d_ref[...] = pltpu.bitcast(s_ref[...], U16)
        e_ref[...] = lax.bitcast_convert_type(s_ref[...], jnp.bfloat16)

    a, b, c, d, e = pl.pallas_call(kernel, out_shape=(
        _sds(jnp.bfloat16), _sds(U16), _sds(jnp.int16), _sds(U16), _sds(jnp.bfloat16)))(
            _dev(u), s)
    np.testing.assert_array_equal(np.asarray(a).view(np.uint32) >> 16, u)
    np.testing.assert_array_equal(b, u)
    np.testing.assert_array_equal(c, s)
    np.testing.assert_array_equal(d, u)
    np.testing.assert_array_equal(np.asarray(e).view(np.uint32) >> 16, u)

    def wide(u_ref, o_ref, back_ref):
        w = pltpu.bitcast(u_ref[...], jnp.float32)
        o_ref[...] = pltpu.bitcast(w, jnp.uint32)
        back_ref[...] = pltpu.bitcast(w, U16)
    w, back = pl.pallas_call(wide, out_shape=(_sds(jnp.uint32, (4, 128)), _sds(U16)))(_dev(u))
    v = u.astype(np.uint32)
    np.testing.assert_array_equal(w, v[0::2] | v[1::2] << 16)
    np.testing.assert_array_equal(back, u)

    def four_bits(u_ref, o_ref):
        o_ref[...] = pltpu.bitcast(u_ref[...], jnp.int4)
    with pytest.raises(pl.TraceError, match="uint16 arrays are held in int32 words"):
        pl.pallas_call(four_bits, out_shape=_sds(jnp.int4, (32, 128)))(_dev(u))


def test_weak_ints_iinfo_and_dtype_arguments():
    """A Python int with a uint16 array takes uint16 (65536 is refused as
    JAX's); jnp.iinfo(jnp.uint16) in a body; jnp.full(dtype=uint16) wraps."""
    x = _u16((8, 128))

    def kernel(x_ref, o_ref, f_ref):
        o_ref[...] = jnp.where(x_ref[...] > 60000, jnp.iinfo(U16).max, x_ref[...] + 7)
        f_ref[...] = jnp.full((8, 128), 40000, dtype=U16) * 2
    o, f = pl.pallas_call(kernel, out_shape=(_sds(U16), _sds(U16)))(_dev(x))
    np.testing.assert_array_equal(o, np.where(x > 60000, 65535, x + np.uint16(7)))
    np.testing.assert_array_equal(f, np.full((8, 128), 80000 - 65536, np.uint16))

    with pytest.raises(OverflowError, match="uint16"):
        pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...] + 65536),
                       out_shape=_sds(U16))(_dev(x))


def test_host_ref_of_uint16_is_refused():
    # a HostRef holds uint16 only as bfloat16 bits: refused, not misread
    with pytest.raises(TypeError, match="new_ref of a uint16 array"):
        jax.new_ref(_dev(_u16((8, 128))))
    with pytest.raises(TypeError, match="empty_ref of uint16"):
        jax.empty_ref(_sds(U16))
