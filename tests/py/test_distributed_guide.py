# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""JAX's docs/pallas/tpu/distributed.md, the parts meaningful on one
device: the right permute and all-gather on a ring of one (the remote DMA
to oneself as the local copy it is), DMA semaphores as progress counters
(semaphore_read), regular semaphores (signal, wait, read; zero at the
end), the failure modes the page lists (over-signalled, over-waited, a
copy never waited for: each a clear error, never a hang), the
double-buffered all-reduce on one device (HBM double buffer as an output,
working/receiving slots by lax.rem of the step, the REGULAR capacity
semaphore handshake, a second barrier semaphore from pl.run_scoped). The
remote copies themselves are a gap (strict xfail). NumPy references."""
import functools

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

num_devices = 1
ANY = pl.BlockSpec(memory_space=pl.ANY)
SMEM = pl.BlockSpec(memory_space=pltpu.SMEM)


def _x(shape=(8, 128)):
    return np.asarray(jax.random.uniform(jax.random.key(0), shape))


# --- Example: Right Permute, on a ring of one device ---

def right_permute_kernel(input_ref, output_ref, send_sem, recv_sem):
    del send_sem	# a local copy has one semaphore
    copy = pltpu.make_async_copy(src_ref=input_ref, dst_ref=output_ref, sem=recv_sem)
    copy.start()
    copy.wait()


def test_right_permute_ring_of_one():
    x = _x()
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=0, in_specs=[ANY], out_specs=ANY,
        scratch_shapes=([pltpu.SemaphoreType.DMA] * 2))
    r = pl.pallas_call(right_permute_kernel, out_shape=jax.ShapeDtypeStruct((8, 128),
                                                                            jnp.float32),
                       grid_spec=grid_spec)(x)
    perm = [(src + 1) % num_devices for src in range(num_devices)]
    np.testing.assert_array_equal(np.asarray(r), np.stack([x])[perm[0]])


def remote_right_permute_kernel(input_ref, output_ref, send_sem, recv_sem):
    my_id = lax.axis_index('x')
    right_neighbor = lax.rem(my_id + 1, num_devices)
    op = pltpu.make_async_remote_copy(
        src_ref=input_ref, dst_ref=output_ref, send_sem=send_sem, recv_sem=recv_sem,
        device_id=(right_neighbor,), device_id_type=pl.DeviceIdType.MESH)
    op.start()
    op.wait()


@pytest.mark.xfail(strict=True, raises=(AttributeError, pl.TraceError), reason=(
    "remote DMA (pltpu.make_async_remote_copy, pl.DeviceIdType) and device mesh axes "
    "(lax.axis_index of a shard_map axis) are not supported: one device, no ICI"))
def test_remote_right_permute():
    x = _x()
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=0, in_specs=[ANY], out_specs=ANY,
        scratch_shapes=([pltpu.SemaphoreType.DMA] * 2))
    r = pl.pallas_call(remote_right_permute_kernel,
                       out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
                       grid_spec=grid_spec)(x)
    np.testing.assert_array_equal(np.asarray(r), x)


# --- Example: All-gather, its local copy into the device's own slot ---

def test_all_gather_local_slot():
    def kernel(input_ref, output_ref, local_copy_sem):
        my_id = 0	# lax.axis_index('x') on a ring of one
        op = pltpu.make_async_copy(src_ref=input_ref, dst_ref=output_ref.at[my_id],
                                   sem=local_copy_sem)
        op.start()
        op.wait()
    x = _x()
    r = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((num_devices, 8, 128),
                                                              jnp.float32),
                       grid_spec=pltpu.PrefetchScalarGridSpec(
                           num_scalar_prefetch=0, in_specs=[ANY], out_specs=ANY,
                           scratch_shapes=[pltpu.SemaphoreType.DMA]))(x)
    np.testing.assert_array_equal(np.asarray(r), x[None])


# --- DMA semaphores: progress counters; regular semaphores ---

def test_dma_semaphore_counts_then_zero():
    """While a copy is in flight its semaphore is non-zero (bytes, as the
    page's mental model); wait takes it back to zero."""
    def kernel(x_ref, o_ref, v_ref, sem):
        copy = pltpu.make_async_copy(x_ref, o_ref, sem)
        copy.start()
        v_ref[0] = pl.semaphore_read(sem)
        copy.wait()
        v_ref[1] = pl.semaphore_read(sem)
    x = _x()
    o, v = pl.pallas_call(kernel, in_specs=[ANY], out_specs=(ANY, SMEM),
                          out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.float32),
                                     jax.ShapeDtypeStruct((2,), jnp.int32)),
                          scratch_shapes=[pltpu.SemaphoreType.DMA])(x)
    np.testing.assert_array_equal(np.asarray(o), x)
    v = np.asarray(v)
    assert v[0] > 0 and v[1] == 0


def test_regular_semaphore_signal_wait_read():
    def kernel(o_ref, sem):
        pl.semaphore_signal(sem, 2)
        pl.semaphore_signal(sem, inc=3)
        o_ref[0] = pl.semaphore_read(sem)
        pl.semaphore_wait(sem, 4)
        o_ref[1] = pl.semaphore_read(sem)
        pl.semaphore_wait(sem, 1)
        o_ref[2] = pl.semaphore_read(sem)
    r = pl.pallas_call(kernel, out_specs=SMEM, out_shape=jax.ShapeDtypeStruct((3,), jnp.int32),
                       scratch_shapes=[pltpu.SemaphoreType.REGULAR])()
    np.testing.assert_array_equal(np.asarray(r), [5, 1, 0])


def test_semaphore_array_per_step():
    """recv_sems.at[step]: a semaphore array, one per grid step."""
    def kernel(x_ref, o_ref, sems):
        s = pl.program_id(0)
        copy = pltpu.make_async_copy(x_ref.at[s], o_ref.at[s], sems.at[s])
        copy.start()
        copy.wait()
    x = _x((3, 8, 128))
    r = pl.pallas_call(kernel, grid=(3,), in_specs=[ANY], out_specs=ANY,
                       out_shape=jax.ShapeDtypeStruct((3, 8, 128), jnp.float32),
                       scratch_shapes=[pltpu.SemaphoreType.DMA((3,))])(x)
    np.testing.assert_array_equal(np.asarray(r), x)


# --- Failure modes: each a clear error ---

def _fails(kernel, match, *args, in_specs=None, out_specs=SMEM,
           out_shape=jax.ShapeDtypeStruct((1,), jnp.int32), sems=(pltpu.SemaphoreType.REGULAR,)):
    kw = {} if in_specs is None else {"in_specs": in_specs}
    with pytest.raises(Exception, match=match):
        pl.pallas_call(kernel, out_specs=out_specs, out_shape=out_shape,
                       scratch_shapes=list(sems), **kw)(*args)


def test_over_signalled_semaphore_fails():
    def kernel(o_ref, sem):
        pl.semaphore_signal(sem, 2)
        o_ref[0] = 1
    _fails(kernel, "holds 2, not 0")


def test_over_waited_semaphore_fails_not_hangs():
    def kernel(o_ref, sem):
        pl.semaphore_wait(sem, 1)
    _fails(kernel, "nothing else on the core can signal it")


def test_copy_never_waited_fails():
    def kernel(x_ref, o_ref, sem):
        pltpu.make_async_copy(x_ref, o_ref, sem).start()
    _fails(kernel, "a copy started but never waited", _x(), in_specs=[ANY], out_specs=ANY,
           out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
           sems=(pltpu.SemaphoreType.DMA,))


# --- Example: All-Reduce Sum, double-buffered, on one device ---

def local_barrier(double_barrier=True):
    """The page's barrier with both neighbours, the ring of one's: each
    'neighbour' is this device, so the signals are to itself."""
    @functools.partial(pl.run_scoped, barrier_sem=pltpu.SemaphoreType.REGULAR)
    def _(barrier_sem):
        for _neighbor in range(2):
            pl.semaphore_signal(barrier_sem, inc=1)
        pl.semaphore_wait(barrier_sem, 2)
        if double_barrier:
            @functools.partial(pl.run_scoped, second_barrier=pltpu.SemaphoreType.REGULAR)
            def _(second_barrier):
                for _neighbor in range(2):
                    pl.semaphore_signal(second_barrier, inc=1)
                pl.semaphore_wait(second_barrier, 2)


def all_reduce_kernel(x_ref, o_ref, hbm_scratch, copy_sem, remote_recv_sem,
                      remote_send_sem, capacity_sem, receive_scratch):
    del remote_send_sem
    outer_step = pl.program_id(0)
    working_slot = lax.rem(outer_step, 2)
    receiving_slot = 1 - working_slot

    @pl.when(outer_step == 0)
    def _():
        local_barrier()
        o_ref[...] = jnp.zeros_like(o_ref)
        receive_scratch[...] = jnp.zeros_like(receive_scratch)
        initial_copy = pltpu.make_async_copy(x_ref, hbm_scratch.at[working_slot],
                                             remote_recv_sem)
        initial_copy.start()
        initial_copy.wait()

    # ready to receive (to the left neighbour: this device)
    pl.semaphore_signal(capacity_sem, inc=1)
    local_copy = pltpu.make_async_copy(hbm_scratch.at[working_slot], receive_scratch, copy_sem)
    local_copy.start()
    pl.semaphore_wait(capacity_sem, 1)
    # pass the value on, into the receiving slot
    remote_copy = pltpu.make_async_copy(hbm_scratch.at[working_slot],
                                        hbm_scratch.at[receiving_slot], remote_recv_sem)
    remote_copy.start()
    local_copy.wait()
    o_ref[...] += receive_scratch[...]
    remote_copy.wait()


@pytest.mark.parametrize("steps", [1, 4])
def test_all_reduce_double_buffered(steps):
    """On a ring of one, each step receives the device's own value back:
    o is steps * x, and the double buffer holds x in both slots."""
    x = _x()
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=0,
        in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=[pl.BlockSpec(memory_space=pltpu.VMEM), ANY],
        grid=(steps,),
        scratch_shapes=([pltpu.SemaphoreType.DMA] * 3 + [pltpu.SemaphoreType.REGULAR] +
                        [pltpu.VMEM((8, 128), jnp.float32)]))
    o, buf = pl.pallas_call(
        all_reduce_kernel,
        out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.float32),
                   jax.ShapeDtypeStruct((2, 8, 128), jnp.float32)),
        grid_spec=grid_spec, compiler_params=pltpu.CompilerParams(collective_id=0))(x)
    np.testing.assert_allclose(np.asarray(o), x * steps, rtol=1e-6)
    buf = np.asarray(buf)
    np.testing.assert_array_equal(buf[0], x)
    if steps > 1:
        np.testing.assert_array_equal(buf[1], x)
