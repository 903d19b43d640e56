# SPDX-License-Identifier: MIT
"""The explicit MXU ops (pltpu.matmul_push_rhs, matmul_lhs_fifo,
matmul_pop_fifo): a weight-stationary matrix unit driven by hand. Each
MXU of the core has staging registers a right-hand side is pushed into,
the gains (the weights it multiplies by), which an LHS push may first load
from a staging register, and a result FIFO each LHS push appends its
product to and each pop takes the oldest product from.

Mosaic schedules these ops when it compiles the kernel, so their order is
the kernel's program order and misuse (a pop of an empty FIFO, a push into
a full one, an LHS with no gains loaded) is a compile error; here they are
matched while tracing, each product computed (jnp.dot, float32 or int32
accumulation) and bound at its LHS push, so later stores to the operands'
refs do not change it. Because matching happens while tracing, the ops of
one MXU stay in one straight-line region: a push and its pop under
different pl.when conditions or device loops are refused."""
from .. import _trace, numpy as jnp
from .mosaic.error_handling import MosaicError

# A result FIFO's capacity, in 32-bit (8, 128) vregs: products waiting to
# be popped take (rows / 8) * (columns / 128) of them. The sim's choice
# (public sources give no figure): four MXUs of 32 such slots each.
FIFO_VREGS = 32


class _Mxu:
    """One MXU's state while a kernel is traced."""

    def __init__(self):
        self.staged = {}	# staging register -> (rhs (K, N), region)
        self.gains = None	# (rhs, region) loaded into the array
        self.fifo = []		# (product, region), oldest first


def _state(mxu_index, what):
    rec = _trace.recorder()
    if getattr(rec, "mxus", None) is None:	# the kernel's first MXU op: ask the device once
        from . import tpu
        rec.mxus, rec.mxu_info = {}, tpu.get_tpu_info()
    info = rec.mxu_info
    if not isinstance(mxu_index, int) or not 0 <= mxu_index < info.num_mxus:
        raise _trace.trace_error("%s: mxu_index=%r: this core has MXUs 0..%d"
                                 % (what, mxu_index, info.num_mxus - 1))
    return rec.mxus.setdefault(mxu_index, _Mxu()), info


def _region(rec):
    """The straight-line region the trace is in: its pl.when conditions
    and open device loops."""
    return tuple(rec.conds), tuple(at for at, _ in rec.loops)


def _same_region(held, what, of):
    if held != _region(_trace.recorder()):
        raise _trace.trace_error(
            "%s uses %s made under other pl.when conditions or device loops: the "
            "explicit MXU ops are matched in program order while tracing, so they "
            "stay in one straight-line region" % (what, of))


def _vregs(shape):
    return -(-shape[0] // 8) * -(-shape[1] // 128)


def _matrix(x, what, operand):
    if not isinstance(x, _trace.Value) and not hasattr(x, "shape"):
        raise _trace.trace_error("%s: %s is a value (ref[...]), not %r" % (what, operand, x))
    shape = getattr(x, "shape", None)
    if shape is None or len(shape) != 2:
        raise _trace.trace_error("%s: %s must be 2-D, not of shape %r" % (what, operand, shape))
    return tuple(shape)


def matmul_push_rhs(rhs, *, mxu_index=0, staging_register=0, transpose=False):
    """pltpu.matmul_push_rhs: @rhs (K, N), or (N, K) with @transpose, into
    staging register @staging_register of MXU @mxu_index."""
    what = "pltpu.matmul_push_rhs"
    mxu, info = _state(mxu_index, what)
    shape = _matrix(rhs, what, "the rhs")
    if max(shape) > info.mxu_column_size:
        raise _trace.trace_error("%s: the rhs %r is larger than the %dx%d MXU"
                                 % (what, shape, info.mxu_column_size, info.mxu_column_size))
    if staging_register not in (0, 1):
        raise _trace.trace_error("%s: staging_register=%r: an MXU has staging registers "
                                 "0 and 1" % (what, staging_register))
    value = jnp.transpose(rhs) if transpose else rhs
    mxu.staged[staging_register] = (_trace.local(value), _region(_trace.recorder()))


def matmul_lhs_fifo(lhs, *, mxu_index=0, load_staged_rhs=None):
    """pltpu.matmul_lhs_fifo: with @load_staged_rhs a staging register,
    its rhs loaded into the gains first; then @lhs (M, K) times the gains
    appended to the result FIFO."""
    what = "pltpu.matmul_lhs_fifo"
    mxu, _ = _state(mxu_index, what)
    if load_staged_rhs is not None:
        if load_staged_rhs not in mxu.staged:
            raise MosaicError("%s(load_staged_rhs=%r): nothing was pushed into that staging "
                              "register of MXU %d" % (what, load_staged_rhs, mxu_index))
        mxu.gains = mxu.staged.pop(load_staged_rhs)
    if mxu.gains is None:
        raise MosaicError("%s: MXU %d has no gains loaded (push an rhs, then load it "
                          "with load_staged_rhs=)" % (what, mxu_index))
    gains, region = mxu.gains
    _same_region(region, what, "gains")
    m, k = _matrix(lhs, what, "the lhs")
    if k != gains.shape[0]:
        raise _trace.trace_error("%s: the lhs %r does not contract with the gains %r"
                                 % (what, (m, k), tuple(gains.shape)))
    out = (m, gains.shape[1])
    held = sum(_vregs(p.shape) for p, _ in mxu.fifo)
    if held + _vregs(out) > FIFO_VREGS:
        raise MosaicError("Cannot schedule FIFO push instruction when the FIFO is full "
                          "(%s: MXU %d's result FIFO holds %d of its %d vregs; a %r product "
                          "needs %d more)" % (what, mxu_index, held, FIFO_VREGS, out,
                                              _vregs(out)))
    integer = _trace.dt_of(lhs) in (_trace.int8, _trace.uint8, _trace.int32)
    acc = _trace.int32 if integer else _trace.float32
    product = jnp.dot(lhs, gains, preferred_element_type=acc)
    mxu.fifo.append((_trace.local(product), _region(_trace.recorder())))


def matmul_pop_fifo(*, shape, dtype, mxu_index=0):
    """pltpu.matmul_pop_fifo: the oldest product in MXU @mxu_index's result
    FIFO, of @shape, as @dtype."""
    what = "pltpu.matmul_pop_fifo"
    mxu, _ = _state(mxu_index, what)
    if not mxu.fifo:
        raise MosaicError("Cannot schedule FIFO pop instruction when the FIFO is empty "
                          "(%s: MXU %d)" % (what, mxu_index))
    product, region = mxu.fifo[0]
    _same_region(region, what, "a product")
    if tuple(shape) != tuple(product.shape):
        raise _trace.trace_error("%s(shape=%r): the oldest product in MXU %d's FIFO is %r"
                                 % (what, tuple(shape), mxu_index, tuple(product.shape)))
    mxu.fifo.pop(0)
    dt = _trace.as_dtype(dtype)
    return product if product.dt is dt else product.astype(dt)
