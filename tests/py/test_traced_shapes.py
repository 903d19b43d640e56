# SPDX-License-Identifier: MIT
"""Every traced value knows its static shape, dtype and ndim while the
kernel is traced, as JAX's tracers do; the figures are JAX's rules (checked
against NumPy's results of the same expressions)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

F32 = jnp.float32


def _trace(kernel, *arrays, out=((8, 128), np.float32)):
    """Run @kernel once on @arrays; it records what it saw."""
    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(*out))(*arrays)


def test_shapes_and_dtypes_of_computed_values():
    x = np.ones((8, 128), np.float32)
    c = np.ones((8, 1), np.int32)
    seen = {}

    def kernel(x_ref, c_ref, o_ref):
        v, k = x_ref[...], c_ref[...]
        cases = {
            "add_col": v + k,			# (8, 128) f32: int32 promotes to float
            "cmp": v > 0,
            "int_div": k / 2,
            "exp_int": jnp.exp(k),
            "sum0": jnp.sum(v, axis=0),
            "sum1_keep": v.sum(axis=1, keepdims=True),
            "max_all": jnp.max(v),
            "argmax": jnp.argmax(v, axis=1),
            "dot": jnp.dot(v, v.T),
            "dot_pet": jnp.dot(v.astype(jnp.bfloat16), jnp.zeros((128, 256), jnp.bfloat16),
                               preferred_element_type=F32),
            "T": v.T,
            "slice": x_ref[0:4, 16:48],
            "row": x_ref[3],
            "value_idx": v[2:6, 5],
            "where": jnp.where(v > 1, k, 0),
            "zeros3": jnp.zeros((2, 4, 128), jnp.int32),
            "full": jnp.full((8, 128), 2.5),
            "iota": lax.broadcasted_iota(jnp.int32, (8, 128), 1),
            "reshape": v.reshape(1, 8, 128),
            "reshape_m1": jnp.reshape(v, (2, -1, 128)),
            "concat": jnp.concatenate([v, v], axis=1),
            "cast": k.astype(jnp.uint8),
            "bitcast": pltpu.bitcast(v, jnp.int32),
            "bcast": lax.broadcast(3, (8, 128)),
            "zeros_like": jnp.zeros_like(x_ref),
        }
        seen.update({n: (e.shape, e.dtype, e.ndim) for n, e in cases.items()})
        o_ref[...] = v

    _trace(kernel, x, c)
    want = {
        "add_col": ((8, 128), jnp.float32), "cmp": ((8, 128), jnp.bool_),
        "int_div": ((8, 1), jnp.float32), "exp_int": ((8, 1), jnp.float32),
        "sum0": ((128,), jnp.float32), "sum1_keep": ((8, 1), jnp.float32),
        "max_all": ((), jnp.float32), "argmax": ((8,), jnp.int32),
        "dot": ((8, 8), jnp.float32), "dot_pet": ((8, 256), jnp.float32),
        "T": ((128, 8), jnp.float32), "slice": ((4, 32), jnp.float32),
        "row": ((128,), jnp.float32), "value_idx": ((4,), jnp.float32),
        "where": ((8, 128), jnp.int32), "zeros3": ((2, 4, 128), jnp.int32),
        "full": ((8, 128), jnp.float32), "iota": ((8, 128), jnp.int32),
        "reshape": ((1, 8, 128), jnp.float32), "reshape_m1": ((2, 4, 128), jnp.float32),
        "concat": ((8, 256), jnp.float32), "cast": ((8, 1), jnp.uint8),
        "bitcast": ((8, 128), jnp.int32), "bcast": ((8, 128), jnp.int32),
        "zeros_like": ((8, 128), jnp.float32),
    }
    for name, (shape, dt) in want.items():
        got_shape, got_dt, ndim = seen[name]
        assert got_shape == shape, (name, got_shape, shape)
        assert got_dt == dt, (name, got_dt, dt)
        assert ndim == len(shape), name


def test_shapes_follow_numpy_broadcasting():
    """A row, a column and a scalar-core value broadcast as NumPy's do; the
    values computed match NumPy's, the traced shapes match NumPy's."""
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    r = np.arange(128, dtype=np.float32).reshape(1, 128)
    s = np.array([3], np.int32)
    seen = []

    def kernel(s_ref, x_ref, r_ref, o_ref):
        row = r_ref[...]
        col = x_ref[:, 0:1]
        e = (x_ref[...] - row) * col + s_ref[0]
        seen.append((row.shape, col.shape, s_ref[0].shape, e.shape, e.dtype))
        o_ref[...] = e

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, F32),
                       in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                                 pl.BlockSpec(memory_space=pltpu.VMEM),
                                 pl.BlockSpec(memory_space=pltpu.VMEM)])(s, x, r)
    want = (x - r) * x[:, 0:1] + s[0]
    np.testing.assert_array_equal(y, want)
    assert seen == [((1, 128), (8, 1), (), want.shape, jnp.float32)]


def test_shape_drives_the_kernel():
    """Code that branches on .shape and builds from it (as JAX kernels do):
    the result is NumPy's."""
    x = np.arange(16 * 256, dtype=np.float32).reshape(16, 256)

    def kernel(x_ref, o_ref):
        v = jnp.exp(x_ref[...] * 0.001)
        rows, cols = v.shape
        assert v.dtype == jnp.float32 and v.ndim == 2
        o_ref[...] = v + lax.broadcasted_iota(jnp.int32, v.shape, 1).astype(v.dtype) * \
            (1.0 if rows < cols else 2.0)

    y = _trace(kernel, x, out=(x.shape, np.float32))
    np.testing.assert_allclose(y, np.exp(x * 0.001) + np.arange(256)[None, :], rtol=1e-6)


def test_unknown_ndim_is_a_clear_error():
    """A value whose shape no rule gives (a ref's window read with an
    Ellipsis inside) says so when asked its ndim."""
    def kernel(x_ref, o_ref):
        v = x_ref[..., 0:128] * 2
        v.ndim
        o_ref[...] = v

    x = np.ones((8, 128), np.float32)
    with pytest.raises(pl.TraceError, match="ndim: its shape is not known"):
        _trace(kernel, x)
