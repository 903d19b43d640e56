# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
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
x = rng.standard_normal((64, 256)).astype(np.float32)
np.testing.assert_array_equal(q.add_one(x), x + 1)
x = rng.standard_normal((48, 512)).astype(np.float32)
np.testing.assert_array_equal(q.indexed_add_one(x, np.array([256], np.int32)),
                              x[:, 256:512] + 1)
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


# --- docs/pallas/tpu/core_map.md (without shard_map: one device here) ---

def add_one_body(in_vmem, out_vmem):
    out_vmem[...] = in_vmem[...] + 1


def add_one(x):
    tc_mesh = pltpu.create_tensorcore_mesh('core')

    def add_one_kernel(x_hbm_ref, o_hbm_ref):
        in_shape = x_hbm_ref.shape
        pltpu.emit_pipeline(
            add_one_body,
            grid=(in_shape[0] // 8, in_shape[1] // 128),
            in_specs=[pl.BlockSpec(block_shape=(8, 128), index_map=lambda i, j: (i, j))],
            out_specs=[pl.BlockSpec(block_shape=(8, 128), index_map=lambda i, j: (i, j))],
            core_axis_name='core',
            dimension_semantics=(pltpu.PARALLEL, pltpu.ARBITRARY),
        )(x_hbm_ref, o_hbm_ref)
    return pl.kernel(add_one_kernel, out_shape=x, mesh=tc_mesh, scratch_shapes=[])(x)


def indexed_add_one(x, index):
    """The guide's scalar-prefetch example: the cores split the rows by hand
    (index maps of the core index) and an offset read into SMEM moves the
    columns; the inputs reach the body as one tuple of refs."""
    tc_mesh = pltpu.create_tensorcore_mesh('core')
    num_cores = len(tc_mesh.devices)
    out_cols = x.shape[1] // 2

    def indexed_add_one_kernel(in_refs, out_refs, i_smem_ref):
        (x_hbm_ref, i_hbm_ref), o_hbm_ref = in_refs, out_refs
        in_shape = x_hbm_ref.shape
        pltpu.sync_copy(i_hbm_ref, i_smem_ref)
        core_idx = jax.lax.axis_index('core')
        core_slc_size = in_shape[0] // num_cores
        i_map = lambda i: core_idx * core_slc_size // 8 + i	# noqa: E731
        j_map = lambda j: i_smem_ref[0] // 128 + j	# noqa: E731
        pltpu.emit_pipeline(
            add_one_body,
            grid=(core_slc_size // 8, out_cols // 128),
            in_specs=[pl.BlockSpec(block_shape=(8, 128),
                                   index_map=lambda i, j: (i_map(i), j_map(j)))],
            out_specs=[pl.BlockSpec(block_shape=(8, 128),
                                    index_map=lambda i, j: (i_map(i), j))],
        )(x_hbm_ref, o_hbm_ref)

    out_shape = jax.ShapeDtypeStruct((x.shape[0], out_cols), x.dtype)
    return pl.kernel(indexed_add_one_kernel, out_shape=out_shape, mesh=tc_mesh,
                     scratch_shapes=[pltpu.SMEM((1,), jnp.int32)])((x, index))


def test_core_map_add_one():
    x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    np.testing.assert_array_equal(add_one(x), x + 1)


def test_core_map_indexed_add_one():
    x = np.random.default_rng(1).standard_normal((32, 512)).astype(np.float32)
    idx = 128
    y = indexed_add_one(x, np.array([idx], np.int32))
    np.testing.assert_array_equal(y, x[:, idx:idx + 256] + 1)


def test_tensorcore_mesh_lists_its_cores():
    mesh = pltpu.create_tensorcore_mesh('core')
    assert len(mesh.devices) == pltpu.get_tpu_info().num_cores
    assert mesh.shape == {'core': len(mesh.devices)}


def test_kernel_outputs_as_a_tuple_are_parameters_each():
    @pl.kernel(out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.float32),
                          jax.ShapeDtypeStruct((8, 128), jnp.float32)),
               mesh=pltpu.TensorCoreMesh('core'),
               scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])
    def twice(x_ref, a_ref, b_ref, tmp):
        pltpu.sync_copy(x_ref, tmp)
        tmp[...] = tmp[...] * 2
        pltpu.sync_copy(tmp, a_ref)
        tmp[...] = tmp[...] + 1
        pltpu.sync_copy(tmp, b_ref)

    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    a, b = twice(x)
    np.testing.assert_array_equal(a, 2 * x)
    np.testing.assert_array_equal(b, 2 * x + 1)


# --- docs/pallas/tpu/pipelining.md: megacore ---

def add_matrices_kernel(x_vmem_ref, y_vmem_ref, z_vmem_ref):
    x_vregs = x_vmem_ref[:, :]
    y_vregs = y_vmem_ref[:, :]
    z_vmem_ref[:, :] = x_vregs + y_vregs


def add_matrices_pipelined_megacore(x, y):
    block_spec = pl.BlockSpec((256, 512), lambda i: (i, 0))
    return pl.pallas_call(
        add_matrices_kernel, out_shape=x, in_specs=[block_spec, block_spec],
        out_specs=block_spec, grid=(2,),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",)))(x, y)


def test_pipelining_megacore():
    x, y = np.ones((512, 512), np.float32), np.ones((512, 512), np.float32)
    y[256:] = 3
    np.testing.assert_array_equal(add_matrices_pipelined_megacore(x, y), x + y)


def test_pipelining_emit_pipeline_core_axis():
    """The guide's template: emit_pipeline(..., core_axis=0) inside a
    pallas_call whose first grid dimension is parallel ("sequential" is
    older JAX's arbitrary)."""
    def kernel_body(x_hbm, o_hbm):
        pltpu.emit_pipeline(add_one_body, grid=(8, 2),
                            in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
                            out_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
                            core_axis=0,
                            dimension_semantics=(pltpu.PARALLEL, pltpu.ARBITRARY))(x_hbm, o_hbm)

    x = np.random.default_rng(2).standard_normal((64, 256)).astype(np.float32)
    any_spec = pl.BlockSpec(memory_space=pltpu.ANY)
    out = pl.pallas_call(
        kernel_body, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32), grid=(2, 1),
        in_specs=[any_spec], out_specs=any_spec,
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "sequential")))(x)
    np.testing.assert_array_equal(out, x + 1)


# --- tpu_pallas_test.py PallasCallPipelineTest: program_id in a pipeline body ---

def test_pipeline_matmul():
    """test_pipeline_matmul: inside emit_pipeline's body pl.program_id and
    pl.num_programs are the pipeline's grid, not the kernel's. The test's
    (4, 4, 4) grid of 128-blocks, unrolled into one kernel body. Its 'hbm'
    case (pl.ANY refs); the 'vmem' case pipelines VMEM refs, which the front
    end's emit_pipeline does not."""
    rng = np.random.default_rng(5)
    x = rng.random((512, 512)).astype(np.float32)
    y = rng.random((512, 512)).astype(np.float32)

    def matmul_pipeline(x_ref, y_ref, z_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            z_ref[...] = jnp.zeros(z_ref.shape, jnp.float32)

        z_ref[...] += x_ref[...] @ y_ref[...]

    def matmul_kernel(x_ref, y_ref, z_ref):
        pltpu.emit_pipeline(
            matmul_pipeline,
            grid=(4, 4, 4),
            in_specs=[pl.BlockSpec(lambda i, j, k: (i, k), (128, 128)),
                      pl.BlockSpec(lambda i, j, k: (k, j), (128, 128))],
            out_specs=pl.BlockSpec(lambda i, j, k: (i, j), (128, 128)),
        )(x_ref, y_ref, z_ref)

    z = pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((512, 512), jnp.float32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.ANY), pl.BlockSpec(memory_space=pltpu.ANY)],
        out_specs=pl.BlockSpec(memory_space=pltpu.ANY),
    )
    np.testing.assert_allclose(z(x, y), x.astype(np.float64) @ y, rtol=1e-4)


def test_num_programs_is_the_static_grid():
    seen = []

    def kernel(o_ref):
        seen.append(pl.num_programs(0))
        o_ref[...] = jnp.zeros((8, 128), jnp.float32) + pl.num_programs(0)

    out = pl.pallas_call(kernel, grid=(3,),
                         out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
                         out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))()
    assert seen == [3]
    np.testing.assert_array_equal(out, np.full((8, 128), 3.0, np.float32))
