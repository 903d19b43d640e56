# SPDX-License-Identifier: MIT
"""jax.experimental.pallas.ops.tpu: its random package only."""
