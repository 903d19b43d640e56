# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's tests/pallas/tpu_pallas_mpmd_test.py, its TensorCore
cases (core_type TC; the SparseCore meshes and the hijax types have no
counterpart on a v5e): pl.kernel with captured scalars (jax.jit's
arguments), refs passed in (jax.new_ref / jax.empty_ref), closed over,
with scratch, mixed with outputs, and the same ref passed twice refused.
test_mixed_outputs_and_refs takes 16 lanes for the SparseCore's
num_lanes (a v5e has no SparseCore to ask)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def _mesh():
    return pltpu.create_tensorcore_mesh(axis_name="tc_core", num_cores=1)


def test_mpmd_capture_scalar():
    mesh = _mesh()
    axis_name = list(mesh.shape.keys())[0]

    def f(x, i):
        def body(x_ref, out_ref):
            idx = jax.lax.axis_index(axis_name)
            pltpu.sync_copy(x_ref.at[i], out_ref.at[idx])

        return pl.kernel(body=body, mesh=mesh,
                         out_type=jax.ShapeDtypeStruct((1, *x.shape[1:]), jnp.int32))(x)

    x = jnp.arange(4 * 8 * 128, dtype=jnp.int32).reshape((4, 8, 128))
    for i in range(x.shape[0]):
        out = jax.jit(f)(x, i)
        np.testing.assert_array_equal(out[0], x[i])


def test_mpmd_capture_multiple_scalars():
    mesh = pltpu.create_tensorcore_mesh("x", num_cores=1)

    def f(x, i, j):
        def body(x_ref, out_ref):
            idx = jax.lax.axis_index("x")
            pltpu.sync_copy(x_ref.at[i + j], out_ref.at[idx])

        return pl.kernel(body=body, mesh=mesh,
                         out_type=jax.ShapeDtypeStruct((1, *x.shape[1:]), jnp.int32))(x)

    x = jnp.arange(4 * 8 * 128, dtype=jnp.int32).reshape((4, 8, 128))
    out = jax.jit(f)(x, 1, 2)
    np.testing.assert_array_equal(out[0], x[3])


def test_mpmd_capture_scalar_and_ref():
    mesh = pltpu.create_tensorcore_mesh("x", num_cores=1)

    @jax.jit
    def f(x, i):
        y = jnp.arange(8 * 128, dtype=jnp.int32).reshape(8, 128)
        y_ref = jax.new_ref(y, memory_space=pl.ANY)

        def body(x_ref, out_ref):
            idx = jax.lax.axis_index("x")
            pltpu.sync_copy(x_ref.at[i], out_ref.at[idx])
            vmem_buf = jax.empty_ref(
                jax.typeof(y_ref).inner_aval, memory_space=pltpu.MemorySpace.VMEM)
            pltpu.sync_copy(y_ref, vmem_buf)

        return pl.kernel(body=body, mesh=mesh,
                         out_type=jax.ShapeDtypeStruct((1, *x.shape[1:]), jnp.int32))(x)

    x = jnp.arange(4 * 8 * 128, dtype=jnp.int32).reshape((4, 8, 128))
    out = f(x, 1)
    np.testing.assert_array_equal(out[0], x[1])


def test_passing_in_refs():
    mesh = _mesh()
    x = jnp.arange(8 * 128, dtype=jnp.int32).reshape(8, 128)

    @jax.jit
    def f(x):
        x_ref = jax.new_ref(x)
        o_ref = jax.empty_ref(jax.typeof(x))
        pl.kernel(body=pltpu.sync_copy, mesh=mesh)(x_ref, o_ref)
        return jax.freeze(o_ref)

    np.testing.assert_array_equal(x, f(x))


def test_passing_in_multiple_refs():
    mesh = _mesh()
    x = jnp.arange(8 * 128, dtype=jnp.int32).reshape(8, 128)
    y = jnp.zeros_like(x)

    @jax.jit
    def f(x, y):
        x_ref = jax.new_ref(x)
        y_ref = jax.new_ref(y)

        def fn(x_ref, y_ref, scratch_x, scratch_y):
            pltpu.sync_copy(x_ref, scratch_x)
            pltpu.sync_copy(y_ref, scratch_y)
            pltpu.sync_copy(scratch_x, y_ref)
            pltpu.sync_copy(scratch_y, x_ref)

        pl.kernel(body=fn, mesh=mesh, scratch_types=(
            pltpu.SMEM(x.shape, x.dtype), pltpu.SMEM(y.shape, y.dtype)))(x_ref, y_ref)
        return jax.freeze(x_ref), jax.freeze(y_ref)

    out_x, out_y = f(x, y)
    np.testing.assert_array_equal(out_x, y)
    np.testing.assert_array_equal(out_y, x)


def test_mixed_outputs_and_refs():
    mesh = _mesh()
    x = jnp.arange(8 * 128, dtype=jnp.int32).reshape(8, 128)
    num_lanes = 16

    @jax.jit
    def f(x):
        x_ref = jax.new_ref(x)

        def fn(x_ref, out_ref, scratch_ref):
            pltpu.sync_copy(x_ref, out_ref)
            pltpu.sync_copy(x_ref, scratch_ref)
            scratch_ref[0, :num_lanes] += jnp.ones(num_lanes, dtype=jnp.int32)
            pltpu.sync_copy(scratch_ref, x_ref)

        out = pl.kernel(body=fn, mesh=mesh, out_type=jax.typeof(x),
                        scratch_types=(pltpu.VMEM(x.shape, x.dtype),))(x_ref)
        return out, jax.freeze(x_ref)

    out, mutated_x = f(x)
    np.testing.assert_array_equal(out, x)
    want = np.asarray(x).copy()
    want[0, :num_lanes] += 1
    np.testing.assert_array_equal(mutated_x, want)


def test_passing_in_refs_read_only():
    mesh = _mesh()
    x = jnp.arange(8 * 128, dtype=jnp.int32).reshape(8, 128)

    @jax.jit
    def f(x):
        x_ref = jax.new_ref(x)

        def fn(_):
            pass

        pl.kernel(body=fn, mesh=mesh)(x_ref)
        return jax.freeze(x_ref)

    np.testing.assert_array_equal(x, f(x))


def test_passing_in_refs_with_scratch():
    mesh = _mesh()
    x = jnp.arange(8 * 128, dtype=jnp.int32).reshape(8, 128)

    @jax.jit
    def f(x):
        x_ref = jax.new_ref(x)
        o_ref = jax.empty_ref(jax.typeof(x))

        def fn(x_hbm_ref, out_hbm_ref, scratch_ref):
            pltpu.sync_copy(x_hbm_ref, scratch_ref)
            pltpu.sync_copy(scratch_ref, out_hbm_ref)

        pl.kernel(body=fn, mesh=mesh,
                  scratch_types=(pltpu.SMEM(x.shape, x.dtype),))(x_ref, o_ref)
        return jax.freeze(o_ref)

    np.testing.assert_array_equal(x, f(x))


def test_passing_in_duplicate_refs_errors():
    mesh = _mesh()
    x = jnp.arange(8 * 128, dtype=jnp.int32).reshape(8, 128)

    @jax.jit
    def f(x):
        x_ref = jax.new_ref(x)
        pl.kernel(body=lambda *_: None, mesh=mesh)(x_ref, x_ref)

    with pytest.raises(NotImplementedError,
                       match="Cannot pass the same ref into a mpmd map multiple times"):
        f(x)


def test_closed_over_refs():
    mesh = _mesh()
    x = jnp.arange(8 * 128, dtype=jnp.int32).reshape(8, 128)

    @jax.jit
    def f(x):
        x_ref = jax.new_ref(x)
        o_ref = jax.empty_ref(jax.typeof(x))

        @pl.kernel(mesh=mesh)
        def fn():
            pltpu.sync_copy(x_ref, o_ref)
        fn()

        return jax.freeze(o_ref)

    np.testing.assert_array_equal(x, f(x))


def test_closed_over_refs_with_scratch():
    mesh = _mesh()
    x = jnp.arange(8 * 128, dtype=jnp.int32).reshape(8, 128)

    @jax.jit
    def f(x):
        x_ref = jax.new_ref(x)
        o_ref = jax.empty_ref(jax.typeof(x))

        @pl.kernel(mesh=mesh, scratch_types=(pltpu.VMEM(x.shape, x.dtype),))
        def fn(scratch_ref):
            pltpu.sync_copy(x_ref, scratch_ref)
            pltpu.sync_copy(scratch_ref, o_ref)
        fn()

        return jax.freeze(o_ref)

    np.testing.assert_array_equal(x, f(x))
