# SPDX-License-Identifier: MIT
"""checkify.check and pl.debug_check in kernels: under checkify.checkify,
or with pl.enable_debug_checks, a pallas_call gets one more output, an
int32 SMEM array: word 0 the number of the first check that failed (0:
none), then its format arguments. Word 0 is cleared at the grid's first
step; a check writes only while it is 0, so the first failure in grid
order is the one reported, as JAX's: to the checkify call, or else raised
as JaxRuntimeError when the call returns."""
import inspect

import numpy as _np

from .. import _to_scalar, _trace, checkify as _checkify

MAX_ARGS = 15		# format arguments a check can carry
_current = None		# (the check output's ref, the checks traced so far)


def active():
    """Whether a pallas_call now gives its kernel a check output."""
    from .._config import config
    return _checkify.active() or config.jax_pallas_enable_debug_checks


def debug_check(condition, message):
    """pl.debug_check(condition, message): with pl.enable_debug_checks, a
    check whose failure raises JaxRuntimeError(message) when the call
    returns (or goes to a running checkify.checkify); otherwise nothing."""
    from .._config import config
    if not isinstance(message, str):
        raise TypeError("pl.debug_check: the message must be a str, not %r" % (message,))
    if not config.jax_pallas_enable_debug_checks:
        return
    if _trace._rec is None:
        if not bool(_np.all(_np.asarray(condition))):
            _report(message)
        return
    kernel_check(condition, message.replace("{", "{{").replace("}", "}}"), (), {})


def _report(message):
    if _checkify.active():
        _checkify.record(message)
    else:
        raise _checkify.JaxRuntimeError(message)


def kernel_check(pred, msg, fmt_args, fmt_kwargs):
    """checkify.check(pred, msg, ...) in a kernel body being traced."""
    from . import when
    if _current is None:
        raise _trace.trace_error("checkify.check in a kernel: run the pallas_call under "
                                 "checkify.checkify(...), which gives the check somewhere "
                                 "to report to")
    ref, sites = _current
    vals = list(fmt_args) + list(fmt_kwargs.values())
    if len(vals) > MAX_ARGS:
        raise _trace.trace_error("checkify.check: %d format arguments, at most %d here"
                                 % (len(vals), MAX_ARGS))
    for n, v in enumerate(vals):
        d = _trace.dt_of(v)
        if isinstance(v, float) or _trace.is_float_dt(d) or \
                not isinstance(v, (int, _trace.Value)):
            raise _trace.trace_error("checkify.check: format argument %d (%r) must be an "
                                     "integer (a program id, an SMEM scalar, a Python int) "
                                     "in a kernel" % (n, v))
    sites.append((msg, len(fmt_args), list(fmt_kwargs)))
    number = len(sites)

    def report():
        ref[0] = number
        for n, v in enumerate(vals):
            ref[1 + n] = int(v) if isinstance(v, (bool, int)) else v.astype(_trace.int32)

    if not isinstance(pred, _trace.Value):
        if not bool(_np.all(pred)):
            when(ref[0] == 0)(report)
        return
    if not pred.scalar:
        # a vector predicate (all of it) moved to the scalar core, which
        # decides what runs
        from .. import numpy as jnp
        if not _to_scalar.is_one_element(pred):
            pred = jnp.all(pred)
        pred = _to_scalar.to_scalar(pred.astype(_trace.int32), "checkify.check's predicate") != 0
    when(ref[0] == 0)(lambda: when(~pred)(report))


def checkify_call(kernel, out_shape, kw, args, pallas_call):
    """The pallas_call of @kernel with the check output after its own
    outputs: runs it, records the first failed check's message in the
    running checkify.checkify call, and returns the kernel's outputs."""
    from . import BlockSpec, GridSpec, _at_grid_step
    from .tpu import SMEM
    from .. import ShapeDtypeStruct
    global _current
    gs = kw["grid_spec"] or GridSpec(kw["grid"], kw["in_specs"], kw["out_specs"],
                                     kw["scratch_shapes"])
    single = not isinstance(out_shape, (list, tuple))
    outs = [out_shape] if single else list(out_shape)
    ospecs = gs.out_specs
    if ospecs is None:
        ospecs = [BlockSpec()] * len(outs)
    else:
        ospecs = [ospecs] if single or not isinstance(ospecs, (list, tuple)) else list(ospecs)
    at = len(args) + len(outs)		# the check output's place among the refs
    sig = inspect.signature(kernel).parameters.values()
    params = [p.name for p in sig if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    scratch = gs.scratch_shapes
    nuser = at + len(scratch)
    params = (params + ["refs_%d" % k for k in range(len(params), nuser)])[:nuser]
    name = "_checks"
    while name in params:
        name += "_"
    grid = tuple(gs.grid or ())
    sites = []

    def checked(*refs):
        global _current
        refs = list(refs)
        ref = refs.pop(at)

        def clear():
            ref[0] = 0
        _at_grid_step(grid, "first", clear)
        _current = (ref, sites)
        try:
            kernel(*refs)
        finally:
            _current = None
    checked.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
         for n in params[:at] + [name] + params[at:]])
    checked.__name__ = getattr(kernel, "__name__", "kernel")
    checked._checkified = True
    new_ospecs = ospecs + [BlockSpec(memory_space=SMEM)]
    inner = dict(kw)
    if kw["grid_spec"] is not None:
        inner.update(grid_spec=GridSpec(gs.grid, gs.in_specs, new_ospecs, scratch,
                                        gs.num_scalar_prefetch))
    else:
        inner.update(out_specs=new_ospecs)
    res = pallas_call(checked, tuple(outs) + (ShapeDtypeStruct((1 + MAX_ARGS,), _trace.int32),),
                      **inner)(*args)
    words = _np.asarray(res[-1])
    if words[0]:
        msg, npos, names = sites[int(words[0]) - 1]
        vals = [int(w) for w in words[1:1 + npos + len(names)]]
        _report(msg.format(*vals[:npos], **dict(zip(names, vals[npos:]))))
    return res[0] if single else tuple(res[:-1])
