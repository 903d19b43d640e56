# SPDX-License-Identifier: MIT AND Apache-2.0
# Quotes expected values from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0):
# tests/random_test.py (PrngTest, _RANDOM_VALUES_CASES) and the jax.random
# module's documentation; the hash's vectors are Random123's.
"""jax.random on the host against JAX's own known answers: the
threefry2x32 hash (Random123's vectors, as JAX's testThreefry2x32 quotes
them), seeds, split, fold_in and bits in both jax_threefry_partitionable
layouts, and the samplers' values JAX pins (uniform, normal, randint,
bernoulli). Every expected number below is quoted from JAX's tests or
docs, not produced here. JAX pins most sampler values with
jax_threefry_partitionable off (its tests skip them otherwise), so those
run under jax.threefry_partitionable(False); the default layout is pinned
by the jax.random docs' examples and JAX's split/fold_in symmetry test."""
import zlib

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import _threefry
from tpuemu import pallas as pl
from tpuemu import random
from tpuemu.pallas import tpu as pltpu

KEY_CTORS = [random.key, random.PRNGKey]


# --- PrngTest.testThreefry2x32: Random123's known answers ---

@pytest.mark.parametrize("key,count,expected", [
    ([0, 0], [0, 0], ("0x6b200159", "0x99ba4efe")),
    ([0xFFFFFFFF, 0xFFFFFFFF], [0xFFFFFFFF, 0xFFFFFFFF], ("0x1cb996fc", "0xbb002be7")),
    ([0x13198a2e, 0x03707344], [0x243f6a88, 0x85a308d3], ("0xc4923a9c", "0x483df7a0")),
])
def test_threefry2x32(key, count, expected):
    result = _threefry.threefry_2x32(np.uint32(key), np.uint32(count))
    assert tuple(hex(int(x)) for x in result) == expected


def test_threefry2x32_large():
    """testThreefry2x32Large (n = 10**5 here, not 10**7): every pair of
    counts hashes alone, whatever the array's length."""
    n = 100000
    result = _threefry.threefry_2x32(
        np.uint32([0x13198a2e, 0x03707344]),
        np.concatenate([np.full((n,), 0x243f6a88, np.uint32),
                        np.full((n,), 0x85a308d3, np.uint32)]))
    np.testing.assert_array_equal(result[:n], np.full((n,), 0xc4923a9c, np.uint32))
    np.testing.assert_array_equal(result[n:], np.full((n,), 0x483df7a0, np.uint32))


def test_threefry2x32_empty():
    result = _threefry.threefry_2x32(np.uint32([0x13198a2e, 0x03707344]),
                                     np.ones((10, 0), np.uint32))
    assert result.shape == (10, 0) and result.dtype == np.uint32


# --- PrngTest.test_prng_seeds_and_keys (jax_enable_x64 off) ---

@pytest.mark.parametrize("make_key", KEY_CTORS)
@pytest.mark.parametrize("seed,typ,expected", [
    (0, int, [0, 0]),
    (1, np.int32, [0, 1]),
    (2, np.uint32, [0, 2]),
    (3, np.int64, [0, 3]),
    (-1, int, [0, 4294967295]),
    (-2, np.int32, [0, 4294967294]),
    (-3, np.int64, [0, 4294967293]),
    (np.iinfo(np.int32).max + 100, int, [0, 2147483747]),
    (np.iinfo(np.int32).max + 101, np.uint32, [0, 2147483748]),
    (np.iinfo(np.int32).min - 100, int, [0, 2147483548]),
    (np.iinfo(np.int32).min - 101, np.int64, [0, 2147483547]),
])
def test_prng_seeds_and_keys(make_key, seed, typ, expected):
    data = random.key_data(make_key(typ(seed)))
    assert data.dtype == np.uint32
    np.testing.assert_array_equal(data, np.array(expected, np.uint32))


@pytest.mark.parametrize("make_key", KEY_CTORS)
def test_prng_seed_errors(make_key):
    # PrngTest.test_prng_errors, KeyArrayTest.test_non_scalar_seed/_non_integer_seed
    with pytest.raises(OverflowError):
        make_key(np.iinfo(np.int64).max + 1)
    name = make_key.__name__
    with pytest.raises(TypeError, match="%s accepts a scalar seed" % name):
        make_key(np.arange(4))
    with pytest.raises(TypeError, match="PRNG key seed must be an integer"):
        make_key(np.pi)
    with pytest.raises(TypeError, match="%s accepts a scalar seed" % name):
        make_key(random.key(0))


# --- PrngTest.testRngRandomBits and ...ViewProperty (partitionable off) ---

@pytest.mark.parametrize("make_key", KEY_CTORS)
def test_rng_random_bits(make_key):
    key = make_key(1701)
    with jax.threefry_partitionable(False):
        np.testing.assert_array_equal(random.bits(key, (3,), np.uint8),
                                      np.array([216, 115, 43], np.uint8))
        np.testing.assert_array_equal(random.bits(key, (3,), jnp.uint16),
                                      np.array([41682, 1300, 55017], np.uint16))
        b32 = random.bits(key, (3,), np.uint32)
        assert b32.dtype == np.uint32
        np.testing.assert_array_equal(b32, np.array([56197195, 4200222568, 961309823],
                                                    np.uint32))
    # 64-bit words (jax_enable_x64's value): the module level only
    np.testing.assert_array_equal(
        _threefry.random_bits(random.key_data(key), 64, (3,), partitionable=False),
        np.array([3982329540505020460, 16822122385914693683, 7882654074788531506],
                 np.uint64))


def test_rng_random_bits_view_property():
    key = random.key(1701)
    n = 10
    with jax.threefry_partitionable(False):
        words = [np.asarray(random.bits(key, (n * 64 // w,), "uint%d" % w)).view(np.uint32)
                 for w in (8, 32)]
        words.append(_threefry.random_bits(random.key_data(key), 16, (n * 4,), False)
                     .view(np.uint32))
    for w in words[1:]:
        np.testing.assert_array_equal(w, words[0])


# --- PrngTest.testPRNGValues (partitionable off) ---

@pytest.mark.parametrize("make_key", KEY_CTORS)
def test_prng_values(make_key):
    k = make_key(0)
    with jax.threefry_partitionable(False):
        r = random.randint(k, (3, 3), 0, 8)
        assert r.dtype == np.int32
        np.testing.assert_array_equal(
            random.randint(k, (3, 3), 0, 8, dtype="int32"),
            np.array([[2, 1, 3], [6, 1, 5], [6, 3, 4]], np.int32))
        np.testing.assert_array_equal(
            random.key_data(random.split(k, 4)),
            np.array([[2285895361, 1501764800], [1518642379, 4090693311],
                      [433833334, 4221794875], [839183663, 3740430601]], np.uint32))
        np.testing.assert_array_equal(random.key_data(random.fold_in(k, 4)),
                                      np.array([2285895361, 433833334], np.uint32))


# --- PrngTest.test_threefry_split_fold_in_symmetry (partitionable on) ---

@pytest.mark.parametrize("make_key", KEY_CTORS)
def test_threefry_split_fold_in_symmetry(make_key):
    key = make_key(72)
    folds = [random.key_data(random.fold_in(key, i)) for i in range(3)]
    splits = [random.key_data(k) for k in random.split(key, 3)]
    for f, s in zip(folds, splits):
        np.testing.assert_array_equal(f, s)
    # and not so in the older layout (JAX's test is skipped there)
    with jax.threefry_partitionable(False):
        assert not np.array_equal(random.key_data(random.split(key, 3)[0]), folds[0])


# --- _RANDOM_VALUES_CASES, threefry2x32 (partitionable off) ---

def _case_key(name):
    # RandomValuesCase._seed: adler32 of the name and the impl
    return random.key(zlib.adler32((name + "threefry2x32").encode()))


@pytest.mark.parametrize("name,dtype,params,expected", [
    ("bernoulli", None, {"p": 0.5}, np.array([False, True, True, True, False])),
    ("bits", np.uint8, {}, np.array([10, 158, 82, 54, 158], np.uint8)),
    ("bits", np.uint16, {}, np.array([6738, 38161, 50695, 57337, 61600], np.uint16)),
    ("bits", np.uint32, {}, np.array([1978747883, 4134381225, 3628107870, 689687174,
                                      2788938207], np.uint32)),
    ("normal", np.float32, {}, np.array([-1.173234, -1.511662, 0.070593, -0.099764,
                                         1.052845], np.float32)),
    ("randint", np.int32, {"minval": 0, "maxval": 10}, np.array([0, 5, 7, 7, 5], np.int32)),
    ("uniform", np.float32, {}, np.array([0.298671, 0.073213, 0.873356, 0.260549,
                                          0.412797], np.float32)),
])
def test_random_distribution_values(name, dtype, params, expected):
    fn = getattr(random, name)
    with jax.threefry_partitionable(False):
        if dtype is None:
            actual = fn(_case_key(name), **params, shape=(5,))
        else:
            actual = fn(_case_key(name), **params, shape=(5,), dtype=dtype)
    actual = np.asarray(actual)
    assert actual.dtype == expected.dtype
    if expected.dtype.kind == "f":
        # JAX's expectations are printed to 6 decimals
        np.testing.assert_allclose(actual, expected, rtol=0, atol=1e-6)
    else:
        np.testing.assert_array_equal(actual, expected)


# --- the jax.random module's documentation (partitionable on, the default) ---

def test_docs_examples():
    key = random.key(0)
    np.testing.assert_array_equal(random.key_data(key), np.array([0, 0], np.uint32))
    u = random.uniform(key)
    assert u.shape == () and u.dtype == np.float32
    np.testing.assert_allclose(u, 0.947667, rtol=1e-6)
    np.testing.assert_array_equal(random.uniform(key), u)	# a key is not consumed
    key, subkey = random.split(key)
    np.testing.assert_allclose(random.uniform(subkey), 0.00729382, rtol=1e-6)


# --- properties of the host API ---

def test_uniform_is_the_mantissa_trick():
    """uniform's float32 values are bits >> 9 under exponent 0, less 1,
    bit for bit, then scaled in float32."""
    key = random.key(3)
    b = random.bits(key, (64, 128))
    f = ((b >> np.uint32(9)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)
    np.testing.assert_array_equal(random.uniform(key, (64, 128)), f)
    lo, hi = np.float32(-2), np.float32(3)
    np.testing.assert_array_equal(random.uniform(key, (64, 128), minval=-2.0, maxval=3.0),
                                  np.maximum(lo, f * (hi - lo) + lo))


def test_normal_moments_and_range():
    n = np.asarray(random.normal(random.key(5), (256, 256)))
    assert n.dtype == np.float32 and np.isfinite(n).all()
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1) < 0.01


def test_split_shapes_and_key_arrays():
    # CommonRandomTest.test_split_size_shape
    key = random.key(0)
    for num, shape in [(None, (2,)), (6, (6,)), ((6,), (6,)), ((2, 3), (2, 3)),
                       ((2, 3, 4), (2, 3, 4))]:
        ks = random.split(key) if num is None else random.split(key, num)
        assert ks.shape == shape and random.key_data(ks).shape == shape + (2,)
    ks = random.split(key, (2, 3))
    np.testing.assert_array_equal(random.key_data(ks[1, 2]), random.key_data(ks)[1, 2])
    assert len(list(random.split(key, 5))) == 5
    assert str(key.dtype) == "key<fry>"
    with pytest.raises(TypeError, match="key_data"):
        np.asarray(key)
    with pytest.raises(TypeError, match="split accepts a single key"):
        random.split(ks)


def test_legacy_uint32_keys():
    """Raw uint32 key data is a key, as JAX takes legacy keys: the same
    draws, and split / fold_in give raw data back."""
    key = random.key(42)
    raw = random.key_data(key)
    np.testing.assert_array_equal(random.normal(raw, (8,)), random.normal(key, (8,)))
    s = random.split(raw, 3)
    assert isinstance(s, np.ndarray) and s.shape == (3, 2)
    np.testing.assert_array_equal(s, random.key_data(random.split(key, 3)))
    np.testing.assert_array_equal(random.fold_in(raw, 7),
                                  random.key_data(random.fold_in(key, 7)))
    np.testing.assert_array_equal(random.key_data(random.wrap_key_data(raw)), raw)


def test_permutation():
    key = random.key(0)
    p = np.asarray(random.permutation(key, 100))
    assert p.dtype == np.int32 and sorted(p) == list(range(100))
    assert not (p == np.arange(100)).all()
    x = np.arange(20).reshape(10, 2)
    # rows of a 2-D array: the permutation of their count, as JAX's
    np.testing.assert_array_equal(random.permutation(key, x),
                                  x[np.asarray(random.permutation(key, 10))])
    np.testing.assert_array_equal(random.permutation(key, np.arange(100)), p)


def test_randint_bounds():
    key = random.key(9)
    for lo, hi, dt in [(5, 10, np.int32), (-3, 3, np.int8), (0, 256, np.uint8),
                       (0, 2 ** 32, np.uint32), (7, 7, np.int32)]:
        r = np.asarray(random.randint(key, (4096,), lo, hi, dtype=dt))
        assert r.dtype == dt
        assert r.min() >= lo and (r.max() < hi if hi > lo else (r == lo).all())
    # the full uint8 range is reached (maxval past the dtype's top)
    assert np.asarray(random.randint(key, (4096,), 0, 256, dtype=np.uint8)).max() == 255


def test_to_pallas_key_is_bits_of_the_key():
    """pltpu.to_pallas_key's words are bits(key, (1, 2)), as JAX's, for one
    key and for each key of a batch."""
    keys = random.split(random.key(11), (2, 3))
    pk = pltpu.to_pallas_key(keys)
    assert pk.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            np.testing.assert_array_equal(random.key_data(pk)[i, j],
                                          random.bits(keys[i, j], (1, 2), np.uint32))


# --- threefry keys in kernels (pallas/_fry.py): the host's keys and bits ---

def test_traced_seed_in_kernel():
    """jax.random.key of an SMEM value in a kernel: the host's key of it."""
    def body(s_ref, o_ref):
        o_ref[...] = random.uniform(random.key(s_ref[0]), shape=o_ref.shape)
    for seed in (3, -5):
        r = pl.pallas_call(body, in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
                           out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))(
            np.array([seed], np.int32))
        np.testing.assert_array_equal(r, random.uniform(random.key(seed), (8, 128)))


def test_fold_in_of_program_id_on_threefry_key():
    """fold_in of the program id on a key passed in: each block the host's
    draw of the key folded in with its index; a key the kernel closes over
    is refused by name."""
    key = random.key(1)

    def body(k_ref, o_ref):
        k = random.fold_in(k_ref[...], pl.program_id(0))
        o_ref[...] = random.uniform(k, shape=o_ref.shape)
    r = np.asarray(pl.pallas_call(
        body, grid=(2,), in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
        out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
        out_shape=jax.ShapeDtypeStruct((16, 128), jnp.float32))(key))
    for i in range(2):
        np.testing.assert_array_equal(r[8 * i:8 * i + 8],
                                      random.uniform(random.fold_in(key, i), (8, 128)))

    def closed(o_ref):
        o_ref[...] = random.uniform(random.fold_in(key, pl.program_id(0)), shape=o_ref.shape)
    with pytest.raises(pl.TraceError, match="a key the kernel closes over"):
        pl.pallas_call(closed, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))()


def test_prngkey_is_jaxs_raw_key_data():
    """jax.random.PRNGKey: JAX's legacy raw uint32 words of shape (2,),
    which split answers raw keys for (JAX's split of PRNGKey(0), the
    partitionable and the old layout, as JAX's docs print them)."""
    k = jax.random.PRNGKey(0)
    assert isinstance(k, np.ndarray) and k.dtype == np.uint32 and k.shape == (2,)
    np.testing.assert_array_equal(k, [0, 0])
    np.testing.assert_array_equal(jax.random.split(k),
                                  [[1797259609, 2579123966], [928981903, 3453687069]])
    with jax.threefry_partitionable(False):
        np.testing.assert_array_equal(jax.random.split(k),
                                      [[4146024105, 967050713], [2718843009, 1272950319]])
