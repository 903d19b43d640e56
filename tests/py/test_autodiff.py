# SPDX-License-Identifier: MIT
"""jax.vjp, jax.grad, jax.jvp and jax.custom_vjp (tpuemu._ad): gradients
against central differences on the host, the same vjp traced into a kernel
against the host's, custom_vjp around pallas_calls (forward and backward
kernels, as JAX's flash attention is built), and the refusals."""
import numpy as np
import pytest

import tpuemu as jax
from tpuemu import lax, numpy as jnp
from tpuemu.experimental import pallas as pl

_rng = np.random.default_rng(7)
_X = (_rng.standard_normal((8, 128)) * 0.5).astype(np.float32)
_POS = (np.abs(_X) + 0.5).astype(np.float32)


def _check_grad(f, x, rtol=1e-2):
    """grad(f)(x) against central differences of @f along three random
    directions v: <grad, v> is (f(x + eps v) - f(x - eps v)) / (2 eps) up
    to O(eps^2) and float32's rounding of f."""
    g = np.asarray(jax.grad(f)(x), np.float64)
    assert g.shape == np.shape(x)
    rng = np.random.default_rng(1)
    eps = 1e-3
    for _ in range(3):
        v = rng.standard_normal(np.shape(x))
        hi = float(f((x + eps * v).astype(np.float32)))
        lo = float(f((x - eps * v).astype(np.float32)))
        want = (hi - lo) / (2 * eps)
        got = float(np.sum(g * v))
        scale = np.linalg.norm(g) * np.linalg.norm(v) + abs(hi) * 1e-4 / eps
        assert abs(got - want) <= rtol * scale, (got, want, scale)


_UNARY = {
    "tanh": (jnp.tanh, _X), "exp": (jnp.exp, _X), "log": (jnp.log, _POS),
    "sqrt": (jnp.sqrt, _POS), "rsqrt": (lax.rsqrt, _POS), "sin": (jnp.sin, _X),
    "cos": (jnp.cos, _X), "square": (jnp.square, _X), "abs": (jnp.abs, _POS - 0.4),
    "log1p": (jnp.log1p, _POS), "expm1": (jnp.expm1, _X), "exp2": (jnp.exp2, _X),
    "sigmoid": (jax.nn.sigmoid, _X), "logistic": (lax.logistic, _X),
    "gelu": (jax.nn.gelu, _X), "silu": (jax.nn.silu, _X), "relu": (jax.nn.relu, _POS),
    "erf": (lax.erf, _X), "integer_pow": (lambda x: lax.integer_pow(x, 3), _X),
    "power": (lambda x: x ** 1.5, _POS), "negative": (lambda x: -x, _X),
    "reciprocal": (lambda x: 1.0 / x, _POS),
}


@pytest.mark.parametrize("name", list(_UNARY))
def test_unary_grad_matches_differences(name):
    fn, x = _UNARY[name]
    _check_grad(lambda v: jnp.sum(fn(v) * _X), x)


_W = (_rng.standard_normal((128, 16)) * 0.1).astype(np.float32)
_ROW = _rng.standard_normal((1, 128)).astype(np.float32)

_COMPOSED = {
    "broadcast_mul_add": lambda x: jnp.sum((x * _ROW + _ROW) ** 2),
    "divide": lambda x: jnp.sum(_ROW / (x * x + 1.0)),
    "maximum_minimum": lambda x: jnp.sum(jnp.maximum(x, 0.1) + jnp.minimum(x, _ROW)),
    "where": lambda x: jnp.sum(jnp.where(x > 0, x * 3.0, x * x)),
    "mean_max": lambda x: jnp.mean(x * x) + jnp.sum(jnp.max(x, axis=1)),
    "matmul": lambda x: jnp.sum(jnp.tanh(x @ _W)),
    "dot_T": lambda x: jnp.sum(jnp.dot(x, x.T) * 0.01),
    "dot_general": lambda x: jnp.sum(lax.dot_general(
        x, _W, (((1,), (0,)), ((), ()))) ** 2),
    "einsum": lambda x: jnp.sum(jnp.einsum("ij,jk->ik", x, _W) ** 2),
    "einsum_summed_index": lambda x: jnp.sum(jnp.einsum("ij,jk->k", x, _W) ** 2),
    "reshape_transpose": lambda x: jnp.sum(jnp.transpose(x.reshape(16, 64)) * _ROW[:, :16]),
    "concatenate_slice": lambda x: jnp.sum(jnp.concatenate([x, x * 2], axis=0)[4:12] ** 2),
    "getitem": lambda x: jnp.sum(x[1:3, ::2] ** 3) + x[0, 5],
    "softmax": lambda x: jnp.sum(jax.nn.softmax(x, axis=-1) * _X),
    "log_softmax": lambda x: jnp.sum(jax.nn.log_softmax(x) * _X),
    "logsumexp": lambda x: jnp.sum(jax.nn.logsumexp(x, axis=1)),
    "layer_norm": lambda x: jnp.sum(
        ((x - x.mean(axis=1, keepdims=True)) *
         lax.rsqrt(jnp.var(x, axis=1, keepdims=True) + 1e-5)) * _X),
    "clip": lambda x: jnp.sum(jnp.clip(x, -0.3, 0.3) * _X),
    "astype_bf16_roundtrip": lambda x: jnp.sum(x.astype(jnp.float32) * 2.0),
}


@pytest.mark.parametrize("name", list(_COMPOSED))
def test_composed_grad_matches_differences(name):
    _check_grad(_COMPOSED[name], _X)


def test_vjp_of_two_outputs_and_has_aux():
    def f(x, y):
        return (x * y, jnp.sin(x)), {"aux": x + 1}
    (a, b), fn, aux = jax.vjp(f, _X, _POS, has_aux=True)
    np.testing.assert_allclose(a, _X * _POS, rtol=1e-6)
    np.testing.assert_allclose(aux["aux"], _X + 1, rtol=1e-6)
    ga, gb = np.ones_like(_X), np.full_like(_X, 2.0)
    dx, dy = fn((ga, gb))
    np.testing.assert_allclose(dx, _POS + 2 * np.cos(_X), rtol=1e-5)
    np.testing.assert_allclose(dy, _X, rtol=1e-6)


def test_grad_argnums_has_aux_and_value_and_grad():
    def loss(w, x):
        return jnp.sum((x @ w) ** 2), w.shape
    (v, shape), g = jax.value_and_grad(loss, has_aux=True)(_W, _X)
    assert shape == _W.shape
    np.testing.assert_allclose(v, np.sum((_X @ _W) ** 2), rtol=1e-4)
    np.testing.assert_allclose(g, 2 * _X.T @ (_X @ _W), rtol=1e-4, atol=1e-4)
    gw, gx = jax.grad(lambda w, x: loss(w, x)[0], argnums=(0, 1))(_W, _X)
    np.testing.assert_allclose(gx, 2 * (_X @ _W) @ _W.T, rtol=1e-4, atol=1e-4)


def test_unused_input_has_a_zero_gradient():
    g = jax.grad(lambda x, y: jnp.sum(x * 2.0), argnums=1)(_X, _POS)
    np.testing.assert_array_equal(g, np.zeros_like(_POS))


def test_grad_of_grad_and_jvp():
    """Second derivatives by grad of grad (the backward pass recorded on
    the outer tape), and jvp as the vjp of the vjp."""
    x = np.float32(0.7)
    d2 = jax.grad(jax.grad(lambda v: jnp.sin(v) * v))(x)
    np.testing.assert_allclose(d2, 2 * np.cos(0.7) - 0.7 * np.sin(0.7), rtol=1e-5)
    t = _rng.standard_normal(_X.shape).astype(np.float32)
    y, ty = jax.jvp(lambda v: jnp.tanh(v) * v, (_X,), (t,))
    np.testing.assert_allclose(y, np.tanh(_X) * _X, rtol=1e-6)
    np.testing.assert_allclose(ty, ((1 - np.tanh(_X) ** 2) * _X + np.tanh(_X)) * t,
                               rtol=1e-4, atol=1e-6)


def test_stop_gradient_and_checkpoint():
    f = jax.checkpoint(lambda x: jnp.sum(x * lax.stop_gradient(x)))
    np.testing.assert_allclose(jax.grad(f)(_X), _X, rtol=1e-6)


def test_bf16_input_gets_a_bf16_gradient():
    xb = jnp.asarray(_X).astype(jnp.bfloat16)
    g = jax.grad(lambda v: jnp.sum(v.astype(jnp.float32) ** 2))(xb)
    assert g.dtype == jnp.bfloat16
    np.testing.assert_allclose(np.asarray(g, np.float32), 2 * np.asarray(xb, np.float32),
                               rtol=1e-2)


# --- in a kernel body: the rules trace into the kernel --------------------

_KERNEL_FNS = {
    "tanh_dot_rowmax": lambda x, w: jnp.sum(jnp.tanh(jnp.dot(x, w)) ** 2, axis=1,
                                            keepdims=True) + jnp.max(x, axis=1, keepdims=True),
    "softmax": lambda x, w: jax.nn.softmax(x * 2.0, axis=-1) * w[:8, :],
    "exp_div_where": lambda x, w: jnp.where(x > 0, jnp.exp(x) / (w[:8, :] * w[:8, :] + 1.0),
                                            x * x),
    "dot_transposed": lambda x, w: lax.dot_general(x, w, (((1,), (1,)), ((), ()))),
}


@pytest.mark.parametrize("name", list(_KERNEL_FNS))
def test_vjp_in_a_kernel_matches_the_host(name):
    f = _KERNEL_FNS[name]
    x = _X
    w = (_rng.standard_normal((128, 128)) * 0.1).astype(np.float32)
    y_host, fn_host = jax.vjp(f, x, w)
    g = _rng.standard_normal(np.shape(y_host)).astype(np.float32)
    dx_host, dw_host = fn_host(g)

    def kernel(x_ref, w_ref, g_ref, y_ref, dx_ref, dw_ref):
        y, fn = jax.vjp(f, x_ref[...], w_ref[...])
        y_ref[...] = y
        dx, dw = fn(g_ref[...])
        dx_ref[...] = dx
        dw_ref[...] = dw

    out = (jax.ShapeDtypeStruct(np.shape(y_host), jnp.float32),
           jax.ShapeDtypeStruct(x.shape, jnp.float32), jax.ShapeDtypeStruct(w.shape, jnp.float32))
    y, dx, dw = pl.pallas_call(kernel, out_shape=out)(x, w, g)
    np.testing.assert_allclose(y, y_host, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx, dx_host, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw, dw_host, rtol=1e-4, atol=1e-5)


# --- custom_vjp around pallas_calls ---------------------------------------

def _square_kernel(x_ref, y_ref):
    y_ref[...] = x_ref[...] * x_ref[...]


def _square_bwd_kernel(x_ref, g_ref, dx_ref):
    dx_ref[...] = 2.0 * x_ref[...] * g_ref[...]


def _call(kernel, like):
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(like.shape, jnp.float32))


@jax.custom_vjp
def _square(x):
    return _call(_square_kernel, x)(x)


def _square_fwd(x):
    return _square(x), x


def _square_bwd(x, g):
    return (_call(_square_bwd_kernel, x)(x, g),)


_square.defvjp(_square_fwd, _square_bwd)


def test_custom_vjp_around_kernels_in_a_loss():
    """The forward kernel's result feeds host code; grad runs the backward
    kernel with the host's cotangent (d/dx sum(sin(x^2)) = 2x cos(x^2))."""
    g = jax.grad(lambda x: jnp.sum(jnp.sin(_square(x))))(_X)
    np.testing.assert_allclose(g, 2 * _X * np.cos(_X * _X), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_square(_X), _X * _X, rtol=1e-6)	# undifferentiated


def test_custom_vjp_nondiff_argnums_and_keywords():
    @jax.custom_vjp
    def scale(x, k):
        return x * k

    def fwd(x, k):
        return x * k, k

    def bwd(k, g):
        return g * k * 10.0, None	# a marked rule: not the true derivative
    scale.defvjp(fwd, bwd)
    g = jax.grad(lambda x: jnp.sum(scale(x, k=3.0)))(_X)
    np.testing.assert_allclose(g, np.full_like(_X, 30.0))

    @jax.custom_vjp
    def f(n, x):
        return x * n

    f2 = jax.custom_vjp(lambda n, x: x * n, nondiff_argnums=(0,))
    f2.defvjp(lambda n, x: (x * n, None), lambda n, res, g: (g * n * 2,))
    np.testing.assert_allclose(jax.grad(lambda x: jnp.sum(f2(4.0, x)))(_X), 8.0)


# --- refusals -------------------------------------------------------------

def test_pallas_call_without_custom_vjp_is_refused():
    with pytest.raises(TypeError, match="pl.pallas_call.*jax.custom_vjp"):
        jax.grad(lambda x: jnp.sum(_call(_square_kernel, x)(x)))(_X)


def test_function_without_a_rule_is_refused_by_name():
    with pytest.raises(TypeError, match="jnp.cumsum has no derivative rule"):
        jax.grad(lambda x: jnp.sum(jnp.cumsum(x, axis=1)))(_X)


def test_grad_needs_float_input_and_scalar_output():
    with pytest.raises(TypeError, match="real- or complex-valued inputs"):
        jax.grad(lambda x: jnp.sum(x))(np.arange(4, dtype=np.int32))
    with pytest.raises(TypeError, match="scalar output"):
        jax.grad(lambda x: x * 2.0)(_X)


def test_custom_vjp_bwd_of_the_wrong_arity_is_refused():
    @jax.custom_vjp
    def f(x, y):
        return x * y
    f.defvjp(lambda x, y: (x * y, (x, y)), lambda res, g: (g * res[1],))
    with pytest.raises(TypeError, match="one cotangent per differentiable argument"):
        jax.grad(lambda x: jnp.sum(f(x, _POS)))(_X)
