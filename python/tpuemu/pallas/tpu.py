# SPDX-License-Identifier: MIT
"""jax.experimental.pallas.tpu over libtpurt (tpuemu.pallas.tpu as pltpu)."""
from . import GridSpec, run_scoped  # noqa: F401  (pltpu.run_scoped, as older JAX has it)
from . import Blocked, BoundedSlice, Element, Squeezed, _grids, _pipeline_env, program_id, when
from ._einshape import einshape  # noqa: F401  (pltpu.einshape)
from ._mxu_fifo import matmul_lhs_fifo, matmul_pop_fifo, matmul_push_rhs  # noqa: F401
import dataclasses
import enum
import itertools
import logging
import math

import numpy as np

from .. import _trace, lax, numpy as jnp
from .._trace import Ref, Window, scalar, trace_error
from ._tpu_info import (ChipVersion, ChipVersionBase, SparseCoreInfo,  # noqa: F401
                        TpuInfo, _chip_info, chip_version_from_device_kind,
                        get_tpu_info_for_chip)


class PrefetchScalarGridSpec(GridSpec):
    def __init__(self, num_scalar_prefetch=0, grid=(), in_specs=None, out_specs=None,
                 scratch_shapes=()):
        super().__init__(grid, in_specs, out_specs, scratch_shapes, num_scalar_prefetch)


class _MemorySpace:
    def __init__(self, name, code):
        self._space = name
        self._code = code

    def __call__(self, shape, dtype):
        return _Scratch(shape, dtype, self._code)

    def like(self, x):
        """pltpu.VMEM.like(x): scratch of x's shape and dtype."""
        return self(x.shape, x.dtype)

    def __matmul__(self, mesh):
        """pltpu.VMEM @ mesh: the space on the mesh's cores (here, the space)."""
        return self

    def __repr__(self):
        return self._space.upper()


class _Scratch:
    def __init__(self, shape, dtype, code):
        from ._keys import KeyDtype
        self.shape = tuple(shape)
        self.dtype = dtype
        self._space_code = code
        if isinstance(dtype, KeyDtype):
            # Pallas keys: int32 words, (1, 2) per key, read back as keys
            self._key_batch = len(self.shape)
            self.shape, self.dtype = self.shape + (1, 2), _trace.int32

    def __matmul__(self, mesh):
        """pltpu.VMEM(shape, dtype) @ mesh: the type on the mesh's cores."""
        return self

    def __repr__(self):
        from .._trace import dtype_text
        return "pltpu.%s(%r, %s)" % ("SMEM" if self._space_code == 1 else "VMEM", self.shape,
                                     dtype_text(self.dtype))


VMEM = _MemorySpace("vmem", 0)
SMEM = _MemorySpace("smem", 1)
ANY = HBM = _MemorySpace("any", 2)
# pinned host memory: operands a kernel only copies, as pl.ANY's; held in
# the device's HBM here (the timing model charges HBM bandwidth, not PCIe)
HOST = _MemorySpace("host", 6)
# semaphores as pallas_call operands: an output of pltpu.SemaphoreType.DMA(())
# and an input spec'd BlockSpec(memory_space=pltpu.SEMAPHORE) pass counts
# between calls (pallas/__init__.py _semaphore_call)
SEMAPHORE = _MemorySpace("semaphore", 5)


class MemorySpace:
    """pltpu.MemorySpace (older JAX: TPUMemorySpace): the spaces by name."""
    VMEM = VMEM
    SMEM = SMEM
    ANY = ANY
    HBM = HBM
    HOST = HOST
    SEMAPHORE = SEMAPHORE


TPUMemorySpace = MemorySpace


# pltpu.PARALLEL, pltpu.ARBITRARY (GridDimensionSemantics): CompilerParams and
# emit_pipeline take them or their names. CORE_PARALLEL asks for a split
# across TensorCores, which is what this device does with a parallel dimension.
PARALLEL = "parallel"
ARBITRARY = "arbitrary"
CORE_PARALLEL = "core_parallel"


class GridDimensionSemantics:
    PARALLEL = PARALLEL
    ARBITRARY = ARBITRARY
    CORE_PARALLEL = CORE_PARALLEL


def _semantics(entries):
    if entries is None:
        return None
    out = []
    for e in entries:
        e = str(getattr(e, "value", e)).lower()
        # "sequential" is older JAX's name of arbitrary
        out.append({CORE_PARALLEL: PARALLEL, "sequential": ARBITRARY}.get(e, e))
    return tuple(out)


class SideEffectType(enum.Enum):
    """CompilerParams(has_side_effects=...)'s kinds, as JAX's. They tell
    XLA whether it may merge or drop a call; tpuemu runs every call it is
    given, so all three (and True/False) run the kernel alike."""
    # no side effects: XLA may deduplicate it, or drop it if unused
    PURE = "pure"
    # not deduplicated, but dropped if its outputs are unused
    DATAFLOW_SIDE_EFFECTING = "dataflow_side_effecting"
    # neither deduplicated nor dropped
    SIDE_EFFECTING = "side_effecting"


def _side_effect_type(params):
    """@params's has_side_effects checked as JAX's lowering checks it: a
    bool or a SideEffectType, else JAX's ValueError."""
    effects = getattr(params, "has_side_effects", False)
    if isinstance(effects, (bool, SideEffectType)):
        return effects
    raise ValueError("Invalid side effect type: %s" % (effects,))


# CompilerParams' fields that tune Mosaic's code or checks without changing
# what a kernel computes here (or name collectives, of which one device has
# none), with JAX's defaults; kept as given, for .replace and reading back
_COMPILER_HINTS = {
    "allow_input_fusion": None, "collective_id": None, "flags": None,
    "internal_scratch_in_bytes": None, "serialization_format": 1,
    "disable_semaphore_checks": False, "skip_device_barrier": False,
    "allow_collective_id_without_custom_barrier": False,
    "shape_invariant_numerics": True, "use_tc_tiling_on_sc": None,
    "needs_layout_passes": True, "fuse_transposed_lhs_in_matmul": False,
}


class CompilerParams:
    """pltpu.CompilerParams, JAX's fields: dimension_semantics (the grid's
    split and order), vmem_limit_bytes (the device's VMEM limit),
    has_side_effects (checked by pallas_call) and disable_bounds_checks
    (_trace's Ref._read_past_end) act here; the rest (_COMPILER_HINTS) tune
    Mosaic and are kept as given. An unknown field is refused, as JAX's
    dataclass refuses it."""

    def __init__(self, dimension_semantics=None, allow_input_fusion=None,
                 vmem_limit_bytes=None, *, has_side_effects=False,
                 disable_bounds_checks=False, **hints):
        unknown = sorted(set(hints) - set(_COMPILER_HINTS))
        if unknown:
            raise TypeError("CompilerParams.__init__() got an unexpected keyword argument "
                            "'%s'" % unknown[0])
        self.dimension_semantics = _semantics(dimension_semantics)
        self.vmem_limit_bytes = vmem_limit_bytes
        # checked by pallas_call, as JAX checks it when lowering the call
        self.has_side_effects = has_side_effects
        # static reads past a VMEM ref's end give zeros there (_trace's
        # Ref._read_past_end) where the TPU's give what lies beyond
        self.disable_bounds_checks = bool(disable_bounds_checks)
        for name, default in _COMPILER_HINTS.items():
            setattr(self, name, hints.get(name, default))
        self.allow_input_fusion = allow_input_fusion

    def replace(self, **changes):
        """A copy with @changes, as JAX's dataclasses.replace."""
        fields = {n: getattr(self, n) for n in _COMPILER_HINTS}
        fields.update(dimension_semantics=self.dimension_semantics,
                      vmem_limit_bytes=self.vmem_limit_bytes,
                      has_side_effects=self.has_side_effects,
                      disable_bounds_checks=self.disable_bounds_checks)
        fields.update(changes)
        return CompilerParams(**fields)


TPUCompilerParams = CompilerParams


class TensorCore:
    def __init__(self, core_id):
        self.id = core_id

    def __repr__(self):
        return "TensorCore(id=%d)" % self.id


class TensorCoreMesh:
    """pltpu.TensorCoreMesh(axis_name): the device's TensorCores as one mesh
    axis, for pl.kernel (num_cores: the device's, unless given)."""

    def __init__(self, axis_name="core", num_cores=None, devices=None):
        if isinstance(axis_name, (list, tuple)):
            if len(axis_name) != 1:
                raise TypeError("pltpu.TensorCoreMesh: one axis name, not %r" % (axis_name,))
            axis_name = axis_name[0]
        self.axis_name = axis_name
        self.num_cores = int(num_cores) if num_cores is not None else get_tpu_info().num_cores
        if not 1 <= self.num_cores <= get_tpu_info().num_cores:
            raise ValueError("pltpu.TensorCoreMesh: %d cores on a device of %d"
                             % (self.num_cores, get_tpu_info().num_cores))
        self.axis_names = (axis_name,)
        self.shape = {axis_name: self.num_cores}
        self.devices = tuple(TensorCore(i) for i in range(self.num_cores))

    def __repr__(self):
        return "TensorCoreMesh(axis_name=%r, num_cores=%d)" % (self.axis_name, self.num_cores)


def create_tensorcore_mesh(axis_name, devices=None, num_cores=None):
    """pltpu.create_tensorcore_mesh: a TensorCoreMesh."""
    return TensorCoreMesh(axis_name, num_cores=num_cores)


def get_tpu_info():
    """pltpu.get_tpu_info(): the open device's TpuInfo. The device models
    a v5e (uapi/tpu_params.h), so this is JAX's v5e row with each field the
    device has a parameter for taken from the device: a sim or QEMU device
    configured with other cores, memories or rates reports those."""
    from .._lib import check, device, ffi, lib
    info = ffi.new("struct tpurt_device_info *")
    check(lib.tpurt_device_info(device(), info), "tpurt_device_info")
    # _chip_info, not get_tpu_info_for_chip: a device of cores=2 is allowed
    return dataclasses.replace(
        _chip_info(ChipVersion.TPU_V5E, int(info.cores)),
        mxu_column_size=int(info.mxu_dim),
        num_mxus=int(info.mxu_count),
        vmem_capacity_bytes=int(info.vmem_size),
        smem_capacity_bytes=int(info.smem_size),
        hbm_capacity_bytes=int(info.hbm_size),
        mem_bw_bytes_per_second=int(info.hbm_bandwidth),
        bf16_ops_per_second=int(info.peak_flops_bf16),
        int8_ops_per_second=int(info.peak_ops_int8))


def device_kind():
    """jax.devices()[0].device_kind: what a real TPU of the chip the device
    models reports (a v5e's is "TPU v5 lite")."""
    return "TPU v5 lite"


def is_tpu_device():
    """pltpu.is_tpu_device(): whether the default device is a TPU JAX knows."""
    return chip_version_from_device_kind(device_kind()) is not None


dma_semaphore = _trace.dma_semaphore


class _SemaphoreKind:
    """pltpu.SemaphoreType.DMA / .REGULAR: one semaphore (shape ()), or
    ((n,)), ((n, m)), ... an array of them, indexed sem.at[i, j]. The
    device's semaphores are a flat array (_device_shape): libtpurt indexes
    an N-D one row-major."""

    def __init__(self, code, name):
        self._space_code = code
        self.shape = ()
        self.dtype = _trace.SemDType(dma_semaphore if name == "DMA" else _trace.semaphore)
        self._name = name

    def __call__(self, shape=()):
        s = _SemaphoreKind(self._space_code, self._name)
        s.shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
        return s

    @property
    def _device_shape(self):
        return self.shape or (1,)

    def __repr__(self):
        return "pltpu.SemaphoreType.%s%s" % (self._name, "" if not self.shape else (self.shape,))


class SemaphoreType:
    DMA = _SemaphoreKind(3, "DMA")
    REGULAR = _SemaphoreKind(4, "REGULAR")


def _ref_text(r, what):
    if isinstance(r, (Ref, Window, _MergedRows)):
        return r.render()
    raise trace_error("%s must be a ref or ref.at[...], not %r" % (what, r))


def _sem_text(sem, verb):
    """A semaphore operand: a scalar semaphore or one element of an array
    (as Pallas, an array itself cannot be signalled or waited on)."""
    if isinstance(sem, Ref) and sem.space == "sem" and sem.shape:
        raise trace_error("Cannot %s on semaphore array '%s' of shape %r: name one "
                          "element, %s.at[%s]" % (verb, sem.name, sem.shape, sem.name,
                                                  ", ".join("ijkl"[:len(sem.shape)])))
    if isinstance(sem, Ref) and sem.space != "sem" or \
            isinstance(sem, Window) and sem.ref.space != "sem":
        raise trace_error("the semaphore: '%s' is not a semaphore (scratch of "
                          "pltpu.SemaphoreType.DMA or REGULAR)" % sem.name)
    return _ref_text(sem, "the semaphore")


def _base(r):
    return r.ref if isinstance(r, Window) else r


def _operand(what):
    """A copy's operand as a Ref or Window: a reshaped ref (ref.reshape,
    windows of it) names the window of its base that it is, or is the
    _MergedRows of a reshape that merges its base's leading dimensions."""
    def f(x):
        if isinstance(x, _trace.ReshapedRef):
            merged = _MergedRows.of(x)
            return merged if merged is not None else x.as_window(what)
        return x
    return f


# A copy through a merging reshape moves at most this many pieces.
_MERGED_PIECES_MAX = 256


class _MergedRows:
    """A copy's operand that is ref.reshape(n * m, ...) of a ref of shape
    (n, m, ...) (the leading k dimensions merged into one): the copy moves
    one piece per index of the first k - 1, each the base's window there
    (m, ...) and the other operand's m rows at that offset, all on the one
    semaphore; its wait waits on each piece (a DMA semaphore counts bytes,
    so the pieces add up to the whole copy)."""

    def __init__(self, r, k):
        self.r = r
        self.m = r.base_shape[k - 1]
        self.lead = tuple(r.base_shape[:k - 1])

    @classmethod
    def of(cls, r):
        b, s = tuple(r.base_shape), tuple(r.shape)
        if not (isinstance(r.base, Ref) or isinstance(r.base, Window) and
                r.base.dims is not None and all(
                    isinstance(e, _trace.Slice) and not e.traced for e in r.base.dims)) or \
                len(s) < 1:
            return None
        for k in range(2, len(b) + 1):
            if math.prod(b[:k]) == s[0] and s[1:] == b[k:]:
                return cls(r, k)
        return None

    def render(self):
        return self.r.render()

    def pieces(self, other, what):
        """[(this piece, the other's)]: the base at each leading index, and
        @other's rows there."""
        n = math.prod(self.lead)
        if n > _MERGED_PIECES_MAX:
            raise trace_error("%s: %s merges %d windows of its base; a copy through it "
                              "moves at most %d" % (what, self.render(), n, _MERGED_PIECES_MAX))
        if isinstance(other, _MergedRows):
            raise trace_error("%s: both %s and %s merge their bases' dimensions; copy "
                              "between the bases" % (what, self.render(), other.render()))
        out = []
        for flat, idx in enumerate(itertools.product(*(range(d) for d in self.lead))):
            mine = _at_lead(self.r.base, idx)
            out.append((mine, _rows_of(other, flat * self.m, self.m, what)))
        return out


def _at_lead(base, idx):
    """base.at[idx] of a Ref, or of a Window of static slices (the leading
    slices indexed at their start + idx)."""
    if isinstance(base, Ref):
        return base.at[idx]
    return _window(base.ref, [_trace._offset(e.start, i) for e, i in zip(base.dims, idx)] +
                   list(base.dims[len(idx):]))


def _rows_of(w, start, size, what):
    """Rows [start, start + size) of a copy operand's first dimension."""
    if isinstance(w, Ref):
        return w.at[_trace.Slice(start, size)]
    if isinstance(w, Window) and w.dims is not None:
        for d, e in enumerate(w.dims):
            if isinstance(e, _trace.Slice) and not e.traced:
                return _with_dim(w, d, _trace.Slice(_trace._offset(e.start, start), size))
    raise trace_error("%s: %s beside a merging reshape must be a ref or a window with "
                      "static slices" % (what, _ref_text(w, "the other operand")))


def _writable(d):
    """A copy's destination: an input in HBM aliased to an output
    (input_output_aliases) names the output, its buffer; any other input
    is refused."""
    ref = _base(d)
    if not isinstance(ref, Ref) or ref.writable:
        return d
    out = getattr(ref, "alias", None)
    if out is None:
        raise trace_error("copy into input '%s' (inputs are read-only)" % ref.name)
    if isinstance(d, Ref):
        return out
    if d.dims is None:
        return Window(out, out.name + d.text[len(ref.name):])
    return _window(out, d.dims)


def _traced_dim(w):
    """(position among the window's sliced dimensions, dimension, Slice) of
    @w's pl.ds with a traced size, or None if its shape is static."""
    if not isinstance(w, Window) or not w.traced:
        return None
    found = [(pos, d, e) for pos, (d, e) in
             enumerate((d, e) for d, e in enumerate(w.dims) if isinstance(e, _trace.Slice))
             if e.traced]
    if len(found) > 1:
        raise trace_error("%s: a copy takes one pl.ds with a traced size, not %d"
                          % (w.text, len(found)))
    return found[0]


def _window(ref, dims):
    """The Window of @ref at @dims (Slices and ints)."""
    return Window(ref, "%s.at[%s]" % (ref.name, ref._index(tuple(dims), True)), tuple(dims))


def _with_dim(w, d, sl):
    dims = list(w.dims)
    dims[d] = sl
    return _window(w.ref, dims)


# A copy with a traced size moves chunks of this many elements along that
# dimension (where both refs are that long), then the rest one by one.
_CHUNK = 8


def _copy_pieces(src, dst, emit):
    """Call emit(src, dst) for the copy of @src into @dst: once if their
    shapes are static; with a pl.ds of a traced size (the same one in
    both, in the same sliced position), inside device loops of fixed-size
    copies that cover it exactly: size // 8 chunks of 8, then size % 8
    of 1 (of 1 only where a ref is shorter than 8 along it). The matching
    .wait() runs the same loops, waiting on each piece."""
    if isinstance(src, _MergedRows) or isinstance(dst, _MergedRows):
        what = "a copy of %s into %s" % (src.render(), dst.render())
        if isinstance(src, _MergedRows):
            pairs = src.pieces(dst, what)
        else:
            pairs = [(s_, d_) for d_, s_ in dst.pieces(src, what)]
        for ps, pd in pairs:
            _copy_pieces(ps, pd, emit)
        return
    ts, td = _traced_dim(src), _traced_dim(dst)
    if ts is None and td is None:
        emit(src, dst)
        return
    if ts is None or td is None:
        w, other = (src, dst) if ts is not None else (dst, src)
        raise trace_error("a copy of %s into %s: %s has a traced size and %s a static "
                          "shape; give both the same pl.ds size"
                          % (_ref_text(src, "the source"), _ref_text(dst, "the destination"),
                             w.text, _ref_text(other, "the other")))
    (ps, ds_, es), (pd, dd, ed) = ts, td
    if ps != pd or es.size.render() != ed.size.render():
        raise trace_error("a copy of %s into %s: the traced sizes must be the same value in "
                          "the same sliced dimension (%s in position %d, %s in %d)"
                          % (src.text, dst.text, es.size.render(), ps, ed.size.render(), pd))
    size = es.size
    long_enough = src.ref.shape[ds_] >= _CHUNK and dst.ref.shape[dd] >= _CHUNK
    chunk = _CHUNK if long_enough else 1
    what = "a copy of pl.ds(..., %s)" % size.render()

    def piece(offset, n):
        def body(t, _):
            at = t * n if n > 1 else t
            at = at if isinstance(offset, int) and offset == 0 else offset + at
            emit(_with_dim(src, ds_, _trace.Slice(_trace._offset(es.start, at), n)),
                 _with_dim(dst, dd, _trace.Slice(_trace._offset(ed.start, at), n)))
        return body
    if chunk > 1:
        lax._device_fori(0, size // chunk, piece(0, chunk), None, what)
        lax._device_fori(0, size % chunk, piece((size // chunk) * chunk, 1), None, what)
    else:
        lax._device_fori(0, size, piece(0, 1), None, what)


def _copy_operands(src, dst, what):
    """A copy's source and destination (each one ref or window, or a
    pl.select_ref of them), checked: the destination writable."""
    src = _map_choices(src, _operand("%s source" % what))
    dst = _map_choices(_map_choices(dst, _operand("%s destination" % what)), _writable)
    for _, x in _choices(src):
        _ref_text(x, "the source")
    for _, x in _choices(dst):
        _ref_text(x, "the destination")
    return src, dst


class AsyncCopy:
    """pltpu.make_async_copy(src, dst, sem): .start() and .wait() record
    the statement syntax's copy statements (pl.select_ref operands: one
    per choice, under pl.when; a traced pl.ds size: _copy_pieces). One
    never started nor waited on logs JAX's error when it is dropped."""

    _used = True	# until __init__ has checked its operands

    def __init__(self, src, dst, sem, add=False):
        self._by_value = None
        if add or _is_view(src) or _is_view(dst):
            # its values moved at the start (_copy_values); the semaphore
            # then counts a copy of the destination's memory
            self._by_value = (src, dst, add)
            src = dst = _view_base(dst)
        src, dst = _copy_operands(src, dst, "the copy's")
        for _, m in _choices(sem):
            _sem_text(m, "signal")
        self.src, self.dst, self.sem = src, dst, sem
        self._used = False

    def __del__(self):
        if not self._used:
            # as JAX's: exceptions in __del__ are ignored, so it logs
            logging.error("AsyncCopyDescriptor was not used."
                          " Did you mean to call `start` or `wait` on it?")

    def _each(self, fn):
        _each_choice((self.src, self.dst, self.sem), lambda s, d, m: _copy_pieces(
            s, d, lambda ps, pd: fn(ps, pd, m)))

    def _text(self, src, dst, sem):
        return "pltpu.make_async_copy(%s, %s, %s)" % (src.render(), dst.render(),
                                                      _sem_text(sem, "signal"))

    def start(self):
        self._used = True
        if self._by_value is not None:
            _copy_values(*self._by_value)

        def one(src, dst, sem):
            if _is_regular(sem):
                # a DMA signalling a REGULAR semaphore (TPU v6+) by 1 when
                # done: the device's copies signal DMA semaphores, so the
                # copy is made and waited for here, then the signal sent
                sync_copy(src, dst)
                semaphore_signal(sem, 1)
                return
            rec = _sem_changes(sem)
            if isinstance(_base(dst), Ref):
                _trace._protect(rec, _base(dst).name, None)
            rec.emit(self._text(src, dst, sem) + ".start()")
        self._each(one)
        return self

    def wait(self):
        self._used = True
        for _, sem in _choices(self.sem):
            sem = _base(sem)
            if _is_regular(sem):
                raise _RegularSemaphoreWait(
                    "a DMA's .wait() on '%s', a REGULAR semaphore: a copy waits on a "
                    "pltpu.SemaphoreType.DMA one (where a TPU lets a DMA signal a regular "
                    "semaphore, wait with pl.semaphore_wait)\n  at %s"
                    % (sem.name, _trace.where()))
        self._each(lambda src, dst, sem: _sem_changes(sem).emit(
            self._text(src, dst, sem) + ".wait()"))
        return self


def _is_view(x):
    return isinstance(x, (_trace.BitcastRef, _trace.ReadView))


def _copy_values(src, dst, add=False):
    """A copy made as values: whose source or destination is a bitcast
    view of a ref (or a chain of transforms of one), as a DMA moves bytes
    and a view's values are not its ref's bytes here (a bitcast packs
    rows; int16 is held in int32 words); or one that adds the source into
    the destination (@add, a DMA's accumulate). A source in HBM is copied
    into VMEM and read (through the view) there; the value is stored
    through the destination's view, into VMEM first if it is in HBM, and
    with @add the destination's value is read there first."""
    if isinstance(dst, _trace.ReadView):
        raise trace_error("a copy into %s: a copy's destination may be a bitcast of a ref, "
                          "not a chain of transforms (they are read-only)" % dst.render())
    _in_vmem(_view_base(src), "_view_source", lambda base: _stored_through(
        dst, _rebased(src, base)[...] if _is_view(src) else base[...], add))


def _view_base(v):
    """The ref or window under a view (a chain's bitcast's)."""
    while _is_view(v):
        v = v.src if isinstance(v, _trace.ReadView) else v.base
    return v


def _rebased(v, base):
    """View @v of its ref's memory as the same view of @base."""
    if isinstance(v, _trace.ReadView):
        return _trace.ReadView(_rebased(v.src, base), v.shape, v.dtype, v.text, v.steps)
    return _trace.BitcastRef(base, v.dtype)


def _shape_of(r):
    return tuple(r.shape) if isinstance(r, Ref) else _trace._window_shape(r.dims)


def _in_vmem(r, name, body, load=True, store=False):
    """body(r), r a ref or window, if it is in VMEM or SMEM, else body of a
    VMEM scratch @name holding it (copied in with @load, back after with
    @store)."""
    if _base(r).space in ("vmem", "smem"):
        return body(r)
    from . import run_scoped

    def scoped(**bufs):
        if load:
            sync_copy(r, bufs[name])
        body(bufs[name])
        if store:
            sync_copy(bufs[name], r)
    run_scoped(scoped, **{name: VMEM(_shape_of(r), _base(r).dtype)})


def _stored_through(dst, value, add=False):
    """@value stored into @dst, a ref, a window or a bitcast view of one
    (with @add, added to its value)."""
    def store(base):
        target = _rebased(dst, base) if _is_view(dst) else base
        target[...] = target[...] + value if add else value
    _in_vmem(_view_base(dst), "_view_destination", store, load=add, store=True)


def _is_regular(sem):
    """Whether @sem (a semaphore ref or an element of one) is REGULAR."""
    return getattr(getattr(_base(sem), "dtype", None), "kind", None) is _trace.semaphore


class _RegularSemaphoreWait(_trace.TraceError, ValueError):
    """As Pallas's ValueError: a DMA wait on a regular semaphore."""


def make_async_copy(src_ref, dst_ref, sem):
    """pltpu.make_async_copy(src_ref, dst_ref, sem), JAX's parameter names
    (the distributed guide passes them by keyword)."""
    return AsyncCopy(src_ref, dst_ref, sem)


def async_copy(src, dst, sem, *, priority=0, add=False):
    """pltpu.async_copy: make_async_copy(...) already started; with @add
    the source is added into the destination (a DMA's accumulate: made as
    values, _copy_values). @priority picks a DMA queue on a TPU; one queue
    here, so it is accepted and has no effect."""
    del priority
    return AsyncCopy(src, dst, sem, add=add).start()


def _choices(x):
    """[(condition text or None, operand)]: a pl.select_ref with a traced
    index is one per candidate, else @x itself."""
    from . import _Selected
    if isinstance(x, _Selected):
        return x.choices()
    return [(None, x)]


def _map_choices(x, fn):
    """@x with fn applied to it, or to each pl.select_ref candidate."""
    from . import _Selected
    if isinstance(x, _Selected):
        return _Selected(x.index, tuple(fn(r) for r in x.refs))
    return fn(x)


def _each_choice(operands, fn):
    """fn(*operands) once per combination of their pl.select_ref choices,
    each under pl.when of its index."""
    from . import _Selected
    rec = _trace.recorder()
    for k, x in enumerate(operands):
        if isinstance(x, _Selected):
            for cond, r in x.choices():
                rec.conds.append(cond)
                try:
                    _each_choice(operands[:k] + (r,) + operands[k + 1:], fn)
                finally:
                    rec.conds.pop()
            return
    fn(*operands)


def _block_window(ref, spec, idx, what):
    """The window of @ref that @spec's block at grid point @idx covers, and
    the block's buffer shape (squeezed dimensions left out)."""
    w, shape, _ = _block_window_bounded(ref, spec, idx, what)
    return w, shape


def _block_window_bounded(ref, spec, idx, what):
    """_block_window, and the buffer's window the block fills: None, or,
    with pl.BoundedSlice dimensions, the window of their sizes' rows."""
    bshape = getattr(spec, "block_shape", None) or tuple(ref.shape)
    if len(bshape) != len(ref.shape):
        raise trace_error("%s: block shape %r for a ref of shape %r" % (what, bshape, ref.shape))
    imap = getattr(spec, "index_map", None)
    # idx None: only the block's shape is wanted. pl.program_id and
    # pl.num_programs in an emit_pipeline's index map are the pipeline's
    bidx = None
    if imap is not None and idx is not None:
        if _pipeline_grids:
            _pipeline_env.append((idx, _pipeline_grids[-1]))
        try:
            bidx = imap(*idx)
        finally:
            if _pipeline_grids:
                _pipeline_env.pop()
    bidx = bidx if isinstance(bidx, (tuple, list)) or bidx is None else (bidx,)
    parts = []
    dims = tuple(_pipeline_dim(b, what) for b in bshape)
    bounded = []	# the buffer's slice of each bounded dimension
    clipped = False	# an edge block, cut at the array's end
    for d, ((b, kind), n) in enumerate(zip(dims, ref.shape)):
        i = bidx[d] if bidx is not None else \
            (_trace.Slice(0, b) if kind == "bounded" else 0)
        if kind == "bounded":
            if not isinstance(i, _trace.Slice):
                raise _BoundedIndex("Must return a pl.ds from the index_map for a "
                                    "BoundedSlice dimension (dimension %d of %s gave %s)\n"
                                    "  at %s" % (d, what, _trace._fmt(i), _trace.where()))
            if isinstance(i.size, int) and i.size > b:
                raise trace_error("%s: pl.ds(%s, %d) in a pl.BoundedSlice(%d) dimension"
                                  % (what, _trace._fmt(i.start), i.size, b))
            parts.append(i)
            bounded.append(_trace.Slice(0, i.size))
            continue
        if b is None:
            parts.append(i)		# squeezed: the index is the element's
            continue
        if kind == "element":
            bounded.append(slice(None))
            parts.append(_trace.Slice(i, b))	# pl.Element: the element offset
        elif n % b and not isinstance(i, int):
            raise trace_error("%s: block %r does not divide dimension %d of %r, and the block "
                              "index is traced (a pipeline of more than %d steps, or a dynamic "
                              "grid, runs as a device loop): edge blocks inside emit_pipeline "
                              "need static block indices" % (what, bshape, d, ref.shape,
                                                            lax.UNROLL_MAX_TRIPS))
        elif n % b and (i + 1) * b > n:
            # an edge block: its rows in the array copied, the rest of the
            # buffer left as it was (Pallas pads with garbage too)
            size = n - i * b
            if size <= 0:
                raise trace_error("%s: block %d of dimension %d (%d) of %r is past its end"
                                  % (what, i, d, b, ref.shape))
            parts.append(_trace.Slice(i * b, size))
            bounded.append(_trace.Slice(0, size))
            clipped = True
        else:
            bounded.append(slice(None))
            parts.append(_trace.Slice(i * b, b))
    shape = tuple(b for b, _ in dims if b is not None)
    has_bounded = any(k == "bounded" for _, k in dims) or clipped
    return ref.at[tuple(parts)], shape, tuple(bounded) if has_bounded else None


class _BoundedIndex(_trace.TraceError, ValueError):
    """As Pallas's ValueError: a BoundedSlice dimension indexed without pl.ds."""


def _pipeline_dim(b, what):
    """(size or None, "block" / "element" / "bounded") of an emit_pipeline
    block dimension."""
    if isinstance(b, Element):
        if b.padding != (0, 0):
            raise trace_error("%s: pl.Element(%d, padding=%r): padding is not supported "
                              "inside emit_pipeline" % (what, b.block_size, b.padding))
        return b.block_size, "element"
    if isinstance(b, BoundedSlice):
        return b.block_size, "bounded"
    if b is None or isinstance(b, Squeezed):
        return None, "block"
    return (b.block_size if isinstance(b, Blocked) else b), "block"


def _copy_block(ref, spec, idx, buf, out):
    """An emit_pipeline block copied into its buffer (or, @out, back): with
    pl.BoundedSlice dimensions, only their sizes' rows of the buffer."""
    w, _, bounded = _block_window_bounded(ref, spec, idx, "pltpu.emit_pipeline")
    b = buf if bounded is None else buf.at[bounded]
    if out:
        sync_copy(b, w)
    else:
        sync_copy(w, b)


def _cores(core_axis, core_axis_name):
    """(cores, this core's index) of emit_pipeline's core_axis (a parallel
    dimension of the enclosing pallas_call's grid) or core_axis_name (a
    pl.kernel mesh axis); None if neither is given."""
    from .kernel import axis_index, axis_size
    if core_axis is not None and core_axis_name is not None:
        raise trace_error("pltpu.emit_pipeline: only one of core_axis and core_axis_name")
    if core_axis_name is not None:
        return axis_size(core_axis_name), axis_index(core_axis_name)
    if core_axis is None:
        return None
    if not _grids or not 0 <= int(core_axis) < len(_grids[-1]):
        raise trace_error("pltpu.emit_pipeline: core_axis %r is not a dimension of the "
                          "pallas_call's grid" % (core_axis,))
    return _grids[-1][int(core_axis)], program_id(int(core_axis))


def _partition(grid, semantics, cores):
    """The share of @grid that this core runs, as JAX's emit_pipeline splits a
    grid over @cores (_cores: their count and this one's index): the first
    parallel dimension that the cores divide, or else the largest parallel
    one, the first cores taking one step more. Returns (local grid, the
    split dimension or None, its offset, its steps on this core or None if
    all cores run the same count)."""
    if cores is None:
        return grid, None, 0, None
    cores, core = cores
    if any(isinstance(g, _trace.Value) for g in grid):
        if cores == 1:
            return grid, None, 0, None
        raise trace_error("pltpu.emit_pipeline: a dynamic grid %r split over %d cores is "
                          "not supported (a dynamic grid runs on one core)"
                          % (tuple(_trace._fmt(g) for g in grid), cores))
    semantics = _semantics(semantics) or ("arbitrary",) * len(grid)
    if len(semantics) != len(grid):
        raise trace_error("pltpu.emit_pipeline: %d dimension_semantics for a grid of %d "
                          "dimensions" % (len(semantics), len(grid)))
    parallel = [d for d, s in enumerate(semantics) if s == "parallel"]
    if cores == 1 or not parallel:
        return grid, None, 0, None
    even = [d for d in parallel if grid[d] % cores == 0]
    d = even[0] if even else max(parallel, key=lambda k: (grid[k], -k))
    base, rem = divmod(grid[d], cores)
    local = list(grid)
    local[d] = base + (rem > 0)
    if not rem:
        return tuple(local), d, core * base, None
    offset = jnp.where(core < rem, core * (base + 1), core * base + rem)
    return tuple(local), d, offset, jnp.where(core < rem, base + 1, base)


def _step_index(local, split, offset, t):
    """The grid index of row-major step number @t of the local grid."""
    li = []
    for g in reversed(local):
        li.insert(0, 0 if isinstance(g, int) and g == 1 else t % g)
        t = t // g
    return tuple(i + offset if d == split else i for d, i in enumerate(li))


def _device_steps(local, split, offset, nsteps, step):
    """emit_pipeline's steps as one device loop over the row-major step
    number t, each grid index t's digit in the local grid's extents;
    step(idx, t)."""
    def trip(t, _):
        step(_step_index(local, split, offset, t), t)
    lax._device_fori(0, nsteps, trip, None, "pltpu.emit_pipeline")


def _block_index(spec, idx):
    """@spec's block index at pipeline grid point @idx (its index map's)."""
    imap = getattr(spec, "index_map", None)
    if imap is None:
        return ()
    _pipeline_env.append((idx, _pipeline_grids[-1]))
    try:
        b = imap(*idx)
    finally:
        _pipeline_env.pop()
    b = b if isinstance(b, (tuple, list)) else (b,)
    return tuple(getattr(e, "start", e) if isinstance(e, _trace.Slice) else e for e in b)


def _new_block(spec, idx, prev, t):
    """True (a bool, or a traced one) where step @t's block of @spec is not
    the previous step's: its first visit."""
    # a count of the differences, > 0: ints, as a long condition is spilled
    # to SMEM as one (a spilled bool would not be a condition)
    n = jnp.where(t == 0, 1, 0)
    for a, b in zip(_block_index(spec, idx), _block_index(spec, prev)):
        c = a != b
        if c is True:
            return True
        if c is not False:
            n = n + jnp.where(c, 1, 0)
    return n > 0


class _EmptyGrid(_trace.TraceError, ValueError):
    """As Pallas's ValueError: an emit_pipeline grid with a dimension <= 0."""


class _Prefetched(_trace.TraceError, ValueError):
    """As Pallas's ValueError: a prefetched input without its window buffer."""


def _pytree_leaves(tree):
    from .. import _pytree
    return _pytree.flatten(tree)[0]


class _NoBlockSpec:
    """pl.no_block_spec: an emit_pipeline operand the pipeline leaves alone
    (the body gets None in its place)."""

    def __repr__(self):
        return "pl.no_block_spec"


no_block_spec = _NoBlockSpec()


def _spec_space(spec):
    """An emit_pipeline spec's memory space: "any", "smem" or "vmem"."""
    ms = getattr(spec, "memory_space", None)
    if ms is None:
        return "vmem"
    if isinstance(ms, _MemorySpace):
        return {0: "vmem", 1: "smem", 2: "any"}[ms._code]
    return {"any": "any", "smem": "smem"}.get(ms, "vmem")


class _PipelineState:
    """The first argument of an emit_pipeline body with
    _explicit_indices=True: .index, the step's grid indices."""

    def __init__(self, index, grid):
        self.index = index
        self.grid = grid


def _pipeline_grid(grid):
    """emit_pipeline's grid: Python ints, or scalar-core values (a dynamic
    grid: jnp.array(n), an SMEM element), run as one device loop."""
    out = []
    for g in (grid if isinstance(grid, (tuple, list)) else (grid,)):
        if isinstance(g, _trace.Value):
            if not g.scalar:
                raise trace_error("pltpu.emit_pipeline: a grid dimension (%s) is an array; "
                                  "a dynamic one is a scalar" % g.render())
            out.append(g)
            continue
        try:
            out.append(int(g))
        except TypeError:
            raise trace_error("pltpu.emit_pipeline: the grid %r must be ints or scalars"
                              % (grid,)) from None
    if any(isinstance(g, int) and g <= 0 for g in out):
        raise _EmptyGrid("pltpu.emit_pipeline: All elements in the grid must be strictly "
                         "positive, not %r\n  at %s" % (tuple(out), _trace.where()))
    return tuple(out)


def _pipeline_specs(in_specs, out_specs):
    """emit_pipeline's in_specs and out_specs as the list of its
    operands' spec trees (one spec, or a tuple or list of them; each a
    pytree, as JAX's) and the count of inputs."""
    ins = list(in_specs) if isinstance(in_specs, (list, tuple)) else [in_specs]
    outs = list(out_specs) if isinstance(out_specs, (list, tuple)) else [out_specs]
    return ins + outs, len(ins)


def _buffer_type(ref, spec):
    """The scratch type of @spec's buffer for @ref, or None (no buffer:
    pl.no_block_spec, or a block left in HBM)."""
    if spec is no_block_spec or _spec_space(spec) == "any":
        return None
    shape = _block_window(ref, spec, None, "pltpu.emit_pipeline")[1]
    return (SMEM if _spec_space(spec) == "smem" else VMEM)(shape, ref.dtype)


def _flat_operands(refs, specs, nin):
    """[(ref, spec, is_output)] of the leaves of the operand trees, and a
    function rebuilding the body's arguments from one value per leaf."""
    from .. import _pytree
    if len(refs) != len(specs):
        raise trace_error("pltpu.emit_pipeline: %d refs given for %d in_specs and %d "
                          "out_specs" % (len(refs), nin, len(specs) - nin))
    flat, trees = [], []
    for k, (r, s) in enumerate(zip(refs, specs)):
        rl, rt = _pytree.flatten(r)
        sl, st = _pytree.flatten(s)
        if len(rl) != len(sl):
            raise trace_error("pltpu.emit_pipeline: operand %d is a tree of %d refs, its "
                              "spec one of %d specs" % (k, len(rl), len(sl)))
        flat += [(x, y, k >= nin) for x, y in zip(rl, sl)]
        trees.append(rt)

    def build(vals):
        out, at = [], 0
        for t in trees:
            out.append(_pytree.unflatten(t, list(vals[at:at + t.num_leaves])))
            at += t.num_leaves
        return out
    return flat, build


def _bref_operands(refs, allocations):
    """emit_pipeline(body, grid=...)(*refs, allocations=[...]) without
    specs: each ref's spec and role are its pltpu.BufferedRef
    allocation's."""
    from .. import _pytree
    allocs = _pytree.flatten(list(allocations))[0]
    if len(allocs) != len(refs):
        raise trace_error("pltpu.emit_pipeline: %d allocations for %d refs" %
                          (len(allocs), len(refs)))
    flat = []
    for r, a in zip(refs, allocs):
        if getattr(a, "_role", None) is None:
            raise trace_error("pltpu.emit_pipeline without in_specs/out_specs: allocation %s "
                              "is not a pltpu.BufferedRef" % getattr(a, "name", a))
        flat.append((r, a._spec, a._role != "input"))
    return flat, lambda vals: list(vals)


class BufferedRefBase:
    """pltpu.BufferedRefBase: the interface pltpu.BufferedRef implements."""


class BufferedRef(BufferedRefBase):
    """pltpu.BufferedRef.input/output/input_output/accumulator(spec, dtype):
    scratch (pallas_call's scratch_shapes, pl.run_scoped) holding an
    emit_pipeline operand's block buffer, its spec and role with it, for
    emit_pipeline(body, grid=...)(*refs, allocations=[...]). Single
    buffered here (the pipeline's copies are synchronous);
    input_output and accumulator blocks are read before the body
    accumulates into them."""

    @classmethod
    def _make(cls, role, spec, dtype, buffer_count=2, **_kw):
        shape = tuple(b for b, _ in (_pipeline_dim(d, "pltpu.BufferedRef")
                                     for d in spec.block_shape) if b is not None)
        t = VMEM(shape, dtype)
        t._spec, t._role = spec, role
        return t

    @classmethod
    def input(cls, spec, dtype, **kw):
        return cls._make("input", spec, dtype, **kw)

    @classmethod
    def output(cls, spec, dtype, **kw):
        return cls._make("output", spec, dtype, **kw)

    @classmethod
    def input_output(cls, spec, dtype, **kw):
        return cls._make("input_output", spec, dtype, **kw)

    @classmethod
    def accumulator(cls, spec, dtype, **kw):
        return cls._make("accumulator", spec, dtype, **kw)


class _PrefetchToken:
    """What emit_pipeline_with_async_prefetch's async_prefetch gives for an
    input it prefetches (None for the others, as JAX's)."""

    def __repr__(self):
        return "<prefetched blocks>"


def emit_pipeline_with_async_prefetch(body, *, mesh=None, **kwargs):
    """pltpu.emit_pipeline_with_async_prefetch: (pipeline, async_prefetch).
    async_prefetch(*arrays), outside the kernel, starts fetching the
    first pl.Buffered(prefetched_count=n) blocks of each input; the
    pipeline, given its result as allocations=, starts from them. The
    arrays are JAX values, so those blocks hold what the pipeline would
    fetch itself: here the pipeline fetches them (the results are JAX's;
    the overlap with the code before the kernel is not modeled), and
    async_prefetch gives a token per prefetched input, None for the
    others (pl.no_block_spec, no prefetched_count)."""
    del mesh
    pipeline = emit_pipeline(body, _async_prefetch=True, **kwargs)
    specs, nin = _pipeline_specs(kwargs.get("in_specs", ()), kwargs.get("out_specs", ()))

    def async_prefetch(*arrays):
        from .. import _pytree
        out = []
        for a, sp in zip(arrays, specs[:nin]):
            al, at = _pytree.flatten(a)
            sl = _pytree.flatten(sp)[0]
            toks = [None if s is no_block_spec or not getattr(
                getattr(s, "pipeline_mode", None), "prefetched_count", 0)
                else _PrefetchToken() for s in sl]
            if len(toks) != len(al):
                raise TypeError("async_prefetch: %d arrays for %d specs" % (len(al), len(toks)))
            out.append(_pytree.unflatten(at, toks))
        return out[0] if len(arrays) == 1 else tuple(out)
    return pipeline, async_prefetch


def emit_pipeline_with_allocations(body, **kwargs):
    """pltpu.emit_pipeline_with_allocations: (pipeline, make_allocations).
    make_allocations(*refs) gives the buffers' scratch types in the
    operands' tree (None where the pipeline keeps none), for
    pl.run_scoped(allocs=...); pipeline(*refs, allocations=allocs) uses
    those buffers."""
    pipeline = emit_pipeline(body, **kwargs)

    def make_allocations(*refs):
        return make_pipeline_allocations(*refs, in_specs=kwargs.get("in_specs", ()),
                                         out_specs=kwargs.get("out_specs", ()))
    return pipeline, make_allocations


def make_pipeline_allocations(*refs, in_specs=(), out_specs=(), should_accumulate_out=False,
                              needs_swap_ref=True, grid=None):
    """pltpu.make_pipeline_allocations: the block buffers' scratch types of
    an emit_pipeline over @refs with these specs, in the operands' tree
    (None where the pipeline keeps none), for pl.run_scoped at the
    kernel's top level and pipeline(*refs, allocations=...) in each
    invocation. The pipeline's own should_accumulate_out decides how its
    outputs are written; the copies are synchronous, so no swap slots are
    kept (@needs_swap_ref), and the buffers do not depend on @grid."""
    del should_accumulate_out, needs_swap_ref, grid
    specs, nin = _pipeline_specs(in_specs, out_specs)
    flat, build = _flat_operands(refs, specs, nin)
    types = [_buffer_type(r, s) for r, s, _ in flat]
    for t in types:
        if t is not None:	# the scratch ref it becomes takes with_window_ref
            t._on_alloc = _give_with_window_ref
    return build(types)


class _WindowBound:
    """BufferedRef.with_window_ref(window)'s result: the pipeline's buffer
    for an input, and the ref an earlier call prefetched its first blocks
    into (pl.Buffered(prefetched_count=n)): its slot j, or itself, holds the
    j-th block the pipeline fetches."""

    def __init__(self, buf, window):
        self.buf, self.window = buf, window


def _give_with_window_ref(ref):
    ref.with_window_ref = lambda window: _WindowBound(ref, window)


# emit_pipeline's options that change only how a TPU overlaps or lays out
# the copies (here they are synchronous, so the results are the same),
# and the nested-pipeline ones whose value here is their default
_PIPELINE_HINTS = {"tiling", "trace_scopes", "no_pipelining", "output_wait_read_only",
                   "schedule", "prefetch", "postyeet", "_async_prefetch"}
_PIPELINE_DEFAULTS = {"first_cycle": None, "last_cycle": None, "init_accumulators": None}


def _pipeline_options(options):
    for name, value in options.items():
        if name in _PIPELINE_HINTS:
            continue
        if name in _PIPELINE_DEFAULTS:
            if value is not _PIPELINE_DEFAULTS[name]:
                raise NotImplementedError(
                    "pltpu.emit_pipeline(%s=%r): a nested pipeline's cycle control is not "
                    "supported; the pipeline runs its whole grid, its accumulators read in"
                    % (name, value))
            continue
        raise TypeError("emit_pipeline() got an unexpected keyword argument '%s'" % name)


def emit_pipeline(body, *, grid, in_specs=(), out_specs=(), should_accumulate_out=False,
                  core_axis=None, core_axis_name=None, dimension_semantics=None,
                  _explicit_indices=False, **_options):
    """pltpu.emit_pipeline: a pipeline inside the kernel over refs in HBM
    (pl.ANY). Each step of @grid (unrolled while tracing; Python ints)
    copies the input blocks into VMEM buffers, runs @body on them, and
    writes an output block back when its block index changes and at the
    end (a revisited output keeps accumulating in VMEM);
    @should_accumulate_out's blocks are not read in: the body's block is
    added to the block's value before the pipeline as it is written. With
    @core_axis_name (inside pl.kernel) or @core_axis (a grid dimension of
    the pallas_call), each core runs its share of a parallel dimension of
    @dimension_semantics (_partition). The copies are
    synchronous: the results are Pallas's, the overlap is not modeled.
    Specs and refs are pytrees, as JAX's; a spec in pltpu.HBM (pl.ANY)
    hands the body the block's window of the ref itself, pltpu.SMEM an
    SMEM buffer, pl.no_block_spec None; _explicit_indices=True passes
    the body a first argument whose .index is the step's indices."""
    _pipeline_options(_options)
    specs, nin = _pipeline_specs(in_specs, out_specs)
    specs_given = bool(in_specs) or bool(out_specs)
    grid = _pipeline_grid(grid)


    def pipeline(*refs, allocations=None, scratches=None, **_kw):
        roles = [None] * len(refs)
        if allocations is not None and not specs_given:
            # no specs: the allocations' (pltpu.BufferedRef scratch) give them
            flat, build = _bref_operands(refs, allocations)
            roles = [getattr(a, "_role", None) for a in allocations]
        else:
            flat, build = _flat_operands(refs, specs, nin)
        # input_output and accumulator blocks are read in before the body;
        # should_accumulate_out's, as JAX's, are not: the body's block is
        # added to the block's value before the pipeline as it is written
        roles = (roles + [None] * len(flat))[:len(flat)]
        accumulate = [role in ("input_output", "accumulator") for role in roles]
        adds = [bool(should_accumulate_out) and not a for a in accumulate]
        local, split, offset, count = _partition(grid, dimension_semantics,
                                                 _cores(core_axis, core_axis_name))
        # the leaves with a buffer: given (allocations) or scoped here
        buffered = [k for k, (r, s, _) in enumerate(flat) if _buffer_type(r, s) is not None]
        prefetched = {}		# leaf: (window of its prefetched blocks, their count)
        types = [_buffer_type(*flat[k][:2]) for k in buffered]
        extra = list(scratches or ())

        def body_args(idx, bufs):
            vals = [None] * len(flat)
            for k, b in zip(buffered, bufs):
                vals[k] = b
                kb = getattr(flat[k][0], "key_batch", None)
                if kb is not None and getattr(b, "key_batch", 0) is None:
                    b.key_batch = kb	# a buffer of Pallas keys reads keys
            for k, (r, s, _) in enumerate(flat):
                if k not in buffered and s is not no_block_spec:
                    vals[k] = _block_window(r, s, idx, "pltpu.emit_pipeline")[0]
            args = build(vals) + extra
            return ([_PipelineState(idx, local)] if _explicit_indices else []) + args

        def steps(*bufs):
            _pipeline_grids.append(local)
            try:
                added = [j for j, k in enumerate(buffered) if flat[k][2] and adds[k]]
                if not added:
                    return steps_in(*bufs)
                # each added output's block as it was, and its sum (device loops)
                from . import _scoped
                _pipelines[0] += 1
                names = ["_acc%d_%d" % (_pipelines[0], j) for j in added] + \
                    ["_sum%d_%d" % (_pipelines[0], j) for j in added]
                return _scoped(lambda *more: steps_in(*bufs, more=(added, more)), names,
                               [types[j] for j in added] * 2, {}, _trace.recorder())
            finally:
                _pipeline_grids.pop()

        def steps_in(*bufs, more=((), ())):
            ins = [(flat[k][0], flat[k][1], b) for k, b in zip(buffered, bufs)
                   if not flat[k][2]]
            pref = [prefetched.get(k) for k in buffered if not flat[k][2]]
            fetched = [[None, 0] for _ in ins]	# each input's last block, its fetches
            outs = [(flat[k][0], flat[k][1], b) for k, b in zip(buffered, bufs)
                    if flat[k][2]]
            acc = [accumulate[k] for k in buffered if flat[k][2]]
            out_of = [j for j, k in enumerate(buffered) if flat[k][2]]
            kept = dict(zip(more[0], more[1][:len(more[0])]))	# buffer j: its block as it was
            sums = dict(zip(more[0], more[1][len(more[0]):]))
            old = [kept.get(j) for j in out_of]
            total = [sums.get(j) for j in out_of]

            def write_back(k, idx, b, keep=False):
                """Output @k's block of step @idx from its buffer @b; of
                should_accumulate_out, plus its value before the pipeline
                (into its sum's buffer where @b goes on accumulating)."""
                r, s, _ = outs[k]
                if old[k] is None:
                    _copy_block(r, s, idx, b, True)
                    return
                dst = total[k] if keep else b
                dst[...] = b[...] + old[k][...]
                _copy_block(r, s, idx, dst, True)
            pending = [None] * len(outs)	# (text, window) of each out block

            def run_body(idx):
                # pl.program_id / num_programs in the body are the pipeline's
                from . import scoped_body
                _pipeline_env.append((idx, local))
                try:
                    scoped_body(_trace.recorder(), lambda: body(*body_args(idx, bufs)))
                finally:
                    _pipeline_env.pop()

            def flush():
                for k, (r, s, b) in enumerate(outs):
                    if pending[k] is not None:
                        write_back(k, pending[k][1], b)
                    pending[k] = None

            def step_on_device(idx, t):
                """One step as a device loop's trip: every block copied in,
                the body, every output block written back (a revisited
                block keeps accumulating in its buffer: it is not refetched)."""
                for r, s, b in ins:
                    _copy_block(r, s, idx, b, False)
                prev = _step_index(local, split, offset, t - 1)
                for k, ((r, s, b), a) in enumerate(zip(outs, acc)):
                    if a:	# accumulating: the block as the last step left it
                        _copy_block(r, s, idx, b, False)
                    if old[k] is not None:	# its value before its first step here
                        first = _new_block(s, idx, prev, t)
                        keep = (lambda r=r, s=s, k=k: _copy_block(r, s, idx, old[k], False))
                        if first is True:
                            keep()
                        else:
                            when(first)(keep)
                run_body(idx)
                for k, (r, s, b) in enumerate(outs):
                    write_back(k, idx, b, keep=True)

            def fetch(n, r, s, b, idx):
                """An input's block into its buffer: from the window an earlier
                call prefetched it into, for its first fetches, if bound."""
                if pref[n] is None:
                    _copy_block(r, s, idx, b, False)
                    return
                w = _block_window(r, s, idx, "pltpu.emit_pipeline")[0].render()
                if fetched[n][0] == w:
                    return		# the same block: the buffer still holds it
                window, count = pref[n]
                j = fetched[n][1]
                fetched[n] = [w, j + 1]
                if j >= count:
                    _copy_block(r, s, idx, b, False)
                    return
                wshape = tuple(getattr(window, "shape", ()) or ())
                if wshape == tuple(b.shape):
                    src = window if j == 0 else None
                elif wshape[1:] == tuple(b.shape) and j < wshape[0]:
                    src = window.at[j]
                else:
                    src = None
                if src is None:
                    raise trace_error("pltpu.emit_pipeline: the prefetched window %s (shape "
                                      "%r) holds no slot %d of a block %r"
                                      % (getattr(window, "name", window), wshape, j,
                                         tuple(b.shape)))
                sync_copy(src, b)

            def step(idx):
                for n, (r, s, b) in enumerate(ins):
                    fetch(n, r, s, b, idx)
                for k, (r, s, b) in enumerate(outs):
                    w = _block_window(r, s, idx, "pltpu.emit_pipeline")[0]
                    if pending[k] is not None and pending[k][0] == w.render():
                        continue
                    if pending[k] is not None:
                        write_back(k, pending[k][1], b)
                    if acc[k]:
                        _copy_block(r, s, idx, b, False)
                    if old[k] is not None:	# its value before the pipeline
                        _copy_block(r, s, idx, old[k], False)
                    pending[k] = (w.render(), idx)	# the block and its step
                run_body(idx)

            nsteps = 1
            for g in local:
                nsteps = nsteps * g
            if isinstance(nsteps, _trace.Value) or (nsteps > lax.UNROLL_MAX_TRIPS and
                                                    count is None):
                if any(p is not None for p in pref):
                    raise trace_error("pltpu.emit_pipeline: prefetched inputs "
                                      "(with_window_ref) in a pipeline of more than %d steps "
                                      "or a dynamic grid (a device loop) are not supported"
                                      % lax.UNROLL_MAX_TRIPS)
                _device_steps(local, split, offset, nsteps, step_on_device)
                return
            for li in itertools.product(*(range(g) for g in local)):
                idx = tuple(i + offset if d == split else i for d, i in enumerate(li))
                if count is None or li[split] < local[split] - 1:
                    step(idx)
                    continue
                # the step only the first cores take: what is pending is
                # written back first, the step's own blocks inside it
                flush()
                when(li[split] < count)(lambda: (step(idx), flush()))
            flush()

        if allocations is not None and all(
                a is None or isinstance(a, _PrefetchToken)
                for a in _pytree_leaves(allocations)):
            allocations = None	# emit_pipeline_with_async_prefetch's: see there
        given = None
        if allocations is not None:
            from .. import _pytree
            given = [a for a in _pytree.flatten(list(allocations)
                                                if isinstance(allocations, tuple)
                                                else allocations)[0]]
            if len(given) != len(buffered):
                raise trace_error("pltpu.emit_pipeline: %d allocations for %d buffered "
                                  "operands" % (len(given), len(buffered)))
        # inputs an earlier call prefetched: their windows (with_window_ref)
        for j, k in enumerate(buffered):
            n = getattr(getattr(flat[k][1], "pipeline_mode", None), "prefetched_count", 0)
            g = given[j] if given is not None else None
            if isinstance(g, _WindowBound):
                prefetched[k] = (g.window, n)
                given[j] = g.buf
            elif n and not _options.get("_async_prefetch"):
                raise _Prefetched(
                    "pltpu.emit_pipeline: pl.Buffered(prefetched_count=%d): Expected external "
                    "window buffer to be bound for prefetched input (give the allocation's "
                    "BufferedRef.with_window_ref(ref) of the blocks prefetched)\n  at %s"
                    % (n, _trace.where()))
        if given is not None:
            return steps(*given)
        from . import _scoped
        _pipelines[0] += 1
        # short (names are at most 31 characters) and unique as pipelines nest
        names = ["_pipe%d_%d" % (_pipelines[0], k) for k in buffered]
        _scoped(steps, names, types, {}, _trace.recorder())
    return pipeline


_pipelines = [0]	# emit_pipelines traced: their buffers' names
_pipeline_grids = []	# the (local) grids of the emit_pipelines being traced


def repeat(x, repeats, axis):
    """pltpu.repeat: @repeats copies of x side by side along @axis."""
    return jnp.concatenate((x,) * int(repeats), axis=axis)


def roll(x, shift, axis, *, stride=None, stride_axis=None):
    """pltpu.roll: jnp.roll along @axis (the shift may be traced). With
    @stride and @stride_axis, the slice at index i of stride_axis rolls by
    shift + i * stride: x rolled by @shift, then, for each bit b of the
    extra shifts (i * stride mod n), the slices whose extra shift has bit
    b set rolled once more by 2**b (jnp.where of an iota mask), so
    log2(n) rolls whatever the number of slices."""
    if stride is None and stride_axis is None:
        if isinstance(axis, int) and axis in (0, -1) and \
                len(getattr(x, "shape", None) or (0, 0)) == 1:
            axis = -1	# a 1-D value is a row on the device: its axis is the last
        return _roll_once(x, shift, axis)
    if stride is None or stride_axis is None:
        raise trace_error("pltpu.roll: stride and stride_axis go together (stride=%r, "
                          "stride_axis=%r)" % (stride, stride_axis))
    shape = getattr(x, "shape", None)
    if shape is None:
        raise trace_error("pltpu.roll with a stride: the value's shape is not known")
    try:
        stride, stride_axis, axis = int(stride), int(stride_axis), int(axis)
    except TypeError:
        raise trace_error("pltpu.roll: stride, stride_axis and axis are Python ints (the "
                          "stride is static), not %r, %r, %r"
                          % (stride, stride_axis, axis)) from None
    rank = len(shape)
    for what, a in (("axis", axis), ("stride_axis", stride_axis)):
        if not -rank <= a < rank:
            raise trace_error("pltpu.roll: %s %d of a %d-D value" % (what, a, rank))
    axis, stride_axis = axis % rank, stride_axis % rank
    if axis == stride_axis:
        raise trace_error("pltpu.roll: stride_axis (%d) must differ from axis (%d)"
                          % (stride_axis, axis))
    if stride < 0:
        raise trace_error("pltpu.roll: stride %d; it must be non-negative" % stride)
    n, m = shape[axis], shape[stride_axis]
    y = _roll_once(x, shift, axis)
    extra = [i * stride % n for i in range(m)]
    if not any(extra):
        return y
    # bound to locals: each step's expression stays one statement's size
    k = _trace.local(lax.broadcasted_iota(_trace.int32, tuple(shape), stride_axis) *
                     (stride % n) % n)
    y = _trace.local(y)
    for b in range(max(extra).bit_length()):
        if any(e >> b & 1 for e in extra):
            y = _trace.local(jnp.where((k >> b) & 1 == 1,
                                       _trace.call("pltpu.roll", y, 1 << b, axis), y))
    return y


def _roll_once(x, shift, axis, fn="pltpu.roll"):
    """x rolled by @shift along @axis (@fn: jnp.roll's or pltpu.roll's
    statement). The device rolls the rows of its 2-D
    view, or slabs of them, by any shift, and a middle axis of a value of
    rank 3 or more (its two parts copied) by a constant one; by a traced
    shift there, x is stored twice along the axis into a VMEM scratch and
    read back at pl.ds(n - shift mod n, n)."""
    shape = getattr(x, "shape", None)
    rank = len(shape) if shape is not None else 0
    if not isinstance(shift, _trace.Value) or rank < 3 or int(axis) % rank in (0, rank - 1):
        return _trace.call(fn, x, shift, axis)
    from . import ds
    axis = int(axis) % rank
    n = shape[axis]
    k = (shift % n + n) % n
    out = []

    def at(start, size):
        idx = [slice(None)] * rank
        idx[axis] = ds(start, size) if isinstance(start, _trace.Value) else \
            slice(start, start + size)
        return tuple(idx)

    def body(buf):
        buf[at(0, n)] = x
        buf[at(n, n)] = x
        r = buf[at(n - k, n)]
        rec = _trace.recorder()
        rec.bind(r, tuple(rec.conds))	# read before the scratch is gone
        out.append(r)
    doubled = tuple(2 * d if i == axis else d for i, d in enumerate(shape))
    run_scoped(body, VMEM(doubled, x.dtype))
    return out[0]


def bitcast(x, ty):
    """pltpu.bitcast(x, dtype): x's bits as @ty, no value change; the DMA
    engine moves the bytes. Of another width, as on a TPU, the
    second-to-last dimension scales by the ratio (bf16 (16, 128) is int32
    (8, 128), word row i holding rows 2i and 2i + 1). A ref (or window)
    gives a ref view, as ref.bitcast(dtype)."""
    if isinstance(x, (Ref, _trace.Window, _trace.BitcastRef)):
        return x.bitcast(ty)
    return _trace.bitcast_value(x, ty, "pltpu.bitcast")


def _bits_of_dtype(d, what):
    from .. import dtypes
    try:
        return int(dtypes.itemsize_bits(d))
    except (TypeError, ValueError, KeyError, AttributeError):
        raise trace_error("%s: no bit width for %r" % (what, d))


def _is_bf16_dtype(d):
    return d is jnp.bfloat16 or getattr(d, "name", d) == "bfloat16"


def pack_elementwise(xs, *, packed_dtype):
    """pltpu.pack_elementwise(xs, packed_dtype=): each of the 32 / w (or
    source width / w) values of xs converted to @packed_dtype (floats to
    bfloat16 rounded to nearest even, integers wrapped to w bits) and
    their bits packed into one unsigned word per element, xs[i] at bit
    i * w. Composed from casts, shifts and ors."""
    what = "pltpu.pack_elementwise"
    xs = list(xs)
    if not xs:
        raise trace_error("%s: no values to pack" % what)
    src = xs[0].dtype
    sw, pw = _bits_of_dtype(src, what), _bits_of_dtype(packed_dtype, what)
    if sw % pw or len(xs) != sw // pw:
        raise trace_error("%s: %d values of %d bits do not pack %d-bit words"
                          % (what, len(xs), pw, sw))
    float_pack = _is_bf16_dtype(packed_dtype)
    if float_pack and not _trace.is_float_dt(xs[0].dt):
        raise trace_error("%s: bfloat16 packs float values" % what)
    mask = (1 << pw) - 1
    word = None
    for i, x in enumerate(xs):
        if float_pack:	# bf16 bits: the rounded value's upper half as float32
            b = lax.shift_right_logical(
                lax.bitcast_convert_type(x.astype(jnp.bfloat16).astype(jnp.float32),
                                         jnp.int32), 16)
        else:
            b = x.astype(jnp.int32) & mask
        b = b << (i * pw) if i else b
        word = b if word is None else word | b
    out = {32: jnp.uint32, 16: jnp.uint16, 8: jnp.uint8}.get(sw)
    if out is None:
        raise trace_error("%s: %d-bit words are not a dtype here" % (what, sw))
    if sw == 32:
        return lax.bitcast_convert_type(word, jnp.uint32)
    return word.astype(out)


def unpack_elementwise(x, *, index, packed_dtype, unpacked_dtype):
    """pltpu.unpack_elementwise(x, index=, packed_dtype=, unpacked_dtype=):
    the @index-th @packed_dtype field of each word of x (bit index * w),
    sign-extended (integers) or widened (bfloat16) and converted to
    @unpacked_dtype. Composed from shifts, masks and casts."""
    what = "pltpu.unpack_elementwise"
    xw = _bits_of_dtype(x.dtype, what)
    pw = _bits_of_dtype(packed_dtype, what)
    index = int(index)
    if not 0 <= index < xw // pw:
        raise trace_error("%s: index %d out of bounds for %d fields of %d bits"
                          % (what, index, xw // pw, pw))
    w = lax.bitcast_convert_type(x, jnp.int32) if xw == 32 else x.astype(jnp.int32)
    field = lax.shift_right_logical(w, index * pw) if index else w
    if _is_bf16_dtype(packed_dtype):
        v = lax.bitcast_convert_type((field & 0xFFFF) << 16, jnp.float32)
    else:
        v = lax.shift_right_arithmetic(field << (32 - pw), 32 - pw) if pw < 32 else field
    return v.astype(unpacked_dtype)


def stochastic_round(x, random_bits, *, target_dtype):
    """pltpu.stochastic_round(x, random_bits, target_dtype=bfloat16):
    float32 x rounded to one of its two bfloat16 neighbours, up with the
    probability of its distance from the lower one: the top 16 of the
    uint32 random bits added to the 16 bits bf16 drops, then those
    truncated (magnitudes, so negatives round symmetrically); NaNs and
    infinities convert as astype. Composed from bitcasts and integer ops."""
    held = _trace._as_dtype_or_none(target_dtype)
    if not _is_bf16_dtype(target_dtype) and held not in _trace._HELD_FLOATS:
        raise trace_error("pltpu.stochastic_round to %r: bfloat16, float16 or a float8 is the "
                          "target" % (target_dtype,))
    if x.dt is not jnp.float32:
        raise trace_error("pltpu.stochastic_round: of float32 values, not %s" % x.dt.name)
    if held is not None and held is not jnp.bfloat16:
        return _stochastic_round_held(x, random_bits, held)
    xi = _trace.local(lax.bitcast_convert_type(x, jnp.int32))
    r = lax.shift_right_logical(lax.bitcast_convert_type(random_bits, jnp.int32), 16)
    up = (xi + r) & -65536		# 0xFFFF0000 as int32
    y = lax.bitcast_convert_type(up, jnp.float32)
    finite = jnp.abs(x) < jnp.inf
    return jnp.where(finite, y, x).astype(jnp.bfloat16)


def _stochastic_round_held(x, random_bits, d):
    """stochastic_round to float16 or a float8: |x| truncated to the type
    (t), then up by t's ulp in the type when the distance's fraction of
    that ulp is above the uniform draw of the random bits' top 24 (exact
    in float32: the ulp is a power of two); below the least normal the
    ulp is the subnormal quantum. A step past the type's largest value
    overflows as astype."""
    from .. import _held_float
    f = _held_float.FORMATS[d.name]
    a = _trace.local(jnp.abs(x))
    ai = _trace.local(lax.bitcast_convert_type(a, jnp.int32))
    quantum = 2.0 ** (f.emin - f.mant)
    sub = a < 2.0 ** f.emin
    t = _trace.local(jnp.where(sub, jnp.floor(a * (1.0 / quantum)) * quantum,
                               lax.bitcast_convert_type(ai & -(1 << f.shift), jnp.float32)))
    ulp = jnp.where(sub, quantum, lax.bitcast_convert_type(
        (ai & 0x7F800000) - (f.mant << 23), jnp.float32))
    ulp = _trace.local(ulp)
    draw = lax.shift_right_logical(lax.bitcast_convert_type(random_bits, jnp.int32), 8)
    up = a - t > draw.astype(jnp.float32) * 2.0 ** -24 * ulp	# powers of two: exact
    y = jnp.where(up, t + ulp, t)
    y = jnp.where(x < 0, -y, y)
    return jnp.where(a < jnp.inf, y, x).astype(d)


def load(ref, *, mask=None):
    """pltpu.load(ref, mask=): the whole ref (or ref.at[...] window); with a
    mask, 0 where it is False (a TPU leaves those undefined)."""
    from . import load as _load
    return _load(ref, ..., mask=mask)


def store(ref, val, *, mask=None):
    """pltpu.store(ref, val, mask=): ref[...] = val where the mask holds."""
    from . import store as _store
    _store(ref, ..., val, mask=mask)


def sync_copy(src, dst, *, add=False):
    """pltpu.sync_copy(src, dst): a copy and its wait (pl.select_ref
    operands and traced pl.ds sizes as make_async_copy's); pytrees of refs
    leaf by leaf; with @add the source added into the destination, and a
    bitcast view copied, as values (_copy_values)."""
    from .. import _pytree
    sl, st = _pytree.flatten(src)
    dl, dt = _pytree.flatten(dst)
    if st.kind != "leaf" or dt.kind != "leaf":
        if st != dt:
            raise ValueError("pltpu.sync_copy: the source and destination trees differ "
                             "(%d and %d refs)" % (len(sl), len(dl)))
        for s_, d_ in zip(sl, dl):
            sync_copy(s_, d_, add=add)
        return
    if add or _is_view(src) or _is_view(dst):
        _copy_values(src, dst, add)
        return
    rec = _trace.recorder()
    src, dst = _copy_operands(src, dst, "pltpu.sync_copy's")

    def one(src, dst):
        if isinstance(_base(dst), Ref):
            _trace._protect(rec, _base(dst).name, None)
        rec.emit("pltpu.sync_copy(%s, %s)" % (src.render(), dst.render()))
    _each_choice((src, dst), lambda s, d: _copy_pieces(s, d, one))


def _sem_changes(sem):
    """Before an op that changes @sem's count: a semaphore_read the kernel
    still holds is bound to a local, which libtpurt then refuses to use
    (a scalar local names what it reads; it holds no copy)."""
    rec = _trace.recorder()
    _trace._protect(rec, sem.name, None)
    return rec


def _own_core(device_id, what):
    """device_id={axis: index} of pl.kernel's mesh naming this core: the
    only one while a mesh has one core (other cores' and other chips'
    semaphores are not reachable here)."""
    from .kernel import _mesh_axes
    if device_id is None:
        return
    if isinstance(device_id, dict) and _mesh_axes:
        axis, cores = _mesh_axes[-1]
        if set(device_id) == {axis} and cores == 1 and \
                not isinstance(device_id[axis], _trace.Value) and int(device_id[axis]) == 0:
            return
        raise trace_error("%s(device_id=%r): signalling a core's semaphore by device_id "
                          "on a mesh of %d cores (axis %r) is not supported; one core's "
                          "mesh only" % (what, device_id, cores, axis))
    raise trace_error("%s(device_id=%r): remote semaphore signals are not supported"
                      % (what, device_id))


class DeviceIdType(enum.Enum):
    """pltpu.DeviceIdType (pl.DeviceIdType): how a device_id names a device,
    by MESH coordinates ({axis: index}) or by its LOGICAL number. tpuemu
    runs one device, so only ids naming this device's own core are taken."""
    MESH = "mesh"
    LOGICAL = "logical"


def run_on_first_core(core_axis_name):
    """@pltpu.run_on_first_core(axis): the decorated function is called at
    once, on the mesh axis's first core only (under pl.when of
    lax.axis_index(axis) == 0; on a one-core axis, plainly)."""
    from .. import lax as _lax

    def run(f):
        if _lax.axis_size(core_axis_name) == 1:
            f()
            return
        when(_lax.axis_index(core_axis_name) == 0)(f)
    return run


def core_barrier(sem, *, core_axis_name):
    """pltpu.core_barrier(sem, core_axis_name=axis): every core of the mesh
    axis signals @sem (a REGULAR semaphore) on each core, then waits for
    as many signals as there are cores, so none goes on before all came."""
    from .. import lax as _lax
    cores = _lax.axis_size(core_axis_name)
    for i in range(cores):
        semaphore_signal(sem, 1, device_id={core_axis_name: i},
                         device_id_type=DeviceIdType.MESH)
    semaphore_wait(sem, cores)


def semaphore_signal(sem, inc=1, *, device_id=None, device_id_type=None, core_index=None):
    """pltpu.semaphore_signal (pl.semaphore_signal): add @inc to @sem; a
    @device_id of the kernel's one-core mesh ({axis: 0}) is this core, as
    is @core_index 0 on a one-core device."""
    if device_id_type is not None and not isinstance(device_id_type, DeviceIdType):
        raise TypeError("pltpu.semaphore_signal(device_id_type=%r): a pl.DeviceIdType"
                        % (device_id_type,))
    _own_core(device_id, "pltpu.semaphore_signal")
    if core_index is not None and not (isinstance(core_index, (int, np.integer)) and
                                       int(core_index) == 0 and get_tpu_info().num_cores == 1):
        raise NotImplementedError("semaphore_signal(core_index=%r): another core's semaphore"
                                  % (core_index,))
    _each_choice((sem,), lambda s: _sem_changes(s).emit(
        "pltpu.semaphore_signal(%s, %s)" % (_sem_text(s, "signal"), _trace._fmt(inc))))


def semaphore_wait(sem, value=1):
    _each_choice((sem,), lambda s: _sem_changes(s).emit(
        "pltpu.semaphore_wait(%s, %s)" % (_sem_text(s, "wait"), _trace._fmt(value))))


def semaphore_read(sem):
    from . import _Selected
    if isinstance(sem, _Selected):
        raise trace_error("pltpu.semaphore_read(%s): reading a semaphore chosen by a traced "
                          "index is not supported; read each and pick with jnp.where"
                          % sem.render())
    v = _trace.Value("text", "pltpu.semaphore_read(%s)" % _sem_text(sem, "read"),
                     reads=frozenset([sem.name]), scalar=True, dt=_trace.int32)
    return v


# --- the core's PRNG: pltpu.prng_seed / prng_random_bits ---

_MAX_SEEDS = 4		# TPU_PRNG_MAX_SEEDS


def delay(nanos):
    """pltpu.delay(nanos): the core stalls @nanos nanoseconds (a Python
    int, 1 to 10^9) in the device's timing model: the step's modeled time
    grows by them (jax.last_stats()'s model_time_ps), nothing else changes."""
    if not isinstance(nanos, int) or isinstance(nanos, bool):
        raise trace_error("pltpu.delay(%r): the nanoseconds are a Python int (a traced "
                          "delay is not supported)" % (nanos,))
    if not 1 <= nanos <= 10**9:
        raise trace_error("pltpu.delay(%d): nanoseconds are 1 to 10^9" % nanos)
    _trace.recorder().emit("pltpu.delay(%d)" % nanos)


def prng_seed(*seeds):
    """pltpu.prng_seed(s0, ...): key this core's PRNG with 1 to 4 int32
    scalars (program ids, SMEM values, constants) and restart its draws.
    The state is per core and lives across the core's grid steps."""
    from ._keys import KernelKey
    if len(seeds) == 1 and isinstance(seeds[0], KernelKey):
        seeds = seeds[0].words	# a Pallas key: its two words
    if not 1 <= len(seeds) <= _MAX_SEEDS:
        raise trace_error("pltpu.prng_seed takes 1 to %d int32 seeds, not %d"
                          % (_MAX_SEEDS, len(seeds)))
    rec = _trace.recorder()
    texts = []
    for s in seeds:
        if isinstance(s, (float, bool)) or (isinstance(s, _trace.Value) and not s.scalar and
                                            s.shape not in (None, (), (1,), (1, 1))):
            raise trace_error("pltpu.prng_seed: a seed is an int32 scalar, not %r" % (s,))
        if isinstance(s, _trace.Value) and s.dt is not None and s.dt != _trace.int32:
            raise trace_error("pltpu.prng_seed: seeds are int32, this one is %s"
                              % _trace.dtype_text(s.dt))
        if isinstance(s, int) and not -2**31 <= s < 2**32:
            raise trace_error("pltpu.prng_seed: seed %d does not fit in 32 bits" % s)
        if isinstance(s, int) and s >= 2**31:
            s -= 2**32	# the same 32 bits as an int32
        texts.append(_trace._fmt(s))
    rec.emit("pltpu.prng_seed(%s)" % ", ".join(texts))


def prng_random_bits(shape):
    """pltpu.prng_random_bits(shape): 32 random bits per element, the core's
    next draw, int32 as JAX's primitive gives (bitcast it to jnp.uint32 for
    unsigned bits). The generator
    is Philox-4x32-10 of the seeds and draw, not the TPU's hardware bits."""
    try:
        shape = tuple(int(d) for d in shape)
    except TypeError:
        raise trace_error("pltpu.prng_random_bits: the shape must be a tuple of ints, "
                          "not %r" % (shape,)) from None
    if len(shape) != 2:
        return _draw_bits(shape, "prng_random_bits")	# a 2-D draw, reshaped
    _trace.recorder()
    v = _trace.call("pltpu.prng_random_bits", shape)
    v.dt = _trace.int32
    v.shape = shape
    # a draw, not a constant: bound once, so each use sees the same bits
    return _trace.local(v)


def _draw_bits(shape, what):
    """The core's next draw of 32-bit words (int32) in @shape of rank 1 to
    4: a 2-D (rows, last dimension) draw, reshaped."""
    try:
        shape = tuple(int(d) for d in shape)
    except TypeError:
        raise trace_error("pltpu.%s: the shape must be a tuple of ints, not %r"
                          % (what, shape)) from None
    if not 1 <= len(shape) <= 4:
        raise trace_error("pltpu.%s%r: shapes have 1 to 4 dimensions" % (what, shape))
    rows = 1
    for d in shape[:-1]:
        rows *= d
    bits = prng_random_bits((rows, shape[-1]))
    return bits if len(shape) == 2 else _trace.local(jnp.reshape(bits, shape))


def _uniform01(shape, what):
    """Floats in [0, 1) as jax.random.uniform makes them: 23 random bits in
    the mantissa of a number in [1, 2), less 1."""
    bits = lax.shift_right_logical(_draw_bits(shape, what), 9) | 0x3F800000
    return bitcast(bits, jnp.float32) - 1.0


def _sample_dtype(dtype, what):
    d = _trace.as_dtype(dtype)
    if d not in (_trace.float32, _trace.bfloat16):
        raise trace_error("pltpu.%s(dtype=%s): float32 or bfloat16"
                          % (what, _trace.dtype_text(d)))
    return d


def stateful_bits(shape, dtype=None):
    """pltpu.stateful_bits: jax.random.bits of the core's PRNG, uint32 (or
    the 32-bit @dtype given). The bits are Philox's, not the TPU's."""
    d = _trace.as_dtype(dtype) if dtype is not None else _trace.uint32
    if d not in (_trace.uint32, _trace.int32):
        raise trace_error("pltpu.stateful_bits(dtype=%s): 32-bit words (uint32, int32)"
                          % _trace.dtype_text(d))
    bits = _draw_bits(shape, "stateful_bits")
    return bits if d is _trace.int32 else bitcast(bits, jnp.uint32)


def stateful_uniform(shape, dtype=jnp.float32, minval=0.0, maxval=1.0):
    """pltpu.stateful_uniform: jax.random.uniform of the core's PRNG, in
    [minval, maxval) (f32 computed, cast to a bf16 @dtype)."""
    d = _sample_dtype(dtype, "stateful_uniform")
    u = _uniform01(shape, "stateful_uniform")
    v = jnp.maximum(u * (maxval - minval) + minval, minval)
    return v if d is _trace.float32 else v.astype(jnp.bfloat16)


def stateful_normal(shape, dtype=jnp.float32):
    """pltpu.stateful_normal: jax.random.normal of the core's PRNG,
    sqrt(2) * erfinv(u) for u uniform in (-1, 1), as JAX computes it."""
    d = _sample_dtype(dtype, "stateful_normal")
    lo = float(np.nextafter(np.float32(-1.0), np.float32(0.0)))
    u = jnp.maximum(_uniform01(shape, "stateful_normal") * (1.0 - lo) + lo, lo)
    v = lax.erf_inv(u) * float(np.sqrt(np.float32(2.0)))
    return v if d is _trace.float32 else v.astype(jnp.bfloat16)


def stateful_bernoulli(p=0.5, shape=None):
    """pltpu.stateful_bernoulli: True with probability @p (a Python float)
    per element, jax.random.bernoulli of the core's PRNG."""
    if shape is None:
        raise trace_error("pltpu.stateful_bernoulli: give the shape (p's own shape is "
                          "not known here)")
    return _uniform01(shape, "stateful_bernoulli") < p


def to_pallas_key(key):
    """pltpu.to_pallas_key: pallas/_keys.py."""
    from ._keys import to_pallas_key as f
    return f(key)


def sample_block(sampler_fn, global_key, block_size, tile_size, total_size,
                 block_index=None, **kwargs):
    """pltpu.sample_block: pallas/_keys.py."""
    from ._keys import sample_block as f
    return f(sampler_fn, global_key, block_size, tile_size, total_size, block_index,
             **kwargs)


def unwrap_pallas_seed(key):
    from ._keys import unwrap_pallas_seed as f
    return f(key)


def wrap_pallas_seed(k0, k1, impl="pallas_tpu"):
    from ._keys import wrap_pallas_seed as f
    return f(k0, k1, impl)


def with_memory_space_constraint(x, memory_space):
    """pltpu.with_memory_space_constraint(x, memory_space=...): x, its type
    naming the memory space (jax.typeof(x).memory_space); pallas_call
    places its operands by their BlockSpecs, so only the type changes."""
    from .. import pallas as _pl
    if memory_space is not _pl.ANY and not isinstance(memory_space, _MemorySpace):
        raise TypeError("with_memory_space_constraint: memory_space must be pltpu.VMEM, "
                        "SMEM, HBM, pl.HOST or pl.ANY, not %r" % (memory_space,))
    from ..numpy import HostArray
    if not isinstance(x, np.ndarray):
        raise TypeError("with_memory_space_constraint: an array, not %r" % (type(x).__name__,))
    out = np.asarray(x).view(HostArray)
    out._memory_space = memory_space
    return out


from .interpret import (InterpretParams, force_tpu_interpret_mode,  # noqa: E402,F401
                        reset_tpu_interpret_mode_state, set_tpu_interpret_mode)


class trace:
    """pltpu.trace(message, level=10): a named scope for the TPU's profiler
    (`with pltpu.trace("qk"):`). tpuemu's traces (TPURT_TRACE) record the
    device's own steps and copies, so the scope adds nothing to them."""

    def __init__(self, message, level=10):
        self.message, self.level = str(message), int(level)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

