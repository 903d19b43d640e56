# SPDX-License-Identifier: MIT
"""bfloat16 arrays on the host as JAX users write them: jnp makes them
(float32 storage holding values exact in bf16, x.dtype == jnp.bfloat16),
NumPy's functions see their float values, arithmetic rounds its results to
bf16, and pallas_call takes them in and gives bf16 outputs back as them."""
import pickle
import struct

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def _ref_round(values):
    """An independent reference: each float32 rounded to bfloat16 by its
    bits in Python ints (round to nearest, ties to even), as float32."""
    out = []
    for v in np.asarray(values, np.float32).reshape(-1).tolist():
        (u,) = struct.unpack("<I", struct.pack("<f", v))
        if v != v:
            r = (u | 0x00400000) & 0xFFFF0000
        else:
            low, high = u & 0xFFFF, u >> 16
            if low > 0x8000 or low == 0x8000 and high & 1:
                high += 1
            r = high << 16
        out.append(struct.unpack("<f", struct.pack("<I", r))[0])
    return np.array(out, np.float32).reshape(np.shape(values))


_rng = np.random.default_rng(7)
_X = (_rng.standard_normal((8, 128)) * 3).astype(np.float32)
_Y = (_rng.standard_normal((128, 128)) * 3).astype(np.float32)


def test_creation_and_dtype():
    x = jnp.ones((8, 128), jnp.bfloat16)
    assert x.shape == (8, 128) and x.dtype == jnp.bfloat16 and jnp.bfloat16 == x.dtype
    assert x.dtype != jnp.float32 and x.dtype != np.float32 and x.dtype != np.uint16
    assert x.dtype.name == "bfloat16" and x.dtype.itemsize == 2 and x.nbytes == 2 * 8 * 128
    assert jax.ShapeDtypeStruct(x.shape, x.dtype).dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(x), np.ones((8, 128), np.float32))
    assert jnp.zeros((2, 3), dtype=jnp.bfloat16).dtype == jnp.bfloat16
    assert jnp.empty((4,), jnp.bfloat16).dtype == jnp.bfloat16
    f = jnp.full((2, 2), 0.1, jnp.bfloat16)
    assert f.dtype == jnp.bfloat16 and float(f[0, 0]) == 0.10009765625
    a = jnp.arange(300, dtype=jnp.bfloat16)
    assert a.dtype == jnp.bfloat16
    np.testing.assert_array_equal(a, _ref_round(np.arange(300)))	# 257 rounds to 256
    v = [0.1, 1.0 / 3, -2.7, 65504.0, 1e-40, 3.4e38]
    for make in (jnp.asarray, jnp.array):
        b = make(v, dtype=jnp.bfloat16)
        assert b.dtype == jnp.bfloat16
        np.testing.assert_array_equal(np.asarray(b), _ref_round(v))
    assert jnp.asarray(b).dtype == jnp.bfloat16		# no dtype: kept
    assert jnp.asarray(b, dtype=jnp.float32).dtype == np.float32


def test_astype_both_ways_and_rounding():
    x = jnp.asarray(_X)
    b = x.astype(jnp.bfloat16)
    assert b.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(b), _ref_round(_X))
    back = b.astype(jnp.float32)
    assert back.dtype == np.float32 and type(back) is not type(b)
    np.testing.assert_array_equal(back, _ref_round(_X))
    assert b.astype(jnp.int32).dtype == np.int32
    assert jnp.astype(x, jnp.bfloat16).dtype == jnp.bfloat16
    assert jnp.asarray(np.arange(4, dtype=np.int32)).astype(jnp.bfloat16).dtype == jnp.bfloat16
    # ties go to even; NaN and infinities kept
    ties = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, np.inf, -np.inf, np.nan], np.float32)
    t = jnp.asarray(ties, dtype=jnp.bfloat16)
    np.testing.assert_array_equal(np.asarray(t), _ref_round(ties))
    assert float(t[0]) == 1.0 and float(t[1]) == 1 + 2 ** -6
    # bits both ways: tpuemu.to_bf16/from_bf16 and x.view(jnp.uint16)
    np.testing.assert_array_equal(jax.to_bf16(b), jax.to_bf16(_X))
    np.testing.assert_array_equal(b.view(np.uint16), jax.to_bf16(_X))
    np.testing.assert_array_equal(jax.from_bf16(b), _ref_round(_X))
    np.testing.assert_array_equal(jax.from_bf16(jax.to_bf16(_X)), _ref_round(_X))
    with pytest.raises(TypeError, match="uint16"):
        jax.from_bf16(_X)		# float values are not bits
    r = pickle.loads(pickle.dumps(b))
    assert r.dtype == jnp.bfloat16
    np.testing.assert_array_equal(r, b)


def test_numpy_functions_see_float_values():
    b = jnp.asarray(_X, dtype=jnp.bfloat16)
    ref = _ref_round(_X)
    np.testing.assert_allclose(b, _X, rtol=2 ** -8)
    np.testing.assert_allclose(b, ref, rtol=0, atol=0)
    np.testing.assert_array_equal(b, ref)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(b, _X, rtol=1e-6)
    a = np.asarray(b, dtype=np.float32)
    assert a.dtype == np.float32 and type(a) is np.ndarray
    np.testing.assert_array_equal(a, ref)
    d = np.abs(b - _X).max()
    assert d.dtype == np.float32 and float(d) == float(np.abs(ref - _X).max())
    assert np.allclose(b, ref) and jnp.allclose(b, ref)
    assert float(jnp.max(jnp.abs(b - ref))) == 0.0
    assert b.tolist() == ref.tolist() and b[0, 1].item() == float(ref[0, 1])
    assert "bfloat16" in repr(b)


def test_arithmetic_rounds_to_bf16():
    b = jnp.asarray(_X, dtype=jnp.bfloat16)
    c = jnp.asarray(_X[::-1], dtype=jnp.bfloat16)
    bf, cf = np.asarray(b), np.asarray(c)
    for got, want in ((b + c, bf + cf), (b * c, bf * cf), (b - 0.1, bf - np.float32(0.1)),
                      (b / 3, bf / np.float32(3)), (2 * b, 2 * bf), (-b, -bf),
                      (jnp.exp(b), np.exp(bf)), (jnp.maximum(b, 0), np.maximum(bf, 0)),
                      (b + np.arange(128, dtype=np.int32), bf + np.arange(128, dtype=np.float32)),
                      (jnp.sum(b, axis=0), bf.sum(axis=0)), (b.sum(), bf.sum()),
                      (jnp.mean(b), bf.mean()),
                      (jnp.where(b > 0, b, 0.5), np.where(bf > 0, bf, 0.5))):
        assert got.dtype == jnp.bfloat16, got.dtype
        np.testing.assert_array_equal(np.asarray(got), _ref_round(want))
    # with float32 arrays: float32, as JAX promotes
    for got in (b + _X, _X * b, b - _X[0], jnp.add(b, _X)):
        assert got.dtype == np.float32
    np.testing.assert_array_equal(b + _X, bf + _X)
    # comparisons with float32 arrays: bools
    lt = b < _X
    assert lt.dtype == np.bool_
    np.testing.assert_array_equal(lt, bf < _X)
    np.testing.assert_array_equal(b == c, bf == cf)
    # in place: still bf16 values
    e = b.copy()
    e += 0.1
    assert e.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(e), _ref_round(bf + np.float32(0.1)))
    # x.at[...] keeps bf16
    s = b.at[0, 0].set(0.1)
    assert s.dtype == jnp.bfloat16 and float(s[0, 0]) == 0.10009765625
    assert float(b[0, 0]) == float(bf[0, 0])	# b unchanged
    # moves keep the dtype
    for m in (b.T, b.reshape(-1), b[2:4], jnp.concatenate([b, c]), np.stack([b, c]),
              jnp.zeros_like(b), b[0, 0]):
        assert m.dtype == jnp.bfloat16


def test_dot_on_the_host():
    x = jnp.asarray(_X, dtype=jnp.bfloat16)
    y = jnp.asarray(_Y, dtype=jnp.bfloat16)
    exact = np.asarray(x, np.float64) @ np.asarray(y, np.float64)
    f = jnp.dot(x, y, preferred_element_type=jnp.float32)
    assert f.dtype == np.float32
    np.testing.assert_allclose(f, exact, rtol=1e-5, atol=1e-4)
    for r in (jnp.dot(x, y), x @ y, jnp.matmul(x, y), np.dot(x, y)):
        assert r.dtype == jnp.bfloat16
        np.testing.assert_array_equal(np.asarray(r), _ref_round(np.asarray(x) @ np.asarray(y)))
    m = jnp.matmul(x, y, preferred_element_type=jnp.float32)
    assert m.dtype == np.float32
    assert jnp.dot(x, _Y).dtype == np.float32		# with a float32 operand


def test_issubdtype_and_finfo():
    x = jnp.zeros((2,), jnp.bfloat16)
    assert jnp.issubdtype(x.dtype, jnp.floating) and jnp.issubdtype(jnp.bfloat16, jnp.floating)
    assert jnp.issubdtype(x.dtype, jnp.inexact) and not jnp.issubdtype(x.dtype, jnp.integer)
    assert jnp.issubdtype(x.dtype, jnp.bfloat16) and not jnp.issubdtype(x.dtype, jnp.float32)
    fi = jnp.finfo(jnp.bfloat16)
    assert float(fi.eps) == 2.0 ** -7 and fi.bits == 16 and fi.nmant == 7
    assert abs(float(fi.max) - 3.3895e38) < 1e34 and float(fi.min) == -float(fi.max)
    assert float(fi.tiny) == 2.0 ** -126 and fi.dtype == jnp.bfloat16
    assert float(jnp.finfo(x.dtype).eps) == 2.0 ** -7
    assert float(jnp.finfo(jnp.float32).eps) == 2.0 ** -23


def test_numpy_cannot_make_bfloat16():
    """NumPy has no bfloat16: its own constructors refuse it rather than
    give uint16 values (jnp's make host bf16 arrays)."""
    with pytest.raises(TypeError):
        np.zeros(3, jnp.bfloat16)
    with pytest.raises(TypeError):
        np.arange(3.0).astype(jnp.bfloat16)
    x = jnp.ones((3,), jnp.bfloat16)
    with pytest.raises(TypeError):
        np.zeros(3, x.dtype)		# not float32 in silence
    with pytest.raises(TypeError):
        np.asarray(x, dtype=x.dtype)
    assert jnp.zeros(3, x.dtype).dtype == jnp.bfloat16


def test_random_bfloat16():
    k1, k2 = jax.random.split(jax.random.key(0))
    n = jax.random.normal(k1, (64, 128), dtype=jnp.bfloat16)
    assert n.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(n),
                                  _ref_round(jax.random.normal(k1, (64, 128), jnp.float32)))
    u = jax.random.uniform(k2, (4096,), dtype=jnp.bfloat16, minval=-1.0, maxval=1.0)
    assert u.dtype == jnp.bfloat16 and float(u.min()) >= -1.0 and float(u.max()) < 1.0
    np.testing.assert_array_equal(np.asarray(u), _ref_round(u))
    with pytest.raises(TypeError, match="randint"):
        jax.random.randint(k1, (2,), 0, 3, dtype=jnp.bfloat16)


def _double(x_ref, o_ref):
    o_ref[...] = (x_ref[...].astype(jnp.float32) * 2 + 0.5).astype(o_ref.dtype)


def test_pallas_call_round_trip():
    x = jnp.asarray(_X, dtype=jnp.bfloat16)
    out = pl.pallas_call(_double, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    assert out.dtype == jnp.bfloat16 and out.shape == x.shape
    want = _ref_round(np.asarray(x) * 2 + np.float32(0.5))
    np.testing.assert_array_equal(np.asarray(out, dtype=np.float32), want)
    np.testing.assert_allclose(out, np.asarray(x) * 2 + 0.5, rtol=2 ** -8)
    np.testing.assert_allclose(out.astype(jnp.float32), want)
    # bits in (existing callers' tpuemu.to_bf16) give the same output
    out2 = pl.pallas_call(_double, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.bfloat16))(
        jax.to_bf16(_X))
    assert out2.dtype == jnp.bfloat16
    np.testing.assert_array_equal(out2, out)
    # a float32 output of a bf16 input
    f = pl.pallas_call(_double, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(x)
    assert f.dtype == np.float32
    np.testing.assert_array_equal(f, np.asarray(x) * 2 + np.float32(0.5))


def test_pallas_call_matmul_against_host_reference():
    """The docs' pattern: bf16 inputs, a kernel's bf16 product, a host
    reference by jnp.dot(preferred_element_type=jnp.float32)."""
    def mm(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...],
                             preferred_element_type=jnp.float32).astype(o_ref.dtype)

    x = jax.random.normal(jax.random.key(1), (8, 128), dtype=jnp.bfloat16)
    y = jax.random.normal(jax.random.key(2), (128, 128), dtype=jnp.bfloat16)
    out = pl.pallas_call(mm, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.bfloat16))(x, y)
    ref = jnp.dot(x, y, preferred_element_type=jnp.float32)
    assert out.dtype == jnp.bfloat16 and ref.dtype == np.float32
    np.testing.assert_allclose(out.astype(jnp.float32), ref, atol=0.1, rtol=2 ** -7)
    np.testing.assert_array_equal(np.asarray(out), _ref_round(ref))


def test_new_ref_of_bf16():
    """jax.new_ref of a host bf16 array: a bf16 ref (its bits on the
    device); jax.freeze and ref[...] give host bf16 arrays back."""
    x = jnp.asarray(_X, dtype=jnp.bfloat16)
    r = jax.new_ref(x, memory_space=pltpu.VMEM)
    assert r.dtype == jnp.bfloat16

    def kernel(r_ref):
        r_ref[...] = r_ref[...] * 2

    pl.pallas_call(kernel, out_shape=())(r)
    y = jax.freeze(r)
    assert y.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(y), _ref_round(np.asarray(x) * 2))
    assert r[0:2].dtype == jnp.bfloat16
    r[0, 0] = 0.1
    assert float(r[0, 0]) == 0.10009765625


def test_kernel_with_refs_of_bf16():
    """pl.kernel over jax.new_ref / jax.empty_ref refs of bf16 (the
    docs' pattern), the result by jax.freeze."""
    x = jax.random.normal(jax.random.key(3), (8, 128), dtype=jnp.bfloat16)

    def body(x_hbm, o_hbm):
        pltpu.sync_copy(x_hbm, o_hbm)

    x_ref = jax.new_ref(x)
    o_ref = jax.empty_ref(jax.ShapeDtypeStruct(x.shape, jnp.bfloat16))
    pl.kernel(lambda: body(x_ref, o_ref), mesh=pltpu.TensorCoreMesh(axis_name="core"))()
    y = jax.freeze(o_ref)
    assert y.dtype == jnp.bfloat16
    np.testing.assert_array_equal(y, x)


def test_host_odds_and_ends():
    b = jnp.asarray(_X, dtype=jnp.bfloat16)
    idx = np.arange(0, 128, 3, dtype=np.int32)
    t = jnp.take(b, idx, axis=1)
    assert t.dtype == jnp.bfloat16
    np.testing.assert_array_equal(t, np.asarray(b)[:, idx])
    ta = jnp.take_along_axis(b, np.zeros((8, 1), np.int32), axis=1)
    assert ta.dtype == jnp.bfloat16
    np.testing.assert_array_equal(ta, np.asarray(b)[:, :1])
    assert jnp.dtype(jnp.bfloat16) == jnp.bfloat16 and jnp.dtype(b.dtype) == jnp.bfloat16
    assert jnp.dtype("float32") == np.float32
    c = jnp.bfloat16(_X)
    assert c.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(c), _ref_round(_X))
    assert float(jnp.bfloat16(0.1)) == 0.10009765625
    assert jnp.result_type(b, np.float32) == np.float32	# jnp's lattice (test below)
    with pytest.raises(NotImplementedError, match="common_type"):
        jnp.common_type(b)
    assert jnp.result_type(np.int8, np.int32) == np.int32	# others: NumPy's
    v = jax.vmap(lambda r: r * 2)(b)
    assert v.dtype == jnp.bfloat16
    np.testing.assert_array_equal(v, b * 2)


def test_methods_round_once():
    """x.mean(), x.var(), x.dot(y) ...: computed in float32 and rounded
    once, as jnp's functions (not between their steps)."""
    b = jnp.asarray(_X, dtype=jnp.bfloat16)
    y = jnp.asarray(_Y, dtype=jnp.bfloat16)
    bf = np.asarray(b)
    for got, want in ((b.mean(), bf.mean()), (b.mean(axis=1), bf.mean(axis=1)),
                      (b.var(), bf.var()), (b.std(axis=0), bf.std(axis=0)),
                      (b.sum(axis=1), bf.sum(axis=1)), (b.cumsum(axis=1), bf.cumsum(axis=1)),
                      (b.dot(y), bf @ np.asarray(y)), (b.prod(axis=0), bf.prod(axis=0))):
        assert got.dtype == jnp.bfloat16
        np.testing.assert_array_equal(np.asarray(got), _ref_round(want))


def test_writes_keep_bf16_values():
    """Every way of writing into a host bf16 array rounds to bf16."""
    third = np.float32(1 / 3)
    want = float(_ref_round(third))
    b = jnp.zeros((4, 4), jnp.bfloat16)
    b[0, 0] = third
    b[1] = np.full(4, third, np.float32)
    np.copyto(b[2], np.full(4, third, np.float32))
    np.add.at(b, (3, 0), third)
    np.multiply(b[3], 1.0, out=b[3])
    assert float(b[0, 0]) == want and np.all(np.asarray(b[1:3]) == want) and float(b[3, 0]) == want
    c = jnp.zeros((2,), jnp.bfloat16)
    c.fill(third)
    np.put(c, [1], [2 * third])
    np.testing.assert_array_equal(np.asarray(c), _ref_round([third, 2 * third]))


def test_save_npy_writes_bits(tmp_path):
    """tpuemu.save_npy of a host bf16 array: its bits ('<u2'), as libtpurt
    writes bf16; load_npy gives the bits back."""
    x = jnp.asarray([0.1, 2.5, -3.0], dtype=jnp.bfloat16)
    p = str(tmp_path / "x.npy")
    jax.save_npy(p, x)
    assert np.load(p).dtype == np.uint16
    np.testing.assert_array_equal(jax.load_npy(p, jnp.bfloat16), x.view(np.uint16))


def test_promotion_with_bfloat16():
    """jnp.promote_types and result_type where bfloat16 takes part follow
    jnp's lattice (an integer with bf16 is bf16, bf16 with float16 or
    float32 is float32, a Python float stays weak), on the host and in a
    kernel body (a ref's dtype)."""
    x = jnp.asarray(np.ones(3, np.float32), dtype=jnp.bfloat16)
    assert jnp.promote_types(jnp.bfloat16, np.int32) == jnp.bfloat16
    assert jnp.promote_types(jnp.bfloat16, jnp.float16) == np.float32
    assert jnp.result_type(x, 1.0) == jnp.bfloat16
    assert jnp.result_type(x, np.ones(2, np.int8)) == jnp.bfloat16
    assert jnp.result_type(x, np.float32) == np.float32
    seen = []

    def kernel(x_ref, o_ref):
        d = jnp.promote_types(x_ref.dtype, jnp.float32)
        seen.append(d)
        o_ref[...] = x_ref[...].astype(d) * 2

    b = jnp.asarray(np.ones((8, 128), np.float32), dtype=jnp.bfloat16)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(b)
    np.testing.assert_array_equal(out, 2.0)
    assert seen == [np.float32]
    with pytest.raises(NotImplementedError, match="can_cast of bfloat16"):
        jnp.can_cast(jnp.bfloat16, np.float32)
