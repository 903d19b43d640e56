# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/quantized_matmul/util.py, transcribed
against tpuemu (only the imports changed): unfold_args, quantize_tensor
and next_multiple."""
import tpuemu as jax
import tpuemu.numpy as jnp


def unfold_args(conditions, fn_conditions, fn):
    """Minimise run-time branching of fn by turning jnp bools into Python's."""
    if len(conditions) == 0:
        fn(*fn_conditions)
    else:
        arg = conditions[0]
        if isinstance(arg, bool):
            unfold_args(conditions[1:], fn_conditions + (arg,), fn)
        else:
            assert arg.dtype == jnp.bool and arg.size == 1
            jax.lax.cond(
                arg,
                lambda: unfold_args(conditions[1:], fn_conditions + (True,), fn),
                lambda: unfold_args(conditions[1:], fn_conditions + (False,), fn),
            )


def quantize_tensor(x, n_bits=8, dim=-1):
    max_val = jnp.max(jnp.abs(x), axis=dim, keepdims=True)
    int_min = -(2 ** (n_bits - 1))
    int_max = 2 ** (n_bits - 1) - 1
    scale = max_val / int_max
    x_int = jnp.clip(jnp.rint(x / scale), int_min, int_max).astype(jnp.int8)
    return x_int, scale.astype(jnp.float32)


def next_multiple(x, multiple):
    return ((x + multiple - 1) // multiple) * multiple
