# SPDX-License-Identifier: MIT
"""tpuemu: JAX Pallas TPU kernels on tpuemu's libtpurt (imports changed only).

    import tpuemu as jax
    import tpuemu.numpy as jnp
    from tpuemu import pallas as pl
    from tpuemu.pallas import tpu as pltpu
"""
import numpy as _np

from ._trace import TraceError, as_dtype, float32, bfloat16, int8, int32, uint32  # noqa: F401
from ._lib import TpurtError  # noqa: F401
from . import lax, nn, random, tree_util, ad_checkpoint, dtypes, errors  # noqa: F401  (jax.lax.dot_general)
from . import debug, tree, scipy  # noqa: F401  (jax.debug.print, jax.tree.map)
from ._shard_map import shard_map  # noqa: F401  (jax.shard_map over a TensorCoreMesh)
from .random import threefry_partitionable  # noqa: F401  (jax.threefry_partitionable)
from .numpy import HostArray as Array  # noqa: F401  (isinstance(x, jax.Array): a jnp array)
from ._state import new_ref, freeze  # noqa: F401  (jax.new_ref, jax.freeze)
from ._config import config  # noqa: F401  (jax.config.update)
from ._ad import (vjp, grad, value_and_grad, jvp, linearize, custom_vjp,  # noqa: F401
                  custom_jvp)


def checkpoint(fun=None, *, prevent_cse=True, policy=None, static_argnums=()):
    """jax.checkpoint (jax.remat): @fun itself. Its residuals are kept, not
    recomputed: the tape holds every primal, so the gradient is the same."""
    if fun is None:
        return lambda f: f
    return fun


remat = checkpoint


class ensure_compile_time_eval:
    """with jax.ensure_compile_time_eval(): Python values computed inside
    are concrete, as they always are here (kernels are traced eagerly)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class ShapeDtypeStruct:
    """jax.ShapeDtypeStruct: an output's shape and dtype (and, as JAX's
    avals carry it, a memory space; pallas_call takes the space from its
    out_specs)."""

    def __init__(self, shape, dtype, memory_space=None):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.memory_space = memory_space

    @classmethod
    def like(cls, x):
        """ShapeDtypeStruct.like(x): x's shape and dtype."""
        return cls(x.shape, x.dtype)

    def __repr__(self):
        return "ShapeDtypeStruct(%s, %s)" % (self.shape, self.dtype)


def typeof(x):
    """jax.typeof(x): x's shape and dtype (a ShapeDtypeStruct; of a Pallas
    key array, its batch shape and key dtype)."""
    from ._state import HostRef
    # a ref's space, or an array's from pltpu.with_memory_space_constraint
    space = x.__dict__.get("_memory_space") if isinstance(x, HostRef) else \
        getattr(x, "_memory_space", None)
    shape = x.shape if getattr(x, "_pallas_key", False) else _np.shape(x)
    t = ShapeDtypeStruct(shape, x.dtype, memory_space=space)
    if isinstance(x, HostRef):	# a ref's type: its array's is .inner_aval, as JAX's
        t.inner_aval = ShapeDtypeStruct(shape, x.dtype)
    return t


def eval_shape(fun, *args, **kwargs):
    """jax.eval_shape(fun, *args): the ShapeDtypeStruct of each of fun's
    results (in their pytree). On the host, run: fun is given the
    arrays, and zeros for each ShapeDtypeStruct (tpuemu has no abstract
    evaluation; a pallas_call in fun runs on the zeros)."""
    from . import _trace, _pytree, numpy as jnp
    if _trace._rec is not None:
        raise _trace.trace_error("jax.eval_shape in a kernel body: a value's .shape and "
                                 ".dtype are known while tracing")

    def concrete(x):
        if isinstance(x, ShapeDtypeStruct):
            return jnp.zeros(x.shape, x.dtype)
        return x

    def struct(x):
        if isinstance(x, ShapeDtypeStruct):
            return x
        if getattr(x, "_pallas_key", False) or (hasattr(x, "shape") and hasattr(x, "dtype")):
            return typeof(x)
        # a Python number: a 0-d array of JAX's 32-bit default dtype
        return ShapeDtypeStruct((), jnp.asarray(x).dtype)
    leaves, tree = _pytree.flatten((args, kwargs))
    a, kw = _pytree.unflatten(tree, [concrete(x) for x in leaves])
    out, out_tree = _pytree.flatten(fun(*a, **kw))
    return _pytree.unflatten(out_tree, [struct(x) for x in out])


def jit(f=None, **kwargs):
    """jax.jit: the function itself (pallas_call runs at once), except
    that, as under JAX's jit, a Python int, float or bool argument not
    named static arrives as a 0-d int32, float32 or bool array (so
    index[None] works on it). In a kernel body (a jitted kernel), the
    function itself."""
    if f is None:
        return lambda g: jit(g, **kwargs)
    import functools
    import inspect
    static_nums = kwargs.get("static_argnums", ()) or ()
    static_nums = {static_nums} if isinstance(static_nums, int) else set(static_nums)
    static_names = kwargs.get("static_argnames", ()) or ()
    static_names = {static_names} if isinstance(static_names, str) else set(static_names)
    try:
        params = [p.name for p in inspect.signature(f).parameters.values()]
    except (TypeError, ValueError):
        params = []

    def conv(x):
        if isinstance(x, bool):
            return _np.asarray(x)
        if isinstance(x, int):
            return _np.asarray(x, _np.int32)
        if isinstance(x, float):
            return _np.asarray(x, _np.float32)
        return x

    @functools.wraps(f)
    def wrapped(*args, **kw):
        from . import _trace
        if _trace._rec is not None:
            return f(*args, **kw)
        args = [a if k in static_nums or (k < len(params) and params[k] in static_names)
                else conv(a) for k, a in enumerate(args)]
        kw = {k: v if k in static_names else conv(v) for k, v in kw.items()}
        return f(*args, **kw)
    return wrapped


class Device:
    """jax.devices()'s entry: the one device libtpurt opens."""
    platform = "tpu"
    id = 0

    @property
    def device_kind(self):
        """As a real TPU of the modelled chip names itself ("TPU v5 lite"):
        code that picks tuned sizes or tables by it finds the v5e's."""
        from .pallas.tpu import device_kind
        return device_kind()

    @property
    def num_cores(self):
        """The device's TensorCores, as a JAX TPU device's num_cores."""
        from .pallas.tpu import get_tpu_info
        return get_tpu_info().num_cores

    def __repr__(self):
        return "TpuDevice(id=0, kind=%r)" % self.device_kind


class named_scope:
    """jax.named_scope(name): names the operations under it for profiles;
    tpuemu's profiles name kernels by pallas_call's name=, so it only
    checks the name."""

    def __init__(self, name):
        if not isinstance(name, str):
            raise TypeError("named_scope: name must be a str, not %r" % (name,))
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def devices(backend=None):
    return [Device()]


def device_count():
    return 1


local_device_count = device_count


def device_put(x, device=None):
    """jax.device_put: the array itself (pallas_call copies it to HBM)."""
    return x


def block_until_ready(x):
    """jax.block_until_ready: pallas_call has returned with its results."""
    return x


def _vmap_values(f, args, in_axes, out_axes):
    """jax.vmap in a kernel body of traced values: f once per index of the
    mapped axis (axis 0 of each argument whose in_axes is 0; None ones
    passed whole), unrolled while tracing (at most lax.UNROLL_MAX_TRIPS),
    the results stacked along @out_axes."""
    from . import _trace, _pytree, numpy as jnp
    axes = list(in_axes) if isinstance(in_axes, (list, tuple)) else [in_axes] * len(args)
    if len(axes) != len(args) or any(a not in (0, None) for a in axes):
        raise _trace.trace_error("jax.vmap in a kernel body maps values along axis 0 (or "
                                 "None), not in_axes=%r" % (in_axes,))
    mapped = [x for a, ax in zip(args, axes) if ax == 0 for x in _pytree.flatten(a)[0]]
    if any(not isinstance(x, _trace.Value) or not x.shape for x in mapped):
        raise _trace.trace_error("jax.vmap in a kernel body: a mapped argument (in_axes 0) "
                                 "is an array with a leading axis; pass others with None")
    sizes = {tuple(x.shape)[0] for x in mapped}
    if len(sizes) != 1:
        raise ValueError("jax.vmap: the mapped axes have sizes %s; they must be one size"
                         % sorted(sizes))
    n = sizes.pop()
    if n > lax.UNROLL_MAX_TRIPS:
        raise _trace.trace_error("jax.vmap in a kernel body of values: %d indices, it is "
                                 "unrolled up to %d; write the batched computation (or map "
                                 "refs)" % (n, lax.UNROLL_MAX_TRIPS))
    outs = [f(*[a if ax is None else _pytree.unflatten(t, [x[i] for x in ls])
                for a, ax, (ls, t) in zip(args, axes, (_pytree.flatten(a) for a in args))])
            for i in range(n)]
    ol = [_pytree.flatten(o) for o in outs]
    return _pytree.unflatten(ol[0][1], [jnp.stack([ls[k] for ls, _ in ol], axis=out_axes)
                                        for k in range(len(ol[0][0]))])


def vmap(f, in_axes=0, out_axes=0, axis_name=None, axis_size=None):
    """jax.vmap of a function of NumPy arrays (a pallas_call, say): f runs
    once per index of the mapped axis and the results are stacked along
    out_axes. in_axes: an int or None for all arguments, or one per
    argument; axis_size: the count when no argument is mapped
    (jax.vmap(f, axis_size=2)() runs f twice)."""
    def mapped(*args):
        from . import _trace, _pytree
        if _trace._rec is not None:
            # in a kernel body, of refs (an emit_pipeline over a batch): f
            # once per index of their leading axis, on each ref's window
            # there (ref.at[i]); nothing returned, as a pipeline returns
            leaves = [x for a in args for x in _pytree.flatten(a)[0]]
            if any(isinstance(x, _trace.Value) for x in leaves) and \
                    all(isinstance(x, (_trace.Value, bool, int, float)) for x in leaves):
                return _vmap_values(f, args, in_axes, out_axes)
            if in_axes not in (0, None) and any(a not in (0, None) for a in
                                                (in_axes if isinstance(in_axes, (list, tuple))
                                                 else [in_axes])):
                raise _trace.trace_error("jax.vmap in a kernel maps refs along axis 0 only, "
                                         "not in_axes=%r" % (in_axes,))
            if not leaves or not all(hasattr(x, "at") and hasattr(x, "shape") and
                                     not isinstance(x, _trace.Value) for x in leaves):
                raise _trace.trace_error("jax.vmap in a kernel body maps refs (or windows) "
                                         "only")
            sizes = {tuple(x.shape)[0] for x in leaves}
            if len(sizes) != 1:
                raise ValueError("jax.vmap: the mapped axes have sizes %s; they must be one "
                                 "size" % sorted(sizes))
            outs = []
            for i in range(sizes.pop()):
                outs.append(f(*[_pytree.unflatten(t, [x.at[i] for x in ls])
                                for ls, t in (_pytree.flatten(a) for a in args)]))
            if any(o is not None for o in outs):
                raise _trace.trace_error("jax.vmap in a kernel body: the mapped function "
                                         "returns values; only ref updates are mapped here")
            return None
        axes = in_axes if isinstance(in_axes, (list, tuple)) else [in_axes] * len(args)
        if len(axes) != len(args):
            raise TypeError("jax.vmap: %d in_axes for %d arguments" % (len(axes), len(args)))
        sizes = {_np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None}
        if axis_size is not None:
            sizes.add(int(axis_size))
        if len(sizes) != 1:
            raise ValueError("jax.vmap: the mapped axes have sizes %s; they must be one "
                             "size" % sorted(sizes))
        from .pallas._keys import PallasKey
        from .random import _Key
        bt = getattr(f, "_batchable", None)
        if bt is not None:	# a pallas_call (or a vmap of one): one call, batched
            r = _batched(bt, args, axes)
            if r is not None:
                return type(r)(_np.moveaxis(o, 0, out_axes) for o in r) \
                    if isinstance(r, (tuple, list)) else _np.moveaxis(r, 0, out_axes)

        def take(a, i, ax):
            if isinstance(a, (PallasKey, _Key)):	# keys: along their batch axes
                return a[(slice(None),) * ax + (i,)]
            return _np.take(a, i, axis=ax)
        outs = []
        for i in range(sizes.pop()):
            outs.append(f(*(a if ax is None else take(a, i, ax)
                            for a, ax in zip(args, axes))))
        for cls in (PallasKey, _Key):
            if all(isinstance(o, cls) for o in outs):
                return cls(_np.stack([o.data for o in outs], axis=out_axes))
        if isinstance(outs[0], (tuple, list)):
            return type(outs[0])(_np.stack(o, axis=out_axes) for o in zip(*outs))
        return _np.stack(outs, axis=out_axes)
    bt = getattr(f, "_batchable", None)
    if bt is not None and out_axes == 0:
        mapped._batchable = bt.nested(in_axes)
    return mapped


def _batched(bt, args, axes):
    """The pallas_call of Batchable @bt over the mapped @args as one call
    (pallas/_batch.py), or None: then vmap runs it once per index (also
    where the batched form fails to trace, so the error is the call's own)."""
    from .pallas import _batch
    moved = [a if ax is None else _np.moveaxis(a, ax, 0) for a, ax in zip(args, axes)]
    try:
        return _batch.call(bt, moved, [ax is not None for ax in axes])
    except (TraceError, TpurtError, ValueError):
        return None


def to_bf16(x):
    """float32 (or anything NumPy converts) -> bfloat16 bits as uint16,
    rounding to nearest even as libtpurt does (of a host bfloat16 array,
    its bits)."""
    from .numpy import BF16Array, bf16_bits
    if isinstance(x, BF16Array):
        return x.bits()
    return bf16_bits(x)


def from_bf16(h):
    """bfloat16 bits (uint16) -> float32 (of a host bfloat16 array, its
    values as float32)."""
    from .numpy import BF16Array
    if isinstance(h, BF16Array):
        return _np.array(_np.ndarray.view(h, _np.ndarray))
    h = _np.asarray(h)
    if h.dtype.kind == "f":
        raise TypeError("tpuemu.from_bf16: bfloat16 bits are uint16, not %s" % h.dtype)
    h = _np.ascontiguousarray(h, dtype=_np.uint16)
    return (h.astype(_np.uint32) << 16).view(_np.float32)


def save_npy(path, x, dtype=None):
    """np.save as libtpurt's tpurt_array_save_npy writes: bfloat16 as raw
    '<u2' bits. With dtype=bfloat16, float data is rounded (to_bf16) first;
    uint16 data is taken as bf16 bits already; a host bfloat16 array
    (tpuemu.numpy.BF16Array) is written as its bits."""
    from .numpy import BF16Array
    a = x.bits() if isinstance(x, BF16Array) else _np.asarray(x)
    if dtype is not None and as_dtype(dtype) is bfloat16 and a.dtype != _np.uint16:
        a = to_bf16(a)
    _np.save(path, _np.ascontiguousarray(a), allow_pickle=False)


def load_npy(path, dtype=None):
    """np.load of a .npy file; bfloat16 comes back as its uint16 bits (from
    '<u2', or '|V2' as ml_dtypes writes it). dtype, if given, must match
    (bfloat16: uint16 or V2 on disk)."""
    a = _np.load(path, allow_pickle=False)
    if a.dtype.kind == "V" and a.dtype.itemsize == 2:
        a = a.view(_np.uint16)
    if dtype is not None:
        want = _np.dtype(as_dtype(dtype).np_name)
        if a.dtype != want:
            raise TypeError("%s holds %s, not %s" % (path, a.dtype, as_dtype(dtype).name))
    return a


def last_stats():
    """The last pallas_call's job statistics (a dict; times in ns and ps)."""
    from .pallas import _last_stats
    return dict(_last_stats) if _last_stats is not None else None


_empty_refs = [0]


def empty_ref(ty, memory_space=None):
    """jax.empty_ref(ShapeDtypeStruct, memory_space=pltpu.VMEM) in a kernel
    body: scratch (VMEM by default, or pltpu.SMEM) alive until the kernel
    ends, as a pl.run_scoped around the rest of the body (in a
    pl.run_scoped body, an emit_pipeline body say, until that ends)."""
    from . import _trace
    from .pallas import tpu as _pltpu
    rec = _trace._rec
    if rec is None:		# outside a kernel: a ref of the host's
        from ._state import empty_host_ref
        return empty_host_ref(ty, memory_space)
    # freed where the innermost pl.run_scoped (or emit_pipeline) body ends,
    # else the kernel's: it must not start under a pl.when or device loop
    # that body is outside of
    scoped = rec.__dict__.get("scoped_bodies")
    depth = (scoped[-1][1], scoped[-1][2]) if scoped else (0, 0)
    if (len(rec.conds), len(rec.loops)) != depth:
        raise _trace.trace_error("jax.empty_ref under pl.when or in a device loop: "
                                 "allocate it at the body's top level")
    space = memory_space or _pltpu.VMEM
    if not isinstance(space, _pltpu._MemorySpace) or space._code not in (0, 1):
        raise _trace.trace_error("jax.empty_ref: memory_space must be pltpu.VMEM or "
                                 "pltpu.SMEM, not %r" % (space,))
    kernel_scopes = scoped[-1][0] if scoped else rec.__dict__.setdefault("kernel_scopes", [])
    t = space(ty.shape, ty.dtype)
    _empty_refs[0] += 1
    ref = _trace.Ref("_empty%d" % _empty_refs[0], t.shape, t.dtype,
                     space="smem" if space._code == 1 else "vmem")
    rec.open_scope(ref, t._space_code, as_dtype(t.dtype).code,
                   "jax.empty_ref(%r)" % (t,))
    kernel_scopes.append(ref.name)
    return ref
