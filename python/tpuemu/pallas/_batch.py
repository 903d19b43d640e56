# SPDX-License-Identifier: MIT
"""jax.vmap of a pallas_call as one call, as JAX's batching rule makes it:
the batch is a new leading grid dimension ("parallel"), each mapped
operand and every output gets a leading squeezed block dimension (None)
indexed by it, unmapped operands keep their blocks, and the kernel's
pl.program_id(i) / pl.num_programs(i) count from after the new dimension.
Nested vmaps that map the same operands along axis 0 and stack along axis
0 become one batch of their product. What this cannot express (a
grid_spec, operands that are not plain arrays, pl.ANY blocks, an aliased
input left unmapped, interpret params) returns None: jax.vmap then runs
the call once per index."""
import copy

import numpy as np

# Grid dimensions a batch added before the kernel's own, in the call being
# traced: pl.program_id and pl.num_programs of the kernel add it.
offset = [0]


class Batchable:
    """What a pallas_call's run keeps for batching: the call's arguments,
    and how many leading batch dimensions its mapped operands have (0 for
    the call itself; a nested vmap's function has more)."""

    def __init__(self, kernel, out_shape, kw, pallas_call, in_axes=None, depth=0):
        self.kernel, self.out_shape, self.kw = kernel, out_shape, kw
        self.pallas_call = pallas_call
        self.in_axes, self.depth = in_axes, depth	# the nested vmap's in_axes

    def nested(self, in_axes):
        """The Batchable of jax.vmap(f, in_axes) of this one's function (in
        axes 0 or None, stacked along 0), or None."""
        if self.in_axes is not None and in_axes != self.in_axes:
            return None
        axes = in_axes if isinstance(in_axes, (list, tuple)) else [in_axes]
        if not all(a in (0, None) for a in axes):
            return None
        return Batchable(self.kernel, self.out_shape, self.kw, self.pallas_call, in_axes,
                         self.depth + 1)

    def takes(self, mapped):
        """Whether the operands @mapped (flags) are the ones the nested
        vmaps map."""
        if self.in_axes is None:
            return True
        axes = self.in_axes if isinstance(self.in_axes, (list, tuple)) else \
            [self.in_axes] * len(mapped)
        return len(axes) == len(mapped) and [a is not None for a in axes] == list(mapped)


def _plain(a):
    from ._keys import PallasKey
    from .._state import HostRef
    return isinstance(a, np.ndarray) and not isinstance(a, (PallasKey, HostRef)) and \
        a.dtype.kind in "biuf" or type(a).__name__ == "BF16Array"


def _specs(specs, n):
    if specs is None:
        return [None] * n
    if isinstance(specs, (list, tuple)):
        return list(specs) if len(specs) == n else None
    return [specs] if n == 1 else None


def _index(im, b, g):
    r = im(*g)
    return (b,) + (tuple(r) if isinstance(r, (tuple, list)) else (r,))


def _batched_spec(spec, shape, mapped):
    """@spec of an operand of per-instance @shape, mapped or not, in the
    batched call; False where it cannot be."""
    from . import BlockSpec, ANY
    if spec is None:
        if not mapped:
            return None
        rank = len(shape)
        return BlockSpec((None,) + tuple(shape), lambda b, *g: (b,) + (0,) * rank)
    ms = getattr(spec, "memory_space", None)
    if ms is ANY or getattr(spec, "indexing_mode", None) is not None:
        return False
    bs, im = spec.block_shape, spec.index_map
    if bs is None:
        if not mapped:
            return spec
        rank = len(shape)
        bs, im = tuple(shape), (lambda *g: (0,) * rank)
    if im is None:
        rank = len(tuple(bs))
        im = (lambda *g: (0,) * rank)
    if mapped:
        return BlockSpec((None,) + tuple(bs), lambda b, *g: _index(im, b, g),
                         memory_space=ms, pipeline_mode=spec.pipeline_mode)
    return BlockSpec(tuple(bs), lambda b, *g: im(*g), memory_space=ms,
                     pipeline_mode=spec.pipeline_mode)


def _params(cp):
    """compiler_params with a "parallel" batch dimension in front."""
    if cp is None:
        return None
    if isinstance(cp, dict):
        cp = copy.deepcopy(cp)
        m = cp.get("mosaic") or cp.get("mosaic_tpu")
        if isinstance(m, dict) and m.get("dimension_semantics") is not None:
            m["dimension_semantics"] = ("parallel",) + tuple(m["dimension_semantics"])
        return cp
    if getattr(cp, "dimension_semantics", None) is None:
        return cp
    cp = copy.copy(cp)
    cp.dimension_semantics = ("parallel",) + tuple(cp.dimension_semantics)
    return cp


def call(b, args, mapped):
    """The batched call of Batchable @b on @args (the @mapped ones with
    b.depth + 1 batch dimensions leading), or None."""
    from .. import ShapeDtypeStruct
    from . import interpret as _interpret
    kw = b.kw
    if kw.get("grid_spec") is not None or _interpret.params_of(kw.get("interpret")) is not None:
        return None
    if not all(_plain(a) for a in args) or not any(mapped) or not b.takes(mapped):
        return None
    depth = b.depth + 1
    lead = [np.shape(a)[:depth] for a, m in zip(args, mapped) if m]
    if len(set(lead)) != 1:
        return None
    lead = lead[0]
    n = int(np.prod(lead))
    flat = [np.reshape(a, (n,) + np.shape(a)[depth:]) if m else a for a, m in zip(args, mapped)]
    shapes = [np.shape(a)[1:] if m else np.shape(a) for a, m in zip(flat, mapped)]
    multi = isinstance(b.out_shape, (tuple, list))
    outs = list(b.out_shape) if multi else [b.out_shape]
    if not all(isinstance(o, ShapeDtypeStruct) for o in outs):
        return None
    ispecs, ospecs = _specs(kw.get("in_specs"), len(args)), _specs(kw.get("out_specs"),
                                                                   len(outs))
    if ispecs is None or ospecs is None:
        return None
    ispecs = [_batched_spec(s, sh, m) for s, sh, m in zip(ispecs, shapes, mapped)]
    ospecs = [_batched_spec(s, o.shape, True) for s, o in zip(ospecs, outs)]
    if any(s is False for s in ispecs + ospecs):
        return None
    for i, o in dict(kw.get("input_output_aliases") or {}).items():
        if not (0 <= i < len(args) and mapped[i]):
            return None		# an unmapped input cannot hold a batch of outputs
    grid = kw.get("grid") or ()
    grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
    kernel = b.kernel

    def body(*refs, **named):
        offset[0] += 1
        try:
            return kernel(*refs, **named)
        finally:
            offset[0] -= 1
    body.__name__ = getattr(kernel, "__name__", "kernel")
    new_outs = [ShapeDtypeStruct((n,) + tuple(o.shape), o.dtype) for o in outs]
    new_kw = dict(kw, grid=(n,) + grid, in_specs=tuple(ispecs),
                  out_specs=tuple(ospecs) if multi else ospecs[0],
                  compiler_params=_params(kw.get("compiler_params")))
    res = b.pallas_call(body, tuple(new_outs) if multi else new_outs[0], **new_kw)(*flat)
    res = list(res) if multi else [res]
    res = [np.reshape(r, tuple(lead) + tuple(o.shape)) for r, o in zip(res, outs)]
    return type(b.out_shape)(res) if multi else res[0]
