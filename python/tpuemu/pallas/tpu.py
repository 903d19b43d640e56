# SPDX-License-Identifier: MIT
"""jax.experimental.pallas.tpu over libtpurt (tpuemu.pallas.tpu as pltpu)."""
from . import GridSpec, run_scoped  # noqa: F401  (pltpu.run_scoped, as older JAX has it)
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


def async_copy(src, dst, sem):
    """pltpu.async_copy: make_async_copy(...) already started."""
    return AsyncCopy(src, dst, sem).start()


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
