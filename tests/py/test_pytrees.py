# SPDX-License-Identifier: MIT
"""pallas_call's operands, specs, outputs and scratch as pytrees (tuples,
lists, dicts, None), as JAX's: each argument is one kernel parameter
holding the same tree of refs, outputs come back in out_shape's tree."""
import collections

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

F32 = jnp.float32


def _arange(shape, dtype=np.float32):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


def test_dict_operand_dict_specs_dict_output():
    """A dict argument, its specs a dict of the same keys, a dict out_shape:
    the kernel's refs and the result are dicts (keys in sorted order on
    the device)."""
    a, b = _arange((16, 128)), _arange((16, 128)) * 3 + 1

    def kernel(xs, outs):
        assert sorted(xs) == ["a", "b"] and sorted(outs) == ["diff", "sum"]
        outs["sum"][...] = xs["a"][...] + xs["b"][...]
        outs["diff"][...] = xs["b"][...] - xs["a"][...]

    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    sds = jax.ShapeDtypeStruct((16, 128), F32)
    res = pl.pallas_call(kernel, grid=(2,), in_specs=[{"b": spec, "a": spec}],
                         out_specs={"sum": spec, "diff": spec},
                         out_shape={"sum": sds, "diff": sds})({"a": a, "b": b})
    assert isinstance(res, dict) and sorted(res) == ["diff", "sum"]
    np.testing.assert_array_equal(res["sum"], a + b)
    np.testing.assert_array_equal(res["diff"], b - a)


def test_nested_tuple_outputs_and_list_input():
    """A list of two arrays as one argument, outputs as (x, (y, z)): the
    result keeps the nesting (the top-level tuple too)."""
    x = _arange((8, 128), np.int32)
    y = x * 2

    def kernel(pair, o1, o23):
        p, q = pair
        o2, o3 = o23
        o1[...] = p[...] + q[...]
        o2[...] = p[...] * q[...]
        o3[...] = q[...] - p[...]

    sds = jax.ShapeDtypeStruct(x.shape, jnp.int32)
    r1, (r2, r3) = pl.pallas_call(kernel, out_shape=(sds, (sds, sds)))([x, y])
    np.testing.assert_array_equal(r1, x + y)
    np.testing.assert_array_equal(r2, x * y)
    np.testing.assert_array_equal(r3, y - x)


def test_namedtuple_operand_and_output():
    Pair = collections.namedtuple("Pair", "lo hi")
    lo, hi = _arange((8, 128)), _arange((8, 128)) + 100

    def kernel(p, o_lo, o_hi):	# a tuple out_shape's fields are parameters
        assert isinstance(p, Pair)
        o_lo[...] = jnp.minimum(p.lo[...], p.hi[...])
        o_hi[...] = jnp.maximum(p.lo[...], p.hi[...]) * 2

    sds = jax.ShapeDtypeStruct(lo.shape, F32)
    r = pl.pallas_call(kernel, out_shape=Pair(sds, sds))(Pair(hi, lo))
    assert isinstance(r, Pair)
    np.testing.assert_array_equal(r.lo, lo)
    np.testing.assert_array_equal(r.hi, hi * 2)


def test_scratch_tree_and_none_argument():
    """Scratch as a dict and a tuple of VMEM buffers, None as an argument
    (an empty tree: the kernel gets None and the device no operand)."""
    x = _arange((8, 128))

    def kernel(none, x_ref, o_ref, bufs, pair):
        assert none is None
        bufs["t"][...] = x_ref[...] * 2
        pair[0][...] = bufs["t"][...] + 1
        pair[1][...] = pair[0][...] * pair[0][...]
        o_ref[...] = pair[1][...]

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, F32),
                       scratch_shapes=[{"t": pltpu.VMEM((8, 128), F32)},
                                       (pltpu.VMEM((8, 128), F32),
                                        pltpu.VMEM((8, 128), F32))])(None, x)
    np.testing.assert_array_equal(y, (x * 2 + 1) ** 2)


def test_scalar_prefetch_dict_in_index_maps():
    """A dict of scalar-prefetch arrays as one argument: the index maps and
    the kernel get it as a dict of SMEM refs."""
    x = _arange((32, 128))
    rows = np.array([3, 0, 2, 1], np.int32)
    scale = np.array([10, 20, 30, 40], np.int32)

    def kernel(s, x_ref, o_ref):
        o_ref[...] = x_ref[...] * s["scale"][pl.program_id(0)].astype(F32)

    y = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, F32),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=1, grid=(4,),
            in_specs=[pl.BlockSpec((8, 128), lambda i, s: (s["rows"][i], 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i, s: (i, 0))))(
        {"rows": rows, "scale": scale}, x)
    want = np.concatenate([x[8 * r:8 * r + 8] * scale[i] for i, r in enumerate(rows)])
    np.testing.assert_array_equal(y, want)


def test_aliases_count_flat_operands():
    """input_output_aliases index the flattened operands (prefetch and tree
    leaves in order), as JAX's."""
    a, b = _arange((8, 128)), _arange((8, 128)) + 7

    def kernel(ab, o_ref):
        o_ref[...] = ab[1][...] + ab[0][...]

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(a.shape, F32),
                       input_output_aliases={1: 0})((a, b))
    np.testing.assert_array_equal(y, a + b)


def test_spec_tree_mismatch_names_the_place():
    x = _arange((8, 128))

    def kernel(pair, o_ref):
        o_ref[...] = pair[0][...]

    spec = pl.BlockSpec((8, 128), lambda: (0, 0))
    call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, F32),
                          in_specs=[[spec, spec, spec]])
    with pytest.raises(ValueError, match=r"in_specs\[0\].*does not match"):
        call([x, x])
    call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, F32),
                          in_specs=[spec])
    with pytest.raises(ValueError, match=r"in_specs\[0\]: one spec"):
        call([x, x])
    call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, F32),
                          in_specs=[{"a": spec, "b": spec}])
    with pytest.raises(ValueError, match=r"in_specs\[0\]"):
        call([x, x])


def test_out_specs_mismatch_and_bad_leaves():
    x = _arange((8, 128))
    spec = pl.BlockSpec((8, 128), lambda: (0, 0))
    sds = jax.ShapeDtypeStruct(x.shape, F32)

    def kernel(x_ref, o):
        o[0][...] = x_ref[...]

    with pytest.raises(ValueError, match=r"out_specs\[0\]"):
        pl.pallas_call(kernel, out_shape=[(sds, sds)], out_specs=[[spec]])(x)
    with pytest.raises(TypeError, match="ShapeDtypeStruct"):
        pl.pallas_call(kernel, out_shape=[(sds, "f32")])(x)
    with pytest.raises(TypeError, match="scratch type"):
        pl.pallas_call(lambda x_ref, o_ref, s: None, out_shape=sds,
                       scratch_shapes=[[(8, 128)]])(x)


def test_kernel_star_refs_get_trees():
    """def kernel(*refs): one element per argument, each its tree."""
    x = _arange((8, 128))
    seen = {}

    def kernel(*refs):
        seen["n"] = len(refs)
        (a, b), o = refs
        o[...] = a[...] * b[...]

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, F32))((x, x + 1))
    assert seen["n"] == 2
    np.testing.assert_array_equal(y, x * (x + 1))
