# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/matmul.py, the Pallas TPU guide's
example kernel, transcribed against tpuemu (only the imports changed): a
blocked matmul accumulating in a VMEM scratch, in int32 for int8 and
int4 operands, float32 otherwise. Tests: test_jax_ports9c.py."""
import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def matmul_kernel(x_tile_ref, y_tile_ref, o_tile_ref, acc_ref):
    @pl.when(pl.program_id(2) == 0)
    def init():
        acc_ref[...] = jnp.zeros_like(acc_ref)

    acc_ref[...] = acc_ref[...] + jnp.dot(x_tile_ref[...], y_tile_ref[...],
                                          preferred_element_type=acc_ref.dtype)
    o_tile_ref[...] = acc_ref[...].astype(o_tile_ref.dtype)


def matmul(x, y, *, block_shape, block_k=256, out_dtype=None, debug=False):
    if out_dtype is None:
        if x.dtype != y.dtype:
            raise TypeError(f"Cannot deduce output dtype for different input dtypes: "
                            f"{x.dtype}, {y.dtype}")
        out_dtype = x.dtype
    acc_dtype = jnp.float32
    if x.dtype in [jnp.int8, jnp.int4, jnp.uint8, jnp.uint4]:
        acc_dtype = jnp.int32

    l, r = block_shape
    return pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), out_dtype),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[pl.BlockSpec((l, block_k), lambda i, _, k: (i, k)),
                      pl.BlockSpec((block_k, r), lambda _, j, k: (k, j))],
            out_specs=pl.BlockSpec((l, r), lambda i, j, k: (i, j)),
            grid=(x.shape[0] // l, y.shape[1] // r, x.shape[1] // block_k),
            scratch_shapes=[pltpu.VMEM((l, r), acc_dtype)],
        ),
        compiler_params=pltpu.TPUCompilerParams(
            dimension_semantics=("parallel", "parallel", "arbitrary")),
        debug=debug,
    )(x, y)
