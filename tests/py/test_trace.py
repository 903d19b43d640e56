# SPDX-License-Identifier: MIT
"""Tracing: the statement text a kernel's Python records."""
import functools

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def _x(shape=(8, 128), seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def run1(kernel, *args, out=None, scratch=()):
    """One block, grid (1,): returns (result, statements)."""
    out = out or jax.ShapeDtypeStruct(args[0].shape, args[0].dtype)
    f = pl.pallas_call(kernel, out_shape=out, scratch_shapes=scratch)
    r = f(*args)
    return r, f.statements


def test_matmul_accumulate_when():
    def k(x_ref, y_ref, z_ref):
        @pl.when(pl.program_id(2) == 0)
        def _():
            z_ref[...] = jnp.zeros_like(z_ref)
        z_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)

    x, y = _x((256, 256), 1), _x((256, 128), 2)
    f = pl.pallas_call(
        k, out_shape=jax.ShapeDtypeStruct((256, 128), np.float32),
        in_specs=[pl.BlockSpec((128, 128), lambda i, j, k: (i, k)),
                  pl.BlockSpec((128, 128), lambda i, j, k: (k, j))],
        out_specs=pl.BlockSpec((128, 128), lambda i, j, k: (i, j)),
        grid=(2, 1, 2))
    z = f(x, y)
    assert f.statements == [
        "pl.when((pl.program_id(2) == 0)): z_ref[...] = jnp.zeros_like(z_ref)",
        "z_ref[...] += jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)",
    ]
    np.testing.assert_allclose(z, x @ y, rtol=1e-4, atol=1e-4)
    st = jax.last_stats()
    assert st["steps"] == 4 and st["model_time_ps"] > 0 and st["call_wall_ns"] > 0


def test_matmul_operator_and_nested_when():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

        @pl.when(pl.program_id(0) == 0)
        def _():
            @pl.when(pl.program_id(0) >= 0)
            def _():
                o_ref[...] += 1.0

    x = _x()
    r, st = run1(k, x)
    assert st[1] == ("pl.when(((pl.program_id(0) == 0)) and ((pl.program_id(0) >= 0))): "
                     "o_ref[...] += 1.0")
    np.testing.assert_allclose(r, x * 2 + 1, rtol=1e-6)


def test_elementwise_functions():
    def k(x_ref, y_ref, o_ref):
        x = x_ref[...]
        o_ref[...] = jnp.where(x > 0, jnp.exp(x), jnp.maximum(x, y_ref[...])) - 1.0

    x, y = _x(seed=3), _x(seed=4)
    r, st = run1(k, x, y)
    assert st == ["o_ref[...] = (jnp.where((x_ref[...] > 0), jnp.exp(x_ref[...]), "
                  "jnp.maximum(x_ref[...], y_ref[...])) - 1.0)"]
    ref = np.where(x > 0, np.exp(x), np.maximum(x, y)) - 1.0
    np.testing.assert_allclose(r, ref, rtol=1e-5, atol=1e-5)


def test_reductions_keepdims_softmax():
    def k(x_ref, o_ref):
        x = x_ref[...]
        m = jnp.max(x, axis=1, keepdims=True)
        e = jnp.exp(x - m)
        o_ref[...] = e / jnp.sum(e, axis=1, keepdims=True)

    x = _x(seed=5)
    r, st = run1(k, x)
    assert "jnp.max(x_ref[...], axis=1, keepdims=True)" in st[0]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(r, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_astype_and_scratch():
    def k(x_ref, o_ref, acc_ref):
        acc_ref[...] = x_ref[...].astype(jnp.float32) * 3.0
        o_ref[...] = acc_ref[...].astype(o_ref.dtype)

    x = jax.to_bf16(_x(seed=6))
    r, st = run1(k, x, out=jax.ShapeDtypeStruct(x.shape, jnp.bfloat16),
                 scratch=[pltpu.VMEM((8, 128), jnp.float32)])
    assert st == ["acc_ref[...] = (x_ref[...].astype(jnp.float32) * 3.0)",
                  "o_ref[...] = acc_ref[...].astype(jnp.bfloat16)"]
    assert r.dtype == jnp.bfloat16	# a host bf16 array, as JAX gives back
    np.testing.assert_array_equal(r.view(np.uint16), jax.to_bf16(jax.from_bf16(x) * 3.0))


def test_value_read_before_store_is_bound():
    # m_prev keeps the old contents after m_ref is stored, as in Python
    def k(x_ref, o_ref, m_ref):
        m_ref[...] = x_ref[...]
        m_prev = m_ref[...]
        m_ref[...] = m_prev * 2.0
        o_ref[...] = m_ref[...] - m_prev

    x = _x(seed=7)
    r, st = run1(k, x, scratch=[pltpu.VMEM((8, 128), jnp.float32)])
    assert st[1] == "_v1 = m_ref[...]"
    np.testing.assert_allclose(r, x, rtol=1e-6)


def test_partial_kernel_keyword():
    def k(x_ref, o_ref, *, scale):
        o_ref[...] = x_ref[...] * scale

    x = _x(seed=8)
    r = pl.pallas_call(functools.partial(k, scale=0.5),
                       out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    np.testing.assert_allclose(r, x * 0.5)


def test_ref_shape_and_dtype():
    seen = {}

    def k(x_ref, o_ref):
        seen["shape"], seen["dtype"] = x_ref.shape, x_ref.dtype
        o_ref[...] = x_ref[...]

    x = _x((16, 256))
    pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                   in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
                   out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)),
                   grid=(2, 2))(x)
    assert seen["shape"] == (8, 128) and seen["dtype"] == jnp.float32


def test_buffered_and_compiler_params():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    x = _x((64, 128))
    r = pl.pallas_call(
        k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0), pipeline_mode=pl.Buffered(3))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        grid=(8,),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel",),
                                             vmem_limit_bytes=16 << 20))(x)
    np.testing.assert_allclose(r, x + 1.0)


def test_input_output_aliases():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 2.0

    x = _x((16, 128))
    r = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                       grid=(2,), input_output_aliases={0: 0})(x)
    np.testing.assert_allclose(r, x * 2.0)


def test_transpose_dtype_min():
    def k(x_ref, y_ref, o_ref):
        s = jnp.dot(x_ref[...], y_ref[...].T, preferred_element_type=jnp.float32)
        o_ref[...] = (s - jnp.min(s, axis=1, keepdims=True)).astype(x_ref.dtype)

    rng = np.random.default_rng(9)
    x, y = rng.standard_normal((8, 128), dtype=np.float32), \
        rng.standard_normal((128, 128), dtype=np.float32)
    r, st = run1(k, x, y, out=jax.ShapeDtypeStruct((8, 128), np.float32))
    s = x @ y.T
    np.testing.assert_allclose(r, s - s.min(axis=1, keepdims=True), rtol=1e-4, atol=1e-3)


def test_squeezed_block_dimension():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] + 1.0

    x = np.random.default_rng(10).standard_normal((4, 8, 128), dtype=np.float32)
    r = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                       in_specs=[pl.BlockSpec((None, 8, 128), lambda b: (b, 0, 0))],
                       out_specs=pl.BlockSpec((None, 8, 128), lambda b: (b, 0, 0)),
                       grid=(4,))(x)
    np.testing.assert_allclose(r, x + 1.0)


def test_bound_value_outside_when():
    # a value read before a pl.when that stores its ref is bound at every step
    def k(x_ref, o_ref, m_ref):
        m_ref[...] = x_ref[...]
        old = m_ref[...]

        @pl.when(pl.program_id(0) == 0)
        def _():
            m_ref[...] = old * 3.0
        o_ref[...] = old + m_ref[...]

    x = _x(seed=11)
    r, st = run1(k, x, scratch=[pltpu.VMEM((8, 128), jnp.float32)])
    assert st[1] == "_v1 = m_ref[...]"
    np.testing.assert_allclose(r, x * 4.0, rtol=1e-6)
