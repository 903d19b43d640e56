# SPDX-License-Identifier: MIT
"""jax.experimental.pallas.ops.tpu: JAX's Pallas TPU library kernels,
transcribed, each module at JAX's path with JAX's public names:
flash_attention, paged_attention, megablox (gmm, tgmm),
ragged_paged_attention, splash_attention, matmul, quantized_matmul, and
the random package's PRNG impls. Import them as JAX's users do (`from
jax.experimental.pallas.ops.tpu import flash_attention` is `from
tpuemu.experimental.pallas.ops.tpu import flash_attention`); none is
imported until asked for."""
