# SPDX-License-Identifier: MIT
"""jax.experimental.pallas.ops as JAX's tests import from it: only the
kernels a ported test needs (tpu.random's PRNG impls)."""
