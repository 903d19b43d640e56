# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""jax/experimental/pallas/ops/tpu/quantized_matmul/kernel.py, transcribed
against tpuemu (only the imports changed): quantized_matmul_kernel, an
int8 weight matmul with per-token int8 activations (or float ones),
inputs padded to the blocks. The block sizes must be given: JAX's
tuned_block_sizes.py table is not ported. Tests: test_jax_ports9d.py."""
import functools

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

from .util import next_multiple, unfold_args


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
