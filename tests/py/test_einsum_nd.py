# SPDX-License-Identifier: MIT
"""jnp.einsum and lax.dot_general beyond 2-D blocks: batch indices, several
free or contracting dimensions, more than two operands, sums of an index
only one operand has; results against NumPy's einsum."""
import numpy as np
import pytest
import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl

_SIZES = {"b": 2, "h": 2, "q": 16, "k": 128, "d": 64, "i": 8, "j": 128, "l": 16, "m": 24}


def _arrays(spec, dtype=np.float32, seed=3):
    rng = np.random.default_rng(seed)
    ins = spec.split("->")[0].split(",")
    return [rng.standard_normal([_SIZES[c] for c in s]).astype(dtype) for s in ins]


def _call(fn, arrays, shape, dtype=np.float32):
    def k(*refs):
        refs[-1][...] = fn(*[r[...] for r in refs[:-1]])

    return np.asarray(pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(shape, dtype))(*arrays))


@pytest.mark.parametrize("spec", [
    "bqd,bkd->bqk",		# attention scores
    "bqk,bkd->bqd",		# attention output
    "bhqd,bhkd->bhqk",		# two batch indices
    "qd,bkd->bqk",		# a batch index only the rhs has
    "ijk,ikl->jl",		# two contracted indices
    "ij,jk,kl->il",		# three operands
    "bqd->bdq",		# one operand, permuted
    "bqd->bq",			# one operand, summed
    "ij,l->ijl",		# an outer product
    "bqd,bkd->bkq",		# the product permuted
    "iq,qd->di",		# the product transposed
])
def test_einsum_against_numpy(spec):
    arrays = _arrays(spec)
    want = np.einsum(spec, *arrays)
    got = _call(lambda *v: jnp.einsum(spec, *v), arrays, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_einsum_bf16_with_f32_accumulation():
    spec = "bqd,bkd->bqk"
    arrays = [jax.to_bf16(a) for a in _arrays(spec)]
    want = np.einsum(spec, *[jax.from_bf16(a) for a in arrays])
    got = _call(lambda x, y: jnp.einsum(spec, x, y, preferred_element_type=jnp.float32),
                arrays, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("dims,shapes", [
    ((((2,), (1,)), ((0,), (0,))), ((2, 16, 64), (2, 64, 24))),
    ((((3,), (3,)), ((0, 1), (0, 1))), ((2, 2, 16, 64), (2, 2, 24, 64))),
    ((((1,), (0,)), ((2,), (2,))), ((16, 64, 2), (64, 24, 2))),	# batch last
    ((((0, 2), (1, 0)), ((), ())), ((8, 16, 4), (4, 8, 24))),	# two contracted
    ((((1,), (1,)), ((), ())), ((2, 64, 16), (24, 64))),	# free lhs of rank 2
])
def test_dot_general_dimension_numbers(dims, shapes):
    rng = np.random.default_rng(5)
    x, y = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    (lc, rc), (lb, rb) = dims
    # NumPy's answer: einsum with the same roles for each dimension
    letters = iter("abcdefghij")
    ls = [next(letters) for _ in x.shape]
    rs = [next(letters) for _ in y.shape]
    for a, b in zip(lc + lb, rc + rb):
        rs[b] = ls[a]
    out = [ls[d] for d in lb] + [c for d, c in enumerate(ls) if d not in lc + lb] + \
        [c for d, c in enumerate(rs) if d not in rc + rb]
    want = np.einsum("%s,%s->%s" % ("".join(ls), "".join(rs), "".join(out)), x, y)
    got = _call(lambda a, b: lax.dot_general(a, b, dims), [x, y], want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_dot_general_errors_name_the_dimensions():
    x = np.ones((2, 16, 64), np.float32)
    y = np.ones((3, 64, 24), np.float32)
    with pytest.raises(pl.TraceError, match="batch"):
        _call(lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))), [x, y],
              (2, 16, 24))
    with pytest.raises(pl.TraceError, match="out of range"):
        _call(lambda a, b: lax.dot_general(a, b, (((3,), (1,)), ((), ()))), [x, y],
              (2, 16, 24))


def test_einsum_refuses_diagonals_and_ellipses():
    x = np.ones((16, 16), np.float32)
    with pytest.raises(pl.TraceError, match="no diagonals"):
        _call(lambda a: jnp.einsum("ii->i", a), [x], (16,))
    with pytest.raises(pl.TraceError, match="ellipsis"):
        _call(lambda a: jnp.einsum("...i->i", a), [x], (16,))


@pytest.mark.parametrize("eq,xs,ys,out", [
    ("bqd,bkd->bqk", (4, 128, 64), (4, 256, 64), (4, 128, 256)),
    ("bqd,bdk->bqk", (3, 64, 128), (3, 128, 384), (3, 64, 384)),
])
def test_batched_products_are_stored_part_by_part(eq, xs, ys, out):
    """A batched dot_general stored whole: each batch element's product goes
    into its run of the output, the concatenation of them never made."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(xs).astype(np.float32)
    y = rng.standard_normal(ys).astype(np.float32)

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.einsum(eq, x_ref[...], y_ref[...])

    f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(out, jnp.float32))
    np.testing.assert_allclose(f(x, y), np.einsum(eq, x, y), rtol=1e-4, atol=1e-4)
    assert not any("jnp.concatenate" in s for s in f.statements), f.statements


def test_batched_products_stored_and_used_again_are_computed_once():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 128, 64)).astype(np.float32)
    y = rng.standard_normal((2, 256, 64)).astype(np.float32)

    def kernel(x_ref, y_ref, o_ref, p_ref):
        z = jnp.einsum("bqd,bkd->bqk", x_ref[...], y_ref[...])
        o_ref[...] = z
        p_ref[...] = z * 2

    f = pl.pallas_call(kernel, out_shape=(jax.ShapeDtypeStruct((2, 128, 256), jnp.float32),) * 2)
    o, p = f(x, y)
    want = np.einsum("bqd,bkd->bqk", x, y)
    np.testing.assert_allclose(o, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(p, 2 * want, rtol=1e-4, atol=1e-4)
    assert sum(s.count("jnp.dot") for s in f.statements) == 2, f.statements
