# SPDX-License-Identifier: MIT
"""jax.nn in a kernel body: the device's activations, and softmax."""
from . import lax, numpy as jnp
from . import _trace
from ._trace import call


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
    """jax.nn.gelu: the device's unary op for the tanh form (JAX's default);
    approximate=False is x * (1 + erf(x / sqrt(2))) / 2, as jax.nn's."""
    if approximate:
        return call("jax.nn.gelu", x)
    return x * (lax.erf(x * 0.7071067811865476) + 1.0) * 0.5


def _max_kw():
    # on the host, JAX's max(x, initial=-inf): the elementwise max after the
    # reduction is one of the ops pl.estimate_cost counts (a kernel's jnp.max
    # takes no initial, and -inf changes no nonempty max)
    return {} if _trace._rec is not None else {"initial": -jnp.inf}


def softmax(x, axis=-1):
    """jax.nn.softmax along one axis of a 2-D value: exp(x - max) / sum."""
    e = jnp.exp(x - jnp.max(x, axis=axis, keepdims=True, **_max_kw()))
    return e / jnp.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    s = x - jnp.max(x, axis=axis, keepdims=True, **_max_kw())
    return s - jnp.log(jnp.sum(jnp.exp(s), axis=axis, keepdims=True))


__all__ = ["relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax"]
