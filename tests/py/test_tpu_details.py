# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""JAX's docs/pallas/tpu/details.rst ("Writing TPU kernels with Pallas"):
each property and supported operation it lists, as a small kernel with a
NumPy reference: BlockSpecs and lexicographic grid order (the output as
an accumulator over the last axis), dimension_semantics (the page's
compiler_params=dict(mosaic=...) form too), scalar prefetch, the data
types, scalar placement, matmul (lax.dot with preferred_element_type,
dot_general with fused transposes, precision), transposes, memory
access, the elementwise table, constructors, single-axis reductions,
broadcasting, reshapes and control flow (cond, fori_loop)."""
import functools

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

rng = np.random.default_rng(0)


def _f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _call1(body, x, out_shape=None, **kw):
    out_shape = out_shape or jax.ShapeDtypeStruct(x.shape, x.dtype)
    return np.asarray(pl.pallas_call(body, out_shape=out_shape, **kw)(x))


# --- BlockSpecs and grid iteration: the output window as accumulator ---

def _matmul(x, y, bm=128, bn=128, bk=128, **kw):
    def body(x_ref, y_ref, o_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
    m, k = x.shape
    n = y.shape[1]
    return np.asarray(pl.pallas_call(
        body, grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, k: (i, k)),
                  pl.BlockSpec((bk, bn), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, k: (i, j)),
        out_shape=jax.ShapeDtypeStruct((m, n), jnp.float32), **kw)(x, y))


def test_reduction_axis_last_output_accumulates():
    x, y = _f32(256, 512), _f32(512, 384)
    np.testing.assert_allclose(_matmul(x, y), x @ y, rtol=2e-5, atol=2e-4)


@pytest.mark.parametrize("params", [
    pltpu.CompilerParams(dimension_semantics=("parallel", "parallel", "arbitrary")),
    dict(mosaic=dict(dimension_semantics=["parallel", "parallel", "arbitrary"])),
])
def test_dimension_semantics(params):
    x, y = _f32(256, 256), _f32(256, 256)
    np.testing.assert_allclose(_matmul(x, y, compiler_params=params), x @ y,
                               rtol=2e-5, atol=2e-4)


def test_same_input_slice_consecutive_steps():
    """Consecutive steps on the same input block see the same data (the
    fetch skipped); each step writes its own output block."""
    x = _f32(8, 128)

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] * (pl.program_id(0) + 1).astype(jnp.float32)
    r = np.asarray(pl.pallas_call(
        body, grid=(4,), in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(x))
    np.testing.assert_allclose(r, np.concatenate([x * (i + 1) for i in range(4)]))


def test_block_shape_spans_small_dims():
    """Dimensions smaller than (8, 128): the block spans them whole."""
    x = _f32(4, 8, 64)

    def body(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1
    r = np.asarray(pl.pallas_call(
        body, grid=(4,), in_specs=[pl.BlockSpec((1, 8, 64), lambda i: (i, 0, 0))],
        out_specs=pl.BlockSpec((1, 8, 64), lambda i: (i, 0, 0)),
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(x))
    np.testing.assert_allclose(r, x + 1)


# --- Placing operands in SMEM: scalar prefetch into the index maps ---

def test_scalar_prefetch_block_sparse_gather():
    x = _f32(64, 128)
    idx = np.array([5, 0, 7, 2], np.int32)

    def body(i_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2
    r = np.asarray(pl.pallas_call(body, grid_spec=pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=1, grid=(4,),
        in_specs=[pl.BlockSpec((8, 128), lambda i, s: (s[i], 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i, s: (i, 0))),
        out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(idx, x))
    np.testing.assert_allclose(r, np.concatenate([x[8 * b:8 * b + 8] * 2 for b in idx]))


def test_control_flow_on_smem_values():
    s = np.array([3, -1], np.int32)
    x = _f32(8, 128)

    def body(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...]

        @pl.when(s_ref[0] > 2)
        def _():
            o_ref[...] = x_ref[...] * 3

        @pl.when(s_ref[1] > 0)
        def _():
            o_ref[...] = -x_ref[...]
    r = np.asarray(pl.pallas_call(body, in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                                                  pl.BlockSpec()],
                                  out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(s, x))
    np.testing.assert_allclose(r, x * 3)


# --- Supported data types ---

_DTYPES = ["float32", "bfloat16", "int8", "int16", "int32", "uint8", "uint16", "uint32"]


@pytest.mark.parametrize("dt", _DTYPES)
def test_supported_dtypes_copy_and_add(dt):
    jdt = getattr(jnp, dt)
    if dt == "bfloat16":
        x = jnp.asarray(_f32(16, 128)).astype(jnp.bfloat16)
        ref = np.asarray(x).astype(np.float32)
    elif dt == "uint16":
        # a NumPy uint16 array is bfloat16 bits here (tpuemu.to_bf16), so
        # uint16 integers come as jnp's host arrays, as bf16 values do
        x = jnp.asarray(rng.integers(0, 2 ** 15, (16, 128)), dtype=jnp.uint16)
        ref = np.asarray(x)
    else:
        info = np.iinfo(dt) if dt != "float32" else None
        x = (rng.integers(info.min // 2, info.max // 2, (16, 128)).astype(dt)
             if info else _f32(16, 128))
        ref = x

    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    r = pl.pallas_call(copy, out_shape=jax.ShapeDtypeStruct((16, 128), jdt))(x)
    np.testing.assert_array_equal(np.asarray(r).astype(np.float64),
                                  np.asarray(ref).astype(np.float64))

    def add(x_ref, o_ref):
        o_ref[...] = x_ref[...] + x_ref[...]
    r = pl.pallas_call(add, out_shape=jax.ShapeDtypeStruct((16, 128), jdt))(x)
    if dt == "bfloat16":
        np.testing.assert_allclose(np.asarray(r).astype(np.float32), ref * 2, rtol=1e-2)
    else:
        np.testing.assert_array_equal(np.asarray(r), (ref + ref).astype(dt))


@pytest.mark.parametrize("name,lo,hi", [("int4", -8, 7), ("uint4", 0, 15), ("int2", -2, 1),
                                        ("uint2", 0, 3)])
def test_narrow_integers_wrap_and_promote(name, lo, hi):
    """int4, uint4, int2 and uint2 are held in int32 words on the device
    and in int8 or uint8 on the host (jnp's arrays of them): arithmetic
    wraps into the type's range, Python ints take its type, a wider type
    promotes it (int8 here), floats convert truncated and saturated, and
    outputs of the type come back as its host arrays."""
    d = getattr(jnp, name)
    x = jnp.asarray(np.arange(8 * 128).reshape(8, 128) % (hi - lo + 1) + lo, dtype=d)
    assert x.dtype == d and np.asarray(x).min() == lo and np.asarray(x).max() == hi
    f = np.linspace(-20, 20, 8 * 128, dtype=np.float32).reshape(8, 128)

    def kernel(x_ref, f_ref, s_ref, w_ref, c_ref):
        s_ref[...] = x_ref[...] * hi + 1	# Python ints past the type: OverflowError
        w_ref[...] = x_ref[...] + jnp.ones((8, 128), jnp.int8)
        c_ref[...] = f_ref[...].astype(d)

    s, w, c = pl.pallas_call(kernel, out_shape=(
        jax.ShapeDtypeStruct((8, 128), d), jax.ShapeDtypeStruct((8, 128), jnp.int8),
        jax.ShapeDtypeStruct((8, 128), d)))(x, f)
    bits = (hi - lo + 1).bit_length() - 1
    want = (np.asarray(x).astype(np.int64) * hi + 1) & ((1 << bits) - 1)
    want = np.where(want > hi, want - (1 << bits), want)
    assert s.dtype == d and c.dtype == d and w.dtype == np.int8
    np.testing.assert_array_equal(np.asarray(s), want)
    np.testing.assert_array_equal(np.asarray(w), np.asarray(x).astype(np.int64) + 1)
    np.testing.assert_array_equal(np.asarray(c), np.clip(np.trunc(f), lo, hi))


def test_narrow_integer_bitcasts_are_refused_by_name():
    def kernel(x_ref, o_ref):
        o_ref[...] = pltpu.bitcast(x_ref[...], jnp.int8)

    x = jnp.asarray(np.zeros((16, 128), np.int8), dtype=jnp.int4)
    with pytest.raises(pl.TraceError, match="int4 arrays are held in int32 words here.*"
                                            "int4 has no bitcasts here"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int8))(x)


# --- Computation placement: 0-D values on the scalar core ---

def test_scalar_values_on_the_scalar_core():
    s = np.array([7, 3], np.int32)

    def body(s_ref, o_ref):
        a, b = s_ref[0], s_ref[1]
        o_ref[0] = a * b + a // b - a % b
        o_ref[1] = jnp.maximum(a, b) - jnp.minimum(a, b)
    r = pl.pallas_call(body, in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
                       out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
                       out_shape=jax.ShapeDtypeStruct((2,), jnp.int32))(s)
    np.testing.assert_array_equal(np.asarray(r), [7 * 3 + 7 // 3 - 7 % 3, 4])


# --- Matrix multiplication ---

def test_lax_dot_bf16_preferred_f32():
    x = jnp.asarray(_f32(128, 256)).astype(jnp.bfloat16)
    y = jnp.asarray(_f32(256, 128)).astype(jnp.bfloat16)

    def body(x_ref, y_ref, o_ref):
        o_ref[...] = lax.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
    r = np.asarray(pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((128, 128),
                                                                       jnp.float32))(x, y))
    ref = np.asarray(x).astype(np.float32) @ np.asarray(y).astype(np.float32)
    np.testing.assert_allclose(r, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dims,xt,yt", [
    ((((1,), (0,)), ((), ())), False, False),
    ((((0,), (0,)), ((), ())), True, False),
    ((((1,), (1,)), ((), ())), False, True),
    ((((0,), (1,)), ((), ())), True, True),
])
def test_dot_general_fused_transposes(dims, xt, yt):
    a, b = _f32(128, 256), _f32(256, 128)
    x = a.T.copy() if xt else a
    y = b.T.copy() if yt else b

    def body(x_ref, y_ref, o_ref):
        o_ref[...] = lax.dot_general(x_ref[...], y_ref[...], dims,
                                     preferred_element_type=jnp.float32)
    r = np.asarray(pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((128, 128),
                                                                       jnp.float32))(x, y))
    np.testing.assert_allclose(r, a @ b, rtol=2e-5, atol=2e-4)


def test_matmul_precision_float32():
    """precision=HIGHEST (float32 precision asked for): f32 products."""
    x, y = _f32(128, 128), _f32(128, 128)

    def body(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...], precision=lax.Precision.HIGHEST,
                             preferred_element_type=jnp.float32)
    r = np.asarray(pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((128, 128),
                                                                       jnp.float32))(x, y))
    np.testing.assert_allclose(r, x.astype(np.float64) @ y, rtol=1e-5, atol=1e-4)


# --- Transposition ---

def test_transpose_last_two_axes():
    x = _f32(128, 256)
    r = _call1(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...].T), x,
               jax.ShapeDtypeStruct((256, 128), jnp.float32))
    np.testing.assert_array_equal(r, x.T)


def test_transpose_leading_axes_of_4d():
    x = _f32(2, 3, 8, 128)

    def body(x_ref, o_ref):
        o_ref[...] = jnp.transpose(x_ref[...], (1, 0, 2, 3))
    r = _call1(body, x, jax.ShapeDtypeStruct((3, 2, 8, 128), jnp.float32))
    np.testing.assert_array_equal(r, x.transpose(1, 0, 2, 3))


# --- Accessing memory: aligned slices read and written ---

def test_aligned_slices_read_and_update():
    x = _f32(32, 512)

    def body(x_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)
        o_ref[8:16, 128:384] = x_ref[16:24, 0:256] * 2
        o_ref[pl.ds(24, 8), pl.ds(384, 128)] = x_ref[pl.ds(0, 8), pl.ds(384, 128)]
    r = _call1(body, x)
    ref = np.zeros_like(x)
    ref[8:16, 128:384] = x[16:24, 0:256] * 2
    ref[24:32, 384:512] = x[0:8, 384:512]
    np.testing.assert_array_equal(r, ref)


# --- Elementwise operations: the page's table ---

_FLOAT_OPS = {
    "add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply), "div": (lambda a, b: a / b, np.divide),
    "max": (jnp.maximum, np.maximum), "min": (jnp.minimum, np.minimum),
    "where": (lambda a, b: jnp.where(a > b, a, b), lambda a, b: np.where(a > b, a, b)),
    "pow": (lambda a, b: jnp.power(jnp.abs(a) + 0.5, b), lambda a, b: np.power(np.abs(a) + 0.5, b)),
}
_FLOAT_UNARY = {"abs": (jnp.abs, np.abs), "exp": (jnp.exp, np.exp), "tanh": (jnp.tanh, np.tanh),
                "sin": (jnp.sin, np.sin), "cos": (jnp.cos, np.cos)}


@pytest.mark.parametrize("op", sorted(_FLOAT_OPS))
def test_elementwise_float_binary(op):
    f, ref = _FLOAT_OPS[op]
    a, b = _f32(8, 128), _f32(8, 128)

    def body(a_ref, b_ref, o_ref):
        o_ref[...] = f(a_ref[...], b_ref[...])
    r = np.asarray(pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((8, 128),
                                                                       jnp.float32))(a, b))
    np.testing.assert_allclose(r, ref(a, b).astype(np.float32), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("op", sorted(_FLOAT_UNARY))
def test_elementwise_float_unary(op):
    f, ref = _FLOAT_UNARY[op]
    a = _f32(8, 128) * 3
    r = _call1(lambda a_ref, o_ref: o_ref.__setitem__(..., f(a_ref[...])), a)
    np.testing.assert_allclose(r, ref(a), rtol=2e-6, atol=2e-6)


_INT_OPS = {
    "floordiv": (lambda a, b: a // b, np.floor_divide), "mod": (lambda a, b: a % b, np.mod),
    "or": (lambda a, b: a | b, np.bitwise_or), "xor": (lambda a, b: a ^ b, np.bitwise_xor),
    "and": (lambda a, b: a & b, np.bitwise_and),
    "shl": (lambda a, b: a << (b & 15), lambda a, b: a << (b & 15)),
    "shr": (lambda a, b: a >> (b & 15), lambda a, b: a >> (b & 15)),
    "eq": (lambda a, b: (a == b).astype(jnp.int32), lambda a, b: (a == b).astype(np.int32)),
    "lt": (lambda a, b: (a < b).astype(jnp.int32), lambda a, b: (a < b).astype(np.int32)),
    "ge": (lambda a, b: (a >= b).astype(jnp.int32), lambda a, b: (a >= b).astype(np.int32)),
}


@pytest.mark.parametrize("op", sorted(_INT_OPS))
def test_elementwise_int(op):
    f, ref = _INT_OPS[op]
    a = rng.integers(-1000, 1000, (8, 128)).astype(np.int32)
    b = rng.integers(1, 50, (8, 128)).astype(np.int32) * rng.choice([-1, 1], (8, 128)).astype(
        np.int32)
    if op in ("eq",):
        b[:, :64] = a[:, :64]

    def body(a_ref, b_ref, o_ref):
        o_ref[...] = f(a_ref[...], b_ref[...])
    r = np.asarray(pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((8, 128),
                                                                       jnp.int32))(a, b))
    np.testing.assert_array_equal(r, ref(a, b).astype(np.int32))


def test_invert_and_casts():
    a = rng.integers(-1000, 1000, (8, 128)).astype(np.int32)

    def body(a_ref, o_ref, f_ref):
        o_ref[...] = ~a_ref[...]
        f_ref[...] = a_ref[...].astype(jnp.float32) * 0.5
    o, f = pl.pallas_call(body, out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.int32),
                                           jax.ShapeDtypeStruct((8, 128), jnp.float32)))(a)
    np.testing.assert_array_equal(np.asarray(o), ~a)
    np.testing.assert_array_equal(np.asarray(f), a.astype(np.float32) * 0.5)


def test_relu_from_comparisons_and_where():
    a = _f32(8, 128)
    r = _call1(lambda a_ref, o_ref: o_ref.__setitem__(..., jax.nn.relu(a_ref[...])), a)
    np.testing.assert_array_equal(r, np.maximum(a, 0))


# --- Array constructors ---

def test_constructors():
    def body(o1, o2, o3):
        o1[...] = jnp.ones(o1.shape, jnp.float32)
        o2[...] = jnp.zeros(o2.shape, jnp.int32)
        o3[...] = jnp.full(o3.shape, 2.5, jnp.float32)
    s = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    a, b, c = pl.pallas_call(body, out_shape=(s, jax.ShapeDtypeStruct((8, 128), jnp.int32),
                                              s))()
    np.testing.assert_array_equal(np.asarray(a), np.ones((8, 128)))
    np.testing.assert_array_equal(np.asarray(b), np.zeros((8, 128)))
    np.testing.assert_array_equal(np.asarray(c), np.full((8, 128), 2.5))


# --- Reductions: sum, max, min over one axis ---

@pytest.mark.parametrize("red", ["sum", "max", "min"])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_single_axis_reductions(red, axis):
    x = _f32(4, 8, 128)
    shape = tuple(n for d, n in enumerate(x.shape) if d != axis)

    def body(x_ref, o_ref):
        o_ref[...] = getattr(jnp, red)(x_ref[...], axis=axis)
    r = _call1(body, x, jax.ShapeDtypeStruct(shape, jnp.float32))
    np.testing.assert_allclose(r, getattr(np, red)(x, axis=axis), rtol=1e-5, atol=1e-5)


# --- Broadcasting ---

def test_broadcasting_each_dimension():
    lead, row, col = _f32(1, 8, 128), _f32(4, 1, 128), _f32(4, 8, 1)

    def body(l_ref, r_ref, c_ref, o_ref):
        o_ref[...] = (jnp.broadcast_to(l_ref[...], o_ref.shape) +
                      jnp.broadcast_to(r_ref[...], o_ref.shape) +
                      jnp.broadcast_to(c_ref[...], o_ref.shape))
    r = np.asarray(pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((4, 8, 128),
                                                                       jnp.float32))(lead, row, col))
    np.testing.assert_allclose(r, lead + row + col, rtol=1e-6)


# --- Reshapes ---

def test_reshape_leading_dims_onto_second_last():
    x = _f32(4, 8, 128)
    r = _call1(lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...].reshape(32, 128)), x,
               jax.ShapeDtypeStruct((32, 128), jnp.float32))
    np.testing.assert_array_equal(r, x.reshape(32, 128))


def test_reshape_adds_dim_removed_by_reduction():
    x = _f32(8, 128)

    def body(x_ref, o_ref):
        s = jnp.sum(x_ref[...], axis=1)
        o_ref[...] = x_ref[...] - s.reshape(8, 1)
    r = _call1(body, x)
    np.testing.assert_allclose(r, x - x.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)


# --- Control flow: cond, fori_loop ---

def test_cond_and_fori_loop():
    x = _f32(8, 128)

    def body(x_ref, o_ref):
        v = lax.cond(pl.program_id(0) == 0, lambda a: a * 2, lambda a: a - 1, x_ref[...])
        o_ref[...] = lax.fori_loop(0, 4, lambda i, a: a + 1.0, v)
    r = np.asarray(pl.pallas_call(body, grid=(2,), in_specs=[pl.BlockSpec((8, 128),
                                                                         lambda i: (0, 0))],
                                  out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                                  out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(x))
    np.testing.assert_allclose(r, np.concatenate([x * 2 + 4, x - 1 + 4]), rtol=1e-6)
