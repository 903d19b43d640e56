# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Ports of JAX's own Pallas TPU library kernels, ninth round (c):
jax/experimental/pallas/ops/tpu/megablox (gmm.py's gmm and tgmm, with
common.py's dtype rules and ops.py's VJP written out), transcribed as a
user would write them against tpuemu, and JAX's tests/pallas/
tpu_gmm_test.py GroupedMatmulTest: test_gmm (forward and both gradients,
transposed rhs, every dtype combination) and test_gmm_sharded_groups
(group_offset and existing_out), with group sizes drawn as its
hypothesis strategy draws them (ends sampled with replacement, so groups
may be empty) from a fixed seed, at JAX's GROUPED_MATMUL_TESTS shapes
that run quickly. Also ops/tpu/matmul.py, the guide's example kernel, as
export_back_compat_pallas_test.py's test_mosaic_matmul builds its inputs.
The kernels are in tpuemu.pallas.ops.tpu.megablox (common.py, gmm.py,
ops.py) and tpuemu.pallas.ops.tpu.matmul, imported here by JAX's paths
(tpuemu.experimental.pallas.ops.tpu...). The references are NumPy."""
import functools

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu.experimental.pallas.ops.tpu.matmul import matmul
from tpuemu.experimental.pallas.ops.tpu.megablox import gmm, tgmm


# --- tpu_gmm_test.py ---

def random_dense(shape, key, dtype, limit=None):
    if limit is None:
        limit = 1 / np.prod(shape)
    x = jax.random.uniform(key, shape, dtype, minval=-limit, maxval=limit)
    return x.astype(jnp.bfloat16).astype(dtype)


def group_sizes_strategy(rng, m, num_groups):
    """The test's hypothesis strategy with a seeded generator: group ends
    sampled with replacement in [0, m] (so groups may be empty), the last
    at m."""
    ends_no_final = np.sort(rng.integers(0, m + 1, size=num_groups - 1)).astype(np.int32)
    ends = np.concatenate([ends_no_final, np.array([m], dtype=np.int32)])
    starts = np.concatenate([np.zeros(1, dtype=np.int32), ends_no_final])
    return jnp.array(ends - starts, dtype=jnp.int32)


def reference_gmm(lhs, rhs, group_sizes):
    """float64: lhs's rows of group i times rhs[i]."""
    lhs, rhs = np.asarray(lhs, np.float64), np.asarray(rhs, np.float64)
    start, out = 0, []
    for i, size in enumerate(np.asarray(group_sizes)):
        out.append(lhs[start:start + size] @ rhs[i])
        start += size
    return np.concatenate(out, axis=0)


def reference_tgmm(lhs_t, rhs, group_sizes):
    """float64: for each group, lhs_t's columns times rhs's rows of it."""
    lhs_t, rhs = np.asarray(lhs_t, np.float64), np.asarray(rhs, np.float64)
    start, out = 0, []
    for size in np.asarray(group_sizes):
        out.append(lhs_t[:, start:start + size] @ rhs[start:start + size])
        start += size
    return np.stack(out)


def tolerances(lhs_dtype, rhs_dtype, out_dtype):
    if jnp.bfloat16 in (lhs_dtype, rhs_dtype, out_dtype):
        return 1e-3, 1e-2	# atol, rtol
    return 1e-3, 1e-5


def assert_allclose(out, expected, dtype, atol, rtol):
    assert out.dtype == dtype
    np.testing.assert_allclose(np.asarray(out, np.float32), expected, atol=atol, rtol=rtol)


def _round(x, dtype):
    """@x (float64) as the kernel's result dtype holds it."""
    x = np.asarray(x, np.float32)
    return np.asarray(jnp.asarray(x).astype(jnp.bfloat16), np.float32) \
        if dtype == jnp.bfloat16 else x


# JAX's GROUPED_MATMUL_TESTS without (512, 2048, 128), which only repeats
# (512, 128, 128) over more k tiles, at these seeds' group counts
GROUPED_MATMUL_TESTS = [
    (128, 128, 128),
    (256, 128, 128),
    (128, 256, 128),
    (128, 128, 256),
    (256, 128, 512),
    (512, 128, 128),
    (128, 8, 16),	# partial tiles
]
F32, BF16 = jnp.float32, jnp.bfloat16
# with_dtype_arguments: every (lhs, rhs, out) combination
DTYPES = [(a, b, c) for a in (F32, BF16) for b in (F32, BF16) for c in (F32, BF16)]


def _gmm_case(m, k, n, lhs_dtype, rhs_dtype, out_dtype, transpose_rhs, seed):
    rng = np.random.default_rng(seed)
    num_groups = int(rng.integers(1, 33))
    key = jax.random.key(seed)
    k1, k2 = jax.random.split(key, 2)
    lhs = random_dense((m, k), k1, lhs_dtype, limit=1)
    rhs = random_dense((num_groups, k, n), k2, rhs_dtype, limit=1)
    group_sizes = group_sizes_strategy(rng, m, num_groups)

    rhs_arg = rhs.swapaxes(1, 2) if transpose_rhs else rhs
    out = gmm(lhs, rhs_arg, group_sizes, preferred_element_type=out_dtype,
              transpose_rhs=transpose_rhs)
    atol, rtol = tolerances(lhs_dtype, rhs_dtype, out_dtype)
    assert_allclose(out, _round(reference_gmm(lhs, rhs, group_sizes), out_dtype), out_dtype,
                    atol, rtol)

    cotangent = random_dense((m, n), k1, out_dtype, limit=1)
    _, vjp_fn = jax.vjp(functools.partial(gmm, preferred_element_type=out_dtype,
                                          transpose_rhs=transpose_rhs),
                        lhs, rhs_arg, group_sizes)
    grad_lhs, grad_rhs, _ = vjp_fn(cotangent)
    ref_lhs = reference_gmm(cotangent, np.asarray(rhs, np.float64).swapaxes(1, 2),
                            group_sizes)
    ref_rhs = reference_tgmm(np.asarray(lhs, np.float64).T, cotangent, group_sizes)
    if transpose_rhs:
        ref_rhs = ref_rhs.swapaxes(1, 2)
    assert_allclose(grad_lhs, _round(ref_lhs, lhs_dtype), lhs_dtype, atol, rtol)
    assert_allclose(grad_rhs, _round(ref_rhs, rhs_dtype), rhs_dtype, atol, rtol)
    return np.asarray(group_sizes)


@pytest.mark.parametrize("m,k,n", GROUPED_MATMUL_TESTS)
@pytest.mark.parametrize("transpose_rhs", [False, True])
def test_gmm(m, k, n, transpose_rhs):
    _gmm_case(m, k, n, F32, F32, F32, transpose_rhs, seed=m + k + n)


@pytest.mark.parametrize("dtypes", DTYPES[1:])
@pytest.mark.parametrize("transpose_rhs", [False, True])
def test_gmm_dtypes(dtypes, transpose_rhs):
    _gmm_case(256, 128, 128, *dtypes, transpose_rhs, seed=3)


@pytest.mark.parametrize("sizes", [[0, 128, 0, 128], [0, 0, 37, 0, 219], [128, 128, 0],
                                   [5, 0, 0, 251, 0], [256]])
def test_gmm_empty_groups(sizes):
    # empty groups first, between unaligned ones and last: gmm skips them
    # (their rows none), tgmm visits each for a zero output
    group_sizes = jnp.array(sizes, dtype=jnp.int32)
    m, k, n = 256, 128, 128
    k1, k2, k3 = jax.random.split(jax.random.key(len(sizes)), 3)
    lhs = random_dense((m, k), k1, F32, limit=1)
    rhs = random_dense((len(sizes), k, n), k2, F32, limit=1)
    out = gmm(lhs, rhs, group_sizes)
    np.testing.assert_allclose(out, reference_gmm(lhs, rhs, group_sizes), atol=1e-3, rtol=1e-5)
    cot = random_dense((m, n), k3, F32, limit=1)
    t = tgmm(lhs.swapaxes(0, 1), cot, group_sizes)
    ref = reference_tgmm(np.asarray(lhs, np.float64).T, cot, group_sizes)
    np.testing.assert_allclose(t, ref, atol=1e-3, rtol=1e-5)
    for g, s in enumerate(sizes):
        if s == 0:
            assert not np.asarray(t[g]).any()


@pytest.mark.parametrize("m,k,n", [(256, 128, 128), (128, 8, 16)])
@pytest.mark.parametrize("dtypes", [DTYPES[0], DTYPES[-1], DTYPES[2]])
def test_gmm_sharded_groups(m, k, n, dtypes):
    lhs_dtype, rhs_dtype, out_dtype = dtypes
    rng = np.random.default_rng(m + k)
    group_stride = int(rng.integers(1, 5))
    num_groups = group_stride * int(rng.integers(2, 8 // group_stride + 2))
    k1, k2 = jax.random.split(jax.random.key(7), 2)
    lhs = random_dense((m, k), k1, lhs_dtype, limit=1)
    rhs = random_dense((num_groups, k, n), k2, rhs_dtype, limit=1)
    group_sizes = group_sizes_strategy(rng, m, num_groups)

    # the first shard alone zeroes the rows of the other groups; each later
    # one writes its groups' rows into existing_out
    out = gmm(lhs, rhs[0:group_stride], group_sizes, out_dtype)
    for group_offset in range(group_stride, num_groups, group_stride):
        out = gmm(lhs, rhs[group_offset:group_offset + group_stride], group_sizes, out_dtype,
                  group_offset=jnp.array(group_offset, dtype=jnp.int32), existing_out=out)
    atol, rtol = tolerances(lhs_dtype, rhs_dtype, out_dtype)
    assert_allclose(out, _round(reference_gmm(lhs, rhs, group_sizes), out_dtype), out_dtype,
                    atol, rtol)

    # the gradients, shard by shard as the test's vjps give them
    cotangent = random_dense((m, n), k1, out_dtype, limit=1)
    grad_lhs = None
    grad_rhs = []
    for group_offset in range(0, num_groups, group_stride):
        off = jnp.array(group_offset, dtype=jnp.int32)
        shard = rhs[group_offset:group_offset + group_stride]
        gl = gmm(cotangent, shard, group_sizes, lhs_dtype, group_offset=off,
                 transpose_rhs=True)
        gr = tgmm(lhs.swapaxes(0, 1), cotangent, group_sizes, rhs_dtype, group_offset=off,
                  num_actual_groups=group_stride)
        grad_lhs = gl if grad_lhs is None else grad_lhs + gl
        grad_rhs.append(gr)
    grad_rhs = jnp.concatenate(grad_rhs, axis=0)
    ref_lhs = reference_gmm(cotangent, np.asarray(rhs, np.float64).swapaxes(1, 2), group_sizes)
    ref_rhs = reference_tgmm(np.asarray(lhs, np.float64).T, cotangent, group_sizes)
    assert_allclose(grad_lhs, _round(ref_lhs, lhs_dtype), lhs_dtype, atol, rtol)
    assert_allclose(grad_rhs, _round(ref_rhs, rhs_dtype), rhs_dtype, atol, rtol)


def test_repeat_total_repeat_length():
    # jnp.repeat's total_repeat_length (NumPy has none): cut, or padded
    # with the last element even when its own repeat count is 0
    a = jnp.arange(4, dtype=jnp.int32)
    np.testing.assert_array_equal(jnp.repeat(a, jnp.array([1, 2, 0, 5]), total_repeat_length=10),
                                  [0, 1, 1, 3, 3, 3, 3, 3, 3, 3])
    np.testing.assert_array_equal(jnp.repeat(a, jnp.array([1, 2, 0, 0]), total_repeat_length=5),
                                  [0, 1, 1, 3, 3])
    np.testing.assert_array_equal(jnp.repeat(a, 3, total_repeat_length=5), [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(jnp.repeat(a, 2), np.repeat(np.arange(4), 2))


def test_host_broadcasted_iota():
    # lax.broadcasted_iota outside a kernel (gmm's _zero_uninitialized_memory)
    np.testing.assert_array_equal(lax.broadcasted_iota(jnp.int32, (3, 4), 1),
                                  np.broadcast_to(np.arange(4), (3, 4)))
    r = lax.broadcasted_iota(jnp.int32, (5,), 0)
    assert r.dtype == np.int32
    np.testing.assert_array_equal(r, np.arange(5))


# --- jax/experimental/pallas/ops/tpu/matmul.py, the guide's example kernel ---

def test_mosaic_matmul():
    # export_back_compat_pallas_test.py's test_mosaic_matmul, smaller: its
    # inputs built the same way, checked against NumPy, not golden data
    x_shape = (512, 512)
    x = 1.0 + 1e-3 * jnp.arange(int(np.prod(x_shape)), dtype=jnp.float32).reshape(x_shape)
    y = x[:512, :256]
    res = matmul(x, y, block_shape=(256, 256))
    ref = np.asarray(x, np.float64) @ np.asarray(y, np.float64)
    np.testing.assert_allclose(res[::16, ::16], ref[::16, ::16], rtol=2e-6)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.int8])
def test_matmul_dtypes(dtype):
    # int8 accumulates in int32 (x.dtype in [jnp.int8, jnp.int4, ...]: the
    # dtype names the device has not compare unequal), bf16 in float32
    rng = np.random.default_rng(4)
    if dtype == jnp.int8:
        x = rng.integers(-128, 128, (256, 512)).astype(np.int8)
        y = rng.integers(-128, 128, (512, 256)).astype(np.int8)
        out = matmul(x, y, block_shape=(128, 128), out_dtype=jnp.int32)
        np.testing.assert_array_equal(out, x.astype(np.int64) @ y.astype(np.int64))
    else:
        x = jnp.asarray(rng.standard_normal((256, 512)), dtype=jnp.bfloat16)
        y = jnp.asarray(rng.standard_normal((512, 256)), dtype=jnp.bfloat16)
        out = matmul(x, y, block_shape=(128, 128))
        assert out.dtype == jnp.bfloat16
        ref = np.asarray(x, np.float64) @ np.asarray(y, np.float64)
        np.testing.assert_allclose(np.asarray(out, np.float32), ref, rtol=1e-2, atol=1e-1)
