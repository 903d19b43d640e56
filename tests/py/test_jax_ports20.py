# SPDX-License-Identifier: MIT AND Apache-2.0
# Transcribes code from JAX (https://github.com/jax-ml/jax), Copyright
# The JAX Authors, under the Apache License 2.0 (LICENSES/Apache-2.0);
# changed as the docstring or the comments below say.
"""Port of JAX's tests/pallas/pallas_error_handling_test.py: a kernel the
TPU compiler refuses raises error_handling.MosaicError (VerificationError
for what MLIR's verifier refuses) whose traceback ends with the kernel's
source line, also under jax.jit; parse_location_string reads an MLIR
location. error_handling is imported from tpuemu._src.pallas.mosaic, as
JAX's test imports it from jax._src.pallas.mosaic.

The two kernels JAX's test uses run on tpuemu: Mosaic refuses a scalar
taken from a vector at a nonzero index ("Not implemented: Only 0 indices
supported for scalar results") and Pallas lowers a VMEM element read
stored into an SMEM element to a memref.store MLIR's verifier refuses
(JAX's test calls both guards against changes in Mosaic and Pallas);
libtpurt compiles both. Their results are checked as they are
(test_*_runs). The error contract is then checked on the nearest kernel
libtpurt does refuse, in the same place: a scalar computed on the line
before the store (the scalar core has no power, which JAX lowers as
multiplications), and an array, not one element, read from the VMEM ref
and stored into the SMEM element (libtpurt's store check, which
error_handling makes VerificationError). Their messages are libtpurt's,
not Mosaic's: those tests assert the type, libtpurt's message, the
kernel's line in the message and JAX's traceback check (the formatted
traceback ends with the offending line). Nothing here is MLIR text."""
import functools
import traceback

import numpy as np
import pytest

import tpuemu as jax
import tpuemu.numpy as jnp
from tpuemu._src.pallas.mosaic import error_handling
from tpuemu import pallas as pl
from tpuemu.pallas import tpu as pltpu

LOCATION_TEST_STRING = (
    r'loc("/squeeze"'
    r'(callsite("foo_fn"("third_party/foo.py":104:22) at '
    r'callsite("bar_fn"("third_party/bar.py":115:6) at '
    r'"<module>"("third_party/pallas_error_handling_test.py":181:2'
    r")))))"
)


def _input():
    return jax.random.uniform(jax.random.key(0), (2, 2), dtype=jnp.float32)


def _vmem_in_smem_out():
    out_shape = jax.ShapeDtypeStruct((1, 1), jnp.float32)
    grid_spec = pltpu.PrefetchScalarGridSpec(
        num_scalar_prefetch=0,
        in_specs=[
            pl.BlockSpec(memory_space=pltpu.TPUMemorySpace.VMEM),
        ],
        out_specs=pl.BlockSpec(memory_space=pltpu.TPUMemorySpace.SMEM),
    )
    return functools.partial(pl.pallas_call, out_shape=out_shape, grid_spec=grid_spec)


def _tb_string(f, *args, error=error_handling.MosaicError):
    tb_string = ""
    try:
        f(*args)
    except error as e:
        tb_string = traceback.format_tb(e.__traceback__)
        tb_string = "".join(tb_string)
    return tb_string


def test_vector_extract_nonzero_runs():
    """PallasErrorHandlingTest.test_vector_extract_nonzero's kernel, which
    Mosaic refuses: libtpurt takes a scalar from any element of a vector."""
    input_arr = _input()

    @_vmem_in_smem_out()
    def test_kernel(input_ref, output_ref):
        val = input_ref[...]
        x = val[0, 0] + val[0, 1]
        output_ref[0, 0] = x

    a = np.asarray(input_arr)
    np.testing.assert_allclose(test_kernel(input_arr), [[a[0, 0] + a[0, 1]]], rtol=1e-6)


def test_vector_extract_nonzero():
    """PallasErrorHandlingTest.test_vector_extract_nonzero with a scalar
    libtpurt cannot compute (the scalar core has no power) on the line that
    computes x, as JAX's kernel computes its refused scalar there."""
    input_arr = _input()

    @_vmem_in_smem_out()
    def test_kernel(input_ref, output_ref):
        val = input_ref[...]
        x = val * (pl.program_id(0) ** 2)
        output_ref[0, 0] = x[0, 0]

    # Test that a Mosaic error is raised (libtpurt's message, not Mosaic's).
    with pytest.raises(error_handling.MosaicError,
                       match="the scalar core has no 'power'") as e:
        test_kernel(input_arr)
    # the message names the line that made it and the statement's line
    assert "x = val * (pl.program_id(0) ** 2)\n" in str(e.value)
    assert "traced from %s:" % __file__ in str(e.value)
    assert "output_ref[0, 0] = x[0, 0]" in str(e.value)

    # Test that the python source is the final frame in the traceback.
    tb_string = _tb_string(test_kernel, input_arr)
    assert tb_string.endswith("x = val * (pl.program_id(0) ** 2)\n")

    @jax.jit
    def kernel_in_jitted_fn(x):
        return test_kernel(x)

    # inside_jitted_fn
    tb_string = _tb_string(kernel_in_jitted_fn, input_arr)
    assert tb_string.endswith("x = val * (pl.program_id(0) ** 2)\n")


def test_invalid_smem_vmem_verification_error_runs():
    """PallasErrorHandlingTest.test_invalid_smem_vmem_verification_error's
    kernel, which MLIR's verifier refuses after Pallas's lowering: libtpurt
    stores the VMEM element into the SMEM one."""
    input_arr = _input()

    @_vmem_in_smem_out()
    def test_kernel(input_ref, output_ref):
        output_ref[0, 0] = input_ref[0, 0]

    np.testing.assert_array_equal(test_kernel(input_arr), np.asarray(input_arr)[:1, :1])


def test_invalid_smem_vmem_verification_error():
    """PallasErrorHandlingTest.test_invalid_smem_vmem_verification_error
    with the whole VMEM block stored into the SMEM element, which libtpurt's
    store check refuses as MLIR's verifier refuses JAX's memref.store."""
    input_arr = _input()

    @_vmem_in_smem_out()
    def test_kernel(input_ref, output_ref):
        output_ref[0, 0] = input_ref[...]

    # Test that a verification error is raised (libtpurt's message).
    with pytest.raises(error_handling.VerificationError,
                       match=r"an SMEM element takes one value, not a \(2, 2\) array") as e:
        test_kernel(input_arr)
    assert "output_ref[0, 0] = input_ref[...]" in str(e.value)

    # Test that the python source is the final frame in the traceback.
    tb_string = _tb_string(test_kernel, input_arr)
    assert tb_string.endswith("output_ref[0, 0] = input_ref[...]\n")


def test_parse_location_string():
    """PallasErrorHandlingTest.test_parse_location_string, as JAX's."""
    name, frames = error_handling.parse_location_string(LOCATION_TEST_STRING)
    assert name == "/squeeze"
    assert len(frames) == 3
    assert frames[0].func_name == "foo_fn"
    assert frames[0].filename == "third_party/foo.py"
    assert frames[0].lineno == 104
    assert frames[0].colno == 22


# --- beyond JAX's test: what tpuemu's own users rely on ---

def test_parse_location_string_frames_and_errors():
    """All three frames, innermost first; no location, or two, is a
    ValueError (as JAX's); the location may sit inside a longer message."""
    _, frames = error_handling.parse_location_string(
        "error: Not implemented\n" + LOCATION_TEST_STRING + "\n")
    assert [(f.func_name, f.filename, f.lineno, f.colno) for f in frames] == [
        ("foo_fn", "third_party/foo.py", 104, 22),
        ("bar_fn", "third_party/bar.py", 115, 6),
        ("<module>", "third_party/pallas_error_handling_test.py", 181, 2)]
    with pytest.raises(ValueError):
        error_handling.parse_location_string("no location here")
    with pytest.raises(ValueError):
        error_handling.parse_location_string(LOCATION_TEST_STRING + "\n" + LOCATION_TEST_STRING)


def test_traceback_from_raw_frames():
    """The parsed frames as a traceback whose last entry is the innermost."""
    _, frames = error_handling.parse_location_string(LOCATION_TEST_STRING)
    entries = traceback.extract_tb(error_handling.traceback_from_raw_frames(frames))
    assert [(e.name, e.filename, e.lineno) for e in entries] == [
        ("<module>", "third_party/pallas_error_handling_test.py", 181),
        ("bar_fn", "third_party/bar.py", 115),
        ("foo_fn", "third_party/foo.py", 104)]


def test_mosaic_error_is_a_trace_error():
    """except clauses written for tpuemu's TraceError still catch it."""
    assert issubclass(error_handling.VerificationError, error_handling.MosaicError)
    assert issubclass(error_handling.MosaicError, jax.TraceError)
    assert pl.TraceError is jax.TraceError

    @_vmem_in_smem_out()
    def test_kernel(input_ref, output_ref):
        output_ref[0, 0] = input_ref[...]

    with pytest.raises(pl.TraceError, match="statement 1"):
        test_kernel(_input())


def _scaled(v):
    return v * (pl.program_id(0) ** 2)  # the helper's line


def test_traceback_through_a_helper():
    """The kernel's frames down to the helper that made the refused part:
    the traceback's last two entries are the kernel's call and the
    helper's line."""
    @_vmem_in_smem_out()
    def test_kernel(input_ref, output_ref):
        x = _scaled(input_ref[...])
        output_ref[0, 0] = x[0, 0]

    with pytest.raises(error_handling.MosaicError) as e:
        test_kernel(_input())
    entries = traceback.extract_tb(e.value.__traceback__)
    assert (entries[-2].name, entries[-2].line) == ("test_kernel", "x = _scaled(input_ref[...])")
    assert (entries[-1].name, entries[-1].line) == (
        "_scaled", "return v * (pl.program_id(0) ** 2)  # the helper's line")
    assert entries[-1].filename == __file__


def test_not_a_mosaic_error():
    """What tracing refuses before libtpurt sees a statement keeps its own
    type (JAX raises those while tracing, not from Mosaic)."""
    def k(x_ref, o_ref):
        if pl.program_id(0) == 0:
            o_ref[...] = x_ref[...]

    x = np.zeros((8, 128), np.float32)
    with pytest.raises(jax.TraceError) as e:
        pl.pallas_call(k, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    assert not isinstance(e.value, error_handling.MosaicError)
