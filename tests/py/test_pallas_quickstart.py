# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""The Pallas quickstart (docs/pallas/quickstart.md) as written there, but
for its imports: add_vectors, iota over a grid (in VMEM and, as the TPU
version writes it, in SMEM), the blocked matmul, with a fused activation,
and batched with jax.vmap; jax.random as the guide draws its inputs
(NumPy's generator behind jax.random's names here)."""
from functools import partial

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def add_vectors_kernel(x_ref, y_ref, o_ref):
    x, y = x_ref[...], y_ref[...]
    o_ref[...] = x + y


@jax.jit
def add_vectors(x, y):
    return pl.pallas_call(add_vectors_kernel,
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def iota_kernel(o_ref):
    i = pl.program_id(0)
    o_ref[i] = i


def iota(size, space=None):
    specs = {} if space is None else dict(out_specs=pl.BlockSpec(memory_space=space))
    return pl.pallas_call(iota_kernel, out_shape=jax.ShapeDtypeStruct((size,), jnp.int32),
                          grid=(size,), **specs)()


def matmul_kernel(x_ref, y_ref, z_ref, *, activation):
    z_ref[...] = activation(x_ref[...] @ y_ref[...])


def matmul(x, y, *, activation):
    return pl.pallas_call(
        partial(matmul_kernel, activation=activation),
        out_shape=jax.ShapeDtypeStruct((x.shape[0], y.shape[1]), x.dtype),
        grid=(2, 2),
        in_specs=[
            pl.BlockSpec((x.shape[0] // 2, x.shape[1]), lambda i, j: (i, 0)),
            pl.BlockSpec((y.shape[0], y.shape[1] // 2), lambda i, j: (0, j)),
        ],
        out_specs=[
            pl.BlockSpec((x.shape[0] // 2, y.shape[1] // 2), lambda i, j: (i, j)),
        ],
    )(x, y)


def _matmul_ref(x, y):
    return x.astype(np.float64) @ y.astype(np.float64)


def test_add_vectors():
    x = np.arange(8, dtype=np.int32)
    np.testing.assert_array_equal(add_vectors(x, x), 2 * x)


@pytest.mark.parametrize("space", [None, pltpu.SMEM], ids=["vmem", "smem"])
def test_iota(space):
    np.testing.assert_array_equal(iota(8, space), np.arange(8, dtype=np.int32))


def test_matmul_with_activation():
    k1, k2 = jax.random.split(jax.random.key(0))
    x = jax.random.normal(k1, (1024, 1024))
    y = jax.random.normal(k2, (1024, 1024))
    z = matmul(x, y, activation=jax.nn.relu)
    np.testing.assert_allclose(z, np.maximum(_matmul_ref(x, y), 0), rtol=1e-4, atol=1e-3)
    assert (z == 0).any() and (z > 0).any()


def test_matmul_vmap():
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    x = jax.random.normal(k1, (4, 256, 512))
    y = jax.random.normal(k2, (4, 512, 256))
    z = jax.vmap(partial(matmul, activation=jax.nn.relu))(x, y)
    assert z.shape == (4, 256, 256)
    for b in range(4):
        np.testing.assert_allclose(z[b], np.maximum(_matmul_ref(x[b], y[b]), 0),
                                   rtol=1e-4, atol=1e-3)


def test_vmap_in_axes_none_broadcasts_an_argument():
    x = np.arange(3 * 8, dtype=np.int32).reshape(3, 8)
    y = np.ones(8, np.int32)
    out = jax.vmap(add_vectors, in_axes=(0, None))(x, y)
    np.testing.assert_array_equal(out, x + 1)


def test_random_is_deterministic_per_key_and_splits_differ():
    a, b = jax.random.split(jax.random.key(3))
    assert not np.array_equal(jax.random.normal(a, (8,)), jax.random.normal(b, (8,)))
    np.testing.assert_array_equal(jax.random.normal(a, (8,)), jax.random.normal(a, (8,)))
    r = jax.random.randint(a, (64,), 0, 10)
    assert r.dtype == np.int32 and r.min() >= 0 and r.max() < 10


def test_the_guides_device_checks_pass():
    # the guides open with assert "TPU" in jax.devices()[0].device_kind
    assert "TPU" in jax.devices()[0].device_kind
    assert jax.device_count() == 1
    x = np.ones(4, np.float32)
    assert jax.block_until_ready(jax.device_put(x)) is x
