# SPDX-License-Identifier: MIT
"""jax.nn, in a kernel body and on the host: the device's activations
(relu, silu, sigmoid, tanh, gelu's tanh form) there, NumPy's float32 of
the same formulas here; the rest are jnp compositions, the same text on
both sides."""
import math

from . import _ad, _trace, lax, numpy as jnp
from ._trace import call


def _host(x=None):
    """Not tracing a kernel, and @x is not one of pl.estimate_cost's
    shape-only arrays (those take the device's function: its cost rule);
    or @x is being differentiated: the jnp formula has the rules (_ad)."""
    return isinstance(x, _ad.Tracer) or _trace._rec is None and \
        not getattr(x, "_counted", False)


def _max_kw():
    # on the host, JAX's max(x, initial=-inf): the elementwise max after the
    # reduction is one of the ops pl.estimate_cost counts (a kernel's jnp.max
    # takes no initial, and -inf changes no nonempty max)
    return {} if _trace._rec is not None else {"initial": -jnp.inf}


def _activation(name, host):
    def f(x):
        if _host(x):
            return host(jnp.asarray(x))
        return call("jax.nn." + name, x)
    f.__name__ = name
    return f


def _host_sigmoid(x):
    e = jnp.exp(-jnp.abs(x))		# never overflows
    return jnp.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _host_gelu_tanh(x):
    return 0.5 * x * (1.0 + jnp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


relu = _activation("relu", lambda x: jnp.maximum(x, 0))
sigmoid = _activation("sigmoid", _host_sigmoid)
silu = _activation("silu", lambda x: x * _host_sigmoid(x))
tanh = _activation("tanh", jnp.tanh)
swish = silu


def gelu(x, approximate=True):
    """jax.nn.gelu: the device's unary op for the tanh form (JAX's default);
    approximate=False is x * (1 + erf(x / sqrt(2))) / 2, as jax.nn's."""
    if approximate:
        return _host_gelu_tanh(jnp.asarray(x)) if _host(x) else call("jax.nn.gelu", x)
    if _host(x):
        x = jnp.asarray(x)
        return x * (jnp.asarray(_erf_host(x * 0.7071067811865476)) + 1.0) * 0.5
    return x * (lax.erf(x * 0.7071067811865476) + 1.0) * 0.5


def _erf_host(x):
    import numpy as np
    v = np.vectorize(math.erf, otypes=[np.float64])(np.asarray(x, np.float64))
    return v.astype(np.asarray(x).dtype if np.asarray(x).dtype.kind == "f" else np.float32)


def softmax(x, axis=-1, where=None):
    """exp(x - max) / sum along @axis."""
    e = jnp.exp(x - jnp.max(x, axis=axis, keepdims=True, **_max_kw()))
    return e / jnp.sum(e, axis=axis, keepdims=True)


def log_softmax(x, axis=-1, where=None):
    s = x - jnp.max(x, axis=axis, keepdims=True, **_max_kw())
    return s - jnp.log(jnp.sum(jnp.exp(s), axis=axis, keepdims=True))


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """log(sum(b * exp(a))) along @axis, the maximum taken out first (an
    infinite maximum is left in: its exp is 0 or NaN as JAX's)."""
    m = jnp.max(a, axis=axis, keepdims=True)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    e = jnp.exp(a - m)
    if b is not None:
        e = e * b
    s = jnp.sum(e, axis=axis, keepdims=True)
    sign = jnp.sign(s)
    r = jnp.log(jnp.abs(s) if return_sign else s) + m
    if not keepdims:
        r = _squeeze(r, a, axis)
        sign = _squeeze(sign, a, axis)
    return (r, sign) if return_sign else r


def _squeeze(r, a, axis):
    shape = tuple(getattr(a, "shape", ()))
    if axis is None:
        return jnp.reshape(r, ())
    axes = {(d % len(shape)) for d in ((axis,) if isinstance(axis, int) else axis)}
    return jnp.reshape(r, tuple(n for d, n in enumerate(shape) if d not in axes))


def relu6(x):
    return jnp.minimum(jnp.maximum(x, 0.0), 6.0)


def hard_tanh(x):
    return jnp.minimum(jnp.maximum(x, -1.0), 1.0)


def hard_sigmoid(x):
    return relu6(x + 3.0) / 6.0


def hard_silu(x):
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def leaky_relu(x, negative_slope=0.01):
    return jnp.where(x >= 0, x, negative_slope * x)


def elu(x, alpha=1.0):
    safe = jnp.where(x > 0, 0.0, x)	# expm1 of the positive side would overflow
    return jnp.where(x > 0, x, alpha * jnp.expm1(safe))


def celu(x, alpha=1.0):
    return jnp.maximum(x, 0.0) + alpha * jnp.expm1(jnp.minimum(x, 0.0) / alpha)


def selu(x):
    return 1.0507009873554804934193349852946 * elu(x, 1.6732632423543772848170429916717)


def softplus(x):
    """log(1 + e^x) = max(x, 0) + log1p(e^-|x|): never overflows."""
    return jnp.maximum(x, 0.0) + jnp.log1p(jnp.exp(-jnp.abs(x)))


def log_sigmoid(x):
    return -softplus(-x)


def squareplus(x, b=4):
    return (x + jnp.sqrt(x * x + b)) / 2


def mish(x):
    return x * jnp.tanh(softplus(x))


def glu(x, axis=-1):
    """The first half of @axis gated by the sigmoid of the second."""
    n = tuple(x.shape)[axis]
    if n % 2:
        raise ValueError("jax.nn.glu: axis %d has odd size %d" % (axis, n))
    ax = axis % len(x.shape)
    lo = tuple(slice(0, n // 2) if d == ax else slice(None) for d in range(len(x.shape)))
    hi = tuple(slice(n // 2, n) if d == ax else slice(None) for d in range(len(x.shape)))
    return x[lo] * sigmoid(x[hi])


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None):
    if mean is None:
        mean = jnp.mean(x, axis=axis, keepdims=True)
    if variance is None:
        variance = jnp.mean(jnp.square(x), axis=axis, keepdims=True) - jnp.square(mean)
    return (x - mean) * lax.rsqrt(variance + epsilon)


def one_hot(x, num_classes, *, dtype=None, axis=-1):
    """x[..., None] == arange(num_classes), as @dtype (float32)."""
    if axis not in (-1, len(getattr(x, "shape", ()))):
        raise NotImplementedError("jax.nn.one_hot: the classes on the last axis only")
    dtype = jnp.float32 if dtype is None else dtype
    shape = tuple(getattr(x, "shape", ())) + (int(num_classes),)
    if _host(x):
        import numpy as np
        return (np.asarray(x)[..., None] == np.arange(num_classes)).astype(
            jnp.dtype(dtype) if not isinstance(dtype, _trace.DType) else dtype.np_name)
    iota = lax.broadcasted_iota(jnp.int32, shape, len(shape) - 1)
    return jnp.where(jnp.expand_dims(x, -1) == iota, 1, 0).astype(dtype)


__all__ = ["relu", "gelu", "silu", "swish", "sigmoid", "tanh", "softmax", "log_softmax",
           "logsumexp", "relu6", "hard_tanh", "hard_sigmoid", "hard_silu", "hard_swish",
           "leaky_relu", "elu", "celu", "selu", "softplus", "log_sigmoid", "squareplus",
           "mish", "glu", "standardize", "one_hot"]
