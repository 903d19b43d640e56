# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas TPU library kernels, ninth round (d):
jax/experimental/pallas/ops/tpu/quantized_matmul (kernel.py and util.py),
transcribed as a user would write them against tpuemu, and JAX's
tests/pallas/tpu_quantized_matmul_test.py QuantizedMatmulKernelTest:
test_quantized_matmul_various_input_shapes and
test_quantized_matmul_unaligned_input_shapes (inputs padded to the
blocks), with explicit 128 blocks (the tuned-block-size test runs 4096
features, its table is data, not ported). The reference is the test's own
(per-token int8 activations, an int32 product, both scales), in NumPy."""
import functools

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


# --- util.py ---

def unfold_args(conditions, fn_conditions, fn):
    """Minimise run-time branching of fn by turning jnp bools into Python's."""
    if len(conditions) == 0:
        fn(*fn_conditions)
    else:
        arg = conditions[0]
        if isinstance(arg, bool):
            unfold_args(conditions[1:], fn_conditions + (arg,), fn)
        else:
            assert arg.dtype == jnp.bool and arg.size == 1
            jax.lax.cond(
                arg,
                lambda: unfold_args(conditions[1:], fn_conditions + (True,), fn),
                lambda: unfold_args(conditions[1:], fn_conditions + (False,), fn),
            )


def quantize_tensor(x, n_bits=8, dim=-1):
    max_val = jnp.max(jnp.abs(x), axis=dim, keepdims=True)
    int_min = -(2 ** (n_bits - 1))
    int_max = 2 ** (n_bits - 1) - 1
    scale = max_val / int_max
    x_int = jnp.clip(jnp.rint(x / scale), int_min, int_max).astype(jnp.int8)
    return x_int, scale.astype(jnp.float32)


def next_multiple(x, multiple):
    return ((x + multiple - 1) // multiple) * multiple


# --- kernel.py ---

def _quantize_array(x, x_abs_max_val):
    n_bits = 8
    int_max = 2 ** (n_bits - 1) - 1
    scale = (x_abs_max_val / int_max).T	# [bs_block_size, 1]
    x_int = jnp.round(x / scale).astype(jnp.int8)
    return x_int, scale.astype(jnp.float32)


def matmul_kernel(x_ref, w_ref, w_scale_ref, x_abs_max_ref, out_ref, acc_scratch, x_q_scratch,
                  x_scale_scratch, *, quantize_activation, save_acc, save_x_q):
    bs_idx, out_idx, in_idx = pl.program_id(0), pl.program_id(1), pl.program_id(2)
    n_in = pl.num_programs(2)
    x_ref_dtype = x_ref.dtype

    if save_x_q:
        assert quantize_activation
        assert x_q_scratch is not None
        assert x_scale_scratch is not None
        quant = out_idx == 0
    else:
        assert x_q_scratch is None
        assert x_scale_scratch is None
        quant = quantize_activation

    if save_acc:
        assert acc_scratch is not None
        is_first_step = in_idx == 0
        is_last_step = in_idx == n_in - 1
    else:
        assert acc_scratch is None
        is_first_step = True
        is_last_step = True

    def matmul_body(quant, is_first_step, is_last_step):
        if quantize_activation:
            if quant:
                x_q_tmp, x_scale_tmp = _quantize_array(x_ref[...], x_abs_max_ref[...])
                if save_x_q:
                    x_q_scratch[...] = x_q_tmp
                    x_scale_scratch[...] = x_scale_tmp
            else:
                assert save_x_q
                x_q_tmp = x_q_scratch[...]
                if is_last_step:
                    x_scale_tmp = x_scale_scratch[...]

            acc = jax.lax.dot_general(x_q_tmp, w_ref[...], (((1,), (1,)), ((), ())),
                                      preferred_element_type=jnp.int32)
        else:
            acc = jax.lax.dot_general(x_ref[...], w_ref[...], (((1,), (1,)), ((), ())),
                                      preferred_element_type=jnp.float32)

        if not is_first_step:
            acc += acc_scratch[...]

        if is_last_step:
            acc *= w_scale_ref[...]
            if quantize_activation:
                acc *= x_scale_tmp
            out_ref[...] = acc.astype(x_ref_dtype)
        else:
            assert save_acc
            acc_scratch[...] = acc

    unfold_args((quant, is_first_step, is_last_step), (), matmul_body)


def quantized_matmul_kernel(x, w, w_scale, zero_point=None, quant_block_size=None,
                            quantize_activation=False, *, batch_block_size=None,
                            out_block_size=None, in_block_size=None):
    assert zero_point is None, "Not implemented: zero_point is not supported."
    assert quant_block_size is None, "Not implemented: quant_block_size is not supported."

    # per-token abs max outside the kernel, laid out [1, bs]
    x_abs_max_val = jnp.max(jnp.abs(x), axis=-1, keepdims=False)
    x_abs_max_val = jnp.expand_dims(x_abs_max_val, axis=0)
    assert x_abs_max_val.shape == (1, x.shape[0])

    orig_bs, orig_in_features = x.shape
    orig_out_features, _ = w.shape

    padded_bs = next_multiple(orig_bs, batch_block_size)
    if orig_bs < padded_bs:
        x = jnp.pad(x, ((0, padded_bs - orig_bs), (0, 0)))
        x_abs_max_val = jnp.pad(x_abs_max_val, ((0, 0), (0, padded_bs - orig_bs)))
    padded_out_features = next_multiple(orig_out_features, out_block_size)
    if orig_out_features < padded_out_features:
        w = jnp.pad(w, ((0, padded_out_features - orig_out_features), (0, 0)))
        w_scale = jnp.pad(w_scale, (0, padded_out_features - orig_out_features))
    padded_in_features = next_multiple(orig_in_features, in_block_size)
    if orig_in_features < padded_in_features:
        x = jnp.pad(x, ((0, 0), (0, padded_in_features - orig_in_features)))
        w = jnp.pad(w, ((0, 0), (0, padded_in_features - orig_in_features)))

    if w_scale.dtype != jnp.float32:
        w_scale = w_scale.astype(jnp.float32)
    w_scale = jnp.expand_dims(w_scale, axis=0)	# [1, n_output_features]

    acc_dtype = jnp.int32 if quantize_activation else jnp.float32
    vmem_to_be_transferred = (
        2 * (batch_block_size * in_block_size * x.dtype.itemsize
             + out_block_size * in_block_size * w.dtype.itemsize
             + out_block_size * w_scale.dtype.itemsize
             + batch_block_size * x_abs_max_val.dtype.itemsize
             + batch_block_size * out_block_size * x.dtype.itemsize)
        + batch_block_size * out_block_size * jnp.dtype(acc_dtype).itemsize)
    vmem_used = vmem_to_be_transferred * 2
    vmem_limit_bytes = min(vmem_used * 2, 96 * 1024 * 1024)

    n_bs = padded_bs // batch_block_size
    n_out = padded_out_features // out_block_size
    n_in = padded_in_features // in_block_size

    save_acc = n_in > 1
    # quantize the input once when one input block serves several outputs
    save_x_q = quantize_activation and n_in == 1 and n_out > 1

    assert x.shape[1] == w.shape[1]
    assert w.shape[0] == w_scale.shape[1]
    assert x_abs_max_val.shape == (1, x.shape[0])
    assert x.shape[0] % batch_block_size == 0
    assert w.shape[0] % out_block_size == 0
    assert x.shape[1] % in_block_size == 0

    kernel = pl.pallas_call(
        functools.partial(matmul_kernel, quantize_activation=quantize_activation,
                          save_acc=save_acc, save_x_q=save_x_q),
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0,
            in_specs=[
                pl.BlockSpec((batch_block_size, in_block_size), lambda b, o, i: (b, i)),
                pl.BlockSpec((out_block_size, in_block_size), lambda b, o, i: (o, i)),
                pl.BlockSpec((1, out_block_size), lambda b, o, i: (0, o)),
                pl.BlockSpec((1, batch_block_size), lambda b, o, i: (0, b)),
            ],
            out_specs=pl.BlockSpec((batch_block_size, out_block_size), lambda b, o, i: (b, o)),
            scratch_shapes=[
                pltpu.VMEM((batch_block_size, out_block_size), acc_dtype) if save_acc else None,
                pltpu.VMEM((batch_block_size, in_block_size), jnp.int8) if save_x_q else None,
                pltpu.VMEM((batch_block_size, 1), jnp.float32) if save_x_q else None,
            ],
            grid=(n_bs, n_out, n_in),
        ),
        out_shape=jax.ShapeDtypeStruct((padded_bs, padded_out_features), x.dtype),
        compiler_params=pltpu.CompilerParams(
            dimension_semantics=("parallel", "arbitrary", "arbitrary"),
            vmem_limit_bytes=vmem_limit_bytes),
    )
    out = kernel(x, w, w_scale, x_abs_max_val)
    return out[:orig_bs, :orig_out_features]


# --- tpu_quantized_matmul_test.py ---

def reference_quantized_matmul(x, w_q, w_scale, quantize_activation=True):
    """The test's reference in NumPy: x quantized per token as the kernel
    does (round half to even of x / (max|x| / 127)), the int8 product
    exact, then both scales in float32."""
    x = np.asarray(x, np.float32)
    w_q = np.asarray(w_q).astype(np.int64)
    if quantize_activation:
        x_scale = (np.abs(x).max(axis=-1, keepdims=True) / np.float32(127)).astype(np.float32)
        x_q = np.rint(x / x_scale).astype(np.int8).astype(np.int64)
        out = (x_q @ w_q.T).astype(np.float32) * x_scale
    else:
        out = x.astype(np.float64) @ w_q.T
    return (out * np.asarray(w_scale, np.float32)[None, :]).astype(np.float32)


def _test_quantized_matmul(dtype, bs, n_input_features, n_output_features,
                           quantize_activation, batch_block_size=None, out_block_size=None,
                           in_block_size=None, atol=2e-1, rtol=2e-1):
    k0, k1 = jax.random.split(jax.random.key(1234), 2)
    x = jax.random.uniform(k0, (bs, n_input_features), dtype=dtype, minval=0, maxval=1)
    w = jax.random.uniform(k1, (n_output_features, n_input_features), dtype=dtype,
                           minval=-1, maxval=1)
    w_q, w_scale = quantize_tensor(w)
    w_scale = jnp.squeeze(w_scale)
    assert w_scale.shape == (n_output_features,)

    output = quantized_matmul_kernel(x, w_q, w_scale, quantize_activation=quantize_activation,
                                     batch_block_size=batch_block_size,
                                     out_block_size=out_block_size, in_block_size=in_block_size)
    expected = reference_quantized_matmul(x, w_q, w_scale,
                                          quantize_activation=quantize_activation)
    assert output.dtype == dtype and output.shape == expected.shape
    # JAX's tolerances are 0.2; the same quantization, so much closer here
    tol = 2e-2 if dtype == jnp.bfloat16 else 1e-4
    np.testing.assert_allclose(np.asarray(output, np.float32), expected, rtol=tol,
                               atol=tol * np.abs(expected).max())


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float32])
@pytest.mark.parametrize("bs", [128, 256])
@pytest.mark.parametrize("n_input_features", [128, 256, 512])
@pytest.mark.parametrize("n_output_features", [128, 256])
def test_quantized_matmul_various_input_shapes(dtype, bs, n_input_features,
                                               n_output_features):
    _test_quantized_matmul(dtype, bs, n_input_features, n_output_features,
                           quantize_activation=True, batch_block_size=128,
                           out_block_size=128, in_block_size=128)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float32])
@pytest.mark.parametrize("bs", [64, 192])
@pytest.mark.parametrize("n_input_features", [64, 192])
@pytest.mark.parametrize("n_output_features", [64, 192])
def test_quantized_matmul_unaligned_input_shapes(dtype, bs, n_input_features,
                                                 n_output_features):
    _test_quantized_matmul(dtype, bs, n_input_features, n_output_features,
                           quantize_activation=True, batch_block_size=128,
                           out_block_size=128, in_block_size=128)


@pytest.mark.parametrize("n_input_features", [128, 256])
def test_quantized_matmul_float_activations(n_input_features):
    # quantize_activation=False: the kernel's float32 path
    _test_quantized_matmul(jnp.float32, 128, n_input_features, 256,
                           quantize_activation=False, batch_block_size=128,
                           out_block_size=128, in_block_size=128)


@pytest.mark.parametrize("fdt", [jnp.float32, jnp.bfloat16])
def test_dot_of_float_and_int8_promotes(fdt):
    # jnp.dot / lax.dot_general of a float and an int8 operand: the int8 one
    # converted to the float dtype, as JAX promotes (libtpurt refused the
    # mixed product before)
    def kernel(x_ref, w_ref, o_ref, p_ref):
        o_ref[...] = jax.lax.dot_general(x_ref[...], w_ref[...], (((1,), (1,)), ((), ())),
                                         preferred_element_type=jnp.float32)
        p_ref[...] = jnp.dot(w_ref[...], x_ref[...].T, preferred_element_type=jnp.float32)
    rng = np.random.default_rng(5)
    x = jnp.asarray(rng.standard_normal((128, 256)), dtype=fdt)
    w = rng.integers(-128, 128, (128, 256)).astype(np.int8)
    o, p = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct((128, 128), jnp.float32),) * 2
                          )(x, w)
    ref = np.asarray(x, np.float64) @ w.astype(np.float64).T
    np.testing.assert_allclose(o, ref, rtol=1e-5, atol=1e-3)
    np.testing.assert_allclose(p, ref.T, rtol=1e-5, atol=1e-3)
