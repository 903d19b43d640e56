# SPDX-License-Identifier: MIT
"""pltpu.einshape: reshape and transpose by an equation, as JAX's
jax._src.pallas.einshape ("ab->ba", "a(bc)->abc" with b=4): the equation
becomes split dims, one transpose and merge dims (get_einshape_transforms,
as JAX's), run as at most one jnp.reshape (the splits), one jnp.transpose
and one jnp.reshape (the merges) (on the host NumPy's; in a kernel body the traced ops). The
errors are JAX's (ValueError for a bad equation or size)."""
import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class SplitDims:
    """Dimension @index into @sizes."""
    index: int
    sizes: tuple

    def transform_shape(self, shape):
        return (*shape[:self.index], *self.sizes, *shape[self.index + 1:])


@dataclasses.dataclass(frozen=True)
class MergeDims:
    """The @count dimensions from @index into one."""
    index: int
    count: int

    def transform_shape(self, shape):
        return (*shape[:self.index], math.prod(shape[self.index:self.index + self.count]),
                *shape[self.index + self.count:])


@dataclasses.dataclass(frozen=True)
class Transpose:
    permutation: tuple

    def transform_shape(self, shape):
        return tuple(shape[i] for i in self.permutation)


def _parse_side(s):
    """"a(bc)d" -> [['a'], ['b', 'c'], ['d']]: a name alone is a group of one."""
    s = s.replace(" ", "")
    groups, i = [], 0
    while i < len(s):
        if s[i] == "(":
            j = s.find(")", i)
            if j == -1:
                raise ValueError("Unmatched parenthesis in %r" % s)
            groups.append(list(s[i + 1:j]))
            i = j + 1
        elif s[i] == ")":
            raise ValueError("Unmatched parenthesis in %r" % s)
        else:
            groups.append([s[i]])
            i += 1
    return groups


def _parse_equation(equation):
    if equation.count("->") != 1:
        raise ValueError("Equation must contain exactly one '->'")
    lhs, rhs = equation.split("->")
    return _parse_side(lhs), _parse_side(rhs)


def _dim_sizes(lhs, shape, sizes):
    """Each name's size: from @shape, or for a split group from @sizes with
    at most one name left to infer."""
    if len(lhs) != len(shape):
        raise ValueError("Equation LHS has %d groups but input has %d dims. LHS: %s, "
                         "Input shape: %s" % (len(lhs), len(shape), lhs, tuple(shape)))
    known = {}
    for group, n in zip(lhs, shape):
        if len(group) == 1:
            name = group[0]
            if name in known and known[name] != n:
                raise ValueError("Inconsistent size for %s: %s vs %s" % (name, known[name], n))
            known[name] = n
            continue
        product, unknown = 1, []
        for name in group:
            if name in sizes:
                known[name] = sizes[name]
                product *= sizes[name]
            elif name in known:
                product *= known[name]
            else:
                unknown.append(name)
        if not unknown:
            if product != n:
                raise ValueError("Size mismatch for group %s: expected %s, got %s"
                                 % (group, n, product))
        elif len(unknown) == 1:
            if n % product != 0:
                raise ValueError("Cannot split size %s with known sizes %s" % (n, product))
            known[unknown[0]] = n // product
        else:
            raise ValueError("Ambiguous split for %s with size %s. Unknowns: %s. Provide "
                             "sizes via kwargs." % (group, n, unknown))
    return known


def get_einshape_transforms(equation, input_shape, **sizes):
    """The SplitDims, Transpose and MergeDims that @equation makes of an
    array of @input_shape (none for an identity)."""
    lhs, rhs = _parse_equation(equation)
    known = _dim_sizes(lhs, tuple(input_shape), sizes)
    for name in (n for g in rhs for n in g):
        if name not in known:
            if name not in sizes:
                raise ValueError("Unknown dimension %s in RHS" % name)
            known[name] = sizes[name]
    ops, at = [], 0
    for group in lhs:
        if len(group) > 1:
            ops.append(SplitDims(at, tuple(known[n] for n in group)))
        at += len(group)
    before = [n for g in lhs for n in g]
    after = [n for g in rhs for n in g]
    if set(before) != set(after):
        # a name on one side only would broadcast or reduce (JAX has neither)
        raise NotImplementedError("Only reordering/splitting/merging supported (no broadcast "
                                  "yet).")
    if before != after:
        ops.append(Transpose(tuple(before.index(n) for n in after)))
    for at, group in enumerate(rhs):
        if len(group) > 1:
            ops.append(MergeDims(at, len(group)))
    return ops


# --- the tile check of assert_is_tile_preserving (in a kernel body) ---

def _tiling(shape, dtype):
    """The (sublane, lane) tile Mosaic gives a value of @shape: @packing
    rows per 32-bit word, doubled up to the second-minor size or 8 (TPU
    v4 and later, as JAX's tpu_info.infer_tiling)."""
    from ..dtypes import itemsize_bits
    packing = max(1, 32 // itemsize_bits(dtype))
    rows = packing
    while rows < min(shape[-2], 8):
        rows *= 2
    return rows, 128


def _consolidate(factors):
    """Adjacent outer factors as one (an outer reshape may regroup them)."""
    out = []
    for size, kind in factors:
        if kind == "outer" and out and out[-1][1] == "outer":
            out[-1] = (out[-1][0] * size, "outer")
        else:
            out.append((size, kind))
    return out


def _split_factors(factors, targets):
    """@factors (one dimension's) cut into dimensions of @targets' sizes,
    or None where a cut would fall inside a sublane or lane tile."""
    queue = list(_consolidate(factors))
    result = []
    for k, need in enumerate(targets):
        dim, have = [], 1
        while have < need:
            if not queue:
                return None
            size, kind = queue.pop(0)
            if need % (have * size) == 0:
                dim.append((size, kind))
                have *= size
            elif (have * size) % need == 0 and kind == "outer":
                take = need // have
                dim.append((take, "outer"))
                queue.insert(0, (size // take, "outer"))
                have *= take
            else:
                return None
        if k == len(targets) - 1:	# trailing unit factors go with the last
            while queue and queue[0][0] == 1:
                dim.append(queue.pop(0))
        result.append(_consolidate(dim))
    return None if queue else result


def is_tile_preserving(shape, transforms, tiling):
    """Whether @transforms only move whole (sublane, lane) tiles of a value
    of @shape: each dimension tracked as its factors (outer tile counts,
    the sublane tile, the lane tile), the result's last two dimensions
    ending in the sublane and lane tiles."""
    if len(shape) < 2:
        return False
    t1, t2 = tiling
    if shape[-2] % t1 or shape[-1] % t2:
        return False
    r = len(shape)
    dims = []
    for i, n in enumerate(shape):
        tile, kind = (t1, "sublane") if i == r - 2 else (t2, "lane") if i == r - 1 else \
            (1, "outer")
        d = [(n // tile, "outer")] if n // tile > 1 else []
        if kind != "outer":
            d.append((tile, kind))
        dims.append(_consolidate(d))
    for t in transforms:
        if isinstance(t, SplitDims):
            new = _split_factors(dims[t.index], t.sizes)
            if new is None:
                return False
            dims[t.index:t.index + 1] = new
        elif isinstance(t, MergeDims):
            dims[t.index:t.index + t.count] = [_consolidate(
                [f for d in dims[t.index:t.index + t.count] for f in d])]
        else:
            dims = [dims[i] for i in t.permutation]
    return len(dims) >= 2 and dims[-2][-1:] == [(t1, "sublane")] and \
        dims[-1][-1:] == [(t2, "lane")]


def einshape(equation, x, assert_is_tile_preserving=False, **sizes):
    """pltpu.einshape(equation, x, **sizes): @x split, transposed and merged
    as @equation says ("a(bc)->bac", b=2). In a kernel body with
    assert_is_tile_preserving, an equation that would move elements within
    the (sublane, lane) tiles is refused, as Mosaic refuses it (here it
    would run: the device's reshape and transpose move any element)."""
    from .. import _trace
    shape = getattr(x, "shape", None)
    if shape is None:
        raise _trace.trace_error("pltpu.einshape(%r) of %s: its shape is not known while "
                                 "tracing" % (equation, _trace._fmt(x)))
    shape = tuple(shape)
    ops = get_einshape_transforms(equation, shape, **sizes)
    if assert_is_tile_preserving and len(ops) > 1 and _trace._rec is not None:
        tiling = _tiling(shape, x.dtype) if len(shape) >= 2 else None
        if tiling is None or not is_tile_preserving(shape, ops, tiling):
            raise ValueError("Tile preserving check failed for einshape kernel with equation: "
                             "%s and shape %s and tiling %s." % (equation, shape, tiling))
    return _run(x, shape, ops)


def _run(x, shape, ops):
    """@ops on @x as one reshape to the atoms (the splits), one transpose
    and one reshape to the result (the merges), each left out where it
    changes nothing: in a kernel each reshape that moves elements between
    rows and lanes is a copy. The atoms are not joined further: one run
    of atoms merged into the lanes ((1152, 512) to (3, 3, 65536)) is a
    copy of many windows where the atoms' own is of whole tiles."""
    from .. import numpy as jnp
    atoms, perm, out = shape, None, shape
    for op in ops:
        if isinstance(op, SplitDims):
            atoms = op.transform_shape(atoms)
        elif isinstance(op, Transpose):
            perm = op.permutation
        out = op.transform_shape(out)
    if perm is not None:
        if atoms != shape:
            x = jnp.reshape(x, atoms)
        x = jnp.transpose(x, perm)
        shape = Transpose(perm).transform_shape(atoms)
    return x if shape == out else jnp.reshape(x, out)
