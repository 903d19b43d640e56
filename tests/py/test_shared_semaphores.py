# SPDX-License-Identifier: MIT
"""pl.empty_ref_like(pltpu.SemaphoreType...): semaphores several kernel
calls share, closed over as refs are. A DMA one kernel starts is waited
for by a later one; a REGULAR semaphore signalled in one call is waited
on in another; the counts are the ref's between calls (their sum must be
waited off before the device lets a job end, so a count left over is a
job error, not a lost signal); and copies signalling a REGULAR
semaphore, as TPU v6+ lets them."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

MESH = pltpu.TensorCoreMesh(axis_name="core", num_cores=1)


def _run(fn):
    pl.kernel(fn, out_shape=(), mesh=MESH)()


def test_a_copy_started_in_one_kernel_is_waited_in_a_later_one():
    src = jax.new_ref(np.arange(8 * 128, dtype=np.float32).reshape(8, 128))
    dst = pl.empty_ref_like(pltpu.HBM((4, 8, 128), jnp.float32))
    sems = pl.empty_ref_like(pltpu.SemaphoreType.DMA((4,)))

    def start():
        for k in range(4):
            pltpu.make_async_copy(src, dst.at[k], sems.at[k]).start()
    _run(start)

    def done():
        for k in (3, 1, 0, 2):
            pltpu.make_async_copy(src, dst.at[k], sems.at[k]).wait()
    _run(done)
    np.testing.assert_array_equal(jax.freeze(dst), np.broadcast_to(jax.freeze(src), (4, 8, 128)))
    assert np.all(np.asarray(jax.freeze(sems)) == 0)


def test_a_regular_semaphore_carries_its_count():
    sem = pl.empty_ref_like(pltpu.SemaphoreType.REGULAR(()))
    out = pl.empty_ref_like(pltpu.SMEM((1,), jnp.int32))

    def signal():
        pltpu.semaphore_signal(sem, 3)
    _run(signal)
    _run(signal)
    assert int(np.asarray(jax.freeze(sem))) == 6

    def take():
        out[0] = pltpu.semaphore_read(sem)
        pltpu.semaphore_wait(sem, 6)
    _run(take)
    assert int(np.asarray(jax.freeze(out))[0]) == 6
    assert int(np.asarray(jax.freeze(sem))) == 0


def test_waiting_for_more_than_was_signalled_fails_the_job():
    sem = pl.empty_ref_like(pltpu.SemaphoreType.REGULAR(()))

    def signal():
        pltpu.semaphore_signal(sem, 1)
    _run(signal)

    def take():
        pltpu.semaphore_wait(sem, 2)
    with pytest.raises(jax.TpurtError, match="wait"):
        _run(take)


def test_copies_signal_a_regular_semaphore_by_one_each():
    """Two copies on one REGULAR semaphore (TPU v6+'s DMA signal): its
    count is 2 after their starts, and semaphore_wait(sem, 2) takes both."""
    def kernel(x_hbm, y_hbm, o_ref):
        def body(a, b, sem):
            pltpu.async_copy(x_hbm.at[0], a, sem)
            pltpu.async_copy(x_hbm.at[1], b, sem)
            o_ref[0] = pltpu.semaphore_read(sem)
            pl.semaphore_wait(sem, 2)
            pltpu.sync_copy(b, y_hbm.at[0])
            pltpu.sync_copy(a, y_hbm.at[1])
        pl.run_scoped(body, pltpu.VMEM((8, 128), jnp.float32), pltpu.VMEM((8, 128), jnp.float32),
                      pltpu.SemaphoreType.REGULAR)

    x = np.arange(2 * 8 * 128, dtype=np.float32).reshape(2, 8, 128)
    y, n = pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                          out_specs=(pl.BlockSpec(memory_space=pl.ANY),
                                     pl.BlockSpec(memory_space=pltpu.SMEM)),
                          out_shape=(jax.ShapeDtypeStruct(x.shape, jnp.float32),
                                     jax.ShapeDtypeStruct((1,), jnp.int32)))(x)
    np.testing.assert_array_equal(y, x[::-1])
    assert int(n[0]) == 2
