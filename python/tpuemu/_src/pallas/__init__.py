# SPDX-License-Identifier: MIT
"""jax._src.pallas: cost_estimate and mosaic.error_handling alone."""
