# SPDX-License-Identifier: MIT
"""Functional updates and strided windows of a kernel's values: x.at[idx]
.set(y) (and .add, .multiply, ...), x[a:b:s], and the interleave
jnp.stack([...], axis=-1).reshape(..., n * k). The device's values have
no strided or in-place form, so each goes through a VMEM scratch of the
value's shape (pl.run_scoped): the value stored whole, the window stored
or read as a ref's window (pl.ds with a stride), the result read back
whole. Indices are JAX's: ints (negative from the end), slices with a
positive step, ..., traced scalars (used as given, as a ref's index is)."""
import numpy as np

from . import _trace
from ._trace import Value, trace_error


def _fmt(x):
    return x.render() if hasattr(x, "render") else repr(x)


def _scratch(x, what):
    from .pallas import tpu as pltpu
    shape = getattr(x, "shape", None)
    if shape is None or not isinstance(x.dt, _trace.DType):
        raise trace_error("%s of %s: its shape and dtype must be known while tracing"
                          % (what, _fmt(x)))
    if x.scalar:
        raise trace_error("%s of the scalar %s: index an array" % (what, _fmt(x)))
    return pltpu.VMEM(tuple(shape), x.dt)


def normalize(x, idx, what):
    """@idx of @x as a ref's index: a tuple of ints, slices (pl.ds with a
    stride for a step) and traced scalars, one per dimension; None if it
    takes no element (an empty slice)."""
    from . import pallas as pl
    shape = tuple(x.shape)
    idx = idx if isinstance(idx, tuple) else (idx,)
    if sum(e is Ellipsis for e in idx) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    ells = [k for k, e in enumerate(idx) if e is Ellipsis]	# no ==: a Value's is traced
    if ells:
        k = ells[0]
        idx = idx[:k] + (slice(None),) * (len(shape) - len(idx) + 1) + idx[k + 1:]
    if len(idx) > len(shape):
        raise IndexError("too many indices for %s of rank %d: %d given"
                         % (what, len(shape), len(idx)))
    out = []
    for d, e in enumerate(idx + (slice(None),) * (len(shape) - len(idx))):
        n = shape[d]
        if e is None:
            raise trace_error("%s: None (np.newaxis) in the index is not supported; "
                              "reshape the update" % what)
        if isinstance(e, Value) and e.scalar:
            out.append(e)
        elif isinstance(e, Value) or isinstance(e, (list, np.ndarray)):
            raise trace_error("%s: an array of indices (a scatter) is not supported; "
                              "use ints, slices and traced scalars" % what)
        elif isinstance(e, slice):
            if any(isinstance(b, Value) for b in (e.start, e.stop, e.step)):
                raise trace_error("%s: a slice's bounds and step are Python ints; use "
                                  "pl.ds(start, size) on a ref for a traced start" % what)
            start, stop, step = e.indices(n)
            if step < 0:
                raise trace_error("%s: a slice with a negative step (%d) is not supported"
                                  % (what, step))
            count = max(0, (stop - start + step - 1) // step)
            if count == 0:
                return None
            out.append(slice(start, stop) if step == 1 else pl.ds(start, count, stride=step))
        else:
            i = int(e)
            if not -n <= i < n:
                raise IndexError("index %d is out of bounds for axis %d with size %d"
                                 % (i, d, n))
            out.append(i + n if i < 0 else i)
    return tuple(out)


def strided_read(x, idx):
    """x[idx] of a value with a stepped slice: the value in a scratch, the
    window read from it."""
    from . import pallas as pl
    where = normalize(x, idx, "indexing a value (%s)" % _fmt(x))
    if where is None:
        raise trace_error("indexing a value (%s): an empty slice" % _fmt(x))

    def body(t):
        t[...] = x
        return t[where]
    return pl.run_scoped(body, _scratch(x, "indexing a value"))


class ValueAt:
    """x.at: x.at[idx] has .get(), .set(y), .add(y), .subtract(y),
    .multiply(y), .divide(y), .power(y), .min(y), .max(y), .apply(f),
    each a new value (x itself unchanged), y broadcast to the window and
    cast to x's dtype, as jnp's are."""

    def __init__(self, x):
        self.x = x

    def __getitem__(self, idx):
        return _Update(self.x, idx)


class _Update:
    def __init__(self, x, idx):
        self.x, self.idx = x, idx

    def _apply(self, name, fn):
        from . import pallas as pl
        x = self.x
        what = "%s.at[...].%s" % (_fmt(x), name)
        where = normalize(x, self.idx, what)
        if where is None:
            return x		# no element taken: x as it is

        def body(t):
            t[...] = x
            old = t[where]
            new = fn(old)
            if isinstance(new, Value) and isinstance(new.dt, _trace.DType) and \
                    new.dt is not x.dt:
                new = new.astype(x.dt)
            t[where] = new
            return t[...]
        return pl.run_scoped(body, _scratch(x, what))

    def get(self, **_kw):
        return self.x[self.idx]

    def set(self, y, **_kw):
        return self._apply("set", lambda old: y)

    def add(self, y, **_kw):
        return self._apply("add", lambda old: old + y)

    def subtract(self, y, **_kw):
        return self._apply("subtract", lambda old: old - y)

    def multiply(self, y, **_kw):
        return self._apply("multiply", lambda old: old * y)

    mul = multiply

    def divide(self, y, **_kw):
        return self._apply("divide", lambda old: old / y)

    def power(self, y, **_kw):
        return self._apply("power", lambda old: old ** y)

    def min(self, y, **_kw):
        from . import numpy as jnp
        return self._apply("min", lambda old: jnp.minimum(old, y))

    def max(self, y, **_kw):
        from . import numpy as jnp
        return self._apply("max", lambda old: jnp.maximum(old, y))

    def apply(self, func, **_kw):
        return self._apply("apply", func)


def interleave(parts, shape):
    """jnp.stack(parts, axis=-1).reshape(shape) where @shape merges the
    stack's last two dimensions (the parts' last, n, and k = len(parts))
    and keeps the others: part j is every k-th element of the result's
    last dimension from j, one strided store each (the stacked value,
    k elements a row on the device, is never made)."""
    from . import pallas as pl
    k, n = len(parts), parts[0].shape[-1]
    out = Value("text", "interleave", dt=parts[0].dt)	# its shape and dtype
    out.shape = tuple(shape)
    lead = (slice(None),) * (len(shape) - 1)

    def body(t):
        for j, p in enumerate(parts):
            t[lead + (pl.ds(j, n, stride=k),)] = p
        return t[...]
    return pl.run_scoped(body, _scratch(out, "jnp.stack(..., axis=-1).reshape"))


def stacked_last(v, shape):
    """The parts of @v if it is jnp.stack(parts, axis=-1) of parts of one
    dtype and the reshape to @shape merges its last two dimensions, else
    None."""
    parts = getattr(v, "_stack_last", None)
    if parts is None or not isinstance(shape, (tuple, list)):
        return None
    shape = tuple(int(d) for d in shape)
    s = tuple(v.shape)
    if len(shape) == len(s) - 1 and shape[:-1] == s[:-2] and shape[-1] == s[-2] * s[-1]:
        return parts
    return None
