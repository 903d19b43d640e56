# SPDX-License-Identifier: MIT
"""The rest of the JAX surface kernels in JAX's docs and tests use: jnp.zeros,
ones, full, broadcast_to; lax's element-wise functions, select, clamp,
cond and while_loop; pl.loop, pl.dot, pl.multiple_of, pl.cdiv; static
slices of refs; pltpu.run_scoped; integer // and % as Python floors them;
jnp.mean and reductions as methods, jax.nn.softmax, dtypes called; sin,
cos, erf and the exact gelu."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def _x(shape=(8, 128), seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _call(kernel, *args, out=None, **kw):
    out = out or jax.ShapeDtypeStruct(args[0].shape, args[0].dtype)
    return np.asarray(pl.pallas_call(kernel, out_shape=out, **kw)(*args))


# --- jnp constructors ---

def test_zeros_ones_full_and_their_dtypes():
    def k(x_ref, o_ref, i_ref):
        acc = jnp.zeros((8, 128), jnp.float32) + jnp.ones((8, 128))
        o_ref[...] = acc * jnp.full((8, 128), 3.0) + x_ref[...]
        i_ref[...] = jnp.full((8, 128), 7, jnp.int32) + jnp.zeros((8, 128), jnp.int32)

    x = _x()
    o, i = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((8, 128), np.float32),
                                        jax.ShapeDtypeStruct((8, 128), np.int32)))(x)
    np.testing.assert_allclose(np.asarray(o), x + 3.0, rtol=1e-6)
    assert np.asarray(i).dtype == np.int32 and (np.asarray(i) == 7).all()


def test_shapes_of_any_rank_are_viewed_2d_as_refs_are():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + jnp.ones((1, 8, 128)) + \
            jnp.full((128,), 2.0) + x_ref[...].reshape(1, 8, 128).reshape(-1, 128)

    x = _x()
    np.testing.assert_allclose(_call(k, x), x + 3.0 + x, rtol=1e-6)

    def bad(x_ref, o_ref):	# (8, 128) + (2, 8, 128) is (2, 8, 128), as in NumPy
        o_ref[...] = x_ref[...] + jnp.zeros((2, 8, 128))

    with pytest.raises(pl.TraceError, match=r"a value of shape \(16, 128\) stored into 'o_ref' "
                                            r"of shape \(8, 128\)"):
        _call(bad, x)

    def moved(x_ref, o_ref):	# rows split in two, then merged back: row-major
        o_ref[...] = x_ref[...].reshape(16, 64).reshape(8, 128)

    np.testing.assert_array_equal(_call(moved, x), x)


def test_broadcast_to_of_a_column_a_row_and_a_scalar():
    def k(c_ref, r_ref, o_ref):
        o_ref[...] = (jnp.broadcast_to(c_ref[...], (8, 128)) +
                      jnp.broadcast_to(r_ref[...], (8, 128)) * 2.0 +
                      jnp.broadcast_to(0.5, (8, 128)))

    c, r = _x((8, 1), 1), _x((1, 128), 2)
    got = _call(k, c, r, out=jax.ShapeDtypeStruct((8, 128), np.float32))
    np.testing.assert_allclose(got, c + r * 2.0 + 0.5, rtol=1e-6)


# --- lax ---

def test_lax_elementwise_functions():
    def k(x_ref, o_ref):
        x = x_ref[...]
        o_ref[...] = (lax.rsqrt(lax.abs(x) + 1.0) + lax.exp(lax.neg(x)) +
                      lax.logistic(x) + lax.max(x, 0.25) - lax.min(x, -0.25) +
                      lax.select(lax.gt(x, 0.0), x, lax.square(x)) +
                      lax.clamp(-0.5, x, 0.5))

    x = _x(seed=3)
    want = (1 / np.sqrt(np.abs(x) + 1) + np.exp(-x) + 1 / (1 + np.exp(-x)) +
            np.maximum(x, .25) - np.minimum(x, -.25) + np.where(x > 0, x, x * x) +
            np.clip(x, -.5, .5))
    np.testing.assert_allclose(_call(k, x), want, rtol=2e-5, atol=2e-6)


def test_cond_on_a_python_predicate_picks_a_branch():
    def k(x_ref, o_ref):
        o_ref[...] = lax.cond(x_ref.shape[0] == 8, lambda: x_ref[...] * 2.0,
                              lambda: x_ref[...])

    x = _x(seed=4)
    np.testing.assert_allclose(_call(k, x), x * 2.0)


def test_cond_on_a_traced_predicate_runs_each_branch_under_when():
    def k(x_ref, o_ref):
        def first():
            o_ref[...] = x_ref[...]

        def later():
            o_ref[...] = -x_ref[...]
        lax.cond(pl.program_id(0) == 0, first, later)

    x = _x((8, 128), 5)
    got = _call(k, x, out=jax.ShapeDtypeStruct((24, 128), np.float32), grid=(3,),
                in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
                out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)))
    np.testing.assert_array_equal(got, np.concatenate([x, -x, -x]))


def test_cond_branches_returning_different_structures_are_refused():
    def k(x_ref, o_ref):
        o_ref[...] = lax.cond(pl.program_id(0) == 0, lambda: x_ref[...],
                              lambda: (x_ref[...], -x_ref[...]))

    with pytest.raises(pl.TraceError, match="different structures"):
        _call(k, _x(), grid=(1,))


def test_while_loop_with_a_static_condition_unrolls():
    def k(x_ref, o_ref):
        n, acc = lax.while_loop(lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] + x_ref[...]),
                                (0, jnp.zeros((8, 128))))
        o_ref[...] = acc

    x = _x(seed=6)
    np.testing.assert_allclose(_call(k, x), x + x + x, rtol=1e-6)


def test_while_loop_with_a_traced_condition_runs_on_the_device():
    """The condition reads the carry's int (kept in SMEM) and a program
    id: a device while loop, (pid + 2) trips adding x each."""
    def k(x_ref, o_ref):
        _, acc = lax.while_loop(lambda s: s[0] < pl.program_id(0) + 2,
                                lambda s: (s[0] + 1, s[1] + x_ref[...]),
                                (0, jnp.zeros((8, 128), jnp.float32)))
        o_ref[...] = acc

    x = _x(seed=8)
    np.testing.assert_allclose(_call(k, x, grid=(1,)), 2 * x, rtol=1e-6)


def test_while_loop_whose_body_does_nothing_is_refused():
    def k(x_ref, o_ref):
        o_ref[...] = lax.while_loop(lambda v: pl.program_id(0) < 2, lambda v: v, x_ref[...])

    with pytest.raises(pl.TraceError, match="the body does nothing on the device"):
        _call(k, _x(), grid=(1,))


# --- pl helpers ---

def test_pl_loop_with_step_and_multiple_of():
    def k(x_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)

        @pl.loop(0, 32, step=8)
        def _(i):
            o_ref[...] += x_ref[pl.ds(pl.multiple_of(i, 8), 8), :]

    x = _x((32, 128), 7)
    got = _call(k, x, out=jax.ShapeDtypeStruct((8, 128), np.float32))
    np.testing.assert_allclose(got, x.reshape(4, 8, 128).sum(0), rtol=1e-5)
    assert pl.cdiv(1000, 128) == 8 and pl.cdiv(1024, 128) == 8


def test_pl_dot_transposes_either_operand():
    def k(a_ref, b_ref, o_ref, p_ref):
        o_ref[...] = pl.dot(a_ref[...], b_ref[...], trans_b=True)
        p_ref[...] = pl.dot(a_ref[...], b_ref[...], trans_a=True)

    a, b = _x((128, 128), 8), _x((128, 128), 9)
    o, p = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((128, 128), np.float32),) * 2)(a, b)
    np.testing.assert_allclose(np.asarray(o), a @ b.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(p), a.T @ b, rtol=1e-4, atol=1e-4)


def test_static_row_slices_read_as_pl_ds():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[8:16, :] + x_ref[-8:, ...] - x_ref[0:8]

    x = _x((32, 128), 10)
    got = _call(k, x, out=jax.ShapeDtypeStruct((8, 128), np.float32))
    np.testing.assert_allclose(got, x[8:16] + x[24:32] - x[0:8], rtol=1e-6)


def test_strided_slices_read_and_empty_ones_are_refused():
    def strided(x_ref, o_ref):
        o_ref[...] = x_ref[0:16:2, :]

    def empty(x_ref, o_ref):
        o_ref[...] = x_ref[8:8, :]

    x = _x((16, 128))
    out = _call(strided, x, out=jax.ShapeDtypeStruct((8, 128), np.float32))
    np.testing.assert_array_equal(out, x[0:16:2])
    with pytest.raises(pl.TraceError, match="empty"):
        _call(empty, _x((16, 128)), out=jax.ShapeDtypeStruct((8, 128), np.float32))


def test_pltpu_run_scoped_is_pl_run_scoped():
    def k(x_ref, o_ref):
        def body(buf):
            buf[...] = x_ref[...] + 1.0
            o_ref[...] = buf[...] * 2.0
        pltpu.run_scoped(body, pltpu.VMEM((8, 128), jnp.float32))

    x = _x(seed=11)
    np.testing.assert_allclose(_call(k, x), (x + 1.0) * 2.0, rtol=1e-6)


# --- integer division as Python and jnp floor it ---

@pytest.mark.parametrize("d", [3, -4, 7])
def test_integer_floor_division_and_modulo_by_a_constant(d):
    def k(x_ref, q_ref, r_ref):
        q_ref[...] = x_ref[...] // d
        r_ref[...] = x_ref[...] % d

    x = np.random.default_rng(12).integers(-1000, 1000, (8, 128), dtype=np.int32)
    q, r = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((8, 128), np.int32),) * 2)(x)
    np.testing.assert_array_equal(np.asarray(q), x // d)
    np.testing.assert_array_equal(np.asarray(r), x % d)


def test_integer_floor_division_of_arrays_and_of_a_constant_by_an_array():
    def k(x_ref, y_ref, q_ref, c_ref):
        q_ref[...] = x_ref[...] // y_ref[...]
        c_ref[...] = 7 // y_ref[...]

    rng = np.random.default_rng(13)
    x = rng.integers(-1000, 1000, (8, 128), dtype=np.int32)
    y = rng.integers(1, 50, (8, 128), dtype=np.int32) * rng.choice([-1, 1], (8, 128)).astype(np.int32)
    q, c = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((8, 128), np.int32),) * 2)(x, y)
    np.testing.assert_array_equal(np.asarray(q), x // y)
    np.testing.assert_array_equal(np.asarray(c), 7 // y)


# --- reductions as methods, mean, softmax, dtype calls ---

def test_layer_norm_with_mean_and_methods():
    def k(x_ref, o_ref):
        x = x_ref[...]
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
        o_ref[...] = (x - mu) * lax.rsqrt(var + 1e-5) + x.max(axis=1, keepdims=True) * 0.0

    x = _x((16, 256), 14)
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(_call(k, x), want, rtol=1e-4, atol=1e-5)


def test_mean_of_columns_and_of_integers_is_float():
    def k(x_ref, i_ref, o_ref, m_ref):
        o_ref[...] = jnp.mean(x_ref[...], axis=0, keepdims=True)
        m_ref[...] = i_ref[...].mean(axis=1, keepdims=True)

    x = _x((8, 128), 15)
    i = np.arange(8 * 128, dtype=np.int32).reshape(8, 128)
    o, m = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((1, 128), np.float32),
                                        jax.ShapeDtypeStruct((8, 1), np.float32)))(x, i)
    np.testing.assert_allclose(np.asarray(o), x.mean(0, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(m), i.mean(1, keepdims=True), rtol=1e-6)


def test_reductions_over_the_whole_array_broadcast_as_scalars():
    def k(x_ref, o_ref):
        x = x_ref[...]
        o_ref[...] = jnp.exp(x - jnp.max(x)) / x.sum() + jnp.mean(x)

    x = _x()
    np.testing.assert_allclose(np.asarray(_call(k, x)),
                               np.exp(x - x.max()) / x.sum() + x.mean(), rtol=1e-5)

    def arg(x_ref, o_ref):
        o_ref[...] = jnp.argmax(x_ref[...]) + x_ref[...]

    with pytest.raises(pl.TraceError, match="argmax over the whole array"):
        _call(arg, x)


def test_softmax_log_softmax_and_gelu():
    def k(x_ref, s_ref, l_ref, g_ref):
        s_ref[...] = jax.nn.softmax(x_ref[...], axis=-1)
        l_ref[...] = jax.nn.log_softmax(x_ref[...])
        g_ref[...] = jax.nn.gelu(x_ref[...])

    x = _x((8, 128), 16)
    s, lg, g = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((8, 128), np.float32),) * 3)(x)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(s), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(np.asarray(lg), np.log(e / e.sum(-1, keepdims=True)),
                               rtol=1e-4, atol=1e-5)
    tanh_gelu = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(np.asarray(g), tanh_gelu, rtol=1e-4, atol=1e-5)


def test_sin_cos_erf_and_exact_gelu():
    def k(x_ref, i_ref, t_ref, g_ref, e_ref):
        t_ref[...] = jnp.sin(x_ref[...]) * lax.cos(x_ref[...]) + lax.erf(x_ref[...])
        g_ref[...] = jax.nn.gelu(x_ref[...], approximate=False)
        e_ref[...] = jnp.sin(i_ref[...])	# of integers: float32, as jnp's

    import math
    x = _x((8, 128), 18) * 3
    i = np.arange(8 * 128, dtype=np.int32).reshape(8, 128) - 500
    t, g, e = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((8, 128), np.float32),) * 3)(x, i)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(np.asarray(t), np.sin(x) * np.cos(x) + erf(x), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(g), x * (1 + erf(x / np.sqrt(2))) / 2, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(e), np.sin(i.astype(np.float64)), rtol=1e-6, atol=1e-6)


def test_dtype_called_on_values_and_numbers():
    def k(x_ref, o_ref):
        o_ref[...] = jnp.float32(jnp.int32(x_ref[...] * 10.0)) * jnp.float32(0.5)

    x = _x(seed=17)
    np.testing.assert_allclose(_call(k, x), np.trunc(x * np.float32(10.0)) * 0.5)  # astype truncates


# --- column slices of refs in the body ---

def test_column_slices_read_and_store():
    def k(x_ref, o_ref):
        o_ref[:, 0:128] = x_ref[:, 128:256] * 2.0
        o_ref[:, 128:256] = x_ref[:, 0:128] + x_ref[:, 255:256]

    x = _x((16, 256), 19)
    got = _call(k, x)
    np.testing.assert_allclose(got[:, :128], x[:, 128:] * 2.0)
    np.testing.assert_allclose(got[:, 128:], x[:, :128] + x[:, 255:256], rtol=1e-6)


def test_heads_as_column_slices_of_one_block():
    heads, d = 2, 128

    def k(q_ref, k_ref, o_ref):
        for h in range(heads):
            cols = pl.ds(h * d, d)
            s = lax.dot_general(q_ref[:, cols], k_ref[:, cols], (((1,), (1,)), ((), ())),
                                preferred_element_type=jnp.float32)
            o_ref[:, cols] = jnp.dot(jax.nn.softmax(s, axis=-1), k_ref[:, cols],
                                     preferred_element_type=jnp.float32)

    q, kv = _x((128, heads * d), 20), _x((128, heads * d), 21)
    got = _call(k, q, kv)
    for h in range(heads):
        c = slice(h * d, (h + 1) * d)
        s = q[:, c] @ kv[:, c].T
        p = np.exp(s - s.max(-1, keepdims=True))
        want = (p / p.sum(-1, keepdims=True)) @ kv[:, c]
        np.testing.assert_allclose(got[:, c], want, rtol=1e-4, atol=1e-4)


def test_a_window_partial_in_a_middle_dimension_is_gathered():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[0, 0:4, :]

    x = np.arange(2 * 8 * 128, dtype=np.float32).reshape(2, 8, 128)
    # (0, 0:4, :) is rows 0-3 of plane 0: a body op takes it as it is
    got = _call(k, x, out=jax.ShapeDtypeStruct((4, 128), np.float32))
    np.testing.assert_array_equal(got, x[0, 0:4])

    def middle(x_ref, o_ref):	# rows 0-3 of each plane: the DMA engine gathers them
        o_ref[...] = x_ref[pl.ds(0, 2), 0:4, :].reshape(8, 128)

    got = _call(middle, x, out=jax.ShapeDtypeStruct((8, 128), np.float32))
    np.testing.assert_array_equal(got, x[0:2, 0:4].reshape(8, 128))


# --- bitwise operators and shifts on integers ---

def _ints(seed, lo=-2**31, hi=2**31 - 1, shape=(8, 128)):
    return np.random.default_rng(seed).integers(lo, hi, shape, dtype=np.int64).astype(np.int32)


def test_bitwise_operators_of_int32():
    def k(x_ref, y_ref, a_ref, o_ref, x_out, n_ref):
        x, y = x_ref[...], y_ref[...]
        a_ref[...] = x & y
        o_ref[...] = (x | 0x0F0F) ^ y
        x_out[...] = jnp.bitwise_xor(x, 12345) & jnp.bitwise_or(y, -256)
        n_ref[...] = ~x ^ jnp.invert(y << 1)

    x, y = _ints(22), _ints(23)
    outs = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((8, 128), np.int32),) * 4)(x, y)
    a, o, xo, n = (np.asarray(r) for r in outs)
    np.testing.assert_array_equal(a, x & y)
    np.testing.assert_array_equal(o, (x | 0x0F0F) ^ y)
    np.testing.assert_array_equal(xo, (x ^ 12345) & (y | -256))
    np.testing.assert_array_equal(n, ~x ^ ~(y << 1))


def test_shifts_wrap_and_shift_out_as_xla():
    def k(x_ref, s_ref, l_ref, r_ref, u_ref, c_ref):
        x, s = x_ref[...], s_ref[...]
        l_ref[...] = x << s
        r_ref[...] = x >> s
        u_ref[...] = lax.shift_right_logical(x, s)
        c_ref[...] = (x << 3) ^ (x >> 28) | jnp.left_shift(x, 1) & jnp.right_shift(x, 2)

    x = _ints(24)
    s = np.random.default_rng(25).integers(-2, 40, (8, 128)).astype(np.int32)
    l, r, u, c = (np.asarray(o) for o in pl.pallas_call(
        k, out_shape=(jax.ShapeDtypeStruct((8, 128), np.int32),) * 4)(x, s))
    xu = x.astype(np.uint32).astype(np.uint64)
    out = (s < 0) | (s >= 32)
    sc = np.clip(s, 0, 31).astype(np.uint64)
    want_l = np.where(out, 0, ((xu << sc) & 0xFFFFFFFF).astype(np.uint32).view(np.int32))
    want_r = np.where(out, np.where(x < 0, -1, 0), x >> np.clip(s, 0, 31))
    want_u = np.where(out, 0, (xu >> sc).astype(np.uint32).view(np.int32))
    np.testing.assert_array_equal(l, want_l)
    np.testing.assert_array_equal(r, want_r)
    np.testing.assert_array_equal(u, want_u)
    np.testing.assert_array_equal(c, (x << 3) ^ (x >> 28) | (x << 1) & (x >> 2))


def test_xor_of_masks_and_bitwise_of_floats():
    def masks(x_ref, o_ref):
        o_ref[...] = ((x_ref[...] > 0) ^ (x_ref[...] > 0.5)).astype(jnp.float32)

    def floats(x_ref, o_ref):
        o_ref[...] = x_ref[...] << 2

    x = _x(seed=26)
    np.testing.assert_array_equal(_call(masks, x), ((x > 0) ^ (x > 0.5)).astype(np.float32))
    with pytest.raises(pl.TraceError, match="takes integers"):
        _call(floats, x)


# --- argmax, argmin ---

def test_argmax_argmin_along_rows_and_columns():
    def k(x_ref, r_ref, c_ref):
        r_ref[...] = jnp.argmax(x_ref[...], axis=1, keepdims=True)
        c_ref[...] = jnp.argmin(x_ref[...], axis=0, keepdims=True)

    x = _x((16, 128), 27)
    x[3, 7] = x[3, 100] = 50.0		# a tie: the first wins
    r, c = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((16, 1), np.int32),
                                        jax.ShapeDtypeStruct((1, 128), np.int32)))(x)
    np.testing.assert_array_equal(np.asarray(r), x.argmax(1)[:, None])
    np.testing.assert_array_equal(np.asarray(c), x.argmin(0)[None, :])
    assert np.asarray(r)[3, 0] == 7


def test_bitwise_of_uint8_and_int8_stay_in_their_width():
    def k(u_ref, s_ref, nu_ref, ns_ref):
        nu_ref[...] = ~u_ref[...] ^ (u_ref[...] << 3)
        ns_ref[...] = (s_ref[...] << 2) | (s_ref[...] >> 1)

    rng = np.random.default_rng(28)
    u = rng.integers(0, 256, (8, 128)).astype(np.uint8)
    s = rng.integers(-128, 128, (8, 128)).astype(np.int8)
    nu, ns = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((8, 128), np.uint8),
                                          jax.ShapeDtypeStruct((8, 128), np.int8)))(u, s)
    np.testing.assert_array_equal(np.asarray(nu), ~u ^ (u << 3))
    np.testing.assert_array_equal(np.asarray(ns), (s << 2) | (s >> 1))


def test_expand_dims_in_a_kernel():
    # splash attention's dq kernel: jnp.expand_dims(lse_ref[0], -1), a (bq,)
    # row made a (bq, 1) column; axes counted in the result's rank
    x = _x((2, 128))

    def k(x_ref, o_ref, p_ref):
        o_ref[...] = jnp.broadcast_to(jnp.expand_dims(x_ref[0], -1), (128, 128))
        p_ref[...] = jnp.expand_dims(x_ref[1], axis=(0,))
    o, p = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((128, 128), jnp.float32),
                                        jax.ShapeDtypeStruct((1, 128), jnp.float32)))(x)
    np.testing.assert_array_equal(o, np.broadcast_to(x[0][:, None], (128, 128)))
    np.testing.assert_array_equal(p, x[1][None])
    np.testing.assert_array_equal(jnp.expand_dims(x, 1), x[:, None])	# on the host, NumPy's


def test_broadcast_of_a_scalar_compare_is_a_mask():
    # jnp.broadcast_to(should_not_mask, shape) | mask, as splash attention
    # combines a block's partial mask with its block kind (an SMEM compare)
    m = (np.random.default_rng(3).uniform(size=(8, 128)) < 0.5)

    def k(kind_ref, m_ref, o_ref):
        full = jnp.broadcast_to(kind_ref[0] != 1, m_ref.shape)
        o_ref[...] = jnp.where(jnp.bitwise_or(m_ref[...], full), 1.0, 0.0)
    for kind in (1, 2):
        out = pl.pallas_call(k, in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                                          pl.BlockSpec((8, 128), lambda: (0, 0))],
                             out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(
            np.array([kind], np.int32), m)
        np.testing.assert_array_equal(out, (m | (kind != 1)).astype(np.float32))


def test_tree_util_named_scope_checkpoint_name_and_metadata():
    @jax.tree_util.register_pytree_node_class
    class Pair:
        def __init__(self, a, b, tag):
            self.a, self.b, self.tag = a, b, tag

        def tree_flatten(self):
            return (self.a, self.b), self.tag

        @classmethod
        def tree_unflatten(cls, tag, children):
            return cls(*children, tag)

    p = jax.tree_util.tree_map(lambda x: x * 2, Pair(1, (2, None), "t"))
    assert (p.a, p.b, p.tag) == (2, (4, None), "t")
    assert jax.tree_util.tree_leaves({"x": [1, Pair(3, 4, 0)]}) == [1, 3, 4]
    with pytest.raises(ValueError, match="does not match"):
        jax.tree_util.tree_map(lambda x, y: x, (1, 2), [1])
    assert isinstance(jnp.array([1, 2]), jax.Array) and not isinstance(np.ones(2), jax.Array)
    x = _x()
    assert jax.ad_checkpoint.checkpoint_name(x, name="out") is x

    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0
    with jax.named_scope("splash_fwd"):
        out = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), name="k",
                             metadata={"xprof_metadata": "{}"})(x)
    np.testing.assert_array_equal(out, x + 1.0)
    with pytest.raises(TypeError, match="metadata must be a dict of str to str"):
        pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), metadata={"a": 1})
    with pytest.raises(TypeError, match="named_scope: name must be a str"):
        jax.named_scope(3)


def test_lax_dynamic_slice_static_starts_clamp():
    # XLA clamps a start so the slice fits; host and kernel body alike
    y = np.arange(24).reshape(4, 6)
    np.testing.assert_array_equal(jax.lax.dynamic_slice(y, (3, 1), (2, 2)), y[2:4, 1:3])
    np.testing.assert_array_equal(jax.lax.dynamic_slice_in_dim(y, 5, 2, axis=1), y[:, 4:6])
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)

    def kernel(x_ref, o_ref):
        v = x_ref[...]
        o_ref[...] = jax.lax.dynamic_slice_in_dim(v, 4, 8) + jax.lax.dynamic_slice(
            v, (12, 0), (8, 128))

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(x)
    np.testing.assert_array_equal(out, x[4:12] + x[8:16])
