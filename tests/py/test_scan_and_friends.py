# SPDX-License-Identifier: MIT
"""lax.scan, lax.map and lax.associative_scan in kernel bodies (scan and
map unrolled while tracing, a long carry-only scan a device loop;
associative_scan by doubling, its function applied in order), on the
host against NumPy; jax.debug.print, jax.tree and
jax.ensure_compile_time_eval."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl

X = np.arange(16 * 128, dtype=np.float32).reshape(16, 128) % 97 - 40


def _run(kernel, out_shape=(16, 128), x=X):
    return np.asarray(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(
        out_shape, jnp.float32))(x))


def test_scan_over_an_arange_and_over_rows():
    def kernel(x_ref, o_ref):
        def add_block(c, i):
            return c + x_ref[pl.ds(i * 8, 8), :], None
        c, _ = lax.scan(add_block, jnp.zeros((8, 128), jnp.float32), jnp.arange(2))

        def running(c, row):
            return c + row, c * row
        last, ys = lax.scan(running, jnp.ones((128,), jnp.float32), x_ref[0:8], reverse=True)
        o_ref[0:8] = c
        o_ref[8:16] = ys + last
    out = _run(kernel)
    np.testing.assert_array_equal(out[:8], X[:8] + X[8:])
    c, ys = np.ones(128, np.float32), [None] * 8
    for i in reversed(range(8)):
        c, ys[i] = c + X[i], c * X[i]
    np.testing.assert_array_equal(out[8:], np.stack(ys) + c)


def test_long_carry_only_scan_is_a_device_loop():
    def kernel(x_ref, o_ref):
        c, ys = lax.scan(lambda c, _: (c * 0.5 + 1.0, None), x_ref[...], None, length=40)
        assert ys is None
        o_ref[...] = c
    want = X.copy()
    for _ in range(40):
        want = want * np.float32(0.5) + np.float32(1)
    np.testing.assert_allclose(_run(kernel), want, rtol=1e-6)

    def long_xs(x_ref, o_ref):
        o_ref[...] = lax.scan(lambda c, r: (c + r, None), x_ref[0], x_ref[...])[0] + x_ref[...]
    with pytest.raises(pl.TraceError, match="over xs of 32 trips"):
        _run_long(long_xs)


def _run_long(kernel):
    x = np.zeros((32, 128), np.float32)
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(x)


def _last_nonzero(a, b):
    return jnp.where(b != 0, b, a)


@pytest.mark.parametrize("reverse", [False, True])
def test_associative_scan_in_order(reverse):
    """Sums and a non-commutative (but associative) op, the last non-zero
    so far, along rows and columns; on the host the same."""
    sparse = np.where(X % 7 == 0, X, 0).astype(np.float32)

    def kernel(x_ref, s_ref, o_ref, p_ref):
        o_ref[...] = lax.associative_scan(jnp.add, x_ref[...], reverse=reverse, axis=1)
        p_ref[...] = lax.associative_scan(_last_nonzero, s_ref[...], reverse=reverse, axis=0)
    o, p = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct(X.shape, jnp.float32),) * 2)(
        X, sparse)
    flip = (lambda a, ax: np.flip(a, ax)) if reverse else (lambda a, ax: a)
    np.testing.assert_allclose(o, flip(np.cumsum(flip(X, 1), axis=1), 1), rtol=1e-6)
    want = flip(sparse, 0).copy()
    for i in range(1, 16):
        want[i] = np.where(want[i] != 0, want[i], want[i - 1])
    np.testing.assert_array_equal(p, flip(want, 0))
    np.testing.assert_array_equal(lax.associative_scan(np.add, X[0], reverse=reverse),
                                  flip(np.cumsum(flip(X[0], 0)), 0))


def test_map_debug_print_tree_and_compile_time_eval(capfd):
    def kernel(x_ref, o_ref):
        with jax.ensure_compile_time_eval():
            scale = 3
        rows = lax.map(lambda r: r * scale, x_ref[...].reshape(2, 8, 128))
        o_ref[...] = jax.tree.map(lambda a: a + 1, {"r": rows.reshape(16, 128)})["r"]
        jax.debug.print("first {}", x_ref[0, 0].astype(jnp.int32) * 0 + 7)
    out = _run(kernel)
    np.testing.assert_array_equal(out, X * 3 + 1)
    printed = capfd.readouterr()
    assert "first 7" in printed.out + printed.err	# the device's log: pl.debug_print's
    np.testing.assert_array_equal(lax.map(lambda r: r * 2, X[:2]), X[:2] * 2)
    assert jax.tree.leaves({"a": 1, "b": (2, 3)}) == [1, 2, 3]
    jax.debug.print("host {x}", x=5)
    assert "host 5" in capfd.readouterr().out


def test_vmap_of_values_in_a_kernel():
    """jax.vmap of a function of values in a kernel body: once per row,
    stacked; an unmapped argument passed whole; more than 16 refused."""
    def kernel(x_ref, o_ref):
        v = x_ref[0:8]
        norm = jax.vmap(lambda r, s: r / (jnp.max(jnp.abs(r)) + s), in_axes=(0, None))(v, 1.0)
        o_ref[0:8] = norm
        o_ref[8:16] = jax.vmap(lambda r: r * 2, out_axes=0)(x_ref[8:16])
    out = _run(kernel)
    np.testing.assert_allclose(out[:8], X[:8] / (np.abs(X[:8]).max(axis=1, keepdims=True) + 1),
                               rtol=1e-6)
    np.testing.assert_array_equal(out[8:], X[8:] * 2)

    def too_many(x_ref, o_ref):
        o_ref[...] = jax.vmap(lambda r: r + 1)(x_ref[...].reshape(32, 64)).reshape(16, 128)
    with pytest.raises(pl.TraceError, match="unrolled up to 16"):
        _run(too_many)


def test_scipy_special_in_kernels_and_on_the_host():
    x = np.linspace(-3, 3, 8 * 128, dtype=np.float32).reshape(8, 128)
    p = np.linspace(0.01, 0.99, 8 * 128, dtype=np.float32).reshape(8, 128)
    sp = jax.scipy.special

    def kernel(x_ref, p_ref, a_ref, b_ref, c_ref, d_ref):
        a_ref[...] = sp.erfc(x_ref[...])
        b_ref[...] = sp.logit(p_ref[...])
        c_ref[...] = sp.logsumexp(x_ref[...], axis=-1, keepdims=True) + 0 * x_ref[...]
        d_ref[...] = sp.xlogy(jnp.where(x_ref[...] > 0, x_ref[...], 0.0), p_ref[...])
    a, b, c, d = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct(x.shape, jnp.float32),) * 4)(x, p)
    import math
    erfc = np.vectorize(math.erfc)(x.astype(np.float64))
    np.testing.assert_allclose(a, erfc, atol=2e-6)
    np.testing.assert_allclose(b, np.log(p / (1 - p)), rtol=1e-5, atol=1e-6)
    lse = np.log(np.exp(x.astype(np.float64)).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(c[:, :1], lse, rtol=1e-6)
    np.testing.assert_allclose(d, np.where(x > 0, x * np.log(p), 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(sp.logsumexp(x, axis=-1, keepdims=True)), lse,
                               rtol=1e-6)
    np.testing.assert_allclose(np.asarray(sp.expit(x)), 1 / (1 + np.exp(-x)), rtol=1e-6)
