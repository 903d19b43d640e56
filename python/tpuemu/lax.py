# SPDX-License-Identifier: MIT
"""The jax.lax functions a kernel body uses (tpuemu.lax as lax; jax.lax)."""
import builtins

import numpy as _np

from . import numpy as jnp
from . import _trace
from . import _fold
from . import _ad
from ._fold import prod as _prod
from ._trace import Value, call, recorder, trace_error, dt_of, is_float_dt, local

# ((lhs contracting, rhs contracting), (lhs batch, rhs batch)) -> which
# operand the MXU reads transposed: the statement syntax's x.T on a dot operand.
_DOT_DIMS = {
    ((1,), (0,)): (False, False),
    ((1,), (1,)): (False, True),
    ((0,), (0,)): (True, False),
    ((0,), (1,)): (True, True),
}


def _batched(lhs, rhs, lc, rc, preferred_element_type):
    """dot_general with one leading batch dimension of 3-D values whose
    shapes tracing knows (whole ref reads): each batch's 2-D product (rows
    of the 2-D views: batch b is rows b*M to (b+1)*M), stacked."""
    ls, rs = getattr(lhs, "shape", None), getattr(rhs, "shape", None)
    lr, rr = getattr(lhs, "whole_of", None), getattr(rhs, "whole_of", None)
    if ls is None or rs is None or lr is None or rr is None or len(ls) != 3 or \
            len(rs) not in (2, 3):
        raise trace_error("lax.dot_general: batch dimensions ((0,), (0,)) take whole reads "
                          "of a 3-D ref and a 2-D or 3-D one (x_ref[...]), got shapes %s and "
                          "%s" % (ls, rs))
    if ls[0] != rs[0]:
        raise trace_error("lax.dot_general: batch sizes %d and %d differ" % (ls[0], rs[0]))
    outs = []
    for b in range(ls[0]):
        x = lr[b]
        if len(rs) == 2:	# (B, K) rhs: a vector per batch
            y = rr[b:b + 1]
            outs.append(dot_general(x, y, (((lc[0] - 1,), (1,)), ((), ())),
                                    preferred_element_type=preferred_element_type))
            continue
        y = rr[b]
        outs.append(dot_general(x, y, (((lc[0] - 1,), (rc[0] - 1,)), ((), ())),
                                preferred_element_type=preferred_element_type))
    if len(rs) == 2:	# (B, M) results: each batch's (M, 1) column as a row
        return jnp.concatenate([jnp.reshape(o, (1, -1)) for o in outs], axis=0)
    return jnp.concatenate(outs, axis=0)


def _permuted(x, perm):
    perm = tuple(perm)
    return x if perm == tuple(range(len(perm))) else jnp.transpose(x, perm)


def _reshaped(x, shape):
    return x if tuple(x.shape) == tuple(shape) else jnp.reshape(x, tuple(shape))


def transpose(operand, permutation):
    """lax.transpose: jnp.transpose with the permutation required, of its
    rank (host and kernel body alike)."""
    perm = tuple(int(p) for p in permutation)
    shape = getattr(operand, "shape", None)
    if shape is not None and sorted(perm) != list(range(len(shape))):
        raise ValueError("lax.transpose permutation must be a permutation of range(%d), "
                         "got permutation=%r" % (len(shape), perm))
    return jnp.transpose(operand, perm)


def dynamic_slice(operand, start_indices, slice_sizes):
    """lax.dynamic_slice with Python-int starts (host and kernel body): a
    basic slice, each start clamped so the slice fits, as XLA clamps.
    Traced starts are refs' business: ref[pl.ds(i, n)]."""
    shape = tuple(getattr(operand, "shape", ()) or ())
    if len(start_indices) != len(shape) or len(slice_sizes) != len(shape):
        raise TypeError("lax.dynamic_slice: %d start indices and %d slice sizes for a "
                        "rank-%d operand" % (len(start_indices), len(slice_sizes), len(shape)))
    idx = []
    for d, (s, n) in enumerate(zip(start_indices, slice_sizes)):
        if isinstance(s, Value) or not isinstance(int(s) if hasattr(s, "__index__") else s, int):
            raise trace_error("lax.dynamic_slice: start %r of dimension %d is traced; read "
                              "the ref at pl.ds(start, %d) instead" % (s, d, n))
        s = builtins.min(builtins.max(int(s), 0), shape[d] - int(n))
        idx.append(slice(s, s + int(n)))
    return operand[tuple(idx)]


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0):
    """lax.dynamic_slice_in_dim: dynamic_slice along @axis, whole elsewhere."""
    shape = tuple(operand.shape)
    axis = axis % len(shape)
    starts = [0] * len(shape)
    sizes = list(shape)
    starts[axis], sizes[axis] = start_index, slice_size
    return dynamic_slice(operand, starts, sizes)


def _shape_of(x, what):
    """@x's shape: a traced value's or ref's (known while tracing), or an array's."""
    if isinstance(x, (Value, _trace.Ref)):
        return _known_shape(x, what)
    return tuple(_np.shape(x))


def dynamic_update_slice(operand, update, start_indices):
    """lax.dynamic_update_slice with Python-int starts (host and kernel
    body): @update written over @operand at the starts, each clamped so the
    update fits, as XLA clamps (x.at[...].set in a kernel)."""
    shape, ushape = _shape_of(operand, "lax.dynamic_update_slice"), _shape_of(update, "lax.dynamic_update_slice")
    if len(start_indices) != len(shape) or len(ushape) != len(shape):
        raise TypeError("lax.dynamic_update_slice: %d start indices and an update of rank %d "
                        "for a rank-%d operand" % (len(start_indices), len(ushape), len(shape)))
    idx = []
    for d, (st, n) in enumerate(zip(start_indices, ushape)):
        if isinstance(st, Value) or not hasattr(st, "__index__"):
            raise trace_error("lax.dynamic_update_slice: start %r of dimension %d is traced; "
                              "store into the ref at pl.ds(start, %d) instead" % (st, d, n))
        st = builtins.min(builtins.max(int(st), 0), shape[d] - n)
        idx.append(slice(st, st + n))
    if not isinstance(operand, (Value, _trace.Ref)):
        out = _np.array(operand, copy=True)
        out[tuple(idx)] = update
        return out
    return operand.at[tuple(idx)].set(update)


def dynamic_update_slice_in_dim(operand, update, start_index, axis):
    """lax.dynamic_update_slice_in_dim: the update's start along @axis, 0 elsewhere."""
    starts = [0] * len(_shape_of(operand, "lax.dynamic_update_slice_in_dim"))
    starts[axis % len(starts)] = start_index
    return dynamic_update_slice(operand, update, starts)


def argmax(operand, axis, index_dtype):
    """lax.argmax: jnp.argmax along @axis, in @index_dtype."""
    return jnp.argmax(operand, axis=axis).astype(index_dtype)


def argmin(operand, axis, index_dtype):
    """lax.argmin: jnp.argmin along @axis, in @index_dtype."""
    return jnp.argmin(operand, axis=axis).astype(index_dtype)


def iota(dtype, size):
    """lax.iota: 0, 1, ..., size - 1 in @dtype."""
    return broadcasted_iota(dtype, (size,), 0)


class RoundingMethod:
    """lax.RoundingMethod: lax.round's ties away from zero (its default) or
    to the nearest even (jnp.round's)."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):	# noqa: A001 (lax's name)
    """lax.round of floats: ties away from zero by default (x - trunc(x)
    is exact, so a tie is seen as one), or to the nearest even."""
    method = getattr(rounding_method, "value", rounding_method)
    if method in (RoundingMethod.TO_NEAREST_EVEN, "TO_NEAREST_EVEN"):
        return jnp.round(x)
    if method not in (RoundingMethod.AWAY_FROM_ZERO, "AWAY_FROM_ZERO"):
        raise ValueError("lax.round: rounding_method %r is not AWAY_FROM_ZERO or "
                         "TO_NEAREST_EVEN" % (rounding_method,))
    t = jnp.trunc(x)
    return jnp.where(jnp.abs(x - t) >= 0.5, t + jnp.sign(x), t)


def concatenate(operands, dimension):
    """lax.concatenate: jnp.concatenate along @dimension."""
    return jnp.concatenate(list(operands), axis=dimension)


def pad(operand, padding_value, padding_config):
    """lax.pad with (low, high, 0) per dimension: jnp.pad by the positive
    parts with @padding_value, then the negative parts cropped. Interior
    padding (a stride of holes) is refused by name."""
    cfg = [tuple(int(v) for v in c) for c in padding_config]
    shape = _shape_of(operand, "lax.pad")
    if len(cfg) != len(shape):
        raise TypeError("lax.pad: %d padding entries for a rank-%d operand"
                        % (len(cfg), len(shape)))
    if any(interior for _, _, interior in cfg):
        raise trace_error("lax.pad: interior padding %r is not supported (low and high "
                          "only)" % (cfg,))
    x = operand
    if hasattr(padding_value, "item") and not isinstance(padding_value, Value):
        padding_value = padding_value.item()	# NumPy's scalars: jnp.pad takes Python ones
    if any(lo > 0 or hi > 0 for lo, hi, _ in cfg):
        x = jnp.pad(x, [(builtins.max(lo, 0), builtins.max(hi, 0)) for lo, hi, _ in cfg],
                    constant_values=padding_value)
    if any(lo < 0 or hi < 0 for lo, hi, _ in cfg):
        xs = _shape_of(x, "lax.pad")
        x = x[tuple(slice(-builtins.min(lo, 0), n + builtins.min(hi, 0))
                    for (lo, hi, _), n in zip(cfg, xs))]
    return x


def squeeze(array, dimensions):
    """lax.squeeze: @array without its unit dimensions @dimensions (a reshape)."""
    shape = _shape_of(array, "lax.squeeze")
    drop = {d % len(shape) for d in dimensions}
    for d in drop:
        if shape[d] != 1:
            raise ValueError("lax.squeeze: dimension %d of shape %r is not 1" % (d, shape))
    return jnp.reshape(array, tuple(n for d, n in enumerate(shape) if d not in drop))


def expand_dims(array, dimensions):
    """lax.expand_dims: unit dimensions inserted at @dimensions."""
    return jnp.expand_dims(array, tuple(dimensions))


def reshape(operand, new_sizes, dimensions=None):
    """lax.reshape: @operand (transposed by @dimensions first) in @new_sizes."""
    if dimensions is not None and tuple(dimensions) != tuple(range(len(dimensions))):
        operand = transpose(operand, tuple(dimensions))
    return jnp.reshape(operand, tuple(new_sizes))


def _host_only(what, *xs):
    if _trace._rec is not None or any(isinstance(x, (Value, _trace.Ref)) for x in xs):
        raise trace_error("%s is not supported in a kernel body (the device has no sort "
                          "unit); sort on the host, around the pallas_call" % what)


def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """lax.sort on the host: one array sorted along @dimension (NaNs last,
    as lax orders them), or a tuple sorted by its first @num_keys arrays
    (lexicographically, stably), the others carried along."""
    ops = list(operand) if isinstance(operand, (tuple, list)) else [operand]
    _host_only("lax.sort", *ops)
    arrs = [_np.asarray(a) for a in ops]
    if not 1 <= num_keys <= len(arrs):
        raise ValueError("lax.sort: num_keys %d of %d operands" % (num_keys, len(arrs)))
    moved = [_np.moveaxis(a, dimension, -1) for a in arrs]
    # np.lexsort's last key is the primary one
    order = _np.lexsort(tuple(moved[num_keys - 1::-1]), axis=-1)
    out = [_np.moveaxis(_np.take_along_axis(a, order, -1), -1, dimension) for a in moved]
    return tuple(out) if isinstance(operand, (tuple, list)) else out[0]


def top_k(operand, k):
    """lax.top_k on the host: the @k largest along the last axis, largest
    first (ties: the lower index first), and their int32 indices."""
    _host_only("lax.top_k", operand)
    a = _np.asarray(operand)
    if not 0 <= k <= a.shape[-1]:
        raise ValueError("lax.top_k: k %d of a last axis of %d" % (k, a.shape[-1]))
    key = -a.astype(_np.float64) if a.dtype.kind in "fc" else -a.astype(_np.int64)
    idx = _np.argsort(key, axis=-1, kind="stable")[..., :k]
    return _np.take_along_axis(a, idx, -1), idx.astype(_np.int32)


def _free_dims(shape, contract, batch):
    """An operand's dimensions neither contracted nor batch, in order."""
    return [d for d in range(len(shape)) if d not in contract and d not in batch]


def _dot_general_nd(lhs, rhs, lc, rc, lb, rb, preferred_element_type):
    """lax.dot_general of any dimension numbers, as XLA canonicalises it:
    each operand's dimensions permuted to (batch, free, contracting) and
    (batch, contracting, free) and merged to (B, M, K) and (B, K, N), one
    2-D product per batch element, the (B, M, N) result unmerged to the
    batch, lhs free and rhs free dimensions in that order."""
    what = "lax.dot_general"
    ls = _known_shape(lhs, what)
    rs = _known_shape(rhs, what)
    for name, dims, shape in (("lhs contracting", lc, ls), ("rhs contracting", rc, rs),
                              ("lhs batch", lb, ls), ("rhs batch", rb, rs)):
        if any(not 0 <= d < len(shape) for d in dims):
            raise trace_error("%s: %s dimensions %r out of range for shape %r"
                              % (what, name, dims, shape))
    for name, a, b in (("lhs", lc, lb), ("rhs", rc, rb)):
        if len(set(a + b)) != len(a + b):
            raise trace_error("%s: %s contracting dimensions %r and batch dimensions %r "
                              "name a dimension twice" % (what, name, a, b))
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise trace_error("%s: %d lhs and %d rhs contracting, %d and %d batch dimensions"
                          % (what, len(lc), len(rc), len(lb), len(rb)))
    for a, b, kind in ((lc, rc, "contracting"), (lb, rb, "batch")):
        for da, db in zip(a, b):
            if ls[da] != rs[db]:
                raise trace_error("%s: %s dimensions %d of lhs %r and %d of rhs %r differ"
                                  % (what, kind, da, ls, db, rs))
    lfree, rfree = _free_dims(ls, lc, lb), _free_dims(rs, rc, rb)
    bshape = [ls[d] for d in lb]
    out_shape = bshape + [ls[d] for d in lfree] + [rs[d] for d in rfree]
    nb, m = _prod(bshape), _prod(ls[d] for d in lfree)
    k, n = _prod(ls[d] for d in lc), _prod(rs[d] for d in rfree)
    x = _reshaped(_permuted(lhs, list(lb) + lfree + list(lc)),
                  (m, k) if nb == 1 else (nb, m, k))
    y = _reshaped(_permuted(rhs, list(rb) + list(rc) + rfree),
                  (k, n) if nb == 1 else (nb, k, n))
    if nb == 1:
        z = jnp.dot(x, y, preferred_element_type)
    else:		# computed once, read once per batch element
        x, y = local(x), local(y)
        z = jnp.concatenate([jnp.dot(x[b], y[b], preferred_element_type)
                             for b in range(nb)], axis=0)
    return _reshaped(z, out_shape or (1, 1))


class Precision:
    """lax.Precision: accepted by the dots, which multiply float32 in
    float32 here (HIGHEST) whatever is asked."""
    DEFAULT = "default"
    HIGH = "high"
    HIGHEST = "highest"


def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """lax.dot: jnp.dot's product (matrix-matrix, matrix-vector, vectors),
    in a kernel body and on the host, as JAX's kernels write it."""
    return jnp.dot(lhs, rhs, precision=precision, preferred_element_type=preferred_element_type)


def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    """lax.dot_general: two 2-D blocks (the contraction dimensions pick a
    plain, transposed-lhs or transposed-rhs dot), a 1-D rhs (a
    matrix-vector product), batch dimensions ((0,), (0,)) of 3-D whole ref
    reads (a loop over the batch's ref windows); any other dimension
    numbers of operands whose shapes tracing knows by permuting and
    merging them into those (_dot_general_nd)."""
    if getattr(lhs, "_counted", False) or getattr(rhs, "_counted", False):
        from .pallas import _cost_estimate	# pl.estimate_cost's arrays: JAX's rule
        return _cost_estimate.dot_general(lhs, rhs, dimension_numbers, preferred_element_type)
    jnp._refuse_unsigned_dot(lhs, rhs, "lax.dot_general")
    lhs, rhs = jnp._promote_dot(lhs, rhs)
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        lc, rc, lb, rb = (tuple(int(d) for d in t) for t in (lc, rc, lb, rb))
        key = (lc, rc)
    except (TypeError, ValueError):
        raise trace_error("lax.dot_general: dimension_numbers must be "
                          "((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)), got %r"
                          % (dimension_numbers,)) from None
    if _trace._rec is None and not isinstance(lhs, Value) and not isinstance(rhs, Value):
        return _host_dot_general(lhs, rhs, lc, rc, lb, rb, preferred_element_type)
    ls, rs = getattr(lhs, "shape", None), getattr(rhs, "shape", None)
    if lb == (0,) and rb == (0,) and len(lc) == 1 and len(rc) == 1 and \
            getattr(lhs, "whole_of", None) is not None and \
            getattr(rhs, "whole_of", None) is not None and \
            ls is not None and rs is not None and len(ls) == 3 and len(rs) in (2, 3):
        z = _batched(lhs, rhs, lc, rc, preferred_element_type)
        return _reshaped(z, [ls[0]] + [ls[d] for d in _free_dims(ls, lc, lb)] +
                         [rs[d] for d in _free_dims(rs, rc, rb)])	# (B, M, N) or (B, M)
    if lb or rb:
        return _dot_general_nd(lhs, rhs, lc, rc, lb, rb, preferred_element_type)
    if ls is not None and 2 < len(ls) <= 4 and key[0] == (len(ls) - 1,) and \
            rs is not None and len(rs) == 2:
        key = ((1,), key[1])	# leading dimensions of lhs merge into its 2-D view's rows
    elif rs is not None and len(rs) == 1 and (ls is None or len(ls) <= 2) and \
            key in (((1,), (0,)), ((0,), (0,))):
        a = lhs.T if key[0] == (0,) else lhs
        return jnp.dot(a, rhs, preferred_element_type)
    elif ls is not None and rs is not None and \
            (len(ls) != 2 or len(rs) != 2 or key not in _DOT_DIMS):
        return _dot_general_nd(lhs, rhs, lc, rc, lb, rb, preferred_element_type)
    if key not in _DOT_DIMS:
        raise trace_error("lax.dot_general: contraction dimensions %r: a 2-D block "
                          "contracts one dimension of each, 0 or 1" % (key,))
    lt, rt = _DOT_DIMS[key]
    a = lhs.T if lt else lhs
    b = rhs.T if rt else rhs
    if preferred_element_type is None:
        return call("jnp.dot", a, b)
    return call("jnp.dot", a, b, preferred_element_type=preferred_element_type)


class GatherScatterMode:
    """lax.GatherScatterMode's names, for jnp.take_along_axis(mode=)."""

    class _Mode:
        def __init__(self, name):
            self.name = name

        def __repr__(self):
            return "GatherScatterMode." + self.name

    CLIP = _Mode("CLIP")
    FILL_OR_DROP = _Mode("FILL_OR_DROP")
    PROMISE_IN_BOUNDS = _Mode("PROMISE_IN_BOUNDS")
    ONE_HOT = _Mode("ONE_HOT")


class GatherDimensionNumbers(tuple):
    """lax.GatherDimensionNumbers(offset_dims, collapsed_slice_dims,
    start_index_map, operand_batching_dims=(), start_indices_batching_dims=())."""
    _FIELDS = ("offset_dims", "collapsed_slice_dims", "start_index_map",
               "operand_batching_dims", "start_indices_batching_dims")

    def __new__(cls, offset_dims, collapsed_slice_dims, start_index_map,
                operand_batching_dims=(), start_indices_batching_dims=()):
        return super().__new__(cls, (tuple(offset_dims), tuple(collapsed_slice_dims),
                                     tuple(start_index_map), tuple(operand_batching_dims),
                                     tuple(start_indices_batching_dims)))

    def __getattr__(self, name):
        if name in GatherDimensionNumbers._FIELDS:
            return self[GatherDimensionNumbers._FIELDS.index(name)]
        raise AttributeError(name)

    def __repr__(self):
        return "GatherDimensionNumbers(%s)" % ", ".join(
            "%s=%r" % kv for kv in zip(GatherDimensionNumbers._FIELDS, self))


def _gather_axis(dn, slice_sizes, r, ri):
    """The axis of a lax.gather that is jnp.take_along_axis (each result
    element one operand element, the operand's other dimensions batched
    against the indices' own, a trailing index vector of one), or None."""
    dn = GatherDimensionNumbers(*dn)
    if len(dn.start_index_map) != 1 or dn.offset_dims or ri != r + 1:
        return None
    a = dn.start_index_map[0]
    others = tuple(d for d in range(r) if d != a)
    if (dn.collapsed_slice_dims != (a,) or tuple(dn.operand_batching_dims) != others or
            tuple(dn.start_indices_batching_dims) != others or
            tuple(slice_sizes) != (1,) * r):
        return None
    return a


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """lax.gather in the form jnp.take_along_axis lowers to: a trailing
    index vector of one, slices of one element, the operand's other
    dimensions batched against the indices' (as tpu_ops_test's 8-bit
    lookup table). Modes as JAX's: None and "fill" give fill_value for an
    index outside [0, n) (negative ones too: lax does not wrap), "clip"
    clamps, "promise_in_bounds" fails the job for one outside."""
    shape, ishape = _shape_of(operand, "lax.gather"), _shape_of(start_indices, "lax.gather")
    a = _gather_axis(dimension_numbers, slice_sizes, len(shape), len(ishape))
    if a is None or ishape[-1] != 1:
        raise trace_error("lax.gather%r with slice_sizes=%r: only the take_along_axis form "
                          "(a trailing index vector of one, one-element slices, the other "
                          "dimensions batched) is supported; use jnp.take_along_axis or "
                          "jnp.take" % (tuple(GatherDimensionNumbers(*dimension_numbers)),
                                        tuple(slice_sizes)))
    m = getattr(mode, "name", mode)
    m = {None: "fill", "FILL_OR_DROP": "fill", "drop": "fill", "CLIP": "clip",
         "PROMISE_IN_BOUNDS": "promise_in_bounds"}.get(m, m)
    if m not in ("fill", "clip", "promise_in_bounds"):
        raise trace_error("lax.gather(mode=%r): modes are 'fill', 'clip' and "
                          "'promise_in_bounds'" % (mode,))
    ix = jnp.reshape(start_indices, tuple(ishape[:-1]))
    if getattr(ix, "dtype", None) != jnp.int32:
        ix = jnp.astype(ix, jnp.int32)
    n = shape[a]
    if m == "clip":
        ix, m = jnp.clip(ix, 0, n - 1), "promise_in_bounds"
    elif m == "fill":
        ix = jnp.where(ix < 0, n, ix)	# outside, not from the end
    return jnp.take_along_axis(operand, ix, axis=a, mode=m,
                               fill_value=fill_value if m == "fill" else None)


def broadcast(operand, sizes):
    """lax.broadcast(operand, sizes): new leading dimensions @sizes, as
    jnp.broadcast_to(operand, (*sizes, *operand.shape)) (a Python number
    fills the shape)."""
    return jnp.broadcast_to(operand, tuple(int(n) for n in sizes) +
                            _known_shape(operand, "lax.broadcast"))


def _known_shape(x, what):
    if not isinstance(x, (Value, _trace.Ref)) or getattr(x, "scalar", False):
        return ()
    if x.shape is None:
        raise trace_error("%s of %s: its shape is not known while tracing (a whole ref "
                          "read's is)" % (what, x.render()))
    return tuple(x.shape)


def broadcast_in_dim(operand, shape, broadcast_dimensions):
    """lax.broadcast_in_dim: @operand's dimensions at @broadcast_dimensions
    of @shape, broadcast to the rest (ones inserted, then broadcast_to)."""
    shape = tuple(int(n) for n in shape)
    if not isinstance(operand, (Value, _trace.Ref)) and hasattr(operand, "shape") and \
            _trace._rec is None:
        # a host array (segment ids laid out for a kernel, outside it)
        import numpy as _np
        full = [1] * len(shape)
        for d, n in zip(broadcast_dimensions, _np.shape(operand)):
            full[d] = n
        return jnp.broadcast_to(_np.reshape(operand, full), shape).copy()
    ishape = _known_shape(operand, "lax.broadcast_in_dim")
    if len(ishape) != len(broadcast_dimensions):
        raise _trace.trace_error("lax.broadcast_in_dim: %d broadcast_dimensions for an "
                                 "operand of shape %r" % (len(broadcast_dimensions), ishape))
    full = [1] * len(shape)
    for d, n in zip(broadcast_dimensions, ishape):
        full[d] = n
    if ishape and tuple(full) != ishape:
        operand = operand.reshape(tuple(full))
    return jnp.broadcast_to(operand, shape)


def broadcasted_iota(dtype, shape, dimension):
    shape = tuple(int(d) for d in shape)
    if _trace._rec is None:
        # on the host (megablox masks its output rows after the call)
        import numpy as _np
        ix = _np.arange(shape[int(dimension)]).reshape(
            [-1 if d == int(dimension) else 1 for d in range(len(shape))])
        return jnp.asarray(_np.broadcast_to(ix, shape), dtype=dtype)
    if len(shape) > _fold.DEVICE_RANK:
        return _fold.iota(dtype, shape, dimension)
    if len(shape) == 1:	# a 1-D array is viewed as a row: its index is the column
        row = call("lax.broadcasted_iota", dtype, (1, shape[0]), 1)
        row.shape, row.dt = (1, shape[0]), _trace._as_dtype_or_none(dtype)
        return jnp.reshape(row, shape)
    v = call("lax.broadcasted_iota", dtype, shape, int(dimension))
    v.shape, v.dt = shape, _trace._as_dtype_or_none(dtype)
    return v


def _static_bound(x, what, fn="lax.fori_loop"):
    """A loop bound as a Python int; a traced one cannot be unrolled."""
    if isinstance(x, Value):
        raise trace_error("%s: the %s bound (%s) is a traced value; the loop is "
                          "unrolled while tracing, so its bounds must be Python ints "
                          "(a grid dimension can loop on the device)" % (fn, what, x.render()))
    try:
        import operator
        return operator.index(x)
    except TypeError:
        raise trace_error("%s: the %s bound must be an int, not %r"
                          % (fn, what, x)) from None


# Static lax.fori_loops of at most this many trips are unrolled while
# tracing (i a Python int: constant windows, no loop on the device); longer
# ones, and every loop with a traced bound, run as device loops.
UNROLL_MAX_TRIPS = 16


def _flatten(val, out):
    """The leaves of a carry (nested tuples and lists), in order."""
    if isinstance(val, (tuple, list)):
        for v in val:
            _flatten(v, out)
    else:
        out.append(val)
    return out


def _unflatten(like, leaves):
    if isinstance(like, (tuple, list)):
        return type(like)(_unflatten(v, leaves) for v in like)
    return leaves.pop(0)


def _is_int(x):
    import numbers
    return isinstance(x, (bool, numbers.Integral))


def _is_int_scalar(v):
    """A carry leaf the scalar core holds: a Python int or an integer
    scalar-core value."""
    return _is_int(v) or (isinstance(v, Value) and v.scalar and not is_float_dt(v.dt))


def _is_float_scalar(v):
    return isinstance(v, float) or (isinstance(v, Value) and v.scalar and is_float_dt(v.dt))


def _float_tile(v):
    """A float scalar as the (1, 1) tile the vector unit computes it in."""
    dt = v.dt if isinstance(v, Value) and v.dt is not None else _trace.float32
    return jnp.full((1, 1), v, dt)


class _Carry:
    """A loop's carry on the device: array leaves in VMEM locals (_cN),
    integer scalar leaves (Python ints, scalar-core values) in an SMEM
    scratch the loop's scope holds, updated at the end of every trip; float
    scalars as (1, 1) tiles in VMEM (the vector unit's float scalars); refs,
    None and other constants pass through unchanged."""

    def __init__(self, rec, init, what):
        self.rec, self.what, self.like = rec, what, init
        self.kinds, self.inner = [], []
        leaves = [_float_tile(v) if _is_float_scalar(v) else v for v in _flatten(init, [])]
        nscalar = sum(1 for v in leaves if _is_int_scalar(v))
        self.smem = None
        if nscalar:
            rec.nlocal += 1
            self.smem = _trace.Ref("_s%d" % rec.nlocal, (2 * nscalar if nscalar > 1 else 1,),
                                   _trace.int32, space="smem")
            rec.open_scope(self.smem, 1, _trace.int32.code, "carry %s" % self.smem.name)
        k = 0
        for v in leaves:
            if _is_int_scalar(v):
                elem = "%s[%d]" % (self.smem.name, k)
                rec.emit("%s = %s" % (elem, _trace._fmt(v)))
                self.kinds.append(("smem", k))
                self.inner.append(_trace.scalar(elem, dt=_trace.int32))
                k += 1
            elif isinstance(v, Value):
                rec.nlocal += 1
                name = "_c%d" % rec.nlocal
                first = v.render()
                if v.kind in ("text", "local"):	# a temporary of its own, not an
                    fn = "logical_or" if getattr(v.dt, "name", None) == "bool" else "maximum"	# input's alias
                    first = "jnp.%s(%s, %s)" % (fn, first, first)
                rec.emit("%s = %s" % (name, first))
                c = Value("local", name, dt=v.dt)
                c.shape = v.shape
                self.kinds.append(("vmem", name))
                self.inner.append(c)
            else:
                self.kinds.append(("const", v))
                self.inner.append(v)
        self.nscalar = nscalar
        self.inner = _unflatten(init, list(self.inner))

    def update(self, new):
        """Store the trip's new carry: every new value computed (into
        locals) before any carry changes, as the body saw the old ones."""
        leaves = _flatten(new, [])
        if len(leaves) != len(self.kinds) or \
                (isinstance(new, (tuple, list)) != isinstance(self.like, (tuple, list))):
            raise trace_error("%s: the body returns a different structure than the carry "
                              "it was given" % self.what)
        leaves = [_float_tile(v) if kind == "vmem" and _is_float_scalar(v) else v
                  for (kind, _), v in zip(self.kinds, leaves)]
        rec, moves = self.rec, []
        for (kind, where), v, old in zip(self.kinds, leaves, _flatten(self.inner, [])):
            if v is old:
                continue	# unchanged
            if kind == "const":
                if v is not where:
                    raise trace_error("%s: the body changes a carry leaf that is not a traced "
                                      "value or an int (%r)" % (self.what, where))
            elif kind == "smem":
                if not _is_int_scalar(v):
                    raise trace_error("%s: a scalar carry becomes %s, not a scalar"
                                      % (self.what, _trace._fmt(v)))
                if self.nscalar == 1:
                    moves.append(("%s[0]" % self.smem.name, _trace._fmt(v)))
                else:
                    tmp = "%s[%d]" % (self.smem.name, self.nscalar + where)
                    rec.emit("%s = %s" % (tmp, _trace._fmt(v)))
                    moves.append(("%s[%d]" % (self.smem.name, where), tmp))
            else:
                if not isinstance(v, Value) or v.scalar:
                    raise trace_error("%s: an array carry becomes %s, not an array"
                                      % (self.what, _trace._fmt(v)))
                if len(self.kinds) == 1 and v.kind == "op" and v.text != "@":
                    moves.append((where, v.render()))	# elementwise: in place
                else:
                    rec.nlocal += 1
                    tmp = "_v%d" % rec.nlocal
                    rec.emit("%s = %s" % (tmp, v.render()))
                    moves.append((where, tmp))
        for dst, src in moves:
            rec.emit("%s = %s" % (dst, src))

    def out(self):
        """The carry after the loop. Its SMEM scope closes, so integer
        scalars are copied into the kernel's hidden spill scratch first and
        stay scalar-core values (an index, a bound, a pl.when condition), as
        JAX's loops give them back."""
        leaves = _flatten(self.inner, [])
        res = []
        for (kind, where), v in zip(self.kinds, leaves):
            if kind == "smem":
                v = _trace.scalar("%s[%d]" % (self.smem.name, where), dt=_trace.int32)
                self.rec.spill(v)
            res.append(v)
        if self.smem is not None:
            self.rec.close_scope(self.smem.name)
        return _unflatten(self.like, res)


def _hold_before_loop(rec):
    """Values the kernel made before a loop that read refs: bound now, so
    every trip reads what Python read, even where the body stores to the
    ref (a value bound later is bound before its loop, Recorder.bind)."""
    names = set()
    for w in list(rec.live.values()):
        v = w()
        if v is not None and v.kind != "local" and not v.scalar:
            names |= v.reads
        del v
    for r in sorted(names - rec.read_only):	# an input cannot change
        _trace._protect(rec, r, None)


def _loop_depth(rec, what):
    d = len(rec.loops)
    if d >= 4:
        raise trace_error("%s: device loops nest at most 4 deep (TPU_JOB_MAX_LOOP_DEPTH)"
                          % what)
    return d


def _device_fori(lo, hi, body_fun, init_val, what, index=None):
    """lax.fori_loop as a device loop: body_fun traced once, its index
    loop_index(depth) (or @index of it), the carry kept on the device."""
    rec = recorder()
    d = _loop_depth(rec, what)
    _hold_before_loop(rec)
    carry = _Carry(rec, init_val, what)
    lo_t, hi_t = _trace._fmt(lo), _trace._fmt(hi)
    rec.open_loop("fori", (lo_t, hi_t),
                  "for loop_index(%d) in range(%s, %s):" % (d, lo_t, hi_t))
    try:
        i = _trace.scalar("loop_index(%d)" % d, dt=_trace.int32)
        new = body_fun(index(i) if index else i, carry.inner)
        carry.update(new)
    finally:
        rec.close_loop()
    return carry.out()


def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """lax.fori_loop. Static bounds of at most UNROLL_MAX_TRIPS trips (or
    unroll=True): body_fun(i, val) traced once per i, i a Python int (so
    pl.ds(i * 8, 8) and ref.at[i] are constants). More trips, or a traced
    bound (an SMEM element, pl.program_id): a device loop, body_fun traced
    once with i the trip index (a scalar-core value), the carry's arrays in
    VMEM locals and its ints in SMEM, updated at the end of every trip."""
    if not isinstance(lower, Value) and not isinstance(upper, Value):
        lo = _static_bound(lower, "lower")
        hi = _static_bound(upper, "upper")
        if _trace._rec is None:
            # on the host (around pallas_calls): Python's loop, the index an
            # int32 scalar as JAX's loop gives an int32 array
            import numpy as _np
            val = init_val
            for i in range(lo, hi):
                val = body_fun(_np.int32(i), val)
            return val
        if hi - lo <= UNROLL_MAX_TRIPS or unroll is True:
            val = init_val
            for i in range(lo, hi):
                val = body_fun(i, val)
            return val
        return _device_fori(lo, hi, body_fun, init_val, "lax.fori_loop")
    for b, what in ((lower, "lower"), (upper, "upper")):
        if not isinstance(b, Value):
            _static_bound(b, what)
        elif not b.scalar:
            raise trace_error("lax.fori_loop: the %s bound (%s) is an array; a "
                              "traced bound is a scalar (an SMEM element, "
                              "pl.program_id)" % (what, b.render()))
    return _device_fori(lower, upper, body_fun, init_val, "lax.fori_loop")


def _bind_leaves(rec, val):
    if isinstance(val, (tuple, list)):
        for v in val:
            _bind_leaves(rec, v)
    elif isinstance(val, Value) and val.kind not in ("local", "text"):
        rec.bind(val)


# lax's element-wise functions that mean what jnp's do on the device, under
# lax's names (lax.round rounds half away from zero: it differs, so it is
# not here; lax.div and lax.rem, which truncate, are below)
exp, exp2, log, log1p, sqrt, rsqrt, tanh, abs, floor, ceil, sign, square, sin, cos = (  # noqa: A001
    jnp.exp, jnp.exp2, jnp.log, jnp.log1p, jnp.sqrt, jnp.rsqrt, jnp.tanh, jnp.abs, jnp.floor,
    jnp.ceil, jnp.sign, jnp.square, jnp.sin, jnp.cos)
neg, add, sub, mul, max, min, pow = (  # noqa: A001
    jnp.negative, jnp.add, jnp.subtract, jnp.multiply, jnp.maximum, jnp.minimum, jnp.power)
eq, ne, lt, le, gt, ge = (jnp.equal, jnp.not_equal, jnp.less, jnp.less_equal, jnp.greater,
                          jnp.greater_equal)
shift_left = jnp.left_shift
bitwise_and, bitwise_or, bitwise_xor, bitwise_not = (
    jnp.bitwise_and, jnp.bitwise_or, jnp.bitwise_xor, jnp.invert)
# the compositions (_composite) under lax's names
tan, asin, acos, atan, atan2, sinh, cosh, asinh, acosh, atanh, cbrt, expm1, nextafter = (
    jnp.tan, jnp.arcsin, jnp.arccos, jnp.arctan, jnp.arctan2, jnp.sinh, jnp.cosh, jnp.arcsinh,
    jnp.arccosh, jnp.arctanh, jnp.cbrt, jnp.expm1, jnp.nextafter)


def _cumulative(name):
    def f(operand, axis=0, reverse=False):
        """lax.%s: along @axis, from the end with reverse=True."""
        if _trace._rec is None:
            import numpy as _np
            x = _np.asarray(operand)
            x = _np.flip(x, axis) if reverse else x
            r = getattr(_np, {"cummax": "maximum", "cummin": "minimum", "cumsum": "add",
                              "cumprod": "multiply"}[name]).accumulate(x, axis=axis)
            return _np.flip(r, axis) if reverse else r
        from . import _composite
        return getattr(_composite, name)(operand, axis, reverse=reverse)
    f.__name__ = name
    f.__doc__ = f.__doc__ % name
    return f


cumsum, cumprod, cummax, cummin = (_cumulative(n) for n in ("cumsum", "cumprod", "cummax",
                                                             "cummin"))


def _reducer_of(name):
    def f(operand, axes):
        """lax.%s over @axes (a tuple of ints), as jnp's reduction."""
        axes = tuple(int(a) for a in axes)
        fn = {"reduce_sum": jnp.sum, "reduce_max": jnp.max, "reduce_min": jnp.min,
              "reduce_prod": jnp.prod, "reduce_and": jnp.all, "reduce_or": jnp.any}[name]
        if name in ("reduce_and", "reduce_or") and getattr(operand, "dtype", None) not in \
                (None, jnp.bool_, _np_bool()):
            raise TypeError("lax.%s takes booleans (bitwise reductions of integers are not "
                            "supported)" % name)
        return fn(operand, axis=axes if len(axes) != 1 else axes[0])
    f.__name__ = name
    f.__doc__ = f.__doc__ % name
    return f


def _np_bool():
    import numpy as _np
    return _np.dtype(bool)


reduce_sum, reduce_max, reduce_min, reduce_prod, reduce_and, reduce_or = (
    _reducer_of(n) for n in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod",
                             "reduce_and", "reduce_or"))


def reduce(operands, init_values, computation, dimensions):
    """lax.reduce with a computation JAX knows a monoid for (lax.add, max,
    min, mul, and their jnp twins) and its identity as the init value;
    other computations are refused by name."""
    ops = {add: reduce_sum, jnp.add: reduce_sum, max: reduce_max, jnp.maximum: reduce_max,
           min: reduce_min, jnp.minimum: reduce_min, mul: reduce_prod,
           jnp.multiply: reduce_prod}
    fn = ops.get(computation)
    if fn is None or isinstance(operands, (tuple, list)):
        raise NotImplementedError("lax.reduce: only a single operand and lax.add, lax.max, "
                                  "lax.min or lax.mul are supported, not %r" % (computation,))
    r = fn(operands, tuple(dimensions))
    identity = {reduce_sum: 0, reduce_prod: 1}.get(fn)
    init = init_values
    if identity is not None and not (isinstance(init, (int, float)) and init == identity):
        r = computation(r, init)
    elif fn in (reduce_max, reduce_min) and not (isinstance(init, float) and
                                                 builtins.abs(init) == float("inf")):
        r = computation(r, init)
    return r


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """lax.reduce_precision of float32: the mantissa rounded to
    @mantissa_bits (to nearest, ties to even, as XLA's), the exponent range
    cut to @exponent_bits (overflow to infinity, underflow to zero; NaN stays
    NaN)."""
    if _trace._rec is None:
        import numpy as _np
        x = _np.asarray(operand, _np.float32)
        bits = x.view(_np.uint32).astype(_np.uint64)
    else:
        x = operand
        bits = bitcast_convert_type(operand, jnp.uint32)
    drop = 23 - int(mantissa_bits)
    if drop > 0:
        lsb = (bits >> drop) & 1
        keep = ~((1 << drop) - 1) & 0xFFFFFFFF
        bits = (bits + ((1 << (drop - 1)) - 1) + lsb) & keep
    if _trace._rec is None:
        r = _np.asarray(bits, _np.uint64).astype(_np.uint32).view(_np.float32)
    else:
        r = bitcast_convert_type(bits, jnp.float32)
    if int(exponent_bits) < 8:
        emax = (1 << (int(exponent_bits) - 1)) - 1
        big, tiny = 2.0 ** (emax + 1), 2.0 ** (1 - emax)
        r = jnp.where(jnp.abs(r) >= big, jnp.where(r > 0, jnp.inf, -jnp.inf), r)
        r = jnp.where(jnp.abs(r) < tiny, r * 0.0, r)
    return jnp.where(jnp.isnan(x), x, r)


def rev(operand, dimensions):
    """lax.rev: @operand reversed along each of @dimensions."""
    return jnp.flip(operand, tuple(dimensions))
select = jnp.where


def select_n(which, *cases):
    """lax.select_n: cases[which] element-wise; a bool `which` picks
    cases[1] where it holds (two cases), an int32 one the case it names.
    A Python `which` picks the case while tracing."""
    if not cases:
        raise trace_error("lax.select_n needs at least one case")
    if not isinstance(which, Value):
        import numpy as _np
        w = _np.asarray(which)
        if w.shape:
            raise trace_error("lax.select_n of a host array predicate: pass it to the "
                              "kernel as an operand")
        return cases[int(w)]
    if len(cases) == 1:
        return cases[0]
    if len(cases) == 2 and (dt_of(which) is None or dt_of(which) == _trace.bool_):
        return jnp.where(which, cases[1], cases[0])
    which = local(which)
    out = cases[-1]
    for k in range(len(cases) - 2, -1, -1):
        out = jnp.where(which == k, cases[k], out)
    return out


def is_finite(x):
    """lax.is_finite: x - x is 0 but for infinities and NaN."""
    x = local(x)
    return (x - x) == 0.0


def erf(x):
    if _trace._rec is None and not isinstance(x, Value):
        from . import nn
        return jnp.asarray(nn._erf_host(x))
    return call("lax.erf", x)


def _low16(x):
    """An int16's 16 bits as a non-negative int32 (its words are sign-extended)."""
    v = x.astype(jnp.int32) & 0xFFFF
    return v


def population_count(x):
    """The one bits of each integer, in its own width (int8 -1 has 8)."""
    if dt_of(x) is _trace.int16:
        return call("lax.population_count", _low16(x)).astype(_trace.int16)
    if dt_of(x) is _trace.uint16:	# its words are its 16 bits
        return call("lax.population_count", x.astype(jnp.int32)).astype(_trace.uint16)
    return call("lax.population_count", x)


def clz(x):
    """The leading zero bits of each integer, in its own width."""
    if dt_of(x) is _trace.int16:
        return (call("lax.clz", _low16(x)) - 16).astype(_trace.int16)
    if dt_of(x) is _trace.uint16:
        return (call("lax.clz", x.astype(jnp.int32)) - 16).astype(_trace.uint16)
    return call("lax.clz", x)


def _int_or_float(fn, x, y):
    """Whether lax.div/rem's operands are floats: from the traced dtypes
    (ref reads, casts and arithmetic on them carry theirs)."""
    from ._trace import _promote
    d = _promote(dt_of(x), dt_of(y))
    if d is None:
        raise trace_error("lax.%s: the operands' dtype is not known while tracing "
                          "(%s, %s); give it with .astype(...)" % (fn, x, y))
    return is_float_dt(d)


def div(x, y):
    """lax.div: x / y, integers rounded toward zero (C's, not Python's
    //): the floor quotient plus one where a remainder and the signs differ."""
    if not isinstance(x, Value) and not isinstance(y, Value):
        return x / y if isinstance(x, float) or isinstance(y, float) else \
            int(x / y) if y else x // y
    if _int_or_float("div", x, y):
        return x / y
    x, y = local(x), local(y)
    q, r = local(x // y), x % y
    return jnp.where((r != 0) & _signs_differ(x, y), q + 1, q)


def _signs_differ(x, y):
    """x < 0 != y < 0, a Python operand's sign taken while tracing (index
    maps have no boolean constants)."""
    if isinstance(x, Value) and isinstance(y, Value):
        return (x < 0) != (y < 0)
    if isinstance(y, Value):
        return y >= 0 if x < 0 else y < 0
    return x >= 0 if y < 0 else x < 0


def rem(x, y):
    """lax.rem: x - lax.div(x, y) * y, the sign of x (C's fmod, not
    Python's %): exact for floats as |x| % |y| with x's sign."""
    if not isinstance(x, Value) and not isinstance(y, Value):
        import math
        return math.fmod(x, y) if isinstance(x, float) or isinstance(y, float) else \
            int(math.fmod(x, y))
    x, y = local(x), local(y)
    if _int_or_float("rem", x, y):
        m = local(jnp.abs(x) % (jnp.abs(y) if isinstance(y, Value) else abs(y)))
        return jnp.where(x < 0, -m, m)
    r = x % y			# the sign of y: shift it to x's
    if getattr(r, "scalar", False) and _trace._rec is not None and _trace._spillable(r):
        # a scalar-core value: the select below names r four times and x
        # twice, and the scalar core inlines locals; SMEM words keep it short
        recorder().spill(r)
        if isinstance(x, Value) and _trace._spillable(x) and _trace.scalar_len(x) > 16:
            recorder().spill(x)
    else:
        r = local(r)
    return jnp.where((r != 0) & ((r < 0) != (x < 0)), r - y, r)


# XLA's ErfInv32 (Giles, "Approximating the erfinv function"): w < 5 and
# w >= 5 polynomials, evaluated as XLA does (the coefficients selected)
_ERFINV_LT5 = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
               0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_ERFINV_GE5 = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
               0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def erf_inv(x):
    """lax.erf_inv as XLA computes it in float32: w = -log1p(-x^2), a
    degree-8 polynomial in w - 2.5 (w < 5) or sqrt(w) - 3, times x;
    +-inf at +-1, NaN outside [-1, 1]."""
    if not isinstance(x, Value):
        raise trace_error("lax.erf_inv of a Python number: compute it outside the kernel")
    x = local(x.astype(jnp.float32) if x.dt is not None and not is_float_dt(x.dt) else x)
    w = local(-jnp.log1p(-(x * x)))
    lt = local(w < 5.0)
    w = local(jnp.where(lt, w - 2.5, jnp.sqrt(w) - 3.0))
    p = jnp.where(lt, _ERFINV_LT5[0], _ERFINV_GE5[0])
    for a, b in zip(_ERFINV_LT5[1:], _ERFINV_GE5[1:]):
        p = local(jnp.where(lt, a, b) + p * w)
    return jnp.where(jnp.abs(x) == 1.0, x * float("inf"), p * x)


def logistic(x):
    if _trace._rec is None and not isinstance(x, Value):
        from . import nn
        return nn.sigmoid(x)	# the host's: jax.nn.sigmoid's formula
    return call("lax.logistic", x)


def shift_right_logical(x, y):
    if dt_of(x) is _trace.int16:	# zeros shifted in at bit 15
        return call("lax.shift_right_logical", _low16(x), y).astype(_trace.int16)
    return call("lax.shift_right_logical", x, y)


def shift_right_arithmetic(x, y):
    """lax.shift_right_arithmetic: the sign bit copied in, of a uint32's top
    bit too (as XLA's; jnp.right_shift and >> of unsigned types are logical);
    of a uint16 its bit 15 (its words zero-extended: sign-extended first)."""
    if dt_of(x) is _trace.uint16:
        s = call("lax.shift_right_arithmetic", x.astype(_trace.int16), y)
        return s.astype(_trace.uint16)
    return call("lax.shift_right_arithmetic", x, y)


def clamp(lo, x, hi):
    return call("lax.clamp", lo, x, hi)


def _select_tree(conds, outs, what):
    """The branches' results (same structure) chosen by @conds, the first
    that holds, else the last branch's: jnp.where on each leaf."""
    last = outs[-1]
    if isinstance(last, (tuple, list)):
        if any(not isinstance(o, (tuple, list)) or len(o) != len(last) for o in outs):
            raise trace_error("%s: the branches return different structures" % what)
        return type(last)(_select_tree(conds, [o[k] for o in outs], what)
                          for k in range(len(last)))
    if any(o is None for o in outs):
        if all(o is None for o in outs):
            return None
        raise trace_error("%s: some branches return a value and some None" % what)
    acc = last
    for c, o in zip(conds[-2::-1], outs[-2::-1]):
        if isinstance(c, Value) and _scalar_int(c) and _scalar_int(o) and _scalar_int(acc):
            # scalar-core ints (a while_loop's carry): chosen on the scalar
            # core, acc + (o - acc) * c with c 0 or 1
            c01 = c if dt_of(c) == _trace.bool_ else (c != 0)
            acc = acc + (o - acc) * c01 if not (isinstance(o, int) and isinstance(acc, int)
                                                 and o == acc) else acc
        else:
            acc = jnp.where(c, o, acc)
    return acc


def _scalar_int(x):
    """A Python int or bool, or a scalar-core integer value."""
    if isinstance(x, (bool, int)):
        return True
    return isinstance(x, Value) and x.scalar and not _trace.is_float_dt(dt_of(x)) and \
        x.shape in (None, ())


def _run_branches(conds, fns, operands, what):
    """Each branch traced once under pl.when(its condition): its stores and
    copies happen where it is chosen; the values it returns are computed
    at every step and chosen with jnp.where (they cannot fault)."""
    rec = recorder()
    outs = []
    for c, fn in zip(conds, fns):
        rec.conds.append(_trace.when_cond(c))
        k = len(rec.conds) - 1
        if isinstance(c, Value) and c.reads:
            rec.cond_values[k] = c
        try:
            outs.append(fn(*operands))
        finally:
            rec.conds.pop()
            rec.cond_values.pop(k, None)
    return _select_tree(conds, outs, what)


def cond(pred, true_fun, false_fun, *operands):
    """lax.cond. A Python predicate picks its branch while tracing; a traced
    one runs each branch under pl.when(pred) and pl.when(~pred), and the
    values they return are chosen with jnp.where(pred, ...)."""
    if not isinstance(pred, Value):
        return true_fun(*operands) if pred else false_fun(*operands)
    return _run_branches((pred, ~pred), (true_fun, false_fun), operands,
                         "lax.cond on %s" % pred.render())


def switch(index, branches, *operands):
    """lax.switch: branches[index], the index clamped into range as lax's
    is; a traced index runs branch k under pl.when(index == k)."""
    branches = list(branches)
    if not branches:
        raise trace_error("lax.switch: no branches")
    n = len(branches)
    if not isinstance(index, Value):
        return branches[builtins.min(builtins.max(int(index), 0), n - 1)](*operands)
    if n == 1:
        return branches[0](*operands)
    conds = [index <= 0] + [index == k for k in range(1, n - 1)] + [index >= n - 1]
    return _run_branches(conds, branches, operands, "lax.switch on %s" % index.render())


def optimization_barrier(operand):
    """lax.optimization_barrier: the identity on a pytree. Host code and
    kernel bodies run in program order here, so the order it pins (the
    async note's schedules) is the order written."""
    return operand


def dce_sink(val, *, prevent_mlir_dce=False):
    """lax.dce_sink: uses @val (a pytree) so that XLA keeps what computes
    it; every call here runs as written, so there is nothing to keep."""
    return None


def convert_element_type(x, new_dtype):
    return x.astype(new_dtype)


def bitcast_convert_type(operand, new_dtype):
    """lax.bitcast_convert_type of one width: pltpu.bitcast. Between
    widths lax's shape rule is not pltpu.bitcast's (a trailing dimension
    of the ratio added or dropped, where pltpu packs rows): refused."""
    frm = _trace.dt_of(operand)
    to = _trace.as_dtype(new_dtype)
    if isinstance(frm, _trace.DType) and _trace._WIDTH[frm.name] != _trace._WIDTH[to.name]:
        raise trace_error("lax.bitcast_convert_type of %s to %s: between widths it adds or "
                          "drops a trailing dimension, which values here cannot; "
                          "pltpu.bitcast(x, %s) packs rows instead (the second-to-last "
                          "dimension scaled)" % (frm.name, to.name, to.name))
    return _trace.bitcast_value(operand, new_dtype, "lax.bitcast_convert_type")


def _host_dot_general(lhs, rhs, lc, rc, lb, rb, pet):
    """lax.dot_general on host arrays: jnp.einsum of its dimensions (batch,
    then lhs's free, then rhs's free, as lax orders the result)."""
    ln, rn = len(lhs.shape), len(rhs.shape)
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    ls, rs = [None] * ln, [None] * rn
    for a, b in list(zip(lb, rb)) + list(zip(lc, rc)):
        ls[a] = rs[b] = next(letters)
    ls = [c or next(letters) for c in ls]
    rs = [c or next(letters) for c in rs]
    out = [ls[d] for d in lb] + [ls[d] for d in range(ln) if d not in lb + lc] + \
        [rs[d] for d in range(rn) if d not in rb + rc]
    return jnp.einsum("%s,%s->%s" % ("".join(ls), "".join(rs), "".join(out)), lhs, rhs,
                      preferred_element_type=pet)


def integer_pow(x, y):
    """x ** y for a Python int y, by repeated squaring as XLA does."""
    if getattr(x, "_counted", False):	# pl.estimate_cost's arrays: JAX's rule
        from .pallas import _cost_estimate
        return _cost_estimate.integer_pow(x, y)
    y = int(y)
    if y == 0:
        return jnp.full_like(x, 1)
    if y < 0:
        return 1 / integer_pow(x, -y)
    acc, base = None, x
    while y:
        if y & 1:
            acc = base if acc is None else acc * base
        y >>= 1
        if y:
            base = base * base
    return acc


def while_loop(cond_fun, body_fun, init_val):
    """lax.while_loop. While the condition is known while tracing (it reads
    only Python values) the trips are unrolled; from the first trip whose
    condition is traced on, a device while loop: the condition, a scalar
    (an SMEM element, the carry's ints, which live in SMEM), evaluated
    before every trip, the body traced once."""
    val = init_val
    for _ in range(1 << 16):
        c = cond_fun(val)
        if isinstance(c, Value):
            return _device_while(cond_fun, body_fun, val)
        if not c:
            return val
        val = body_fun(val)
    raise trace_error("lax.while_loop: still looping after 65536 iterations while tracing")


def _device_while(cond_fun, body_fun, val):
    what = "lax.while_loop"
    rec = recorder()
    d = _loop_depth(rec, what)
    _hold_before_loop(rec)
    carry = _Carry(rec, val, what)
    before = len(rec.stmts)
    c = cond_fun(carry.inner)
    if isinstance(c, Value) and not c.scalar:
        raise trace_error("lax.while_loop: the condition (%s) is an array; on the device "
                          "it is a scalar: an SMEM element, or the carry's scalar part "
                          "(its ints live in SMEM)" % c.render())
    # a long condition has parts spilled into SMEM before the loop, which
    # the loop's head would not recompute: then the condition lives in a
    # spill slot of its own, computed again at the end of every trip
    again = isinstance(c, Value) and len(rec.stmts) > before
    if again and not (c.kind == "text" and c.text.startswith(_trace.SPILL_REF + "[")):
        rec.spill(c)
    text = c.render() if isinstance(c, Value) else ("1" if c else "0")
    rec.open_loop("while", (text, 0), "while %s:  # loop_index(%d)" % (text, d))
    try:
        carry.update(body_fun(carry.inner))
        if again:
            rec.emit("%s = %s" % (text, _trace._fmt(cond_fun(carry.inner))))
    finally:
        empty = rec.close_loop()
    if empty:
        raise trace_error("lax.while_loop: the body does nothing on the device, so a "
                          "condition (%s) that holds would hold forever" % text)
    return carry.out()


def full_like(x, fill_value, dtype=None, shape=None):
    """lax.full_like(x, v): jnp.full of x's shape and dtype (or @shape,
    @dtype); x may be a ref."""
    from . import numpy as jnp
    return jnp.full(tuple(x.shape) if shape is None else tuple(shape), fill_value,
                    dtype=dtype if dtype is not None else x.dtype)


def axis_index(axis_name):
    """lax.axis_index inside pl.kernel: which TensorCore of the mesh runs."""
    from .pallas.kernel import axis_index as mesh_index
    return mesh_index(axis_name)


def psum(x, axis_name, *, axis_index_groups=None):
    """lax.psum over a mesh axis in a kernel: of a Python number, it times
    the axis's cores (psum(1, axis) is its size); on an axis of one core,
    the value itself. A sum of traced values across cores is refused (no
    cross-core collectives here)."""
    if axis_index_groups is not None:
        raise NotImplementedError("lax.psum(axis_index_groups=): not supported")
    n = axis_size(axis_name)
    if n == 1:
        return x
    if isinstance(x, (bool, int, float)) and not isinstance(x, Value):
        return x * n
    raise trace_error("lax.psum of a traced value over %r (%d cores): collectives across "
                      "cores are not supported" % (axis_name, n))


def axis_size(axis_name):
    """lax.axis_size inside pl.kernel: the mesh axis's TensorCores."""
    from .pallas.kernel import axis_size as mesh_size
    return mesh_size(axis_name)


__all__ = ["dot", "dot_general", "broadcast", "broadcast_in_dim", "broadcasted_iota", "axis_index", "axis_size", "fori_loop", "cond", "switch", "while_loop",
           "select", "stop_gradient", "convert_element_type", "integer_pow",
           "clamp", "exp", "exp2", "log", "log1p", "sqrt", "rsqrt", "tanh", "abs", "floor",
           "sin", "cos", "erf", "erf_inv", "population_count", "clz", "div", "rem",
           "ceil", "sign", "square", "neg", "logistic", "add", "sub", "mul", "max", "min",
           "pow", "eq", "ne", "lt", "le", "gt", "ge", "shift_left", "shift_right_arithmetic",
           "shift_right_logical", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
           "select_n", "is_finite", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh",
           "asinh", "acosh", "atanh", "cbrt", "expm1", "nextafter", "cumsum", "cumprod",
           "cummax", "cummin", "rev", "transpose", "reduce_sum", "reduce_max", "reduce_min",
           "reduce_prod", "reduce_and", "reduce_or", "reduce", "reduce_precision",
           "dynamic_slice", "dynamic_slice_in_dim", "dynamic_update_slice",
           "dynamic_update_slice_in_dim", "argmax", "argmin", "iota", "RoundingMethod", "round",
           "concatenate", "pad", "squeeze", "expand_dims", "reshape", "sort", "top_k", "scan",
           "map", "associative_scan", "psum"]


def scan(f, init, xs=None, length=None, reverse=False, unroll=1, **_kw):
    """lax.scan: f(carry, x) over xs's leading axis (or @length trips), the
    ys stacked. On the host (around pallas_calls), Python's loop. In a
    kernel body the loop is unrolled while tracing (at most
    UNROLL_MAX_TRIPS trips, or unroll=True); a longer one over no xs whose
    body returns no ys is a device loop, as lax.fori_loop's; a longer one
    over xs is refused (index refs in a lax.fori_loop instead)."""
    import numpy as _np
    from . import _pytree
    leaves, tree = _pytree.flatten(xs)
    if leaves:
        n = _leading(leaves[0])
        if length is not None and int(length) != n:
            raise ValueError("lax.scan: length %d but xs have %d" % (length, n))
    elif length is None:
        raise ValueError("lax.scan: give xs or length")
    else:
        n = int(length)
    if _trace._rec is not None and not (n <= UNROLL_MAX_TRIPS or unroll is True or
                                        isinstance(unroll, int) and unroll >= n > 0):
        if leaves:
            raise trace_error("lax.scan in a kernel body over xs of %d trips: it is unrolled "
                              "up to %d (or unroll=True); for more, index refs in a "
                              "lax.fori_loop" % (n, UNROLL_MAX_TRIPS))

        def trip(i, carry):
            carry, y = f(carry, None)
            if _pytree.flatten(y)[0]:
                raise trace_error("lax.scan in a kernel body of %d trips returns ys: it is "
                                  "unrolled up to %d (or unroll=True); a device loop "
                                  "carries values only" % (n, UNROLL_MAX_TRIPS))
            return carry
        return _device_fori(0, n, trip, init, "lax.scan"), None
    carry, ys = init, []
    for i in (range(n - 1, -1, -1) if reverse else range(n)):
        x = _pytree.unflatten(tree, [a[i] for a in leaves]) if leaves else None
        carry, y = f(carry, x)
        if _trace._rec is not None:	# each trip's values computed once
            carry, y = _bound(carry), _bound(y)
        ys.append(y)
    if reverse:
        ys.reverse()
    if not ys:
        return carry, None
    yl = [_pytree.flatten(y) for y in ys]
    ytree = yl[0][1]
    if not yl[0][0]:
        return carry, _pytree.unflatten(ytree, [])
    stack = jnp.stack if _trace._rec is not None else _np.stack
    stacked = [stack([ls[k] for ls, _ in yl]) for k in range(len(yl[0][0]))]
    return carry, _pytree.unflatten(ytree, stacked)


def _bound(tree):
    """@tree with its traced leaves bound to locals."""
    from . import _pytree
    ls, t = _pytree.flatten(tree)
    return _pytree.unflatten(t, [local(v) for v in ls])


def _leading(a):
    shape = getattr(a, "shape", None)
    if shape is None or not len(shape):
        raise ValueError("lax.scan: xs must have a leading axis (shape %r)" % (shape,))
    return int(shape[0])


def map(f, xs, *, batch_size=None):
    """lax.map: f over xs's leading axis, the results stacked (lax.scan
    without a carry)."""
    del batch_size		# how XLA batches it; the results are the same
    return scan(lambda _, x: (None, f(x)), None, xs)[1]


def associative_scan(fn, elems, reverse=False, axis=0):
    """lax.associative_scan of one array: Hillis-Steele doubling, each step
    fn(earlier, later) of elements s apart along @axis (rolls and an iota
    mask in a kernel), so fn is applied in order (it need only be
    associative); @reverse scans from the end (flipped, scanned, flipped)."""
    import numpy as _np
    from . import _pytree
    leaves, _ = _pytree.flatten(elems)
    if len(leaves) != 1 or leaves[0] is not elems:
        raise NotImplementedError("lax.associative_scan of a pytree: one array here")
    jnp_ = jnp if _trace._rec is not None or isinstance(elems, Value) else _np
    x = elems if jnp_ is jnp else _np.asarray(elems)
    shape = tuple(x.shape)
    a = int(axis) % len(shape)
    if reverse:
        x = jnp_.flip(x, axis=a)
    n = shape[a]
    pos = broadcasted_iota(jnp.int32, shape, a) if jnp_ is jnp else \
        _np.broadcast_to(_np.arange(n).reshape([-1 if d == a else 1 for d in range(len(shape))]),
                         shape)
    s = 1
    while s < n:
        earlier = jnp_.roll(x, s, axis=a)
        x = jnp_.where(pos >= s, fn(earlier, x), x)
        if jnp_ is jnp:
            x = local(x)
        s *= 2
    return jnp_.flip(x, axis=a) if reverse else x


class Primitive:
    """A lax primitive as JAX's tests reach it (lax.pow_p.bind(x, y)):
    bind calls the function of that name here, keyword parameters as its
    keywords."""

    def __init__(self, name, fn):
        self.name = name
        self._fn = fn

    def bind(self, *args, **params):
        return self._fn(*args, **params)

    def __repr__(self):
        return self.name


# the functions of lax's own (not jnp's) that values being differentiated
# reach (_ad's rules)
dot_general, logistic, erf, select = (_ad.wraps_differentiable(n, f) for n, f in (
    ("dot_general", dot_general), ("logistic", logistic), ("erf", erf), ("where", select)))


def stop_gradient(x):
    """lax.stop_gradient: @x, no longer being differentiated (at any level)."""
    return _ad.constant(x)


# pow_p, exp_p, add_p, ... for every function above (not the classes)
for _n in __all__:
    if callable(globals()[_n]) and not isinstance(globals()[_n], type):
        globals()[_n + "_p"] = Primitive(_n, globals()[_n])
del _n
