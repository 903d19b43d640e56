# SPDX-License-Identifier: MIT
"""pl.CostEstimate and pl.estimate_cost, as JAX's cost_estimate.py has them.

JAX traces the function to a jaxpr and sums a rule per primitive. tpuemu
has no jaxpr: estimate_cost runs the function on ShapedArrays, arrays
that carry a shape and a dtype and no values, and every jnp, lax and
operator call on them adds what JAX's rule for the primitive that call
binds in JAX would add:

  add, sub, mul, div, min, max, and, or, xor    1 flop per output element
  neg, floor, ceil, round, not                  1 flop per element
  exp, log, sqrt, tanh, logistic, sin, cos, tan, sinh, cosh,
  asin, acos, atan                               1 transcendental per element
  integer_pow(x, y)                              floor(log2 y) + popcount(y)
                                                 flops per element (0 for y 0, 1)
  dot_general (@, matmul, dot)                   2*K flops per output element
                                                 (batch dimensions multiply)
  anything else (reductions, comparisons, abs, reshapes, selects, ref
  reads and writes ...)                          nothing, as JAX has no rule

jnp functions that JAX builds of several primitives count each one
(jnp.mean: a sum, then a division; jnp.max(..., initial=): the reduction,
then a max; jnp.clip: a max and a min). A NumPy function with no shape
rule here raises NotImplementedError naming it. bytes_accessed is what
the rules add (nothing) plus the bytes of the flattened arguments and
results; all fields are Python ints."""
import dataclasses
import math
import operator

import numpy as _np

from .. import _pytree, _trace
from ..dtypes import itemsize_bits


@dataclasses.dataclass(frozen=True)
class CostEstimate:
    """pl.CostEstimate(flops=, transcendentals=, bytes_accessed=): a
    kernel's cost, for the compiler's scheduling (pallas_call's
    cost_estimate=). Every field must be an int, as JAX checks;
    remote_bytes_transferred is newer JAX's (0 by default)."""
    flops: int
    transcendentals: int
    bytes_accessed: int
    remote_bytes_transferred: int = 0

    def __post_init__(self):
        for k, v in dataclasses.asdict(self).items():
            if not isinstance(v, int):
                raise ValueError("All fields in CostEstimate must be ints. %s is not an "
                                 "int: %s(%r)" % (k, type(v).__name__, v))


def check_cost_estimate(cost_estimate, what):
    """@what's cost_estimate= argument: None or a pl.CostEstimate. tpuemu
    schedules nothing by it, so it is checked and kept nowhere."""
    if cost_estimate is not None and not isinstance(cost_estimate, CostEstimate):
        raise TypeError("%s: cost_estimate must be a pl.CostEstimate, not %r"
                        % (what, cost_estimate))


# the running totals of the estimate_cost calls under way, innermost last
_totals = []


def _add(flops=0, transcendentals=0):
    if not _totals:
        raise RuntimeError("a ShapedArray of pl.estimate_cost used after the call it was "
                           "made for returned (it has no values; as JAX's leaked tracers)")
    _totals[-1][0] += flops
    _totals[-1][1] += transcendentals


def _norm_dtype(d):
    """A tpuemu DType for @d: 64-bit types narrowed as JAX without x64
    narrows them (and as the host's jnp does); a dtype named uint16 is
    uint16 (jnp.uint16), not bfloat16's carrier."""
    if isinstance(d, _trace.DType):
        return d
    if isinstance(d, _trace.HostBF16DType) or isinstance(d, str) and d == "bfloat16":
        return _trace.bfloat16
    try:
        name = _np.dtype(d).name
    except TypeError:
        return _trace.as_dtype(d)	# the error naming d
    if name == "uint16":
        return _trace.uint16
    return _trace.as_dtype({"float64": "float32", "int64": "int32",
                            "uint64": "uint32"}.get(name, name))


def _itemsize(dt):
    return itemsize_bits(dt) // 8


def _dtype_of_array(a):
    """A host array's dtype as tpuemu's pallas_call reads it: plain uint16
    is bfloat16 bits, a jnp uint16 array (UInt16Array) uint16."""
    from ..numpy import UInt16Array
    d = a.dtype
    if isinstance(d, _trace.HostBF16DType):
        return _trace.bfloat16
    if d == _np.uint16:
        return _trace.uint16 if isinstance(a, UInt16Array) else _trace.bfloat16
    return _norm_dtype(d)


def _dummy(shape):
    # a view of one byte with every stride 0: NumPy's indexing and view
    # functions give the shapes they would give, allocating nothing
    return _np.lib.stride_tricks.as_strided(_np.zeros(1, _np.int8), shape, (0,) * len(shape))


class ShapedArray:
    """An array of estimate_cost's: a shape and a dtype, no values (JAX's
    ShapedArray aval, as the tracer carries it). jnp functions, lax
    functions and operators give ShapedArrays and count as JAX's rules;
    asking for a value (bool(x), float(x), np.asarray(x)) is refused, as
    JAX refuses it of a tracer."""
    _counted = True	# the duck-typed mark the lax and state hooks look for
    __array_priority__ = 1000

    def __init__(self, shape, dtype):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = _norm_dtype(dtype)

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))
    itemsize = property(lambda self: _itemsize(self.dtype))
    nbytes = property(lambda self: self.size * self.itemsize)
    T = property(lambda self: self.transpose())
    mT = property(lambda self: _np.swapaxes(self, -1, -2))

    def __repr__(self):
        return "ShapedArray(%s[%s])" % (self.dtype.name, ",".join(str(d) for d in self.shape))

    def _no_value(self, *_a):
        raise TypeError("%r has no values: pl.estimate_cost runs the function on shapes "
                        "and dtypes only (as JAX's tracers, whose values are not known "
                        "while tracing)" % (self,))

    __bool__ = __int__ = __float__ = __index__ = __complex__ = __array__ = _no_value
    __hash__ = None	# as a tracer: == gives an array

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __getitem__(self, idx):
        # a static slice or integer index: JAX's slice, squeeze and gather
        # have no rule, so only the shape is made
        items = idx if isinstance(idx, tuple) else (idx,)
        if any(isinstance(i, ShapedArray) for i in items):
            raise NotImplementedError("pl.estimate_cost: indexing %r by an array of the "
                                      "function's (a gather) is not supported" % (self,))
        return ShapedArray(_dummy(self.shape)[idx].shape, self.dtype)

    def astype(self, dtype, *_a, **_kw):
        return ShapedArray(self.shape, dtype)	# convert_element_type: no rule

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        return _np.reshape(self, shape)

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = axes[0]
        return _np.transpose(self, axes or None)

    def view(self, dtype=None):
        if dtype is None:
            return self
        d = _norm_dtype(dtype)
        if _itemsize(d) != self.itemsize:
            raise NotImplementedError("pl.estimate_cost: a view between widths")
        return ShapedArray(self.shape, d)

    @property
    def at(self):
        return _At(self)

    # the __array_ufunc__ and __array_function__ protocols: jnp's host
    # functions call NumPy's, which hand ShapedArrays here
    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        if kw.get("out") is not None:
            raise NotImplementedError("pl.estimate_cost: out= (arrays here are immutable)")
        if method == "reduce":
            red = {"add": "sum", "maximum": "max", "minimum": "min", "multiply": "prod",
                   "logical_and": "all", "logical_or": "any"}.get(ufunc.__name__)
            if red is None:
                raise NotImplementedError("pl.estimate_cost: np.%s.reduce" % ufunc.__name__)
            kw.pop("out", None)
            return _reduce(red, *inputs, **kw)
        if method != "__call__":
            raise NotImplementedError("pl.estimate_cost: np.%s.%s" % (ufunc.__name__, method))
        kw.pop("out", None)
        if ufunc is _np.matmul:
            return _matmul(*inputs, **kw)
        rule = _UFUNCS.get(ufunc.__name__)
        if rule is None:
            raise NotImplementedError("pl.estimate_cost: no cost rule for np.%s here (jnp.%s)"
                                      % (ufunc.__name__, ufunc.__name__))
        dtype = kw.pop("dtype", None)
        if kw:
            raise NotImplementedError("pl.estimate_cost: np.%s with %s" % (
                ufunc.__name__, ", ".join(sorted(kw))))
        return _elementwise(ufunc.__name__, rule, inputs, dtype)

    def __array_function__(self, func, types, args, kwargs):
        fn = _FUNCTIONS.get(func.__name__)
        if fn is None:
            raise NotImplementedError("pl.estimate_cost: no shape rule for np.%s here "
                                      "(jnp.%s)" % (func.__name__, func.__name__))
        return fn(*args, **kwargs)


def _ufunc_operator(uf, reflected=False):
    if reflected:
        return lambda self, other: uf(other, self)
    return lambda self, other: uf(self, other)


for _name, _uf in (("add", _np.add), ("sub", _np.subtract), ("mul", _np.multiply),
                   ("truediv", _np.divide), ("floordiv", _np.floor_divide),
                   ("mod", _np.remainder), ("pow", _np.power), ("matmul", _np.matmul),
                   ("and", _np.bitwise_and), ("or", _np.bitwise_or),
                   ("xor", _np.bitwise_xor), ("lshift", _np.left_shift),
                   ("rshift", _np.right_shift)):
    setattr(ShapedArray, "__%s__" % _name, _ufunc_operator(_uf))
    setattr(ShapedArray, "__r%s__" % _name, _ufunc_operator(_uf, True))
for _name, _uf in (("lt", _np.less), ("le", _np.less_equal), ("gt", _np.greater),
                   ("ge", _np.greater_equal), ("eq", _np.equal), ("ne", _np.not_equal)):
    setattr(ShapedArray, "__%s__" % _name, _ufunc_operator(_uf))
ShapedArray.__neg__ = lambda self: _np.negative(self)
ShapedArray.__pos__ = lambda self: self
ShapedArray.__abs__ = lambda self: _np.absolute(self)
ShapedArray.__invert__ = lambda self: _np.invert(self)
for _name in ("sum", "max", "min", "mean", "prod", "any", "all", "argmax", "argmin",
              "squeeze", "swapaxes", "ravel", "clip", "round"):
    setattr(ShapedArray, _name,
            (lambda f: lambda self, *a, **kw: f(self, *a, **kw))(getattr(_np, _name)))
ShapedArray.flatten = ShapedArray.ravel


class _At:
    """x.at[idx].set(y) and the like: JAX's scatters, with no rule."""

    def __init__(self, x):
        self._x = x

    def __getitem__(self, idx):
        x = self._x

        class _Update:
            def get(self, **_kw):
                return x[idx]

            def _same(self, y=None, **_kw):
                return ShapedArray(x.shape, x.dtype)
            set = add = multiply = mul = divide = min = max = power = _same
        return _Update()


# --- operands ---

def _dt(x):
    """An operand's dtype, weakly typed for Python numbers (as dt_of)."""
    if isinstance(x, ShapedArray):
        return x.dtype
    if isinstance(x, bool):
        return _trace.bool_
    if isinstance(x, int):
        return "weak int"
    if isinstance(x, float):
        return "weak float"
    if isinstance(x, (_np.ndarray, _np.generic)):
        return _dtype_of_array(x)
    raise TypeError("pl.estimate_cost: an operand %r of no array type" % (x,))


def _shape(x):
    return x.shape if isinstance(x, ShapedArray) else _np.shape(x)


def _promote(*xs):
    d = _dt(xs[0])
    for x in xs[1:]:
        d = _trace._promote(d, _dt(x))
    if isinstance(d, str):
        d = _trace.float32 if d == "weak float" else _trace.int32
    return d


def _is_float(d):
    return _trace.is_float_dt(d)


# ufunc name -> (what it counts, its result dtype); the primitive each binds
# in JAX (jnp.divide is div, jnp.rint round, jnp.invert not, jnp.fmod rem ...)
_FLOP, _TRANS, _FREE = "flop", "transcendental", "free"
_UFUNCS = {}
for _n in ("add subtract multiply divide minimum maximum bitwise_and bitwise_or "
           "bitwise_xor logical_and logical_or logical_xor negative floor ceil rint invert "
           "logical_not").split():
    _UFUNCS[_n] = _FLOP
for _n in "exp log sqrt tanh sin cos tan sinh cosh arcsin arccos arctan".split():
    _UFUNCS[_n] = _TRANS
for _n in ("equal not_equal less less_equal greater greater_equal absolute sign exp2 log1p "
           "expm1 square cbrt positive isfinite isnan arctan2 nextafter fmod "
           "left_shift right_shift power").split():
    _UFUNCS[_n] = _FREE
_BOOL_OUT = frozenset("equal not_equal less less_equal greater greater_equal isfinite "
                      "isnan logical_and logical_or logical_xor logical_not".split())
# results that are float for integer operands (jnp promotes them first)
_FLOAT_OUT = frozenset("divide exp log sqrt tanh sin cos tan sinh cosh arcsin arccos arctan "
                       "exp2 log1p expm1 cbrt arctan2".split())


def _elementwise(name, rule, inputs, dtype=None):
    if name == "power" and isinstance(inputs[1], int) and not isinstance(inputs[1], bool) \
            and isinstance(inputs[0], ShapedArray):
        return integer_pow(inputs[0], inputs[1])	# jnp.power(x, 3), x ** 3: integer_pow
    shape = _np.broadcast_shapes(*(_shape(x) for x in inputs))
    if name in _BOOL_OUT:
        out = _trace.bool_
    else:
        out = _promote(*inputs)
        if name in _FLOAT_OUT and not _is_float(out):
            out = _trace.float32
    if dtype is not None:
        out = _norm_dtype(dtype)
    n = math.prod(shape)
    if rule == _FLOP:
        _add(flops=n)
    elif rule == _TRANS:
        _add(transcendentals=n)
    return ShapedArray(shape, out)


def integer_pow(x, y):
    """lax.integer_pow's rule: repeated squaring, floor(log2 y) squarings
    and a multiply per set bit (none for y 0 or 1). A negative y fails
    here as in JAX's rule (the log of a negative number)."""
    y = int(y)
    if y in (0, 1):
        per = 0
    else:
        per = math.floor(math.log(y, 2)) + y.bit_count()
    _add(flops=x.size * per)
    return ShapedArray(x.shape, x.dtype)


# the statement-syntax functions with no NumPy twin on the host (tracing's
# call() hands them here): the primitive JAX binds for each
_STATEMENTS = {"jax.nn.sigmoid": _TRANS, "lax.logistic": _TRANS, "jnp.rsqrt": _FREE,
               "lax.erf": _FREE}


def statement_call(fn, args, kwargs):
    """@fn (a statement-syntax name: "lax.logistic") of ShapedArrays."""
    rule = _STATEMENTS.get(fn)
    if rule is None or len(args) != 1 or kwargs:
        raise NotImplementedError("pl.estimate_cost: no cost rule for %s here" % fn)
    x = args[0]
    _add(transcendentals=x.size if rule == _TRANS else 0)
    return ShapedArray(x.shape, x.dtype if _is_float(x.dtype) else _trace.float32)


def _dot_flops(ls, rs, contract, rhs_batch):
    # JAX's dot_general rule: 2*K per contracting dimension, times every
    # other dimension of lhs, times rhs's free ones
    flops = 1
    for a, b in zip(*contract):
        if ls[a] != rs[b]:
            raise TypeError("dot_general: contracting dimensions of sizes %d and %d"
                            % (ls[a], rs[b]))
        flops *= 2 * ls[a]
    for i, d in enumerate(ls):
        if i not in contract[0]:
            flops *= d
    for i, d in enumerate(rs):
        if i not in contract[1] and i not in rhs_batch:
            flops *= d
    return flops


def dot_general(lhs, rhs, dimension_numbers, preferred_element_type=None):
    """lax.dot_general of ShapedArrays (or one and a host array)."""
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(int(d) % max(len(s), 1) for d in t) for t, s in
                      ((lc, _shape(lhs)), (rc, _shape(rhs)), (lb, _shape(lhs)),
                       (rb, _shape(rhs))))
    ls, rs = tuple(_shape(lhs)), tuple(_shape(rhs))
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeError("dot_general: %d and %d contracting, %d and %d batch dimensions"
                        % (len(lc), len(rc), len(lb), len(rb)))
    for a, b in zip(lb, rb):
        if ls[a] != rs[b]:
            raise TypeError("dot_general: batch dimensions of sizes %d and %d"
                            % (ls[a], rs[b]))
    _add(flops=_dot_flops(ls, rs, (lc, rc), rb))
    shape = tuple(ls[d] for d in lb) + \
        tuple(d for i, d in enumerate(ls) if i not in lc and i not in lb) + \
        tuple(d for i, d in enumerate(rs) if i not in rc and i not in rb)
    out = _promote(lhs, rhs) if preferred_element_type is None else \
        _norm_dtype(preferred_element_type)
    return ShapedArray(shape, out)


def _matmul(a, b, dtype=None):
    """jnp.matmul (a @ b): NumPy's shapes (1-D operands a row and a
    column, leading dimensions broadcast); JAX's dot_general counts 2*K
    per output element whatever batch dimensions it makes of them."""
    sa, sb = tuple(_shape(a)), tuple(_shape(b))
    if not sa or not sb:
        raise ValueError("matmul: a 0-d operand")
    k = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if k != kb:
        raise TypeError("matmul: contracting dimensions of sizes %d and %d" % (k, kb))
    if len(sa) == 1:
        shape = sb[:-2] + sb[-1:]	# () for two vectors
    elif len(sb) == 1:
        shape = sa[:-1]
    else:
        shape = _np.broadcast_shapes(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
    _add(flops=2 * k * math.prod(shape))
    return ShapedArray(shape, _promote(a, b) if dtype is None else dtype)


# --- NumPy functions ---

def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted(operator.index(a) % ndim if ndim else 0 for a in axes))


_NO = _np._NoValue


def _reduce(kind, a, axis=None, dtype=None, out=None, keepdims=False, initial=_NO,
            where=_NO):
    """A reduction: JAX has no rule for reduce_sum, reduce_max ... (they
    count nothing); jnp's initial= is an op of the result with it (max,
    min, add: counted), jnp.mean's division by the count is counted."""
    if out is not None:
        raise NotImplementedError("pl.estimate_cost: out=")
    if kind == "mean" and where is not _NO and where is not None:
        raise NotImplementedError("pl.estimate_cost: jnp.mean with where=")
    shape = _shape(a)
    axes = _axes(axis, len(shape))
    reduced = tuple(d for i, d in enumerate(shape) if i not in axes)
    kept = tuple(1 if i in axes else d for i, d in enumerate(shape))
    dt = _promote(a)
    if kind in ("argmax", "argmin"):
        dt = _trace.int32
    elif kind in ("any", "all"):
        dt = _trace.bool_
    elif kind == "mean" and not _is_float(dt):
        dt = _trace.float32
    elif kind in ("sum", "prod") and dt in (_trace.bool_, _trace.int8, _trace.int16):
        dt = _trace.int32
    elif kind in ("sum", "prod") and dt in (_trace.uint8, _trace.uint16):
        dt = _trace.uint32
    if dtype is not None:
        dt = _norm_dtype(dtype)
    if initial is not _NO and initial is not None and kind in ("sum", "max", "min", "prod"):
        _add(flops=math.prod(reduced))	# op(initial, result), before keepdims
    if kind == "mean":
        _add(flops=math.prod(reduced))	# lax.div(sum, count)
    return ShapedArray(kept if keepdims else reduced, dt)


def _reduction(kind):
    if kind in ("max", "min"):
        def f(a, axis=None, out=None, keepdims=False, initial=_NO, where=_NO):
            return _reduce(kind, a, axis, None, out, keepdims, initial, where)
    elif kind in ("argmax", "argmin"):
        def f(a, axis=None, out=None, *, keepdims=False):
            return _reduce(kind, a, axis, None, out, keepdims)
    elif kind in ("any", "all"):
        def f(a, axis=None, out=None, keepdims=False, *, where=_NO):
            return _reduce(kind, a, axis, None, out, keepdims, _NO, where)
    elif kind == "mean":
        def f(a, axis=None, dtype=None, out=None, keepdims=False, *, where=_NO):
            return _reduce(kind, a, axis, dtype, out, keepdims, _NO, where)
    else:
        def f(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NO, where=_NO):
            return _reduce(kind, a, axis, dtype, out, keepdims, initial, where)
    return f


def _as_shaped(x):
    return x if isinstance(x, ShapedArray) else ShapedArray(_np.shape(x), _promote(x))


def _view_fn(np_fn):
    # functions that only move or broadcast (transpose, broadcast_to ...):
    # NumPy's own on a zero-stride view gives the shape; JAX has no rule
    def f(a, *args, **kw):
        a = _as_shaped(a)
        return ShapedArray(np_fn(_dummy(a.shape), *args, **kw).shape, a.dtype)
    return f


def _reshape(a, newshape=None, order="C", *, shape=None):
    a = _as_shaped(a)
    newshape = shape if newshape is None else newshape
    newshape = (newshape,) if isinstance(newshape, int) else tuple(int(d) for d in newshape)
    if newshape.count(-1) == 1:
        known = math.prod(d for d in newshape if d != -1)
        newshape = tuple(a.size // known if d == -1 else d for d in newshape)
    if math.prod(newshape) != a.size:
        raise ValueError("cannot reshape an array of size %d into shape %s"
                         % (a.size, newshape))
    return ShapedArray(newshape, a.dtype)


def _ravel(a, order="C"):
    return _reshape(a, (-1,))


def _dot(a, b, out=None):
    sa, sb = tuple(_shape(a)), tuple(_shape(b))
    if not sa or not sb:	# a scalar: jnp.dot is a multiply
        return _np.multiply(a, b)
    k = sa[-1]
    kb = sb[0] if len(sb) == 1 else sb[-2]
    if k != kb:
        raise TypeError("dot: contracting dimensions of sizes %d and %d" % (k, kb))
    shape = sa[:-1] + (sb[:-2] + sb[-1:] if len(sb) > 1 else ())
    _add(flops=2 * k * math.prod(shape))
    return ShapedArray(shape, _promote(a, b))


def _where(c, a=_NO, b=_NO):
    if a is _NO or b is _NO:
        raise NotImplementedError("pl.estimate_cost: jnp.where(c) (its size is the data's)")
    return ShapedArray(_np.broadcast_shapes(_shape(c), _shape(a), _shape(b)), _promote(a, b))


def _clip(a, a_min=None, a_max=None, out=None, **kw):
    # jnp.clip: maximum with the low bound, then minimum with the high
    a_min = kw.pop("min", a_min)
    a_max = kw.pop("max", a_max)
    if a_min is not None:
        a = _np.maximum(a, a_min)
    if a_max is not None:
        a = _np.minimum(a, a_max)
    return a


def _like(fill):
    # zeros_like(a, dtype), full_like(a, v, dtype): JAX's full, no rule
    def f(a, *args, dtype=None, shape=None, **_kw):
        a = _as_shaped(a)
        rest = args[1:] if fill else args
        if rest and dtype is None:
            dtype = rest[0]
        return ShapedArray(a.shape if shape is None else shape,
                           a.dtype if dtype is None else dtype)
    return f


def _concatenate(arrays, axis=0, **_kw):
    shapes = [tuple(_shape(x)) for x in arrays]
    axis = axis % len(shapes[0])
    for s in shapes[1:]:
        if len(s) != len(shapes[0]) or any(d != e for i, (d, e) in enumerate(zip(s, shapes[0]))
                                           if i != axis):
            raise ValueError("concatenate: shapes %s" % shapes)
    shape = list(shapes[0])
    shape[axis] = sum(s[axis] for s in shapes)
    return ShapedArray(shape, _promote(*arrays))


def _stack(arrays, axis=0, **_kw):
    shapes = {tuple(_shape(x)) for x in arrays}
    if len(shapes) != 1:
        raise ValueError("stack: shapes %s" % sorted(shapes))
    shape = list(shapes.pop())
    shape.insert(axis % (len(shape) + 1), len(arrays))
    return ShapedArray(shape, _promote(*arrays))


def _round(a, decimals=0, out=None):
    if decimals != 0:
        raise NotImplementedError("pl.estimate_cost: jnp.round with decimals")
    return _np.rint(a)	# lax.round: 1 flop per element


def _astype(a, dtype, **_kw):
    return _as_shaped(a).astype(dtype)


_FUNCTIONS = {
    "reshape": _reshape, "ravel": _ravel, "dot": _dot, "where": _where, "clip": _clip,
    "zeros_like": _like(False), "ones_like": _like(False), "empty_like": _like(False),
    "full_like": _like(True),
    "concatenate": _concatenate, "stack": _stack, "round": _round, "around": _round,
    "round_": _round, "astype": _astype,
    "copy": lambda a, *_a, **_kw: _as_shaped(a),
    "shape": lambda a: _shape(a), "ndim": lambda a: len(_shape(a)),
    "size": lambda a, axis=None: math.prod(_shape(a)) if axis is None else _shape(a)[axis],
    "result_type": lambda *xs: _promote(*xs),
    "cumsum": lambda a, axis=None, dtype=None, out=None: (
        _reshape(a, (-1,)) if axis is None else _as_shaped(a)),	# cumsum_p: no rule
}
for _n in ("sum", "max", "amax", "min", "amin", "mean", "prod", "any", "all", "argmax",
           "argmin"):
    _FUNCTIONS[_n] = _reduction({"amax": "max", "amin": "min"}.get(_n, _n))
for _n in ("transpose", "moveaxis", "swapaxes", "expand_dims", "squeeze", "broadcast_to",
           "atleast_1d", "atleast_2d"):
    _FUNCTIONS[_n] = _view_fn(getattr(_np, _n))


# --- the entry point ---

def _leaf_bytes(x):
    if isinstance(x, ShapedArray):
        return x.nbytes
    if isinstance(x, bool):
        return 1	# a weakly typed 0-d output: bool, int32 or float32
    if isinstance(x, (int, float)):
        return 4
    if isinstance(x, (_np.ndarray, _np.generic)):	# a constant result
        return x.size * _itemsize(_dtype_of_array(x))
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return math.prod(x.shape) * _itemsize(_norm_dtype(x.dtype))
    raise TypeError("pl.estimate_cost: a result %r is not an array" % (x,))


def _shaped_arg(x):
    if isinstance(x, ShapedArray):
        return x
    if isinstance(x, (_np.ndarray, _np.generic)):
        return ShapedArray(x.shape, _dtype_of_array(x))
    if hasattr(x, "shape") and hasattr(x, "dtype"):	# jax.ShapeDtypeStruct
        return ShapedArray(x.shape, x.dtype)
    if isinstance(x, (bool, int, float)):
        return ShapedArray((), _promote(x))
    raise TypeError("pl.estimate_cost: argument %r is not an array or a ShapeDtypeStruct"
                    % (x,))


def estimate_cost(fun, *args, **kwargs):
    """pl.estimate_cost(fun, *args, **kwargs): fun's pl.CostEstimate for
    arguments of the shapes and dtypes of @args (jax.ShapeDtypeStructs or
    arrays; pytrees of them), counted as JAX's rules count (see the
    module's docstring); kwargs are passed as they are (fixed, as JAX's
    functools.partial makes them). bytes_accessed: the bytes of the
    flattened arguments and results."""
    leaves, tree = _pytree.flatten(args)
    shaped = [_shaped_arg(x) for x in leaves]
    _totals.append([0, 0])
    try:
        out = fun(*_pytree.unflatten(tree, shaped), **kwargs)
    finally:
        flops, transcendentals = _totals.pop()
    out_leaves, _ = _pytree.flatten(out)
    in_bytes = sum(x.nbytes for x in shaped)
    out_bytes = sum(_leaf_bytes(x) for x in out_leaves)
    return CostEstimate(flops=int(flops), transcendentals=int(transcendentals),
                        bytes_accessed=int(in_bytes + out_bytes))
