# SPDX-License-Identifier: MIT
"""0-d operands and outputs of a pallas_call (a scalar per call, as a
jax.vmap over a 1-D array gives each call): the device's blocks have 1 to
4 dimensions, so each 0-d array travels as shape (1,), its block (1,) at
block index 0, and the kernel sees ref.reshape(()) of it (reads and
stores of the one element, x_ref[...] a 0-d value). Only for calls whose
specs are in_specs/out_specs (no grid_spec) over top-level arrays;
others keep the device's refusal."""
import numpy as np


def _is_0d(x):
    """A 0-d array of numbers (not a key, a semaphore or a ref)."""
    from ._keys import PallasKey
    if isinstance(x, (bool, int, float)):	# a Python scalar: a 0-d array, as JAX's
        return True
    return isinstance(x, (np.ndarray, np.generic)) and x.shape == () and \
        not isinstance(x, PallasKey) and x.dtype.kind in "biuf"


def _is_0d_out(o):
    from .. import ShapeDtypeStruct
    from .._trace import DType
    from . import _is_sem_type
    return isinstance(o, ShapeDtypeStruct) and tuple(o.shape) == () and \
        not _is_sem_type(o) and \
        (isinstance(o.dtype, DType) or isinstance(o.dtype, np.dtype) or
         isinstance(o.dtype, type) and issubclass(o.dtype, np.generic))


def _as_1d(x):
    if isinstance(x, bool):
        return np.array([x])
    if isinstance(x, (int, float)):		# JAX's weak types, 32-bit
        return np.array([x], np.int32 if isinstance(x, int) else np.float32)
    return np.reshape(x, (1,))


def _spec_1d(spec, what):
    """@spec of a 0-d array as the (1,) array's: None, memory space only,
    or block_shape () with an index map (whose result has no entries)."""
    from . import BlockSpec
    if spec is None:
        return None
    bs = getattr(spec, "block_shape", None)
    if bs is None:
        return spec
    if tuple(bs) != ():
        raise ValueError("%s is 0-d: its block shape must be (), not %r" % (what, tuple(bs)))
    return BlockSpec((1,), lambda *_: (0,), memory_space=spec.memory_space,
                     pipeline_mode=spec.pipeline_mode)


def applies(args, out_shape, grid_spec, in_specs, out_specs):
    """Whether a 0-d top-level operand or output needs the (1,) form."""
    from . import _has_semaphores
    if grid_spec is not None or _has_semaphores(out_shape, args):
        return False
    outs = out_shape if isinstance(out_shape, (tuple, list)) else (out_shape,)
    if any(isinstance(o, (tuple, list, dict)) for o in outs):
        return False
    return any(_is_0d(a) for a in args) or any(_is_0d_out(o) for o in outs)


def call(pallas_call, kernel, out_shape, kw, args):
    """The call with its 0-d arrays as (1,) ones, the results given back 0-d."""
    from .. import ShapeDtypeStruct
    multi = isinstance(out_shape, (tuple, list))
    outs = list(out_shape) if multi else [out_shape]
    zin = [k for k, a in enumerate(args) if _is_0d(a)]
    zout = [k for k, o in enumerate(outs) if _is_0d_out(o)]
    in_specs, out_specs = kw.get("in_specs"), kw.get("out_specs")
    if in_specs is not None:
        in_specs = list(in_specs) if isinstance(in_specs, (tuple, list)) else [in_specs]
        for k in zin:
            in_specs[k] = _spec_1d(in_specs[k], "args[%d]" % k)
        in_specs = tuple(in_specs)
    if out_specs is not None:
        ospecs = list(out_specs) if isinstance(out_specs, (tuple, list)) else [out_specs]
        for k in zout:
            ospecs[k] = _spec_1d(ospecs[k], "outputs[%d]" % k)
        out_specs = tuple(ospecs) if isinstance(out_specs, (tuple, list)) else ospecs[0]
    new_outs = [ShapeDtypeStruct((1,), o.dtype) if k in zout else o for k, o in enumerate(outs)]
    nin = len(args)
    views = set(zin) | {nin + k for k in zout}

    def body(*refs, **named):
        refs = [r.reshape(()) if k in views else r for k, r in enumerate(refs)]
        return kernel(*refs, **named)
    body.__name__ = getattr(kernel, "__name__", "kernel")
    new_args = [_as_1d(a) if k in zin else a for k, a in enumerate(args)]
    res = pallas_call(body, tuple(new_outs) if multi else new_outs[0],
                      **dict(kw, in_specs=in_specs, out_specs=out_specs))(*new_args)
    leaves = list(res) if multi else [res]
    leaves = [np.reshape(r, ()) if k in zout else r for k, r in enumerate(leaves)]
    return type(out_shape)(leaves) if multi else leaves[0]

