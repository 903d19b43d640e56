# SPDX-License-Identifier: MIT
"""The small helpers of jax.experimental.pallas and pallas.tpu the API
reference lists: pl.empty, pl.broadcast_to, pl.align_to, pl.DeviceIdType,
pltpu.run_on_first_core and pltpu.core_barrier (on the device's one-core
mesh: the barrier is the core's own signal and wait)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def test_first_core_and_barrier_on_a_mesh():
    mesh = pltpu.create_tensorcore_mesh("core")

    @pl.kernel(out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32), mesh=mesh,
               scratch_types=dict(v=pltpu.VMEM((8, 128), jnp.float32),
                                  sem=pltpu.SemaphoreType.REGULAR))
    def kernel(o_ref, v, sem):
        pltpu.core_barrier(sem, core_axis_name="core")
        v[...] = pl.empty((8, 128), jnp.float32) * 0

        @pltpu.run_on_first_core("core")
        def _():
            v[...] = pl.broadcast_to(jnp.float32(3), (8, 128)) + \
                jax.lax.axis_index("core").astype(jnp.float32)
        pltpu.core_barrier(sem, core_axis_name="core")
        pltpu.sync_copy(v, o_ref)

    np.testing.assert_array_equal(kernel(), np.full((8, 128), 3.0, np.float32))


def test_host_helpers():
    assert pl.align_to(13, 8) == 16 and pl.align_to(16, 8) == 16
    assert pl.empty((2, 3), jnp.int32).shape == (2, 3)
    np.testing.assert_array_equal(pl.broadcast_to(np.arange(3), (2, 3)),
                                  np.broadcast_to(np.arange(3), (2, 3)))
    assert pl.DeviceIdType.MESH is pltpu.DeviceIdType.MESH


def test_align_to_of_a_traced_size():
    def kernel(n_ref, o_ref):
        o_ref[0] = pl.align_to(n_ref[0], 128)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((1,), jnp.int32),
                         in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
                         out_specs=pl.BlockSpec(memory_space=pltpu.SMEM))(
        np.array([300], np.int32))
    assert int(out[0]) == 384


def test_device_id_type_is_checked():
    def kernel(o_ref, sem):
        pl.semaphore_signal(sem, 1, device_id_type="mesh")
        o_ref[...] = jnp.zeros_like(o_ref)
    with pytest.raises(TypeError, match="a pl.DeviceIdType"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       scratch_shapes=[pltpu.SemaphoreType.REGULAR])()


def test_emit_pipeline_options_are_checked():
    """Hints about overlap and layout are taken (the copies are
    synchronous here); cycle control and unknown options are refused."""
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)

    def run(**options):
        def kernel(x_hbm, o_hbm):
            def body(x_ref, o_ref):
                o_ref[...] = x_ref[...] + 1
            spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
            pltpu.emit_pipeline(body, grid=(2,), in_specs=[spec], out_specs=[spec],
                                **options)(x_hbm, o_hbm)
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                              out_specs=pl.BlockSpec(memory_space=pl.ANY))(x)

    np.testing.assert_array_equal(run(trace_scopes=False, no_pipelining=True), x + 1)
    with pytest.raises(NotImplementedError, match="init_accumulators=True"):
        run(init_accumulators=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        run(bogus=1)


def test_compiler_params_fields():
    """JAX's fields are taken and read back (replace too); an unknown one is
    refused rather than ignored."""
    cp = pltpu.CompilerParams(dimension_semantics=("parallel",), vmem_limit_bytes=1 << 20,
                              allow_input_fusion=(True,), flags={"xla_tpu_x": 1},
                              serialization_format=1)
    assert cp.allow_input_fusion == (True,) and cp.flags == {"xla_tpu_x": 1}
    r = cp.replace(vmem_limit_bytes=2 << 20)
    assert (r.vmem_limit_bytes, r.dimension_semantics, r.flags) == (
        2 << 20, ("parallel",), {"xla_tpu_x": 1})
    with pytest.raises(TypeError, match="unexpected keyword argument 'vmem_limit'"):
        pltpu.CompilerParams(vmem_limit=1 << 20)


def test_ref_swap_size_and_memory_space():
    """ref.swap(new) gives the old value (a load, then the store); .size
    and .memory_space as JAX's refs have them, of windows too."""
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    seen = {}

    def kernel(x_ref, s_ref, h_ref, o_ref, sem):
        seen.update(size=x_ref.size, window=x_ref.at[0:8].size,
                    spaces=(x_ref.memory_space, s_ref.memory_space, h_ref.memory_space,
                            sem.memory_space, x_ref.at[0:8].memory_space))
        o_ref[...] = x_ref[...]
        old = o_ref.swap(x_ref[...] * 2)
        o_ref[...] += old
        first = o_ref.at[0:8].swap(jnp.zeros((8, 128), jnp.float32))
        o_ref[8:16] += first

    out = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(), pl.BlockSpec(memory_space=pltpu.SMEM),
                  pl.BlockSpec(memory_space=pl.ANY)],
        scratch_shapes=[pltpu.SemaphoreType.DMA])(x, np.zeros((2,), np.int32), x)
    want = 3 * x
    want[8:16] += want[0:8]
    want[0:8] = 0
    np.testing.assert_array_equal(out, want)
    assert seen["size"] == 16 * 128 and seen["window"] == 8 * 128
    assert seen["spaces"] == (pltpu.VMEM, pltpu.SMEM, pl.ANY, pltpu.SEMAPHORE, pltpu.VMEM)


@pytest.mark.parametrize("sign", [1, -1])
def test_conditions_on_vector_reductions(sign):
    """pl.when and lax.cond on a one-element vector value (a reduction's):
    its element is moved to the scalar core, which picks what runs."""
    x = sign * (np.arange(8 * 128, dtype=np.float32).reshape(8, 128) + 1)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

        @pl.when(jnp.sum(x_ref[...]) > 0)
        def _():
            o_ref[...] = o_ref[...] * 2
        o_ref[...] = jax.lax.cond(jnp.all(x_ref[...] < 0), lambda: o_ref[...] - 1,
                                  lambda: o_ref[...] + 1)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    np.testing.assert_array_equal(out, 2 * x + 1 if sign > 0 else x - 1)


def test_make_pipeline_allocations_reused_by_two_pipelines():
    """pltpu.make_pipeline_allocations at the kernel's top level: one set of
    block buffers two invocations of an inner pipeline share."""
    x = np.arange(1024, dtype=np.float32)
    spec = pl.BlockSpec((256,), lambda i: (i,))

    @pl.kernel(out_type=jax.ShapeDtypeStruct((1024,), jnp.float32),
               mesh=pltpu.TensorCoreMesh(axis_name="core"))
    def run(x_ref, o_ref):
        def body(x_blk, o_blk):
            o_blk[...] = x_blk[...] * 2
        pipeline = pltpu.emit_pipeline(body, grid=(2,), in_specs=[spec], out_specs=[spec])
        types = pltpu.make_pipeline_allocations(x_ref.at[0:512], o_ref.at[0:512],
                                                in_specs=[spec], out_specs=[spec])
        assert len(types) == 2 and all(t is not None for t in types)

        def both(allocs):
            pipeline(x_ref.at[0:512], o_ref.at[0:512], allocations=allocs)
            pipeline(x_ref.at[512:1024], o_ref.at[512:1024], allocations=allocs)
        pl.run_scoped(both, types)

    np.testing.assert_array_equal(run(x), 2 * x)
    assert issubclass(pltpu.BufferedRef, pltpu.BufferedRefBase)


def test_aliased_whole_vmem_pair_is_one_buffer():
    """An input aliased to an output, both whole arrays in VMEM: one VMEM
    buffer (the input copied into it at the first step), so a 10 MiB pair
    fits the 16 MiB default limit (a grid of one step: one buffer)."""
    x = np.arange(2560 * 1024, dtype=np.float32).reshape(2560, 1024)

    def kernel(x_ref, o_ref):
        x_ref[0:8] = x_ref[0:8] + 1.0	# the input's ref is the output's
        o_ref[8:16] = o_ref[8:16] * 2.0
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                         input_output_aliases={0: 0})(x)
    want = x.copy()
    want[0:8] += 1
    want[8:16] *= 2
    np.testing.assert_array_equal(out, want)
