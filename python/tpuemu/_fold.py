# SPDX-License-Identifier: MIT
"""Arrays, blocks, scratch and values of rank 5 and 6 on a device of rank 4.

The job format (TPU_JOB_MAX_RANK) and libtpurt's statements hold 1 to 4
dimensions. As Mosaic, which tiles only a block's last two dimensions, a
block's leading dimensions are just a loop, so adjacent leading dimensions
fold into one where that is exact, and nothing moves: row-major, a folded
array is the same bytes, and a reshape that keeps the last dimension keeps
a value's 2-D view (libtpurt renames it).

Operands: fold_block() merges adjacent leading dimensions of an array and
its block (the inner one's block whole, or the outer one's 1 or squeezed
and the inner one's dividing its dimension), the index map's results
combined (i * inner_blocks + j); the kernel gets a ReshapedRef of the
folded ref with the user's block shape.

Values: a traced Value of rank 5 or 6 keeps the user's shape (v.shape) and
has v.dev, the shape the device holds it in: its dimensions in at most 4
contiguous groups. Each operation picks the grouping it needs (the
dimensions it broadcasts, reduces or moves on their own) and lays its
operands out so (laid_out), usually a rename."""
from . import _trace
from ._trace import Value, trace_error

MAX_RANK = 6		# the front end's arrays, blocks, scratch and values
DEVICE_RANK = 4		# TPU_JOB_MAX_RANK, TPURT_MAX_RANK


def prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


def sizes(shape, groups):
    """The device shape of @shape in @groups (numbers of dimensions)."""
    out, at = [], 0
    for g in groups:
        out.append(prod(shape[at:at + g]))
        at += g
    return tuple(out)


def _groups(r, cuts):
    """Group lengths of dimensions 0..r-1, a new group at each of @cuts."""
    edges = [0] + sorted(c for c in set(cuts) if 0 < c < r) + [r]
    return [b - a for a, b in zip(edges, edges[1:])]


def groups_for(shape, cuts=(), what="a value"):
    """The coarsest grouping of @shape (rank 5 or 6) into at most 4 groups
    that starts a group at each of @cuts, keeping the last two dimensions
    (Mosaic's tile) apart where it can; a clear error where it cannot."""
    r = len(shape)
    for keep in ((r - 2, r - 1), (r - 1,), ()):
        g = _groups(r, set(cuts) | set(keep))
        if len(g) <= DEVICE_RANK:
            return g
    raise trace_error("%s of shape %r: its dimensions do not fold into %d groups (the "
                      "operation needs a group to start at each of dimensions %s)"
                      % (what, tuple(shape), DEVICE_RANK,
                         ", ".join(str(c) for c in sorted(set(cuts)))))


def fold_shape(shape):
    """The device shape of a new value of @shape (jnp.zeros, a reshape's
    result): its leading dimensions merged (the shape itself up to rank 4)."""
    shape = tuple(shape)
    if len(shape) <= DEVICE_RANK:
        return shape
    return sizes(shape, groups_for(shape))


def check_rank(shape, what):
    if len(shape) > MAX_RANK:
        raise ValueError("%s: an array of rank %d (shape %r): arrays have 1 to %d "
                         "dimensions" % (what, len(shape), tuple(shape), MAX_RANK))


def device_shape(x):
    """The shape the device holds value @x in."""
    dev = getattr(x, "dev", None)
    return dev if dev is not None else getattr(x, "shape", None)


def is_high(x):
    """@x is a traced value of rank 5 or 6."""
    return isinstance(x, Value) and x.shape is not None and len(x.shape) > DEVICE_RANK


def is_high_op(*args):
    """An operation with an operand of rank 5 or 6."""
    return any(is_high(a) for a in args)


# statement-syntax functions that are not element-wise: the ones folded
# (reductions, reshapes, transposes, iotas) lay their operands out in
# device form before they get here
_NOT_ELEMENTWISE = {"sum", "max", "min", "mean", "argmax", "argmin", "prod", "dot",
                    "transpose", "swapaxes", "moveaxis", "roll", "take_along_axis", "take",
                    "concatenate", "reshape", "zeros", "full", "broadcasted_iota", "iota",
                    "prng_random_bits", "bitcast", "softmax", "log_softmax", "cumsum",
                    "repeat", "tile", "stack"}


def refused(what, shape):
    """The error for operation @what on a value of rank 5 or 6 (@shape)
    that is not folded."""
    return trace_error("%s of a value of shape %r: values of rank %d and %d are folded "
                       "for element-wise ops, reductions, reshapes, transposes, dots, "
                       "constant indexing and ref reads and stores, not for this operation"
                       % (what, tuple(shape), DEVICE_RANK + 1, MAX_RANK))


def call_args(fn, args):
    """The arguments of a traced call @fn (positional ones, and keyword
    pairs), one of rank 5 or 6, laid out for it, and the result's device
    shape; a clear error for a function that is not element-wise."""
    if fn.rsplit(".", 1)[-1] in _NOT_ELEMENTWISE:
        raise refused(fn, next(a for a in args if is_high(a)).shape)
    kw = [isinstance(a, tuple) and len(a) == 2 and a[0] == "__kw__" for a in args]
    pos = [a for a, k in zip(args, kw) if not k]
    from ._shapes import broadcast, shape_of
    out = broadcast(*[shape_of(a) for a in pos if shape_of(a) is not None])
    if out is None:
        raise trace_error("%s of values of shapes %s: they do not broadcast"
                          % (fn, ", ".join(str(shape_of(a)) for a in pos)))
    new, dev = align(pos, out, fn)
    it = iter(new)
    return [a if k else next(it) for a, k in zip(args, kw)], dev


def laid_out(x, shape, dev):
    """Value @x as one of Python shape @shape held on the device as @dev (a
    grouping of it; @shape itself up to rank 4): a rename where @x is held
    so already, else a device reshape (row-major, so the same elements)."""
    shape, dev = tuple(shape), tuple(dev)
    if tuple(x.shape) == shape and tuple(device_shape(x)) == dev:
        return x
    if tuple(device_shape(x)) == dev:
        v = Value("view", "", (x,), x.reads, scalar=x.scalar, dt=x.dt)
    else:
        v = Value("call", "jnp.reshape", (x, dev), x.reads, dt=x.dt)
    v.shape = shape
    v.dev = dev if len(shape) > DEVICE_RANK else None
    return v


def device_form(x, groups):
    """@x's device value in @groups, as a plain value of rank <= 4."""
    dev = sizes(x.shape, groups)
    return laid_out(x, dev, dev)


def _padded(x, r):
    return (1,) * (r - len(x.shape)) + tuple(x.shape)


def align(args, out_shape, what):
    """The operands of an element-wise operation whose result @out_shape
    has rank 5 or 6, laid out in one grouping (a new group wherever an
    operand switches between broadcast and full dimensions), and the
    result's device shape."""
    r = len(out_shape)
    arrays = [a for a in args if isinstance(a, Value) and not a.scalar and a.shape != ()]
    for a in arrays:
        if a.shape is None:
            raise trace_error("%s of a value of rank %d: operand %s's shape is not known "
                              "while tracing" % (what, r, a.render()))
    same = [a for a in arrays if tuple(a.shape) == tuple(out_shape)]
    if len(same) == len(arrays) and len({tuple(device_shape(a)) for a in same}) == 1:
        return list(args), tuple(device_shape(same[0]))
    cuts = set()
    for a in arrays:
        s, prev = _padded(a, r), None
        for d in range(r):
            if out_shape[d] == 1:
                continue		# either way
            full = s[d] == out_shape[d]
            if prev is not None and full != prev:
                cuts.add(d)
            prev = full
    groups = groups_for(out_shape, cuts, what)
    for a in same:	# an operand's own grouping, where it serves, renames nothing
        own = _coarsening(out_shape, device_shape(a))
        if own is not None and cuts <= {sum(own[:k]) for k in range(1, len(own))}:
            groups = own
            break
    new = []
    for a in args:
        if any(a is b for b in arrays):
            s = _padded(a, r)
            dev = sizes(s, groups)
            own = tuple(device_shape(a))
            # the device broadcasts leading unit dimensions itself
            while len(dev) > len(own) and dev[0] == 1:
                dev = dev[1:]
            a = a if own == dev else laid_out(a, s, sizes(s, groups))
        new.append(a)
    return new, sizes(out_shape, groups)


def inherit(v):
    """The device shape of a new element-wise value @v of rank 5 or 6 whose
    array operands all have its shape and one device shape; None if not."""
    arrays = [a for a in v.children() if not a.scalar and a.shape != ()]
    if arrays and all(a.shape is not None and tuple(a.shape) == tuple(v.shape)
                      for a in arrays):
        devs = {tuple(device_shape(a)) for a in arrays}
        if len(devs) == 1:
            return devs.pop()
    return None


def _coarsening(shape, dev):
    """Groups of @shape whose sizes are @dev, or None."""
    groups, at = [], 0
    for n in dev:
        size, start = 1, at
        while at < len(shape) and (size < n or size == n and at == start):
            size *= shape[at]
            at += 1
            if size == n and not (n == 1 and at < len(shape) and shape[at] == 1 and
                                  len(groups) == len(dev) - 1):
                break
        if size != n:
            return None
        groups.append(at - start)
    if at < len(shape) and groups and all(shape[k] == 1 for k in range(at, len(shape))):
        groups[-1] += len(shape) - at
        at = len(shape)
    return groups if at == len(shape) and all(groups) else None


def reshape(x, shape):
    """jnp.reshape of @x to @shape where either has rank 5 or 6: a rename
    where the device's shape of @x groups @shape, else a device reshape."""
    shape = tuple(shape)
    own = tuple(device_shape(x))
    if len(shape) <= DEVICE_RANK:
        return laid_out(x, shape, shape)
    if len(own) <= DEVICE_RANK and _coarsening(shape, own) is not None:
        return laid_out(x, shape, own)
    return laid_out(x, shape, fold_shape(shape))


def _axes(axis, r, what):
    if axis is None:
        return set(range(r))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = set()
    for a in axes:
        a = int(a)
        if not -r <= a < r:
            raise trace_error("%s: axis %d is out of range for a value of rank %d"
                              % (what, a, r))
        out.add(a % r)
    return out


def reduce(fn, x, axis, keepdims):
    """@fn (jnp.sum, ... as a function of a value of rank <= 4) of @x of rank
    5 or 6 along @axis: the reduced dimensions grouped on their own."""
    r = len(x.shape)
    what = "jnp.%s" % fn.__name__
    axes = _axes(axis, r, what)
    groups = groups_for(x.shape, {d for d in range(1, r) if (d in axes) != (d - 1 in axes)},
                        what)
    first = [sum(groups[:k]) for k in range(len(groups))]
    gaxes = tuple(k for k, d in enumerate(first) if d in axes)
    if axis is None:		# all of it: one (1, 1) tile
        red = fn(device_form(x, groups))
        shape = (1,) * r
        return laid_out(red, shape, sizes(shape, groups)) if keepdims else red
    red = fn(device_form(x, groups), axis=gaxes if len(gaxes) > 1 else gaxes[0],
             keepdims=True)
    if keepdims:
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
        return laid_out(red, shape, sizes(shape, groups) if r > DEVICE_RANK else shape)
    shape = tuple(n for d, n in enumerate(x.shape) if d not in axes)
    if len(shape) <= DEVICE_RANK:
        return laid_out(red, shape, shape)
    dev = tuple(n for k, n in enumerate(red.shape) if k not in gaxes)
    return laid_out(red, shape, dev)


def transpose(x, perm, what="jnp.transpose"):
    """@x of rank 5 or 6 permuted by @perm: the dimensions that stay side by
    side and in order move together, as one dimension of a device transpose."""
    r = len(x.shape)
    perm = tuple(int(p) % r for p in perm)
    if sorted(perm) != list(range(r)):
        raise trace_error("%s: axes %r are not a permutation of %d dimensions"
                          % (what, perm, r))
    if perm == tuple(range(r)):
        return x
    pos = {d: k for k, d in enumerate(perm)}
    cuts = {d for d in range(1, r) if pos[d] != pos[d - 1] + 1}
    if len(_groups(r, cuts)) > DEVICE_RANK:
        # more than 4 runs move (x.T): one dimension at a time into its
        # place, each move a transpose of at most 4 groups
        order = list(range(r))
        for k, d in enumerate(perm):
            at = order.index(d)
            if at != k:
                step = order[:k] + [order[at]] + order[k:at] + order[at + 1:]
                x = transpose(x, [order.index(e) for e in step], what)
                order = step
        return x
    groups = groups_for(x.shape, cuts, "%s by %r" % (what, perm))
    first = [sum(groups[:k]) for k in range(len(groups))]
    gperm = sorted(range(len(groups)), key=lambda k: pos[first[k]])
    y = _trace.call("jnp.transpose", device_form(x, groups), tuple(gperm))
    shape = tuple(x.shape[p] for p in perm)
    out_groups = [groups[k] for k in gperm]
    return laid_out(y, shape, sizes(shape, out_groups) if r > DEVICE_RANK else shape)


def index(x, idx):
    """x[2], x[:, 1:3] of @x of rank 5 or 6 (constant ints and slices): each
    dimension indexed short of whole grouped on its own, the device's
    value indexed so."""
    r = len(x.shape)
    if len(idx) > r:
        raise trace_error("indexing a value of shape %r with %d indices"
                          % (tuple(x.shape), len(idx)))
    idx = tuple(idx) + (slice(None),) * (r - len(idx))
    cuts = set()
    for d, (e, n) in enumerate(zip(idx, x.shape)):
        if not (isinstance(e, slice) and e.indices(n) == (0, n, 1)):
            cuts |= {d, d + 1}
    groups = groups_for(x.shape, cuts, "indexing %r" % (idx,))
    first = [sum(groups[:k]) for k in range(len(groups))]
    y = device_form(x, groups)[tuple(idx[d] if g == 1 else slice(None)
                                     for d, g in zip(first, groups))]
    shape = x._index_shape(idx)
    return laid_out(y, shape, y.shape if len(shape) > DEVICE_RANK else shape)


def iota(dtype, shape, dimension):
    """lax.broadcasted_iota of rank 5 or 6: the counted dimension grouped on
    its own."""
    r = len(shape)
    d = int(dimension) % r
    groups = groups_for(shape, {d, d + 1}, "lax.broadcasted_iota")
    k = [sum(groups[:g]) for g in range(len(groups))].index(d)
    v = _trace.call("lax.broadcasted_iota", dtype, sizes(shape, groups), k)
    v.shape, v.dt, v.dev = tuple(shape), _trace._as_dtype_or_none(dtype), sizes(shape, groups)
    return v


# --- operands ---

def _merge(o, i):
    """Two adjacent leading dimensions of an operand as one, or None where
    that is not exact; each {n: size, b: block (None squeezed), el:
    element-indexed, blocks: the inner one's blocks per outer index}."""
    if o["el"] or i["el"]:
        return None
    if i["b"] is not None and i["b"] == i["n"] or i["b"] is None and i["n"] == 1:
        b = i["n"] if o["b"] is None else o["b"] * i["n"]	# the inner one whole
        return {"n": o["n"] * i["n"], "b": b, "el": False, "blocks": 1}
    ib = 1 if i["b"] is None else i["b"]
    if o["b"] in (None, 1) and i["n"] % ib == 0:		# one outer index at a time
        b = None if o["b"] is None and i["b"] is None else ib
        return {"n": o["n"] * i["n"], "b": b, "el": False, "blocks": i["n"] // ib}
    return None


def _combine(a, b, n):
    """Block index a * n + b (the index map's results of an outer and an
    inner dimension folded into one)."""
    if isinstance(a, int) and a == 0:
        return b
    a = a if n == 1 else a * n
    return a if isinstance(b, int) and b == 0 else a + b


def whole(shape):
    """Block dims of a whole array (fold_block's @dims)."""
    return [(int(n), False, 0) for n in shape]


def fold_ref_shape(shape, what):
    """The device shape of a whole ref of rank 5 or 6 (scratch, an HBM
    operand): as fold_block folds a whole array, so two such refs of one
    shape have one device shape (a copy between them is the bytes)."""
    check_rank(shape, what)
    if len(shape) <= DEVICE_RANK:
        return tuple(shape)
    return fold_block(what, shape, whole(shape))[0]


def fold_block(what, shape, dims):
    """An operand of rank 5 or 6: @shape, @dims its block's (size or None
    squeezed, element-indexed, low padding) per dimension. Adjacent leading
    dimensions (not the last two) merge while the rank is over 4. Returns
    the device's array shape, its block dims and a function taking the
    index map's results to the device's; a ValueError naming the operand
    and dimensions where no merge is exact."""
    check_rank(shape, what)
    ents = [{"n": int(n), "b": b, "el": el, "pad": pad, "of": [d]}
            for d, (n, (b, el, pad)) in enumerate(zip(shape, dims))]
    steps = []
    while len(ents) > DEVICE_RANK:
        for k in range(len(ents) - 3):
            m = _merge(ents[k], ents[k + 1])
            if m is not None:
                m.update(pad=0, of=ents[k]["of"] + ents[k + 1]["of"])
                steps.append((k, m["blocks"]))
                ents[k:k + 2] = [m]
                break
        else:
            def show(e):
                return "x".join(str(shape[d]) for d in e["of"])
            pairs = "; ".join(
                "dims %s (size %s) and %s (size %s), blocks %s and %s"
                % (ents[k]["of"], show(ents[k]), ents[k + 1]["of"], show(ents[k + 1]),
                   ents[k]["b"], ents[k + 1]["b"]) for k in range(len(ents) - 3))
            raise ValueError(
                "%s: an array of rank %d (shape %r, block %r) does not fold into %d "
                "dimensions: no two adjacent leading dimensions merge exactly (%s); the "
                "inner one's block must cover its dimension whole, or the outer one's "
                "be 1 or squeezed (None) and the inner one's divide its dimension"
                % (what, len(shape), tuple(shape), tuple(b for b, _, _ in dims),
                   DEVICE_RANK, pairs))

    def index(res):
        res = list(res)
        for k, n in steps:
            res[k:k + 2] = [_combine(res[k], res[k + 1], n)]
        return res
    return (tuple(e["n"] for e in ents),
            [(e["b"], e["el"], e["pad"]) for e in ents], index)
