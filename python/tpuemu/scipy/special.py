# SPDX-License-Identifier: MIT
"""jax.scipy.special's functions that kernels and their NumPy references
use, in kernel bodies and on the host: erf, erfc, erfinv (lax's),
expit and logit, logsumexp, softmax and log_softmax (jax.nn's), xlogy."""
from .. import lax, nn, numpy as jnp

erf = lax.erf
erfinv = lax.erf_inv
expit = nn.sigmoid
logsumexp = nn.logsumexp
softmax = nn.softmax
log_softmax = nn.log_softmax


def erfc(x):
    """1 - erf(x): float32's erf is within an ulp of 1 past x = 4, so
    erfc there keeps no more than float32's absolute precision."""
    return 1.0 - lax.erf(x)


def logit(x):
    return jnp.log(x / (1.0 - x))


def xlogy(x, y):
    """x * log(y), 0 where x is 0 (log(0) or not)."""
    return jnp.where(x == 0, jnp.zeros_like(x * y), x * jnp.log(y))
