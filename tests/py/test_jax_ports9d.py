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
(per-token int8 activations, an int32 product, both scales), in NumPy.
The kernel is in tpuemu.pallas.ops.tpu.quantized_matmul (kernel.py,
util.py), imported here by JAX's path (tpuemu.experimental...)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.experimental.pallas.ops.tpu.quantized_matmul.kernel import (
    quantized_matmul_kernel)
from tpuemu.experimental.pallas.ops.tpu.quantized_matmul.util import quantize_tensor


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
