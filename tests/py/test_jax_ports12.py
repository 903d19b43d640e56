# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's tests/pallas/tpu_pallas_random_test.py ThreefryTest and
PhiloxTest (its PRNGTest and BlockInvarianceTest are in
test_pallas_random.py, the stateful draws in test_jax_ports6.py), with
more on threefry keys in kernels (pallas/_fry.py): SMEM and VMEM keys,
both jax_threefry_partitionable layouts, key batches and .at views, JAX's
legacy uint32 key data, keys made, folded in and split in the kernel,
key outputs, bernoulli and randint, pltpu.sample_block of a threefry
key, the trace's size, and the refusals.

Every expected value is the host's jax.random of the same key (checked
against JAX's known answers in test_threefry.py) or JAX's own, never a
kernel's. bits and uniform are bit-equal, as JAX's test asserts; normal
is within 4 float32 ulps, not bit-equal: the device's log1p is correctly
rounded, the host's NumPy float32 one is not always (JAX compares two
XLA-on-TPU results there). The pallas_threefry2x32 and
pallas_philox4x32 impls (jax.experimental.pallas.ops.tpu.random) are
tpuemu.pallas.ops.tpu.random; jax.random.key takes their names without
importing them. Left out: test_threefry_kernel_matches_jax_threefry_
sharded (shard_map over 2 devices; the sim has one, where JAX's skips),
and jax.enable_x64 in test_mul_hi_lo (the 64-bit product is Python's)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu import random as jax_random
from tpuemu.pallas import tpu as pltpu
from tpuemu.pallas.ops.tpu.random import philox
from tpuemu.pallas.ops.tpu.random import threefry  # noqa: F401

SMEM = pl.BlockSpec(memory_space=pltpu.SMEM)
VMEM = pl.BlockSpec(memory_space=pltpu.VMEM)


def _same(generator, result, expected):
    if generator is jax_random.normal:
        np.testing.assert_array_max_ulp(np.asarray(result), np.asarray(expected), maxulp=4)
    else:
        np.testing.assert_array_equal(result, expected)


# --- ThreefryTest.test_pallas_matches_jax_threefry ---

@pytest.mark.parametrize("shape", [(8, 128), (32, 256), (4, 16, 128)])
@pytest.mark.parametrize("generator,dtype", [(jax_random.uniform, jnp.float32),
                                             (jax_random.normal, jnp.float32),
                                             (jax_random.bits, jnp.uint32)],
                         ids=["uniform", "normal", "bits"])
def test_pallas_matches_jax_threefry(shape, generator, dtype):
    def body(key_ref, o_ref):
        key = key_ref[...]
        o_ref[...] = generator(key, shape=o_ref[...].shape)

    threefry_key = jax_random.key(0, impl="threefry2x32")
    o_shape = jax.ShapeDtypeStruct(shape, dtype)
    with jax.threefry_partitionable(True):
        result = pl.pallas_call(
            body,
            in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
            out_shape=o_shape,
        )(threefry_key)
        jax_result = generator(threefry_key, shape=o_shape.shape)
    _same(generator, result, jax_result)


@pytest.mark.parametrize("partitionable", [True, False])
@pytest.mark.parametrize("spec", [SMEM, VMEM], ids=["smem", "vmem"])
@pytest.mark.parametrize("shape", [(8, 128), (16, 256), (2, 8, 128), (7,), (3, 5),
                                   (2, 3, 4, 128)])
@pytest.mark.parametrize("generator", [jax_random.uniform, jax_random.bits],
                         ids=["uniform", "bits"])
def test_layouts_spaces_and_shapes(generator, shape, spec, partitionable):
    """Both layouts (the older one's halves of counts, padded when the size
    is odd: (7,), (3, 5)), keys in SMEM and VMEM, ranks 1 to 4: the host's
    bits, another key than 0's."""
    key = jax_random.split(jax_random.key(5))[1]
    dtype = jnp.uint32 if generator is jax_random.bits else jnp.float32

    def body(key_ref, o_ref):
        o_ref[...] = generator(key_ref[...], shape=o_ref.shape)
    with jax.threefry_partitionable(partitionable):
        r = pl.pallas_call(body, in_specs=[spec],
                           out_shape=jax.ShapeDtypeStruct(shape, dtype))(key)
        np.testing.assert_array_equal(r, generator(key, shape))


# --- ThreefryTest.test_threefry_kernel_matches_jax_threefry ---

@pytest.mark.parametrize("shape", [(512, 512), (137, 275), (4, 512, 512), (34,), ()])
def test_threefry_kernel_matches_jax_threefry(shape):
    with jax.threefry_partitionable(True):
        key_jax = jax_random.key(0, impl="threefry2x32")
        jax_gen = jax_random.bits(key_jax, shape=shape)
        key_pl = jax_random.key(0, impl="pallas_threefry2x32")
        pl_gen = jax_random.bits(key_pl, shape=shape)

    np.testing.assert_array_equal(jax_gen, pl_gen)


def test_pallas_threefry_impl_keys():
    """The pallas_threefry2x32 impl: key<plfry>, threefry's seed, split and
    fold_in, its bits the partitionable layout's in either, 32-bit only."""
    key = jax_random.key(7, impl="pallas_threefry2x32")
    assert str(key.dtype) == "key<plfry>" and key.dtype != jax_random.key(7).dtype
    np.testing.assert_array_equal(jax_random.key_data(key), [0, 7])
    ks = jax_random.split(key, 3)
    assert ks.dtype == key.dtype
    np.testing.assert_array_equal(jax_random.key_data(ks),
                                  jax_random.key_data(jax_random.split(jax_random.key(7), 3)))
    f = jax_random.fold_in(key, 9)
    with jax.threefry_partitionable(False):
        u = jax_random.uniform(f, (16, 8))
    with jax.threefry_partitionable(True):
        np.testing.assert_array_equal(
            u, jax_random.uniform(jax_random.fold_in(jax_random.key(7), 9), (16, 8)))
    with pytest.raises(ValueError, match="Only 32-bit PRNG supported"):
        jax_random.bits(key, (4,), jnp.uint8)


# --- PhiloxTest ---

@pytest.mark.parametrize("x", [0x1, 0x10000, 0xabcdef])
@pytest.mark.parametrize("y", [0x1, 0x10000, 0xabcdef])
def test_mul_hi_lo(x, y):
    x = jnp.uint32(x)
    y = jnp.uint32(y)
    hi, lo = philox.mul32_hi_lo(x, y)
    # JAX's: (hi.astype(uint64) << 32) + lo under jax.enable_x64()
    result = (int(hi) << 32) + int(lo)
    ref = int(x) * int(y)
    assert result == ref


def test_mul_hi_lo_edges_in_a_kernel():
    """mul32_hi_lo in a kernel, of uint32 blocks with the top bits set:
    Python's exact product."""
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2**32, (8, 128), dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, (8, 128), dtype=np.uint64).astype(np.uint32)
    x[0, :3], y[0, :3] = [0xFFFFFFFF, 0xFFFFFFFF, 0x80000000], [0xFFFFFFFF, 1, 0x80000000]

    def body(x_ref, y_ref, hi_ref, lo_ref):
        hi_ref[...], lo_ref[...] = philox.mul32_hi_lo(x_ref[...], y_ref[...])
    out = jax.ShapeDtypeStruct((8, 128), jnp.uint32)
    hi, lo = pl.pallas_call(body, out_shape=(out, out))(x, y)
    p = x.astype(np.uint64) * y.astype(np.uint64)
    np.testing.assert_array_equal(hi, (p >> np.uint64(32)).astype(np.uint32))
    np.testing.assert_array_equal(lo, p.astype(np.uint32))


@pytest.mark.parametrize("shape", [(512, 512), (137, 275), (4, 512, 512), (34,), ()])
def test_generate_uniform(shape):
    key = jax_random.key(0, impl="pallas_philox4x32")
    values = jax_random.uniform(key, shape=shape)
    minval = jnp.min(values)
    maxval = jnp.max(values)
    assert minval >= 0.0
    assert maxval <= 1.0
    assert np.shape(values) == shape


def test_split():
    key = jax_random.key(0, impl="pallas_philox4x32")
    key1, key2 = jax_random.split(key)
    key_data = jax.random.key_data(key)
    key1_data = jax.random.key_data(key1)
    key2_data = jax.random.key_data(key2)
    # Assert all keys are different.
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(key_data, key1_data)
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(key_data, key2_data)
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(key1_data, key2_data)


def test_foldin():
    key = jax_random.key(0, impl="pallas_philox4x32")
    new_key_1 = jax_random.fold_in(key, 1)
    new_key_2 = jax_random.fold_in(key, 2)
    key_data = jax.random.key_data(key)
    key1_data = jax.random.key_data(new_key_1)
    key2_data = jax.random.key_data(new_key_2)
    # Assert all keys are different.
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(key_data, key1_data)
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(key_data, key2_data)
    with pytest.raises(AssertionError):
        np.testing.assert_array_equal(key1_data, key2_data)


def _philox_ref(k_hi, k_lo, count):
    """JAX's philox_4x32 of the counter (0, count, 0, 0), in Python ints
    (its rounds as jax/experimental/pallas/ops/tpu/random/philox.py has
    them): the two words its impl keeps."""
    m = 0xFFFFFFFF
    hi0, lo0, hi1, lo1 = 0, count, 0, 0
    for i in range(10):
        p0, p1 = 0xCD9E8D57 * hi1, 0xD2511F53 * hi0
        hi0, lo0, hi1, lo1 = ((p0 >> 32) ^ lo0 ^ k_hi, p0 & m,
                              (p1 >> 32) ^ lo1 ^ k_lo, p1 & m)
        if i != 9:
            k_hi, k_lo = (k_hi + 0x9E3779B9) & m, (k_lo + 0xBB67AE85) & m
    return hi0, lo0


def test_philox_words_match_jaxs_rounds():
    """The kernel's Philox against JAX's rounds in Python ints: bits (the
    words xor-ed) of a few counts, split's keys and fold_in's."""
    key = jax_random.fold_in(jax_random.key(3, impl="pallas_philox4x32"), 0)
    k_hi, k_lo = (int(w) for w in jax_random.key_data(key))
    b = np.asarray(jax_random.bits(key, (3, 300)))
    for c in (0, 1, 299, 300, 899):
        hi, lo = _philox_ref(k_hi, k_lo, c)
        assert b.ravel()[c] == hi ^ lo
    ks = jax_random.key_data(jax_random.split(key, 3))
    for c in range(3):
        assert tuple(ks[c]) == _philox_ref(k_hi, k_lo, c)
    assert tuple(jax_random.key_data(jax_random.fold_in(key, 41))) == \
        _philox_ref(k_hi, k_lo, 41)


# --- more: threefry keys in kernels ---

def test_key_batch_picked_by_grid_index():
    """A batch of keys in SMEM, key_ref[i] for grid step i: each block the
    host's draw of that key."""
    keys = jax_random.split(jax_random.key(2), 4)

    def body(key_ref, o_ref):
        o_ref[...] = jax_random.uniform(key_ref[pl.program_id(0)], shape=o_ref.shape)
    r = np.asarray(pl.pallas_call(
        body, grid=(4,), in_specs=[SMEM], out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((32, 128), jnp.float32))(keys))
    for i in range(4):
        np.testing.assert_array_equal(r[8 * i:8 * i + 8], jax_random.uniform(keys[i], (8, 128)))


def test_key_views_and_blocks_of_keys():
    """key_ref.at[0, 1][...] of a (2, 2) batch (JAX's key_shape case), and
    a BlockSpec over the batch picking one key per step."""
    keys = jax_random.split(jax_random.key(8), (2, 2))

    def at(key_ref, o_ref):
        o_ref[...] = jax_random.bits(key_ref.at[0, 1][...], shape=o_ref.shape)
    out = jax.ShapeDtypeStruct((8, 128), jnp.uint32)
    np.testing.assert_array_equal(pl.pallas_call(at, in_specs=[SMEM], out_shape=out)(keys),
                                  jax_random.bits(keys[0, 1], (8, 128)))

    def blocked(key_ref, o_ref):
        o_ref[...] = jax_random.bits(key_ref[0, 0], shape=o_ref.shape)
    r = np.asarray(pl.pallas_call(
        blocked, grid=(2,),
        in_specs=[pl.BlockSpec((1, 1), lambda i: (1, i), memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((16, 128), jnp.uint32))(keys))
    for i in range(2):
        np.testing.assert_array_equal(r[8 * i:8 * i + 8], jax_random.bits(keys[1, i], (8, 128)))


@pytest.mark.parametrize("spec", [SMEM, VMEM], ids=["smem", "vmem"])
def test_legacy_key_data(spec):
    """JAX's legacy keys: PRNGKey's uint32 (2,) words passed as an array,
    read whole and sampled (or wrapped with wrap_key_data)."""
    raw = jax.random.PRNGKey(3)

    def body(k_ref, o_ref, w_ref):
        o_ref[...] = jax_random.bits(k_ref[...], shape=o_ref.shape)
        w_ref[...] = jax_random.uniform(jax_random.wrap_key_data(k_ref[...]), shape=w_ref.shape)
    b, u = pl.pallas_call(body, in_specs=[spec],
                          out_shape=(jax.ShapeDtypeStruct((8, 128), jnp.uint32),
                                     jax.ShapeDtypeStruct((8, 128), jnp.float32)))(raw)
    np.testing.assert_array_equal(b, jax_random.bits(raw, (8, 128)))
    np.testing.assert_array_equal(u, jax_random.uniform(raw, (8, 128)))


@pytest.mark.parametrize("partitionable", [True, False])
def test_fold_in_and_split_in_the_kernel(partitionable):
    """fold_in (of a constant and of the program id) and split in the
    kernel, on a key passed in and on one made there: the host's keys."""
    key = jax_random.key(21)

    def body(key_ref, o_ref):
        k = key_ref[...]
        a, b = jax_random.split(jax_random.fold_in(k, 5))
        o_ref[0] = jax_random.bits(a, shape=(8, 128))
        o_ref[1] = jax_random.bits(b, shape=(8, 128))
        o_ref[2] = jax_random.bits(jax_random.fold_in(k, pl.program_id(0) + 3), shape=(8, 128))
        c = jax_random.split(jax_random.key(4), 3)[2]
        o_ref[3] = jax_random.bits(jax_random.fold_in(c, 1), shape=(8, 128))
    with jax.threefry_partitionable(partitionable):
        r = np.asarray(pl.pallas_call(body, in_specs=[SMEM],
                                      out_shape=jax.ShapeDtypeStruct((4, 8, 128), jnp.uint32))(key))
        a, b = jax_random.split(jax_random.fold_in(key, 5))
        c = jax_random.split(jax_random.key(4), 3)[2]
        want = [jax_random.bits(a, (8, 128)), jax_random.bits(b, (8, 128)),
                jax_random.bits(jax_random.fold_in(key, 3), (8, 128)),
                jax_random.bits(jax_random.fold_in(c, 1), (8, 128))]
    for i in range(4):
        np.testing.assert_array_equal(r[i], want[i])


def test_to_pallas_key_of_a_key_made_in_the_kernel():
    """pltpu.to_pallas_key(jax.random.key(3)) in a kernel: the Pallas key
    the host makes of it (its draws the same); of a key passed in (vector
    words the core's PRNG cannot be seeded from) it is refused by name."""
    out = jax.ShapeDtypeStruct((8, 128), jnp.float32)

    def made(o_ref):
        o_ref[...] = jax_random.uniform(pltpu.to_pallas_key(jax_random.key(3)), shape=o_ref.shape)

    def passed(k_ref, o_ref):
        o_ref[...] = jax_random.uniform(k_ref[...], shape=o_ref.shape)
    np.testing.assert_array_equal(
        pl.pallas_call(made, out_shape=out)(),
        pl.pallas_call(passed, in_specs=[SMEM], out_shape=out)(
            pltpu.to_pallas_key(jax_random.key(3))))

    def refused(k_ref, o_ref):
        o_ref[...] = jax_random.uniform(pltpu.to_pallas_key(k_ref[...]), shape=o_ref.shape)
    with pytest.raises(pl.TraceError, match="constant seed"):
        pl.pallas_call(refused, in_specs=[SMEM], out_shape=out)(jax_random.key(3))


def test_uniform_bounds_bernoulli_and_randint():
    """uniform's minval and maxval, bernoulli, and randint of int32 (small,
    negative and full-width bounds) and uint32: the host's values."""
    key = jax_random.key(13)
    cases = [
        (lambda k, s: jax_random.uniform(k, s, minval=-3.0, maxval=0.7), jnp.float32),
        (lambda k, s: jax_random.bernoulli(k, 0.3, s).astype(jnp.int32), jnp.int32),
        (lambda k, s: jax_random.randint(k, s, 0, 10), jnp.int32),
        (lambda k, s: jax_random.randint(k, s, -1000, 77777), jnp.int32),
        (lambda k, s: jax_random.randint(k, s, -2**31, 2**31 - 1), jnp.int32),
        (lambda k, s: jax_random.randint(k, s, 5, 3_000_000_000, dtype=jnp.uint32),
         jnp.uint32),
    ]
    for f, dt in cases:
        def body(key_ref, o_ref):
            o_ref[...] = f(key_ref[...], o_ref.shape)
        r = pl.pallas_call(body, in_specs=[SMEM],
                           out_shape=jax.ShapeDtypeStruct((16, 128), dt))(key)
        np.testing.assert_array_equal(r, np.asarray(f(key, (16, 128))).astype(r.dtype))


def test_block_invariance_of_a_threefry_key():
    """BlockInvarianceTest's sample_block with a threefry key: the same
    array for (16, 128) and (32, 256) blocks in either grid order, each
    tile the host's draw of the key folded in with its tile number."""
    def make_kernel_body(index_map):
        def body(key_ref, o_ref):
            o_ref[...] = pltpu.sample_block(
                jax_random.uniform, key_ref[...], block_size=o_ref[...].shape,
                tile_size=(16, 128), total_size=(32, 256),
                block_index=index_map(pl.program_id(0), pl.program_id(1)))
        return body
    key = jax_random.key(6)
    o_shape = jax.ShapeDtypeStruct((32, 256), jnp.float32)
    r16 = np.asarray(pl.pallas_call(
        make_kernel_body(lambda i, j: (i, j)), out_shape=o_shape, in_specs=[SMEM],
        out_specs=pl.BlockSpec((16, 128), lambda i, j: (i, j)), grid=(2, 2))(key))
    r32 = np.asarray(pl.pallas_call(
        make_kernel_body(lambda i, j: (0, 0)), out_shape=o_shape, in_specs=[SMEM],
        out_specs=pl.BlockSpec((32, 256), lambda i, j: (0, 0)), grid=(1, 1))(key))
    np.testing.assert_array_equal(r16, r32)
    for t in range(4):
        i, j = divmod(t, 2)
        np.testing.assert_array_equal(r16[16 * i:16 * i + 16, 128 * j:128 * j + 128],
                                      jax_random.uniform(jax_random.fold_in(key, t), (16, 128)))


def test_threefry_key_outputs():
    """Key outputs (ShapeDtypeStruct(shape, key.dtype)): a key copied or
    stored comes back the same key (PRNGTest.test_output_physical_key with
    a threefry key); keys folded in in the kernel, output in VMEM, are the
    host's fold_in of each (in SMEM their vector words are refused)."""
    key = jax_random.key(17)
    for body in (lambda k, o: pltpu.sync_copy(k, o), lambda k, o: o.__setitem__(..., k[...])):
        y = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((), key.dtype),
                           in_specs=[SMEM], out_specs=SMEM)(key)
        assert y.shape == () and y.dtype == key.dtype
        np.testing.assert_array_equal(jax_random.key_data(y), jax_random.key_data(key))

    def folded(k_ref, o_ref):
        for i in range(3):
            o_ref[i] = jax_random.fold_in(k_ref[...], i + 10)
    y = pl.pallas_call(folded, out_shape=jax.ShapeDtypeStruct((3,), key.dtype),
                       in_specs=[SMEM], out_specs=VMEM)(key)
    for i in range(3):
        np.testing.assert_array_equal(jax_random.key_data(y[i]),
                                      jax_random.key_data(jax_random.fold_in(key, i + 10)))
    with pytest.raises(pl.TraceError, match="output it in VMEM"):
        pl.pallas_call(folded, out_shape=jax.ShapeDtypeStruct((3,), key.dtype),
                       in_specs=[SMEM], out_specs=SMEM)(key)


def test_trace_is_one_statement_a_step():
    """A draw is ~60 statements whatever its shape (each round's words
    bound to locals), none longer than libtpurt's expression limit."""
    for shape in [(8, 128), (256, 512)]:
        def body(key_ref, o_ref):
            o_ref[...] = jax_random.uniform(key_ref[...], shape=o_ref.shape)
        f = pl.pallas_call(body, in_specs=[SMEM],
                           out_shape=jax.ShapeDtypeStruct(shape, jnp.float32))
        f(jax_random.key(0))
        assert len(f.statements) < 70, len(f.statements)
        assert max(len(s) for s in f.statements) < 191


def test_refusals():
    """What is not supported says so, by name."""
    key = jax_random.key(0)
    out = jax.ShapeDtypeStruct((8, 128), jnp.uint32)

    def run(body, k=key, spec=SMEM):
        return pl.pallas_call(body, in_specs=[spec], out_shape=out)(k)
    with pytest.raises(pl.TraceError, match="uint32"):
        run(lambda k, o: o.__setitem__(..., jax_random.bits(k[...], o.shape, jnp.uint8)))
    with pytest.raises(pl.TraceError, match="float32 only"):
        run(lambda k, o: o.__setitem__(..., jax_random.uniform(k[...], o.shape, jnp.bfloat16)))
    with pytest.raises(pl.TraceError, match="permutation"):
        run(lambda k, o: jax_random.permutation(k[...], 8))
    with pytest.raises(pl.TraceError, match="at most 16"):
        run(lambda k, o: jax_random.split(k[...], 17))
    with pytest.raises(pl.TraceError, match="ANY"):
        run(lambda k, o: jax_random.bits(k[...], o.shape), spec=pl.BlockSpec(
            memory_space=pltpu.ANY))
    with pytest.raises(TypeError, match="pallas_philox4x32"):
        run(lambda k, o: None, k=jax_random.key(0, impl="pallas_philox4x32"))
