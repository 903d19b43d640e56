# SPDX-License-Identifier: MIT
"""jax.dtypes (and jax._src.dtypes) as JAX's TPU kernels use them: a
dtype's width in bits, for the packing of sub-32-bit types into words."""
import numpy as _np

from . import _trace

# the dtypes the device has not (jnp.int4, the float8s ...): their JAX
# widths, so a kernel's packing arithmetic runs before the array is refused
_OTHER_BITS = {"int4": 4, "uint4": 4, "int2": 2, "uint2": 2, "float8_e4m3fn": 8,
               "float8_e5m2": 8, "float8_e4m3b11fnuz": 8, "float8_e4m3fnuz": 8,
               "float8_e5m2fnuz": 8}


def itemsize_bits(dtype):
    """The bits of one element of @dtype (jnp.bfloat16: 16, jnp.int4: 4,
    bool: 8 as JAX stores it)."""
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None)
    if name in _OTHER_BITS:
        return _OTHER_BITS[name]
    if name == "bfloat16" or dtype is _trace.bfloat16:
        return 16
    if isinstance(dtype, _trace.DType):
        return 8 * _np.dtype(dtype.np_name).itemsize
    try:
        return 8 * _np.dtype(dtype).itemsize
    except TypeError:
        raise TypeError("dtypes.itemsize_bits: %r is not a dtype" % (dtype,)) from None


bit_width = itemsize_bits	# JAX's older name
