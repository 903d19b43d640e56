# SPDX-License-Identifier: MIT
"""lax.fori_loop, pl.run_scoped, lax.dot_general, jax.nn, shared values,
the .npy helpers: what they trace to, what they compute, how they fail."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu
from tpuemu._lib import ffi, lib, check, device


def _x(shape=(8, 128), seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def _call(kernel, *args, out=None, **kw):
    out = out or jax.ShapeDtypeStruct(args[0].shape, args[0].dtype)
    f = pl.pallas_call(kernel, out_shape=out, **kw)
    return f(*args), f.statements


# --- lax.fori_loop ---

def test_fori_loop_unrolls_static_bounds():
    def k(x_ref, o_ref):
        def body(i, acc):
            return acc + x_ref.at[pl.ds(i * 8, 8)][...] * float(i + 1)
        o_ref[...] = lax.fori_loop(0, 4, body, jnp.zeros_like(o_ref))

    x = _x((32, 128), 1)
    r, st = _call(k, x, out=jax.ShapeDtypeStruct((8, 128), np.float32))
    assert len(st) == 1 and st[0].count("x_ref.at[pl.ds(") == 4
    assert "x_ref.at[pl.ds(24, 8)][...]" in st[0]
    want = sum(x[8 * i:8 * i + 8] * (i + 1) for i in range(4))
    np.testing.assert_allclose(r, want, rtol=1e-6)


def test_fori_loop_stores_in_body_and_numpy_bounds():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...]

        def body(i, carry):
            o_ref[...] += 1.0
            return carry
        lax.fori_loop(np.int32(1), np.int64(3), body, None)

    x = _x(seed=2)
    r, st = _call(k, x)
    assert st == ["o_ref[...] = x_ref[...]", "o_ref[...] += 1.0", "o_ref[...] += 1.0"]
    np.testing.assert_array_equal(r, (x + np.float32(1)) + np.float32(1))


def test_fori_loop_array_bound_names_the_line():
    def k(x_ref, o_ref):
        o_ref[...] = lax.fori_loop(0, x_ref[...], lambda i, v: v, x_ref[...])  # this line

    with pytest.raises(pl.TraceError) as e:
        _call(k, _x())
    msg = str(e.value)
    assert "the upper bound (x_ref[...]) is an array" in msg
    assert "test_constructs.py" in msg and "# this line" in msg


def test_fori_loop_bad_bound_type():
    with pytest.raises(pl.TraceError, match="lower bound must be an int"):
        lax.fori_loop(0.5, 2, lambda i, v: v, 0)


# --- pl.run_scoped ---

def test_run_scoped_vmem_and_result():
    def k(x_ref, o_ref):
        def body(buf):
            buf[...] = x_ref[...] * 2.0
            o_ref[...] = buf[...] + 1.0
            return "result"
        assert pl.run_scoped(body, pltpu.VMEM((8, 128), jnp.float32)) == "result"

    x = _x(seed=3)
    r, st = _call(k, x)
    assert st == ["@pl.run_scoped(buf=pltpu.VMEM((8, 128), jnp.float32))",
                  "buf[...] = (x_ref[...] * 2.0)", "o_ref[...] = (buf[...] + 1.0)",
                  "end_scoped(buf)"]
    np.testing.assert_allclose(r, x * 2 + 1, rtol=1e-6)


def test_run_scoped_keywords_and_semaphore_copy():
    # the pipelining guide's scoped copy: an HBM input copied into a
    # scoped VMEM buffer with a scoped DMA semaphore
    def k(x_hbm, o_ref):
        def body(buf, sem):
            c = pltpu.make_async_copy(x_hbm.at[pl.ds(pl.program_id(0) * 8, 8)], buf, sem)
            c.start()
            c.wait()
            o_ref[...] = buf[...] * 3.0
        pl.run_scoped(body, buf=pltpu.VMEM((8, 128), jnp.float32),
                      sem=pltpu.SemaphoreType.DMA)

    x = _x((16, 128), 4)
    r, st = _call(k, x, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                  out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), grid=(2,))
    assert st[0] == "@pl.run_scoped(buf=pltpu.VMEM((8, 128), jnp.float32))"
    assert st[1] == "@pl.run_scoped(sem=pltpu.SemaphoreType.DMA)"
    assert st[-2:] == ["end_scoped(sem)", "end_scoped(buf)"]
    np.testing.assert_allclose(r, x * 3.0, rtol=1e-6)


def test_run_scoped_in_a_loop_reuses_the_name():
    def k(x_ref, o_ref):
        o_ref[...] = jnp.zeros_like(o_ref)

        def step(i, carry):
            def body(tmp):
                tmp[...] = x_ref[...] * float(i)
                o_ref[...] += tmp[...]
            pl.run_scoped(body, pltpu.VMEM((8, 128), jnp.float32))
            return carry
        lax.fori_loop(0, 3, step, 0)

    x = _x(seed=5)
    r, st = _call(k, x)
    assert st.count("end_scoped(tmp)") == 3
    np.testing.assert_allclose(r, x * 3.0, rtol=1e-6)


def test_run_scoped_bad_type():
    def k(x_ref, o_ref):
        pl.run_scoped(lambda buf: None, (8, 128))

    with pytest.raises(pl.TraceError, match="'buf' must be pltpu.VMEM"):
        _call(k, _x())


def test_run_scoped_name_is_scoped():
    # the scratch is gone after the body: libtpurt refuses it, naming the line
    held = {}

    def k(x_ref, o_ref):
        def body(buf):
            held["buf"] = buf
        pl.run_scoped(body, pltpu.VMEM((8, 128), jnp.float32))
        o_ref[...] = held["buf"][...] + 1.0  # after the scope

    with pytest.raises(pl.TraceError) as e:
        _call(k, _x())
    assert "buf" in str(e.value) and "# after the scope" in str(e.value)


# --- lax.dot_general and jax.nn ---

@pytest.mark.parametrize("dims,tl,tr", [
    ((((1,), (0,)), ((), ())), False, False),
    ((((1,), (1,)), ((), ())), False, True),
    ((((0,), (0,)), ((), ())), True, False),
    ((((0,), (1,)), ((), ())), True, True),
])
def test_dot_general_contraction_dims(dims, tl, tr):
    def k(x_ref, y_ref, o_ref):
        o_ref[...] = lax.dot_general(x_ref[...], y_ref[...], dims,
                                     preferred_element_type=jnp.float32)

    x, y = _x((128, 128), 6), _x((128, 128), 7)
    r, st = _call(k, x, y)
    assert st[0] == "o_ref[...] = jnp.dot(x_ref[...]%s, y_ref[...]%s, " \
        "preferred_element_type=jnp.float32)" % (".T" if tl else "", ".T" if tr else "")
    want = (x.T if tl else x) @ (y.T if tr else y)
    np.testing.assert_allclose(r, want, rtol=1e-4, atol=1e-4)


def test_dot_general_batch_dims_refused():
    def k(x_ref, o_ref):
        o_ref[...] = lax.dot_general(x_ref[...], x_ref[...], (((1,), (0,)), ((0,), (0,))))

    with pytest.raises(pl.TraceError, match="batch dimensions"):
        _call(k, _x((128, 128)))


@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh", "silu"])
def test_nn_activations(name):
    fn = getattr(jax.nn, name)

    def k(x_ref, o_ref):
        o_ref[...] = fn(x_ref[...])

    x = _x(seed=8)
    r, st = _call(k, x)
    assert st == ["o_ref[...] = jax.nn.%s(x_ref[...])" % name]
    sig = 1 / (1 + np.exp(-x))
    want = {"relu": np.maximum(x, 0), "sigmoid": sig, "tanh": np.tanh(x), "silu": x * sig}[name]
    np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-6)


def test_broadcasted_iota_and_where():
    def k(x_ref, o_ref):
        rows = lax.broadcasted_iota(jnp.int32, (8, 128), 0)
        cols = lax.broadcasted_iota(jnp.int32, (8, 128), 1)
        o_ref[...] = jnp.where(cols <= rows, x_ref[...], 0.0)

    x = _x(seed=9)
    r, _ = _call(k, x)
    np.testing.assert_array_equal(r, np.where(np.tril(np.ones((8, 128), bool)), x, 0))


# --- values used twice are computed once ---

def test_held_value_is_bound_once():
    def k(x_ref, o_ref, t_ref):
        s = jnp.exp(x_ref[...] * 0.5)			# held: used twice
        t_ref[...] = s + 1.0
        o_ref[...] = s * jnp.sum(s, axis=1, keepdims=True) + t_ref[...]

    x = _x(seed=10)
    r, st = _call(k, x, scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)])
    assert st[0] == "_v1 = jnp.exp((x_ref[...] * 0.5))"
    assert st[1:] == ["t_ref[...] = (_v1 + 1.0)",
                      "o_ref[...] = ((_v1 * jnp.sum(_v1, axis=1, keepdims=True)) + t_ref[...])"]
    s = np.exp(x * 0.5)
    np.testing.assert_allclose(r, s * s.sum(axis=1, keepdims=True) + s + 1, rtol=1e-5)


def test_temporaries_stay_inline():
    def k(x_ref, o_ref):
        o_ref[...] = jnp.exp(x_ref[...] * 0.5) + 1.0

    _, st = _call(k, _x(seed=11))
    assert st == ["o_ref[...] = (jnp.exp((x_ref[...] * 0.5)) + 1.0)"]


def test_shared_value_bound_inside_its_when():
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...]

        @pl.when(pl.program_id(0) == 1)
        def _():
            s = jnp.exp(x_ref[...])
            o_ref[...] = s + s * 2.0

    x = _x((16, 128), 12)
    f = pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), grid=(2,))
    r = f(x)
    assert f.statements[1] == "pl.when((pl.program_id(0) == 1)): _v1 = jnp.exp(x_ref[...])"
    want = x.copy()
    want[8:] = np.exp(x[8:]) * 3
    np.testing.assert_allclose(r, want, rtol=1e-5)


# --- .npy helpers ---

def test_npy_bf16_round_trip(tmp_path):
    x = _x(seed=13)
    p = tmp_path / "x.npy"
    jax.save_npy(p, x, dtype=jnp.bfloat16)
    h = jax.load_npy(p, dtype=jnp.bfloat16)
    assert h.dtype == np.uint16
    np.testing.assert_array_equal(h, jax.to_bf16(x))
    with pytest.raises(TypeError, match="holds uint16, not float32"):
        jax.load_npy(p, dtype=jnp.float32)


def test_npy_v2_as_ml_dtypes_writes(tmp_path):
    bits = jax.to_bf16(_x(seed=14))
    p = tmp_path / "v2.npy"
    np.save(p, bits.view("V2"))
    np.testing.assert_array_equal(jax.load_npy(p), bits)


def _c_array(shape, dtype_code):
    ap = ffi.new("struct tpurt_array **")
    check(lib.tpurt_array_create(device(), dtype_code, len(shape),
                                 ffi.new("int64_t[]", list(shape)), ap), "array")
    return ffi.gc(ap[0], lib.tpurt_array_free)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "int8", "int32"])
def test_npy_files_libtpurt_reads_and_writes(tmp_path, dtype):
    # Python writes, libtpurt loads (bf16: '<u2' read as bfloat16); libtpurt
    # saves, Python loads: the same values both ways
    dt = jax.as_dtype(dtype)
    x = _x((4, 128), 15) * 50
    a = jax.to_bf16(x) if dt is jnp.bfloat16 else x.astype(dt.np_name)
    src = str(tmp_path / "py.npy")
    jax.save_npy(src, a, dtype=dt)
    ap = ffi.new("struct tpurt_array **")
    check(lib.tpurt_array_load_npy(device(), src.encode(), dt is jnp.bfloat16, ap), "load")
    arr = ffi.gc(ap[0], lib.tpurt_array_free)
    got = np.empty_like(a)
    check(lib.tpurt_array_read(arr, ffi.from_buffer(got)), "read")
    np.testing.assert_array_equal(got, a)
    out = str(tmp_path / "c.npy")
    check(lib.tpurt_array_save_npy(arr, out.encode()), "save")
    np.testing.assert_array_equal(jax.load_npy(out, dtype=dt), a)
