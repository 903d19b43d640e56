# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's tests/pallas/tpu_pallas_memory_spaces_test.py:
pl.get_memory_space of arrays (pl.with_memory_constraint; HBM where none
was given) and of refs (jax.new_ref / pl.run_state refs keep their
array's space), a pallas_call whose out_shape is its input's space
called with (shape, dtype), and a core_map over refs in HBM or VMEM.
jax.jit(f).lower(...) is jax.jit(f)(zeros): tpuemu has no lowering step.
The device has one core, so the >1-core VMEM refusal is not reached."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def add_one(x):
    memory_space = pl.get_memory_space(x)

    def f(x_ref, y_ref):
        y_ref[...] = x_ref[...] + 1

    return pl.pallas_call(
        f,
        in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
        out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
        out_shape=memory_space(x.shape, x.dtype),
    )(x)


def add_one_core_map(x):
    mesh = pltpu.create_tensorcore_mesh("x")

    y = pl.empty_like(x, memory_space=pl.get_memory_space(x))

    @pl.run_state
    def f(refs):
        x_ref, y_ref = refs

        x_memory_space = pl.get_memory_space(x_ref)
        y_memory_space = pl.get_memory_space(y_ref)

        @pl.core_map(mesh)
        def _():
            def kernel(vmem_ref):
                if x_memory_space == pltpu.VMEM:
                    vmem_ref[...] = x_ref[...]
                else:
                    pltpu.sync_copy(x_ref, vmem_ref)

                vmem_ref[...] += 1

                if y_memory_space == pltpu.VMEM:
                    y_ref[...] = vmem_ref[...]
                else:
                    pltpu.sync_copy(vmem_ref, y_ref)

            pl.run_scoped(kernel, pltpu.VMEM(x.shape, x.dtype))

    _, y = f((x, y))
    return y


def _x():
    return np.asarray(jax.random.normal(jax.random.key(0), (1024, 1024), jnp.float32))


# --- PallasCallMemorySpacesTest ---

@pytest.mark.parametrize("memory_space", ["HBM", "VMEM"])
def test_can_get_memory_space_at_trace_time(memory_space):
    memory_space = getattr(pltpu, memory_space)

    def f(x):
        x = pl.with_memory_constraint(x, memory_space)
        assert pl.get_memory_space(x) == memory_space
        return x

    _ = jax.jit(f)(jnp.zeros((1024, 1024), jnp.float32))


def test_can_query_memory_space_in_pallas_call():
    x = _x()
    y = jax.jit(add_one)(x)
    np.testing.assert_allclose(y, x + 1)


@pytest.mark.parametrize("memory_space", ["HBM", "VMEM"])
def test_constrain_memory_space(memory_space):
    memory_space = getattr(pltpu, memory_space)
    x = _x()

    def f(x):
        x = pl.with_memory_constraint(x, memory_space)
        assert pl.get_memory_space(x) == memory_space
        return add_one(x)

    y = jax.jit(f)(x)
    np.testing.assert_allclose(y, x + 1)


# --- CoreMapMemorySpacesTest ---

@pytest.mark.parametrize("memory_space", ["HBM", "VMEM"])
def test_can_get_memory_space_of_refs_at_trace_time(memory_space):
    memory_space = getattr(pltpu, memory_space)

    def f(x):
        x = pl.with_memory_constraint(x, memory_space)

        @pl.run_state
        def body(x_ref):
            assert pl.get_memory_space(x_ref) == memory_space

        return body(x)

    _ = jax.jit(f)(jnp.zeros((1024, 1024), jnp.float32))


def test_core_map_can_query_memory_space():
    """CoreMapMemorySpacesTest.test_can_query_memory_space_in_pallas_call."""
    x = _x()
    y = jax.jit(add_one_core_map)(x)
    np.testing.assert_allclose(y, x + 1)


@pytest.mark.parametrize("memory_space", ["HBM", "VMEM"])
def test_core_map_constrain_memory_space(memory_space):
    """CoreMapMemorySpacesTest.test_constrain_memory_space (one core: the
    VMEM case runs; the two refs' 4 MiB arrays and the 4 MiB scratch fit
    the 16 MiB default, each ref's input and output one VMEM buffer, as
    Mosaic's)."""
    memory_space = getattr(pltpu, memory_space)
    x = _x()

    def f(x):
        x = pl.with_memory_constraint(x, memory_space)
        assert pl.get_memory_space(x) == memory_space
        return add_one_core_map(x)

    y = jax.jit(f)(x)
    np.testing.assert_allclose(y, x + 1)
