# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/megablox/common.py's dtype rules,
transcribed against tpuemu (only the imports changed)."""
import tpuemu.numpy as jnp


def assert_is_supported_dtype(dtype):
    if dtype != jnp.bfloat16 and dtype != jnp.float32:
        raise ValueError(f"Expected bfloat16 or float32 array but got {dtype}.")


def select_input_dtype(lhs, rhs):
    """bf16 x bf16 on the MXU (TPU v4 and later); mixed inputs in f32."""
    if lhs.dtype == jnp.bfloat16 and rhs.dtype == jnp.bfloat16:
        return jnp.bfloat16
    return jnp.float32
