# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas tests (tests/pallas/ops_test.py, tpu_ops_test.py,
tpu_pallas_test.py), each named after the test it ports, with a NumPy
reference: lax.div/rem, population_count/clz, erf_inv, jnp.stack, jnp.dot
of a 1-D operand, batched dot_general, kernels with no operation."""
import math

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

_rng = np.random.default_rng(1234)


def _normal(shape):
    return _rng.standard_normal(shape).astype(np.float32)


# --- ops_test.py OpsTest.test_binary: lax.div / lax.rem truncate ---

_X = np.array([1, 3, -4, -6, 2, 5, 4, -7], np.int32)
_Y = np.array([3, 1, -4, -5, 2, -2, 2, 4], np.int32)


@pytest.mark.parametrize("fn,ref", [(lax.div, lambda x, y: np.trunc(x / y).astype(np.int32)),
                                    (lax.rem, np.fmod)], ids=["div", "rem"])
def test_binary_lax_div_rem_int32(fn, ref):
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = fn(x_ref[...], y_ref[...])

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8,), jnp.int32))(_X, _Y)
    np.testing.assert_array_equal(out, ref(_X, _Y))
    # // and % floor: the two differ on these operands
    assert (ref(_X, _Y) != (_X // _Y if fn is lax.div else _X % _Y)).any()


def test_binary_lax_rem_by_a_constant_and_int8():
    def kernel(x_ref, o_ref, p_ref):
        o_ref[...] = lax.rem(x_ref[...], 3)
        p_ref[...] = lax.div(x_ref[...], -3)

    x = np.arange(-64, 64, dtype=np.int8).reshape(1, 128)
    o, p = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct(x.shape, jnp.int8),) * 2)(x)
    np.testing.assert_array_equal(o, np.fmod(x, 3))
    np.testing.assert_array_equal(p, np.trunc(x / -3).astype(np.int8))


# --- tpu_ops_test.py OpsTest.test_float_div; lax.rem of floats is fmod ---

def test_float_div():
    def kernel(x, y, out, r):
        out[:] = jax.lax.div(x[:], y[:])
        r[:] = jax.lax.rem(x[:], y[:])

    x, y = _normal((8, 128)) * 5, _normal((8, 128))
    q, r = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.float32),) * 2)(x, y)
    np.testing.assert_allclose(q, x / y, rtol=1e-6)
    np.testing.assert_array_equal(r, np.fmod(x, y))


def test_lax_div_of_a_computed_value():
    """lax.div needs its operands' dtype: tracing knows every value's
    (jnp.exp of a float32 read is float32), so a float division."""
    def kernel(x_ref, o_ref):
        o_ref[...] = lax.div(jnp.exp(x_ref[...]), 2)

    x = _normal((8, 128))
    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
    np.testing.assert_allclose(y, np.exp(x) / 2, rtol=1e-6)


# --- ops_test.py OpsTest.test_elementwise: population_count, clz (int32) ---

def _popcount(x, bits):
    u = x.astype(np.int64) & ((1 << bits) - 1)
    return np.array([bin(int(v)).count("1") for v in u.ravel()]).reshape(x.shape)


def _clz(x, bits):
    u = x.astype(np.int64) & ((1 << bits) - 1)
    return np.array([bits - int(v).bit_length() for v in u.ravel()]).reshape(x.shape)


@pytest.mark.parametrize("fn,ref", [(lax.population_count, _popcount), (lax.clz, _clz)],
                         ids=["population_count", "clz"])
def test_elementwise_bit_counts_int32(fn, ref):
    def kernel(x_ref, o_ref):
        o_ref[:] = fn(x_ref[...])

    # the JAX test's data, 0.42 and 2.4 as int32, and the corners
    x = np.array([0.42, 2.4] * (8 * 128 // 2)).reshape(8, 128).astype(np.int32)
    x[1] = _rng.integers(-2 ** 31, 2 ** 31, 128, dtype=np.int64).astype(np.int32)
    x[0, :4] = [0, -1, 1, -2 ** 31]
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32))(x)
    np.testing.assert_array_equal(out, ref(x, 32))


def test_bit_counts_of_int8_count_its_width():
    def kernel(x_ref, p_ref, c_ref):
        x = x_ref[...]
        p_ref[...] = lax.population_count(x).astype(jnp.int32)
        c_ref[...] = lax.clz(x).astype(jnp.int32)

    x = np.arange(-128, 128, dtype=np.int8).reshape(2, 128)
    p, c = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct(x.shape, jnp.int32),) * 2)(x)
    np.testing.assert_array_equal(p, _popcount(x, 8))
    np.testing.assert_array_equal(c, _clz(x, 8))


def test_bit_counts_of_floats_are_refused():
    def kernel(x_ref, o_ref):
        o_ref[...] = lax.population_count(x_ref[...])

    with pytest.raises(pl.TraceError, match="population_count takes integers, not float32"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(
            _normal((8, 128)))


# --- ops_test.py OpsTest.test_erf_inv ---

def _erfinv64(y):
    """erfinv in double: Newton on math.erf from XLA's own first guess."""
    if abs(y) > 1:
        return math.nan
    if abs(y) == 1:
        return math.copysign(math.inf, y)
    x = 0.0
    for _ in range(100):
        d = (math.erf(x) - y) / (2 / math.sqrt(math.pi) * math.exp(-x * x))
        x -= d
        if abs(d) < 1e-17:
            break
    return x


@pytest.mark.parametrize("value", [-3.2, -1.0, -0.999517, -0.4, 0., 0.72, 0.999517, 1.0, 2.4])
def test_erf_inv(value):
    def kernel(x_ref, o_ref):
        o_ref[...] = lax.erf_inv(x_ref[...])

    x = np.full((8, 128), value, dtype=np.float32)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
    want = _erfinv64(float(np.float32(value)))
    if math.isnan(want):
        assert np.isnan(out).all()
    else:
        np.testing.assert_allclose(out, np.full((8, 128), want, np.float32), rtol=3e-7)
        assert (out == out[0, 0]).all()


# --- ops_test.py OpsTest.test_concat_constant: jnp.stack ---

def test_concat_constant():
    num_arrays = 16

    def kernel(out):
        result = []
        for i in range(num_arrays):
            result.append(jnp.full((1, 128), i, jnp.float32))
        out[:] = jnp.stack(result, axis=0).reshape(num_arrays, 128)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((num_arrays, 128), jnp.float32),
                         out_specs=pl.BlockSpec(memory_space=pltpu.VMEM))()
    np.testing.assert_array_equal(out, np.repeat(np.arange(16, dtype=np.float32)[:, None], 128, 1))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_stack_along_any_axis(axis):
    x = _normal((8, 128))
    want = np.stack([x, x * 2, x + 1], axis=axis)

    def kernel(x_ref, o_ref):
        v = x_ref[...]
        s = jnp.stack([v, v * 2, v + 1], axis=axis)
        assert s.shape == want.shape
        o_ref[...] = s

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(want.shape, jnp.float32))(x)
    np.testing.assert_array_equal(np.asarray(out), want)


def test_stack_refusals_name_the_shapes():
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.stack([x_ref[...], x_ref[:4, :]])

    with pytest.raises(pl.TraceError, match=r"parts of shapes \(8, 128\), \(4, 128\)"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((2, 8, 128), jnp.float32))(
            _normal((8, 128)))


# --- tpu_ops_test.py OpsTest.test_sum_of_two_matmuls: jnp.dot with a 1-D rhs ---

def test_sum_of_two_matmuls():
    M, K = 8, 8
    a_val, b_val, c_val, d_val = _normal((M, K)), _normal((K,)), _normal((M, K)), _normal((K,))

    def kernel(a_ref, b_ref, c_ref, d_ref, o_ref):
        a = a_ref[:]
        b = b_ref[:]
        c = c_ref[:]
        d = d_ref[:]
        res1 = jnp.dot(a, b)
        res2 = jnp.dot(c, d)
        o_ref[:] = res1 + res2

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((M,), np.float32),
                         grid=(1,))(a_val, b_val, c_val, d_val)
    np.testing.assert_allclose(out, a_val @ b_val + c_val @ d_val, atol=1e-5, rtol=1e-5)


def test_dot_of_two_vectors_is_their_inner_product():
    def kernel(a_ref, b_ref, o_ref):
        o_ref[...] = jnp.zeros((8, 128), jnp.float32) + jnp.dot(a_ref[...], b_ref[...])

    a, b = _normal((128,)), _normal((128,))
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(a, b)
    np.testing.assert_allclose(out, np.full((8, 128), a @ b), rtol=1e-5)


# --- ops_test.py OpsTest.test_dot_dims_batched_simple_dot_general ---

def test_dot_dims_batched_simple_dot_general():
    x, y = _normal((11, 16, 256)), _normal((11, 256, 128))

    def kernel(x_ref, y_ref, out_ref):
        out_ref[...] = jax.lax.dot_general(
            x_ref[...], y_ref[...], dimension_numbers=(([2], [1]), ([0], [0])),
            preferred_element_type=jnp.float32)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((11, 16, 128), jnp.float32))(x, y)
    np.testing.assert_allclose(out, np.einsum("bmk,bkn->bmn", x, y), rtol=1e-5, atol=1e-4)


# --- ops_test.py OpsTest.test_matrix_vector_like_dot_general (lhs (8,) rows) ---

@pytest.mark.parametrize("batch_size", [None, 1, 2])
@pytest.mark.parametrize("rhs_is_vector", [True, False])
def test_matrix_vector_like_dot_general(batch_size, rhs_is_vector):
    batch = (batch_size,) if batch_size is not None else ()
    lhs_shape = (*batch, 8, 128)
    rhs_shape = (*batch, *(() if rhs_is_vector else (1,)), 128)
    bdim = [0] if batch_size else []
    dims = (([len(lhs_shape) - 1], [len(rhs_shape) - 1]), (bdim, bdim))
    lhs, rhs = _normal(lhs_shape), _normal(rhs_shape)
    if batch_size:
        expected = np.stack([np.tensordot(lhs[i], rhs[i], ([1], [rhs.ndim - 2]))
                             for i in range(batch_size)])
    else:
        expected = np.tensordot(lhs, rhs, ([1], [rhs.ndim - 1]))

    def kernel(lhs_ref, rhs_ref, out_ref):
        out_ref[...] = jax.lax.dot_general(lhs_ref[...], rhs_ref[...], dimension_numbers=dims,
                                           preferred_element_type=jnp.float32)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(expected.shape, jnp.float32))(
        lhs, rhs)
    np.testing.assert_allclose(out, expected, atol=5e-6, rtol=5e-4)


def test_batch_dims_other_than_leading():
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = lax.dot_general(x_ref[...], y_ref[...], (((2,), (2,)), ((1,), (0,))))

    x, y = _normal((3, 4, 128)), _normal((4, 2, 128))
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 3, 2), jnp.float32))(x, y)
    np.testing.assert_allclose(np.asarray(out), np.einsum("abk,bck->bac", x, y),
                               rtol=1e-4, atol=1e-3)


# --- kernels with no operation (tpu_pallas_test.py's aliasing through pl.ANY) ---

def test_no_op_kernel_keeps_an_aliased_input():
    def kernel(x_ref, o_ref):
        del x_ref, o_ref

    x = _normal((16, 128))
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
                         in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                         out_specs=pl.BlockSpec(memory_space=pl.ANY),
                         input_output_aliases={0: 0})(x)
    np.testing.assert_array_equal(out, x)


def test_no_op_kernel_with_a_grid_runs():
    def kernel(x_ref, o_ref):
        pass

    x = _normal((16, 128))
    f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32),
                       grid=(2,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    f(x)
    assert f.statements == [] and jax.last_stats()["steps"] == 2
