# SPDX-License-Identifier: MIT
"""The jnp, lax and jax.nn functions a kernel gets as compositions of the
device's ops (tpuemu/_composite.py, nn.py), each in a kernel against
NumPy's float64 answer rounded to float32, over ordinary values and the
special ones (signed zeros, infinities, NaN, the far ends); the scans,
products and the rest against NumPy exactly where integers make it
exact. jax.nn on the host too."""
import math

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl

RNG = np.random.default_rng(7)


def _values(lo, hi, specials=()):
    """(8, 128) float32: a spread over [lo, hi] (and its negation where lo
    is 0), the specials first."""
    n = 8 * 128 - len(specials)
    v = np.concatenate([np.asarray(specials, np.float32),
                        RNG.uniform(lo, hi, n).astype(np.float32)])
    return v.reshape(8, 128)


def _kernel1(fn, x, out_dtype=jnp.float32):
    def k(x_ref, o_ref):
        o_ref[...] = fn(x_ref[...]).astype(out_dtype)
    return np.asarray(pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, out_dtype))(x))


def _kernel2(fn, x, y):
    def k(x_ref, y_ref, o_ref):
        o_ref[...] = fn(x_ref[...], y_ref[...])
    return np.asarray(pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(x, y))


def _close(got, want, ulps=4, atol=0.0):
    want = np.asarray(want, np.float64)
    with np.errstate(all="ignore"):
        tol = ulps * np.spacing(np.abs(want).astype(np.float32)).astype(np.float64) + atol
        bad = ~((got == want) | (np.abs(got - want) <= tol) | (np.isnan(got) & np.isnan(want)))
    assert not bad.any(), "at %s: got %r, want %r" % (
        np.argwhere(bad)[:3].tolist(), got[bad][:3], want[bad][:3])


SPECIAL = (0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 3e38, -3e38)

UNARY = [
    # name, kernel fn, NumPy float64 fn, domain (lo, hi), ulps, atol
    ("arctan", jnp.arctan, np.arctan, (-50, 50), 3, 0),
    ("atan", lax.atan, np.arctan, (-2, 2), 3, 0),
    ("arcsin", jnp.arcsin, np.arcsin, (-1, 1), 4, 0),
    ("arccos", jnp.arccos, np.arccos, (-1, 1), 4, 1e-7),
    ("sinh", jnp.sinh, np.sinh, (-80, 80), 4, 0),
    ("cosh", jnp.cosh, np.cosh, (-80, 80), 4, 0),
    ("arcsinh", jnp.arcsinh, np.arcsinh, (-1e4, 1e4), 4, 0),
    ("arccosh", jnp.arccosh, np.arccosh, (1, 1e4), 4, 0),
    ("arctanh", jnp.arctanh, np.arctanh, (-0.999, 0.999), 4, 0),
    ("expm1", jnp.expm1, np.expm1, (-20, 20), 4, 0),
    ("expm1_small", jnp.expm1, np.expm1, (-1e-4, 1e-4), 4, 0),
    ("cbrt", jnp.cbrt, np.cbrt, (-1e6, 1e6), 2, 0),
    ("log2", jnp.log2, np.log2, (1e-30, 1e30), 3, 0),
    ("log10", jnp.log10, np.log10, (1e-30, 1e30), 3, 0),
    ("trunc", jnp.trunc, np.trunc, (-100, 100), 0, 0),
    ("sinc", jnp.sinc, np.sinc, (-10, 10), 8, 2e-7),
    ("deg2rad", jnp.deg2rad, np.deg2rad, (-720, 720), 1, 0),
    ("rad2deg", jnp.rad2deg, np.rad2deg, (-7, 7), 1, 0),
    ("fabs", jnp.fabs, np.fabs, (-5, 5), 0, 0),
]


@pytest.mark.parametrize("name, fn, ref, dom, ulps, atol", UNARY, ids=[u[0] for u in UNARY])
def test_unary_against_numpy(name, fn, ref, dom, ulps, atol):
    x = _values(*dom, specials=SPECIAL)
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64)).astype(np.float32)
    _close(_kernel1(fn, x), want, ulps, atol)


BINARY = [
    ("arctan2", jnp.arctan2, np.arctan2, 3),
    ("atan2", lax.atan2, np.arctan2, 3),
    ("hypot", jnp.hypot, np.hypot, 2),
    ("logaddexp", jnp.logaddexp, np.logaddexp, 3),
    ("logaddexp2", jnp.logaddexp2, np.logaddexp2, 3),
    ("copysign", jnp.copysign, np.copysign, 0),
    ("fmax", jnp.fmax, np.fmax, 0),
    ("fmin", jnp.fmin, np.fmin, 0),
    ("heaviside", jnp.heaviside, np.heaviside, 0),
]


@pytest.mark.parametrize("name, fn, ref, ulps", BINARY, ids=[b[0] for b in BINARY])
def test_binary_against_numpy(name, fn, ref, ulps):
    x = _values(-30, 30, specials=SPECIAL + (0.0, -0.0, np.inf, 2.0))
    y = _values(-30, 30, specials=(0.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 2.0, 5.0, -1.0) +
                (-0.0, 0.0, -np.inf, 2.0))
    with np.errstate(all="ignore"):
        want = ref(x.astype(np.float64), y.astype(np.float64)).astype(np.float32)
    _close(_kernel2(fn, x, y), want, ulps)


def test_ldexp_signbit_nan_to_num_logical_xor():
    x = _values(-3, 3, specials=SPECIAL)
    e = RNG.integers(-140, 140, x.shape).astype(np.int32)

    def k(x_ref, e_ref, o_ref, s_ref, n_ref, l_ref):
        v = x_ref[...]
        o_ref[...] = jnp.ldexp(v, e_ref[...])
        s_ref[...] = jnp.signbit(v).astype(jnp.int32)
        n_ref[...] = jnp.nan_to_num(v, nan=-7.0)
        l_ref[...] = jnp.logical_xor(v > 0, v > 1).astype(jnp.int32)

    f32, i32 = (jax.ShapeDtypeStruct(x.shape, d) for d in (jnp.float32, jnp.int32))
    o, s, n, lx = pl.pallas_call(k, out_shape=(f32, i32, f32, i32))(x, e)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(np.asarray(o), np.ldexp(x, e))
    np.testing.assert_array_equal(np.asarray(s), np.signbit(x).astype(np.int32))
    np.testing.assert_array_equal(np.asarray(n), np.nan_to_num(x, nan=-7.0))
    np.testing.assert_array_equal(np.asarray(lx), np.logical_xor(x > 0, x > 1).astype(np.int32))


SCANS = [("cumsum", jnp.cumsum, np.cumsum), ("cumprod", jnp.cumprod, np.cumprod)]


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("name, fn, ref", SCANS, ids=[s[0] for s in SCANS])
def test_scans_of_integers_are_exact(name, fn, ref, axis):
    x = RNG.integers(-3, 4, (16, 128)).astype(np.int32)
    got = _kernel1(lambda v: fn(v, axis=axis), x, jnp.int32)
    np.testing.assert_array_equal(got, ref(x, axis=axis).astype(np.int32))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_lax_cumulative_ops(axis, reverse):
    x = RNG.integers(-50, 50, (8, 128)).astype(np.int32)

    def k(x_ref, s_ref, mx_ref, mn_ref):
        v = x_ref[...]
        s_ref[...] = lax.cumsum(v, axis=axis, reverse=reverse)
        mx_ref[...] = lax.cummax(v, axis=axis, reverse=reverse)
        mn_ref[...] = lax.cummin(v, axis=axis, reverse=reverse)

    i32 = jax.ShapeDtypeStruct(x.shape, jnp.int32)
    s, mx, mn = pl.pallas_call(k, out_shape=(i32, i32, i32))(x)
    f = (lambda a: np.flip(a, axis)) if reverse else (lambda a: a)
    np.testing.assert_array_equal(np.asarray(s), f(np.cumsum(f(x), axis)))
    np.testing.assert_array_equal(np.asarray(mx), f(np.maximum.accumulate(f(x), axis)))
    np.testing.assert_array_equal(np.asarray(mn), f(np.minimum.accumulate(f(x), axis)))
    # and on the host, as lax's
    np.testing.assert_array_equal(lax.cumsum(x, axis=axis, reverse=reverse),
                                  f(np.cumsum(f(x), axis)))


def test_cumsum_of_floats_and_of_a_row():
    x = RNG.standard_normal((8, 128)).astype(np.float32)
    got = _kernel1(lambda v: jnp.cumsum(v, axis=1), x)
    np.testing.assert_allclose(got, np.cumsum(x.astype(np.float64), 1), rtol=1e-5, atol=1e-5)
    r = RNG.integers(0, 9, (1, 256)).astype(np.int32)

    def k(x_ref, o_ref):
        o_ref[...] = jnp.cumsum(x_ref[0]).reshape(1, 256)

    got = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(r.shape, jnp.int32))(r)
    np.testing.assert_array_equal(np.asarray(got), np.cumsum(r).reshape(1, 256))


def test_cumsum_of_int8_widens_to_int32():
    x = np.full((8, 128), 100, np.int8)

    def k(x_ref, o_ref):
        o_ref[...] = jnp.cumsum(x_ref[...], axis=1)

    got = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.int32))(x)
    np.testing.assert_array_equal(np.asarray(got), np.cumsum(x.astype(np.int32), 1))


@pytest.mark.parametrize("axis, keepdims", [(1, False), (0, True), (-1, True), (None, False),
                                            ((0, 1), True)])
def test_prod(axis, keepdims):
    x = RNG.integers(-2, 3, (8, 100)).astype(np.int32)	# 100: padded to 128
    want = np.prod(x, axis=axis, keepdims=keepdims).astype(np.int32)

    def k(x_ref, o_ref):
        o_ref[...] = jnp.reshape(jnp.prod(x_ref[...], axis=axis, keepdims=keepdims),
                                 o_ref.shape)

    shape = want.shape if want.ndim == 2 else (1, max(want.size, 1))
    got = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(shape, jnp.int32))(x)
    np.testing.assert_array_equal(np.asarray(got).reshape(want.shape), want)


@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("axis", [0, 1])
def test_var_and_std(axis, ddof):
    x = (RNG.standard_normal((8, 128)) * 3 + 1).astype(np.float32)

    def k(x_ref, v_ref, s_ref):
        v = x_ref[...]
        v_ref[...] = jnp.var(v, axis=axis, ddof=ddof, keepdims=True) + v * 0
        s_ref[...] = v.std(axis=axis, ddof=ddof, keepdims=True) + v * 0

    f32 = jax.ShapeDtypeStruct(x.shape, jnp.float32)
    var, std = pl.pallas_call(k, out_shape=(f32, f32))(x)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(np.asarray(var), np.broadcast_to(
        np.var(x64, axis=axis, ddof=ddof, keepdims=True), x.shape), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(std), np.broadcast_to(
        np.std(x64, axis=axis, ddof=ddof, keepdims=True), x.shape), rtol=1e-5)


@pytest.mark.parametrize("k_", [0, 1, -2, 200])
def test_tril_triu(k_):
    x = RNG.standard_normal((16, 128)).astype(np.float32)

    def k(x_ref, lo_ref, up_ref):
        lo_ref[...] = jnp.tril(x_ref[...], k_)
        up_ref[...] = jnp.triu(x_ref[...], k=k_)

    f32 = jax.ShapeDtypeStruct(x.shape, jnp.float32)
    lo, up = pl.pallas_call(k, out_shape=(f32, f32))(x)
    np.testing.assert_array_equal(np.asarray(lo), np.tril(x, k_))
    np.testing.assert_array_equal(np.asarray(up), np.triu(x, k_))


def test_flip_rev_and_repeat():
    x = RNG.standard_normal((8, 128)).astype(np.float32)

    def k(x_ref, f_ref, u_ref, b_ref, r_ref, c_ref):
        v = x_ref[...]
        f_ref[...] = jnp.flip(v, axis=1)
        u_ref[...] = jnp.flipud(v)
        b_ref[...] = lax.rev(v, (0, 1))
        r_ref[...] = jnp.repeat(v[:, :64], 2, axis=1)
        c_ref[...] = v[:4].repeat(2, axis=0)

    f32 = jax.ShapeDtypeStruct(x.shape, jnp.float32)
    f, u, b, r, c = pl.pallas_call(k, out_shape=(f32,) * 5)(x)
    np.testing.assert_array_equal(np.asarray(f), x[:, ::-1])
    np.testing.assert_array_equal(np.asarray(u), x[::-1])
    np.testing.assert_array_equal(np.asarray(b), x[::-1, ::-1])
    np.testing.assert_array_equal(np.asarray(r), np.repeat(x[:, :64], 2, axis=1))
    np.testing.assert_array_equal(np.asarray(c), np.repeat(x[:4], 2, axis=0))


def _sigmoid64(x):
    return 1 / (1 + np.exp(-x))


def _softplus64(x):
    return np.logaddexp(x, 0)


NN = [
    ("relu6", lambda x: jax.nn.relu6(x), lambda x: np.clip(x, 0, 6)),
    ("hard_tanh", jax.nn.hard_tanh, lambda x: np.clip(x, -1, 1)),
    ("hard_sigmoid", jax.nn.hard_sigmoid, lambda x: np.clip(x + 3, 0, 6) / 6),
    ("hard_silu", jax.nn.hard_silu, lambda x: x * np.clip(x + 3, 0, 6) / 6),
    ("leaky_relu", jax.nn.leaky_relu, lambda x: np.where(x >= 0, x, 0.01 * x)),
    ("elu", jax.nn.elu, lambda x: np.where(x > 0, x, np.expm1(x))),
    ("celu", lambda x: jax.nn.celu(x, 0.5),
     lambda x: np.maximum(x, 0) + 0.5 * np.expm1(np.minimum(x, 0) / 0.5)),
    ("selu", jax.nn.selu, lambda x: 1.0507009873554805 * np.where(
        x > 0, x, 1.6732632423543772 * np.expm1(x))),
    ("softplus", jax.nn.softplus, _softplus64),
    ("log_sigmoid", jax.nn.log_sigmoid, lambda x: -_softplus64(-x)),
    ("squareplus", jax.nn.squareplus, lambda x: (x + np.sqrt(x * x + 4)) / 2),
    ("mish", jax.nn.mish, lambda x: x * np.tanh(_softplus64(x))),
    ("sigmoid", jax.nn.sigmoid, _sigmoid64),
    ("silu", jax.nn.silu, lambda x: x * _sigmoid64(x)),
    ("relu", jax.nn.relu, lambda x: np.maximum(x, 0)),
    ("gelu", jax.nn.gelu, lambda x: 0.5 * x * (1 + np.tanh(
        math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    ("gelu_exact", lambda x: jax.nn.gelu(x, approximate=False),
     lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))),
]


@pytest.mark.parametrize("where", ["kernel", "host"])
@pytest.mark.parametrize("name, fn, ref", NN, ids=[n[0] for n in NN])
def test_nn_activations(name, fn, ref, where):
    x = _values(-8, 8, specials=(0.0, -3.0, 3.0, 6.0, -1e-3))
    want = ref(x.astype(np.float64))
    got = _kernel1(fn, x) if where == "kernel" else np.asarray(fn(x))
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("where", ["kernel", "host"])
def test_nn_reductions(where):
    x = RNG.standard_normal((8, 128)).astype(np.float32) * 4

    def fns(v):
        return (jax.nn.logsumexp(v, axis=-1, keepdims=True) + v * 0,
                jax.nn.softmax(v, axis=0),
                jax.nn.log_softmax(v, axis=-1),
                jax.nn.standardize(v, axis=-1),
                jnp.concatenate([jax.nn.glu(v, axis=-1)] * 2, axis=1))

    if where == "kernel":
        def k(x_ref, *outs):
            for o, r in zip(outs, fns(x_ref[...])):
                o[...] = r
        got = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct(x.shape, jnp.float32),) * 5)(x)
    else:
        got = fns(x)
    x64 = x.astype(np.float64)
    lse = np.log(np.exp(x64).sum(-1, keepdims=True))
    sm0 = np.exp(x64) / np.exp(x64).sum(0, keepdims=True)
    std = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-5)
    glu = x64[:, :64] * _sigmoid64(x64[:, 64:])
    for g, w in zip(got, (lse + x64 * 0, sm0, x64 - lse, std, np.concatenate([glu] * 2, 1))):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-5)


def test_one_hot_in_a_kernel_and_on_the_host():
    labels = RNG.integers(0, 128, (8,)).astype(np.int32)
    want = (labels[:, None] == np.arange(128)).astype(np.float32)

    def k(l_ref, o_ref):
        o_ref[...] = jax.nn.one_hot(l_ref[0], 128)

    got = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(
        labels.reshape(1, 8))
    np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(jax.nn.one_hot(labels, 128)), want)


def test_host_functions_are_numpys():
    x = np.linspace(-0.9, 0.9, 7).astype(np.float32)
    np.testing.assert_allclose(jnp.arcsin(x), np.arcsin(x))
    np.testing.assert_allclose(jnp.atanh(x), np.arctanh(x))
    np.testing.assert_array_equal(jnp.cumulative_sum(np.arange(5)), np.cumsum(np.arange(5)))
    np.testing.assert_array_equal(lax.rev(np.arange(4), (0,)), np.arange(4)[::-1])


def test_slices_of_a_1d_value():
    """A 1-D value is a row on the device: v[a:b] slices its lanes, of a
    whole read, of a read bound before a store, and of a computed value
    (they were refused as rows out of the value's one)."""
    from tpuemu.pallas import tpu as pltpu
    x = np.arange(128, dtype=np.float32)

    def k(x_ref, o_ref, s_ref):
        s_ref[...] = x_ref[...]
        v = s_ref[...]
        s_ref[...] = jnp.zeros_like(s_ref)	# v keeps what it read
        w = x_ref[...] * 3
        o_ref[...] = x_ref[...][64:72] + v[3:11] * 2 + s_ref[...][:8] + w[120:]

    got = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((8,), jnp.float32),
                         scratch_shapes=[pltpu.VMEM((128,), jnp.float32)])(x)
    np.testing.assert_array_equal(got, x[64:72] + x[3:11] * 2 + x[120:] * 3)


def test_rolls_and_flips_of_a_1d_value():
    """A 1-D value is a row on the device: jnp.roll and pltpu.roll along
    its axis 0 once rolled the row dimension (nothing moved)."""
    from tpuemu.pallas import tpu as pltpu
    r = np.arange(256, dtype=np.int32).reshape(1, 256)
    cases = [(lambda v: jnp.roll(v, 3, axis=0), np.roll(r[0], 3)),
             (lambda v: pltpu.roll(v, 5, 0), np.roll(r[0], 5)),
             (lambda v: jnp.flip(v), r[0, ::-1]),
             (lambda v: jnp.cumsum(v), np.cumsum(r[0]))]
    for fn, want in cases:
        def k(x_ref, o_ref):
            o_ref[...] = fn(x_ref[0]).reshape(1, 256)
        got = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(r.shape, jnp.int32))(r)
        np.testing.assert_array_equal(np.asarray(got)[0], want)


def _kernel_shape(fn, x, out_shape, out_dtype):
    def k(x_ref, o_ref):
        o_ref[...] = fn(x_ref[...])
    return np.asarray(pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(out_shape, out_dtype))(x))


@pytest.mark.parametrize("offset", [0, 3, -5, 200, -20])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, "bool"])
def test_diagonal_offsets_and_dtypes(offset, dtype):
    """jnp.diagonal(v, offset) of a (24, 256) value, exact: floats keep
    -0.0, infinities and NaN, integers their lowest value, bools their
    truth (an empty diagonal is left out: no 0-length values)."""
    x = RNG.standard_normal((24, 256)).astype(np.float32)
    if dtype == np.float32:
        x[0, 0], x[1, 1], x[2, 2], x[3, 3] = -0.0, -np.inf, np.nan, np.inf
        x[4, 7], x[9, 4] = np.nan, -0.0
        xin, od = x, jnp.float32
    elif dtype == np.int32:
        x = RNG.integers(-2 ** 31, 2 ** 31, (24, 256)).astype(np.int32)
        x[5, 5] = x[10, 13] = -2 ** 31
        xin, od = x, jnp.int32
    else:
        x = x > 0
        xin, od = x.astype(np.int32), jnp.int32
    want = np.diagonal(x, offset)

    def fn(v):
        v = v.astype(jnp.bool_) if dtype == "bool" else v
        d = jnp.diagonal(v, offset)
        return d.astype(jnp.int32) if dtype == "bool" else d
    out = _kernel_shape(fn, xin, want.shape, od)
    if dtype == np.float32:
        np.testing.assert_array_equal(np.signbit(out), np.signbit(want))
    np.testing.assert_array_equal(out, want.astype(out.dtype))


@pytest.mark.parametrize("mode", ["constant", "wrap"])
@pytest.mark.parametrize("widths", [((3, 0), (0, 0)), ((0, 0), (1, 130)), ((9, 20), (300, 2)),
                                    2, ((1,), (2,))], ids=str)
def test_pad_widths_and_values(widths, mode):
    """jnp.pad of a (5, 128) int32 value: per-axis, scalar and broadcast
    widths, wrap past the axis's length, constant_values. The wrap
    reference is periodic, as jnp.pad and NumPy 2 (NumPy 1.24's np.pad
    repeats an edge oddly for widths past the length)."""
    x = np.arange(5 * 128, dtype=np.int32).reshape(5, 128) - 300
    kw = {"constant_values": -7} if mode == "constant" else {}
    if mode == "wrap":
        w = np.broadcast_to(np.asarray(widths), (2, 2))
        want = x
        for axis, (lo, hi) in enumerate(w.tolist()):
            n = x.shape[axis]
            want = np.take(want, np.arange(-lo, n + hi) % n, axis=axis)
    else:
        want = np.pad(x, widths, mode=mode, **kw)
    out = _kernel_shape(lambda v: jnp.pad(v, widths, mode=mode, **kw), x, want.shape, jnp.int32)
    np.testing.assert_array_equal(out, want)


# --- comparisons, counts and shapes: isclose, count_nonzero, diff, outer,
# split, squeeze, eye, linalg.norm, ldexp of a Python int ---

def _run(fn, out_shape, *args, dtype=jnp.float32):
    def k(*refs):
        refs[-1][...] = fn(*[r[...] for r in refs[:-1]]).astype(dtype)
    return np.asarray(pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(out_shape, dtype))(*args))


def test_isclose_and_count_nonzero():
    a = _values(-2, 2, [np.inf, -np.inf, np.nan, np.nan, 1.0, 0.0])
    b = a + RNG.choice([0.0, 1e-6, 1e-3], a.shape).astype(np.float32)
    b.reshape(-1)[:6] = [np.inf, np.inf, np.nan, 1.0, 1.0 + 1e-6, 1e-9]
    for equal_nan in (False, True):
        got = _run(lambda x, y: jnp.isclose(x, y, equal_nan=equal_nan), a.shape, a, b,
                   dtype=jnp.int32)
        np.testing.assert_array_equal(got, np.isclose(a, b, equal_nan=equal_nan))
    got = _run(lambda x: jnp.count_nonzero(x > 0, axis=1, keepdims=True) + 0 * x.astype(
        jnp.int32), a.shape, a, dtype=jnp.int32)
    np.testing.assert_array_equal(got[:, 0], np.count_nonzero(a > 0, axis=1))


@pytest.mark.parametrize("n,axis", [(1, -1), (2, 1), (1, 0), (3, 0)])
def test_diff(n, axis):
    x = np.round(_values(-50, 50)).astype(np.float32)
    want = np.diff(x, n=n, axis=axis)
    np.testing.assert_array_equal(_run(lambda v: jnp.diff(v, n=n, axis=axis), want.shape, x),
                                  want)


def test_outer_split_squeeze_eye():
    x = np.round(_values(-9, 9)).astype(np.float32)
    np.testing.assert_array_equal(_run(lambda v: jnp.outer(v[0, :8], v[1]), (8, 128), x),
                                  np.outer(x[0, :8], x[1]))
    got = _run(lambda v: jnp.concatenate(jnp.split(v, 4, axis=1)[::-1], axis=1), x.shape, x)
    np.testing.assert_array_equal(got, np.concatenate(np.split(x, 4, axis=1)[::-1], axis=1))
    got = _run(lambda v: jnp.concatenate(jnp.split(v, [2, 5], axis=0)[::-1], axis=0),
               x.shape, x)
    np.testing.assert_array_equal(got, np.concatenate(np.split(x, [2, 5])[::-1]))
    np.testing.assert_array_equal(_run(lambda v: jnp.squeeze(v[None, :, None, :]), x.shape, x),
                                  x)
    with pytest.raises(ValueError, match="size not equal to one"):
        _run(lambda v: jnp.squeeze(v, axis=0), x.shape, x)
    for k in (0, 3, -2):
        np.testing.assert_array_equal(_run(lambda v: jnp.eye(8, 128, k) * v, x.shape, x),
                                      np.eye(8, 128, k, dtype=np.float32) * x)


@pytest.mark.parametrize("ord", [None, 1, 2, np.inf, -np.inf, 0, 3])
def test_linalg_norm_along_an_axis(ord):
    x = _values(-3, 3)
    want = np.linalg.norm(x.astype(np.float64), ord=ord, axis=1, keepdims=True)
    got = _run(lambda v: jnp.linalg.norm(v, ord=ord, axis=1, keepdims=True) + 0 * v, x.shape, x)
    _close(got[:, :1], want.astype(np.float32), ulps=16)
    assert jnp.linalg.norm(np.array([3.0, 4.0])) == 5.0		# the host's


def test_frobenius_norm_and_ldexp_of_an_int():
    x = _values(-3, 3)
    got = _run(lambda v: jnp.linalg.norm(v) + 0 * v, x.shape, x)
    _close(got[0, :1], [np.linalg.norm(x.astype(np.float64))], ulps=64)
    np.testing.assert_array_equal(_run(lambda v: jnp.ldexp(v, 3), x.shape, x), np.ldexp(x, 3))
