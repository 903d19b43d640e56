# SPDX-License-Identifier: MIT
"""jax.experimental.pallas.ops: JAX's Pallas library kernels, under tpu."""
