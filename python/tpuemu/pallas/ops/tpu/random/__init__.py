# SPDX-License-Identifier: MIT
"""jax.experimental.pallas.ops.tpu.random: JAX's PRNG impls whose bits a
pallas_call draws, "pallas_threefry2x32" (threefry.py) and
"pallas_philox4x32" (philox.py). JAX registers them when these modules
are imported; here jax.random.key(seed, impl=...) takes their names
without the import (importing them, as JAX's tests do, is harmless)."""
