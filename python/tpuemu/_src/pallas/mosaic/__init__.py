# SPDX-License-Identifier: MIT
"""jax._src.pallas.mosaic: error_handling alone."""
