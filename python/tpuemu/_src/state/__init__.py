# SPDX-License-Identifier: MIT
"""jax._src.state: discharge alone."""
