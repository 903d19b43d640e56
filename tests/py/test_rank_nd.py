# SPDX-License-Identifier: MIT
"""Values and refs of rank 3 and 4 in kernel bodies, against NumPy:
reductions along every axis (keepdims or not, tuples of axes), transposes
of every permutation, swapaxes and moveaxis, reads and stores with an
index in a middle dimension or of a column, and reshapes that move
elements between rows and columns. The body's ops see 2-D refs, so each
of these is decomposed (libtpurt/stmt_nd.c); one that would take too many
ops is refused by name."""
import itertools

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl

_DT = {"float32": jnp.float32, "bfloat16": jnp.bfloat16, "int32": jnp.int32,
       "int8": jnp.int8, "uint8": jnp.uint8, "bool": jnp.bool_}


def _data(shape, dtype, seed=0):
    """Distinct small values (exact in bf16, sums exact too); bool masks."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in ("int8", "uint8"):
        lo = -100 if dtype == "int8" else 0
        return rng.integers(lo, lo + 200, shape).astype(dtype)
    v = rng.permutation(n).reshape(shape) % 97 - 40
    return v.astype("float32" if dtype == "bfloat16" else dtype)


def _dev(a, dtype):
    return jax.to_bf16(a) if dtype == "bfloat16" else a


def _host(a, dtype):
    return jax.from_bf16(a) if dtype == "bfloat16" else a


def _run(fn, x, dtype, ref, out_dtype=None):
    """o_ref[...] = fn(x_ref[...]) against @ref (NumPy's answer)."""
    def kernel(x_ref, o_ref):
        o_ref[...] = fn(x_ref[...])

    od = out_dtype or _DT[dtype]
    shape = ref.shape if ref.ndim else (1, 1)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shape, od))(_dev(x, dtype))
    out = _host(out, dtype) if od is jnp.bfloat16 else out
    np.testing.assert_array_equal(out, ref.reshape(shape))
    return out


# --- reductions ---

_SHAPES = [(3, 5, 128), (2, 3, 8, 128), (4, 2, 3, 16)]


@pytest.mark.parametrize("shape", _SHAPES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("fn", ["sum", "max", "min"])
def test_reduce_every_axis(shape, keepdims, fn):
    x = _data(shape, "float32")
    for axis in range(-len(shape), len(shape)):
        ref = getattr(np, fn)(x, axis=axis, keepdims=keepdims)
        _run(lambda v: getattr(jnp, fn)(v, axis=axis, keepdims=keepdims), x, "float32", ref)


@pytest.mark.parametrize("dtype", ["bfloat16", "int32", "int8", "uint8"])
@pytest.mark.parametrize("fn", ["sum", "max", "min"])
def test_reduce_dtypes(dtype, fn):
    """max and min keep the dtype; jnp.sum of int8 and uint8 sums in int32
    and uint32, as JAX's (NumPy's int64 sum, taken modulo 2^32)."""
    shape = (2, 3, 4, 128)
    x = _data(shape, dtype, 1)
    want = {"int8": np.int32, "uint8": np.uint32}.get(dtype, x.dtype) if fn == "sum" \
        else x.dtype
    for axis in range(4):
        ref = getattr(np, fn)(x, axis=axis).astype(want)
        if dtype == "bfloat16":		# summed in float32, rounded once
            ref = jax.from_bf16(jax.to_bf16(ref))
        _run(lambda v: getattr(jnp, fn)(v, axis=axis), x, dtype, ref,
             {"int8": jnp.int32, "uint8": jnp.uint32}.get(dtype) if fn == "sum" else None)


@pytest.mark.parametrize("dtype,acc", [("int8", "int32"), ("uint8", "uint32"),
                                       ("int32", "int32"), ("int8", "float32")])
def test_sum_dtype_argument(dtype, acc):
    """jnp.sum(x, dtype=...) casts before it sums (2-D and 3-D values); int8
    sums past 127 show the int32 accumulation."""
    for shape, axis in (((16, 128), 0), ((4, 8, 128), 1)):
        x = np.full(shape, 100 if dtype != "int8" else 120, dtype=dtype)
        ref = np.sum(x.astype(acc), axis=axis)
        _run(lambda v: jnp.sum(v, axis=axis, dtype=getattr(jnp, acc)), x, dtype, ref,
             getattr(jnp, acc))


def test_bool_reductions_sum_all_any():
    x = _data((3, 4, 128), "bool", 2)
    for axis in range(3):
        _run(lambda v: jnp.sum(v, axis=axis), x, "bool", np.sum(x, axis=axis).astype(np.int32),
             jnp.int32)
        _run(lambda v: jnp.any(v, axis=axis), x, "bool", np.any(x, axis=axis))
        _run(lambda v: jnp.all(v, axis=axis, keepdims=True), x, "bool",
             np.all(x, axis=axis, keepdims=True))


@pytest.mark.parametrize("shape", [(3, 5, 128), (2, 3, 4, 128)], ids=str)
@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_argmax_argmin_every_axis(shape, fn):
    x = _data(shape, "float32", 3)
    x.flat[::7] = 13.0			# ties: the first index wins
    for axis in range(len(shape)):
        ref = getattr(np, fn)(x, axis=axis).astype(np.int32)
        _run(lambda v: getattr(jnp, fn)(v, axis=axis), x, "float32", ref, jnp.int32)


def test_mean_and_tuples_of_axes():
    x = _data((2, 4, 8, 128), "float32", 4)
    for axes in [(0, 1), (1, 2), (0, 2), (1, 3), (0, 1, 2), (0, 2, 3), (-1, -3)]:
        _run(lambda v: jnp.sum(v, axis=axes), x, "float32", np.sum(x, axis=axes))
        _run(lambda v: jnp.max(v, axis=axes, keepdims=True), x, "float32",
             np.max(x, axis=axes, keepdims=True))
    _run(lambda v: jnp.mean(v, axis=1), x, "float32", np.mean(x, axis=1))
    _run(lambda v: v.mean(axis=(0, 2)), x, "float32",
         np.mean(x, axis=(0, 2), dtype=np.float64).astype(np.float32))
    _run(lambda v: v.sum(axis=2, keepdims=True) * 2.0, x, "float32",
         np.sum(x, axis=2, keepdims=True) * 2)
    # axis 1 first leaves (4, 1, 128): axis 0 is then a column reduction of
    # the whole value (no leading index to take a window at)
    x = _data((4, 8, 128), "int32", 4)
    _run(lambda v: jnp.sum(v, axis=(0, 1)), x, "int32", np.sum(x, axis=(0, 1)))
    _run(lambda v: jnp.max(v, axis=(0, 1), keepdims=True), x, "int32",
         np.max(x, axis=(0, 1), keepdims=True))


@pytest.mark.parametrize("shape,axis,fn,trips", [
    ((300, 8, 128), 1, "argmax", 300), ((300, 8, 128), 1, "sum", 300),
    ((20, 30, 8, 128), 2, "argmin", 600), ((40, 3, 8, 128), (0, 2), "max", 120),
    ((300, 4, 16), 1, "max", 300)], ids=str)
def test_middle_axis_reductions_of_many_rows_loop(shape, axis, fn, trips):
    """A reduction along a middle axis repeats its column reductions or
    chains over the leading positions: past 16, one device loop (unrolled,
    these took more than the kernel's 256 windows, or 512 ops)."""
    x = _data(shape, "int32", 12)
    _run(lambda v: getattr(jnp, fn)(v, axis=axis), x, "int32",
         getattr(np, fn)(x, axis=axis).astype(np.int32))
    assert jax.last_stats()["loop_trips"] >= trips, jax.last_stats()


def test_reduction_of_a_computed_value_and_an_nd_zeros():
    x = _data((4, 8, 128), "int32", 5)

    def fn(v):
        return jnp.sum(v * 2 + jnp.zeros((4, 8, 128), jnp.int32), axis=1) + \
            jnp.max(jnp.ones((4, 8, 128), jnp.int32), axis=1)
    _run(fn, x, "int32", np.sum(x * 2, axis=1) + 1)


def test_reduction_refusals_name_the_axis():
    x = _data((2, 8, 128), "float32")
    with pytest.raises(pl.TraceError, match="axis 3 of a value of rank 3"):
        _run(lambda v: jnp.sum(v, axis=3), x, "float32", np.sum(x, axis=2))
    with pytest.raises(pl.TraceError, match="argmax takes one axis, not a tuple"):
        _run(lambda v: jnp.argmax(v, axis=(0, 1)), x, "float32", np.sum(x, axis=(0, 1)))


# --- transposes ---

@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8", "bool"])
def test_every_permutation_of_rank_3(dtype):
    x = _data((3, 4, 16), dtype, 6)
    for perm in itertools.permutations(range(3)):
        _run(lambda v: jnp.transpose(v, perm), x, dtype, np.transpose(x, perm))


def test_every_permutation_of_rank_4():
    x = _data((2, 3, 4, 8), "int32", 7)
    for perm in itertools.permutations(range(4)):
        _run(lambda v: jnp.transpose(v, perm), x, "int32", np.transpose(x, perm))


def test_T_swapaxes_moveaxis_and_method():
    x = _data((2, 3, 4, 16), "float32", 8)
    _run(lambda v: v.T, x, "float32", x.T)
    _run(lambda v: jnp.transpose(v), x, "float32", np.transpose(x))
    for a, b in [(0, 3), (1, 2), (-1, -2), (0, 1)]:
        _run(lambda v: jnp.swapaxes(v, a, b), x, "float32", np.swapaxes(x, a, b))
        _run(lambda v: v.swapaxes(a, b), x, "float32", np.swapaxes(x, a, b))
        _run(lambda v: jnp.moveaxis(v, a, b), x, "float32", np.moveaxis(x, a, b))
    _run(lambda v: v.transpose(2, 0, 1, 3) + 1.0, x, "float32", np.transpose(x, (2, 0, 1, 3)) + 1)


def test_transpose_refusals():
    x = _data((2, 3, 16), "float32")
    with pytest.raises(pl.TraceError, match="permutation of its 3 axes"):
        _run(lambda v: jnp.transpose(v, (1, 0)), x, "float32", x)
    with pytest.raises(pl.TraceError, match="axis 1 repeated"):
        _run(lambda v: jnp.transpose(v, (1, 1, 0)), x, "float32", x)


# --- indices in middle dimensions, columns ---

@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "int8"])
def test_middle_index_reads(dtype):
    x = _data((4, 3, 128), dtype, 9)
    y = _data((2, 3, 4, 128), dtype, 10)

    def kernel(x_ref, y_ref, a_ref, b_ref, c_ref):
        a_ref[...] = x_ref[:, 1, :]
        b_ref[...] = y_ref[:, 2, :, :]
        c_ref[...] = y_ref[1, :, 3, :]

    d = _DT[dtype]
    a, b, c = pl.pallas_call(kernel, out_shape=[
        jax.ShapeDtypeStruct((4, 128), d), jax.ShapeDtypeStruct((2, 4, 128), d),
        jax.ShapeDtypeStruct((3, 128), d)])(_dev(x, dtype), _dev(y, dtype))
    np.testing.assert_array_equal(_host(a, dtype), x[:, 1, :])
    np.testing.assert_array_equal(_host(b, dtype), y[:, 2])
    np.testing.assert_array_equal(_host(c, dtype), y[1, :, 3])


def test_middle_index_stores_and_columns():
    x = _data((4, 128), "float32", 11)

    def kernel(x_ref, o_ref, c_ref, r_ref):
        o_ref[...] = jnp.zeros((4, 3, 128), jnp.float32)
        o_ref[:, 2, :] = x_ref[...] * 2.0
        o_ref[:, 0, :] += x_ref[...]
        c_ref[...] = jnp.zeros((4, 6), jnp.float32)
        for j in range(3):
            c_ref[:, 2 * j] = x_ref[:, j] + float(j)
        r_ref[...] = x_ref[:, 5] * 3.0

    o, cols, r = pl.pallas_call(kernel, out_shape=[
        jax.ShapeDtypeStruct((4, 3, 128), jnp.float32),
        jax.ShapeDtypeStruct((4, 6), jnp.float32),
        jax.ShapeDtypeStruct((4,), jnp.float32)])(x)
    want = np.zeros((4, 3, 128), np.float32)
    want[:, 2] = x * 2
    want[:, 0] += x
    np.testing.assert_array_equal(o, want)
    wc = np.zeros((4, 6), np.float32)
    for j in range(3):
        wc[:, 2 * j] = x[:, j] + j
    np.testing.assert_array_equal(cols, wc)
    np.testing.assert_array_equal(r, x[:, 5] * 3)


# --- reshapes ---

@pytest.mark.parametrize("src,dst", [
    ((1024,), (8, 128)), ((8, 128), (1024,)), ((4, 6), (6, 4)), ((2, 3, 4), (4, 6)),
    ((16, 64), (8, 128)), ((8, 128), (32, 32)), ((6, 10), (4, 15)), ((12,), (12, 1)),
    ((12, 1), (3, 4)), ((3, 4), (12, 1)), ((2, 8, 16), (16, 16)), ((4, 32), (2, 4, 4, 4)),
    ((2, 3, 4, 8), (8, 3, 8)), ((64, 4), (-1, 16))], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_reshapes(src, dst, dtype):
    x = _data(src, dtype, 12)
    _run(lambda v: v.reshape(dst), x, dtype, x.reshape(dst))


def test_reshape_then_reduce_and_transpose():
    x = _data((256,), "float32", 13)
    _run(lambda v: jnp.sum(v.reshape(4, 8, 8), axis=1), x, "float32",
         np.sum(x.reshape(4, 8, 8), axis=1))
    _run(lambda v: jnp.transpose(jnp.reshape(v, (2, 16, 8)), (2, 0, 1)), x, "float32",
         np.transpose(x.reshape(2, 16, 8), (2, 0, 1)))


def test_too_many_ops_are_refused_by_name():
    x = _data((262144,), "float32")
    with pytest.raises(pl.TraceError, match=r"reshape of a value of shape \(1, 262144\) would "
                                            r"take 131072 ops \(at most 65536\)"):
        _run(lambda v: v.reshape(131072, 2), x, "float32", x.reshape(131072, 2))


@pytest.mark.parametrize("case", ["transpose", "reshape", "broadcast", "slab_transposes"])
def test_many_positions_run_as_one_device_loop(case):
    """Past 16 positions a transpose's, reshape's or broadcast's copies
    and ops are one device loop whose windows index from its trip (a
    kernel holds at most 256 windows: unrolled, these took 2 or 3 each)."""
    if case == "transpose":
        x = _data((20, 24, 16), "int32", 8)
        _run(lambda v: jnp.transpose(v, (1, 0, 2)), x, "int32", np.transpose(x, (1, 0, 2)))
        trips = 20	# a copy per index of x's dimension 0, the fewer
    elif case == "reshape":
        x = _data((4096,), "float32", 9)
        _run(lambda v: v.reshape(2048, 2), x, "float32", x.reshape(2048, 2))
        trips = 2048
    elif case == "broadcast":
        x = _data((1, 300, 128), "float32", 10)
        _run(lambda v: jnp.broadcast_to(v.reshape(1, 300, 1, 128), (1, 300, 8, 128)) + 0.0,
             x, "float32", np.broadcast_to(x.reshape(1, 300, 1, 128), (1, 300, 8, 128)))
        trips = 300
    else:
        x = _data((3, 40, 128), "float32", 11)
        _run(lambda v: jnp.transpose(v, (2, 1, 0)), x, "float32", np.transpose(x, (2, 1, 0)))
        trips = 40	# 2-D transposes of x's (3, 128) slabs, one per index of dimension 1
    assert jax.last_stats()["loop_trips"] >= trips, jax.last_stats()


# --- iota ---

@pytest.mark.parametrize("shape", [(2, 3, 128), (2, 3, 4, 16)], ids=str)
@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_broadcasted_iota_of_every_dimension(shape, dtype):
    from tpuemu import lax
    for dim in range(len(shape)):
        def kernel(o_ref, p_ref):
            o_ref[...] = lax.broadcasted_iota(_DT[dtype], shape, dim)
            p_ref[...] = lax.broadcasted_iota(jnp.int32, shape, dim) + pl.program_id(0) * 10

        o, p = pl.pallas_call(kernel, grid=(2,), out_specs=[
            pl.BlockSpec(shape, lambda i: (0,) * len(shape)),
            pl.BlockSpec(shape, lambda i: (0,) * len(shape))], out_shape=[
            jax.ShapeDtypeStruct(shape, _DT[dtype]), jax.ShapeDtypeStruct(shape, jnp.int32)])()
        want = np.indices(shape)[dim]
        np.testing.assert_array_equal(o, want.astype(dtype))
        np.testing.assert_array_equal(p, want + 10)	# the last step's offset


def test_iota_mask_along_a_middle_axis():
    """A causal-style mask of a 3-D block: where(iota(1) <= iota(2))."""
    from tpuemu import lax
    x = _data((2, 8, 8), "float32", 14)

    def fn(v):
        shape = (2, 8, 8)
        m = lax.broadcasted_iota(jnp.int32, shape, 1) <= lax.broadcasted_iota(jnp.int32, shape, 2)
        return jnp.where(m, v, 0.0)
    _run(fn, x, "float32", np.where(np.triu(np.ones((8, 8), bool)), x, 0).astype(np.float32))


# --- element-wise ops broadcasting N-D shapes ---

@pytest.mark.parametrize("sa,sb", [
    ((4, 1, 128), (1, 4, 128)), ((2, 8, 128), (2, 1, 128)), ((1, 8, 128), (3, 8, 128)),
    ((2, 3, 4, 16), (3, 1, 16)), ((2, 8, 1), (2, 1, 128)), ((8, 128), (2, 1, 128)),
    ((2, 1, 4, 16), (1, 3, 1, 16)), ((3, 1, 16), (3, 5, 1))], ids=str)
def test_binary_ops_broadcast_nd_shapes(sa, sb):
    a, b = _data(sa, "float32", 15), _data(sb, "float32", 16)

    def kernel(a_ref, b_ref, o_ref, m_ref):
        o_ref[...] = a_ref[...] * 2.0 - b_ref[...]
        m_ref[...] = b_ref[...] < a_ref[...]

    shape = np.broadcast_shapes(sa, sb)
    o, m = pl.pallas_call(kernel, out_shape=[jax.ShapeDtypeStruct(shape, jnp.float32),
                                             jax.ShapeDtypeStruct(shape, jnp.bool_)])(a, b)
    np.testing.assert_array_equal(o, a * 2 - b)
    np.testing.assert_array_equal(m, b < a)


def test_softmax_along_a_middle_axis():
    x = _data((2, 8, 128), "float32", 17) / 16

    def fn(v):
        e = jnp.exp(v - jnp.max(v, axis=1, keepdims=True))
        return e / jnp.sum(e, axis=1, keepdims=True)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)

    def kernel(x_ref, o_ref):
        o_ref[...] = fn(x_ref[...])
    got = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(x)
    np.testing.assert_allclose(got, want, rtol=2e-6)


def test_shapes_that_do_not_broadcast_are_refused():
    a, b = _data((2, 3, 128), "float32"), _data((3, 2, 128), "float32")
    with pytest.raises(pl.TraceError, match=r"shapes \(2, 3, 128\) and \(3, 2, 128\) do not "
                                            r"broadcast"):
        _run(lambda v: v + jnp.zeros((3, 2, 128)), a, "float32", a)


def test_augmented_stores_into_nd_refs():
    x = _data((2, 8, 128), "float32", 18)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
        o_ref[...] += x_ref[...] * 2.0
        o_ref[:, 1:3, :] -= jnp.max(x_ref[...], axis=1, keepdims=True)

    o = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(x)
    want = x * 3
    want[:, 1:3] -= x.max(axis=1, keepdims=True)
    np.testing.assert_array_equal(o, want)


def test_where_keeps_the_nd_shape():
    """A where of 3-D values is 3-D: reduced along its middle axis after."""
    x = _data((2, 8, 128), "float32", 19)

    def fn(v):
        return jnp.sum(jnp.where(v > 0, v, 0.0), axis=1)
    _run(fn, x, "float32", np.sum(np.where(x > 0, x, 0), axis=1))
    # operands that broadcast across the leading dimensions: jnp.where
    # broadcasts them first (libtpurt's where of rank 3 or 4 takes one shape)
    _run(lambda v: jnp.where(v > 0, v, jnp.max(v, axis=1, keepdims=True)), x, "float32",
         np.where(x > 0, x, np.max(x, axis=1, keepdims=True)))
    _run(lambda v: jnp.where(jnp.max(v, axis=1, keepdims=True) > 0, v, 0.0), x, "float32",
         np.where(np.max(x, axis=1, keepdims=True) > 0, x, 0))


# --- other ops keep the shape; rolls and concatenations along any axis ---

def test_casts_clips_rolls_and_concatenations_of_nd_values():
    x = _data((2, 4, 8, 16), "float32", 20)
    _run(lambda v: jnp.sum(v.astype(jnp.int32), axis=1), x, "float32",
         np.sum(x.astype(np.int32), axis=1), jnp.int32)
    _run(lambda v: jnp.max(jnp.clip(v, -5.0, 5.0), axis=2), x, "float32",
         np.max(np.clip(x, -5, 5), axis=2))
    for axis in range(-4, 4):
        for shift in (1, -3, 9):
            _run(lambda v: jnp.roll(v, shift, axis=axis), x, "float32", np.roll(x, shift, axis))
        _run(lambda v: jnp.concatenate([v, v * 2.0, -v],
                                       axis=axis), x, "float32",
             np.concatenate([x, x * 2, -x], axis=axis))


def test_roll_of_a_traced_shift_along_any_axis():
    """Traced shifts: along the outer and last axes the device's roll; along
    a middle axis of rank 3 or 4 the value stored twice into a VMEM scratch
    and read back at the shifted start, negative shifts and ones past the
    length too."""
    from tpuemu.pallas import tpu as pltpu
    x = _data((3, 16, 128), "int32", 21)
    y = _data((2, 3, 8, 128), "float32", 22)

    def kernel(s_ref, x_ref, y_ref, a_ref, b_ref, c_ref, d_ref, e_ref):
        a_ref[...] = jnp.roll(x_ref[...], s_ref[0], axis=0)
        b_ref[...] = pltpu.roll(x_ref[...], s_ref[0], 2)
        c_ref[...] = jnp.roll(x_ref[...], s_ref[1], axis=1)
        d_ref[...] = pltpu.roll(y_ref[...], s_ref[2], 1)
        e_ref[...] = jnp.roll(y_ref[...], s_ref[1], axis=-2)

    tx, ty = jax.ShapeDtypeStruct(x.shape, jnp.int32), jax.ShapeDtypeStruct(y.shape, jnp.float32)
    for s0, s1, s2 in ((2, -3, 4), (1, 37, -1)):
        a, b, c, d, e = pl.pallas_call(kernel, out_shape=[tx, tx, tx, ty, ty], in_specs=[
            pl.BlockSpec(memory_space=pltpu.SMEM), pl.BlockSpec(memory_space=pltpu.VMEM),
            pl.BlockSpec(memory_space=pltpu.VMEM)])(np.array([s0, s1, s2], np.int32), x, y)
        np.testing.assert_array_equal(a, np.roll(x, s0, 0))
        np.testing.assert_array_equal(b, np.roll(x, s0, 2))
        np.testing.assert_array_equal(c, np.roll(x, s1, 1))
        np.testing.assert_array_equal(d, np.roll(y, s2, 1))
        np.testing.assert_array_equal(e, np.roll(y, s1, 2))
