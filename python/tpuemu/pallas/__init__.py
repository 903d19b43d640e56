# SPDX-License-Identifier: MIT
"""jax.experimental.pallas over libtpurt (tpuemu.pallas as pl)."""
import inspect

import numpy as _np

from .. import _ad, _fold, _trace, lax, numpy as jnp
from .._trace import Value, Ref, Slice, TraceError, as_dtype, scalar, trace_error
from .._lib import ffi, lib, check, device, TpurtError
from .. import _pytree

_last_stats = None
_TPURT_INTERPRET = 1 << 1	# tpurt.h: interpret mode's block shapes
_TPURT_DEBUG = 1 << 0		# tpurt.h: the device's debug mode (poison, hazards)
# The grids of the pallas_calls being traced, innermost last (emit_pipeline's
# core_axis reads its size).
_grids = []
_grid_given = []	# each pallas_call's grid as given (() for no grid)

ANY = "any"
# pl.HOST's operands are the device's "any" ones: copied, never loaded
_SPACES = {None: 0, "vmem": 0, "smem": 1, "any": 2, "host": 2, "sem_dma": 3,
           "sem_regular": 4}


class RevisitMode:
    """pl.RevisitMode, pl.Buffered's revisit=: IMMEDIATE (an output block
    revisited only on consecutive steps, the default) or ANY (the grid may
    return to an output block after others: each new visit reads it back
    from HBM, so accumulating across visits works; pl.Buffered(1) only, as
    Mosaic; on an input it changes nothing, inputs are read at every new
    block anyway)."""
    IMMEDIATE = "immediate"
    ANY = "any"


class Buffered:
    """pl.Buffered(n, revisit=): the block's pipeline depth and pl.RevisitMode."""

    def __init__(self, buffer_count, *, revisit=None, use_lookahead=False, prefetched_count=0):
        self.buffer_count = int(buffer_count)
        # blocks an earlier call already fetched (emit_pipeline): refused there
        self.prefetched_count = int(prefetched_count)
        if revisit not in (None, RevisitMode.IMMEDIATE, RevisitMode.ANY):
            raise TypeError("pl.Buffered(revisit=%r): give pl.RevisitMode.IMMEDIATE or ANY"
                            % (revisit,))
        self.revisit = revisit
        self.use_lookahead = bool(use_lookahead)


class Blocked:
    """pl.Blocked(n): a block dimension of n indexed by block (an int's
    meaning); pl.Blocked() is the blocked indexing mode."""

    def __init__(self, block_size=None):
        self.block_size = block_size


class Element:
    """pl.Element(n, padding=(low, high)): a block dimension of n whose
    index map gives the element offset of the block's start, in the array
    padded by @low elements before it (zeros; @high needs no room, a block
    may overhang the array's end)."""

    def __init__(self, block_size, padding=(0, 0)):
        self.block_size = int(block_size)
        self.padding = tuple(int(p) for p in padding)


class Squeezed:
    """pl.Squeezed(): a block dimension of 1, squeezed away (None)."""
    block_size = None


class Unblocked:
    """pl.Unblocked(padding=None), older JAX's indexing_mode: every
    dimension pl.Element, padding one (low, high) pair per dimension."""

    def __init__(self, padding=None):
        self.padding = padding


class BoundedSlice:
    """pl.BoundedSlice(n): an emit_pipeline block dimension whose index map
    gives pl.ds(start, size), size at most n (a Python int or a scalar-core
    value): the block's buffer has n rows there, the first size of them
    copied in and written back."""

    def __init__(self, block_size):
        self.block_size = int(block_size)

    def __repr__(self):
        return "pl.BoundedSlice(%d)" % self.block_size


blocked = Blocked()
unblocked = Unblocked()
squeezed = Squeezed()	# pl.squeezed, newer JAX's name for a squeezed block dimension


def _block_dim(d, n, mode):
    """(size or None if squeezed, indexed by element, low padding)"""
    if isinstance(mode, Unblocked) and isinstance(n, int):
        pads = mode.padding
        return n, True, int(pads[d][0]) if pads else 0
    if isinstance(n, Element):
        if n.padding[0] < 0 or n.padding[1] < 0:
            raise ValueError("pl.Element(%d, padding=%r): padding must be non-negative"
                             % (n.block_size, n.padding))
        return n.block_size, True, n.padding[0]
    if n is None or isinstance(n, Squeezed):
        return None, False, 0
    if isinstance(n, BoundedSlice):
        raise TypeError("%r in a pallas_call BlockSpec: a bounded slice dimension is "
                        "supported inside pltpu.emit_pipeline only" % (n,))
    return int(n.block_size if isinstance(n, Blocked) else n), False, 0


class BlockSpec:
    def __init__(self, block_shape=None, index_map=None, *, memory_space=None,
                 pipeline_mode=None, indexing_mode=None):
        if callable(block_shape) and not callable(index_map):
            # older JAX's order, BlockSpec(index_map, block_shape), as the
            # flash attention guide still writes it
            block_shape, index_map = index_map, block_shape
        self.block_shape = block_shape
        self.index_map = index_map
        self.memory_space = memory_space
        self.pipeline_mode = pipeline_mode
        self.indexing_mode = indexing_mode


class GridSpec:
    def __init__(self, grid=(), in_specs=None, out_specs=None, scratch_shapes=(),
                 num_scalar_prefetch=0):
        self.grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
        self.in_specs = in_specs
        self.out_specs = out_specs
        # a dict: the kernel takes the scratch refs by parameter name
        self.scratch_shapes = scratch_shapes if isinstance(scratch_shapes, dict) else \
            tuple(scratch_shapes or ())
        self.num_scalar_prefetch = num_scalar_prefetch


# The grid indices and extents of the emit_pipeline steps being traced,
# innermost last: there pl.program_id and pl.num_programs are the pipeline's.
_pipeline_env = []


def program_id(axis):
    if _pipeline_env:
        return _pipeline_env[-1][0][axis]
    # under a batched vmap (_batch) the grid has the batch in front
    return scalar("pl.program_id(%d)" % (axis + (_batch.offset[0] if axis >= 0 else 0)),
                  _trace.int32)


def num_programs(axis):
    """The grid's extent: a Python int, the grid being static, as JAX gives
    for a static grid (inside emit_pipeline, the pipeline's)."""
    if _pipeline_env:
        return _pipeline_env[-1][1][axis]
    off = _batch.offset[0] if axis >= 0 else 0
    if _grids:
        return int(_grids[-1][axis + off])
    return scalar("pl.num_programs(%d)" % (axis + off), _trace.int32)


def ds(start, size=None, stride=1):
    """pl.ds(start, size, stride=1); pl.ds(size) is pl.ds(0, size);
    pl.ds(None) is the whole dimension, slice(None), as JAX's."""
    if start is None and size is None:
        return slice(None)
    if size is None:
        start, size = 0, start
    return Slice(start, size, stride)


dslice = ds


def load(ref, idx=..., *, mask=None, other=None):
    """pl.load(ref, idx, mask=, other=): ref[idx]; with a mask, other (by
    default 0: a TPU leaves them undefined) where the mask is False."""
    if isinstance(ref, Ref) and ref.space == "any" and ref.key_batch is None:
        raise _trace.hbm_reference("load_p", ref)
    v = ref[idx]
    if mask is None:
        return v
    return jnp.where(mask, v, 0 if other is None else other)


def store(ref, idx, val, *, mask=None):
    """pl.store(ref, idx, val, mask=): ref[idx] = val; with a mask, the
    elements where it is False keep what they hold (ref[idx] read and
    stored back: where(mask, val, ref[idx]))."""
    if mask is None:
        ref[idx] = val
    else:
        ref[idx] = jnp.where(mask, val, ref[idx])


def when(cond):
    """@pl.when(cond): the decorated function's statements run where cond holds.
    The function is called once, at once, while tracing."""
    if isinstance(cond, (bool, int, _np.bool_, _np.integer)):
        # a Python condition (a static pl.num_programs, an emit_pipeline
        # step's index): decided now, as JAX's pl.when does
        return lambda fn: (fn() if cond else None, fn)[1]
    rec = _trace.recorder()
    text = _trace.when_cond(cond)

    def deco(fn):
        rec.conds.append(text)
        k = len(rec.conds) - 1
        if isinstance(cond, Value) and cond.reads:
            rec.cond_values[k] = cond
        try:
            fn()
        finally:
            rec.conds.pop()
            rec.cond_values.pop(k, None)
        return fn
    return deco


def multiple_of(x, n):
    """pl.multiple_of: a hint to Mosaic that x is a multiple of n; the
    value itself."""
    return x


def max_contiguous(x, values):
    """pl.max_contiguous: a hint that runs of @values elements of x are
    contiguous; the value itself."""
    return x


def reciprocal(x, *, approx=False):
    """pl.reciprocal: 1 / x; approx=True lets a TPU use its approximate
    reciprocal, which here is the exact one (within its error bound)."""
    del approx
    return 1.0 / x


def cdiv(a, b):
    """pl.cdiv: a / b rounded up."""
    return (a + b - 1) // b


def align_to(x, alignment):
    """pl.align_to: @x rounded up to a multiple of @alignment."""
    return cdiv(x, alignment) * alignment


def loop(lower, upper, *, step=1, unroll=None):
    """@pl.loop(lower, upper, step=...): body(i) for i in range(lower,
    upper, step), as lax.fori_loop: unrolled while tracing for static
    bounds of at most lax.UNROLL_MAX_TRIPS trips (or unroll=True), else a
    device loop over the trips, i = lower + trip * step (a positive step
    with traced bounds)."""
    step = lax._static_bound(step, "step", "pl.loop")
    if step <= 0:
        raise trace_error("pl.loop: step %d: it must be positive" % step)
    traced = isinstance(lower, Value) or isinstance(upper, Value)
    if not traced:
        lo = lax._static_bound(lower, "lower", "pl.loop")
        hi = lax._static_bound(upper, "upper", "pl.loop")
        trips = len(range(lo, hi, step))
        if trips <= lax.UNROLL_MAX_TRIPS or unroll is True:
            def deco(body):
                for i in range(lo, hi, step):
                    body(i)
                return body
            return deco
    else:
        trips = (upper - lower + (step - 1)) // step if step > 1 else upper - lower

    def device(body):
        what = "pl.loop"
        if step == 1:
            lax._device_fori(lower, upper, lambda i, _: body(i), None, what)
        else:
            lax._device_fori(0, trips, lambda i, _: body(i), None, what,
                             index=lambda t: lower + t * step)
        return body
    return device


def dot(a, b, trans_a=False, trans_b=False, allow_tf32=None, precision=None):
    """pl.dot: a @ b with either operand read transposed, in float32 as
    Pallas's preferred_element_type (int32 for integer operands, as
    Pallas's: float32 if the lhs is a float, else int32)."""
    a = a.T if trans_a else a
    b = b.T if trans_b else b
    d = _trace.dt_of(a)
    integer = d is not None and d.name in ("int8", "uint8", "int16", "uint16", "int32", "uint32")
    return jnp.dot(a, b, preferred_element_type=_trace.int32 if integer else _trace.float32)


def run_scoped(f, *types, **named_types):
    """pl.run_scoped(f, *types): f called at once with a scratch ref per
    type (pltpu.VMEM(shape, dtype), pltpu.SMEM(...), pltpu.SemaphoreType.DMA
    ...), named after f's parameters (keywords: named by the keyword), live
    until f returns; f's result is run_scoped's."""
    rec = _trace.recorder()
    sig = inspect.signature(f).parameters.values()
    params = [p.name for p in sig if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    rest = [p.name for p in sig if p.kind == p.VAR_POSITIONAL]
    if rest and len(params) < len(types):	# def body(*bufs): bufs_0, bufs_1, ...
        params += ["%s_%d" % (rest[0], k) for k in range(len(types) - len(params))]
    if len(params) < len(types):
        raise trace_error("pl.run_scoped: %s takes %d refs, %d types given"
                          % (getattr(f, "__name__", "the body"), len(params), len(types)))
    return _scoped(f, params, types, named_types, rec)


def with_scoped(*types, **named_types):
    """@pl.with_scoped(*types, **named_types): the decorated body, called
    with its own arguments, gets scratch refs after them (the types'
    refs named after its parameters that follow, the keywords' by the
    keyword), as pl.run_scoped allocates them."""
    def deco(f):
        sig = inspect.signature(f).parameters.values()
        params = [p.name for p in sig
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

        def wrapper(*args, **kwargs):
            names = params[len(args):len(args) + len(types)]
            if len(names) < len(types):
                raise trace_error("pl.with_scoped: %s takes %d parameters after its %d "
                                  "arguments, %d scratch types given"
                                  % (getattr(f, "__name__", "the body"), len(names),
                                     len(args), len(types)))
            return _scoped(lambda *refs, **nrefs: f(*args, *refs, **nrefs, **kwargs),
                           names, types, named_types, _trace.recorder())
        wrapper.__name__ = getattr(f, "__name__", "body")
        return wrapper
    return deco


class _HbmScoped(TraceError, ValueError):
    """pl.run_scoped of pltpu.HBM(...): a TraceError and, as JAX raises it, a
    ValueError."""


def _scoped(f, params, types, named_types, rec):
    from .. import _pytree
    scoped = list(zip(params, types)) + list(named_types.items())
    refs = []		# each name's ref, or tree of refs (a tree of types)
    opened = []
    for name, t in scoped:
        leaves, tree = _pytree.flatten(t)
        made = []
        for k, leaf in enumerate(leaves):
            code = getattr(leaf, "_space_code", None)
            if code is None:
                raise trace_error("pl.run_scoped: '%s' must be pltpu.VMEM(...), pltpu.SMEM(...) "
                                  "or a pltpu.SemaphoreType (or a tree of them), not %r"
                                  % (name, leaf))
            if code in (2, 6):
                # pltpu.HBM(...): Mosaic allocates no HBM in a kernel (JAX's
                # interpreter's error; its allow_hbm_allocation_in_run_scoped
                # has nothing to run on here), nor host memory
                raise _HbmScoped("Cannot allocate %s in `run_scoped`. ('%s': %r)"
                                 % ("HBM" if code == 2 else "HOST", name, leaf))
            n = name if tree.kind == "leaf" else "%s_%d" % (name, k)
            ref, kref = _scratch_ref(n, leaf)
            rec.open_scope(ref, code, as_dtype(leaf.dtype).code,
                           "@pl.run_scoped(%s=%r)" % (n, leaf),
                           getattr(leaf, "_device_shape", None))
            if hasattr(leaf, "_role"):	# a pltpu.BufferedRef: its spec and role
                ref._spec, ref._role = leaf._spec, leaf._role
            ref.key_batch = getattr(leaf, "_key_batch", None)	# scratch of Pallas keys
            if hasattr(leaf, "_on_alloc"):	# an emit_pipeline allocation's buffer
                leaf._on_alloc(ref)
            made.append(kref)
            opened.append(ref)
        refs.append(made[0] if tree.kind == "leaf" else _pytree.unflatten(tree, made))
    try:
        out = _settle(scoped_body(rec, lambda: f(*refs[:len(types)],
                                                 **dict(zip(named_types, refs[len(types):])))),
                      {r.name for r in opened}, rec)
    finally:
        for ref in reversed(opened):
            rec.close_scope(ref.name)
    return out


def scoped_body(rec, f):
    """f(): a body whose jax.empty_ref scratch is freed as it returns (a
    pl.run_scoped body, an emit_pipeline step's)."""
    bodies = rec.__dict__.setdefault("scoped_bodies", [])
    bodies.append(([], len(rec.conds), len(rec.loops)))
    try:
        return f()
    finally:
        for name in reversed(bodies.pop()[0]):
            rec.close_scope(name)


def _settle(out, names, rec):
    """Values run_scoped returns that read its scratch, computed before the
    scratch goes: bound to locals (a scalar into a (1, 1) array)."""
    if isinstance(out, (tuple, list)):
        return type(out)(_settle(e, names, rec) for e in out)
    if isinstance(out, Value) and out.reads & names:
        if out.scalar:
            out = jnp.full((1, 1), out)
        rec.bind(out)
    return out


_NAMES = "ijkl"


def _fn_where(fn):
    """'NAME at FILE:LINE' of a function, as JAX's errors name it (a
    wrapper's: the wrapped function's)."""
    fn = getattr(fn, "__wrapped__", fn)
    code = getattr(fn, "__code__", None)
    name = getattr(fn, "__name__", "?")
    if code is None:
        return name
    return "%s at %s:%d" % (name, code.co_filename, code.co_firstlineno)


def _index_map_ref(p):
    """A scalar-prefetch operand as index maps see it: a read-only SMEM ref
    of its shape (from the kernel's ref; shape () for a bare name)."""
    if not isinstance(p, Ref):
        return Ref(p, (), "int32", space="smem", writable=False)
    r = Ref(p.name, p.shape, "int32", space="smem", writable=False)
    r.flat_nd = p.flat_nd
    return r


def _index_map_text(fn, grid_rank, prefetch, what, label=None, nd=None, fold=None):
    if fn is None:
        return None
    names = list(_NAMES[:grid_rank])
    # (names, tree): the scalar-prefetch refs reach the map in the
    # arguments' trees, as the kernel gets them
    prefetch, tree = prefetch if isinstance(prefetch, tuple) else (prefetch, None)
    refs = [_index_map_ref(p) for p in prefetch]
    prefetch = [r.name for r in refs]
    # grid=() is one step of a 1-D grid on the device; the map takes no index
    called = names if not _grids or _grids[-1] != (1,) or _grid_given[-1:] != [()] else []
    pre = refs if tree is None else _parts(tree, refs)
    # grid indices are int32, as program ids are (lax.div and lax.rem ask)
    try:
        res = _print.in_index_map(fn, *[scalar(n, _trace.int32) for n in called], *pre)
    except TypeError:
        if called == names:
            raise
        # (a map written for the 1-step grid)
        res = _print.in_index_map(fn, *[scalar(n, _trace.int32) for n in names], *pre)
    if not isinstance(res, (tuple, list)):
        res = (res,)
    if nd is not None and len(res) != nd:
        raise ValueError("Index map function %s for %s must return %d values to match the "
                         "block shape's %d dimensions. Currently returning %d values."
                         % (_fn_where(fn), label or what, nd, nd, len(res)))
    for k, e in enumerate(res):
        if isinstance(e, float) or isinstance(e, Value) and _trace.is_float_dt(e.dt):
            raise ValueError("Index map function %s for %s must return integer scalars. "
                             "Output[%d] has type %s."
                             % (_fn_where(fn), label or what, k,
                                "float" if isinstance(e, float) else e.dt.name))
    if fold is not None:	# rank 5 and 6: the folded dimensions' block indices
        res = fold(res)
    body = ", ".join(_index_map_fmt(e) for e in res)
    return "%s -> %s" % (", ".join(names + list(prefetch)), body)


def _index_map_fmt(e):
    """@e in the index-map language, whose logic is 'and', 'or' and 'not':
    & and | of compares (lax.div's sign test) become those."""
    if not isinstance(e, Value) or e.kind not in ("op", "unop"):
        return _trace._fmt(e)
    if e.kind == "unop":
        a = e.args[0]
        if e.text == "~" and getattr(a, "dt", None) == _trace.bool_:
            return "(not %s)" % _index_map_fmt(a)
        return "(%s%s)" % (e.text, _index_map_fmt(a))
    a, b = e.args
    op = e.text
    if op in ("&", "|") and all(getattr(x, "dt", None) == _trace.bool_ for x in (a, b)):
        op = "and" if op == "&" else "or"
    return "(%s %s %s)" % (_index_map_fmt(a), op, _index_map_fmt(b))


def _np_dtype(d):
    return _np.dtype(as_dtype(d).np_name)


def _revisit_code(mode, output, what):
    """pl.Buffered(n, revisit=ANY): 1 for an output; JAX's lowering refuses
    it with double buffering, of inputs too, and ignores it otherwise."""
    if mode.revisit != RevisitMode.ANY:
        return 0
    if mode.buffer_count > 1:
        raise trace_error("'%s': pl.Buffered(%d, revisit=pl.RevisitMode.ANY): RevisitMode.ANY "
                          "is not supported with double buffering (give pl.Buffered(1))"
                          % (what, mode.buffer_count))
    return 1 if output else 0


def _whole_vmem(spec, shape):
    """Whether @spec puts the whole array in VMEM: no spec, or one of a
    memory space alone that is VMEM (the default block: the whole array)."""
    if spec is None:
        return True
    if getattr(spec, "block_shape", None) is not None or \
            getattr(spec, "pipeline_mode", None) is not None or \
            getattr(spec, "index_map", None) is not None:
        return False
    space = getattr(spec, "memory_space", None)
    return _SPACES[getattr(space, "_space", space)] == 0


def _block_spec(spec, shape, grid_rank, prefetch, what, output=False, label=None):
    """(struct tpurt_block_spec, keepalive, the kernel's block shape, the
    device's block shape, the device's array shape): an array of rank 5
    or 6 folded to rank 4 (_fold.fold_block), the kernel's ref still of
    the user's block shape."""
    bs = getattr(spec, "block_shape", None) if spec is not None else None
    if bs is not None and len(bs) != len(shape):
        raise ValueError("Block shape for %s (= %r) must have the same number of dimensions "
                         "as the array shape %r" % (label or what, tuple(bs), tuple(shape)))
    _fold.check_rank(shape, label or what)
    cs = ffi.new("struct tpurt_block_spec *")
    keep = []
    space = getattr(spec, "memory_space", None) if spec is not None else None
    space = getattr(space, "_space", space)
    cs.memory_space = _SPACES[space]
    if spec is not None and spec.pipeline_mode is not None:
        cs.buffer_count = spec.pipeline_mode.buffer_count
        cs.revisit = _revisit_code(spec.pipeline_mode, output, what)
    if output and getattr(spec, "_revisit_any", False):
        # interpret.py's SMEM outputs: read back at each new visit, their
        # buffering the device's own
        cs.revisit = 1
    if cs.memory_space == 2:
        dev = _fold.fold_ref_shape(shape, label or what)
        cs.rank = len(dev)
        for d, n in enumerate(dev):
            cs.shape[d] = n
        return cs, keep, tuple(shape), tuple(dev), tuple(dev)
    bshape = spec.block_shape if spec is not None and spec.block_shape is not None \
        else tuple(shape)
    mode = getattr(spec, "indexing_mode", None)
    dims = [_block_dim(d, n, mode) for d, n in enumerate(bshape)]
    view = tuple(n for n, _, _ in dims if n is not None)	# the kernel's: squeezed
    dev_shape, fold = tuple(shape), None
    if len(shape) > _fold.DEVICE_RANK:
        dev_shape, dims, fold = _fold.fold_block(label or what, shape, dims)
    cs.rank = len(dims)
    for d, (n, element, low) in enumerate(dims):
        cs.shape[d] = -1 if n is None else n
        cs.element_dims |= element << d
        cs.element_pad[d] = low
    if spec is not None and spec.index_map is not None:
        text = _index_map_text(spec.index_map, grid_rank, prefetch, what, label, len(bshape),
                               fold)
    else:
        text = "%s -> %s" % (", ".join(_NAMES[:grid_rank]), ", ".join("0" * len(dims)))
    c = ffi.new("char[]", text.encode())
    keep.append(c)
    cs.index_map = c
    return cs, keep, view, tuple(n for n, _, _ in dims if n is not None), dev_shape


def _scratch_ref(n, s):
    """(the device's ref, the kernel's) of scratch type @s named @n: one
    of rank 5 or 6 folded onto the device's rank (_fold), the kernel's ref
    of its own shape."""
    space = {1: "smem", 3: "sem", 4: "sem"}.get(s._space_code, "vmem")
    if getattr(s, "_device_shape", None) is not None or len(s.shape) <= _fold.DEVICE_RANK:
        ref = Ref(n, s.shape, s.dtype, space=space)
        return ref, ref
    ref = Ref(n, _fold.fold_ref_shape(s.shape, "scratch '%s'" % n), s.dtype, space=space)
    return ref, _folded_ref(ref, s.shape)


def _folded_ref(ref, shape):
    """The kernel's ref of an operand or scratch of rank 5 or 6: device
    ref @ref (rank 4 at most) seen with the user's block shape."""
    view = _trace.ReshapedRef(ref, shape)
    view.folded = True
    for attr in ("narrow", "key_batch", "fry_batch"):
        setattr(view, attr, getattr(ref, attr))
    return view


def _kname(kernel):
    return getattr(kernel, "__name__", None) or getattr(getattr(kernel, "func", None),
                                                        "__name__", "kernel")


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


class _NoOut:
    """pallas_call(out_shape=None)'s hidden output."""
    shape = (1, 1)
    dtype = "int32"


def _leaf_names(param, treedef, taken):
    """The flat refs' names of one kernel parameter's tree: the parameter's
    own for a single array, else param_0, param_1_2, ... by path (a dict
    key that is an identifier names its part), unique among @taken."""
    if treedef.kind == "leaf":
        paths = [""]
    else:
        paths = []
        for p in _pytree.leaf_paths(treedef):
            parts = [k.strip("[]'\"") for k in p.replace("][", "]|[").split("|")]
            parts = [k if k.isidentifier() or k.isdigit() else "k" for k in parts]
            paths.append("_" + "_".join(parts))
    out = []
    for p in paths:
        n, k = param + p, 1
        while n in taken:
            n, k = "%s%s_%d" % (param, p, k), k + 1
        taken.add(n)
        out.append(n)
    return out


def _parts(treedef, leaves):
    """A tuple tree's elements, each rebuilt from its share of @leaves."""
    out, at = [], 0
    for c in treedef.children:
        out.append(_pytree.unflatten(c, leaves[at:at + c.num_leaves]))
        at += c.num_leaves
    return out


def _top(tree):
    """A call argument list's elements: a tuple or list's, else itself alone."""
    return list(tree) if isinstance(tree, (list, tuple)) else [tree]


def pallas_call(kernel, out_shape, *, grid_spec=None, grid=(), in_specs=None,
                out_specs=None, scratch_shapes=(), compiler_params=None,
                input_output_aliases=None, interpret=False, name=None, debug=False,
                cost_estimate=None, metadata=None):
    """pl.pallas_call: returns a function of NumPy arrays giving NumPy arrays.
    Refs made outside kernels (jax.new_ref, _state), passed as arguments
    or closed over by the kernel, are extra operands the call updates.
    metadata (str keys and values, for the compiler's profiles) is checked
    and kept nowhere."""
    check_cost_estimate(cost_estimate, "pallas_call")
    if metadata is not None and (not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        raise TypeError("pallas_call: metadata must be a dict of str to str, not %r"
                        % (metadata,))
    kw = dict(grid_spec=grid_spec, grid=grid, in_specs=in_specs, out_specs=out_specs,
              scratch_shapes=scratch_shapes, compiler_params=compiler_params,
              input_output_aliases=input_output_aliases, interpret=interpret, name=name,
              debug=debug, cost_estimate=cost_estimate)
    plain = _pallas_call(kernel, out_shape, **kw)

    def run(*args):
        if _ad.top_tape(args) is not None:
            raise TypeError("jax.vjp / jax.grad through pl.pallas_call: a kernel is not "
                            "differentiated here; give its backward with jax.custom_vjp "
                            "around the call (as JAX's flash attention does)")
        if _zero_d.applies(args, out_shape, grid_spec, in_specs, out_specs):
            return _zero_d.call(pallas_call, kernel, out_shape, dict(kw, metadata=metadata),
                                args)
        # pltpu.InterpretParams (or force_tpu_interpret_mode): interpret.py
        params = _interpret.params_of(interpret)
        if params is not None:
            _interpret.statements[0] = None
            try:
                return _interpret.call(pallas_call, kernel, out_shape,
                                       dict(kw, metadata=metadata), args, params)
            finally:
                run.statements = _interpret.statements[0]
        # host bfloat16 arrays go to the device as their bits; bf16 outputs
        # (uint16 bits from the device) come back as host bf16 arrays
        return _bf16_results(run_bits(*_bf16_operands(args)))

    def run_bits(*args):
        from .. import _state
        from . import _checkify
        if _checkify.active() and out_shape is not None and \
                not getattr(kernel, "_checkified", False):
            # under checkify.checkify or pl.enable_debug_checks: the
            # kernel's checks get an output
            return _checkify.checkify_call(kernel, out_shape, kw, args, pallas_call)
        if _has_semaphores(out_shape, args):
            call = _semaphore_call(kernel, out_shape, kw, args)
            try:
                return call()
            finally:
                run.statements = call.statements
        captured = _state.find(kernel)
        if not getattr(kernel, "_pl_kernel", False):
            _refuse_captured_spaces(captured)
        if not captured and not any(isinstance(a, _state.HostRef) for a in args):
            try:
                return plain(*args)
            finally:
                run.statements = plain.statements
        call = _stateful_call(kernel, out_shape, kw, args, captured)
        try:
            return call()
        finally:
            run.statements = call.statements
    run.statements = None
    run._batchable = _batch.Batchable(kernel, out_shape, dict(kw, metadata=metadata),
                                      pallas_call)
    return run


def _key_spec(spec, words=(1, 2)):
    """A BlockSpec of keys (their batch dimensions) as one of their words:
    the key's @words whole (a Pallas key's (1, 2), a threefry key's (2,))."""
    if spec is None or getattr(spec, "block_shape", None) is None:
        return spec
    im = spec.index_map

    def index_map(*a):
        r = im(*a) if im is not None else (0,) * len(spec.block_shape)
        return (tuple(r) if isinstance(r, (tuple, list)) else (r,)) + (0,) * len(words)
    index_map.__name__ = getattr(im, "__name__", "index_map")
    return BlockSpec(tuple(spec.block_shape) + tuple(words), index_map,
                     memory_space=spec.memory_space, pipeline_mode=spec.pipeline_mode)


def _bf16_operands(args):
    from ..numpy import BF16Array
    leaves, tree = _pytree.flatten(tuple(args))
    if not any(isinstance(x, BF16Array) for x in leaves):
        return args
    return _pytree.unflatten(tree, [x.bits() if isinstance(x, BF16Array) else x
                                    for x in leaves])


def _bf16_results(res):
    """The device's bf16 outputs (plain uint16 bits: uint16 outputs come
    as numpy.UInt16Array) as host bfloat16 arrays."""
    from ..numpy import BF16Array, HostArray
    if res is None:
        return res
    leaves, tree = _pytree.flatten(res)
    if not any(type(x) is _np.ndarray for x in leaves):
        return res
    # the others as jnp's host arrays, as JAX's results are jax.Arrays:
    # out.astype(jnp.bfloat16) and out.at[i].set(v) work on them
    return _pytree.unflatten(tree, [(BF16Array.from_bits(x) if x.dtype == _np.uint16 else
                                     x.view(HostArray)) if type(x) is _np.ndarray else x
                                    for x in leaves])


class SemaphoreValue(_np.ndarray):
    """A semaphore array a pallas_call returned (an out_shape leaf of
    pltpu.SemaphoreType.DMA(()) or REGULAR): its counts, as int32, and its
    kind (_code: 3 DMA, 4 REGULAR). Passed to another pallas_call with
    BlockSpec(memory_space=pltpu.SEMAPHORE), the kernel gets a semaphore
    holding those counts, so a copy started in one call is waited for in
    the next."""

    def __array_finalize__(self, obj):
        self._code = getattr(obj, "_code", 3)


def _is_sem_type(x):
    return getattr(x, "_space_code", None) in (3, 4) and hasattr(x, "_device_shape")


def _has_semaphores(out_shape, args):
    outs = _pytree.flatten(out_shape)[0] if out_shape is not None else []
    return any(_is_sem_type(o) for o in outs) or \
        any(isinstance(a, SemaphoreValue) for a in args)


def _sem_elements(sem):
    """A semaphore ref's elements, each a scalar semaphore."""
    n = 1
    for d in sem.shape:
        n *= d
    if not sem.shape:
        return [sem]
    return [sem.at[tuple(int(i) for i in _np.unravel_index(e, sem.shape))] for e in range(n)]


def _at_grid_step(grid, which, f):
    """f() traced to run at the grid's first (or "last") step only."""
    cond = None
    for d, g in enumerate(grid):
        c = program_id(d) == (0 if which == "first" else g - 1)
        cond = c if cond is None else cond & c
    if cond is None or all(g == 1 for g in grid):
        f()
    else:
        when(cond)(f)


def _semaphore_call(kernel, out_shape, kw, args, plain=False):
    """A pallas_call with semaphore outputs (out_shape leaves of
    pltpu.SemaphoreType) or semaphore inputs (SemaphoreValue arguments):
    each is a hidden int32 SMEM operand of its counts, the kernel gets a
    scratch semaphore in its place, signalled by the input's counts at
    the first step; an output's counts are read at the last step into
    its SMEM output and waited off, so the job ends with its semaphores
    at zero, as the device requires."""
    from .tpu import SMEM, SemaphoreType, semaphore_read, semaphore_signal, semaphore_wait
    from .. import ShapeDtypeStruct
    gs = kw["grid_spec"] or GridSpec(kw["grid"], kw["in_specs"], kw["out_specs"],
                                     kw["scratch_shapes"])
    nsp = gs.num_scalar_prefetch
    single = not isinstance(out_shape, (list, tuple))
    outs = [] if out_shape is None else [out_shape] if single else list(out_shape)
    for o in outs:
        if not _is_sem_type(o) and _pytree.flatten(o)[1].kind != "leaf" and \
                any(_is_sem_type(x) for x in _pytree.flatten(o)[0]):
            raise TypeError("pallas_call: semaphore outputs must be top-level entries of "
                            "out_shape")
    ospecs = gs.out_specs
    if ospecs is not None:
        ospecs = [ospecs] if single or not isinstance(ospecs, (list, tuple)) else list(ospecs)
    ispecs = gs.in_specs
    nin = len(args) - nsp
    if ispecs is not None:
        ispecs = list(ispecs) if isinstance(ispecs, (list, tuple)) else [ispecs]
    for a in args[:nsp]:
        if isinstance(a, SemaphoreValue):
            raise TypeError("pallas_call: a semaphore as a scalar prefetch argument")
    sem_in = [k for k, a in enumerate(args) if isinstance(a, SemaphoreValue)]
    sem_out = [j for j, o in enumerate(outs) if _is_sem_type(o)]
    new_args = list(args)
    new_ispecs = list(ispecs) if ispecs is not None else [BlockSpec()] * nin
    extra = []
    for k in sem_in:
        a = args[k]
        kind = SemaphoreType.DMA if a._code == 3 else SemaphoreType.REGULAR
        extra.append(kind(a.shape))
        new_args[k] = _np.ascontiguousarray(_np.asarray(a, _np.int32).reshape(-1))
        new_ispecs[k - nsp] = BlockSpec(memory_space=SMEM)
    new_outs = list(outs)
    new_ospecs = list(ospecs) if ospecs is not None else [BlockSpec()] * len(outs)
    for j in sem_out:
        o = outs[j]
        extra.append(o)
        new_outs[j] = ShapeDtypeStruct(o._device_shape, _trace.int32)
        new_ospecs[j] = BlockSpec(memory_space=SMEM)
    # the kernel's parameters, the extra semaphores' after them
    sig = inspect.signature(kernel).parameters.values()
    params = [p.name for p in sig if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    scratch = gs.scratch_shapes
    nuser = len(args) + (1 if out_shape is None else len(outs)) + len(scratch)
    params += ["refs_%d" % k for k in range(len(params), nuser)]
    params = params[:nuser]
    taken = set(params)
    extra_names = []
    for k in range(len(extra)):
        n = "_sem%d" % k
        while n in taken:
            n += "_"
        taken.add(n)
        extra_names.append(n)
    if isinstance(scratch, dict):
        new_scratch = dict(scratch)
        new_scratch.update(zip(extra_names, extra))
    else:
        new_scratch = tuple(scratch) + tuple(extra)
    grid = tuple(gs.grid or ())
    nargs = len(args)

    def k2(*refs):
        refs = list(refs)
        sems = refs[len(refs) - len(extra):]
        refs = refs[:len(refs) - len(extra)]
        ins = [(refs[k], sems[n]) for n, k in enumerate(sem_in)]
        out_refs = [(refs[nargs + j], sems[len(sem_in) + n]) for n, j in enumerate(sem_out)]

        def signal():
            for smem, sem in ins:
                for e, s in enumerate(_sem_elements(sem)):
                    semaphore_signal(s, smem[e])
        _at_grid_step(grid, "first", signal)
        for n, k in enumerate(sem_in):
            refs[k] = sems[n]
        for n, j in enumerate(sem_out):
            refs[nargs + j] = sems[len(sem_in) + n]
        kernel(*refs)

        def drain():
            for smem, sem in out_refs:
                for e, s in enumerate(_sem_elements(sem)):
                    smem[e] = semaphore_read(s)
                    semaphore_wait(s, smem[e])
        _at_grid_step(grid, "last", drain)
    k2.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
         for n in params + extra_names])
    k2.__name__ = getattr(kernel, "__name__", "kernel")
    inner = dict(kw)
    # out_specs in out_shape's own structure: one spec for one output (a
    # list would be a tree of specs to the stateful path below)
    new_ospecs = new_ospecs[0] if single and len(new_ospecs) == 1 else new_ospecs
    if kw["grid_spec"] is not None:
        inner.update(grid_spec=GridSpec(gs.grid, new_ispecs, new_ospecs, new_scratch, nsp))
    else:
        inner.update(in_specs=new_ispecs, out_specs=new_ospecs, scratch_shapes=new_scratch)
    new_shape = None if out_shape is None else new_outs[0] if single else tuple(new_outs)
    # @plain: the refs' path's inner call (its operands bits, its HostRefs bound)
    call = (_pallas_call if plain else pallas_call)(k2, new_shape, **inner)

    def go():
        try:
            res = call(*new_args)
        finally:
            go.statements = call.statements
        if out_shape is None:
            return res
        res = [res] if single else list(res)
        for j in sem_out:
            v = _np.asarray(res[j], _np.int32).reshape(outs[j].shape).view(SemaphoreValue)
            v._code = outs[j]._space_code
            res[j] = v
        if single:
            return res[0]
        return tuple(res)
    go.statements = None
    return go


def _move_counts(src, dst):
    """@src's counts signalled on @dst and waited off @src, element by
    element (semaphore refs of one shape)."""
    from .tpu import semaphore_read, semaphore_signal, semaphore_wait
    for a, b in zip(_sem_elements(src), _sem_elements(dst)):
        n = semaphore_read(a)
        semaphore_signal(b, n)
        semaphore_wait(a, n)


def _refuse_captured_spaces(captured):
    """As JAX's discharge of pallas_call: a kernel may close over refs in
    HBM (the default) only; pl.kernel's may close over VMEM and SMEM ones."""
    from .tpu import HBM
    for r in captured:
        ms = object.__getattribute__(r, "_memory_space")
        if ms is not None and ms is not ANY and ms is not HBM:
            raise NotImplementedError(
                "pallas_call does not support closing over Refs in memory space %s; "
                "pass the ref as an operand, or use pl.kernel" % (ms,))


def _stateful_call(kernel, out_shape, kw, args, captured):
    """A pallas_call whose arguments or kernel closure hold HostRefs
    (jax.new_ref): each is an input aliased to an output, after the
    call's own; the kernel sees the output's ref in its place (a VMEM one
    copied from the input's block first); the refs get the outputs."""
    from .. import _state
    HostRef = _state.HostRef
    gs = kw["grid_spec"] or GridSpec(kw["grid"], kw["in_specs"], kw["out_specs"],
                                     kw["scratch_shapes"])
    nsp = gs.num_scalar_prefetch
    for a in args[:nsp]:
        if isinstance(a, HostRef):
            raise TypeError("pallas_call: a jax.new_ref ref as a scalar prefetch argument "
                            "is not supported; pass its array (jax.freeze)")
    states = [a for a in args[nsp:] if isinstance(a, HostRef)]
    if len({id(a) for a in states}) != len(states):
        raise NotImplementedError("Cannot pass the same ref into a mpmd map multiple times "
                                  "(a kernel's operands are distinct buffers)")
    for c in captured:
        if all(c is not x for x in states):
            states.append(c)
    arg_is_ref = [isinstance(a, HostRef) for a in args]
    plain_args = [a for a, r in zip(args, arg_is_ref) if not r]
    nin = len(args) - nsp
    # the inputs' specs: the user's for the arrays, one for each ref
    ispecs = gs.in_specs
    if ispecs is None:
        ispecs = [BlockSpec()] * nin
    elif not isinstance(ispecs, (list, tuple)):
        ispecs = [ispecs]
    ispecs = list(ispecs)
    if len(ispecs) != nin:
        raise TypeError("pallas_call: %d in_specs for %d inputs" % (len(ispecs), nin))

    def state_spec(r):
        ms = object.__getattribute__(r, "_memory_space")
        return BlockSpec(memory_space=ms if ms is not None else ANY)
    new_ispecs = [sp for sp, r in zip(ispecs, arg_is_ref[nsp:]) if not r] + \
        [state_spec(r) for r in states]
    # the outputs: the user's, then one per ref
    if out_shape is None or (isinstance(out_shape, (list, tuple)) and not out_shape):
        user_outs = []
    elif isinstance(out_shape, (list, tuple)) and not hasattr(type(out_shape), "_fields"):
        user_outs = list(out_shape)
    else:
        user_outs = [out_shape]
    ospecs = gs.out_specs
    if ospecs is None:
        ospecs = [_pytree.unflatten(_pytree.flatten(o)[1],
                                    [BlockSpec()] * _pytree.flatten(o)[1].num_leaves)
                  for o in user_outs]
    elif not isinstance(ospecs, (list, tuple)) or len(user_outs) == 1 and \
            not isinstance(out_shape, (list, tuple)):
        ospecs = [ospecs]
    ospecs = list(ospecs)
    from .. import ShapeDtypeStruct
    from .tpu import SemaphoreType

    def is_sem(r):
        return isinstance(object.__getattribute__(r, "_value"), SemaphoreValue)

    def state_out(r):
        if is_sem(r):	# pl.empty_ref_like of a semaphore: a semaphore output
            v = object.__getattribute__(r, "_value")
            return (SemaphoreType.DMA if v._code == 3 else SemaphoreType.REGULAR)(v.shape)
        # a ref of Pallas keys is its int32 words here (the shape of its array)
        return ShapeDtypeStruct(r.shape, _trace.int32 if r.__dict__.get("_pallas_keys")
                                else r.dtype)
    new_outs = user_outs + [state_out(r) for r in states]
    new_ospecs = ospecs + [state_spec(r) for r in states]
    # flat indices: the aliases of the user's inputs (refs taken out)
    leaves = [_pytree.flatten(a)[1].num_leaves if not r else 1
              for a, r in zip(args, arg_is_ref)]
    new_flat, at = {}, 0
    old = 0
    for n, r in zip(leaves, arg_is_ref):
        for j in range(n):
            if not r:
                new_flat[old + j] = at + j
        old += n
        at += 0 if r else n
    nflat_in = at
    nflat_out = sum(_pytree.flatten(o)[1].num_leaves for o in user_outs)
    aliases = {}
    for i, o in dict(kw["input_output_aliases"] or {}).items():
        if i not in new_flat:
            raise TypeError("pallas_call: input_output_aliases names input %d, a "
                            "jax.new_ref ref" % i)
        aliases[new_flat[i]] = o
    for k, r in enumerate(states):
        if not is_sem(r):	# a semaphore's counts go in and come out
            aliases[nflat_in + k] = nflat_out + k
    # the kernel's parameters: the user's names where it has them
    sig = inspect.signature(kernel).parameters.values()
    params = [p.name for p in sig if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    none_out = out_shape is None
    scratch = gs.scratch_shapes
    nscratch = len(scratch) if not isinstance(scratch, dict) else len(scratch)
    nuser = len(args) + (1 if none_out else len(user_outs)) + nscratch
    params += ["refs_%d" % k for k in range(len(params), nuser)]
    params = params[:nuser]
    a_names = params[:len(args)]
    o_names = params[len(args):len(args) + (0 if none_out else len(user_outs))]
    s_names = params[len(args) + (1 if none_out else len(user_outs)):]
    taken = set(params)

    def fresh(n):
        k = 0
        m = n
        while m in taken:
            k += 1
            m = "%s_%d" % (n, k)
        taken.add(m)
        return m
    st_out = []
    for r in states:
        pos = next((j for j, a in enumerate(args) if a is r), None)
        st_out.append(a_names[pos] if pos is not None else None)
    st_out = [n if n is not None else fresh("_captured%d" % k) for k, n in enumerate(st_out)]
    for k, n in enumerate(st_out):
        if n in a_names:	# the argument's name goes to the output the kernel sees
            a_names = [x if x != n else fresh(n + "_arg") for x in a_names]
    st_in = [fresh(n + "_in") for n in st_out]
    plain_a_names = [n for n, r in zip(a_names, arg_is_ref) if not r]
    names = plain_a_names + st_in + o_names + st_out + s_names
    nplain = len(plain_args)
    nst = len(states)
    nuo = len(user_outs)

    def k2(*refs):
        ins = list(refs[:nplain])
        sins = refs[nplain:nplain + nst]
        outs = list(refs[nplain + nst:nplain + nst + nuo])
        souts = refs[nplain + nst + nuo:nplain + nst + nuo + nst]
        scr = list(refs[nplain + 2 * nst + nuo:])
        for r, i, o in zip(states, sins, souts):
            ms = object.__getattribute__(r, "_memory_space")
            if getattr(ms, "_code", None) == 0:	# VMEM: the block first
                o[...] = i[...]
            elif getattr(ms, "_code", None) == 1:
                # SMEM: statements store only scalars there; a DMA copies it
                from .tpu import sync_copy
                sync_copy(i, o)
            elif is_sem(r):
                # one semaphore for the kernel: the input's counts moved to
                # the output's at the first step
                _at_grid_step(tuple(gs.grid or ()), "first", lambda i=i, o=o: _move_counts(i, o))
            r._bind(o)
        try:
            it = iter(ins)
            kargs = []
            for a, isref in zip(args, arg_is_ref):
                kargs.append(souts[[x is a for x in states].index(True)] if isref else next(it))
            kargs += [None] if none_out else outs
            kernel(*kargs, *scr)
        finally:
            for r in states:
                r._unbind()
    k2.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    k2.__name__ = getattr(kernel, "__name__", "kernel")
    if isinstance(scratch, dict):
        scratch = {n: scratch[n] for n in s_names}
    inner = dict(kw)
    inner["input_output_aliases"] = aliases
    if kw["grid_spec"] is not None:
        g = GridSpec(gs.grid, new_ispecs, new_ospecs, scratch, gs.num_scalar_prefetch)
        inner.update(grid_spec=g)
    else:
        inner.update(in_specs=new_ispecs, out_specs=new_ospecs, scratch_shapes=scratch)
    if any(is_sem(r) for r in states):
        def call(*a):
            c = _semaphore_call(k2, tuple(new_outs), inner, a, plain=True)
            try:
                return c()
            finally:
                call.statements = c.statements
        call.statements = None
    else:
        call = _pallas_call(k2, tuple(new_outs), **inner)

    def go():
        # the refs' own arrays (bf16 as its bits), not freeze's host view;
        # a semaphore's counts as they are
        res = call(*plain_args, *[object.__getattribute__(r, "_value") if is_sem(r) else
                                  _np.array(object.__getattribute__(r, "_value"))
                                  for r in states])
        res = list(res)
        for r, v in zip(states, res[len(res) - nst:]):
            r._unbind(v)
        user = res[:len(res) - nst]
        if out_shape is None:
            return None
        if isinstance(out_shape, (list, tuple)) and not hasattr(type(out_shape), "_fields"):
            return tuple(user)
        return user[0]
    go.statements = None

    def wrapped():
        try:
            return go()
        finally:
            wrapped.statements = call.statements
    wrapped.statements = None
    return wrapped


def _pallas_call(kernel, out_shape, *, grid_spec=None, grid=(), in_specs=None,
                 out_specs=None, scratch_shapes=(), compiler_params=None,
                 input_output_aliases=None, interpret=False, name=None, debug=False,
                 cost_estimate=None):
    """pallas_call of arrays only.

    As JAX's, operands, out_shape, specs and scratch_shapes are pytrees
    (tuples, lists, dicts, None): each call argument (each element of a
    tuple or list out_shape or scratch_shapes) is one kernel parameter
    receiving the same tree of refs; the device sees the leaves in tree
    order (input_output_aliases count those); outputs come back in
    out_shape's structure (a top-level list as a tuple)."""
    if grid_spec is None:
        grid_spec = GridSpec(grid, in_specs, out_specs, scratch_shapes)
    if compiler_params is not None:
        # has_side_effects: only checked; every call runs (none is dropped)
        from .tpu import _side_effect_type
        _side_effect_type(compiler_params)
    single_out = not isinstance(out_shape, (list, tuple))
    # out_shape=None: no outputs, the kernel gets None in their place (JAX
    # unflattens the empty tree); the device's job takes at least one, so
    # a hidden (1, 1) int32 SMEM output stands in for it, never returned
    # out_shape=() or []: the empty tree too, but no ref in the kernel's
    # parameters and () back, as JAX's
    empty_out = isinstance(out_shape, (list, tuple)) and not out_shape
    no_out = out_shape is None or empty_out
    out_parts = [] if no_out else _top(out_shape)
    outs, out_tree = _pytree.flatten(tuple(out_parts))
    # Pallas key outputs (ShapeDtypeStruct(shape, key.dtype)): int32 words
    # of shape + (1, 2), given back as keys
    from ._keys import KeyDtype, PallasKey
    key_outs = {j for j, o in enumerate(outs) if isinstance(getattr(o, "dtype", None), KeyDtype)}
    # threefry key outputs: uint32 words of shape + (2,), given back as keys
    from ..random import _KeyDtype
    fry_outs = {j: o.dtype.impl for j, o in enumerate(outs)
                if isinstance(getattr(o, "dtype", None), _KeyDtype)}
    if key_outs or fry_outs:
        from .. import ShapeDtypeStruct
        outs = [ShapeDtypeStruct(tuple(o.shape) + (1, 2), _trace.int32) if j in key_outs else
                ShapeDtypeStruct(tuple(o.shape) + (2,), _trace.uint32) if j in fry_outs else o
                for j, o in enumerate(outs)]
    if not no_out and not outs:
        raise ValueError("pallas_call: out_shape %r has no arrays" % (out_shape,))
    for o in outs:
        if not hasattr(o, "shape") or not hasattr(o, "dtype"):
            raise TypeError("pallas_call: out_shape's leaves are jax.ShapeDtypeStruct (a "
                            "shape and dtype), not %r" % (o,))
    if no_out:
        outs = [_NoOut()]

    def run(*args):
        # the grid is static: index maps and the body see its extents
        _grids.append(tuple(_as_list(grid_spec.grid or (1,))))
        _grid_given.append(tuple(grid_spec.grid or ()))
        try:
            return traced_run(*args)
        finally:
            _grids.pop()
            _grid_given.pop()

    def traced_run(*args):
        global _last_stats
        _print.start_map_prints()
        gs_grid = grid_spec.grid or (1,)
        nsp = grid_spec.num_scalar_prefetch
        if len(args) < nsp:
            raise TypeError("pallas_call: num_scalar_prefetch=%d but %d arguments"
                            % (nsp, len(args)))
        sig = inspect.signature(kernel).parameters.values()
        params = [p.name for p in sig
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        rest = [p.name for p in sig if p.kind == p.VAR_POSITIONAL]
        # each argument a pytree: its leaves are the device's operands
        sp_leaves, sp_tree = _pytree.flatten(tuple(args[:nsp]))
        in_leaves, in_tree = _pytree.flatten(tuple(args[nsp:]))
        for k, a in enumerate(sp_leaves + in_leaves):
            if isinstance(a, (Ref, Value)):
                raise TypeError("pallas_call: operand %d is a traced value; call it on "
                                "arrays" % k)
        # Pallas keys: int32 operands of their words, read back as keys
        from ._keys import PallasKey
        from ..random import _Key
        keyed = {k for k, a in enumerate(sp_leaves + in_leaves) if isinstance(a, PallasKey)}
        # threefry keys: uint32 operands of their words, shape + (2,) (pallas/_fry.py)
        fried = {k for k, a in enumerate(sp_leaves + in_leaves) if isinstance(a, _Key)}
        for k in fried:
            if (sp_leaves + in_leaves)[k].impl == "pallas_philox4x32":
                raise TypeError("pallas_call: operand %d is a pallas_philox4x32 key: its "
                                "bits are a pallas_call's, not drawn in kernels" % k)
        # 64-bit operands narrowed to 32 bits, as JAX's (x64 off) takes them
        arrays = [a.data.view(_np.int32) if k in keyed else a.data if k in fried else
                  _np.ascontiguousarray(a) for k, a in enumerate(sp_leaves + in_leaves)]
        arrays = [a.astype(_np.int32) if a.dtype == _np.int64 else
                  a.astype(_np.float32) if a.dtype == _np.float64 else a for a in arrays]
        # jnp's uint16 arrays (a NumPy uint16 array is bf16 bits) and its
        # 4- and 2-bit integers live in int32 words on the device, sign- or
        # zero-extended
        from ..numpy import _held_dtype
        held = {k: d for k, d in enumerate(map(_held_dtype, sp_leaves + in_leaves))
                if d is not None}
        # and float16's and the float8s' in float32 words (exact)
        arrays = [_np.asarray(a).astype(_np.float32 if held[k] in _trace._HELD_FLOATS
                                        else _np.int32) if k in held else a
                  for k, a in enumerate(arrays)]

        def dtype_of(k):
            return held[k] if k in held else as_dtype(arrays[k].dtype)
        nsp_flat = len(sp_leaves)
        nin = len(in_leaves)
        ispecs = grid_spec.in_specs
        if ispecs is not None:
            # a list is the tuple of the arguments' specs; one spec, one argument's
            ispecs = _pytree.match(tuple(ispecs) if isinstance(ispecs, (list, tuple))
                                   else (ispecs,), in_tree, "in_specs")
        else:
            ispecs = [None] * nin
        ispecs = [_key_spec(sp) if nsp_flat + j in keyed else
                  _key_spec(sp, (2,)) if nsp_flat + j in fried else sp
                  for j, sp in enumerate(ispecs)]
        ospecs = grid_spec.out_specs
        if no_out:
            from .tpu import SMEM
            ospecs = [BlockSpec(memory_space=SMEM)]
        elif ospecs is None:
            ospecs = [None] * len(outs)
        else:
            if not isinstance(ospecs, (list, tuple)):
                ospecs = (ospecs,)
            ospecs = _pytree.match(tuple(ospecs), out_tree, "out_specs")
        scratch_parts = list(grid_spec.scratch_shapes)
        if isinstance(grid_spec.scratch_shapes, dict):
            # scratch_shapes=dict(name=type): the kernel's parameters after
            # the inputs and outputs, in its own order, by name
            after = params[len(args) + (1 if no_out and not empty_out else len(out_parts)):]
            d = grid_spec.scratch_shapes
            if sorted(after) != sorted(d):
                raise TypeError("kernel %s: scratch_shapes names %s, its parameters after "
                                "the inputs and outputs are %s"
                                % (_kname(kernel), sorted(d), after))
            scratch_parts = [d[n] for n in after]
        scratch, scratch_tree = _pytree.flatten(tuple(scratch_parts))
        # the kernel's parameters: one per argument, output part and scratch part
        trees = list(sp_tree.children) + list(in_tree.children) + \
            list(out_tree.children) + list(scratch_tree.children)
        none_out = no_out and not empty_out	# the kernel gets None for the outputs
        nparts = len(trees) + none_out
        if rest and len(params) < nparts:
            # def kernel(*refs): the refs are named refs_0, refs_1, ...
            params += ["%s_%d" % (rest[0], k) for k in range(nparts - len(params))]
        if len(params) != nparts:
            raise TypeError("kernel %s takes %d refs, pallas_call gives %d (%d scalar "
                            "prefetch, %d inputs, %d outputs, %d scratch): it takes %d "
                            "positional argument%s but %d were given"
                            % (_kname(kernel), len(params), nparts, nsp, len(args) - nsp,
                               0 if empty_out else 1 if no_out else len(out_parts),
                               len(scratch_parts), len(params),
                               "" if len(params) == 1 else "s", nparts))
        if len(ispecs) != nin or len(ospecs) != len(outs):
            raise TypeError("in_specs/out_specs do not match the inputs/outputs")
        pnames = list(params)
        if none_out:
            pnames.pop(len(args))
        taken = set(params) | {"_no_outputs"}
        names = [n for p, t in zip(pnames, trees) for n in _leaf_names(p, t, taken - {p})]
        nflat_in = nsp_flat + nin
        prefetch = names[:nsp_flat]
        in_names = names[nsp_flat:nflat_in]
        onames = ["_no_outputs"] if no_out else names[nflat_in:nflat_in + len(outs)]
        snames = names[nflat_in + (0 if no_out else len(outs)):]
        gp = ffi.new("struct tpurt_grid_spec **")
        check(lib.tpurt_grid_spec_create(len(gs_grid), ffi.new("int64_t[]", list(gs_grid)), gp),
              "grid spec")
        gs = ffi.gc(gp[0], lib.tpurt_grid_spec_free)
        keep = []
        refs = []
        for j, (n, a) in enumerate(zip(prefetch, arrays[:nsp_flat])):
            # SMEM holds 32-bit words: narrower integers and bools are
            # widened on the way in (their values, so s_ref[i] reads them)
            narrow = held.get(j)
            if a.dtype in (_np.int8, _np.uint8, _np.int16, _np.bool_):
                narrow = as_dtype(a.dtype)	# s_ref[i] reads it back as one
            if a.dtype in (_np.int8, _np.uint8, _np.int16, _np.bool_):
                a = arrays[j] = a.astype(_np.int32)
            elif a.dtype == _np.uint32:
                # SMEM words are int32: the same bits, read back unsigned
                narrow = as_dtype(a.dtype)
                a = arrays[j] = _np.ascontiguousarray(a).view(_np.int32)
            if a.dtype not in (_np.int32, _np.float32):
                raise TypeError("scalar prefetch '%s': dtype %s; SMEM holds int32 and float32 "
                                "(int8, uint8, int16 and bool are widened to int32, uint32 "
                                "bits are kept)" % (n, a.dtype))
            shape = a.shape
            if a.ndim > 2:
                # SMEM holds it 2-D (splash attention's [heads, q, kv] block
                # tables); the ref rewrites s[h, i, j] into that view
                a = arrays[j] = _np.ascontiguousarray(a).reshape(-1, a.shape[-1])
            check(lib.tpurt_grid_spec_add_scalar_prefetch_shaped(
                gs, n.encode(), a.ndim, ffi.new("int64_t[]", list(a.shape))), n)
            dt = "int32" if a.dtype == _np.int32 else "float32"
            if dt == "float32":
                check(lib.tpurt_grid_spec_set_dtype(gs, n.encode(), as_dtype(dt).code), n)
            # SMEM the kernel may store into, as Mosaic's: a core's copy
            # keeps what it stored across the grid's steps (the paged
            # attention kernel's step and buffer-index scalars)
            refs.append(Ref(n, shape, dt, space="smem", writable=True))
            refs[-1].narrow = narrow
            refs[-1].flat_nd = len(shape) > 2
        index_prefetch = (refs[:nsp_flat], sp_tree)
        dev_shapes = {}		# operand name -> the device's array shape (rank 5, 6 folded)
        views = {}		# index in refs -> the kernel's ref of a folded operand

        def add_blocked(add, what, n, shape, dtype, spec, writable, label=None):
            cs, k, bshape, dev_block, dev_shape = _block_spec(
                spec, shape, len(gs_grid), index_prefetch, n, output=writable, label=label)
            dev_shapes[n] = dev_shape
            keep.extend([cs, k])
            check(add(gs, n.encode(), cs), "%s '%s'" % (what, n))
            dt = as_dtype(dtype)
            check(lib.tpurt_grid_spec_set_dtype(gs, n.encode(), dt.code), n)
            sp = {0: "vmem", 1: "smem", 2: "any"}[cs.memory_space]
            refs.append(Ref(n, dev_block, dt, space=sp, writable=writable))
            if dev_block != bshape:
                views[len(refs) - 1] = _folded_ref(refs[-1], bshape)

        # an input aliased to an output, both whole arrays in VMEM: the
        # kernel sees the output's buffer for both (below), so the input
        # stays in HBM and is copied into it at the first step, as Mosaic
        # holds one VMEM buffer for the pair
        in_hbm = set()
        for i, o in dict(input_output_aliases or {}).items():
            j = i - nsp_flat
            if 0 <= j < nin and 0 <= o < len(outs) and \
                    _whole_vmem(ispecs[j], arrays[i].shape) and \
                    _whole_vmem(ospecs[o], outs[o].shape) and \
                    tuple(arrays[i].shape) == tuple(outs[o].shape) and \
                    len(arrays[i].shape) <= _fold.DEVICE_RANK:
                in_hbm.add(j)
        for j, (n, a, spec) in enumerate(zip(in_names, arrays[nsp_flat:], ispecs)):
            add_blocked(lib.tpurt_grid_spec_add_input, "input", n, a.shape,
                        dtype_of(nsp_flat + j), BlockSpec(memory_space=ANY)
                        if j in in_hbm else spec, False, "args[%d]" % j)
        for k in keyed:
            refs[k].key_batch = len(refs[k].shape) - 2
        for k in fried:
            refs[k].fry_batch = len(refs[k].shape) - 1
            if k in views:
                views[k].fry_batch = refs[k].fry_batch
        for j, (n, o, spec) in enumerate(zip(onames, outs, ospecs)):
            add_blocked(lib.tpurt_grid_spec_add_output, "output", n, o.shape,
                        o.dtype, _key_spec(spec) if j in key_outs else
                        _key_spec(spec, (2,)) if j in fry_outs else spec, True,
                        "outputs[%d]" % j)
            if j in key_outs:
                refs[-1].key_batch = len(refs[-1].shape) - 2
            if j in fry_outs:
                refs[-1].fry_batch = len(refs[-1].shape) - 1
                if len(refs) - 1 in views:
                    views[len(refs) - 1].fry_batch = refs[-1].fry_batch
        for n, s in zip(snames, scratch):
            if not hasattr(s, "_space_code"):
                raise TypeError("scratch_shapes: %r is not a scratch type (pltpu.VMEM, "
                                "pltpu.SMEM, pltpu.SemaphoreType...)" % (s,))
            ref, kref = _scratch_ref(n, s)
            dshape = getattr(s, "_device_shape", None) or ref.shape
            check(lib.tpurt_grid_spec_add_scratch(
                gs, n.encode(), s._space_code, as_dtype(s.dtype).code,
                len(dshape), ffi.new("int64_t[]", list(dshape))),
                "scratch '%s'" % n)
            refs.append(ref)
            if kref is not ref:
                views[len(refs) - 1] = kref
            if hasattr(s, "_role"):	# a pltpu.BufferedRef: its spec and role
                refs[-1]._spec, refs[-1]._role = s._spec, s._role
            refs[-1].key_batch = getattr(s, "_key_batch", None)	# scratch of Pallas keys

        # the kernel's arguments: the refs in the trees of the call's arguments
        nout = len(outs)
        krefs = [views.get(j, r) for j, r in enumerate(refs)]
        kargs = _parts(sp_tree, krefs[:nsp_flat]) + _parts(in_tree, krefs[nsp_flat:nflat_in])
        if none_out:
            kargs.append(None)
        elif not no_out:
            kargs += _parts(out_tree, krefs[nflat_in:nflat_in + nout])
        kargs += _parts(scratch_tree, krefs[nflat_in + nout:])

        # input_output_aliases checked as JAX's checks them
        def aval(shape, dt):
            return "%s[%s]" % (as_dtype(dt).name, ",".join(str(d) for d in shape))
        for i, o in dict(input_output_aliases or {}).items():
            if not 0 <= i < nflat_in:
                raise ValueError("input_output_aliases contains the mapping '%d:%d' with "
                                 "input index %d outside the range [0, %d)"
                                 % (i, o, i, nflat_in))
            if not 0 <= o < len(outs):
                raise ValueError("input_output_aliases contains the mapping '%d:%d' with "
                                 "output index %d outside the range [0, %d)"
                                 % (i, o, o, len(outs)))
            a, ob = arrays[i], outs[o]
            if tuple(a.shape) != tuple(ob.shape) or \
                    dtype_of(i).name != as_dtype(ob.dtype).name and \
                    not (i < nsp_flat):
                raise ValueError("input_output_aliases contains the mapping '%d:%d' referring "
                                 "to input[%d] with abstract value %s and output[%d] with a "
                                 "different abstract value %s"
                                 % (i, o, i, aval(a.shape, a.dtype), o,
                                    aval(ob.shape, ob.dtype)))

        # trace the kernel
        # an input in HBM aliased to an output in HBM is that output's
        # buffer: a copy into it writes the output (tpu._writable)
        for i, o in dict(input_output_aliases or {}).items():
            if 0 <= i < nflat_in and 0 <= o < len(outs) and refs[i].space == "any" and \
                    refs[nflat_in + o].space == "any" and \
                    refs[i].shape == refs[nflat_in + o].shape:
                refs[i].alias = refs[nflat_in + o]
        # an input and output aliased, both whole arrays in VMEM (or SMEM,
        # given by a memory space or by default specs): one buffer, as in
        # Mosaic: the kernel sees the output's ref for
        # both, holding the input's data from the first step
        same = {}
        all_specs = list(ispecs) if nsp_flat == 0 else [None] * nsp_flat + list(ispecs)
        for i, o in dict(input_output_aliases or {}).items():
            if not (nsp_flat <= i < nflat_in and 0 <= o < len(outs)):
                continue
            si, so = all_specs[i], ospecs[o]
            ri, ro = refs[i], refs[nflat_in + o]
            # a spec of a memory space alone, or none (the default block: the
            # whole array, in VMEM)
            if all(sp is None or getattr(sp, "memory_space", None) is not None and
                   getattr(sp, "block_shape", None) is None for sp in (si, so)) and \
                    (ri.space in ("vmem", "smem") and ri.space == ro.space or
                     i - nsp_flat in in_hbm) and ri.shape == ro.shape:
                same[id(ri)] = (ri, ro)
        if same:
            # the kernel's refs: the output's for the input (of a folded
            # operand, rank 5 or 6, its view)
            kview = {id(r): k for r, k in zip(refs, krefs)}
            swap = {id(kview[id(ri)]): kview[id(ro)] for ri, ro in same.values()}
            kargs = [_pytree.unflatten(t, [swap.get(id(x), x) for x in ls])
                     for ls, t in (_pytree.flatten(a) for a in kargs)]
        rec = _trace.start()
        rec.read_only = {r.name for r in refs if isinstance(r, Ref) and not r.writable}
        rec.unchecked_bounds = getattr(compiler_params, "disable_bounds_checks", False)
        try:
            _print.emit_map_prints()	# the index maps' prints, at each step
            if same:
                from .tpu import sync_copy

                def load_aliased():
                    for ri, ro in same.values():
                        sync_copy(ri, ro)
                cond = None
                for d, g in enumerate(gs_grid):
                    if g != 1:
                        c = program_id(d) == 0
                        cond = c if cond is None else cond & c
                if cond is None:
                    load_aliased()
                else:
                    when(cond)(load_aliased)
            ret = kernel(*kargs)
            if ret is not None:
                raise ValueError("The kernel function of pl.pallas_call, %s, should return "
                                 "None. It returns: %r" % (_fn_where(kernel), ret))
        finally:
            _trace.stop()
        rec.drop_dead_locals()
        rec.share_local_names()
        if rec.nspill:
            # the SMEM words long scalar-core expressions were spilled into
            check(lib.tpurt_grid_spec_add_scratch(
                gs, _trace.SPILL_REF.encode(), 1, _trace.int32.code, 1,
                ffi.new("int64_t[]", [rec.nspill])), "the scalar spill scratch")
        loop_preds = []

        def _open_loop(k, kind, args, pred):
            loop_preds.append(pred)
            if pred:
                rc = lib.tpurt_kernel_when(k, pred.encode())
                if rc < 0:
                    return rc
            if kind == "fori":
                return lib.tpurt_kernel_loop(k, args[0].encode(), args[1].encode())
            return lib.tpurt_kernel_while(k, args[0].encode(), args[1])
        kp = ffi.new("struct tpurt_kernel **")
        check(lib.tpurt_kernel_create(kp), "kernel")
        k = ffi.gc(kp[0], lib.tpurt_kernel_free)
        for text, loc, scope in rec.stmts:
            if scope is None:
                rc = lib.tpurt_kernel_stmt(k, gs, text.encode())
            elif len(scope) == 3:	# a device loop: (kind, args, predicate)
                rc = _open_loop(k, *scope)
            elif len(scope) == 1:
                rc = lib.tpurt_kernel_end_loop(k)
                if rc >= 0 and loop_preds.pop():
                    rc = lib.tpurt_kernel_end_when(k)
            elif scope:
                name, space, dtype, shape = scope
                rc = lib.tpurt_kernel_run_scoped(k, name.encode(), space, dtype, len(shape),
                                                 ffi.new("int64_t[]", list(shape)))
            else:
                rc = lib.tpurt_kernel_end_scoped(k)
            if rc < 0:
                # as Mosaic's refusals: MosaicError, its traceback ending
                # at the kernel's line (error_handling)
                from .mosaic import error_handling
                raise error_handling.from_libtpurt(
                    ffi.string(lib.tpurt_last_error()).decode(), loc)
        run.statements = [t for t, _, _ in rec.stmts]

        # arrays
        cp = ffi.new("struct tpurt_compiler_params *")
        cp.flags = _TPURT_INTERPRET if interpret else 0
        # debug=True: JAX prints its IR; here the device checks the kernel,
        # and poisons what a kernel must not read (jax_pallas_poison_buffers)
        from .._config import config
        cp.flags |= _TPURT_DEBUG if debug or config.jax_pallas_poison_buffers else 0
        if compiler_params is not None:
            ds_ = getattr(compiler_params, "dimension_semantics", None)
            if ds_:
                c = ffi.new("char[]", ", ".join(ds_).encode())
                keep.append(c)
                cp.dimension_semantics = c
            cp.vmem_limit_bytes = getattr(compiler_params, "vmem_limit_bytes", None) or 0
        aliases = dict(input_output_aliases or {})
        if aliases:
            al = ffi.new("struct tpurt_alias[]", len(aliases))
            for idx, (i, o) in enumerate(aliases.items()):
                al[idx].input, al[idx].output = i, o
            keep.append(al)
            cp.input_output_aliases = al
            cp.num_aliases = len(aliases)
        dev = device()
        handles = []

        def make(shape, dt):
            ap = ffi.new("struct tpurt_array **")
            shp = list(shape) or [1]
            check(lib.tpurt_array_create(dev, dt.code, len(shp), ffi.new("int64_t[]", shp), ap),
                  "array")
            h = ffi.gc(ap[0], lib.tpurt_array_free)
            handles.append(h)
            return h
        for n, a in zip(prefetch + in_names, arrays):
            h = make(dev_shapes.get(n, a.shape), as_dtype(a.dtype))
            # int16 lives in int32 words on the device (sign-extended)
            a = _np.ascontiguousarray(a.astype(_np.int32)) if a.dtype == _np.int16 else a
            check(lib.tpurt_array_write(h, ffi.from_buffer(a)), "array write")
        out_idx = {o: i for i, o in aliases.items()}
        for j, o in enumerate(outs):
            if j in out_idx:
                handles.append(handles[out_idx[j]])
            else:
                make(dev_shapes.get(onames[j], o.shape), as_dtype(o.dtype))
        argv = ffi.new("struct tpurt_array *[]", handles)
        st = ffi.new("struct tpurt_job_stats *")
        try:
            check(lib.tpurt_pallas_call(k, gs, cp, argv, len(handles), st),
                  "pallas_call(%s)" % _kname(kernel))
        except TpurtError as e:
            # the device's enum tpu_job_error (interpret.py: a hazard is a race)
            e.job_error = st.error.code
            raise
        _last_stats = {f: getattr(st, f) for f in (
            "steps", "blocks_fetched", "blocks_skipped", "blocks_written", "hbm_bytes_in",
            "hbm_bytes_out", "mxu_flops", "cores_used", "device_wall_ns", "call_wall_ns",
            "model_time_ps", "model_mxu_busy_ps", "model_dma_busy_ps", "model_bubble_ps",
            "loop_trips")}
        results = []
        for j, o in enumerate(outs):
            nd, od = _np_dtype(o.dtype), as_dtype(o.dtype)
            held_words = od in _trace._HELD
            held_float = od in _trace._HELD_FLOATS
            r = _np.empty(o.shape, dtype=_np.int32 if held_words else
                          _np.float32 if held_float else nd)
            check(lib.tpurt_array_read(handles[len(arrays) + j], ffi.from_buffer(r)),
                  "array read")
            # held integers' words hold them sign- or zero-extended: exact
            # (an aliased input never written keeps its own)
            if od is _trace.uint16:
                from ..numpy import UInt16Array
                r = r.astype(nd).view(UInt16Array)
            elif held_words and od is not _trace.int16:
                from ..numpy import _narrow_array
                r = _narrow_array(r, od)
            elif held_words:
                r = r.astype(nd)
            elif od is _trace.float16:	# exact: the words hold float16 values
                r = r.astype(_np.float16)
            elif held_float:
                from ..numpy import _float8_array
                r = _float8_array(r, od)
            results.append(r)
            if j in key_outs:
                results[-1] = PallasKey(r.view(_np.uint32))
            if j in fry_outs:
                results[-1] = _Key(r, fry_outs[j])
        if no_out:
            return () if empty_out else None
        # a list of out_shapes gives a tuple too, as JAX's (it flattens the tree)
        res = _parts(out_tree, results)
        if single_out:
            return res[0]
        # the top level's elements were the kernel's parameters; a namedtuple
        # stays one, a list comes back a tuple (JAX makes it one)
        return type(out_shape)(*res) if hasattr(type(out_shape), "_fields") else tuple(res)
    run.statements = None
    return run


def select_ref(index, *refs):
    """pl.select_ref(index, *refs): the ref (or window, or semaphore) at
    @index, clamped into range as lax.switch's index is (JAX's
    test_select_ref picks from two semaphores with indices 0..3). A Python
    int picks it while tracing (pl.loop's and fori_loop's static trips
    give one); a traced index (an SMEM element, pl.program_id) gives a
    _Selected: copies, semaphore signals and waits, stores and .at[...]
    of it run once per candidate under pl.when of the index, reads pick
    the value with jnp.where."""
    if not refs:
        raise trace_error("pl.select_ref: no refs to select from")
    if isinstance(index, Ref) or isinstance(index, Value) and not index.scalar:
        raise trace_error("pl.select_ref: the index (%s) must be a scalar (an SMEM element, "
                          "pl.program_id or a Python int), not an array" % index.render())
    if isinstance(index, Value):
        return _Selected(index, refs)
    return refs[min(max(_np.int64(index).item(), 0), len(refs) - 1)]


class _Selected:
    """pl.select_ref with a traced index: one of @refs, chosen at run
    time (candidate k where the index, clamped into range, is k)."""

    def __init__(self, index, refs):
        from .tpu import _choices
        flat = []
        for r in refs:	# a candidate may itself be a selection
            flat.extend(_choices(r) if isinstance(r, _Selected) else [(None, r)])
        if any(c is not None for c, _ in flat):
            raise trace_error("pl.select_ref: a candidate chosen by a traced index is "
                              "itself a pl.select_ref of a traced index; select once")
        self.index = index
        self.refs = tuple(r for _, r in flat)
        shapes = {_trace_shape(r) for r in self.refs}
        dtypes = {getattr(_base_ref(r), "dtype", None) for r in self.refs}
        if len(dtypes) > 1 or len(shapes) > 1 and None not in shapes:
            raise trace_error("pl.select_ref(%s, ...): the refs must have one shape and "
                              "dtype, not %s" % (index.render(), ", ".join(
                                  "%s %r %s" % (_trace_name(r), _trace_shape(r),
                                                getattr(_base_ref(r), "dtype", None))
                                  for r in self.refs)))
        self.shape = next(iter(shapes))
        self.dtype = dtypes.pop()
        self.name = _trace_name(self.refs[0])

    @property
    def ndim(self):
        return len(self.shape)

    def choices(self):
        i, n = self.index.render(), len(self.refs)
        if n == 1:
            return [("True", self.refs[0])]
        conds = ["(%s) <= 0" % i] + ["(%s) == %d" % (i, k) for k in range(1, n - 1)] + \
            ["(%s) >= %d" % (i, n - 1)]
        return list(zip(conds, self.refs))

    def render(self):
        return "pl.select_ref(%s, %s)" % (self.index.render(),
                                          ", ".join(r.render() for r in self.refs))

    @property
    def at(self):
        sel = self

        class _SelectedAt:
            def __getitem__(self, idx):
                return _Selected(sel.index, tuple(r.at[idx] for r in sel.refs))
        return _SelectedAt()

    def __getitem__(self, idx):
        vals = [r[idx] for r in self.refs]
        out = vals[-1]
        for k in range(len(vals) - 2, -1, -1):
            cond = self.index <= 0 if k == 0 else self.index == k
            out = jnp.where(cond, vals[k], out)
        return out

    def __setitem__(self, idx, value):
        from .tpu import _each_choice

        def store(r):
            r[idx] = value
        _each_choice((self,), store)


def _base_ref(r):
    return getattr(r, "ref", r)


def _trace_name(r):
    return getattr(r, "name", repr(r))


def _trace_shape(r):
    if isinstance(r, _trace.Window):
        shape = _trace._window_shape(r.dims)
        return shape if shape is None or not r.traced else None
    return tuple(getattr(r, "shape", ()) or ())


# pl.semaphore_* are pltpu's (newer JAX has them under pl)
from .tpu import semaphore_signal, semaphore_wait, semaphore_read  # noqa: E402
from .tpu import no_block_spec  # noqa: E402,F401  (pl.no_block_spec)
from .tpu import ANY  # noqa: E402,F811  (pl.ANY: callable, ANY(shape, dtype))
from .tpu import HOST  # noqa: E402  (pl.HOST, pinned host memory)
# pl.with_memory_constraint: pltpu.with_memory_space_constraint's newer name
from .tpu import with_memory_space_constraint as with_memory_constraint  # noqa: E402
from .tpu import DeviceIdType  # noqa: E402,F401  (pl.DeviceIdType, as newer JAX)
from .tpu import delay  # noqa: E402  (pl.delay, as pltpu.delay)
from .kernel import kernel, core_map  # noqa: E402,F401  (pl.core_map)
from .._trace import semaphore, semaphore_dtype  # noqa: E402,F401  (pl.semaphore)
from . import _print  # noqa: E402
from ._print import debug_print  # noqa: E402
from . import interpret as _interpret  # noqa: E402
from . import _zero_d  # noqa: E402
from . import _batch  # noqa: E402
from .._state import run_state  # noqa: E402,F401  (pl.run_state)
from ._cost_estimate import CostEstimate, estimate_cost, check_cost_estimate  # noqa: E402,F401

__all__ = ["pallas_call", "max_contiguous", "BlockSpec", "Blocked", "BoundedSlice", "Element", "Squeezed",
           "Unblocked",
           "blocked", "unblocked", "GridSpec", "program_id", "num_programs", "when",
           "ds", "run_scoped", "with_scoped", "select_ref", "multiple_of", "reciprocal", "cdiv", "loop", "dot", "Buffered", "RevisitMode", "ANY", "HOST", "MemoryRef", "debug_check", "enable_debug_checks", "empty", "broadcast_to", "align_to",
           "get_memory_space", "with_memory_constraint",
           "DeviceIdType", "TraceError",
           "trace_error", "semaphore_signal", "semaphore_wait", "semaphore_read", "kernel",
           "debug_print", "CostEstimate", "estimate_cost", "delay"]


def debug_check(condition, message):
    """pl.debug_check: checked on the device with pl.enable_debug_checks
    (pallas/_checkify.py), otherwise nothing."""
    from ._checkify import debug_check as check
    check(condition, message)


class _DebugChecks:
    """pl.enable_debug_checks: as JAX's config state, called (with True, or
    False) it is a context manager setting jax_pallas_enable_debug_checks
    inside the block; .value reads it."""

    def __call__(self, new_val=True):
        from .._config import config
        return config.option("jax_pallas_enable_debug_checks", new_val)

    @property
    def value(self):
        from .._config import config
        return config.jax_pallas_enable_debug_checks


enable_debug_checks = _DebugChecks()


class MemoryRef:
    """pl.MemoryRef(aval, memory_space): an array's shape and dtype in a
    memory space (an out_shape entry, as ShapeDtypeStruct(memory_space=));
    pallas_call places its operands by their BlockSpecs."""

    def __init__(self, inner_aval, memory_space):
        self.inner_aval = inner_aval
        self.shape, self.dtype = tuple(inner_aval.shape), inner_aval.dtype
        self.memory_space = memory_space

    def __repr__(self):
        return "MemoryRef(%r, %r)" % (self.inner_aval, self.memory_space)


def empty_like(x, *, memory_space=None):
    """pl.empty_like(x): an array of x's shape and dtype (JAX leaves it
    uninitialised; here it is zeros), placed in @memory_space (its type
    names it, as pl.with_memory_constraint's)."""
    from ..numpy import zeros
    out = zeros(_np.shape(x), x.dtype)
    return out if memory_space is None else with_memory_constraint(out, memory_space)


def get_memory_space(x):
    """pl.get_memory_space(x): the memory space of an array's type
    (pl.with_memory_constraint; pltpu.HBM where none was given, as an
    operand lives there), of a kernel ref, or of a jax.new_ref ref."""
    from .. import _state, typeof
    from .tpu import HBM
    if isinstance(x, _trace.RefApi) and not isinstance(x, _state.HostRef):
        return x.memory_space		# a kernel's ref
    space = typeof(x).memory_space
    return HBM if space is None else space



def empty(shape, dtype, *, out_sharding=None):
    """pl.empty(shape, dtype): an array whose values are not to be relied
    on (JAX leaves them uninitialised; here they are zeros), in a kernel
    body or outside one. One device: @out_sharding has nothing to place."""
    from ..numpy import zeros
    del out_sharding
    return zeros(tuple(shape) if not isinstance(shape, int) else (shape,), dtype)


def broadcast_to(a, shape):
    """pl.broadcast_to: jnp.broadcast_to, in a kernel body or outside one."""
    from ..numpy import broadcast_to as f
    return f(a, shape)


def empty_ref_like(ty):
    """pl.empty_ref_like(pltpu.SMEM(shape, dtype)) (or VMEM, HBM) outside a
    kernel: a jax.empty_ref in that memory space, for pl.kernel calls to
    share; of pltpu.SemaphoreType.DMA(shape) (or REGULAR), semaphores they
    share: a copy one call starts, a later one waits for."""
    from .tpu import _Scratch, VMEM, SMEM, HBM, SEMAPHORE
    from .._state import empty_host_ref, HostRef
    if _is_sem_type(ty):
        # a semaphore the calls share: its counts, passed from call to call
        v = _np.zeros(ty.shape, _np.int32).view(SemaphoreValue)
        v._code = ty._space_code
        return HostRef(v, SEMAPHORE)
    if not isinstance(ty, _Scratch) or ty._space_code not in (0, 1, 2):
        raise TypeError("pl.empty_ref_like: a pltpu.VMEM, SMEM or HBM type or a "
                        "pltpu.SemaphoreType, not %r" % (ty,))
    return empty_host_ref(ty, {0: VMEM, 1: SMEM, 2: HBM}[ty._space_code])
