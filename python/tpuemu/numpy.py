# SPDX-License-Identifier: MIT
"""The jax.numpy functions a kernel body uses, traced (tpuemu.numpy as jnp)."""
import builtins as _py

from . import _held_float

from ._trace import (float32, bfloat16, int8, uint8, int16, uint16, int32, uint32, bool_, call,
                     int4, uint4, int2, uint2, float16, float8_e5m2, float8_e4m3fn,
                     float8_e4m3fnuz, float8_e5m2fnuz, float8_e4m3b11fnuz, Value,
                     Ref, trace_error, reducer)

inf = float("inf")
nan = float("nan")




def _v(x):
    # a ref given where a value is meant (jnp.zeros_like(acc_ref))
    if isinstance(x, _trace.ReshapedRef) and x.folded:
        return x[...]
    if isinstance(x, Ref):
        v = Value("text", x.name, dt=x.dtype)
        v.shape = x.shape
        return v
    return x


def _logical(v, shape):
    """@v with the shape JAX gives it (the device keeps its 2-D view)."""
    try:
        shape = (int(shape),) if isinstance(shape, int) else tuple(int(d) for d in shape)
    except TypeError:
        return v
    if -1 in shape:
        total = getattr(v, "_total", None)
        if total is None:
            return v
        known = 1
        for d in shape:
            known *= d if d != -1 else 1
        shape = tuple(total // known if d == -1 else d for d in shape)
    v.shape = shape
    if len(shape) > _fold.DEVICE_RANK and v.dev is None:
        v.dev = _fold.fold_shape(shape)		# as _nd_shape made it
    return v


def _rank(x):
    s = getattr(x, "shape", None) if isinstance(x, Value) else None
    return None if s is None else len(s)


from ._trace import TraceError as _TraceError, where as _where  # noqa: E402


class _UnsignedDot(_TraceError, NotImplementedError):
    """As Mosaic's NotImplementedError: a matmul of unsigned 32-bit integers."""


def _refuse_unsigned_dot(a, b, what):
    """A uint32 operand of a dot: the MXU has no such matmul (Mosaic refuses
    unsigned dots; uint8 here takes the int8 path with int32 sums)."""
    for x in (a, b):
        d = getattr(_v(x), "dt", None) if isinstance(x, (Value, Ref)) else None
        if d is not None and getattr(d, "name", None) == "uint32":
            raise _UnsignedDot("Unsigned integer dtype uint32 in %s (dot_general): no matmul "
                               "of it on the MXU (float32, bfloat16, int8 and uint8 only)\n"
                               "  at %s" % (what, _where()))


def _promote_dot(a, b):
    """A float operand with an integer one: the integer one converted to
    the float's dtype first, as JAX promotes a dot's operands (the MXU
    multiplies like dtypes; quantized matmul's float path is
    dot(x_f32, w_int8))."""
    da, db = (_trace.dt_of(_v(x)) if isinstance(x, (Value, Ref)) else None for x in (a, b))
    if da is None or db is None or da is db:
        return a, b
    fa, fb = _trace.is_float_dt(da), _trace.is_float_dt(db)
    if fa and not fb and db is not bool_:
        return a, _v(b).astype(da)
    if fb and not fa and da is not bool_:
        return _v(a).astype(db), b
    return a, b


def dot(a, b, preferred_element_type=None, *, precision=None):
    """jnp.dot of 2-D blocks; a 1-D operand whose shape tracing knows (a
    whole ref read) as NumPy's: a matrix-vector product is the (rows, 1)
    product with the vector as a column, given back 1-D (a row); two
    vectors, their inner product. @precision is accepted and moot: the
    MXU here multiplies float32 in float32 (HIGHEST) whatever is asked."""
    kw = {} if preferred_element_type is None else \
        {"preferred_element_type": preferred_element_type}
    _refuse_unsigned_dot(a, b, "jnp.dot")
    a, b = _promote_dot(a, b)
    ra, rb = _rank(a), _rank(b)
    if rb == 1 and ra == 1:
        p = _v(a) * _v(b)
        return sum(p if preferred_element_type is None else p.astype(preferred_element_type))
    if rb == 1:
        return reshape(call("jnp.dot", a, _v(b).T, **kw), (-1,))
    if ra is not None and ra > 2 or rb is not None and rb > 2:
        raise trace_error("jnp.dot of %d-D and %d-D values: use lax.dot_general with "
                          "batch dimensions" % (ra or 2, rb or 2))
    return call("jnp.dot", a, b, **kw)


def matmul(a, b, preferred_element_type=None, *, precision=None):
    return dot(a, b, preferred_element_type, precision=precision)


def _unary(name):
    def f(x):
        return call("jnp." + name, _v(x))
    f.__name__ = name
    return f


for _n in ("exp exp2 log log1p sqrt rsqrt reciprocal tanh abs negative square "
           "floor ceil sign round logical_not sin cos").split():
    globals()[_n] = _unary(_n)


def _scalar_like(x):
    return isinstance(x, bool) or isinstance(x, Value) and x.scalar


def _binary(name):
    def f(a, b):
        if name in ("logical_and", "logical_or") and _py.all(_scalar_like(x) for x in (a, b)) \
                and _py.any(isinstance(x, Value) for x in (a, b)):
            # of scalar-core values (a while_loop condition), a scalar-core
            # expression: & and | of compares are logical there
            # (loop conditions take no & or |): 0/1 values summed or multiplied
            a2, b2 = (int(x) if isinstance(x, bool) else x if x.dt is bool_ else x != 0
                      for x in (a, b))
            return (a2 * b2 > 0) if name == "logical_and" else (a2 + b2 > 0)
        if name in ("maximum", "minimum") and _py.all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b)):
            # of Python numbers, a constant (JAX folds it: a pl.ds size, say)
            return _py.max(a, b) if name == "maximum" else _py.min(a, b)
        if name in ("maximum", "minimum") and _scalar_int(a) and _scalar_int(b):
            # of scalar-core integers, one (libtpurt's min(a, b)): a page
            # index computed from SMEM lengths stays an index
            v = call("jnp." + name, a, b)
            v.scalar = True
            return _trace.maybe_spill(v)
        return call("jnp." + name, _v(a), _v(b))
    f.__name__ = name
    return f


for _n in ("add subtract multiply divide maximum minimum power mod equal not_equal "
           "less less_equal greater greater_equal logical_and logical_or bitwise_and "
           "bitwise_or bitwise_xor left_shift right_shift").split():
    globals()[_n] = _binary(_n)


def invert(x):
    """jnp.invert / bitwise_not: ~x (bitwise on integers, not on masks)."""
    return ~_v(x)


bitwise_not = bitwise_invert = invert


rint = globals()["round"]	# both round half to even, as NumPy's


def isnan(x):
    """NaN is the one value unequal to itself."""
    return _v(x) != _v(x)


def isfinite(x):
    """x - x is 0 but for infinities and NaN (lax.is_finite)."""
    from . import lax
    return lax.is_finite(_v(x))


def isinf(x):
    return abs(_v(x)) == inf	# noqa: F821  (made above)


def tan(x):
    return sin(x) / cos(x)	# noqa: F821  (made above)


def transpose(x, axes=None):
    """jnp.transpose: x.T of a 2-D value, any permutation of a value of
    rank 3 or 4 (axes reversed by default); the device moves the elements
    into another ref."""
    x = _v(x)
    if _fold.is_high(x):
        return _fold.transpose(x, tuple(reversed(range(x.ndim))) if axes is None else axes)
    if axes is None:
        return call("jnp.transpose", x)
    return call("jnp.transpose", x, tuple(int(a) for a in axes))


def _axis_perm(x, fn, moved):
    """The permutation jnp.swapaxes / moveaxis make of a value of rank 5 or 6."""
    r = x.ndim
    return _fold.transpose(x, moved(list(range(r)), r), "jnp." + fn)


def swapaxes(x, axis1, axis2):
    x = _v(x)
    if _fold.is_high(x):
        def moved(p, r):
            a, b = int(axis1) % r, int(axis2) % r
            p[a], p[b] = p[b], p[a]
            return p
        return _axis_perm(x, "swapaxes", moved)
    return call("jnp.swapaxes", x, int(axis1), int(axis2))


def moveaxis(x, source, destination):
    """jnp.moveaxis of one axis."""
    if isinstance(source, (tuple, list)) or isinstance(destination, (tuple, list)):
        raise trace_error("jnp.moveaxis: one source and one destination axis (ints)")
    x = _v(x)
    if _fold.is_high(x):
        def moved(p, r):
            a = p.pop(int(source) % r)
            p.insert(int(destination) % r, a)
            return p
        return _axis_perm(x, "moveaxis", moved)
    return call("jnp.moveaxis", x, int(source), int(destination))


def roll(x, shift, axis=None):
    """jnp.roll along one axis; the shift may be traced (pl.program_id, SMEM)."""
    if axis is None:
        raise trace_error("jnp.roll without axis rolls the flattened array; give axis=0 or 1")
    if axis in (0, -1) and len(getattr(x, "shape", None) or (0, 0)) == 1:
        axis = -1	# a 1-D value is a row on the device: its axis is the last
    from .pallas.tpu import _roll_once	# a traced shift along a middle axis there
    return _roll_once(_v(x), shift, axis, "jnp.roll")


def _gather_mode(mode, fill_value):
    """jnp.take_along_axis's mode: "fill" (None, jnp's default) or
    "promise_in_bounds", as strings or lax.GatherScatterMode."""
    m = getattr(mode, "name", mode)
    m = {None: "fill", "FILL_OR_DROP": "fill", "PROMISE_IN_BOUNDS": "promise_in_bounds"
         }.get(m, m)
    if m not in ("fill", "promise_in_bounds"):
        raise trace_error("jnp.take_along_axis(mode=%r): Pallas TPU gathers take mode "
                          "'fill' (the default) or 'promise_in_bounds' only" % (mode,))
    if fill_value is not None and m != "fill":
        raise trace_error("jnp.take_along_axis: fill_value needs mode='fill'")
    return m


def _host_take_along_axis(arr, indices, axis, mode, fill_value):
    """On the host, JAX's semantics: negative indices count from the end,
    others outside give the fill value (NaN, or an integer type's lowest,
    an unsigned one's highest value; True) where NumPy would raise."""
    a, ix = _np.asarray(arr), _np.asarray(indices)
    if axis is None:
        a, axis = a.ravel(), 0
    n = a.shape[axis]
    if mode == "fill":
        ix = _np.where((ix < 0) & (ix >= -n), ix + n, ix)
    bad = (ix < 0) | (ix >= n)
    if mode != "fill" and bad.any():
        raise IndexError("jnp.take_along_axis: an index is outside [0, %d) though "
                         "promised in bounds" % n)
    r = _np.take_along_axis(a, _np.where(bad, 0, ix), axis)
    if bad.any():
        if fill_value is None:
            k = r.dtype.kind
            fill_value = (_np.nan if k in "fc" else True if k == "b" else
                          _np.iinfo(r.dtype).min if k == "i" else _np.iinfo(r.dtype).max)
        r = _np.where(bad, _np.array(fill_value).astype(r.dtype), r)
    return r


def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None):
    """jnp.take_along_axis of 2-D values along axis 0 or 1 with int32
    indices of the result's shape: a device gather within the tile.
    Out-of-range indices follow jnp's default mode="fill" (indices in
    [-n, 0) count from the end, others give fill_value, by default NaN or
    the integer type's "invalid" value); with mode="promise_in_bounds" an
    index outside fails the job."""
    m = _gather_mode(mode, fill_value)
    if not (_trace._rec is not None or _is_traced((arr, indices))):
        r = _host_take_along_axis(_bf16_storage(arr), indices, axis, m, fill_value)
        return _as_bf16(r) if isinstance(arr, BF16Array) else r
    if axis is None:
        raise trace_error("jnp.take_along_axis(axis=None) gathers from the flattened "
                          "array; give axis=0 or 1 of a 2-D value")
    for x in (arr, indices):
        r = _rank(_v(x))
        if r is not None and r != 2:
            raise trace_error("jnp.take_along_axis of a %d-D value: only 2-D values "
                              "(axis 0 or 1) are gathered on the device" % r)
    kw = {}
    if m == "promise_in_bounds":
        kw["mode"] = Value("text", "promise_in_bounds")
    if fill_value is not None:
        kw["fill_value"] = fill_value
    return call("jnp.take_along_axis", _v(arr), _v(indices), axis=axis, **kw)


def take(a, indices, axis=None, mode=None, fill_value=None):
    """jnp.take of a 2-D value with 1-D int32 indices along axis 0 (rows)
    or 1 (columns): the indices broadcast across the other axis and
    gathered as take_along_axis. mode "fill" (jnp's default: [-n, 0) from
    the end, others fill_value), "promise_in_bounds", "clip" (indices
    clamped into range) or "wrap" (taken modulo the extent)."""
    if not (_trace._rec is not None or _is_traced((a, indices))):
        r = _host_take(_bf16_storage(a), indices, axis, mode, fill_value)
        return _as_bf16(r) if isinstance(a, BF16Array) else r
    m = getattr(mode, "name", mode)
    m = {"CLIP": "clip"}.get(m, m)
    x, ix = _v(a), _v(indices)
    shape, ishape = getattr(x, "shape", None), getattr(ix, "shape", None)
    if axis is None or shape is None or len(shape) != 2 or ishape is None or len(ishape) != 1:
        raise trace_error("jnp.take: a 2-D value and 1-D indices along axis 0 or 1 (got "
                          "shapes %s and %s, axis %r)" % (shape, ishape, axis))
    ax = int(axis) + 2 if int(axis) < 0 else int(axis)
    if ax not in (0, 1):
        raise trace_error("jnp.take(axis=%r) of a 2-D value" % (axis,))
    n = shape[ax]
    if m == "clip":
        ix, m = clip(ix, 0, n - 1), "promise_in_bounds"
    elif m == "wrap":
        ix, m = ix % n, "promise_in_bounds"
    k = ishape[0]
    if ax == 0:
        full = broadcast_to(reshape(ix, (k, 1)), (k, shape[1]))
    else:
        full = broadcast_to(reshape(ix, (1, k)), (shape[0], k))
    return take_along_axis(x, full, axis=ax, mode=m, fill_value=fill_value)


def _host_take(a, indices, axis, mode, fill_value):
    """jnp.take on the host: clip and wrap as NumPy's, fill and
    promise_in_bounds as take_along_axis with the indices broadcast."""
    m = getattr(mode, "name", mode)
    a, ix = _np.asarray(a), _np.asarray(indices)
    if m in ("clip", "CLIP", "wrap"):
        return _np.take(a, ix, axis=axis, mode="wrap" if m == "wrap" else "clip")
    if axis is None:
        a, axis = a.ravel(), 0
    axis %= a.ndim
    one, full = [1] * a.ndim, list(a.shape)
    one[axis] = full[axis] = ix.size
    r = _host_take_along_axis(a, _np.broadcast_to(ix.reshape(one), full), axis,
                              _gather_mode(mode, fill_value), fill_value)
    return r.reshape(a.shape[:axis] + ix.shape + a.shape[axis + 1:])


def concatenate(arrays, axis=0):
    """Parts stored into slices of a new array (rows or columns)."""
    arrays = tuple(_v(a) for a in arrays)
    if len(arrays) == 1:
        return arrays[0]
    if len(arrays) > 4:	# the statement syntax takes 4 parts a call: groups, bound
        from ._trace import local
        arrays = tuple(local(concatenate(arrays[k:k + 4], axis))
                       for k in range(0, len(arrays), 4))
        return concatenate(arrays, axis)
    if axis in (0, -1) and _py.all(len(getattr(a, "shape", None) or (0, 0)) == 1
                                   for a in arrays):
        axis = -1	# 1-D values are rows on the device: along the last axis
    return call("jnp.concatenate", arrays, axis=axis)


def stack(arrays, axis=0):
    """jnp.stack: each part given a unit dimension at @axis, then
    concatenated along it (the result has one more dimension, at most 4)."""
    arrays = tuple(_v(a) for a in arrays)
    if not arrays:
        raise trace_error("jnp.stack of no arrays")
    shapes = [getattr(a, "shape", None) for a in arrays]
    if _py.any(sh is None for sh in shapes):
        raise trace_error("jnp.stack: a part's shape is not known while tracing")
    if _py.any(tuple(sh) != tuple(shapes[0]) for sh in shapes):
        raise trace_error("jnp.stack: parts of shapes %s: all must have one shape"
                          % ", ".join(str(tuple(sh)) for sh in shapes))
    shape = tuple(shapes[0])
    nd = len(shape) + 1
    ax = int(axis) + nd if int(axis) < 0 else int(axis)
    if not 0 <= ax < nd:
        raise trace_error("jnp.stack(..., axis=%r): out of range for %d-D parts"
                          % (axis, nd - 1))
    if nd > 4:
        raise trace_error("jnp.stack of %d-D parts: the result would have %d dimensions "
                          "(arrays have 1 to 4)" % (nd - 1, nd))
    new = shape[:ax] + (1,) + shape[ax:]
    v = concatenate(tuple(reshape(a, new) for a in arrays), axis=ax)
    if ax == nd - 1 and len(arrays) > 1 and isinstance(v, Value) and \
            _py.all(isinstance(a, Value) and a.dt is arrays[0].dt for a in arrays):
        v._stack_last = arrays	# for a reshape that interleaves them (_value_at)
    return v


def floor_divide(a, b):
    return _v(a) // _v(b)


remainder = globals()["mod"]
true_divide = globals()["divide"]
# JAX's (and NumPy 2's) array-API names for the shifts
bitwise_left_shift = globals()["left_shift"]
bitwise_right_shift = globals()["right_shift"]


def fmod(a, b):
    """C's fmod: the sign of a (lax.rem)."""
    from . import lax
    return lax.rem(_v(a), _v(b))


def tile(x, reps):
    """jnp.tile of a 2-D value: copies along the columns, then the rows."""
    reps = (int(reps),) if isinstance(reps, int) else tuple(int(r) for r in reps)
    while len(reps) > 2 and reps[0] == 1:
        reps = reps[1:]		# leading unit counts: the 2-D value's own view
    if len(reps) == 1:
        reps = (1,) + reps	# as NumPy's: fewer reps than dimensions tile the last
    if len(reps) != 2 or reps[0] < 1 or reps[1] < 1:
        raise trace_error("jnp.tile: reps %r: a kernel's arrays are 2-D, give (rows, cols) "
                          "counts of at least 1" % (reps,))
    x = concatenate((_v(x),) * reps[1], axis=1)
    return concatenate((x,) * reps[0], axis=0)


def _einsum_sum_out(x, sub, keep):
    """Sum @x over its indices not in @keep (an index only it has)."""
    axes = tuple(i for i, c in enumerate(sub) if c not in keep)
    if not axes:
        return x, sub
    return sum(x, axis=axes), "".join(c for c in sub if c in keep)


def einsum(subscripts, *operands, preferred_element_type=None, precision=None,
           optimize=None):
    """jnp.einsum with explicit indices: operands contracted two at a time
    (left to right) as lax.dot_general, indices shared with the output
    or a later operand as batch dimensions; an index only one operand has
    and the output lacks is summed out first; the result is permuted to
    the output's order. No ellipsis, no repeated index within an operand
    (a diagonal)."""
    from . import lax
    spec = subscripts.replace(" ", "")
    ins, arrow, out = spec.partition("->")
    ins = ins.split(",")
    if "." in spec or len(ins) != len(operands) or not operands:
        raise trace_error("jnp.einsum(%r): give one index string per operand (%d), "
                          "without an ellipsis" % (subscripts, len(operands)))
    letters = "".join(ins)
    if not arrow:
        out = "".join(_py.sorted(c for c in set(letters) if letters.count(c) == 1))
    ops = []
    for sub, x in zip(ins, operands):
        x = _v(x)
        shape = getattr(x, "shape", None)
        if len(set(sub)) != len(sub) or not sub.isalpha():
            raise trace_error("jnp.einsum(%r): %r: indices are distinct letters (no "
                              "diagonals)" % (subscripts, sub))
        if shape is not None and len(shape) != len(sub):
            raise trace_error("jnp.einsum(%r): %r names %d dimensions of a value of shape %r"
                              % (subscripts, sub, len(sub), tuple(shape)))
        ops.append((sub, x))
    if len(set(out)) != len(out) or _py.any(c not in letters for c in out):
        raise trace_error("jnp.einsum(%r): output indices %r must be distinct and appear in "
                          "an operand" % (subscripts, out))
    while len(ops) > 1:
        (a, x), (b, y) = ops[0], ops[1]
        later = set(out).union(*(set(s) for s, _ in ops[2:]))
        x, a = _einsum_sum_out(x, a, later | set(b))
        y, b = _einsum_sum_out(y, b, later | set(a))
        batch = [c for c in a if c in b and c in later]
        contract = [c for c in a if c in b and c not in later]
        dims = (([a.index(c) for c in contract], [b.index(c) for c in contract]),
                ([a.index(c) for c in batch], [b.index(c) for c in batch]))
        z = lax.dot_general(x, y, dims, preferred_element_type=preferred_element_type)
        zsub = "".join(batch) + "".join(c for c in a if c not in b) + \
            "".join(c for c in b if c not in a)
        ops = [(zsub, z)] + ops[2:]
    sub, z = ops[0]
    z, sub = _einsum_sum_out(z, sub, set(out))
    if len(operands) == 1 and preferred_element_type is not None:
        z = z.astype(preferred_element_type)
    perm = tuple(sub.index(c) for c in out)
    if perm == tuple(range(len(perm))):
        return z
    return transpose(z, perm)


def _scalar_int(x):
    """A scalar-core integer: a Python int or bool, or a traced int scalar."""
    if isinstance(x, bool) or isinstance(x, int):
        return True
    return isinstance(x, Value) and x.scalar and not _trace.is_float_dt(x.dt) and \
        x.shape in (None, ())


def where(c, a, b):
    if _scalar_int(c) and _scalar_int(a) and _scalar_int(b) and \
            _py.any(isinstance(x, Value) for x in (c, a, b)):
        # scalar-core integers, folded to its arithmetic as libtpurt folds
        # them in statements, so that index maps take them too:
        # lax.select(below_or_on_diag(i, bq, j, bk), j, 0) in a kv index map
        if not isinstance(c, Value):
            return a if c else b
        if not (c.kind == "op" and c.text in ("==", "!=", "<", "<=", ">", ">=")):
            c = c != 0		# a compare is 1 or 0 already
        if isinstance(b, int) and b == 0:
            return c * a
        if isinstance(a, int) and a == 0:
            return (1 - c) * b
        return c * a + (1 - c) * b
    shapes = [tuple(x.shape) for x in (c, a, b)
              if isinstance(x, Value) and getattr(x, "shape", None) is not None]
    if shapes and _py.max(len(t) for t in shapes) >= 3 and len(set(shapes)) > 1:
        # libtpurt's where of rank 3 or 4 takes operands of one shape:
        # broadcast them first, as jnp.where's own broadcasting would
        out = _np.broadcast_shapes(*shapes)
        c, a, b = (broadcast_to(x, out) if isinstance(x, Value) and getattr(x, "shape", None)
                   is not None and tuple(x.shape) != out else x for x in (c, a, b))
    return call("jnp.where", c, a, b)


def clip(x, lo, hi):
    return call("jnp.clip", x, lo, hi)


sum = reducer("sum")	# noqa: A001
max = reducer("max")	# noqa: A001
min = reducer("min")	# noqa: A001
mean = reducer("mean")
argmax = reducer("argmax")	# int32 indices; axis required
argmin = reducer("argmin")


def all(x, axis=None, keepdims=False):	# noqa: A001
    """Whether every element is non-zero: the minimum of x != 0."""
    return min(_v(x) != 0, axis, keepdims)


def any(x, axis=None, keepdims=False):	# noqa: A001
    return max(_v(x) != 0, axis, keepdims)


def _like_dtype(x, out, dtype):
    """jnp.*_like's dtype=: the result cast unless it is x's dtype already."""
    if dtype is None:
        return out
    from ._trace import as_dtype
    have = getattr(x, "dtype", None) if isinstance(x, Ref) else getattr(x, "dt", None)
    try:
        if have is not None and as_dtype(have) == as_dtype(dtype):
            return out
    except TypeError:
        pass
    return out.astype(dtype)


def _view_of_ref(x):
    """Whether @x is a view of a ref (a window, reshape, bitcast): the
    *_like functions take its shape and dtype, as JAX's take a ref's."""
    return not isinstance(x, (Ref, Value)) and hasattr(x, "at") and \
        isinstance(getattr(x, "shape", None), tuple) and getattr(x, "dtype", None) is not None


def full_like(x, v, dtype=None):
    if _view_of_ref(x):
        return full(x.shape, v, dtype=dtype or x.dtype)
    return _like_dtype(x, call("jnp.full_like", _v(x), v), dtype)


def zeros_like(x, dtype=None):
    if _view_of_ref(x):
        return zeros(x.shape, dtype=dtype or x.dtype)
    return _like_dtype(x, call("jnp.zeros_like", _v(x)), dtype)


def ones_like(x, dtype=None):
    if _view_of_ref(x):
        return ones(x.shape, dtype=dtype or x.dtype)
    return _like_dtype(x, call("jnp.ones_like", _v(x)), dtype)


def astype(x, dtype):
    return x.astype(dtype)


def _nd_shape(shape, fn):
    """A shape of 1 to 4 dimensions as libtpurt takes it (() is (1, 1));
    a -1 stays -1 for jnp.reshape."""
    try:
        shape = (int(shape),) if isinstance(shape, int) else tuple(int(d) for d in shape)
    except TypeError:
        raise trace_error("jnp.%s: the shape must be a tuple of ints, not %r"
                          % (fn, shape)) from None
    if not shape:
        return (1, 1)
    if len(shape) > _fold.MAX_RANK:
        raise trace_error("jnp.%s: shape %r has %d dimensions; a kernel's arrays have 1 to %d"
                          % (fn, shape, len(shape), _fold.MAX_RANK))
    return _fold.fold_shape(shape)	# rank 5 and 6 as the device holds them


def _high_shape(shape):
    return not isinstance(shape, int) and len(tuple(shape)) > _fold.DEVICE_RANK


def reshape(x, shape):
    """jnp.reshape, row-major as jnp's: one that keeps the 2-D view (the
    last dimension, the product of the others) renames the shape; one that
    moves elements between rows and columns ((1024,) to (8, 128)) copies
    them."""
    x = _v(x)
    if isinstance(x, Value) and x.scalar:
        # a scalar-core value as a vector of one element: the vector unit
        # takes it broadcast (as stacking SMEM scalars needs)
        want = (shape,) if isinstance(shape, int) else tuple(shape)
        if _py.all(d in (1, -1) for d in want):
            return broadcast_to(x, tuple(1 for _ in want))
    from . import _value_at
    parts = _value_at.stacked_last(x, shape)
    if parts is not None:
        return _value_at.interleave(parts, shape)
    if _fold.is_high(x) or _high_shape(shape):
        if getattr(x, "shape", None) is None:
            raise trace_error("jnp.reshape of %s to %r: its shape is not known while tracing"
                              % (_trace._fmt(x), shape))
        return _fold.reshape(x, _trace._new_shape("jnp.reshape", x.shape, (shape,)))
    v = call("jnp.reshape", x, _nd_shape(shape, "reshape"))
    s = getattr(x, "shape", None)
    if s is not None:
        v._total = 1
        for d in s:
            v._total *= d
    return _logical(v, shape)


def unstack(x, axis=0):
    """jnp.unstack: the slices of @x along @axis, that dimension dropped
    (x[..., i, ...] for each i), as a tuple."""
    x = _v(x)
    shape = getattr(x, "shape", None)
    if shape is None or len(shape) == 0:
        raise trace_error("jnp.unstack of %s: it needs at least one dimension"
                          % _trace._fmt(x))
    if not -len(shape) <= int(axis) < len(shape):
        raise ValueError("jnp.unstack: axis %d is out of bounds for an array of rank %d"
                         % (axis, len(shape)))
    ax = int(axis) % len(shape)
    return tuple(x[(slice(None),) * ax + (i,)] for i in range(shape[ax]))


def expand_dims(a, axis):
    """jnp.expand_dims: @a reshaped with unit dimensions at @axis (an int or
    a tuple, counted in the result's rank, as NumPy places them)."""
    a = _v(a)
    shape = getattr(a, "shape", None)
    if shape is None:
        raise trace_error("jnp.expand_dims of %s: its shape is not known while tracing"
                          % _trace._fmt(a))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    rank = len(shape) + len(axes)
    for ax in axes:
        if not -rank <= ax < rank:
            raise ValueError("jnp.expand_dims: axis %d is out of bounds for a result of "
                             "rank %d" % (ax, rank))
    new = list(shape)
    for ax in sorted(ax % rank for ax in axes):
        new.insert(ax, 1)
    return reshape(a, tuple(new))


def zeros(shape, dtype=None):
    """jnp.zeros: float32 unless dtype says otherwise."""
    return _logical(call("jnp.zeros", _nd_shape(shape, "zeros"), dtype=dtype or float32), shape)


def ones(shape, dtype=None):
    return _logical(call("jnp.full", _nd_shape(shape, "ones"), 1, dtype=dtype or float32), shape)


def full(shape, fill_value, dtype=None):
    """jnp.full: the fill's dtype unless dtype says otherwise."""
    if dtype is None and isinstance(fill_value, Value) and fill_value.dt == bool_:
        dtype = bool_	# a traced compare: a mask (the device's fill would be int32)
    if dtype is None:
        v = call("jnp.full", _nd_shape(shape, "full"), fill_value)
        if v.dt is None:
            v.dt = _trace.dt_of(fill_value)
            v.dt = v.dt if isinstance(v.dt, _trace.DType) else \
                float32 if v.dt == "weak float" else int32 if v.dt == "weak int" else None
        return _logical(v, shape)
    return _logical(call("jnp.full", _nd_shape(shape, "full"), fill_value, dtype=dtype), shape)


def arange(start, stop=None, step=1, dtype=None):
    """jnp.arange of Python numbers: a 1-D iota, scaled and shifted."""
    from .lax import broadcasted_iota
    if stop is None:
        start, stop = 0, start
    n = _py.max(0, -(-(stop - start) // step))
    if dtype is None:
        dtype = float32 if _py.any(isinstance(v, float) for v in (start, stop, step)) else int32
    x = broadcasted_iota(dtype, (n,), 0)
    if step != 1:
        x = x * step
    return x + start if start else x


def broadcast_to(x, shape):
    """jnp.broadcast_to of a row, a column or a scalar: x plus zeros of
    the shape (the device broadcasts rows, columns and scalars)."""
    logical = shape
    shape = _nd_shape(shape, "broadcast_to")
    if _high_shape(logical):
        shape = tuple(logical)		# zeros() folds it
    if not isinstance(x, (Value, Ref)) or getattr(x, "scalar", False):
        return _logical(full(shape, x), logical)
    return _logical(call("jnp.add", _v(x), zeros(shape, _v(x).dtype)), logical)


__all__ = ["float32", "bfloat16", "int8", "uint8", "int16", "uint16", "int32", "uint32", "bool_",
           "int4", "uint4", "int2", "uint2",
           "inf", "nan",
           "dot", "matmul", "where", "clip", "sum", "max", "min", "mean", "full_like", "astype",
           "exp", "maximum", "minimum", "zeros_like", "ones_like", "zeros", "ones", "full",
           "broadcast_to", "transpose", "swapaxes", "moveaxis", "roll", "take_along_axis", "take", "einsum", "reshape", "concatenate", "stack", "tile",
           "floor_divide", "remainder", "true_divide", "fmod", "rint", "isnan", "tan", "all", "any",
           "arange"]


# --- outside a kernel: NumPy, with JAX's default dtypes ---
#
# The docs' examples build their inputs and check their results with jnp
# on the host (jnp.arange(...).reshape(...), jnp.max(jnp.abs(r - ref))).
# There a function of this module, or any other NumPy name, is NumPy's,
# its 64-bit results narrowed to 32 bits as JAX's are without x64.

import functools as _functools  # noqa: E402
import sys as _sys  # noqa: E402

import numpy as _np  # noqa: E402

from . import _trace  # noqa: E402
from . import _fold  # noqa: E402
from . import _ad  # noqa: E402

def nextafter(x, y):
    """jnp.nextafter of float32 values: x's bits stepped by one toward y
    (away from zero when y is farther out), the smallest subnormal of y's
    sign from zero, y where they are equal, NaN if either is."""
    from .lax import bitcast_convert_type
    xi = bitcast_convert_type(x, int32)
    step = where((y > x) == (x > 0), 1, -1)
    r = bitcast_convert_type(xi + step, float32)
    r = where(x == 0, where(y > 0, 2.0 ** -149, -2.0 ** -149), r)
    r = where(x == y, y, r)
    return where(isnan(x) | isnan(y), x + y, r)


def array(object, dtype=None, copy=True, **kw):
    """jnp.array in a kernel body: of a Python number, a scalar constant
    of @dtype (jnp.array(0, dtype=jnp.int32) starts a running sum on the
    scalar core); of a traced value, the value (cast to @dtype). On the
    host, NumPy's with JAX's 32-bit defaults."""
    if isinstance(object, (Value, Ref)):
        v = object[...] if isinstance(object, Ref) else object
        return v.astype(dtype) if dtype is not None else v
    if isinstance(object, (bool, int, float, _np.generic)) and not isinstance(object, complex):
        x = object.item() if isinstance(object, _np.generic) else object
        if dtype is None:
            dtype = getattr(object, "dtype", None) or (
                bool_ if isinstance(x, bool) else int32 if isinstance(x, int) else float32)
        d = _trace.as_dtype(dtype)
        if d.name == "bool":
            x = bool(x)
        elif _trace.is_float_dt(d):
            x = float(x)
        else:
            x = int(x)
        if d in _trace._HELD_FLOATS:
            # the constant rounded here: a scalar-core float32 of its value
            v = _trace.scalar("(%s)" % _trace._fmt(_held_float.round_constant(x, d.name)),
                              float32).astype(float32)
            v.dt = d
            return v
        return _trace.scalar("(%s)" % _trace._fmt(x), d).astype(d)
    raise _trace.trace_error("jnp.array of %r in a kernel body: only of a Python number "
                             "or a traced value" % (type(object).__name__,))


asarray = array


def issubdtype(arg1, arg2):
    """jnp.issubdtype: a constant, in a kernel too; of the kernel's dtypes
    (jnp.float32, x.dtype of a ref), NumPy's and their classes
    (jnp.floating, jnp.integer), and of semaphores' (pl.semaphore,
    pltpu.dma_semaphore)."""
    def plain(d):
        d = getattr(d, "__wrapped__", d)	# jnp.floating: NumPy's, behind host_only
        if isinstance(d, _trace.SemDType):
            return d.kind
        if isinstance(d, _trace.HostBF16DType):
            return None
        if isinstance(d, _trace.DType):
            return _np.dtype(d.np_name) if d is not bfloat16 else None
        return d
    a, b = plain(arg1), plain(arg2)
    if getattr(a, "_is_semaphore_dtype", False) or getattr(b, "_is_semaphore_dtype", False):
        return isinstance(a, type) and isinstance(b, type) and issubclass(a, b)
    if a is None or b is None:	# bfloat16: a floating type of its own
        return (a is None and b is None) or a is None and _py.any(
            b is t for t in (_np.floating, _np.inexact, _np.number, _np.generic))
    return bool(_np.issubdtype(a, b))


_HOST_NAMES = {"astype": None, "full_like": "full_like", "issubdtype": None,
               "take_along_axis": None, "take": None,	# None: the function serves the host itself
               "rsqrt": "_host_rsqrt"}	# NumPy has none: this module's


def _is_traced(x):
    if isinstance(x, (Value, Ref, _trace.Window)):
        return True
    if isinstance(x, (list, tuple)):
        return _py.any(_is_traced(y) for y in x)
    return False


def _host_arg(x):
    if isinstance(x, _trace.HostBF16DType) or isinstance(x, str) and x == "bfloat16":
        return _np.float32	# the caller rounds (_is_bf16_request)
    if isinstance(x, _trace.DType):
        if x is bfloat16:
            return _np.float32
        return _np.dtype(x.np_name)
    return x


def _is_bf16(d):
    """Whether @d names bfloat16 (jnp.bfloat16, a host bf16 array's dtype,
    "bfloat16"); NumPy's uint16 does not here (those are bits)."""
    return d is bfloat16 or isinstance(d, _trace.HostBF16DType) or \
        isinstance(d, str) and d == "bfloat16"


def bf16_bits(x):
    """float32 (or anything NumPy converts) -> bfloat16 bits as uint16,
    rounding to nearest even as libtpurt does; NaN stays a quiet NaN."""
    a = _np.ascontiguousarray(x, dtype=_np.float32)
    u = a.view(_np.uint32).astype(_np.uint64)
    nan = _np.isnan(a)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(_np.uint16)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(_np.uint16)
    return r


def round_bf16(x):
    """float32 values rounded to the nearest bfloat16 (ties to even; NaN
    stays a quiet NaN), kept in float32: the values a bf16 array holds."""
    bits = bf16_bits(x).astype(_np.uint32) << 16
    return bits.view(_np.float32).reshape(_np.shape(x))


def _bf16_storage(x):
    """A BF16Array's float32 values as a plain ndarray (others unchanged)."""
    if isinstance(x, BF16Array):
        return _np.ndarray.view(x, _np.ndarray)
    if isinstance(x, (list, tuple)):
        return type(x)(_bf16_storage(y) for y in x)
    return x


def _as_bf16(r):
    """A float result made a bfloat16 one: rounded, as a BF16Array (0-d for
    a scalar); tuples and lists element by element; others unchanged."""
    if isinstance(r, (tuple, list)):
        return type(r)(_as_bf16(y) for y in r)
    if getattr(r, "_counted", False):	# pl.estimate_cost's: the dtype alone
        return r.astype(bfloat16) if _trace.is_float_dt(r.dtype) else r
    if isinstance(r, (_np.ndarray, _np.generic)) and r.dtype.kind == "f":
        return round_bf16(r).view(BF16Array)
    if isinstance(r, float):
        return round_bf16(r).view(BF16Array)
    return r


def _other_float(args):
    """Whether an operand besides the bf16 ones is a float array of its own
    (float32/float64, not a Python float): then, as JAX promotes
    bfloat16 with float32, the result is float32."""
    for a in args:
        if isinstance(a, (list, tuple)):
            if _other_float(a):
                return True
        elif isinstance(a, BF16Array) or isinstance(a, (bool, int, float)):
            continue
        elif isinstance(a, (_np.ndarray, _np.generic)) and a.dtype.kind in "fc":
            return True
    return False


def _int_to_f32(args):
    """Integer and bool arrays beside a bf16 operand: float32 (JAX gives
    bfloat16; NumPy would promote int32 with float32 to float64)."""
    out = []
    for a in args:
        if isinstance(a, (_np.ndarray, _np.generic)) and a.dtype.kind in "iub" and \
                not isinstance(a, BF16Array):
            a = _np.asarray(a).astype(_np.float32)
        out.append(a)
    return out


class HostArray(_np.ndarray):
    """A host array jnp made (a NumPy array) with JAX's functional update:
    x.at[idx].set(y), .add, .multiply, .divide, .min, .max, .get (a new
    array; x is unchanged)."""

    @property
    def at(self):
        return _HostAt(self)

    def block_until_ready(self):
        """x.block_until_ready(): the array (pallas_call returns when done)."""
        return self

    def astype(self, dtype, *args, **kw):
        if _is_bf16(dtype):	# x.astype(jnp.bfloat16): rounded to nearest even
            return round_bf16(self).view(BF16Array)
        if dtype in _FLOAT8_ARRAYS:
            return _float8_array(self, dtype)
        r = _np.ndarray.astype(self, _host_arg(dtype), *args, **kw)
        if dtype in _NARROW_ARRAYS:
            return _narrow_array(r, dtype)
        return r.view(UInt16Array) if dtype is uint16 else r


class UInt16Array(HostArray):
    """A uint16 array on the host as jnp makes it (jnp.asarray(x,
    dtype=jnp.uint16), x.astype(jnp.uint16), jnp.uint16(x), a pallas_call's
    uint16 output): uint16 integers. A plain NumPy uint16 array stays
    bfloat16 bits (tpuemu.to_bf16), which pallas_call takes as bf16."""

    @staticmethod
    def _keep(r):
        # results of another dtype (x.view(np.int16), x + int32, x.astype)
        # are no longer uint16 integers
        if isinstance(r, UInt16Array) and r.dtype != _np.uint16:
            return _np.ndarray.view(r, HostArray)
        return r

    def view(self, *args, **kw):
        return self._keep(_np.ndarray.view(self, *args, **kw))

    def astype(self, dtype, *args, **kw):
        return self._keep(HostArray.astype(self, dtype, *args, **kw))

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        r = _np.ndarray.__array_wrap__(self, obj, context, return_scalar)
        return self._keep(r)


class HostNarrowDType:
    """x.dtype of a host int4, uint4, int2 or uint2 array (NarrowIntArray)
    or float8 array (Float8Array): equal to jnp.int4 (and "int4") ...;
    NumPy's attributes are its int8, uint8 or float32 storage's, so NumPy's
    functions work on such arrays; @itemsize JAX's, where it is not the
    storage's."""

    def __init__(self, d, itemsize=None):
        self.jnp_dtype = d
        self.name = d.name
        if itemsize is not None:
            self.itemsize = itemsize

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(_np.dtype(self.jnp_dtype.np_name), name)

    def __eq__(self, other):
        return other is self or other is self.jnp_dtype or \
            isinstance(other, str) and other == self.name

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return "dtype(%s)" % self.name

    def __str__(self):
        return self.name


class NarrowIntArray(HostArray):
    """A host array of int4, uint4, int2 or uint2 (NumPy has none) as jnp
    makes it (jnp.asarray(x, dtype=jnp.int4), x.astype(jnp.uint4), a
    pallas_call's output): int8 or uint8 storage holding values in the
    type's range (wrapped on the way in), x.dtype == jnp.int4. NumPy's
    functions and arithmetic see the storage: their results are int8 or
    uint8 arrays, not narrow ones."""
    host_dtype = None	# each subclass's

    @property
    def dtype(self):
        return self.host_dtype

    def _keep(self, r):
        return _np.ndarray.view(r, HostArray) if isinstance(r, NarrowIntArray) else r

    def view(self, *args, **kw):
        return self._keep(_np.ndarray.view(self, *args, **kw))

    def astype(self, dtype, *args, **kw):
        if dtype in _NARROW_ARRAYS:
            return _narrow_array(_np.asarray(self), dtype)
        return self._keep(HostArray.astype(self, dtype, *args, **kw))

    def __array_wrap__(self, obj, context=None, return_scalar=False):
        r = _np.ndarray.__array_wrap__(self, obj, context, return_scalar)
        return self._keep(r)


_NARROW_ARRAYS = {}
for _d in (int4, uint4, int2, uint2):
    _NARROW_ARRAYS[_d] = type(_d.name.capitalize() + "Array", (NarrowIntArray,),
                              {"host_dtype": HostNarrowDType(_d)})


def _narrow_array(x, d):
    """@x (integers, or floats truncated and saturated) as a host array of
    narrow integer type @d, its values wrapped into d's range."""
    a = _np.asarray(x)
    lo, hi = _trace._INT_RANGES[d.name]
    if a.dtype.kind == "f":
        a = _np.clip(_np.nan_to_num(_np.trunc(a)), lo, hi)
    a = _trace.wrap_held(a.astype(_np.int64), d)
    return a.astype(_np.dtype(d.np_name)).view(_NARROW_ARRAYS[d])


def _held_dtype(a):
    """The held DType of host array @a (jnp's uint16, narrow integers,
    float16 and float8s), or None."""
    if isinstance(a, UInt16Array):
        return uint16
    if isinstance(a, (NarrowIntArray, Float8Array)):
        return a.host_dtype.jnp_dtype
    if isinstance(a, (_np.ndarray, _np.generic)) and a.dtype == _np.float16:
        return float16
    return None


class Float8Array(HostArray):
    """A host array of a float8 type (NumPy has none) as jnp makes it
    (jnp.asarray(x, dtype=jnp.float8_e4m3fn), x.astype(...), a
    pallas_call's output): float32 storage holding values exact in the
    type (rounded to nearest even on the way in), x.dtype ==
    jnp.float8_e4m3fn. NumPy's functions see the float values; arithmetic
    of one float8 type's arrays (with Python numbers) gives that type,
    rounded, as XLA computes it in float32 and rounds; with any other
    array, NumPy's float32 result."""
    host_dtype = None	# each subclass's

    @property
    def dtype(self):
        return self.host_dtype

    @property
    def itemsize(self):
        return 1

    @property
    def nbytes(self):
        return self.size

    def _own(self, r):
        """@r (a float result of this type's operands) rounded into it."""
        if isinstance(r, (_np.ndarray, _np.generic)) and r.dtype.kind == "f":
            return _float8_array(r, self.host_dtype.jnp_dtype)
        return _narrow(r)

    def _same(self, operands):
        return _py.all(type(a) is type(self) or isinstance(a, (bool, int, float))
                       or isinstance(a, (list, tuple)) and self._same(a) for a in operands)

    def astype(self, dtype, *args, **kw):
        return HostArray.astype(_float8_storage(self), dtype, *args, **kw)

    def view(self, *args, **kw):
        return _np.ndarray.view(_float8_storage(self), *args, **kw)

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        if kw.get("out") is not None or method == "at":
            raise TypeError("NumPy's %s into a %s array: jnp's arrays are immutable (x.at[i] "
                            "gives a new one)" % (ufunc.__name__, self.host_dtype.name))
        r = getattr(ufunc, method)(*_float8_storage(list(inputs)), **kw)
        if not self._same(inputs):
            return _narrow(r) if not isinstance(r, tuple) else tuple(map(_narrow, r))
        return self._own(r) if not isinstance(r, tuple) else tuple(map(self._own, r))

    def __array_function__(self, func, types, args, kwargs):
        r = func(*_float8_storage(list(args)),
                 **{k: _float8_storage(v) for k, v in kwargs.items()})
        same = self._same(list(args) + list(kwargs.values())) and "dtype" not in kwargs
        return self._own(r) if same else _narrow(r)

    def __getitem__(self, idx):
        r = _np.ndarray.__getitem__(_float8_storage(self), idx)
        return _float8_array(r, self.host_dtype.jnp_dtype)	# an element: 0-d, as JAX's

    def __setitem__(self, idx, value):
        _float8_storage(self)[idx] = _held_float.round_host(
            _np.asarray(_float8_storage(value), _np.float32), self.host_dtype.name)

    def item(self, *args):
        return _float8_storage(self).item(*args)

    def tolist(self):
        return _float8_storage(self).tolist()

    def __reduce__(self):
        return (_float8_array, (_np.array(_float8_storage(self)), self.host_dtype.jnp_dtype))

    def __repr__(self):
        return "Array(%s, dtype=%s)" % (_np.array2string(
            _float8_storage(self), separator=", ", prefix="Array("), self.host_dtype.name)


_FLOAT8_ARRAYS = {}
for _d in _trace.FLOAT8S:
    _FLOAT8_ARRAYS[_d] = type(_d.name.capitalize() + "Array", (Float8Array,),
                              {"host_dtype": HostNarrowDType(_d, itemsize=1)})


def _float8_storage(x):
    """A Float8Array's float32 values as a plain HostArray (others unchanged)."""
    if isinstance(x, Float8Array):
        return _np.ndarray.view(x, HostArray)
    if isinstance(x, (list, tuple)):
        return type(x)(_float8_storage(y) for y in x)
    return x


def _float8_array(x, d):
    """@x rounded to float8 type @d (nearest even) as its host array."""
    d = _trace.as_dtype(d)
    a = _np.asarray(_bf16_storage(_float8_storage(x)), dtype=_np.float32)
    return _np.array(_held_float.round_host(a, d.name)).view(_FLOAT8_ARRAYS[d])


class BF16Array(HostArray):
    """A bfloat16 array on the host, as JAX's: float32 storage holding values
    exact in bfloat16 (every result that is bf16 is rounded to nearest even,
    as XLA computes bf16 in float32 and rounds), x.dtype reporting
    bfloat16 (== jnp.bfloat16). NumPy's functions see the float values
    (np.asarray, np.testing.assert_allclose); arithmetic and NumPy functions
    of bf16 operands (with Python numbers or integer arrays) give bf16, with
    a float32 array float32; comparisons give bools. pallas_call sends the
    bf16 bits (tpuemu.to_bf16) and gives bf16 outputs back as these."""

    @property
    def dtype(self):
        return _trace.host_bf16

    @property
    def itemsize(self):
        return 2

    @property
    def nbytes(self):
        return 2 * self.size

    def bits(self):
        """The bfloat16 bits (uint16), as libtpurt holds them."""
        a = _np.ascontiguousarray(_bf16_storage(self))
        return (a.view(_np.uint32) >> 16).astype(_np.uint16)

    @classmethod
    def from_bits(cls, h):
        h = _np.ascontiguousarray(h, dtype=_np.uint16)
        return (h.astype(_np.uint32) << 16).view(_np.float32).view(cls)

    def astype(self, dtype, *args, **kw):
        if _is_bf16(dtype):
            return _np.array(_bf16_storage(self)).view(BF16Array)
        r = _bf16_storage(self).astype(_host_arg(dtype), *args, **kw)
        return _narrow(r) if isinstance(r, _np.ndarray) else r

    def view(self, *args, **kw):
        if not args and not kw:
            return _np.ndarray.view(self)
        t = kw.get("type", args[0] if args else None)
        if isinstance(t, type) and issubclass(t, _np.ndarray) and len(args) < 2 and \
                "dtype" not in kw:
            return _np.ndarray.view(self, t)
        if len(args) > 1 or [k for k in kw if k != "dtype"] or (args and kw):
            raise TypeError("BF16Array.view(dtype): one dtype (a bitcast of the bfloat16 "
                            "bits), not view(%s)" % ", ".join(
                                [repr(a) for a in args] + ["%s=%r" % kv for kv in kw.items()]))
        d = kw["dtype"] if kw else args[0]
        if _is_bf16(d):
            return _np.ndarray.view(self, BF16Array)
        # as JAX's x.view(dtype): the bf16 bits (uint16) reinterpreted
        return self.bits().view(_host_arg(d))

    def __getitem__(self, idx):
        r = _np.ndarray.__getitem__(self, idx)
        if isinstance(r, _np.generic):	# an element: a 0-d bf16 array, as JAX's
            return _np.array(r, dtype=_np.float32).view(BF16Array)
        return r

    def item(self, *args):
        return _bf16_storage(self).item(*args)

    def tolist(self):
        return _bf16_storage(self).tolist()

    def tobytes(self, order="C"):
        return self.bits().tobytes(order)

    def __array_ufunc__(self, ufunc, method, *inputs, **kw):
        out = kw.pop("out", None)
        if kw.get("dtype") is not None and _is_bf16(kw["dtype"]):
            kw["dtype"] = _np.float32
        f32 = _other_float(inputs) or kw.get("dtype") is not None
        args = _int_to_f32(_bf16_storage(list(inputs)))
        r = getattr(ufunc, method)(*args, **kw)
        if method == "at":	# np.add.at(x, idx, v): in place, rounded again
            if isinstance(inputs[0], BF16Array):
                args[0][...] = round_bf16(args[0])
            return r
        if not f32:
            r = _as_bf16(r)
        else:
            r = _narrow(r) if not isinstance(r, tuple) else tuple(_narrow(x) for x in r)
        if out is None:
            return r
        outs = out if isinstance(out, tuple) else (out,)
        rs = r if isinstance(r, tuple) else (r,)
        for o, v in zip(outs, rs):
            if isinstance(o, BF16Array):
                _bf16_storage(o)[...] = round_bf16(v)
            else:
                o[...] = _bf16_storage(v)
        return out[0] if isinstance(out, tuple) and len(out) == 1 else out

    def __array_function__(self, func, types, args, kwargs):
        # NumPy's functions of float32 storage: bf16 results rounded (a
        # no-op for those that move values: reshape, concatenate ...)
        if "dtype" in kwargs and _is_bf16(kwargs["dtype"]):
            kwargs = dict(kwargs, dtype=_np.float32)
            f32 = False
        else:
            f32 = _other_float(list(args) + list(kwargs.values())) or \
                kwargs.get("dtype") is not None
        r = func(*_bf16_storage(list(args)), **{k: _bf16_storage(v) for k, v in kwargs.items()})
        # those that write into an argument (np.copyto, np.put, out=...):
        # its values rounded to bf16 again
        for a in list(args[:1]) + [kwargs.get("out")]:
            if isinstance(a, BF16Array) and a.flags.writeable and \
                    (a is kwargs.get("out") or func.__name__ in _WRITES_FIRST):
                _bf16_storage(a)[...] = round_bf16(_bf16_storage(a))
        if isinstance(kwargs.get("out"), BF16Array):
            return kwargs["out"]
        return _narrow(r) if f32 else _as_bf16(r)

    def __setitem__(self, idx, value):
        _np.ndarray.__setitem__(_bf16_storage(self), idx, round_bf16(
            _np.asarray(_bf16_storage(value), dtype=_np.float32)))

    def fill(self, value):
        _bf16_storage(self).fill(round_bf16(value))

    def __reduce__(self):
        return (_bf16_from_float32, (_np.array(_bf16_storage(self)),))

    def __repr__(self):
        return "Array(%s, dtype=bfloat16)" % _np.array2string(
            _bf16_storage(self), separator=", ", prefix="Array(")


_WRITES_FIRST = frozenset("copyto put place putmask fill_diagonal put_along_axis".split())


def _bf16_method(name):
    # NumPy's function of the float32 storage, the result rounded once (the
    # methods themselves would round between their steps, or not at all)
    np_fn = getattr(_np, name)

    def method(self, *args, **kw):
        return np_fn(self, *args, **kw)
    method.__name__ = name
    return method


for _m in "sum prod mean var std cumsum cumprod dot trace ptp round".split():
    setattr(BF16Array, _m, _bf16_method(_m))


def _bf16_from_float32(a):
    return round_bf16(a).view(BF16Array)


class _HostAt:
    def __init__(self, a):
        self._a = a

    def __getitem__(self, idx):
        return _HostAtIndex(self._a, idx)


class _HostAtIndex:
    def __init__(self, a, idx):
        self._a, self._idx = a, idx

    def _apply(self, fn, y):
        bf16 = isinstance(self._a, BF16Array)
        r = _np.array(_bf16_storage(self._a))
        y = _bf16_storage(y)
        r[self._idx] = fn(r[self._idx], _np.asarray(y)) if fn else _np.asarray(y)
        return round_bf16(r).view(BF16Array) if bf16 else r.view(HostArray)

    def set(self, y, **_kw):
        return self._apply(None, y)

    def add(self, y, **_kw):
        return self._apply(_np.add, y)

    def multiply(self, y, **_kw):
        return self._apply(_np.multiply, y)

    mul = multiply

    def divide(self, y, **_kw):
        return self._apply(_np.divide, y)

    def min(self, y, **_kw):
        return self._apply(_np.minimum, y)

    def max(self, y, **_kw):
        return self._apply(_np.maximum, y)

    def get(self, **_kw):
        r = self._a[self._idx]
        return r.copy() if isinstance(r, BF16Array) else _np.array(r)


def _narrow(r):
    if isinstance(r, _np.ndarray) or isinstance(r, _np.generic):
        if r.dtype == _np.float64:
            r = r.astype(_np.float32)
        elif r.dtype == _np.int64:
            r = r.astype(_np.int32)
    if isinstance(r, _np.ndarray) and type(r) is _np.ndarray:
        r = r.view(HostArray)	# x.at[i].set(y), as JAX's arrays have
    return r


# The wrapping functions a kernel body applies to Python ints alone fold on
# the host in int32, as JAX's weakly typed 32-bit constants do:
# jnp.add(2**31 - 1, 1) is -2**31 there, not Python's 2**31.
_INT_FOLDS = frozenset("add subtract multiply power negative abs square".split())


def _int32_constants(args):
    return bool(args) and _py.all(isinstance(a, int) and not isinstance(a, bool) and
                                  -2**31 <= a < 2**31 for a in args)


def _fold_int32(np_fn, args):
    with _np.errstate(all="ignore"):
        return np_fn(*[_np.array(a, _np.int32) for a in args]).astype(_np.int32).item()


def _host_rsqrt(x):
    if getattr(x, "_counted", False):	# pl.estimate_cost's: rsqrt's own rule
        return call("jnp.rsqrt", x)
    return 1 / _np.sqrt(x)


def _on_host(name, fn):
    np_fn = _HOST_NAMES.get(name, name)
    np_fn = globals()[np_fn] if np_fn and np_fn.startswith("_") else \
        getattr(_np, np_fn or "", None)
    if name == "astype":
        def np_fn(x, dtype):
            if getattr(x, "_counted", False):	# pl.estimate_cost's: no values
                return x.astype(dtype)
            return _np.asarray(x).astype(dtype)
    if np_fn is None:
        return _differentiable(name, fn)

    @_functools.wraps(fn)
    def either(*args, **kw):
        if _trace._rec is not None and name in _INT_FOLDS and not kw and \
                _int32_constants(args):
            return _fold_int32(np_fn, args)
        if _trace._rec is not None or _is_traced(args) or _is_traced(list(kw.values())):
            return fn(*args, **kw)
        if name == "reshape" and getattr(args[0] if args else None, "_pallas_key", False):
            return args[0].reshape(*args[1:], **kw)	# host Pallas keys: their batch shape
        pet = kw.pop("preferred_element_type", None)
        kw.pop("precision", None)	# jnp.dot's: NumPy's products take none
        if name in ("zeros", "ones") and "dtype" not in kw and len(args) < 2:
            kw["dtype"] = _np.float32
        if pet is not None and not _is_bf16(pet):
            # bf16 operands multiplied exactly and summed in float32 (or pet)
            r = np_fn(*_bf16_storage(list(args)), **kw)
            if getattr(r, "_counted", False):	# pl.estimate_cost's: no values
                return r.astype(pet)
            return _narrow(_np.asarray(r).astype(_host_arg(pet)))
        return _host_call(np_fn, args, kw, pet is not None)
    return _differentiable(name, either)


def _differentiable(name, fn):
    """@fn, which on a value being differentiated (jax.vjp, jax.grad) records
    its rule (_ad)."""
    @_functools.wraps(fn)
    def f(*args, **kw):
        if _ad.active() and _ad.top_tape(args, kw) is not None:
            return _ad.apply(name, f, args, kw)
        return fn(*args, **kw)
    return f


def _dtype_arg(x):
    return isinstance(x, (_trace.DType, _trace.HostBF16DType, _np.dtype)) or \
        isinstance(x, type) and issubclass(x, (_np.generic, float, int, bool))


def _is_struct(x):
    """A shape and dtype that is no array (a jax.ShapeDtypeStruct)."""
    return not isinstance(x, (_np.ndarray, _np.generic)) and isinstance(
        getattr(x, "shape", None), tuple) and getattr(x, "dtype", None) is not None


def _host_call(np_fn, args, kw, bf16=False):
    """NumPy's @np_fn on the host, 64-bit results narrowed; a bfloat16
    dtype asked for (dtype=jnp.bfloat16), or bf16 operands and no dtype,
    give a bf16 result (float32 computed, rounded: a BF16Array)."""
    if getattr(np_fn, "__name__", "").endswith("_like") and args and _is_struct(args[0]):
        # jnp.empty_like(jax.ShapeDtypeStruct(...)): JAX takes its shape and dtype
        args = (zeros(args[0].shape, args[0].dtype),) + tuple(args[1:])
    asked = kw.get("dtype")
    asked = asked if asked is not None else next(
        (a for a in args[1:] if _dtype_arg(a)), None)
    bf16 = bf16 or (_is_bf16(asked) if asked is not None else
                    _py.any(isinstance(a, BF16Array) for a in list(args) + list(kw.values()))
                    and not _other_float(list(args) + list(kw.values())))
    r = np_fn(*[_host_arg(a) for a in args], **{k: _host_arg(v) for k, v in kw.items()})
    if bf16:
        return _as_bf16(r)
    if asked is uint16 and isinstance(r, _np.ndarray):
        return r.view(UInt16Array)
    if asked is None:
        # float8 operands of one type and no other float: a result of it
        f8 = {type(a) for a in list(args) + list(kw.values()) if isinstance(a, Float8Array)}
        if len(f8) == 1 and not _other_float([a for a in list(args) + list(kw.values())
                                               if not isinstance(a, Float8Array)]):
            asked = f8.pop().host_dtype.jnp_dtype
            if not (isinstance(r, (_np.ndarray, _np.generic)) and r.dtype.kind == "f"):
                asked = None
    if asked is not None and asked in _FLOAT8_ARRAYS and isinstance(r, (_np.ndarray, _np.generic)):
        return _float8_array(r, asked)
    narrow = _NARROW_ARRAYS.get(_trace._as_dtype_or_none(asked)) if asked is not None else None
    if narrow is not None and isinstance(r, (_np.ndarray, _np.generic)):
        return _narrow_array(r, _trace.as_dtype(asked))
    return _narrow(r)


# compositions of the device's ops (_composite), and JAX's array-API names for them
from . import _composite as _cmp  # noqa: E402
for _n in _cmp.NAMES:
    globals()[_n] = getattr(_cmp, _n)
for _n, _to in _cmp.ALIASES.items():
    globals()[_n] = getattr(_cmp, _to)
    _HOST_NAMES[_n] = _to
_HOST_NAMES.update(cumulative_sum="cumsum", cumulative_prod="cumprod",
                   bitwise_left_shift="left_shift", bitwise_right_shift="right_shift")

class _Linalg:
    """jnp.linalg: norm in kernel bodies too (_composite.norm); the rest
    NumPy's, on the host only."""

    def norm(self, x, ord=None, axis=None, keepdims=False):
        if _trace._rec is not None or _is_traced([x]):
            return _cmp.norm(x, ord, axis, keepdims)
        return _np.linalg.norm(_np.asarray(x), ord=ord, axis=axis, keepdims=keepdims)

    def __getattr__(self, name):
        f = getattr(_np.linalg, name)

        def host_only(*args, **kw):
            if _trace._rec is not None:
                raise _trace.trace_error("jnp.linalg.%s is not supported in a kernel body"
                                         % name)
            return f(*args, **kw)
        return host_only


linalg = _Linalg()

_IMPORTED = {"call", "reducer", "trace_error", "Value", "Ref"}
for _name, _f in list(globals().items()):
    if (callable(_f) and not _name.startswith("_") and _name not in _IMPORTED
            and not isinstance(_f, (_trace.DType, type))):
        globals()[_name] = _on_host(_name, _f)


def repeat(a, repeats, axis=None, *, total_repeat_length=None):
    """jnp.repeat on the host, with JAX's total_repeat_length: JAX's
    gather of a's elements at the positions the repeats' running sums
    give, so a sum over the length is cut and one under it is padded with
    a's last element (megablox's group metadata). Not a device op."""
    if _trace._rec is not None:
        return _cmp.repeat_in_kernel(a, repeats, axis, total_repeat_length)
    if total_repeat_length is None:
        return _host_call(_np.repeat, (a, repeats), {"axis": axis})
    a = _np.asarray(a)
    if axis is None:
        a, axis = a.ravel(), 0
    n = int(total_repeat_length)
    reps = _np.broadcast_to(_np.asarray(repeats), (a.shape[axis],)).astype(_np.int64)
    starts = _np.concatenate([[0], _np.cumsum(reps)[:-1]])	# exclusive sums
    marks = _np.zeros(n, _np.int64)
    _np.add.at(marks, starts[starts < n], 1)	# out-of-range starts dropped
    idx = _np.clip(_np.cumsum(marks) - 1, 0, None)
    return _narrow(_np.take(a, idx, axis=axis))


def _promote_with_bf16(args):
    """jnp.promote_types / result_type where bfloat16 takes part: the
    kernels' promotion (_trace._promote, jnp's lattice: an integer or bool
    with bfloat16 is bfloat16, bfloat16 with float16 or float32 is float32;
    Python numbers weakly typed), the host's bfloat16 dtype for bfloat16."""
    def dt(a):
        if isinstance(a, (bool, int, float)) and not isinstance(a, _np.generic):
            return _trace.dt_of(a)
        if isinstance(a, BF16Array) or _is_bf16(a):
            return _trace.bfloat16
        return _trace.as_dtype(_np.result_type(_host_arg(a)).name)
    out = None
    for a in args:
        d = dt(a)
        out = d if out is None else _trace._promote(out, d)
    if isinstance(out, str):
        out = _trace.float32 if out == "weak float" else _trace.int32
    return _trace.host_bf16 if out is _trace.bfloat16 else _np.dtype(out.np_name)


def __getattr__(name):
    """Other NumPy names (jnp.array, jnp.allclose, jnp.tril ...): the host's
    only; in a kernel they are not device operations."""
    if name == "dtype":
        def dtype(d, *a, **kw):	# jnp.dtype(jnp.bfloat16): the host bf16 arrays' dtype
            return _trace.host_bf16 if _is_bf16(d) else _np.dtype(_host_arg(d), *a, **kw)
        return dtype
    if name in ("result_type", "promote_types", "can_cast", "common_type", "min_scalar_type"):
        np_f = getattr(_np, name)

        def refuse_bf16(*args, **kw):
            if _py.any(_is_bf16(a) or isinstance(a, BF16Array) for a in args):
                if name in ("promote_types", "result_type") and not kw:
                    return _promote_with_bf16(args)
                raise NotImplementedError("jnp.%s of bfloat16 is not supported on the host "
                                          "(NumPy would answer for float32)" % name)
            return np_f(*[_host_arg(a) for a in args], **kw)
        return refuse_bf16
    if name == "bool":
        return bool_	# jnp.bool, as JAX names it too (not the builtin here)
    f = getattr(_np, name, None)
    if f is None or name.startswith("_"):
        raise AttributeError("module 'tpuemu.numpy' has no attribute %r" % name)
    if not callable(f):
        return f
    if name in ("iinfo", "finfo"):
        # a dtype's limits: constants, in a kernel body too (jnp.iinfo(jnp.uint32).max)
        def info(d):
            if name == "finfo" and (_is_bf16(d) or isinstance(d, BF16Array)):
                return _BF16_FINFO
            if name == "finfo" and isinstance(d, Float8Array):
                d = d.dtype
            if name == "finfo" and d in _FLOAT8_ARRAYS:
                return _Float8Finfo(_trace.as_dtype(d))
            if name == "iinfo" and _is_bf16(d):
                raise ValueError("jnp.iinfo(bfloat16): bfloat16 is a floating type "
                                 "(jnp.finfo)")
            return f(_np.dtype(d.np_name) if isinstance(d, _trace.DType) else d)
        return info

    @_functools.wraps(f)
    def host_only(*args, **kw):
        if _ad.active() and _ad.top_tape(args, kw) is not None:
            raise TypeError("jax.vjp / jax.grad: jnp.%s has no derivative rule in tpuemu"
                            % name)
        if _trace._rec is not None:
            raise _trace.trace_error("jnp.%s is not supported in a kernel body" % name)
        return _host_call(f, args, kw)
    return host_only


class _BF16Finfo:
    """jnp.finfo(jnp.bfloat16): bfloat16's limits (8 exponent bits, 7
    mantissa bits), as ml_dtypes gives them; the values are bf16 scalars."""
    bits = 16
    nmant = 7
    nexp = 8
    machep = -7
    negep = -8
    minexp = -126
    maxexp = 128
    precision = 2
    dtype = _trace.host_bf16

    def __init__(self):
        def v(x):
            return round_bf16(x).view(BF16Array)
        self.eps = v(2.0 ** -7)
        self.epsneg = v(2.0 ** -8)
        self.max = v(3.3895313892515355e38)
        self.min = v(-3.3895313892515355e38)
        self.tiny = self.smallest_normal = v(2.0 ** -126)
        self.smallest_subnormal = v(2.0 ** -133)
        self.resolution = v(0.01)

    def __repr__(self):
        return "finfo(resolution=0.01, min=-3.389531e+38, max=3.389531e+38, dtype=bfloat16)"


_BF16_FINFO = _BF16Finfo()


class _Float8Finfo:
    """jnp.finfo of a float8 type: its limits from its format, the values
    float32 scalars (exact in the type)."""

    def __init__(self, d):
        f = _held_float.FORMATS[d.name]
        self.dtype = _FLOAT8_ARRAYS[d].host_dtype
        self.bits = 8
        self.nmant = f.mant
        self.nexp = 7 - f.mant
        self.eps = _np.float32(2.0 ** -f.mant)
        self.max = _np.float32(f.max)
        self.min = _np.float32(-f.max)
        self.tiny = self.smallest_normal = _np.float32(2.0 ** f.emin)
        self.smallest_subnormal = _np.float32(2.0 ** (f.emin - f.mant))

    def __repr__(self):
        return "finfo(min=%g, max=%g, dtype=%s)" % (self.min, self.max, self.dtype)


del _name, _f, _sys, _d
