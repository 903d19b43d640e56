# SPDX-License-Identifier: MIT
"""jax._src.state.discharge: run_state (pl.run_state), the one name
JAX's tests take from it here."""
from ..._state import run_state

__all__ = ["run_state"]
