# SPDX-License-Identifier: MIT
"""tpuemu: JAX Pallas TPU kernels on tpuemu's libtpurt (imports changed only).

    import tpuemu as jax
    import tpuemu.numpy as jnp
    from tpuemu import pallas as pl
    from tpuemu.pallas import tpu as pltpu
"""
import numpy as _np

from ._trace import TraceError, float32, bfloat16, int8, int32  # noqa: F401
from ._lib import TpurtError  # noqa: F401


class ShapeDtypeStruct:
    """jax.ShapeDtypeStruct: an output's shape and dtype."""

    def __init__(self, shape, dtype):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype

    def __repr__(self):
        return "ShapeDtypeStruct(%s, %s)" % (self.shape, self.dtype)


def jit(f=None, **kwargs):
    """jax.jit: an identity here (pallas_call runs at once)."""
    if f is None:
        return lambda g: g
    return f


def to_bf16(x):
    """float32 (or anything NumPy converts) -> bfloat16 bits as uint16,
    rounding to nearest even as libtpurt does."""
    a = _np.ascontiguousarray(x, dtype=_np.float32)
    u = a.view(_np.uint32).astype(_np.uint64)
    nan = _np.isnan(a)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(_np.uint16)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(_np.uint16)
    return r


def from_bf16(h):
    """bfloat16 bits (uint16) -> float32."""
    h = _np.ascontiguousarray(h, dtype=_np.uint16)
    return (h.astype(_np.uint32) << 16).view(_np.float32)


def last_stats():
    """The last pallas_call's job statistics (a dict; times in ns and ps)."""
    from .pallas import _last_stats
    return dict(_last_stats) if _last_stats is not None else None
