# SPDX-License-Identifier: MIT
"""jax.experimental.pallas.tpu over libtpurt (tpuemu.pallas.tpu as pltpu)."""
from . import GridSpec, run_scoped  # noqa: F401  (pltpu.run_scoped, as older JAX has it)
import itertools

from .. import _trace, numpy as jnp
from .._trace import Ref, Window, scalar, trace_error


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

    def __repr__(self):
        return self._space.upper()


class _Scratch:
    def __init__(self, shape, dtype, code):
        self.shape = tuple(shape)
        self.dtype = dtype
        self._space_code = code

    def __repr__(self):
        from .._trace import dtype_text
        return "pltpu.%s(%r, %s)" % ("SMEM" if self._space_code == 1 else "VMEM", self.shape,
                                     dtype_text(self.dtype))


VMEM = _MemorySpace("vmem", 0)
SMEM = _MemorySpace("smem", 1)
ANY = HBM = _MemorySpace("any", 2)


class CompilerParams:
    def __init__(self, dimension_semantics=None, vmem_limit_bytes=None, **kwargs):
        self.dimension_semantics = dimension_semantics
        self.vmem_limit_bytes = vmem_limit_bytes


TPUCompilerParams = CompilerParams


class _SemaphoreKind:
    """pltpu.SemaphoreType.DMA / .REGULAR: one semaphore, or ((n,)) an array."""

    def __init__(self, code, name):
        self._space_code = code
        self.shape = (1,)
        self.dtype = "int32"
        self._name = name

    def __call__(self, shape):
        s = _SemaphoreKind(self._space_code, self._name)
        s.shape = tuple(shape)
        return s

    def __repr__(self):
        return "pltpu.SemaphoreType.%s%s" % (self._name, "" if self.shape == (1,) else (self.shape,))


class SemaphoreType:
    DMA = _SemaphoreKind(3, "DMA")
    REGULAR = _SemaphoreKind(4, "REGULAR")


def _ref_text(r, what):
    if isinstance(r, (Ref, Window)):
        return r.render()
    raise trace_error("%s must be a ref or ref.at[...], not %r" % (what, r))


class AsyncCopy:
    """pltpu.make_async_copy(src, dst, sem): .start() and .wait() record
    the statement syntax's copy statements."""

    def __init__(self, src, dst, sem):
        dref = dst.ref if isinstance(dst, Window) else dst
        if isinstance(dref, Ref) and not dref.writable:
            raise trace_error("copy into input '%s' (inputs are read-only)" % dref.name)
        self.text = "pltpu.make_async_copy(%s, %s, %s)" % (
            _ref_text(src, "the source"), _ref_text(dst, "the destination"),
            _ref_text(sem, "the semaphore"))
        self.dst = dref

    def start(self):
        rec = _trace.recorder()
        if isinstance(self.dst, Ref):
            _trace._protect(rec, self.dst.name, None)
        rec.emit(self.text + ".start()")
        return self

    def wait(self):
        _trace.recorder().emit(self.text + ".wait()")
        return self


def make_async_copy(src, dst, sem):
    return AsyncCopy(src, dst, sem)


def async_copy(src, dst, sem, *, priority=0):
    """pltpu.async_copy: make_async_copy(...) already started. @priority
    picks a DMA queue on a TPU; one queue here, so it is accepted and has
    no effect."""
    del priority
    return AsyncCopy(src, dst, sem).start()


def _block_window(ref, spec, idx, what):
    """The window of @ref that @spec's block at grid point @idx covers."""
    bshape = getattr(spec, "block_shape", None) or tuple(ref.shape)
    if len(bshape) != len(ref.shape):
        raise trace_error("%s: block shape %r for a ref of shape %r" % (what, bshape, ref.shape))
    imap = getattr(spec, "index_map", None)
    bidx = imap(*idx) if imap is not None else (0,) * len(bshape)
    bidx = bidx if isinstance(bidx, (tuple, list)) else (bidx,)
    parts = []
    for d, (b, n, i) in enumerate(zip(bshape, ref.shape, bidx)):
        if b is None:
            parts.append(i)		# squeezed: the index is the element's
        elif n % b:
            raise trace_error("%s: block %r does not divide dimension %d of %r (edge blocks "
                              "are not supported inside emit_pipeline)" % (what, bshape, d, ref.shape))
        else:
            parts.append(_trace.Slice(i * b, b))
    return ref.at[tuple(parts)], tuple(b for b in bshape if b is not None)


def emit_pipeline(body, *, grid, in_specs=(), out_specs=(), should_accumulate_out=False,
                  **_options):
    """pltpu.emit_pipeline: a pipeline inside the kernel over refs in HBM
    (pl.ANY). Each step of @grid (unrolled while tracing; Python ints)
    copies the input blocks into VMEM buffers, runs @body on them, and
    writes an output block back when its block index changes and at the
    end (a revisited output keeps accumulating in VMEM). The copies are
    synchronous: the results are Pallas's, the overlap is not modeled."""
    in_specs = list(in_specs) if isinstance(in_specs, (list, tuple)) else [in_specs]
    out_specs = list(out_specs) if isinstance(out_specs, (list, tuple)) else [out_specs]
    try:
        grid = tuple(int(g) for g in (grid if isinstance(grid, (tuple, list)) else (grid,)))
    except TypeError:
        raise trace_error("pltpu.emit_pipeline: the grid %r must be Python ints (it is "
                          "unrolled while tracing)" % (grid,)) from None

    def pipeline(*refs):
        nin = len(in_specs)
        if len(refs) != nin + len(out_specs):
            raise trace_error("pltpu.emit_pipeline: %d refs given for %d in_specs and %d "
                              "out_specs" % (len(refs), nin, len(out_specs)))
        specs = in_specs + out_specs
        first = tuple(0 for _ in grid)
        types = [VMEM(_block_window(r, s, first, "pltpu.emit_pipeline")[1], r.dtype)
                 for r, s in zip(refs, specs)]

        def steps(*bufs):
            pending = [None] * len(out_specs)	# (text, window) of each out block
            for idx in itertools.product(*(range(g) for g in grid)):
                for r, s, b in zip(refs[:nin], in_specs, bufs[:nin]):
                    sync_copy(_block_window(r, s, idx, "pltpu.emit_pipeline")[0], b)
                for k, (r, s, b) in enumerate(zip(refs[nin:], out_specs, bufs[nin:])):
                    w = _block_window(r, s, idx, "pltpu.emit_pipeline")[0]
                    if pending[k] is not None and pending[k][0] == w.render():
                        continue
                    if pending[k] is not None:
                        sync_copy(b, pending[k][1])
                    if should_accumulate_out:
                        sync_copy(w, b)
                    pending[k] = (w.render(), w)
                body(*bufs)
            for b, p in zip(bufs[nin:], pending):
                if p is not None:
                    sync_copy(b, p[1])

        run_scoped(steps, *types)
    return pipeline


def repeat(x, repeats, axis):
    """pltpu.repeat: @repeats copies of x side by side along @axis."""
    return jnp.concatenate((x,) * int(repeats), axis=axis)


def roll(x, shift, axis, *, stride=None, stride_axis=None):
    """pltpu.roll: jnp.roll along @axis (the shift may be traced)."""
    if stride is not None or stride_axis is not None:
        raise trace_error("pltpu.roll with stride (a shift growing along stride_axis) "
                          "is not supported")
    return _trace.call("pltpu.roll", x, shift, axis)


def sync_copy(src, dst):
    rec = _trace.recorder()
    dref = dst.ref if isinstance(dst, Window) else dst
    if isinstance(dref, Ref):
        if not dref.writable:
            raise trace_error("copy into input '%s' (inputs are read-only)" % dref.name)
        _trace._protect(rec, dref.name, None)
    rec.emit("pltpu.sync_copy(%s, %s)" % (_ref_text(src, "the source"),
                                          _ref_text(dst, "the destination")))


def semaphore_signal(sem, inc=1):
    _trace.recorder().emit("pltpu.semaphore_signal(%s, %s)"
                           % (_ref_text(sem, "the semaphore"), _trace._fmt(inc)))


def semaphore_wait(sem, value=1):
    _trace.recorder().emit("pltpu.semaphore_wait(%s, %s)"
                           % (_ref_text(sem, "the semaphore"), _trace._fmt(value)))


def semaphore_read(sem):
    return scalar("pltpu.semaphore_read(%s)" % _ref_text(sem, "the semaphore"))
