# SPDX-License-Identifier: MIT
"""jax.nn activations in a kernel body (the device's unary ops)."""
from ._trace import call


def _activation(name):
    def f(x):
        return call("jax.nn." + name, x)
    f.__name__ = name
    return f


relu = _activation("relu")
gelu = _activation("gelu")
silu = _activation("silu")
sigmoid = _activation("sigmoid")
tanh = _activation("tanh")

__all__ = ["relu", "gelu", "silu", "sigmoid", "tanh"]
