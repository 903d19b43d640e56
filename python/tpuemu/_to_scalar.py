# SPDX-License-Identifier: MIT
"""A one-element vector value used as a scalar (a ref's index): the
scalar core cannot read the vector unit's registers, so, as Mosaic moves
one through memory, the value is stored to a (1,) VMEM scratch and the
DMA engine copies it into a word of the hidden SMEM scratch the scalar
core reads (_trace.SPILL_REF), waited for at once. Integer values only:
an index is an int32."""
from . import _trace
from ._fold import prod
from ._trace import Value, trace_error


def is_one_element(v):
    """@v is a traced vector value of one element (shape (), (1,), (1, 1)...)."""
    return (isinstance(v, Value) and not v.scalar and v.shape is not None and
            prod(v.shape) == 1)


def to_scalar(v, what):
    """The int32 scalar holding one-element value @v's element, for @what."""
    from . import numpy as jnp
    from . import pallas as pl
    from .pallas import tpu as pltpu
    dt = v.dt if isinstance(v.dt, _trace.DType) else None
    if dt is None or _trace.is_float_dt(dt):
        raise trace_error("%s: a vector element used as an index must be an integer, "
                          "not %s" % (what, dt.name if dt else "of an unknown dtype"))
    rec = _trace.recorder()
    slot = rec.nspill
    rec.nspill += 1

    def move(buf):
        buf[...] = jnp.reshape(v, (1,)).astype(jnp.int32)
        rec.emit("pltpu.sync_copy(%s, %s.at[pl.ds(%d, 1)])"
                 % (buf.render(), _trace.SPILL_REF, slot))

    pl.run_scoped(move, pltpu.VMEM((1,), jnp.int32))
    return Value("text", "%s[%d]" % (_trace.SPILL_REF, slot), scalar=True, dt=_trace.int32)
