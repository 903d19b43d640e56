# SPDX-License-Identifier: MIT
"""The memory model from Python: pl.ANY operands, .at windows,
pltpu.make_async_copy on DMA semaphores, SMEM scratch stores."""
import numpy as np

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def manual_kernel(x_hbm, o_ref, buf, sem, slot_ref):
    # the TPU pipelining guide's double-buffered copy from HBM by hand
    @pl.when(pl.program_id(0) == 0)
    def _():
        slot_ref[0] = 0
        pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[0], sem.at[0]).start()

    slot = slot_ref[0]

    @pl.when(pl.program_id(0) + 1 < pl.num_programs(0))
    def _():
        nxt = pltpu.make_async_copy(x_hbm.at[pl.ds((pl.program_id(0) + 1) * 8, 8)],
                                    buf.at[1 - slot], sem.at[1 - slot])
        nxt.start()

    pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], buf.at[slot], sem.at[slot]).wait()
    o_ref[...] = buf.at[slot][...] * 2.0
    slot_ref[0] = 1 - slot


def test_manual_double_buffer():
    x = np.random.default_rng(0).standard_normal((64, 128), dtype=np.float32)
    f = pl.pallas_call(
        manual_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                        pltpu.SemaphoreType.DMA((2,)),
                        pltpu.SMEM((1,), jnp.int32)],
        grid=(8,))
    r = f(x)
    np.testing.assert_allclose(r, x * 2.0)
    assert "pl.when((pl.program_id(0) == 0)): pltpu.make_async_copy(x_hbm.at[pl.ds(0, 8)], " \
        "buf.at[0], sem.at[0]).start()" in f.statements


def test_sync_copy_and_semaphores():
    def k(x_ref, o_ref, buf, sem):
        pltpu.sync_copy(x_ref, buf)
        pltpu.semaphore_signal(sem, 2)
        pltpu.semaphore_wait(sem, 2)
        o_ref[...] = buf[...] + 1.0

    x = np.random.default_rng(1).standard_normal((8, 128), dtype=np.float32)
    f = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                       scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                                       pltpu.SemaphoreType.REGULAR])
    r = f(x)
    np.testing.assert_allclose(r, x + 1.0)
    assert f.statements[:3] == ["pltpu.sync_copy(x_ref, buf)",
                                "pltpu.semaphore_signal(sem, 2)",
                                "pltpu.semaphore_wait(sem, 2)"]


def test_smem_scratch_after_the_32nd_buffer_reads_as_a_scalar():
    """An SMEM scratch at index 39 of the job's 64, written at step 0 and
    read by the scalar core at step 1: the verifier's masks of readable
    scratch hold 64 bits (at 32 it refused this read)."""
    n = 39
    def kernel(x_ref, o_ref, *scratch):
        vm, sm = scratch[:n], scratch[n]
        i = pl.program_id(0)

        @pl.when(i == 0)
        def _():
            sm[0] = 3

        for r in vm:
            r[...] = x_ref[...]
        acc = vm[0][...]
        for r in vm[1:]:
            acc = acc + r[...]
        o_ref[...] = acc * (sm[0] + i).astype(jnp.float32)
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32),
                         grid=(2,), in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
                         out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                         scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)] * n
                         + [pltpu.SMEM((1,), jnp.int32)])(x)
    np.testing.assert_allclose(np.asarray(out), np.concatenate([x * n * 3, x * n * 4]))
