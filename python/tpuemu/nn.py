# SPDX-License-Identifier: MIT
"""jax.nn in a kernel body: the device's activations, and softmax."""
from ._trace import call, trace_error


def _activation(name):
    def f(x):
        return call("jax.nn." + name, x)
    f.__name__ = name
    return f


relu = _activation("relu")
silu = _activation("silu")
sigmoid = _activation("sigmoid")
tanh = _activation("tanh")


def gelu(x, approximate=True):
    """jax.nn.gelu: the device's is the tanh approximation (JAX's default)."""
    if not approximate:
        raise trace_error("jax.nn.gelu(approximate=False) (the erf form) is not supported: "
                          "the device computes the tanh approximation, approximate=True")
    return call("jax.nn.gelu", x)


def softmax(x, axis=-1):
    """jax.nn.softmax along one axis of a 2-D value: exp(x - max) / sum."""
    from . import numpy as jnp
    e = jnp.exp(x - jnp.max(x, axis=axis, keepdims=True))
    return e / jnp.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    from . import numpy as jnp
    s = x - jnp.max(x, axis=axis, keepdims=True)
    return s - jnp.log(jnp.sum(jnp.exp(s), axis=axis, keepdims=True))


__all__ = ["relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax"]
