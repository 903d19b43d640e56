# SPDX-License-Identifier: MIT
"""The Pallas TPU quickstart (docs/pallas/tpu/quickstart.md) as written there:
pl.kernel over a pltpu.TensorCoreMesh, VMEM scratch from scratch_types,
pltpu.sync_copy, jax.lax.axis_index('core') and emit_pipeline split over the
cores. Each example runs on the test's device and, in a child process, on
devices of 2 and 3 TensorCores (an even and an uneven split)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def fill_42():
    @pl.kernel(
        out_type=jax.ShapeDtypeStruct((128,), jnp.float32),
        mesh=pltpu.TensorCoreMesh(axis_name='core'),
        scratch_types=dict(o_vmem=pltpu.VMEM((128,), jnp.float32)),
    )
    def fill_42(o_ref, o_vmem):
        o_vmem[...] = jnp.full_like(o_vmem, 42.0)
        pltpu.sync_copy(o_vmem, o_ref)

    return fill_42()


def iota():
    tpu_info = pltpu.get_tpu_info()

    @pl.kernel(
        out_type=jax.ShapeDtypeStruct((128 * tpu_info.num_cores,), jnp.float32),
        mesh=pltpu.TensorCoreMesh(axis_name='core'),
        scratch_types=dict(o_vmem=pltpu.VMEM((128,), jnp.float32)),
    )
    def kernel(o_ref, o_vmem):
        i = jax.lax.axis_index('core')
        o_vmem[...] = jnp.arange(128, dtype=jnp.float32) + i * 128
        pltpu.sync_copy(o_vmem, o_ref.at[pl.ds(i * 128, 128)])

    return kernel()


def add_matrices_pipelined(x, y, block=128):
    @pl.kernel(
        out_type=jax.ShapeDtypeStruct.like(x),
        mesh=pltpu.TensorCoreMesh(axis_name='core'),
    )
    def kernel(x_hbm, y_hbm, o_hbm):
        def add_body(x_vmem, y_vmem, o_vmem):
            o_vmem[...] = x_vmem[...] + y_vmem[...]

        pltpu.emit_pipeline(
            add_body,
            grid=(x_hbm.shape[0] // block, x_hbm.shape[1] // block),
            in_specs=[
                pl.BlockSpec((block, block), lambda i, j: (i, j)),
                pl.BlockSpec((block, block), lambda i, j: (i, j)),
            ],
            out_specs=pl.BlockSpec((block, block), lambda i, j: (i, j)),
            core_axis_name='core',
            dimension_semantics=(pltpu.PARALLEL, pltpu.ARBITRARY),
        )(x_hbm, y_hbm, o_hbm)
    return kernel(x, y)


def test_fill_42():
    np.testing.assert_array_equal(fill_42(), np.full((128,), 42.0, np.float32))


def test_iota_one_chunk_per_core():
    n = pltpu.get_tpu_info().num_cores
    np.testing.assert_array_equal(iota(), np.arange(128 * n, dtype=np.float32))


def test_add_matrices_pipelined():
    x = 2 * np.ones((256, 256), np.float32)
    y = 3 * np.ones((256, 256), np.float32)
    np.testing.assert_array_equal(add_matrices_pipelined(x, y), np.full((256, 256), 5.0))


def test_add_matrices_pipelined_distinct_blocks():
    # every block distinct, so a block written to the wrong place shows
    rng = np.random.default_rng(7)
    x = rng.standard_normal((384, 256)).astype(np.float32)
    y = rng.standard_normal((384, 256)).astype(np.float32)
    np.testing.assert_array_equal(add_matrices_pipelined(x, y), x + y)


def test_tpu_info_names_the_device():
    info = pltpu.get_tpu_info()
    assert info.num_cores >= 1 and info.vmem_capacity_bytes > 0
    assert info.mxu_column_size in (128, 256)


def test_axis_index_of_an_unknown_axis_is_refused():
    @pl.kernel(out_type=jax.ShapeDtypeStruct((128,), jnp.float32),
               mesh=pltpu.TensorCoreMesh(axis_name='core'),
               scratch_types=[pltpu.VMEM((128,), jnp.float32)])
    def kernel(o_ref, o_vmem):
        o_vmem[...] = jnp.zeros((128,), jnp.float32) + jax.lax.axis_index('x')
        pltpu.sync_copy(o_vmem, o_ref)

    with pytest.raises(jax.TraceError, match="axis_index\\('x'\\): no mesh axis"):
        kernel()


def test_a_mesh_larger_than_the_device_is_refused():
    n = pltpu.get_tpu_info().num_cores
    with pytest.raises(ValueError, match="cores on a device of"):
        pltpu.TensorCoreMesh(axis_name='core', num_cores=n + 1)


# The same examples on devices of several TensorCores: each core must take
# its own share (an even split over 2 cores, an uneven one of 3 rows of
# blocks over 3 and of 5 over 2).
_CHILD = """
import numpy as np
import tpuemu.pallas.tpu as pltpu
import test_tpu_quickstart as q
assert pltpu.get_tpu_info().num_cores == {cores}
np.testing.assert_array_equal(q.fill_42(), np.full((128,), 42.0, np.float32))
np.testing.assert_array_equal(q.iota(), np.arange(128 * {cores}, dtype=np.float32))
rng = np.random.default_rng(3)
for rows in (256, 384, 640):
    x = rng.standard_normal((rows, 256)).astype(np.float32)
    y = rng.standard_normal((rows, 256)).astype(np.float32)
    np.testing.assert_array_equal(q.add_matrices_pipelined(x, y), x + y)
print("ok")
"""


@pytest.mark.parametrize("cores", [2, 3])
def test_examples_on_a_device_of_several_cores(cores):
    env = dict(os.environ, TPURT_DEVICE="sim:cores=%d" % cores)
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join([here, os.path.join(here, "..", "..", "python"),
                                         env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _CHILD.format(cores=cores)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
