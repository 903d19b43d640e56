# SPDX-License-Identifier: MIT
"""lax's reductions (reduce_sum/max/min/prod/and/or, lax.reduce with a
monoid), lax.reduce_precision, pl.reciprocal, pltpu.trace scopes and
jnp.matmul's precision=, in kernels against NumPy."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

X = np.random.default_rng(3).standard_normal((8, 128)).astype(np.float32)


def _run(fn, x=X, dtype=jnp.float32):
    def k(x_ref, o_ref):
        o_ref[...] = fn(x_ref[...]).astype(dtype)
    return np.asarray(pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, dtype))(x))


@pytest.mark.parametrize("name, ref", [("reduce_sum", np.sum), ("reduce_max", np.max),
                                       ("reduce_min", np.min)])
@pytest.mark.parametrize("axis", [0, 1])
def test_lax_reductions(name, ref, axis):
    got = _run(lambda v: getattr(lax, name)(v, (axis,)).reshape(
        (1, 128) if axis == 0 else (8, 1)) + v * 0)
    np.testing.assert_allclose(got, ref(X, axis=axis, keepdims=True) + X * 0, rtol=1e-5,
                               atol=1e-5)


def test_reduce_prod_and_bool_reductions():
    x = np.random.default_rng(4).integers(-2, 3, (8, 128)).astype(np.int32)
    got = _run(lambda v: lax.reduce_prod(v[:, :16], (1,)).reshape(8, 1) + v * 0, x, jnp.int32)
    np.testing.assert_array_equal(got, np.prod(x[:, :16], 1, keepdims=True) + x * 0)
    got = _run(lambda v: jnp.where(lax.reduce_or(v > 1, (1,)).reshape(8, 1), 1, 0) +
               jnp.where(lax.reduce_and(v > -3, (1,)).reshape(8, 1), 10, 0) + v * 0, x, jnp.int32)
    want = np.where((x > 1).any(1, keepdims=True), 1, 0) + \
        np.where((x > -3).all(1, keepdims=True), 10, 0) + x * 0
    np.testing.assert_array_equal(got, want)


def test_lax_reduce_with_a_monoid_and_an_init():
    got = _run(lambda v: lax.reduce(v, 0.0, lax.add, (1,)).reshape(8, 1) + v * 0)
    np.testing.assert_allclose(got, X.sum(1, keepdims=True) + X * 0, rtol=1e-5, atol=1e-5)
    got = _run(lambda v: lax.reduce(v, 0.5, lax.max, (1,)).reshape(8, 1) + v * 0)
    np.testing.assert_array_equal(got, np.maximum(X.max(1, keepdims=True), 0.5) + X * 0)
    got = _run(lambda v: lax.reduce(v, 2.0, lax.add, (0,)).reshape(1, 128) + v * 0)
    np.testing.assert_allclose(got, X.sum(0, keepdims=True) + 2 + X * 0, rtol=1e-5, atol=1e-5)
    with pytest.raises(NotImplementedError, match="lax.reduce"):
        _run(lambda v: lax.reduce(v, 0.0, lambda a, b: a - b, (1,)))


@pytest.mark.parametrize("mantissa", [7, 10, 3, 23])
def test_reduce_precision_rounds_to_nearest_even(mantissa):
    x = (X * 1000).copy()
    x[0, :5] = [np.inf, -np.inf, np.nan, 3.4e38, 0.0]
    got = _run(lambda v: lax.reduce_precision(v, exponent_bits=8, mantissa_bits=mantissa), x)
    # NumPy: the float64 value rounded to mantissa bits, ties to even
    with np.errstate(over="ignore", invalid="ignore"):
        m, e = np.frexp(x.astype(np.float64))
        want = np.ldexp(np.round(np.ldexp(m, mantissa + 1)), e - mantissa - 1)
        want = np.where(np.abs(want) > np.finfo(np.float32).max, np.sign(x) * np.inf, want)
        want = np.where(np.isfinite(x), want, x).astype(np.float32)
    np.testing.assert_array_equal(got, want)
    if mantissa == 7:		# bfloat16's rounding
        np.testing.assert_array_equal(got, np.asarray(
            jnp.asarray(x).astype(jnp.bfloat16).astype(jnp.float32)))


def test_reciprocal_trace_scope_and_matmul_precision():
    def k(x_ref, o_ref, p_ref):
        with pltpu.trace("recip", level=1):
            o_ref[...] = pl.reciprocal(x_ref[...] + 4.0, approx=True)
        p_ref[...] = jnp.matmul(x_ref[...], x_ref[...].T,
                                precision=lax.Precision.HIGHEST)[:, :8].repeat(16, axis=1)

    f32 = jax.ShapeDtypeStruct(X.shape, jnp.float32)
    o, p = pl.pallas_call(k, out_shape=(f32, f32))(X)
    np.testing.assert_allclose(np.asarray(o), 1 / (X + 4), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(p), np.repeat((X @ X.T)[:, :8], 16, 1), rtol=1e-4,
                               atol=1e-4)
