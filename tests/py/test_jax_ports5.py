# SPDX-License-Identifier: MIT
"""Ports of JAX's own Pallas tests, fifth round (tests/pallas/ops_test.py
OpsTest, tpu_pallas_test.py), each named after the test it ports, with a
NumPy reference: weak dtypes, scalar and vector comparisons, reductions,
select_n, unary primitives, casts, sign, pow, is_finite."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

_rng = np.random.default_rng(5555)


def _normal(shape):
    return _rng.standard_normal(shape).astype(np.float32)


# --- ops_test.py OpsTest.test_weak_dtype ---

@pytest.mark.parametrize("fn,dtype,ref", [
    (lax.pow, np.float32, np.power),
    (lax.bitwise_and, np.int32, np.bitwise_and),
    (lax.bitwise_or, np.int32, np.bitwise_or),
    (lax.bitwise_xor, np.int32, np.bitwise_xor),
    (lax.shift_left, np.int32, np.left_shift),
    (lax.shift_right_arithmetic, np.int32, np.right_shift),
    (lax.shift_right_logical, np.int32, lambda x, y: (x.view(np.uint32) >> y.astype(np.uint32)).view(np.int32)),
], ids=["pow", "and", "or", "xor", "shl", "sra", "srl"])
def test_weak_dtype(fn, dtype, ref):
    """OpsTest.test_weak_dtype: lax binary functions of two (8, 128) blocks."""
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = fn(x_ref[...], y_ref[...])

    x = np.full((8, 128), 4, dtype)
    y = np.full((8, 128), 2, dtype)
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), dtype))(x, y)
    np.testing.assert_allclose(out, ref(x, y))


# --- ops_test.py OpsTest.test_scalar_compare / test_vector_compare ---

_CMP_PARAMS = [(1, 1), (1, 16), (16, 1), (-1, 1), (1, -1),
               (1.0, 1.0), (1.0, 16.0), (16.0, 1.0), (-1.0, 1.0), (1.0, -1.0),
               (1.0, np.inf), (np.inf, 1.0), (np.inf, np.inf), (1.0, np.nan),
               (np.nan, 1.0), (np.nan, np.nan), (np.inf, np.nan)]


def _cmp_ref(x, y):
    return [x == y, x != y, x < y, x <= y, x > y, x >= y]


@pytest.mark.parametrize("params", _CMP_PARAMS, ids=str)
def test_scalar_compare(params):
    """OpsTest.test_scalar_compare: SMEM scalars compared, lax.select of
    1 and 0 stored into an SMEM output."""
    def kernel(x_ref, y_ref, o_ref):
        x = x_ref[0, 0]
        y = y_ref[0, 0]
        o_ref[0, 0] = jax.lax.select(x == y, 1, 0)
        o_ref[0, 1] = jax.lax.select(x != y, 1, 0)
        o_ref[0, 2] = jax.lax.select(x < y, 1, 0)
        o_ref[0, 3] = jax.lax.select(x <= y, 1, 0)
        o_ref[0, 4] = jax.lax.select(x > y, 1, 0)
        o_ref[0, 5] = jax.lax.select(x >= y, 1, 0)

    x, y = params
    r = np.array([_cmp_ref(x, y)], np.int32)
    x = np.array([[x]])
    y = np.array([[y]])
    if x.dtype == np.float64:
        x, y = x.astype(np.float32), y.astype(np.float32)
    else:
        x, y = x.astype(np.int32), y.astype(np.int32)
    result = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct([1, 128], jnp.int32),
        in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                  pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec((1, 128), lambda i: (0, 0), memory_space=pltpu.SMEM),
        grid=(1,),
    )(x, y)
    np.testing.assert_array_equal(r, result[..., 0:6])


@pytest.mark.parametrize("params", _CMP_PARAMS, ids=str)
def test_vector_compare(params):
    """OpsTest.test_vector_compare: (8, 128) blocks compared, lax.select of
    ones and zeros stored into o_ref[k] of a (6, 8, 128) output."""
    def kernel(x_ref, y_ref, o_ref):
        x = x_ref[:]
        y = y_ref[:]
        one = jnp.ones([8, 128], dtype=jnp.int32)
        zero = jnp.zeros([8, 128], dtype=jnp.int32)
        o_ref[0] = jax.lax.select(x == y, one, zero)
        o_ref[1] = jax.lax.select(x != y, one, zero)
        o_ref[2] = jax.lax.select(x < y, one, zero)
        o_ref[3] = jax.lax.select(x <= y, one, zero)
        o_ref[4] = jax.lax.select(x > y, one, zero)
        o_ref[5] = jax.lax.select(x >= y, one, zero)

    x, y = params
    dt = np.float32 if isinstance(x, float) else np.int32
    x = np.full([8, 128], x, dt)
    y = np.full([8, 128], y, dt)
    r = _cmp_ref(x, y)
    result = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct([6, 8, 128], jnp.int32),
        in_specs=[pl.BlockSpec((8, 128), lambda *_: (0, 0)),
                  pl.BlockSpec((8, 128), lambda *_: (0, 0))],
        out_specs=pl.BlockSpec((6, 8, 128), lambda *_: (0, 0, 0)),
        grid=(1,),
    )(x, y)
    for k in range(6):
        np.testing.assert_array_equal(r[k], result[k])


# --- ops_test.py OpsTest.test_reduce_boolean / test_reduce_float / test_reduce_int32 ---

@pytest.mark.parametrize("input_type,reduction_op,expected", [
    ("all_true", jnp.all, True), ("all_false", jnp.all, False), ("one_false", jnp.all, False),
    ("all_true", jnp.any, True), ("all_false", jnp.any, False), ("one_false", jnp.any, True)])
def test_reduce_boolean(input_type, reduction_op, expected):
    """OpsTest.test_reduce_boolean: a mask from a comparison, all/any with
    keepdims, back to float with where, one element into SMEM."""
    def kernel(x_ref, ones_ref, o_ref):
        bool_x = x_ref[...] == ones_ref[...]
        reduced_as_bool = reduction_op(bool_x, keepdims=True)
        float_value = jnp.where(reduced_as_bool, 1.0, 0.0)
        o_ref[0, 0] = float_value[0, 0]

    x = np.zeros((8, 128), np.float32) if input_type == "all_false" else \
        np.ones((8, 128), np.float32)
    if input_type == "one_false":
        x[0, 0] = 0.0
    result = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec((8, 128), lambda *_: (0, 0)),
                  pl.BlockSpec((8, 128), lambda *_: (0, 0))],
        out_specs=pl.BlockSpec(block_shape=(1, 1), memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct([1, 1], jnp.float32),
        grid=(1,),
    )(x, np.ones_like(x))
    np.testing.assert_array_equal(result[0, 0], float(expected))


@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_reduce_float(name):
    """OpsTest.test_reduce_float: jnp.sum/max/min of a block into SMEM."""
    op = getattr(jnp, name)

    def kernel(x_ref, o_ref):
        o_ref[0, 0] = op(x_ref[...])

    x = _normal((8, 128))
    result = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec((8, 128), lambda *_: (0, 0))],
        out_specs=pl.BlockSpec((1, 1), memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct([1, 1], jnp.float32),
        grid=(1,),
    )(x)
    np.testing.assert_allclose(result[0, 0], getattr(np, name)(x), atol=1e-5)


@pytest.mark.parametrize("name,input_shape", [
    ("sum", (32, 256)), ("max", (32, 256)), ("min", (32, 256)),
    ("sum", (31, 300)), ("max", (31, 300)), ("min", (31, 300))])
def test_reduce_int32(name, input_shape):
    """OpsTest.test_reduce_int32: int32 reductions into SMEM, also of an
    irregular (31, 300) block (the whole array)."""
    op = getattr(jnp, name)

    def kernel(x_ref, o_ref):
        o_ref[0, 0] = op(x_ref[...])

    x = _rng.integers(-100, 100, input_shape).astype(np.int32)
    result = pl.pallas_call(
        kernel,
        in_specs=[pl.BlockSpec(input_shape, lambda *_: (0, 0))],
        out_specs=pl.BlockSpec((1, 1), memory_space=pltpu.SMEM),
        out_shape=jax.ShapeDtypeStruct([1, 1], jnp.int32),
        grid=(1,),
    )(x)
    assert result[0, 0] == getattr(np, name)(x)


# --- ops_test.py OpsTest.test_select_n (fixed examples for the hypothesis strategy) ---

@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("pred_kind", ["array", "scalar_bool", "scalar_int"])
def test_select_n(dtype, pred_kind):
    """OpsTest.test_select_n with two cases: an int32 predicate array read
    from a ref, or a Python predicate closed over."""
    shape = (16, 256)
    cases = [(_rng.standard_normal(shape) * 8).astype(dtype) for _ in range(2)]
    if pred_kind == "array":
        pred = _rng.integers(0, 2, shape).astype(np.int32)
    elif pred_kind == "scalar_bool":
        pred = np.bool_(True)
    else:
        pred = np.int32(0)
    scalar_pred = not pred.shape

    def kernel(*refs):
        if scalar_pred:
            *case_refs, o_ref = refs
            pred_ = pred
        else:
            pred_ref, *case_refs, o_ref = refs
            pred_ = pred_ref[...]
        vals = [case_ref[...] for case_ref in case_refs]
        o_ref[...] = lax.select_n(pred_, *vals)

    ref = np.where(np.asarray(pred) != 0, cases[1], cases[0])
    args = cases if scalar_pred else [pred, *cases]
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shape, dtype))(*args)
    np.testing.assert_array_equal(out, ref)


# --- ops_test.py OpsTest.test_unary_primitives ---

def _f32(f):
    return lambda x: f(x.astype(np.float64)).astype(np.float32)


_UNARY = [
    ("neg", lax.neg, np.negative, np.float32, 0.0),
    ("neg_int32", lax.neg, np.negative, np.int32, 0.0),
    ("not", lambda x: lax.bitwise_not(x), np.invert, np.int32, 0.0),
    ("abs", lax.abs, np.abs, np.float32, 0.0),
    ("exp", lax.exp, _f32(np.exp), np.float32, 1e-6),
    ("tanh", lax.tanh, _f32(np.tanh), np.float32, 1e-6),
    ("logistic", lax.logistic, _f32(lambda x: 1 / (1 + np.exp(-x))), np.float32, 1e-6),
    ("rsqrt", lambda x: lax.rsqrt(jnp.abs(x)), _f32(lambda x: 1 / np.sqrt(np.abs(x))), np.float32, 1e-6),
    ("log", lambda x: lax.log(jnp.abs(x)), _f32(lambda x: np.log(np.abs(x))), np.float32, 1e-6),
    ("exp2", lax.exp2, _f32(np.exp2), np.float32, 1e-6),
    ("log1p", lambda x: lax.log1p(jnp.abs(x)), _f32(lambda x: np.log1p(np.abs(x))), np.float32, 1e-6),
    ("sin", lax.sin, _f32(np.sin), np.float32, 1e-6),
    ("sqrt", lambda x: lax.sqrt(jnp.abs(x)), _f32(lambda x: np.sqrt(np.abs(x))), np.float32, 1e-6),
    ("relu", jax.nn.relu, lambda x: np.maximum(x, 0), np.float32, 0.0),
    ("pow2", lambda x: jnp.power(2, x), _f32(lambda x: np.power(2.0, x)), np.float32, 1e-6),
    ("square", jnp.square, np.square, np.float32, 0.0),
    ("reciprocal", jnp.reciprocal, _f32(np.reciprocal), np.float32, 1e-6),
    ("round", jnp.round, np.round, np.float32, 0.0),
    ("rint", jnp.rint, np.rint, np.float32, 0.0),
]


@pytest.mark.parametrize("name,func,ref,dtype,tol", _UNARY, ids=[u[0] for u in _UNARY])
@pytest.mark.parametrize("shape", [(8, 128), (2, 64), (4, 2, 32)], ids=str)
def test_unary_primitives(name, func, ref, dtype, tol, shape):
    """OpsTest.test_unary_primitives over a few of the strategy's shapes
    (rank 2 and 3, power-of-two sizes)."""
    def kernel(x_ref, y_ref):
        y_ref[...] = func(x_ref[...])

    if dtype == np.int32:
        x = _rng.integers(-4, 4, shape).astype(np.int32)
    else:
        x = _normal(shape) * 3
        x[..., 0] = 2.5     # round and rint: halves
        x[..., 1] = -0.5
    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shape, dtype))(x)
    np.testing.assert_allclose(out, ref(x), atol=tol, rtol=tol)


# --- ops_test.py OpsTest.test_cast_from_32bit ---

_CASTS = [(np.float32, np.int32), (np.int32, np.float32), (np.float32, "bfloat16"),
          (np.int32, "bfloat16"), (np.float32, np.int8), (np.int32, np.int8),
          (np.float32, np.uint8), (np.int32, np.uint8), (np.float32, "bool"),
          (np.int32, "bool")]


def _cast_name(c):
    return "%s_%s" % tuple(getattr(t, "__name__", t) for t in c)


@pytest.mark.parametrize("from_dtype,to_dtype", _CASTS, ids=[_cast_name(c) for c in _CASTS])
def test_cast_from_32bit(from_dtype, to_dtype):
    """OpsTest.test_cast_from_32bit: x.astype(to_dtype) of an (8, 128)
    block, bool results stored as int32; values in the target's range."""
    shape = (8, 128)
    if from_dtype == np.float32:
        x = (_normal(shape) * 40).astype(np.float32)
    else:
        x = _rng.integers(-1000, 1000, shape).astype(np.int32)
    if to_dtype in (np.int8, np.uint8):
        lo, hi = np.iinfo(to_dtype).min, np.iinfo(to_dtype).max
        x = np.clip(x, lo, hi).astype(from_dtype)
    x[0, :4] = 0
    tdt = jnp.bfloat16 if to_dtype == "bfloat16" else (jnp.bool_ if to_dtype == "bool" else to_dtype)

    def kernel(x_ref, y_ref):
        y = x_ref[...].astype(tdt)
        if to_dtype == "bool":
            y = y.astype(jnp.int32)
        y_ref[...] = y

    y_dtype = jnp.int32 if to_dtype == "bool" else tdt
    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shape, y_dtype))(x)
    if to_dtype == "bool":
        ref = (x != 0).astype(np.int32)
    elif to_dtype == "bfloat16":
        ref = jax.to_bf16(x.astype(np.float32))    # bf16 arrays are their uint16 bits
    else:
        ref = x.astype(to_dtype)    # floats truncate toward zero, as XLA
    np.testing.assert_array_equal(np.asarray(y), ref)
