# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/paged_attention/quantization_utils.py,
transcribed against tpuemu (only the imports changed): int8 kv pages
with their per-row scales."""
from typing import NamedTuple

import tpuemu.numpy as jnp


MAX_INT8 = 127.5


class QuantizedTensor(NamedTuple):
    weight: object
    scales: object


def to_int8(x, h):
    return jnp.int8(jnp.rint(x * (MAX_INT8 / h)))


def from_int8(x, h, dtype=jnp.bfloat16):
    return x.astype(dtype) * h / MAX_INT8


def get_quantization_scales(x):
    return jnp.max(jnp.abs(x), axis=-1, keepdims=True)


def quantize_to_int8(x):
    x_scales = get_quantization_scales(x)
    return QuantizedTensor(weight=to_int8(x, x_scales), scales=x_scales)


def unquantize_from_int8(x, dtype=jnp.bfloat16):
    return from_int8(x.weight, x.scales, dtype)
