# SPDX-License-Identifier: MIT
"""jax.errors: the exception types code catches by name."""


class ConcretizationTypeError(TypeError):
    """JAX's error for a traced value where a concrete one is needed. Never
    raised here: tpuemu's jax.jit runs the function on concrete values."""
