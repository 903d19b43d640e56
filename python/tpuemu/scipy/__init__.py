# SPDX-License-Identifier: MIT
"""jax.scipy: the special functions kernels and their references use."""
from . import special  # noqa: F401
