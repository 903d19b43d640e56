# SPDX-License-Identifier: MIT
"""jax._src.pallas: cost_estimate alone."""
