# SPDX-License-Identifier: MIT
"""float16 and the float8s in kernels: held in float32 words, every result
that can leave the type rounded to nearest even, as XLA computes them in
float32 and rounds. References: NumPy's own float16, and the float8s'
values decoded from their bit patterns (test_jax_ports23._f8_round)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

from test_jax_ports23 import _f8_round

_rng = np.random.default_rng(7)
F8S = ["float8_e5m2", "float8_e4m3fn", "float8_e4m3b11fnuz"]


def _f16_inputs(shape=(8, 128), scale=100.0):
    """Values over float16's range: subnormals, ties, overflow, NaN."""
    x = (_rng.standard_normal(shape) * scale).astype(np.float32)
    x.flat[:8] = [65504, 65519, 6e-8, 3e-8, -1e-5, np.nan, np.inf, -0.0]
    with np.errstate(over="ignore"):
        return x.astype(np.float16)


def _same(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_float16_arithmetic_is_numpys(op):
    """Each op of two float16 blocks, in float32 rounded once: NumPy's
    float16 ufuncs give the same bits (overflow to inf, subnormals)."""
    x, y = _f16_inputs(), _f16_inputs(scale=3.0)
    f = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
         "/": lambda a, b: a / b}[op]

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = f(x_ref[...], y_ref[...])

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float16))(x, y)
    assert out.dtype == np.float16
    with np.errstate(all="ignore"):
        _same(out, f(x, y))


def test_python_constants_take_float16():
    """x * 0.1 + 3.3: the constants are float16's (JAX's weak types), each
    step rounded, as NumPy's float16 scalars give it."""
    x = _f16_inputs()

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...] * 0.1 + 3.3

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float16))(x)
    with np.errstate(all="ignore"):
        _same(out, x * np.float16(0.1) + np.float16(3.3))


@pytest.mark.parametrize("fn", ["exp", "tanh", "sqrt"])
def test_float16_functions_round_float32s(fn):
    """jnp.exp of float16: float32's result rounded (within one float16
    ulp of NumPy's, whose float32 exp may differ by an ulp); no value
    outside float16."""
    x = np.abs(_f16_inputs(scale=3.0)) if fn == "sqrt" else _f16_inputs(scale=3.0)

    def kernel(x_ref, o_ref):
        o_ref[...] = getattr(jnp, fn)(x_ref[...])

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float16))(x)
    with np.errstate(all="ignore"):
        want = getattr(np, fn)(x.astype(np.float32)).astype(np.float16)
    np.testing.assert_allclose(out.astype(np.float32), want.astype(np.float32),
                               rtol=2 ** -10, atol=2 ** -24)


def test_float16_sum_and_dot():
    """A float16 sum and a float16 x float16 dot: float32's, rounded once
    to float16; with preferred_element_type=float32, float32's."""
    a = (_rng.standard_normal((64, 128))).astype(np.float16)
    b = (_rng.standard_normal((128, 128))).astype(np.float16)

    def kernel(a_ref, b_ref, s_ref, d_ref, p_ref):
        s_ref[...] = jnp.sum(a_ref[...], axis=1, keepdims=True)
        d_ref[...] = jnp.dot(a_ref[...], b_ref[...])
        p_ref[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)

    s, d, p = pl.pallas_call(kernel, out_shape=(
        jax.ShapeDtypeStruct((64, 1), jnp.float16), jax.ShapeDtypeStruct((64, 128), jnp.float16),
        jax.ShapeDtypeStruct((64, 128), jnp.float32)))(a, b)
    assert s.dtype == np.float16 and d.dtype == np.float16 and p.dtype == np.float32
    exact = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(p, exact, rtol=1e-5, atol=1e-4)
    _same(d, np.asarray(p).astype(np.float16))
    np.testing.assert_allclose(s.astype(np.float64),
                               a.astype(np.float64).sum(1, keepdims=True), rtol=2 ** -10,
                               atol=1e-3)
    assert np.all(s.astype(np.float32) == s.astype(np.float32).astype(np.float16))


@pytest.mark.parametrize("name", F8S)
def test_float8_arithmetic_rounds_each_step(name):
    """(x + y) * x of float8 blocks: each op float32's result rounded to
    the type, as the decoded reference gives it."""
    d = getattr(jnp, name)
    x = jnp.asarray(_rng.standard_normal((8, 128)).astype(np.float32) * 4, dtype=d)
    y = jnp.asarray(_rng.standard_normal((8, 128)).astype(np.float32), dtype=d)

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = (x_ref[...] + y_ref[...]) * x_ref[...]

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, d))(x, y)
    assert out.dtype == d and out.itemsize == 1
    xs, ys = np.asarray(x, np.float32), np.asarray(y, np.float32)
    s = _f8_round(xs + ys, name).astype(np.float32)
    _same(out, _f8_round(s * xs, name))


@pytest.mark.parametrize("name", F8S)
def test_float8_casts_between_narrow_floats(name):
    """float32 -> float16 -> float8 -> bfloat16 -> float32 in a kernel:
    float16's rounding, then the float8's of the float16 values (bf16
    holds every float8 value exactly)."""
    d = getattr(jnp, name)
    x = (_rng.standard_normal((8, 128)) * 10.0 ** _rng.integers(-4, 3, (8, 128))).astype(
        np.float32)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...].astype(jnp.float16).astype(d).astype(jnp.bfloat16).astype(
            jnp.float32)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32))(x)
    _same(out, _f8_round(x.astype(np.float16).astype(np.float32), name))


def test_fnuz_has_no_negative_zero():
    """-x of a float8_e4m3b11fnuz zero is +0 (the type has no -0: its
    pattern 0x80 is NaN)."""
    d = jnp.float8_e4m3b11fnuz
    x = jnp.asarray(np.zeros((8, 128), np.float32), dtype=d)

    def kernel(x_ref, o_ref):
        o_ref[...] = -x_ref[...]

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, d))(x)
    assert not np.any(np.signbit(np.asarray(out)))


def test_host_float8_arrays():
    """jnp's host float8 arrays: rounded on the way in, x.dtype the type,
    one byte an element; arithmetic with their own type stays in it
    (rounded), with a float32 array gives float32."""
    d = jnp.float8_e4m3fn
    x = jnp.asarray(np.array([0.3, 500.0, -1e-4, 17.0], np.float32), dtype=d)
    assert x.dtype == d and x.dtype == "float8_e4m3fn" and x.itemsize == 1 and x.nbytes == 4
    _same(x, _f8_round(np.array([0.3, 500.0, -1e-4, 17.0], np.float32), "float8_e4m3fn"))
    y = x * x
    assert y.dtype == d
    _same(y, _f8_round(np.asarray(x, np.float32) ** 2, "float8_e4m3fn"))
    z = x + np.ones(4, np.float32)
    assert z.dtype == np.float32
    assert x.astype(jnp.float32).dtype == np.float32
    assert jnp.zeros((2, 3), d).dtype == d


def test_bitcast_of_float16_refused():
    def kernel(x_ref, o_ref):
        o_ref[...] = pltpu.bitcast(x_ref[...], jnp.int16)

    x = _f16_inputs((16, 128))
    with pytest.raises(jax.TraceError, match="float16 arrays are held in float32 words"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.int16))(x)


def test_float16_scalar_arithmetic_refused():
    """An SMEM float16 element in arithmetic: the scalar core cannot round
    to float16, refused by name."""
    def kernel(s_ref, x_ref, o_ref):
        o_ref[...] = x_ref[...] + (s_ref[0] * 2.0)

    s = np.array([1.5], np.float16)
    x = _f16_inputs()
    with pytest.raises(jax.TraceError, match="float16 scalar"):
        pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float16),
                       in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM),
                                 pl.BlockSpec(memory_space=pltpu.VMEM)])(s, x)


@pytest.mark.parametrize("name,largest,tiny", [("float8_e5m2", 57344.0, 2.0 ** -14),
                                               ("float8_e4m3fn", 448.0, 2.0 ** -6),
                                               ("float8_e4m3b11fnuz", 30.0, 2.0 ** -10)])
def test_float8_finfo(name, largest, tiny):
    """jnp.finfo of a float8: ml_dtypes' limits; the largest value is the
    decoded reference's, and one step past it is no longer finite."""
    fi = jnp.finfo(getattr(jnp, name))
    assert fi.max == largest and fi.min == -largest and fi.tiny == tiny and fi.bits == 8
    assert np.isfinite(_f8_round(largest, name)) and not np.isfinite(
        _f8_round(largest * 1.2, name))
    assert jnp.finfo(jnp.float16).max == np.finfo(np.float16).max


def test_float16_through_dma_and_scratch():
    """A float16 array in HBM copied by row halves into a float16 VMEM
    scratch (the words move as they are), then x * 2 + 1 per grid step."""
    x = _f16_inputs((256, 256), scale=10.0)

    def kernel(x_hbm, o_ref, buf, sem):
        c = pltpu.make_async_copy(x_hbm.at[pl.ds(pl.program_id(0) * 128, 128)], buf, sem)
        c.start()
        c.wait()
        o_ref[...] = buf[...] * 2 + 1

    out = pl.pallas_call(kernel, grid=(2,), in_specs=[pl.BlockSpec(memory_space=pltpu.ANY)],
                         out_specs=pl.BlockSpec((128, 256), lambda i: (i, 0)),
                         out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float16),
                         scratch_shapes=[pltpu.VMEM((128, 256), jnp.float16),
                                         pltpu.SemaphoreType.DMA])(x)
    with np.errstate(all="ignore"):
        _same(out, x * np.float16(2) + np.float16(1))


def test_float16_constants_in_kernels():
    """jnp.array(0.1, dtype=jnp.float16) and jnp.full(..., 0.3, float16):
    the constants are float16's values."""
    x = _f16_inputs(scale=1.0)

    def kernel(x_ref, o_ref):
        c = jnp.array(0.1, dtype=jnp.float16)
        o_ref[...] = x_ref[...] + c + jnp.full(x_ref.shape, 0.3, jnp.float16)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float16))(x)
    with np.errstate(all="ignore"):
        _same(out, x + np.float16(0.1) + np.float16(0.3))


def test_host_functions_keep_float8():
    """jnp.sum, jnp.max and jnp.asarray of a float8 array give that type
    (JAX's), the sum rounded into it."""
    d = jnp.float8_e4m3fn
    x = jnp.asarray(_rng.standard_normal((8, 16)).astype(np.float32), dtype=d)
    for r in (jnp.sum(x), jnp.max(x, axis=0), jnp.asarray(x)):
        assert r.dtype == d
    _same(jnp.sum(x), _f8_round(np.asarray(x, np.float32).sum(), "float8_e4m3fn"))


def test_float8_iota_is_rounded():
    """lax.broadcasted_iota of float8_e4m3fn: 0..127 rounded to the type
    (17 is 16, 19 is 20, 127 is 128), as the reference rounds them."""
    d = jnp.float8_e4m3fn

    def kernel(o_ref):
        o_ref[...] = jax.lax.broadcasted_iota(d, (8, 128), 1)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), d))()
    _same(out, np.broadcast_to(_f8_round(np.arange(128.0), "float8_e4m3fn"), (8, 128)))
