# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""JAX's docs/pallas/tpu/prng.rst ("Pseudo-Random Number Generation"),
its examples with the imports changed: the stateful PRNG (prng_seed, the
stateful samplers; seeding once in a grid versus every step), the
stateless form (pltpu.to_pallas_key passed in SMEM, jax.random in the
kernel, fold_in of the program id for a key per program instance) and
block-invariant sampling (pltpu.sample_block). The bits are Philox's,
not the TPU's hardware PRNG, so the checks are the properties the page
states. jax.random on a threefry key passed in VMEM is bit-equal to
jax.random outside Pallas, as the page says: the host's draw is the
reference."""
import numpy as np

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import random as jax_random
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

SMEM = pl.BlockSpec(memory_space=pltpu.SMEM)


# --- Using the jax.random API: a threefry key in VMEM ---

def test_threefry_key_in_vmem():
    def body(key_ref, o_ref):
        key = key_ref[...]
        o_ref[...] = jax_random.uniform(key, shape=o_ref[...].shape, minval=0.0, maxval=1.0)
    threefry_key = jax_random.key(0, impl="threefry2x32")
    result = pl.pallas_call(body, in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
                            out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32))(threefry_key)
    np.testing.assert_array_equal(result, jax_random.uniform(threefry_key, (256, 256)))


# --- Stateful Random Number Generation ---

def test_stateful_uniform_example():
    def kernel_body(o_ref):
        pltpu.prng_seed(0)
        o_ref[...] = pltpu.stateful_uniform(shape=o_ref.shape, minval=0.0, maxval=1.0)
    r = np.asarray(pl.pallas_call(kernel_body,
                                  out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32))())
    assert r.shape == (256, 256) and r.min() >= 0.0 and r.max() < 1.0
    assert abs(r.mean() - 0.5) < 0.01
    np.testing.assert_array_equal(r, np.asarray(pl.pallas_call(
        kernel_body, out_shape=jax.ShapeDtypeStruct((256, 256), jnp.float32))()))


def _grid_draws(seed_every_step):
    def body(o_ref):
        if seed_every_step:
            pltpu.prng_seed(0)
        else:
            @pl.when(pl.program_id(0) == 0)
            def _():
                pltpu.prng_seed(0)
        o_ref[...] = pltpu.stateful_normal(shape=o_ref.shape)
    return np.asarray(pl.pallas_call(
        body, grid=(4,), out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32),
        compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))())


def test_seed_once_in_a_grid():
    """Seeded at the first step only, each step draws new numbers; seeded
    at every step, every block is the same (the page's warning)."""
    once, every = _grid_draws(False), _grid_draws(True)
    blocks = [once[8 * i:8 * i + 8] for i in range(4)]
    assert len({b.tobytes() for b in blocks}) == 4
    for i in range(4):
        np.testing.assert_array_equal(every[8 * i:8 * i + 8], every[:8])
    np.testing.assert_array_equal(once[:8], every[:8])


def test_stateful_bernoulli():
    def body(o_ref):
        pltpu.prng_seed(3)
        o_ref[...] = pltpu.stateful_bernoulli(p=0.3, shape=o_ref.shape)
    r = np.asarray(pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((256, 256),
                                                                       jnp.bool_))())
    assert r.dtype == np.bool_ and abs(r.mean() - 0.3) < 0.01


# --- Stateless Generation: a Pallas key in SMEM ---

def test_stateless_example():
    def body(key_ref, o_ref):
        o_ref[...] = jax.random.uniform(key_ref[...], shape=o_ref[...].shape)
    rbg_key = jax_random.key(0, impl="threefry2x32")
    key = pltpu.to_pallas_key(rbg_key)
    o_shape = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    r = np.asarray(pl.pallas_call(body, in_specs=[SMEM], out_shape=o_shape)(key))
    assert r.min() >= 0.0 and r.max() < 1.0 and len(np.unique(r)) > 1000
    r2 = np.asarray(pl.pallas_call(body, in_specs=[SMEM], out_shape=o_shape)(key))
    np.testing.assert_array_equal(r, r2)


def test_fold_in_program_id_per_instance():
    """fold_in of the program id: a key per program instance, the same
    as folding in on the host and drawing one block."""
    key = pltpu.to_pallas_key(jax_random.key(11))

    def body(key_ref, o_ref):
        k = jax_random.fold_in(key_ref[...], pl.program_id(0))
        o_ref[...] = jax_random.normal(k, shape=o_ref.shape)
    r = np.asarray(pl.pallas_call(
        body, grid=(4,), in_specs=[SMEM], out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(key))

    def one(key_ref, o_ref):
        o_ref[...] = jax_random.normal(key_ref[...], shape=o_ref.shape)
    for i in range(4):
        ref = np.asarray(pl.pallas_call(one, in_specs=[SMEM], out_shape=jax.ShapeDtypeStruct(
            (8, 128), jnp.float32))(jax_random.fold_in(key, i)))
        np.testing.assert_array_equal(r[8 * i:8 * i + 8], ref)
    assert len({r[8 * i:8 * i + 8].tobytes() for i in range(4)}) == 4


# --- Block-invariant sampling ---

def make_kernel_body(index_map):
    def body(key_ref, o_ref):
        key = key_ref[...]
        samples = pltpu.sample_block(
            jax.random.uniform, key, block_size=o_ref[...].shape, tile_size=(16, 128),
            total_size=(64, 512), block_index=index_map(pl.program_id(0), pl.program_id(1)),
            minval=0.0, maxval=1.0)
        o_ref[...] = samples
    return body


def test_block_invariant_sampling():
    global_key = pltpu.to_pallas_key(jax_random.key(0))
    o_shape = jnp.ones((64, 512), dtype=jnp.float32)
    key_spec = pl.BlockSpec(memory_space=pltpu.SMEM)
    out_spec = pl.BlockSpec((16, 128), lambda i, j: (i, j))
    result_16x128 = pl.pallas_call(
        make_kernel_body(index_map=lambda i, j: (i, j)), out_shape=o_shape,
        in_specs=[key_spec], out_specs=out_spec, grid=(4, 4))(global_key)
    out_spec = pl.BlockSpec((32, 256), lambda i, j: (j, i))
    result_32x256_transposed = pl.pallas_call(
        make_kernel_body(index_map=lambda i, j: (j, i)), in_specs=[key_spec],
        out_shape=o_shape, out_specs=out_spec, grid=(2, 2))(global_key)
    np.testing.assert_array_equal(np.asarray(result_16x128),
                                  np.asarray(result_32x256_transposed))
    # (32, 128) blocks too: any block the tile divides
    r = pl.pallas_call(make_kernel_body(index_map=lambda i, j: (i, j)), out_shape=o_shape,
                       in_specs=[key_spec], out_specs=pl.BlockSpec((32, 128), lambda i, j: (i, j)),
                       grid=(2, 4))(global_key)
    np.testing.assert_array_equal(np.asarray(r), np.asarray(result_16x128))
