# SPDX-License-Identifier: MIT
"""Refs outside kernels, as JAX's stateful API has them: jax.new_ref,
jax.empty_ref outside a kernel, jax.freeze, pl.run_state. A HostRef
holds a NumPy array; a pallas_call (or pl.kernel) that is given one as an
argument, or whose kernel closes over one (a closure, a functools.partial,
a lambda calling a function with it), gets it as an extra operand, an
input aliased to an output, and the kernel sees the output's ref in its
place; after the call the ref holds the output. A ref in pltpu.VMEM is a
whole-array VMEM block, copied from the input's block first; in HBM
(the default) the aliased buffer itself."""
import functools
import types

import numpy as _np

from . import _pytree
from ._trace import Ref, as_dtype


class HostRef(Ref):
    """jax.new_ref(x): a mutable array outside kernels (ref[...] reads and
    stores it in NumPy); inside a kernel's trace it is bound to the call's
    operand and acts as that ref."""

    def __init__(self, value, memory_space=None):
        # not Ref.__init__: until bound, the ref is the host array
        object.__setattr__(self, "_value", value)
        object.__setattr__(self, "_memory_space", memory_space)
        object.__setattr__(self, "_bound", None)

    # the traced ref's attributes while bound, else the array's
    def __getattr__(self, name):
        if name == "dtype" and self.__dict__.get("_pallas_keys"):
            from .pallas._keys import key_dtype
            return key_dtype	# bound or not: pltpu.SMEM((), ref.dtype) is key scratch
        b = object.__getattribute__(self, "_bound")
        if b is not None:
            return getattr(b, name)
        v = object.__getattribute__(self, "_value")
        if name == "shape":
            return v.shape
        if name == "dtype":
            return as_dtype(v.dtype) if v.dtype != _np.uint16 else as_dtype("bfloat16")
        raise AttributeError(name)

    def __setattr__(self, name, value):
        b = object.__getattribute__(self, "_bound")
        if b is not None:
            setattr(b, name, value)
        else:
            object.__setattr__(self, name, value)

    def _bind(self, ref):
        object.__setattr__(self, "_bound", ref)

    def _unbind(self, value=None):
        object.__setattr__(self, "_bound", None)
        if value is not None:
            object.__setattr__(self, "_value", value)

    def __getitem__(self, idx):
        b = object.__getattribute__(self, "_bound")
        if b is not None:
            return b[idx]
        if getattr(self._value, "_counted", False):	# pl.estimate_cost's: a shape
            return self._value[idx]
        return _host_view(_np.array(self._value[idx]))

    def __setitem__(self, idx, val):
        b = object.__getattribute__(self, "_bound")
        if b is not None:
            b[idx] = val
            return
        if getattr(self._value, "_counted", False):
            # pl.estimate_cost's: the store's shapes checked, as JAX's swap
            # has no cost rule; the ref keeps its shape and dtype
            to = self._value[idx].shape
            if _np.broadcast_shapes(_np.shape(val), to) != to:
                raise ValueError("a store of shape %s into a ref window of shape %s"
                                 % (_np.shape(val), to))
            return
        if self._value.dtype == _np.uint16:	# bf16 bits: values rounded to them
            from . import to_bf16
            val = to_bf16(val)
        self._value[idx] = val

    def __repr__(self):
        b = object.__getattribute__(self, "_bound")
        if b is not None:
            return repr(b)
        v = object.__getattribute__(self, "_value")
        return "Ref(%s %s)" % (v.dtype, v.shape)


def new_ref(x, memory_space=None, **_kw):
    """jax.new_ref(x, memory_space=...): a HostRef holding a copy of x."""
    from ._trace import Value
    if isinstance(x, (Value, Ref)):
        raise TypeError("jax.new_ref in a kernel body: use jax.empty_ref or pl.run_scoped "
                        "scratch")
    if getattr(x, "_counted", False):	# pl.estimate_cost's: a ref of its shape
        return HostRef(x, memory_space)
    from .numpy import BF16Array, UInt16Array
    from .pallas._keys import PallasKey
    if isinstance(x, UInt16Array):
        _refuse_uint16("new_ref of a uint16 array")
    if isinstance(x, PallasKey):
        # Pallas keys: their int32 words; dtype says key, freeze gives keys
        r = HostRef(x.data.view(_np.int32).copy(), memory_space)
        object.__setattr__(r, "_pallas_keys", True)
        return r
    # a host bf16 array is held as its bits (the device's), given back as one
    a = x.bits() if isinstance(x, BF16Array) else _np.array(x)
    if a.dtype == _np.float64:
        a = a.astype(_np.float32)
    elif a.dtype == _np.int64:
        a = a.astype(_np.int32)
    return HostRef(a, memory_space)


def _refuse_uint16(what):
    # a ref's uint16 is bf16 bits (the device's): uint16 would read as bf16
    raise TypeError("jax.%s is not supported (a ref holds uint16 only as bfloat16 "
                    "bits); pass uint16 arrays to pallas_call" % what)


def empty_host_ref(ty, memory_space=None):
    """jax.empty_ref outside a kernel: a HostRef of zeros (JAX leaves it
    uninitialised)."""
    from .pallas import _np_dtype
    from ._trace import uint16
    if ty.dtype is uint16:
        _refuse_uint16("empty_ref of uint16")
    return HostRef(_np.zeros(tuple(ty.shape), _np_dtype(ty.dtype)), memory_space)


def freeze(ref):
    """jax.freeze(ref): the ref's array (a copy)."""
    if not isinstance(ref, HostRef):
        raise TypeError("jax.freeze: a jax.new_ref ref, not %r" % (ref,))
    if ref.__dict__.get("_pallas_keys"):
        from .pallas._keys import PallasKey
        return PallasKey(_np.array(object.__getattribute__(ref, "_value")).view(_np.uint32))
    v = object.__getattribute__(ref, "_value")
    if getattr(v, "_counted", False):	# pl.estimate_cost's: immutable already
        return v
    return _host_view(_np.array(object.__getattribute__(ref, "_value")))


def _host_view(a):
    """A ref's contents as the host sees them: bf16 bits (uint16, the only
    uint16 a ref holds) as a host bfloat16 array."""
    from .numpy import BF16Array
    if isinstance(a, _np.ndarray) and a.dtype == _np.uint16:
        return BF16Array.from_bits(a)
    if isinstance(a, _np.generic) and a.dtype == _np.uint16:
        return BF16Array.from_bits(_np.array(a))
    return a


def run_state(f):
    """pl.run_state(f)(init): f called with refs holding @init's arrays (a
    pytree); returns their final values in the same tree."""
    @functools.wraps(f)
    def wrapped(init):
        leaves, tree = _pytree.flatten(init)
        # an array's memory space (pl.with_memory_constraint) is its ref's
        refs = [new_ref(x, memory_space=getattr(x, "_memory_space", None)) for x in leaves]
        f(_pytree.unflatten(tree, refs))
        return _pytree.unflatten(tree, [freeze(r) for r in refs])
    return wrapped


def _names(code):
    """The global names @code and the code objects nested in it use."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _names(c)
    return names


def find(obj, out=None, seen=None, depth=0):
    """The HostRefs a kernel callable reaches: through functools.partial
    arguments, closures (and the functions they hold), default arguments,
    bound methods, and lists, tuples and dicts of these; in the order met."""
    out = [] if out is None else out
    seen = set() if seen is None else seen
    if depth > 12 or id(obj) in seen:
        return out
    seen.add(id(obj))
    if isinstance(obj, HostRef):
        if all(o is not obj for o in out):
            out.append(obj)
        return out
    if isinstance(obj, functools.partial):
        for x in (obj.func,) + tuple(obj.args) + tuple((obj.keywords or {}).values()):
            find(x, out, seen, depth + 1)
    elif isinstance(obj, types.MethodType):
        find(obj.__func__, out, seen, depth + 1)
        find(obj.__self__, out, seen, depth + 1)
    elif isinstance(obj, types.FunctionType):
        for c in obj.__closure__ or ():
            try:
                find(c.cell_contents, out, seen, depth + 1)
            except ValueError:	# an empty cell
                pass
        for x in obj.__defaults__ or ():
            find(x, out, seen, depth + 1)
        for x in (obj.__kwdefaults__ or {}).values():
            find(x, out, seen, depth + 1)
        if hasattr(obj, "__wrapped__"):
            find(obj.__wrapped__, out, seen, depth + 1)
        # module-level refs it names, and the same module's functions
        g = obj.__globals__
        for name in _names(obj.__code__):
            x = g.get(name)
            if isinstance(x, HostRef) or \
                    isinstance(x, (types.FunctionType, functools.partial)) and \
                    getattr(x, "__module__", None) == obj.__module__:
                find(x, out, seen, depth + 1)
    elif isinstance(obj, (list, tuple)) and len(obj) < 1000:
        for x in obj:
            find(x, out, seen, depth + 1)
    elif isinstance(obj, dict) and len(obj) < 1000:
        for x in obj.values():
            find(x, out, seen, depth + 1)
    elif callable(obj) and hasattr(obj, "__call__") and \
            isinstance(getattr(obj, "__call__", None), types.MethodType) and \
            not isinstance(obj, type):
        find(obj.__call__, out, seen, depth + 1)
    return out
