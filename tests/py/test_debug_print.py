# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
# pl.debug_print: JAX's PallasCallPrintTest (tests/pallas/tpu_pallas_test.py)
# ported (no jax.jit compile options: the runtime writes the lines to
# stderr after the job), and the rest of Pallas's semantics: once per grid
# step in step order (also on two cores), pl.when, several arguments, SMEM
# scratch, floats and bools, vectors, a full print buffer, bad formats.
import os
import subprocess
import sys

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

OUT = jax.ShapeDtypeStruct((8, 128), jnp.float32)
SMEM = pl.BlockSpec(memory_space=pltpu.SMEM)


def lines(capfd):
    return capfd.readouterr().err.splitlines()


def test_debug_print(capfd):
    def kernel(x_ref, o_ref):
        pl.debug_print("It works!")

    x = jnp.arange(8 * 128, dtype=jnp.float32).reshape((8, 128))
    pl.pallas_call(kernel, out_shape=OUT)(x)
    assert "It works!" in capfd.readouterr().err


def test_debug_print_with_values(capfd):
    def kernel(x_ref, o_ref):
        pl.debug_print("x[0] == {}", x_ref[0])

    x = np.array([42, 24], np.int32)
    pl.pallas_call(kernel, in_specs=(SMEM,), out_shape=OUT)(x)
    assert "x[0] == 42" in capfd.readouterr().err


def test_once_per_step_in_step_order(capfd):
    def kernel(x_ref, o_ref):
        pl.debug_print("step {} of {}", pl.program_id(0), pl.num_programs(0))
        o_ref[...] = x_ref[...]

    x = np.ones((32, 128), np.float32)
    pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                   in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                   out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                   grid=(4,))(x)
    assert lines(capfd) == ["step %d of 4" % i for i in range(4)]


_TWO_CORES = r"""
import numpy as np
import tpuemu as jax, tpuemu.numpy as jnp
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu
def kernel(x_ref, o_ref):
    pl.debug_print("i={} j={}", pl.program_id(0), pl.program_id(1))
    o_ref[...] = x_ref[...] + 1
x = np.zeros((64, 256), np.float32)
o = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
    in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, j))],
    out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, j)), grid=(8, 2),
    compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary")))(x)
assert (o == 1).all()
assert jax.last_stats()["cores_used"] == 2, jax.last_stats()
"""


def test_two_cores_print_in_step_order():
    env = dict(os.environ, TPURT_DEVICE="sim:cores=2")
    r = subprocess.run([sys.executable, "-c", _TWO_CORES], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == ["i=%d j=%d" % (i, j) for i in range(8) for j in range(2)]


def test_when_and_several_args(capfd):
    def kernel(x_ref, o_ref, s_ref):
        i = pl.program_id(0)
        s_ref[0] = i * 3

        @pl.when(i % 2 == 1)
        def _():
            pl.debug_print("i={} s={} sum={} x={} c={}", i, s_ref[0], s_ref[0] + i,
                           x_ref[i], 5)

    x = np.array([10, 11, 12, 13], np.int32)
    pl.pallas_call(kernel, out_shape=OUT, grid=(4,),
                   in_specs=[pl.BlockSpec(memory_space=pltpu.SMEM)],
                   out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
                   scratch_shapes=[pltpu.SMEM((1,), jnp.int32)])(x)
    assert lines(capfd) == ["i=1 s=3 sum=4 x=11 c=5", "i=3 s=9 sum=12 x=13 c=5"]


def test_floats_bools_and_braces(capfd):
    def kernel(x_ref, o_ref):
        pl.debug_print("f={} g={} big={} {{braces}} {}", x_ref[0], x_ref[1],
                       x_ref[0] > 1.0, True)

    x = np.array([1.5, 0.1], np.float32)
    pl.pallas_call(kernel, in_specs=(SMEM,), out_shape=OUT)(x)
    assert lines(capfd) == ["f=1.5 g=0.1 big=True {braces} True"]


def test_integer_compares_print_as_bools(capfd):
    def kernel(x_ref, o_ref):
        pl.debug_print("{} {}", x_ref[0] == 42, pl.program_id(0) != 0)

    pl.pallas_call(kernel, in_specs=(SMEM,), out_shape=OUT)(np.array([42, 1], np.int32))
    assert lines(capfd) == ["True False"]


def test_vectors(capfd):
    def kernel(x_ref, o_ref):
        pl.debug_print("x = {}", x_ref[...])
        pl.debug_print("row = {}", x_ref[1, :4])
        o_ref[...] = x_ref[...]

    x = np.arange(16, dtype=np.int32).reshape(2, 8)
    pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    assert lines(capfd) == ["x = [[0 1 2 3 4 5 6 7]", " [8 9 10 11 12 13 14 15]]",
                            "row = [8 9 10 11]"]


def test_computed_float_vector(capfd):
    def kernel(x_ref, o_ref):
        pl.debug_print("{}", x_ref[...] * 0.5)

    x = np.array([[1.0, 3.0, -5.0]], np.float32)
    pl.pallas_call(kernel, out_shape=OUT)(x)
    assert lines(capfd) == ["[0.5 1.5 -2.5]"]


def test_unrolled_loop_index_is_in_the_format(capfd):
    def kernel(x_ref, o_ref):
        for i in range(3):
            pl.debug_print("i={} x={}", i, x_ref[i])

    pl.pallas_call(kernel, in_specs=(SMEM,), out_shape=OUT)(np.array([7, 8, 9], np.int32))
    assert lines(capfd) == ["i=0 x=7", "i=1 x=8", "i=2 x=9"]


def test_full_buffer_counts_dropped(capfd, monkeypatch):
    # 32 header bytes and two 64-byte records (56 + one value)
    monkeypatch.setenv("TPURT_PRINT_BUFFER", "160")

    def kernel(x_ref, o_ref):
        pl.debug_print("{}", pl.program_id(0))

    pl.pallas_call(kernel, out_shape=OUT, grid=(5,),
                   out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)))(
                       np.zeros((8, 128), np.float32))
    out = lines(capfd)
    assert out[:2] == ["0", "1"]
    assert out[2].startswith("libtpurt: debug_print: 3 records dropped")


def test_bad_formats_are_refused():
    def more_fields(x_ref, o_ref):
        pl.debug_print("{} and {}", x_ref[0])

    with pytest.raises(pl.TraceError, match=r"'\{\} and \{\}'.*2 \{\} placeholders for 1 argument"):
        pl.pallas_call(more_fields, in_specs=(SMEM,), out_shape=OUT)(np.zeros(2, np.int32))

    def named(x_ref, o_ref):
        pl.debug_print("{x}", x_ref[0])

    with pytest.raises(pl.TraceError, match=r"only \{\} placeholders"):
        pl.pallas_call(named, in_specs=(SMEM,), out_shape=OUT)(np.zeros(2, np.int32))

    def not_a_value(x_ref, o_ref):
        pl.debug_print("{}", "text")

    with pytest.raises(pl.TraceError, match="cannot print 'text'"):
        pl.pallas_call(not_a_value, in_specs=(SMEM,), out_shape=OUT)(np.zeros(2, np.int32))


def test_floats_print_as_python_reprs(capfd):
    # %g's shortest digits alone printed 10.0 as 1e+01; repr places them
    def kernel(x_ref, o_ref):
        pl.debug_print("{}", x_ref[...])

    x = np.array([[10.0, 20.0, 1e15, 1.5e10, 1e16, 1.5e-5, 1e-4, 100.25, -2.5, 0.1]], np.float32)
    pl.pallas_call(kernel, out_shape=OUT)(x)
    want = " ".join(repr(float(str(v))) for v in x[0])	# NumPy's shortest float32 digits
    assert lines(capfd) == ["[%s]" % want]


def test_scalars_after_a_format_without_placeholders(capfd):
    # TPU's log: a format without {} gets its scalars after it, XLA style
    def kernel(x_ref, f_ref, o_ref):
        pl.debug_print("v: ", x_ref[0], f_ref[0], x_ref[0] > 1, 7, 0.5)

    pl.pallas_call(kernel, in_specs=[SMEM, SMEM], out_shape=OUT)(
        np.array([3], np.int32), np.array([1.5], np.float32))
    assert lines(capfd) == ["v: s32[] 3 f32[] 1.5 pred[] True s32[] 7 f32[] 0.5"]


def test_index_map_prints_once_per_step(capfd):
    def index_map(i):
        pl.debug_print("map")
        return (i, 0)

    x = np.zeros((16, 128), np.float32)
    pl.pallas_call(lambda x_ref, o_ref: None, grid=(2,),
                   in_specs=[pl.BlockSpec((8, 128), index_map)],
                   out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                   out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    assert lines(capfd) == ["map", "map"]

    def traced(i):
        pl.debug_print("i={}", i)
        return (i, 0)

    with pytest.raises(pl.TraceError, match="in an index map"):
        pl.pallas_call(lambda x_ref, o_ref: None, grid=(2,),
                       in_specs=[pl.BlockSpec((8, 128), traced)],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                       out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
