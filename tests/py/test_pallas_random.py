# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's tests/pallas/tpu_pallas_random_test.py that take Pallas
keys (pltpu.to_pallas_key, jax.random.key(impl="pallas_tpu")) into kernels:
jax.random's samplers on them, fold_in, key data, sample_block's block
invariance, keys in core_map and emit_pipeline. The bits are Philox's of
the key's words, not the TPU's: the tests check what JAX's do (shapes,
dtypes, ranges, same key same bits, other keys other bits) and the host
reference of fold_in's mix."""
import functools

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu import random as jax_random
from tpuemu.pallas import tpu as pltpu

SMEM = pl.BlockSpec(memory_space=pltpu.SMEM)


def _key(seed=0):
    return pltpu.to_pallas_key(jax_random.key(seed, impl="rbg"))


def _run(body, key, shape=(8, 128), dtype=jnp.float32, **kw):
    return np.asarray(pl.pallas_call(body, in_specs=[SMEM], out_shape=jax.ShapeDtypeStruct(
        shape, dtype), **kw)(key))


# --- PRNGTest.test_to_pallas_key_under_vmap (batched and jax.vmap forms) ---

@pytest.mark.parametrize("legacy", [True, False])
def test_to_pallas_key_batched(legacy):
    key = jax_random.PRNGKey(42) if legacy else jax_random.key(42, impl="rbg")
    keys = jax_random.split(key, 10)
    batched = pltpu.to_pallas_key(keys)
    assert batched.shape == (10,) and batched.dtype == pltpu.to_pallas_key(keys[0]).dtype
    data = jax_random.key_data(batched)
    assert data.shape == (10, 1, 2) and data.dtype == np.uint32
    each = np.stack([jax_random.key_data(pltpu.to_pallas_key(k)) for k in keys])
    np.testing.assert_array_equal(data, each)
    vmapped = jax.vmap(pltpu.to_pallas_key)(keys)
    np.testing.assert_array_equal(jax_random.key_data(vmapped), data)
    assert jax.typeof(batched).shape == (10,) and jax.typeof(batched).dtype == batched.dtype
    assert len(np.unique(data.reshape(10, 2), axis=0)) == 10


def test_pallas_key_raise_not_implemented_outside_of_kernel():
    with pytest.raises(NotImplementedError, match="MLIR translation rule .* not found"):
        jax_random.uniform(_key(), shape=(1,), minval=0.0, maxval=1.0)


# --- PRNGTest.test_stateful_sample: prng_seed(key_ref[...]) ---

@pytest.mark.parametrize("gen", ["stateful_uniform", "stateful_normal"])
def test_stateful_sample_seeded_by_key(gen):
    def body(key_ref, o_ref):
        pltpu.prng_seed(key_ref[...])
        o_ref[...] = getattr(pltpu, gen)(shape=o_ref[...].shape)
    r = _run(body, _key())
    assert r.max() > r.min()
    np.testing.assert_array_equal(r, _run(body, _key()))
    assert (r != _run(body, _key(1))).mean() > 0.99


# --- PRNGTest.test_stateless_sample ---

@pytest.mark.parametrize("gen,dtype,key_shape", [
    ("uniform", jnp.float32, None), ("uniform", jnp.float32, (1, 1)),
    ("normal", jnp.float32, None), ("bits", jnp.uint32, None)])
def test_stateless_sample(gen, dtype, key_shape):
    def body(key_ref, o_ref):
        if key_shape:
            key_ref = key_ref.at[(0,) * len(key_shape)]
        o_ref[...] = getattr(jax_random, gen)(key_ref[...], shape=o_ref[...].shape)
    key = _key()
    if key_shape:
        key = jnp.reshape(key, key_shape)
    r = _run(body, key, dtype=dtype)
    assert r.shape == (8, 128) and r.dtype == np.dtype(dtype.np_name)
    assert r.max() > r.min()
    # the same key the same values, however the kernel holds it
    plain = _run(lambda k, o: o.__setitem__(..., getattr(jax_random, gen)(
        k[...], shape=o.shape)), _key(), dtype=dtype)
    np.testing.assert_array_equal(r, plain)


def test_samplers_ranges_and_statistics():
    """uniform in [minval, maxval) with its mean, normal's moments,
    bernoulli's rate, bits over all of uint32 (65536 draws each)."""
    shape = (256, 256)

    def sampler(gen, **kw):
        def body(key_ref, o_ref):
            o_ref[...] = getattr(jax_random, gen)(key_ref[...], shape=shape, **kw)
        return body
    u = _run(sampler("uniform", minval=-2.0, maxval=3.0), _key(), shape)
    assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 0.03
    n = _run(sampler("normal"), _key(), shape)
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1.0) < 0.02
    b = _run(lambda k, o: o.__setitem__(..., jax_random.bernoulli(k[...], 0.25, shape)),
             _key(), shape, jnp.bool_)
    assert abs(b.mean() - 0.25) < 0.01
    bits = _run(sampler("bits"), _key(), shape, jnp.uint32)
    assert bits.max() > 2 ** 31 and abs(bits.astype(np.float64).mean() / 2 ** 32 - 0.5) < 0.01


def test_same_key_as_prng_seed_of_its_words():
    """A sampler on a key is the core's PRNG seeded by the key's two words."""
    key = _key(3)
    w = jax_random.key_data(key).reshape(2).view(np.int32)

    def keyed(key_ref, o_ref):
        o_ref[...] = jax_random.bits(key_ref[...], o_ref.shape, jnp.uint32)

    def seeded(o_ref):
        pltpu.prng_seed(int(w[0]), int(w[1]))
        o_ref[...] = pltpu.stateful_bits(o_ref.shape)
    out = jax.ShapeDtypeStruct((8, 128), jnp.uint32)
    np.testing.assert_array_equal(_run(keyed, key, dtype=jnp.uint32),
                                  np.asarray(pl.pallas_call(seeded, out_shape=out)()))


# --- PRNGTest.test_key_data ---

def test_key_data():
    def body(key_ref, o_ref):
        x0, x1 = pltpu.unwrap_pallas_seed(key_ref[...])
        o_ref[0, 0] = x0
        o_ref[0, 1] = x1
    key = _key()
    expected = jax_random.key_data(key)
    r = pl.pallas_call(body, in_specs=[SMEM], out_specs=SMEM,
                       out_shape=jax.ShapeDtypeStruct(expected.shape, jnp.int32))(key)
    np.testing.assert_array_equal(np.asarray(r).view(np.uint32), expected)


# --- PRNGTest.test_squeezed_blockspec ---

def test_squeezed_blockspec():
    @functools.partial(
        pl.pallas_call, grid=(),
        in_specs=[pl.BlockSpec((pl.squeezed,), lambda: (0,), memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec((8, 128)),
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))
    def kernel(key_ref, o_ref):
        o_ref[...] = jax_random.uniform(key_ref[...], shape=o_ref.shape)
    k = _key()
    r = np.asarray(kernel(k[None]))
    assert r.min() >= 0.0 and r.max() < 1.0 and r.max() > r.min()


def test_keys_picked_by_grid_index():
    """A batch of keys, one per grid step by its BlockSpec: each block is
    the draw of its own key."""
    keys = pltpu.to_pallas_key(jax_random.split(jax_random.key(5), 4))

    def body(key_ref, o_ref):
        o_ref[...] = jax_random.uniform(key_ref[...], shape=o_ref.shape)
    r = np.asarray(pl.pallas_call(
        body, grid=(4,),
        in_specs=[pl.BlockSpec((pl.squeezed,), lambda i: (i,), memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(keys))
    for i in range(4):
        np.testing.assert_array_equal(r[8 * i:8 * i + 8], _run(body, keys[i]))
    assert len({r[8 * i:8 * i + 8].tobytes() for i in range(4)}) == 4


# --- PRNGTest.test_fold_in ---

def test_fold_in():
    def body(key_ref, o_ref):
        key = key_ref[...]
        o_ref[0, ...] = jax_random.uniform(key, shape=o_ref[0, ...].shape,
                                           minval=0.0, maxval=1.0)
        key = jax_random.fold_in(key, jnp.uint32(2))
        o_ref[1, ...] = jax_random.uniform(key, shape=o_ref[1, ...].shape,
                                           minval=0.0, maxval=1.0)
    r = _run(body, _key(), (2, 8, 128))
    assert (r[0] != r[1]).mean() > 0.99


def test_fold_in_matches_host_fold_in():
    """fold_in in a kernel (of a constant and of a program id) is the host's
    fold_in: the folded key's words, and its draws."""
    key = _key(9)

    def words(key_ref, o_ref):
        k = jax_random.fold_in(key_ref[...], 12345)
        k = jax_random.fold_in(k, pl.program_id(0) + 6)
        x0, x1 = pltpu.unwrap_pallas_seed(k)
        o_ref[0, 0] = x0
        o_ref[0, 1] = x1
    r = pl.pallas_call(words, in_specs=[SMEM], out_specs=SMEM,
                       out_shape=jax.ShapeDtypeStruct((1, 2), jnp.int32))(key)
    host = jax_random.fold_in(jax_random.fold_in(key, 12345), 6)
    np.testing.assert_array_equal(np.asarray(r).view(np.uint32), jax_random.key_data(host))

    def draw(key_ref, o_ref):
        o_ref[...] = jax_random.uniform(jax_random.fold_in(key_ref[...], 7), shape=o_ref.shape)

    def plain(key_ref, o_ref):
        o_ref[...] = jax_random.uniform(key_ref[...], shape=o_ref.shape)
    np.testing.assert_array_equal(_run(draw, key), _run(plain, jax_random.fold_in(key, 7)))


def test_fold_in_distinct_keys():
    """Distinct data fold in to distinct keys (the mix is a bijection)."""
    key = _key(1)
    data = [jax_random.key_data(jax_random.fold_in(key, d)).tobytes() for d in range(2000)]
    assert len(set(data)) == 2000
    assert jax_random.key_data(key).tobytes() not in data


def test_split_refused():
    with pytest.raises(NotImplementedError, match="Cannot split a Pallas key"):
        jax_random.split(_key())

    def body(key_ref, o_ref):
        jax_random.split(key_ref[...])
    with pytest.raises(NotImplementedError, match="fold_in instead"):
        _run(body, _key())


def test_key_in_vmem_refused():
    def body(key_ref, o_ref):
        o_ref[...] = jax_random.uniform(key_ref[...], shape=o_ref.shape)
    with pytest.raises(pl.TraceError, match="memory_space=pltpu.SMEM"):
        pl.pallas_call(body, in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
                       out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(_key())


def test_pallas_impl_key():
    """jax.random.key(seed, impl="pallas_tpu"): the seed in both words."""
    k = jax_random.key(7, impl="pallas_tpu")
    np.testing.assert_array_equal(jax_random.key_data(k), np.full((1, 2), 7, np.uint32))

    def body(key_ref, o_ref):
        o_ref[...] = jax_random.bits(key_ref[...], o_ref.shape)

    def seeded(o_ref):
        pltpu.prng_seed(7, 7)
        o_ref[...] = pltpu.stateful_bits(o_ref.shape)
    out = jax.ShapeDtypeStruct((8, 128), jnp.uint32)
    np.testing.assert_array_equal(_run(body, k, dtype=jnp.uint32),
                                  np.asarray(pl.pallas_call(seeded, out_shape=out)()))


# --- PRNGTest.test_key_in_core_map ---

def test_key_in_core_map():
    def main(refs):
        key_hbm, o_ref = refs

        @pl.core_map(pltpu.create_tensorcore_mesh("core"))
        def _():
            @functools.partial(pl.run_scoped, key_smem=pltpu.SMEM((), key_hbm.dtype),
                               o_vmem=pltpu.VMEM(o_ref.shape, o_ref.dtype))
            def _scoped(key_smem, o_vmem):
                pltpu.sync_copy(key_hbm, key_smem)
                o_vmem[...] = jax_random.uniform(key_smem[...], shape=o_ref.shape,
                                                 minval=0.0, maxval=1.0)
                pltpu.sync_copy(o_vmem, o_ref)

    def f(rng_key):
        y = jnp.zeros((8, 128), dtype=jnp.float32)
        _, y = pl.run_state(main)((rng_key, y))
        return y
    y = np.asarray(f(_key()))
    assert y.max() > y.min() and y.min() >= 0.0 and y.max() < 1.0
    # the key through run_state, HBM and key-typed SMEM scratch draws what
    # it draws passed straight to a pallas_call
    plain = _run(lambda k, o: o.__setitem__(..., jax_random.uniform(
        k[...], shape=o.shape, minval=0.0, maxval=1.0)), _key())
    np.testing.assert_array_equal(y, plain)


def test_keys_through_run_state_come_back():
    def main(refs):
        key_ref, o_ref = refs

        @pl.core_map(pltpu.create_tensorcore_mesh("core"))
        def _():
            @functools.partial(pl.run_scoped, o_vmem=pltpu.VMEM(o_ref.shape, o_ref.dtype))
            def _scoped(o_vmem):
                o_vmem[...] = jnp.zeros(o_vmem.shape, jnp.float32)
                pltpu.sync_copy(o_vmem, o_ref)
    key = _key(2)
    k, _ = pl.run_state(main)((key, jnp.zeros((8, 128), jnp.float32)))
    assert k.dtype == key.dtype
    np.testing.assert_array_equal(jax_random.key_data(k), jax_random.key_data(key))


# --- BlockInvarianceTest.test_block_invariance ---

def test_block_invariance():
    def make_kernel_body(index_map):
        def body(key_ref, o_ref):
            key = key_ref[...]
            o_ref[...] = pltpu.sample_block(
                jax_random.uniform, key, block_size=o_ref[...].shape, tile_size=(16, 128),
                total_size=(64, 512),
                block_index=index_map(pl.program_id(0), pl.program_id(1)),
                minval=0.0, maxval=1.0)
        return body
    global_key = jax_random.key(0, impl="pallas_tpu")
    o_shape = jax.ShapeDtypeStruct((64, 512), jnp.float32)
    r16 = pl.pallas_call(make_kernel_body(lambda i, j: (i, j)), out_shape=o_shape,
                         in_specs=[SMEM], out_specs=pl.BlockSpec((16, 128), lambda i, j: (i, j)),
                         grid=(4, 4))(global_key)
    r32 = pl.pallas_call(make_kernel_body(lambda i, j: (j, i)), out_shape=o_shape,
                         in_specs=[SMEM], out_specs=pl.BlockSpec((32, 256), lambda i, j: (j, i)),
                         grid=(2, 2))(global_key)
    r16, r32 = np.asarray(r16), np.asarray(r32)
    np.testing.assert_array_equal(r16, r32)
    # and the tiles are distinct draws
    tiles = {r16[i:i + 16, j:j + 128].tobytes() for i in range(0, 64, 16)
             for j in range(0, 512, 128)}
    assert len(tiles) == 16 and 0.0 <= r16.min() and r16.max() < 1.0


# --- PhiloxTest (host side): split and fold_in give distinct key data ---

def test_host_split_and_fold_in_distinct():
    key = jax_random.key(0)
    k1, k2 = jax_random.split(key)
    datas = [jax_random.key_data(k).tobytes() for k in (key, k1, k2)]
    assert len(set(datas)) == 3
    f1, f2 = jax_random.fold_in(key, 1), jax_random.fold_in(key, 2)
    datas = [jax_random.key_data(k).tobytes() for k in (key, f1, f2)]
    assert len(set(datas)) == 3
    u = np.asarray(jax_random.uniform(key, (137, 275)))
    assert u.min() >= 0.0 and u.max() <= 1.0


# --- PRNGTest.test_output_physical_key ---

def test_output_physical_key():
    """A key output (ShapeDtypeStruct((), key.dtype)) copied from the input
    comes back the same key."""
    key = pltpu.to_pallas_key(jax_random.key(0, impl="threefry2x32"))

    def body(x_ref, o_ref):
        pltpu.sync_copy(x_ref, o_ref)
    y = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((), jax.typeof(key).dtype),
                       in_specs=[SMEM], out_specs=SMEM)(key)
    assert y.shape == () and y.dtype == key.dtype
    np.testing.assert_array_equal(jax_random.key_data(key), jax_random.key_data(y))


def test_key_outputs_batched_and_folded():
    """A batch of key outputs, each the input key folded in with its index
    in the kernel: the host's fold_in of each."""
    key = _key(4)

    def body(k_ref, o_ref):
        for i in range(3):
            o_ref[i] = jax_random.fold_in(k_ref[...], i)
    y = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((3,), key.dtype),
                       in_specs=[SMEM], out_specs=SMEM)(key)
    assert y.shape == (3,)
    for i in range(3):
        np.testing.assert_array_equal(jax_random.key_data(y[i]),
                                      jax_random.key_data(jax_random.fold_in(key, i)))


def test_pallas_key_made_in_kernel():
    """jax.random.key(seed, impl="pallas_tpu") in a kernel, of a constant or
    an SMEM value: the key the host makes of that seed."""
    def made(s_ref, o_ref):
        k = jax_random.key(s_ref[0], impl="pallas_tpu")
        o_ref[...] = jax_random.uniform(k, shape=o_ref.shape)

    def const(o_ref):
        o_ref[...] = jax_random.uniform(jax_random.key(9, impl="pallas_tpu"), shape=o_ref.shape)
    out = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    a = _run(made, np.array([9], np.int32))
    b = np.asarray(pl.pallas_call(const, out_shape=out)())
    c = _run(lambda k, o: o.__setitem__(..., jax_random.uniform(k[...], shape=o.shape)),
             jax_random.key(9, impl="pallas_tpu"))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def test_threefry_key_made_in_kernel():
    """jax.random.key(0) made in the kernel is a threefry key there: its
    draws are the host's (pallas/_fry.py)."""
    def body(o_ref):
        o_ref[...] = jax_random.uniform(jax_random.key(0), shape=o_ref.shape)
    r = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))()
    np.testing.assert_array_equal(r, jax_random.uniform(jax_random.key(0), (8, 128)))


def test_host_key_closed_over_refused():
    key = jax_random.key(0)

    def body(o_ref):
        o_ref[...] = jax_random.uniform(key, shape=o_ref.shape)
    with pytest.raises(pl.TraceError, match="a key the kernel closes over"):
        pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))()
