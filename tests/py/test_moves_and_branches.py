# SPDX-License-Identifier: MIT
"""What ports of JAX's Pallas TPU tests ran into: x.T and jnp.transpose off
the MXU, pltpu.roll, reductions over the whole array, jnp.isnan/rint/tan/
all/any, lax.cond and lax.switch returning values on a traced index,
lax.integer_pow/stop_gradient/convert_element_type, def kernel(*refs),
pl.num_programs in index maps, pltpu.async_copy, pl.semaphore_* and
pl.ds(size)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def _x(shape=(16, 256), seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _rows(kernel, x, grid, out_rows=None):
    """kernel over row blocks of x, one per step."""
    b = x.shape[0] // grid
    spec = pl.BlockSpec((b, x.shape[1]), lambda i: (i, 0))
    return np.asarray(pl.pallas_call(kernel, grid=(grid,), in_specs=[spec], out_specs=spec,
                                     out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x))


def test_transpose_of_values():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...].T + jnp.transpose(x_ref[...] * 2, (1, 0)) - x_ref[...].transpose()

    x = _x()
    out = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((256, 16), x.dtype))(x)
    np.testing.assert_array_equal(np.asarray(out), x.T + (x * 2).T - x.T)


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("shift", [0, 3, -5, 300])
def test_roll_static(shift, axis):
    def k(x_ref, o_ref):
        o_ref[...] = pltpu.roll(x_ref[...], shift=shift, axis=axis)

    x = _x()
    out = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    np.testing.assert_array_equal(np.asarray(out), np.roll(x, shift, axis))


def test_roll_by_a_traced_shift_and_bf16():
    def k(x_ref, o_ref):
        y = jnp.roll(x_ref[...].astype(jnp.bfloat16), pl.program_id(0) * 8 - 3, axis=1)
        o_ref[...] = y.astype(jnp.float32)

    x = _x()
    xb = jax.from_bf16(jax.to_bf16(x))
    want = np.concatenate([np.roll(xb[:8], -3, 1), np.roll(xb[8:], 5, 1)])
    np.testing.assert_array_equal(_rows(k, x, 2), want)
    # with a stride, column j rolls by 1 + j along the rows
    y = pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(
        Ellipsis, pltpu.roll(x_ref[...], 1, 0, stride=1, stride_axis=1)),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    want = np.stack([np.roll(x[:, j], 1 + j) for j in range(x.shape[1])], axis=1)
    np.testing.assert_array_equal(y, want)
    with pytest.raises(pl.TraceError, match="stride"):
        pl.pallas_call(lambda x_ref, o_ref: o_ref.__setitem__(
            Ellipsis, pltpu.roll(x_ref[...], 1, 0, stride=1)),
            out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)


def test_whole_array_reductions_and_predicates():
    def k(x_ref, o_ref):
        x = x_ref[...]
        ok = jnp.where(jnp.all(x > -100.0), 1.0, 0.0) + jnp.where(jnp.any(x > 2.0), 10.0, 0.0)
        o_ref[...] = jnp.where(jnp.isnan(x), ok, jnp.rint(x * 3) + jnp.tan(x) - jnp.sum(x))

    x = _x()
    x[3, 5] = np.nan	# all(NaN > -100) is False; sum is NaN
    out = np.asarray(pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x))
    assert out[3, 5] == 10.0 * (np.nanmax(x) > 2.0) and np.isnan(np.delete(out.ravel(), 3 * 256 + 5)).all()
    x[3, 5] = 0.5
    out = np.asarray(pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x))
    np.testing.assert_allclose(out, np.rint(x * 3) + np.tan(x) - x.sum(), rtol=1e-5, atol=1e-3)


def test_cond_and_switch_return_values_on_a_traced_index():
    def k(x_ref, o_ref):
        i = pl.program_id(0)
        v = lax.cond(i == 0, lambda: x_ref[...] * 2, lambda: x_ref[...] - 1)
        a, b = lax.switch(i * 5 - 1, [lambda w: (w + 1, w), lambda w: (w * 3, w),
                                      lambda w: (w - 5, -w)], v)	# -1 and 4 clamp
        o_ref[...] = a + b

    x = _x()
    v = np.concatenate([x[:8] * 2, x[8:] - 1])
    want = np.concatenate([(v[:8] + 1) + v[:8], (v[8:] - 5) + -v[8:]])
    np.testing.assert_allclose(_rows(k, x, 2), want, rtol=1e-6)


def test_switch_branches_acting_through_refs():
    def k(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]
        for n in range(3):
            lax.switch(s_ref[n], (lambda: o_ref.__setitem__(Ellipsis, o_ref[...] + 1.0),
                                  lambda: o_ref.__setitem__(Ellipsis, o_ref[...] * 2.0)))
            ()

    x = _x((8, 128))
    f = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                       grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(1,)))
    np.testing.assert_allclose(np.asarray(f(np.array([1, 0, 1], np.int32), x)),
                               ((x * 2) + 1) * 2, rtol=1e-6)


def test_integer_pow_stop_gradient_convert_element_type():
    def k(x_ref, o_ref):
        x = x_ref[...]
        o_ref[...] = lax.integer_pow(x, 3) + lax.stop_gradient(lax.integer_pow(x, 0)) + \
            lax.convert_element_type(x * 4, jnp.int32)

    x = _x()
    out = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    np.testing.assert_allclose(np.asarray(out), x * x * x + 1 + (x * 4).astype(np.int32),
                               rtol=1e-5, atol=1e-5)


def test_star_refs_and_num_programs_in_index_maps():
    def k(*refs):
        x_ref, y_ref, o_ref = refs
        o_ref[...] = x_ref[...] + y_ref[...]

    x = _x()
    spec = pl.BlockSpec((8, 256), lambda i: (pl.num_programs(0) - 1 - i, 0))
    out = pl.pallas_call(k, grid=(2,), in_specs=[spec, spec],
                         out_specs=pl.BlockSpec((8, 256), lambda i: (i, 0)),
                         out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, x)
    np.testing.assert_array_equal(np.asarray(out), np.concatenate([x[8:], x[:8]]) * 2)


def test_async_copy_pl_semaphores_and_ds_of_a_size():
    def k(x_hbm, o_ref, buf, sem, reg):
        pltpu.async_copy(x_hbm.at[pl.ds(8)], buf, sem).wait()
        pl.semaphore_signal(reg, 3)
        pl.semaphore_wait(reg, 3)
        o_ref[...] = buf[...] + 1.0

    x = _x((16, 128))
    out = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((8, 128), x.dtype),
                         in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                         scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                         pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.REGULAR])(x)
    np.testing.assert_array_equal(np.asarray(out), x[:8] + 1.0)


def test_integer_casts_wrap_as_xla_convert():
    def k(x_ref, o_ref, u_ref):
        o_ref[...] = lax.convert_element_type(x_ref[...], jnp.int8)
        u_ref[...] = x_ref[...].astype(jnp.uint8)

    x = np.random.default_rng(3).integers(-2**31, 2**31 - 1, (8, 256)).astype(np.int32)
    o, u = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct(x.shape, jnp.int8),
                                        jax.ShapeDtypeStruct(x.shape, jnp.uint8)))(x)
    np.testing.assert_array_equal(np.asarray(o), x.astype(np.int8))
    np.testing.assert_array_equal(np.asarray(u), x.astype(np.uint8))


def test_astype_of_scalars():
    def k(s_ref, x_ref, o_ref, so_ref):
        i = pl.program_id(0)
        o_ref[...] = x_ref[...] + i.astype(jnp.float32) * 0.5
        so_ref[0] = s_ref[0].astype(jnp.float32)
        so_ref[1] = (s_ref[1] * 1000).astype(jnp.int8).astype(jnp.float32)
        so_ref[2] = (s_ref[1] > 0).astype(jnp.int32)

    x = _x((16, 128))
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    smem = pl.BlockSpec(memory_space=pltpu.SMEM)
    o, so = pl.pallas_call(k, grid=(2,), in_specs=[smem, spec], out_specs=[spec, smem],
                           out_shape=(jax.ShapeDtypeStruct(x.shape, x.dtype),
                                      jax.ShapeDtypeStruct((3,), jnp.float32)))(
        np.array([7, 1], np.int32), x)
    np.testing.assert_array_equal(np.asarray(o), x + np.repeat(np.float32([0.0, 0.5]), 8)[:, None])
    np.testing.assert_array_equal(np.asarray(so), [7.0, -24.0, 1.0])	# 1000 wraps to int8 -24

    def third(x_ref, o_ref):	# float arithmetic on a scalar: a (1, 1) tile
        o_ref[...] = x_ref[...] + (pl.program_id(0) + 1).astype(jnp.float32) / 3

    o = pl.pallas_call(third, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    np.testing.assert_allclose(np.asarray(o), x + np.float32(1) / np.float32(3), rtol=1e-6)


def test_concatenate_tile_and_repeat():
    def k(x_ref, c_ref, t_ref, r_ref):
        x = x_ref[...]
        c_ref[...] = jnp.concatenate([x, x * 2, x + 1], axis=0)
        t_ref[...] = jnp.tile(x, (2, 3))
        r_ref[...] = pltpu.repeat(x.astype(jnp.bfloat16), 2, axis=1).astype(jnp.float32)

    x = _x((8, 128))
    c, t, r = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((24, 128), x.dtype),
                                           jax.ShapeDtypeStruct((16, 384), x.dtype),
                                           jax.ShapeDtypeStruct((8, 256), x.dtype)))(x)
    np.testing.assert_array_equal(np.asarray(c), np.concatenate([x, x * 2, x + 1], axis=0))
    np.testing.assert_array_equal(np.asarray(t), np.tile(x, (2, 3)))
    np.testing.assert_array_equal(np.asarray(r), np.tile(jax.from_bf16(jax.to_bf16(x)), (1, 2)))

    def bad(x_ref, o_ref):
        o_ref[...] = jnp.concatenate([x_ref[...], x_ref[...].astype(jnp.int32)], axis=1)

    with pytest.raises(pl.TraceError, match="cast the parts to one dtype"):
        pl.pallas_call(bad, out_shape=jax.ShapeDtypeStruct((8, 256), x.dtype))(x)


@pytest.mark.parametrize("spec", ["ij,jk->ik", "mk,mn->kn", "ik,jk->ij", "ki,jk->ij",
                                  "ij,jk", "ab,cb->ca", "ij->ji"])
def test_einsum_of_two_d_values(spec):
    rng = np.random.default_rng(4)
    ins = spec.split("->")[0].split(",")
    dims = {c: 128 if c in "ijmn" else 256 for c in "ijkmnabc"}
    arrays = [rng.standard_normal([dims[c] for c in s], dtype=np.float32) for s in ins]
    want = np.einsum(spec, *arrays)

    def k(*refs):
        refs[-1][...] = jnp.einsum(spec, *[r[...] for r in refs[:-1]],
                                   preferred_element_type=jnp.float32)

    out = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(want.shape, np.float32))(*arrays)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-4, atol=1e-3)


def test_einsum_indices_must_match_the_ranks():
    x = _x((8, 128))

    def k(x_ref, o_ref):
        o_ref[...] = jnp.einsum("bqd,bkd->bqk", x_ref[...], x_ref[...])

    with pytest.raises(pl.TraceError, match="names 3 dimensions of a value of shape"):
        pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct((8, 8), x.dtype))(x)


def test_emit_pipeline_over_hbm_refs():
    def kernel(x_hbm, o_hbm, last_hbm):
        def add_one(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1.0

        pltpu.emit_pipeline(add_one, grid=(4,), in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                            out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))])(x_hbm, o_hbm)

        def keep(x_ref, o_ref):		# out block i revisited for each j: the last j stays
            o_ref[...] = x_ref[...]

        pltpu.emit_pipeline(keep, grid=(2, 2),
                            in_specs=pl.BlockSpec((16, 64), lambda i, j: (i, j)),
                            out_specs=pl.BlockSpec((16, 64), lambda i, j: (i, 0)))(x_hbm, last_hbm)

    x = _x((32, 128))
    anyspec = pl.BlockSpec(memory_space=pl.ANY)
    o, last = pl.pallas_call(kernel, in_specs=[anyspec], out_specs=[anyspec, anyspec],
                             out_shape=(jax.ShapeDtypeStruct(x.shape, x.dtype),
                                        jax.ShapeDtypeStruct((32, 64), x.dtype)))(x)
    np.testing.assert_array_equal(np.asarray(o), x + 1.0)
    np.testing.assert_array_equal(np.asarray(last), x[:, 64:])


def test_float_smem_scalars_and_reductions_stored_to_smem():
    def k(x_ref, s_ref, o_ref, so_ref):
        so_ref[0, 0] = jnp.sum(x_ref[...])			# a vector result into SMEM
        so_ref[0, 1] = jnp.maximum(s_ref[0], s_ref[1]) * 2.0	# f32 SMEM arithmetic
        so_ref[1, 0] = jnp.exp(s_ref[1])
        so_ref[1, 1] = jnp.max(x_ref[...]).astype(jnp.int32)	# cast to the element's dtype
        o_ref[...] = x_ref[...] * s_ref[0]			# still a bcast smem operand

    x = _x((8, 128))
    s = np.array([1.5, -0.25], np.float32)
    smem = pl.BlockSpec(memory_space=pltpu.SMEM)
    o, so = pl.pallas_call(k, in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0)), smem],
                           out_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0)), smem],
                           out_shape=(jax.ShapeDtypeStruct(x.shape, x.dtype),
                                      jax.ShapeDtypeStruct((2, 2), jnp.float32)))(x, s)
    np.testing.assert_allclose(np.asarray(so), [[x.sum(), 3.0], [np.exp(-0.25), int(x.max())]],
                               rtol=1e-5)
    np.testing.assert_array_equal(np.asarray(o), x * np.float32(1.5))


def test_reductions_without_keepdims_are_1d_rows():
    def k(x_ref, o_ref, m_ref):
        m = jnp.max(x_ref[...], axis=1)			# (8,): viewed 2-D, a row
        o_ref[...] = m.reshape(8, 1) + jnp.zeros((8, 128))	# (8,) -> (8, 1): a column
        m_ref[...] = jnp.argmax(x_ref[...], axis=-1)

    x = _x((8, 128))
    o, m = pl.pallas_call(k, out_shape=(jax.ShapeDtypeStruct((8, 128), x.dtype),
                                        jax.ShapeDtypeStruct((8,), jnp.int32)))(x)
    np.testing.assert_array_equal(np.asarray(o), np.broadcast_to(x.max(1)[:, None], (8, 128)))
    np.testing.assert_array_equal(np.asarray(m), x.argmax(1))


def test_run_scoped_returns_values_read_from_its_scratch():
    def k(y_ref, v_ref):
        def body(s_ref, buf):
            s_ref[0] = 1
            s_ref[0] += 1
            buf[...] = jnp.ones_like(buf)
            return s_ref[0] + 2, buf[...] * 3.0
        s, v = pl.run_scoped(body, pltpu.SMEM((1,), jnp.int32), pltpu.VMEM((8, 128), jnp.float32))
        y_ref[0] = s
        v_ref[...] = v

    y, v = pl.pallas_call(k, out_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                                        pl.BlockSpec(memory_space=pltpu.VMEM)],
                          out_shape=(jax.ShapeDtypeStruct((1,), jnp.int32),
                                     jax.ShapeDtypeStruct((8, 128), jnp.float32)))()
    assert np.asarray(y).tolist() == [4]
    np.testing.assert_array_equal(np.asarray(v), np.full((8, 128), 3.0, np.float32))


def test_a_kernel_with_many_scalar_locals():
    def k(x_ref, y_ref):
        for i in range(8):
            for j in range(8):
                v = x_ref[i, j].astype(jnp.int32)
                y_ref[i, j] = v * v

    x = np.arange(64, dtype=np.int32).reshape(8, 8)
    smem = pl.BlockSpec(memory_space=pltpu.SMEM)
    y = pl.pallas_call(k, in_specs=[smem], out_specs=smem,
                       out_shape=jax.ShapeDtypeStruct((8, 8), jnp.int32))(x)
    np.testing.assert_array_equal(np.asarray(y), x * x)


def test_constant_indexing_of_values():
    def k(x_ref, a_ref, r_ref, c_ref, s_ref):
        x = x_ref[...] * 2.0
        a_ref[...] = x[8:16, 128:256] + x[0:8, 0:128]
        r_ref[...] = x[3]				# (256,): a row
        c_ref[...] = x[:, 5]				# (16,): viewed as a row too
        s_ref[0, 0] = x[2, 7]

    x = _x()
    a, r, c, s = pl.pallas_call(
        k, out_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)] * 3 +
        [pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_shape=(jax.ShapeDtypeStruct((8, 128), x.dtype), jax.ShapeDtypeStruct((256,), x.dtype),
                   jax.ShapeDtypeStruct((16,), x.dtype), jax.ShapeDtypeStruct((1, 1), x.dtype)))(x)
    y = x * 2
    np.testing.assert_array_equal(np.asarray(a), y[8:16, 128:256] + y[0:8, 0:128])
    np.testing.assert_array_equal(np.asarray(r), y[3])
    np.testing.assert_array_equal(np.asarray(c), y[:, 5])
    assert np.asarray(s)[0, 0] == y[2, 7]
