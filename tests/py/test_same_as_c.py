# SPDX-License-Identifier: MIT
"""The Python samples' kernels give, bit for bit, what the same kernels
written in C give: the builder calls of samples/block_sparse.c, and
tpurt_matmul's template (transpose_rhs, activation, x_fusion) that
samples/matmul_transpose_rhs.c, matmul_activation.c and
matmul_input_fusion.c run."""
import importlib.util
import os

import numpy as np
import pytest

import tpuemu as jax
from tpuemu._lib import ffi, lib, check, device

ffi.cdef("""
int tpurt_grid_spec_add_scalar_prefetch(struct tpurt_grid_spec *gs, const char *name);
int tpurt_kernel_zero(struct tpurt_kernel *k, const char *dst);
int tpurt_kernel_dot(struct tpurt_kernel *k, const char *dst, const char *lhs,
                     const char *rhs, unsigned int flags);
struct tpurt_input_fusion {
    int enabled; int dtype; int fn; int op; int operand; float scalar;
    struct tpurt_array *columns;
};
struct tpurt_matmul_opts {
    int64_t bm, bk, bn;
    int transpose_lhs, transpose_rhs;
    int activation;
    struct tpurt_array *bias;
    float out_scale;
    struct tpurt_input_fusion x_fusion, y_fusion;
    uint64_t vmem_limit_bytes;
    unsigned int flags;
    uint32_t timeout_ms;
};
int tpurt_matmul(struct tpurt_array *x, struct tpurt_array *y, struct tpurt_array *out,
                 const struct tpurt_matmul_opts *opts, struct tpurt_job_stats *stats);
""")
F32, BF16, INT8, INT32 = 0, 1, 2, 4		# enum tpurt_dtype
RELU, MUL, FUSE_COLUMNS = 1, 2, 2		# tpurt_unary, tpurt_binary, tpurt_fusion_operand
DOT_ACCUMULATE = 1

SAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "py")


def sample(name):
    spec = importlib.util.spec_from_file_location("sample_" + name,
                                                  os.path.join(SAMPLES, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def array(a, code):
    ap = ffi.new("struct tpurt_array **")
    check(lib.tpurt_array_create(device(), code, a.ndim, ffi.new("int64_t[]", list(a.shape)), ap),
          "array")
    h = ffi.gc(ap[0], lib.tpurt_array_free)
    check(lib.tpurt_array_write(h, ffi.from_buffer(np.ascontiguousarray(a))), "write")
    return h


def read(h, like):
    r = np.empty_like(like)
    check(lib.tpurt_array_read(h, ffi.from_buffer(r)), "read")
    return r


def test_block_sparse_as_block_sparse_c():
    bs = sample("block_sparse")
    b = bs.B
    rows = np.array([2, 0, 1], dtype=np.int32)
    mask = np.array([[1, 0], [0, 0], [1, 1]], dtype=np.int32)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3 * b, 2 * b), dtype=np.float32)
    y = rng.standard_normal((2 * b, b), dtype=np.float32)
    z_py = bs.block_sparse_matmul(rows, mask, x, y)

    # samples/block_sparse.c's builder calls
    gp = ffi.new("struct tpurt_grid_spec **")
    check(lib.tpurt_grid_spec_create(3, ffi.new("int64_t[]", [3, 1, 2]), gp), "grid")
    gs = ffi.gc(gp[0], lib.tpurt_grid_spec_free)
    keep = []

    def spec(index_map):
        s = ffi.new("struct tpurt_block_spec *")
        s.rank, s.shape[0], s.shape[1] = 2, b, b
        keep.append(ffi.new("char[]", index_map.encode()))
        s.index_map = keep[-1]
        keep.append(s)
        return s
    check(lib.tpurt_grid_spec_add_scalar_prefetch(gs, b"rows"), "rows")
    check(lib.tpurt_grid_spec_add_scalar_prefetch(gs, b"mask"), "mask")
    check(lib.tpurt_grid_spec_add_input(gs, b"x", spec("i, j, k, rows, mask -> rows[i], k")), "x")
    check(lib.tpurt_grid_spec_add_input(gs, b"y", spec("i, j, k -> k, j")), "y")
    check(lib.tpurt_grid_spec_add_output(gs, b"z", spec("i, j, k -> i, j")), "z")
    kp = ffi.new("struct tpurt_kernel **")
    check(lib.tpurt_kernel_create(kp), "kernel")
    k = ffi.gc(kp[0], lib.tpurt_kernel_free)
    for rc in (lib.tpurt_kernel_when(k, b"k == 0"), lib.tpurt_kernel_zero(k, b"z"),
               lib.tpurt_kernel_end_when(k),
               lib.tpurt_kernel_when(k, b"mask[i * num_programs(k) + k] != 0"),
               lib.tpurt_kernel_dot(k, b"z", b"x", b"y", DOT_ACCUMULATE),
               lib.tpurt_kernel_end_when(k)):
        check(rc, "kernel")
    cp = ffi.new("struct tpurt_compiler_params *")
    sem = ffi.new("char[]", b"parallel, parallel, arbitrary")
    cp.dimension_semantics = sem
    z = np.zeros((3 * b, b), np.float32)
    args = [array(rows, INT32), array(mask.reshape(-1), INT32), array(x, F32), array(y, F32),
            array(z, F32)]
    st = ffi.new("struct tpurt_job_stats *")
    check(lib.tpurt_pallas_call(k, gs, cp, ffi.new("struct tpurt_array *[]", args), 5, st),
          "pallas_call")
    np.testing.assert_array_equal(z_py, read(args[4], z))


def _code(a):
    return {np.dtype(np.int8): INT8, np.dtype(np.uint16): BF16}.get(a.dtype, F32)


def _tpurt_matmul(x, y, out_like, opts):
    hx, hy, hz = array(x, _code(x)), array(y, _code(y)), array(out_like, _code(out_like))
    st = ffi.new("struct tpurt_job_stats *")
    check(lib.tpurt_matmul(hx, hy, hz, opts, st), "tpurt_matmul")
    return read(hz, out_like)


def test_first_kernel_as_tpurt_matmul():
    """The guide's first kernel (f32, 128 blocks) and tpurt_matmul on the
    same blocks add the same products in the same order, whatever GEMM
    kernels the host's BLAS picks."""
    m = sample("matmul")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((256, 512), dtype=np.float32)
    y = rng.standard_normal((512, 256), dtype=np.float32)
    o = ffi.new("struct tpurt_matmul_opts *")
    o.bm = o.bk = o.bn = 128
    np.testing.assert_array_equal(m.matmul(x, y), _tpurt_matmul(x, y, np.zeros((256, 256), np.float32), o))


@pytest.mark.parametrize("transpose_rhs", [False, True])
@pytest.mark.parametrize("relu", [False, True])
def test_fused_template_as_tpurt_matmul(transpose_rhs, relu):
    mf = sample("matmul_fused")
    rng = np.random.default_rng(2)
    x = jax.to_bf16(rng.standard_normal((256, 384), dtype=np.float32))
    y = jax.to_bf16(rng.standard_normal((384, 128), dtype=np.float32))	# (k, n)
    z_py = mf.matmul(x, y, transpose_rhs=transpose_rhs,
                     activation=jax.nn.relu if relu else (lambda v: v))
    o = ffi.new("struct tpurt_matmul_opts *")
    o.bm = o.bk = o.bn = 128
    o.transpose_rhs = transpose_rhs
    o.activation = RELU if relu else 0
    z_c = _tpurt_matmul(x, np.ascontiguousarray(y.T) if transpose_rhs else y,
                        np.zeros((256, 128), np.uint16), o)
    np.testing.assert_array_equal(jax.to_bf16(z_py), z_c)	# z_py: a host bf16 array


def test_input_fusion_as_tpurt_matmul():
    mi = sample("matmul_input_fusion")
    rng = np.random.default_rng(3)
    q = rng.integers(-8, 8, (256, 256), dtype=np.int8)
    scale = ((1 + np.arange(256) % 8) / 64).astype(np.float32)
    y = jax.to_bf16(rng.standard_normal((256, 128), dtype=np.float32))
    z_py = mi.fused_matmul(q, scale, y)
    o = ffi.new("struct tpurt_matmul_opts *")
    o.bm = o.bk = o.bn = 128
    cols = array(scale, F32)
    o.x_fusion.enabled, o.x_fusion.dtype, o.x_fusion.op = 1, BF16, MUL
    o.x_fusion.operand, o.x_fusion.columns = FUSE_COLUMNS, cols
    np.testing.assert_array_equal(z_py, _tpurt_matmul(q, y, np.zeros((256, 128), np.float32), o))
