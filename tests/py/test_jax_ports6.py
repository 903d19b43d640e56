# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas tests, sixth round: the TPU's stateful PRNG,
tests/pallas/tpu_pallas_random_test.py PRNGTest (seeded reproducibility,
non-vreg shapes, the stateful samplers), with more: seeds from program
ids and SMEM values, per-draw and per-block differences, reseeding, grids
split across cores, pl.when, rough uniformity (bits and floats made from
them) and the refusals. pltpu.prng_random_bits is int32, as JAX's
primitive is (bitcast it to uint32 for unsigned bits), and its bits are
Philox-4x32-10's, not the TPU hardware's: the tests check properties, not
values."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu


def _bits(seed, shape=(8, 128)):
    def body(o_ref):
        pltpu.prng_seed(seed)
        o_ref[...] = pltpu.prng_random_bits(o_ref[...].shape)
    return np.asarray(pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(shape, jnp.int32))())


# --- tpu_pallas_random_test.py PRNGTest.test_seeded_reproducibility ---

def test_seeded_reproducibility():
    """Same seed, same bits; another seed, other bits (everywhere)."""
    r1a, r1b, r2 = _bits(0), _bits(0), _bits(1)
    np.testing.assert_array_equal(r1a, r1b)
    np.testing.assert_array_compare(np.not_equal, r1a, r2)


# --- PRNGTest.test_prng_non_vreg_shape_output ---

@pytest.mark.parametrize("shape", [(32, 256), (8, 16)])
def test_prng_non_vreg_shape_output(shape):
    """Shapes other than one vreg: (mostly) unique values, int32's range."""
    r = _bits(0, shape)
    assert r.shape == shape and r.dtype == np.int32
    assert len(np.unique(r)) / np.prod(shape) > 0.99
    assert r.max() <= np.iinfo(np.int32).max and r.min() >= np.iinfo(np.int32).min


# --- PRNGTest.test_stateful_sample: jax.random's samplers on the core's PRNG ---

_GENS = {"stateful_uniform": jnp.float32, "stateful_normal": jnp.float32,
         "stateful_bits": jnp.uint32, "stateful_bernoulli": jnp.bool_}


def _sample(gen, seed=0, shape=(256, 256), **kw):
    def body(o_ref):
        pltpu.prng_seed(seed)
        o_ref[...] = getattr(pltpu, gen)(shape=o_ref.shape, **kw)
    return np.asarray(pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(shape, _GENS[gen]))())


@pytest.mark.parametrize("gen", sorted(_GENS))
def test_stateful_sample(gen):
    """Each sampler: its dtype and shape, the same values for the same seed,
    others for another."""
    a, b, c = _sample(gen), _sample(gen), _sample(gen, seed=1)
    assert a.shape == (256, 256) and a.dtype == np.dtype(_GENS[gen].np_name)
    np.testing.assert_array_equal(a, b)
    assert (a != c).mean() > (0.4 if gen == "stateful_bernoulli" else 0.99)


def test_stateful_samplers_distributions():
    """65536 draws: uniform in [minval, maxval) with its mean, normal's
    mean and spread, bernoulli's rate, bits over all of uint32."""
    u = _sample("stateful_uniform", minval=-2.0, maxval=3.0)
    assert u.min() >= -2.0 and u.max() < 3.0 and abs(u.mean() - 0.5) < 0.03
    n = _sample("stateful_normal")
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1.0) < 0.02 and np.isfinite(n).all()
    b = _sample("stateful_bernoulli", p=0.25)
    assert abs(b.mean() - 0.25) < 0.01
    bits = _sample("stateful_bits")
    assert bits.max() > 2 ** 31 and abs(bits.astype(np.float64).mean() / 2 ** 32 - 0.5) < 0.01


def test_pallas_keys_refused():
    """Pallas keys are supported (test_pallas_random.py); what is not a key
    is refused by name, and sample_block wants a key read in a kernel."""
    with pytest.raises(pl.TraceError, match="to_pallas_key: a jax.random key"):
        pltpu.to_pallas_key(0)
    with pytest.raises(pl.TraceError, match="sample_block: a Pallas key read in the kernel"):
        pltpu.sample_block(None, 0, (8, 128), (8, 128), (8, 128))


# --- beyond JAX's tests ---

def test_bits_as_uint32_and_range():
    """Viewed as uint32, the bits span the whole range."""
    u = _bits(3, (32, 256)).view(np.uint32)
    assert u.min() < 2**24 and u.max() > 2**32 - 2**24


def test_more_seeds_and_constants():
    """Several seeds; each seed and its order matter; 32-bit constants wrap."""
    def run(*seeds):
        def body(o_ref):
            pltpu.prng_seed(*seeds)
            o_ref[...] = pltpu.prng_random_bits(o_ref.shape)
        return np.asarray(pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32))())
    outs = [run(1, 2), run(2, 1), run(1, 2, 0), run(1), run(1, 2, 3, 4)]
    for i in range(len(outs)):
        for j in range(i):
            assert (outs[i] != outs[j]).mean() > 0.99, (i, j)
    np.testing.assert_array_equal(run(1, 2), outs[0])
    np.testing.assert_array_equal(run(2**32 - 1), run(-1))


def test_draws_differ_and_reseeding_restarts():
    def body(a_ref, b_ref, c_ref):
        pltpu.prng_seed(7)
        a_ref[...] = pltpu.prng_random_bits(a_ref.shape)
        b_ref[...] = pltpu.prng_random_bits(b_ref.shape)
        pltpu.prng_seed(7)
        c_ref[...] = pltpu.prng_random_bits(c_ref.shape)
    s = jax.ShapeDtypeStruct((8, 128), jnp.int32)
    a, b, c = (np.asarray(x) for x in pl.pallas_call(body, out_shape=(s, s, s))())
    np.testing.assert_array_equal(a, c)
    assert (a != b).mean() > 0.99


def test_seeds_from_smem_values():
    """Seeds read from SMEM give the bits the same constants give."""
    def body(s_ref, o_ref):
        pltpu.prng_seed(s_ref[0], s_ref[1])
        o_ref[...] = pltpu.prng_random_bits(o_ref.shape)

    def const(o_ref):
        pltpu.prng_seed(3, 5)
        o_ref[...] = pltpu.prng_random_bits(o_ref.shape)
    out = jax.ShapeDtypeStruct((8, 128), jnp.int32)
    r = pl.pallas_call(body, in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
                       out_shape=out)(jnp.array(np.array([3, 5], np.int32)))
    np.testing.assert_array_equal(np.asarray(r), np.asarray(pl.pallas_call(const, out_shape=out)()))


@pytest.mark.parametrize("sem", ["parallel", "arbitrary"])
def test_seeded_by_program_id_over_a_grid(sem):
    """prng_seed(program ids) per step: blocks differ from each other, and
    the bits do not depend on how the grid is split across cores."""
    def body(o_ref):
        pltpu.prng_seed(pl.program_id(0), pl.program_id(1))
        o_ref[...] = pltpu.prng_random_bits(o_ref.shape)

    def run(s):
        return np.asarray(pl.pallas_call(
            body, grid=(2, 2), out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)),
            out_shape=jax.ShapeDtypeStruct((16, 256), jnp.int32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=(s, s)))())
    r = run(sem)
    blocks = [r[i * 8:(i + 1) * 8, j * 128:(j + 1) * 128] for i in range(2) for j in range(2)]
    for i in range(4):
        for j in range(i):
            assert (blocks[i] != blocks[j]).mean() > 0.99
    np.testing.assert_array_equal(r, run("arbitrary"))
    np.testing.assert_array_equal(blocks[3], _bits_two(1, 1))


def _bits_two(a, b):
    def body(o_ref):
        pltpu.prng_seed(a, b)
        o_ref[...] = pltpu.prng_random_bits(o_ref.shape)
    return np.asarray(pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32))())


def test_state_lives_across_steps():
    """Seeded once under pl.when at the first step, the core keeps drawing:
    every step's block differs, and a rerun gives the same bits."""
    def body(o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            pltpu.prng_seed(11)
        o_ref[...] = pltpu.prng_random_bits(o_ref.shape)

    def run():
        return np.asarray(pl.pallas_call(
            body, grid=(4,), out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
            out_shape=jax.ShapeDtypeStruct((32, 128), jnp.int32),
            compiler_params=pltpu.CompilerParams(dimension_semantics=("arbitrary",)))())
    r = run()
    np.testing.assert_array_equal(r, run())
    np.testing.assert_array_equal(r[:8], _bits(11))
    for i in range(1, 4):
        assert (r[i * 8:(i + 1) * 8] != r[:8]).mean() > 0.99


def test_rough_uniformity_of_bits_and_floats():
    """Each bit is set about half the time; floats in [0, 1) made in the
    kernel from the top 23 bits (the usual mantissa trick) look uniform."""
    def body(o_ref, f_ref):
        pltpu.prng_seed(123)
        bits = pltpu.prng_random_bits(o_ref.shape)
        o_ref[...] = bits
        m = lax.shift_right_logical(bits, 9) | 0x3F800000
        f_ref[...] = pltpu.bitcast(m, jnp.float32) - 1.0
    shape = (64, 256)
    b, f = pl.pallas_call(body, out_shape=(jax.ShapeDtypeStruct(shape, jnp.int32),
                                           jax.ShapeDtypeStruct(shape, jnp.float32)))()
    u = np.asarray(b).view(np.uint32).ravel()
    n = u.size		# 16384: a bit's count has sd 64
    for k in range(32):
        ones = int(((u >> np.uint32(k)) & 1).sum())
        assert abs(ones - n / 2) < 6 * 64, (k, ones)
    f = np.asarray(f).ravel()
    assert f.min() >= 0.0 and f.max() < 1.0
    assert abs(f.mean() - 0.5) < 0.01 and abs(f.var() - 1 / 12) < 0.005
    hist, _ = np.histogram(f, bins=16, range=(0, 1))
    assert np.all(np.abs(hist - n / 16) < 6 * np.sqrt(n / 16)), hist


def test_random_bits_of_rank_1_and_3():
    """A (2, 8, 128) or (256,) draw: the same bits as the 2-D draw of its
    rows, reshaped."""
    flat = _bits(5, (16, 128))

    def body(o3, o1):
        pltpu.prng_seed(5)
        o3[...] = pltpu.prng_random_bits((2, 8, 128))
        pltpu.prng_seed(5)
        o1[...] = pltpu.prng_random_bits((256,))
    b3, b1 = pl.pallas_call(body, out_shape=(jax.ShapeDtypeStruct((2, 8, 128), jnp.int32),
                                             jax.ShapeDtypeStruct((256,), jnp.int32)))()
    np.testing.assert_array_equal(np.asarray(b3), flat.reshape(2, 8, 128))
    assert np.asarray(b1).shape == (256,) and len(np.unique(np.asarray(b1))) > 250


def test_refusals():
    out = jax.ShapeDtypeStruct((8, 128), jnp.int32)

    def run(fn):
        def body(o_ref):
            fn(o_ref)
        return pl.pallas_call(body, out_shape=out)()
    with pytest.raises(pl.TraceError, match="1 to 4 int32 seeds, not 0"):
        run(lambda o: pltpu.prng_seed())
    with pytest.raises(pl.TraceError, match="1 to 4 int32 seeds, not 5"):
        run(lambda o: pltpu.prng_seed(1, 2, 3, 4, 5))
    with pytest.raises(pl.TraceError, match="a seed is an int32 scalar"):
        run(lambda o: pltpu.prng_seed(1.5))
    with pytest.raises(pl.TraceError, match="does not fit in 32 bits"):
        run(lambda o: pltpu.prng_seed(2**33))
    with pytest.raises(pl.TraceError, match="shapes have 1 to 4 dimensions"):
        run(lambda o: pltpu.prng_random_bits((2, 2, 2, 8, 128)))
    with pytest.raises(pl.TraceError, match="outside of pallas_call"):
        pltpu.prng_seed(0)
