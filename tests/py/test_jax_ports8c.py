# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas TPU tests, eighth round, third file
(tests/pallas/tpu_ops_test.py OpsTest; pallas_test.py
PallasCallUnblockedIndexingTest, ApiErrorTest and
PallasCallTest.test_integer_dot), each named after the test it ports,
with a NumPy reference: argmax/argmin along any axis, masks of every
width, concatenations of 1-D and 2-D values, while loops whose carry
goes through lax.cond, element-indexed blocks, and the errors JAX raises
for a malformed pallas_call. Gaps are strict xfails naming them."""
import functools

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu import random
from tpuemu.pallas import tpu as pltpu


# --- tpu_ops_test.py OpsTest ---

_TPU_VERSION = 5	# the emulated chip is v5e-like: JAX's version skips as on a v5e


def test_stop_gradient():
    def kernel(x_ref, y_ref):
        y_ref[...] = jax.lax.stop_gradient(x_ref[...] + 1)

    x = jnp.arange(1024, dtype=jnp.float32)
    y = pl.pallas_call(kernel, out_shape=x)(x)
    np.testing.assert_allclose(y, x + 1)


# JAX's product, less the cases it skips (axis >= rank; a 1-D reduction
# without keepdims, a scalar)
@pytest.mark.parametrize("axis,in_shape,reduce_func,keepdims", [
    (axis, in_shape, f, keepdims)
    for axis in [0, 1, 2] for in_shape in [(2, 29, 206), (12, 28), (12,)]
    for f in [jnp.argmax, jnp.argmin] for keepdims in [False, True]
    if axis < len(in_shape) and not (len(in_shape) == 1 and not keepdims)])
def test_reduce_index(axis, in_shape, reduce_func, keepdims):
    dtype = jnp.float32
    out_shape = list(in_shape)
    if keepdims:
        out_shape[axis] = 1
    else:
        del out_shape[axis]

    def kernel(x, out):
        out[:] = reduce_func(x[:], axis, keepdims=keepdims)

    x = jax.random.permutation(jax.random.key(22),
                               jnp.arange(np.prod(in_shape), dtype=dtype)).reshape(in_shape)
    result = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(out_shape, jnp.int32))(x)
    fn = np.argmax if reduce_func is jnp.argmax else np.argmin
    expected = fn(x, axis)
    if keepdims:
        expected = np.expand_dims(expected, axis)
    np.testing.assert_array_equal(result, expected)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
@pytest.mark.parametrize("msk_dtype", [jnp.float32, jnp.bfloat16, jnp.int8])
@pytest.mark.parametrize("shape", [(129, 129), (1, 129), (2, 129), (4, 129)])
def test_i1_relayout_bw(shape, msk_dtype, dtype):
    @functools.partial(pl.pallas_call, out_shape=jax.ShapeDtypeStruct(shape, dtype))
    def kernel(x_ref, mask_ref, o_ref):
        zeros = jnp.zeros_like(x_ref)
        o_ref[...] = jnp.where(mask_ref[...], x_ref[...], zeros)

    mask = jax.random.bernoulli(jax.random.key(1234), 0.5, shape).astype(np.float32)
    xf = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1
    if dtype == jnp.bfloat16:
        x = jax.to_bf16(xf)
        xf = jax.from_bf16(x)	# the values bf16 holds
    else:
        x = xf
    if msk_dtype == jnp.bfloat16:
        m_in = jax.to_bf16(mask)
    elif msk_dtype == jnp.int8:
        m_in = mask.astype(np.int8)
    else:
        m_in = mask
    out = kernel(x, m_in)
    expected = np.where(mask != 0, xf, 0).astype(np.float32)
    got = jax.from_bf16(out) if dtype == jnp.bfloat16 else out
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.int8])
def test_concat_mask(dtype):
    shape = (128, 128)

    def kernel(x, out):
        mask = x[...] != 0
        concated_mask = jnp.concatenate([mask, mask], axis=0)
        concated_x = jnp.concatenate([x[:], x[:]], axis=0)
        out[:] = lax.select(concated_mask, concated_x, jnp.zeros_like(concated_x))

    x = jax.random.normal(jax.random.key(1234), shape, dtype=jnp.float32)
    if dtype == jnp.int8:
        x = (x * 100).astype(np.int8)
        xin = x
        xf = x
    elif dtype == jnp.bfloat16:
        xin = jax.to_bf16(x)
        xf = jax.from_bf16(xin)
    else:
        xin = xf = x
    out = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((shape[0] * 2, shape[1]), dtype))(xin)
    concated_x = np.concatenate([xf, xf], axis=0)
    expected = np.where(concated_x != 0, concated_x, 0)
    got = jax.from_bf16(out) if dtype == jnp.bfloat16 else out
    np.testing.assert_array_equal(got, expected)


def test_reduce_with_const():
    m = 1
    d = 1024
    x = jax.to_bf16(np.ones((m, d), np.float32))

    def dot(x, y):
        return jax.lax.dot_general(x, y, (((1,), (1,)), ((), ())),
                                   preferred_element_type=jnp.float32)

    def kernel(x, out):
        out[:] = dot(x[:], jnp.ones((1, d), jnp.bfloat16))

    run = pl.pallas_call(kernel, jax.ShapeDtypeStruct((m, 1), jnp.float32))
    np.testing.assert_array_equal(run(x), np.full((m, 1), d, np.float32))


def test_while_loop_arg_num_change():
    def kernel(out_ref, a):
        def loop_cond(state):
            _, y = state
            return y

        def loop_body(state):
            x, y = state

            def then_0():
                def then_1():
                    return jnp.int32(0)

                def else_1():
                    a[0] = a[0] + 1
                    return jnp.int32(1)

                z = lax.cond(x == 0, then_1, else_1)
                new_x = z
                new_y = z != 0
                return new_x, new_y

            def else_0():
                return x, jnp.bool_(False)

            new_x, new_y = lax.cond(y, then_0, else_0)
            return (new_x, new_y)

        out_ref[0] = lax.while_loop(loop_cond, loop_body, (jnp.int32(0), jnp.bool_(True)))[0]

    output = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((1,), jnp.int32), in_specs=(),
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        scratch_shapes=(pltpu.SMEM((1,), jnp.int32),),
    )()[0]
    assert output == 0


def test_produce_predicate_phi():
    def kernel(out_ref, a):
        def loop_cond(state):
            x, y = state
            return jnp.logical_or(y, (x == 1))

        def loop_body(state):
            x, y = state

            def then_0():
                def then_1():
                    return jnp.int32(0)

                def else_1():
                    a[0] = a[0] + 1
                    return jnp.int32(1)

                z = lax.cond(x == 0, then_1, else_1)
                new_x = z
                new_y = z != 0
                return new_x, new_y

            def else_0():
                return x, jnp.bool_(False)

            new_x, new_y = lax.cond(y, then_0, else_0)
            return (new_x, new_y)

        out_ref[0] = lax.while_loop(loop_cond, loop_body, (jnp.int32(0), jnp.bool_(True)))[0]

    output = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((1,), jnp.int32), in_specs=(),
        out_specs=pl.BlockSpec(memory_space=pltpu.SMEM),
        scratch_shapes=(pltpu.SMEM((1,), jnp.int32),),
    )()[0]
    assert output == 0


def test_retiling_with_replicated_lane():
    shape = (32, 1)
    broadcast_shape = (32, 256)

    @functools.partial(pl.pallas_call,
                       out_shape=jax.ShapeDtypeStruct((8, 4, 256), jnp.float32))
    def kernel(x_ref, o_ref):
        o_ref[...] = jnp.broadcast_to(x_ref[...], broadcast_shape).reshape(o_ref.shape)

    x = jnp.arange(np.prod(shape), dtype=jnp.float32).reshape(shape)
    out = kernel(x).reshape(broadcast_shape)
    np.testing.assert_array_equal(out, np.broadcast_to(x, broadcast_shape))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_sigmoid(dtype):
    shape = (32, 128)
    x = jax.random.normal(jax.random.key(42), shape, dtype=jnp.float32)
    xin = jax.to_bf16(x) if dtype == jnp.bfloat16 else x
    xf = jax.from_bf16(xin) if dtype == jnp.bfloat16 else x

    @functools.partial(pl.pallas_call, out_shape=jax.ShapeDtypeStruct(shape, dtype))
    def kernel(x_ref, o_ref):
        o_ref[...] = jax.nn.sigmoid(x_ref[...])

    out = kernel(xin)
    got = jax.from_bf16(out) if dtype == jnp.bfloat16 else out
    tol = 1e-2 if dtype == jnp.bfloat16 else 1e-6
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-xf.astype(np.float64))), rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [jnp.uint32])
def test_unsigned_dtype_dot_raises(dtype):
    k = 256
    packing = 32 // jnp.iinfo(dtype).bits
    lhs = jnp.zeros((8 * packing, k), dtype=dtype)
    rhs = jnp.zeros((k, 128), dtype=dtype)

    def kernel(lhs_ref, rhs_ref, o_ref):
        o_ref[...] = pl.dot(lhs_ref[...], rhs_ref[...])

    out_shape = jax.ShapeDtypeStruct((8 * packing, 128), dtype)
    with pytest.raises(NotImplementedError, match="Unsigned integer dtype.*dot_general.*matmul"):
        pl.pallas_call(kernel, out_shape=out_shape)(lhs, rhs)


@pytest.mark.parametrize("shapes_and_axis", [
    ((11, 300), (9, 300), 0),
    ((20, 400), (17, 400), 0),
    ((35, 200), (41, 200), 0),
    ((35, 200), (35, 300), 1),
])
@pytest.mark.parametrize("dtype", [jnp.int32, jnp.int16, jnp.int8])
def test_2d_concatenate(dtype, shapes_and_axis):
    x_shape, y_shape, axis = shapes_and_axis
    if axis == 0:
        out_shape = (x_shape[0] + y_shape[0], x_shape[1])
    else:
        out_shape = (x_shape[0], x_shape[1] + y_shape[1])
    min_val = dtype(jnp.iinfo(dtype).min)
    max_val = dtype(jnp.iinfo(dtype).max)
    x = jax.random.randint(jax.random.key(42), x_shape, minval=min_val, maxval=max_val,
                           dtype=dtype)
    y = jax.random.randint(jax.random.key(0), y_shape, minval=min_val, maxval=max_val,
                           dtype=dtype)

    @functools.partial(pl.pallas_call, out_shape=jax.ShapeDtypeStruct(out_shape, dtype))
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.concatenate([x_ref[...], y_ref[...]], axis=axis)

    np.testing.assert_array_equal(kernel(x, y), np.concatenate([x, y], axis=axis))


def _concat_1d_cases():
    """JAX's product, less the cases it skips on a v5e (8-bit data not
    aligned to 4 x 128, 16-bit data not aligned to 2 x 128)."""
    shapes = [((200,), (300,)), ((1153,), (1200,)),
              ((256,), (1024,)), ((2176,), (2100,)), ((2304,), (2560,)),
              ((512,), (2048,)), ((4225,), (5000,)), ((4608,), (5120,))]
    for dtype in [jnp.int32, jnp.int16, jnp.int8]:
        packing = 32 // jnp.iinfo(dtype).bits
        for x_shape, y_shape in shapes:
            aligned = x_shape[0] % (packing * 128) == 0 and y_shape[0] % (packing * 128) == 0
            if packing >= 2 and not aligned and _TPU_VERSION < 6:
                continue
            yield dtype, (x_shape, y_shape)


@pytest.mark.parametrize("dtype,shapes", list(_concat_1d_cases()))
def test_1d_concatenate(dtype, shapes):
    x_shape, y_shape = shapes
    out_shape = (x_shape[0] + y_shape[0],)
    min_val = dtype(jnp.iinfo(dtype).min)
    max_val = dtype(jnp.iinfo(dtype).max)
    x = jax.random.randint(jax.random.key(42), x_shape, minval=min_val, maxval=max_val,
                           dtype=dtype)
    y = jax.random.randint(jax.random.key(0), y_shape, minval=min_val, maxval=max_val,
                           dtype=dtype)

    @functools.partial(pl.pallas_call, out_shape=jax.ShapeDtypeStruct(out_shape, dtype))
    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.concatenate([x_ref[...], y_ref[...]], axis=0)

    np.testing.assert_array_equal(kernel(x, y), np.concatenate([x, y], axis=0))


def test_reduce_1d_value_along_axis_0():
    """Not a JAX test: a regression test for a silent wrong result found
    porting tpu_ops_test.py's test_reduce_index. A 1-D value is a row on
    the device, and a reduction along its axis 0 reduced the row's
    (unit) axis 0 instead: x - jnp.max(x, axis=0) gave zeros."""
    def kernel(x_ref, o_ref, s_ref):
        x = x_ref[...]
        o_ref[...] = x - jnp.max(x, axis=0)
        s_ref[...] = x - jnp.sum(x, axis=0, keepdims=True)

    x = np.arange(256, dtype=np.float32)
    o, s = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct((256,), jnp.float32),
                                             jax.ShapeDtypeStruct((256,), jnp.float32)))(x)
    np.testing.assert_array_equal(o, x - x.max())
    np.testing.assert_array_equal(s, x - x.sum())


# --- pallas_test.py PallasCallUnblockedIndexingTest, PallasCallTest, ApiErrorTest ---

def test_block_spec_unblocked():
    def show_program_ids(*, shape, block_shape, grid, indexing_mode):
        def kernel(o1_ref):
            assert o1_ref.shape == block_shape
            o1_ref[...] = jnp.full(o1_ref.shape, pl.program_id(0))

        return pl.pallas_call(
            kernel, jax.ShapeDtypeStruct(shape, dtype=np.int32), grid=grid,
            out_specs=pl.BlockSpec(block_shape, lambda i: (8 * i, 0),
                                   indexing_mode=indexing_mode),
        )()

    pids = show_program_ids(shape=(16, 128), block_shape=(8, 128), grid=(2,),
                            indexing_mode=pl.Unblocked())
    expected_pids = np.array([[0] * 128] * 8 + [[1] * 128] * 8, dtype=np.int32)
    np.testing.assert_array_equal(pids, expected_pids)

    pids = show_program_ids(shape=(14, 128), block_shape=(8, 128), grid=(2,),
                            indexing_mode=pl.Unblocked(((0, 2), (0, 0))))
    expected_pids = np.array([[0] * 128] * 8 + [[1] * 128] * 6, dtype=np.int32)
    np.testing.assert_array_equal(pids, expected_pids)


def test_unblocked_indexing():
    shape = (16 * 8, 128)
    result_ty = jax.ShapeDtypeStruct((15 * 8, 128), jnp.float32)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(0, 8)] + x_ref[pl.ds(8, 8)]

    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    y = pl.pallas_call(
        kernel, grid=(15,),
        in_specs=(pl.BlockSpec((2 * 8, 128), lambda i: (i * 8, 0),
                               indexing_mode=pl.unblocked),),
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=result_ty,
    )(x)
    ref = []
    for i in range(15):
        block = x[i * 8:i * 8 + 2 * 8]
        ref.append(block[0:8] + block[8:16])
    np.testing.assert_array_equal(y, np.concatenate(ref, axis=0))


def test_unblocked_indexing_with_padding():
    shape = (8, 128)
    result_ty = jax.ShapeDtypeStruct((8, 128), jnp.float32)

    def kernel(x_ref, y_ref):
        y_ref[...] = x_ref[pl.ds(0, 8)]

    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    y = pl.pallas_call(
        kernel, grid=(1,),
        in_specs=(pl.BlockSpec((2 * 8, 128), lambda i: (0, 0),
                               indexing_mode=pl.Unblocked(((0, 8), (0, 0)))),),
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
        out_shape=result_ty,
    )(x)
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.uint8])
def test_integer_dot(dtype):
    @functools.partial(pl.pallas_call, out_shape=jax.ShapeDtypeStruct((32, 64), jnp.int32))
    def dot_kernel(x_ref, y_ref, o_ref):
        o_ref[()] = pl.dot(x_ref[()], y_ref[()])

    key0, key1 = random.split(random.key(0))
    kwargs = dict(minval=jnp.iinfo(dtype).min, maxval=128, dtype=dtype)
    x = random.randint(key0, (32, 128), **kwargs)
    y = random.randint(key1, (128, 64), **kwargs)
    expected = np.dot(x.astype(np.int32), y.astype(np.int32))
    np.testing.assert_array_equal(dot_kernel(x, y), expected)


def test_pallas_call_kernel_args_mismatch():
    a = np.arange(256, dtype=np.int32)
    f = pl.pallas_call(lambda x_ref: None, out_shape=a)  # Missing o_ref
    with pytest.raises(TypeError, match="takes 1 positional argument but 2 were given"):
        f(a)


@pytest.mark.parametrize("returns", [0, ()], ids=["array", "empty_tuple"])
def test_pallas_call_error_kernel_returns_something(returns):
    a = np.arange(256, dtype=np.int32)

    def my_kernel(x_ref, o1_ref, o2_ref):
        return returns
    f = pl.pallas_call(my_kernel, out_shape=(a, a))
    with pytest.raises(ValueError, match="The kernel function .* my_kernel at "
                                         ".*test_jax_ports8c.py:.* should return None"):
        f(a)


def test_pallas_call_kernel_with_no_signature_returns_something():
    a = np.arange(256, dtype=np.int32)
    f = pl.pallas_call(lambda *args: 0, out_shape=a)  # Returns 0
    with pytest.raises(ValueError, match="The kernel function .* at .*test_jax_ports8c.py:.* "
                                         "should return None"):
        f(a)


def test_pallas_call_index_map_wrong_number_of_results():
    a = np.arange(256, dtype=np.int32)

    def my_index_map():
        return 0, 0
    f = pl.pallas_call(lambda x_ref, o_ref: None, out_shape=a,
                       in_specs=[pl.BlockSpec((4,), my_index_map)])
    with pytest.raises(ValueError, match="Index map function my_index_map at "
                                         ".*test_jax_ports8c.py.* for args\\[0\\] must return 1 "
                                         "values to match .*Currently returning 2 values."):
        f(a)


def test_pallas_call_index_map_wrong_return_type():
    a = np.arange(256, dtype=np.int32)

    def my_index_map(i):
        return 5.
    f = pl.pallas_call(lambda x_ref, o_ref: None, out_shape=a, grid=(1,),
                       in_specs=[pl.BlockSpec((4,), my_index_map)])
    with pytest.raises(ValueError, match="Index map function my_index_map at "
                                         ".*test_jax_ports8c.py.* for args\\[0\\] must return "
                                         "integer scalars. Output\\[0\\] has type .*float"):
        f(a)


def test_pallas_call_block_shape_ndim_mismatch():
    a = np.arange(256, dtype=np.int32)
    f = pl.pallas_call(lambda x_ref, o1_ref: None, out_shape=[a],
                       in_specs=[pl.BlockSpec((1, 1), lambda: (0, 0))])
    with pytest.raises(ValueError, match="Block shape for args\\[0\\] .* must have the same "
                                         "number of dimensions as the array shape"):
        f(a)

    f = pl.pallas_call(lambda x_ref, o1_ref: None, out_shape=[a],
                       out_specs=[pl.BlockSpec((1, 1), lambda: 0)])
    with pytest.raises(ValueError, match="Block shape for outputs\\[0\\] .* must have the same "
                                         "number of dimensions as the array shape"):
        f(a)


def test_pallas_call_input_output_aliases_errors():
    x = np.arange(8 * 128, dtype=np.int32).reshape((8, 128))

    with pytest.raises(ValueError, match="input_output_aliases contains the mapping '2:0' with "
                                         "input index 2 outside the range .*"):
        pl.pallas_call(lambda x_ref, y_ref, o1_ref: None, out_shape=[x],
                       input_output_aliases={2: 0})(x, x)

    with pytest.raises(ValueError, match="input_output_aliases contains the mapping '1:1' with "
                                         "output index 1 outside the range .*"):
        pl.pallas_call(lambda x_ref, y_ref, o1_ref: None, out_shape=[x],
                       input_output_aliases={1: 1})(x, x)

    y = np.concatenate([x, x], axis=0)
    with pytest.raises(ValueError, match="input_output_aliases contains the mapping '1:0' "
                                         "referring to input\\[1\\] with abstract value "
                                         ".*int32\\[16,128\\].* output\\[0\\] with a different "
                                         "abstract value .*int32\\[8,128\\]"):
        pl.pallas_call(lambda x_ref, y_ref, o1_ref: None, out_shape=[x],
                       input_output_aliases={1: 0})(x, y)

    with pytest.raises(ValueError, match="input_output_aliases contains the mapping '1:0' "
                                         "referring to input\\[1\\] with abstract value "
                                         ".*int32\\[8,128\\].* output\\[0\\] with a different "
                                         "abstract value .*float32\\[8,128\\]"):
        pl.pallas_call(lambda x_ref, y_ref, o1_ref: None,
                       out_shape=[jax.ShapeDtypeStruct(x.shape, jnp.float32)],
                       input_output_aliases={1: 0})(x, x)
