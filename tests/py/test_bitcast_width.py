# SPDX-License-Identifier: MIT
"""pltpu.bitcast and ref.bitcast between dtypes of two widths, as a TPU
packs them: the second-to-last dimension scales by the width ratio, word
row i holding narrow rows r*i .. r*i + r - 1 (the first in the low bytes).
The reference is NumPy's bytes arranged that way (the formula of JAX's
test_store_bitcasted_ref)."""
import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import lax
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

_NP = {jnp.int8: np.int8, jnp.uint8: np.uint8, jnp.int32: np.int32, jnp.uint32: np.uint32,
       jnp.float32: np.float32, jnp.bfloat16: np.uint16}


def _pack(a, to):
    """NumPy: narrow rows packed into words of @to, as pltpu.bitcast."""
    to = np.dtype(to)
    r = to.itemsize // a.dtype.itemsize
    b = a.reshape(a.shape[0] // r, r, a.shape[1]).transpose(0, 2, 1).copy()
    return b.view(to)[..., 0]


def _unpack(a, to):
    to = np.dtype(to)
    r = a.dtype.itemsize // to.itemsize
    b = a[..., None].copy().view(to)		# (R, C, r): the word's parts, low first
    return b.transpose(0, 2, 1).reshape(a.shape[0] * r, a.shape[1])


def _bits(shape, dtype, seed):
    raw = np.random.default_rng(seed).integers(0, 256, int(np.prod(shape)) *
                                               np.dtype(dtype).itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def _quiet(a, dt):
    """@a (bits of float dtype @dt) with signalling NaNs made quiet: the
    device's float stores (o_ref[...] = v of float32 or bfloat16) quiet
    them, as its arithmetic does, where a TPU's vector stores keep them;
    the bitcast itself moves bits untouched (integer ends show it)."""
    if dt not in (jnp.float32, jnp.bfloat16):
        return a
    u = a.view(np.uint32 if dt == jnp.float32 else np.uint16).copy()
    exp, quiet = (0x7F800000, 0x00400000) if dt == jnp.float32 else (0x7F80, 0x0040)
    man = (0x007FFFFF if dt == jnp.float32 else 0x007F)
    snan = ((u & exp) == exp) & ((u & man) != 0) & ((u & quiet) == 0)
    u[snan] |= quiet
    return u.view(a.dtype)


@pytest.mark.parametrize("frm,to", [(jnp.bfloat16, jnp.int32), (jnp.bfloat16, jnp.float32),
                                    (jnp.int8, jnp.int32), (jnp.uint8, jnp.uint32),
                                    (jnp.int8, jnp.bfloat16), (jnp.int32, jnp.bfloat16),
                                    (jnp.float32, jnp.int8), (jnp.bfloat16, jnp.uint8)],
                         ids=lambda d: d.name)
def test_value_bitcast_any_bits(frm, to):
    """Every bit pattern (NaN payloads and signalling NaNs included) comes
    through: the DMA engine moves bytes, no float conversion happens."""
    fs, ts = np.dtype(_NP[frm]).itemsize, np.dtype(_NP[to]).itemsize
    shape = (32 * fs // ts, 256)
    # any bits, but no signalling NaN at a float output (see _quiet)
    want = _quiet(_bits(shape, _NP[to], 7), to)
    x = pltpu.bitcast(want, frm)
    assert x.shape == (32, 256) and x.dtype == _NP[frm]
    seen = []

    def kernel(x_ref, o_ref):
        y = pltpu.bitcast(x_ref[...], to)
        seen.append((y.shape, y.dtype))
        o_ref[...] = y

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shape, to))(x)
    np.testing.assert_array_equal(want, _pack(x, _NP[to]) if ts > fs else _unpack(x, _NP[to]))
    np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8))
    assert seen == [(shape, to)]


def test_round_trip_of_computed_values():
    """Arithmetic on the words between two bitcasts, as kernels pack pairs:
    swapping the halves of each word swaps each pair of bf16 rows."""
    x = _quiet(_bits((16, 128), np.uint16, 3), jnp.bfloat16)

    def kernel(x_ref, o_ref):
        w = pltpu.bitcast(x_ref[...], jnp.uint32)
        swapped = (w << 16) | lax.shift_right_logical(w, jnp.uint32(16) + w * 0)
        o_ref[...] = pltpu.bitcast(swapped, jnp.bfloat16)

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 128), jnp.bfloat16))(x)
    np.testing.assert_array_equal(y.view(np.uint16),
                                  x.reshape(8, 2, 128)[:, ::-1].reshape(16, 128))


@pytest.mark.parametrize("slice_first", [True, False])
def test_ref_bitcast_windows_int8_into_int32(slice_first):
    """int8 rows stored through an int32 output seen as int8 (four rows a
    word), a window of it at word rows 2..4, as JAX's store_bitcasted_ref."""
    x = np.random.default_rng(1).integers(-128, 128, (8, 128)).astype(np.int8)

    def kernel(x_ref, y_ref):
        y_ref[...] = jnp.zeros_like(y_ref)
        ref = (y_ref.at[2:4, :].bitcast(jnp.int8) if slice_first
               else y_ref.bitcast(jnp.int8).at[8:16, :])
        assert ref.shape == (8, 128) and ref.dtype == jnp.int8
        ref[...] = x_ref[...]

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32))(x)
    want = np.zeros((8, 128), np.int32)
    want[2:4] = _pack(x, np.int32)
    np.testing.assert_array_equal(y, want)


def test_ref_bitcast_read_wide_view_of_narrow():
    """A bf16 input read as uint32 words (half the rows); a window of it is
    first stored into a temporary, a float store (see _quiet)."""
    x = _quiet(_bits((16, 128), np.uint16, 5), jnp.bfloat16)

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref.bitcast(jnp.uint32)[4:8, :]

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 128), jnp.uint32))(x)
    np.testing.assert_array_equal(y, _pack(x, np.uint32)[4:8])


def test_host_bitcast_matches():
    """pltpu.bitcast of a NumPy array (outside a kernel) packs the same way."""
    x = _bits((8, 128), np.int8, 2)
    np.testing.assert_array_equal(pltpu.bitcast(x, jnp.int32), _pack(x, np.int32))
    w = _bits((4, 128), np.int32, 4)
    np.testing.assert_array_equal(pltpu.bitcast(w, jnp.uint8), _unpack(w, np.uint8))


def test_errors_name_the_shape():
    def rows_odd(x_ref, o_ref):
        o_ref[...] = pltpu.bitcast(x_ref[...], jnp.int32)

    with pytest.raises(pl.TraceError, match=r"second-to-last dimension \(3\)"):
        pl.pallas_call(rows_odd, out_shape=jax.ShapeDtypeStruct((1, 128), jnp.int32))(
            np.zeros((3, 128), np.int8))

    def window_rows(x_ref, o_ref):
        o_ref.bitcast(jnp.bfloat16)[1:3, :] = x_ref[...]

    with pytest.raises(pl.TraceError, match="not whole int32 rows"):
        pl.pallas_call(window_rows, out_shape=jax.ShapeDtypeStruct((4, 128), jnp.int32))(
            np.zeros((2, 128), np.uint16))

    def lax_width(x_ref, o_ref):
        o_ref[...] = lax.bitcast_convert_type(x_ref[...], jnp.int32)

    with pytest.raises(pl.TraceError, match="trailing dimension"):
        pl.pallas_call(lax_width, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32))(
            np.zeros((16, 128), np.int8))

    def of_bool(x_ref, o_ref):
        o_ref[...] = pltpu.bitcast(x_ref[...] > 0, jnp.int8)

    with pytest.raises(pl.TraceError, match="bool has no bits"):
        pl.pallas_call(of_bool, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int8))(
            np.zeros((8, 128), np.int8))


@pytest.mark.parametrize("frm,to", [(jnp.int8, jnp.bfloat16), (jnp.int32, jnp.bfloat16),
                                    (jnp.bfloat16, jnp.float32), (jnp.uint8, jnp.float32)],
                         ids=lambda d: d.name)
def test_bitcast_stored_whole_keeps_signalling_nans(frm, to):
    """o_ref[...] = pltpu.bitcast(...) into a float ref: the last copy
    lands in the ref itself, so even signalling-NaN patterns keep their
    bits (no float store on the way)."""
    fs, ts = np.dtype(_NP[frm]).itemsize, np.dtype(_NP[to]).itemsize
    shape = (32 * fs // ts, 128)
    want = _bits(shape, _NP[to], 11)
    snan = np.uint32(0x7F800001) if to == jnp.float32 else np.uint16(0x7F81)
    want.reshape(-1)[:5] = snan
    x = pltpu.bitcast(want, frm)

    def kernel(x_ref, o_ref):
        o_ref[...] = pltpu.bitcast(x_ref[...], to)

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(shape, to))(x)
    np.testing.assert_array_equal(y.view(np.uint8), want.view(np.uint8))


def test_rank3_value_packs_each_slice():
    # a leading dimension's slices each pack their own rows, as JAX's
    # bf16 (16, 2, 256) -> uint32 (16, 1, 256); it was refused as one tile
    x = _quiet(_bits((16, 2, 256), np.uint16, 7), jnp.bfloat16)

    def kernel(x_ref, o_ref):
        o_ref[...] = pltpu.bitcast(x_ref[...], jnp.uint32)

    out = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((16, 1, 256), jnp.uint32))(x)
    want = np.stack([_pack(b, np.uint32) for b in x])
    np.testing.assert_array_equal(out, want)


def test_bitcast_of_a_window_of_a_value():
    # a window of a computed value, bitcast to another width: libtpurt
    # packs its rows by a strided read, so the window is bound first (it
    # was refused as "text after ']'")
    x = _quiet(_bits((16, 256), np.uint16, 9), jnp.bfloat16)

    def kernel(x_ref, o_ref):
        v = x_ref[...]
        o_ref[...] = pltpu.bitcast(v[:, :128][0:8], jnp.uint32)

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 128), jnp.uint32))(x)
    np.testing.assert_array_equal(y, _pack(x[:8, :128], np.uint32))


@pytest.mark.parametrize("held", [jnp.int16, jnp.uint16], ids=lambda d: d.name)
def test_int16_of_rank3_words_and_back(held):
    # int16 (held in int32 words) of a 3-D value: every leading index packs
    # its own rows, as pltpu.bitcast's; and back to the same words
    w = _bits((4, 8, 128), np.int32, 13)

    def kernel(w_ref, h_ref, back_ref):
        h = pltpu.bitcast(w_ref[...], held)
        assert h.shape == (4, 16, 128) and h.dtype == held
        h_ref[...] = h
        back_ref[...] = pltpu.bitcast(h, jnp.int32)

    h, back = pl.pallas_call(kernel, out_shape=(
        jax.ShapeDtypeStruct((4, 16, 128), held),
        jax.ShapeDtypeStruct((4, 8, 128), jnp.int32)))(w)
    want = np.stack([_unpack(b, np.int16 if held == jnp.int16 else np.uint16) for b in w])
    np.testing.assert_array_equal(h, want)
    np.testing.assert_array_equal(back, w)


@pytest.mark.parametrize("into_view", [False, True])
def test_dma_through_a_bitcast_view(into_view):
    """A copy whose source (or destination) is a bitcast view of an HBM
    ref moves the view's values: bf16 rows packed into int32 words, as
    pltpu.bitcast packs them, and the DMA's wait still counts."""
    x = _quiet(_bits((16, 128), np.uint16, 17), jnp.bfloat16)
    w = _pack(x, np.int32)

    def kernel(x_hbm, y_hbm):
        def body(sem):
            if into_view:
                copy = pltpu.make_async_copy(x_hbm, y_hbm.bitcast(jnp.bfloat16), sem)
            else:
                copy = pltpu.make_async_copy(x_hbm.at[...].bitcast(jnp.int32), y_hbm, sem)
            copy.start()
            copy.wait()
        pl.run_scoped(body, pltpu.SemaphoreType.DMA)

    y = pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY),
                       out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32))(x)
    np.testing.assert_array_equal(y, w)


def test_chained_view_reads_and_refuses_stores():
    """ref.bitcast(...).reshape(...) and further transforms read the
    transforms of the ref's value; a store through the chain is refused."""
    x = np.arange(16 * 128, dtype=np.int32).reshape(16, 128) * 65599

    def kernel(x_ref, o_ref):
        view = x_ref.bitcast(jnp.int16).reshape(2, 16, 128).at[1]
        assert view.shape == (16, 128) and view.dtype == jnp.int16
        o_ref[...] = view.bitcast(jnp.int32)[...]

    y = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32))(x)
    np.testing.assert_array_equal(y, x[8:])

    def store(x_ref, o_ref):
        o_ref.bitcast(jnp.int16).reshape(2, 8, 128)[...] = jnp.zeros((2, 8, 128), jnp.int16)

    with pytest.raises(pl.TraceError, match="a store through this chain"):
        pl.pallas_call(store, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32))(x)


def test_whole_window_is_a_copy_operand():
    # ref.at[...] names the whole ref, as a copy's operand too
    x = _bits((8, 128), np.int32, 19)

    def kernel(x_hbm, y_hbm):
        def body(sem):
            pltpu.async_copy(x_hbm.at[...], y_hbm.at[...], sem).wait()
        pl.run_scoped(body, pltpu.SemaphoreType.DMA)

    y = pl.pallas_call(kernel, in_specs=[pl.BlockSpec(memory_space=pl.ANY)],
                       out_specs=pl.BlockSpec(memory_space=pl.ANY),
                       out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32))(x)
    np.testing.assert_array_equal(y, x)
